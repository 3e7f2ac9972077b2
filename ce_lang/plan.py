"""The resolved plan of one trial: what runs, under which limits, graded by which calls.

Each criterion is lowered to a `CriterionCall`: the name of its definition (`type`), the
bound arguments (its type-specific fields, defaults applied), and the common scoring
fields resolved (pass threshold defaults, gating, early-stop arming). The criteria
language checks these calls against the definitions' signatures and adds types, effects
and decidability in side tables keyed by the call's `id`, without reshaping the plan.
"""

from __future__ import annotations

import functools
import hashlib
import os
from typing import Any

import attrs

from ce_lang.inputs import input_digests, named_digests
from ce_lang.plan_identity import legacy_plan_json_hash, plan_json_hash  # noqa: F401 - api
from ce_lang.schema import criteria as C
from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.criteria import COMMON_FIELDS
from ce_lang.schema.task import (
    DEFAULT_IGNORE_PATTERNS,
    CheckerContext,
    PostRunCommand,
    PreRunCommand,
    Reference,
    RunLimits,
    SandboxConfig,
    Simulation,
    TaskSpec,
    TemplateDirSource,
)
from ce_lang.spans import Span

PLAN_VERSION = 1
# The grading semantics' version: bumped whenever ce's own code (not a definition) would
# score the same trace and workspace differently. Part of every plan's identity.
SEMANTICS_VERSION = 4  # 2: coder_eval's weighted early-stop rules and armed gate;
# 3: errors are values of the live semantics (a criterion that may still raise never
# decides pass), booleans and threshold 0 decided on the graded score;
# 4: as coder_eval reads: workspace files and run_command output with CRLF/CR line ends
# read as LF, a non-shell tool's parameters as json.dumps writes them (the agent's key
# order), shell wrappers unwrapped like coder_eval's, json_check's orderings on two
# strings, judge scores given as numeric strings, reference_comparison's similarities,
# a content read of a directory, or of a file over 256 MiB, an error


@attrs.frozen
class Arming:
    """Early-stop arming of one criterion (from `stop_when`, or coder_eval's `stop_early`)."""

    polarity: str  # pass | fail | decided
    source: str  # "stop_when" | "stop_early"
    decide_within: int | None = None


@attrs.frozen
class CriterionCall:
    id: str  # "c0", "c1", ... in declaration order: the key of every side table
    type: str  # the definition this entry calls
    description: str
    weight: float
    pass_threshold: float
    gating: bool  # weight > 0 and not a disabled judge
    result_kind: str  # binary | fraction | continuous | classification
    args: dict[str, Any]
    arming: Arming | None = None
    suite_thresholds: dict[str, float] | None = None
    # facts of the checked instance (the criteria language's analysis)
    definition: str = ""  # the definition called: a standard or user criterion, or "expr"
    effects: list[str] = attrs.field(factory=list)  # trace, workspace, exec, model
    can_decide_pass: bool = False
    can_decide_fail: bool = False
    decidability: str = ""  # why, in words
    offline: bool = True  # can be re-scored from an archived trace and workspace
    steps: list[str] = attrs.field(factory=list)  # effect steps it reads


@attrs.frozen
class PlanStep:
    """An effectful call the grader makes once: a workspace read (shared by every
    criterion that makes it, within one epoch), a command (an ordered barrier: reads after
    it see the files it may have changed), or a model call."""

    id: str
    func: str
    args: list[Any]
    effect: str
    epoch: int
    used_by: list[str]


@attrs.frozen
class EarlyStop:
    """`rule`: how the armed set stops a run. "polarity" (the guide's `stop_when`): an
    armed fail/decided criterion decided fail, or every armed criterion decided pass.
    "weighted" (coder_eval's `stop_early` blocks): the weighted ceiling / floor rules
    over the armed set against `gate_threshold`, with recall deferral and
    `decide_within` timeouts; an early-stopped run then gates on the armed set's
    weighted pass rate reaching `gate_threshold`."""

    enabled: bool
    armed: tuple[str, ...]  # criterion ids
    rule: str = "polarity"  # polarity | weighted
    gate_threshold: float = 1.0


@attrs.frozen
class Plan:
    plan_version: int
    task_id: str
    suite_id: str | None
    row_id: str | None
    description: str
    tags: list[str]
    prompt: str | None
    agent: AgentConfig
    sandbox: SandboxConfig
    ignore_patterns: list[str]  # effective: defaults, `!` removals, additions
    run_limits: RunLimits
    early_stop: EarlyStop
    criteria: list[CriterionCall]
    reference: Reference | None
    pre_run: list[PreRunCommand]
    post_run: list[PostRunCommand]
    simulation: Simulation | None
    checker_context: CheckerContext | None
    expected_commands: int | None
    skip: bool | str
    inputs: dict[str, str]  # task-side files the plan reads -> content digest
    steps: list[PlanStep] = attrs.field(factory=list)
    # the user's .ce files its criteria come from (name -> text): a plan grades on its own
    criteria_sources: dict[str, str] = attrs.field(factory=dict)
    # the standard criteria it was compiled against (sha256 of their text) and the
    # grading semantics: an edited definition or a new semantics is a new plan
    stdlib_digest: str = ""
    semantics_version: int = 0


def _inputs(task: TaskSpec, task_dir: str, ignore: list[str], criteria: list[CriterionCall],
            cache: dict[str, str]) -> dict[str, str]:
    """The task-side files the plan reads, by content: templates, the reference, the
    system prompt file, and what its criteria name as `$TASK_DIR/...` (hidden tests, a
    schema, a rubric): editing one is a new plan."""
    inputs = input_digests(task, task_dir, ignore, cache)
    named = named_digests([c.args for c in criteria], task_dir, ignore, cache)
    return {**named, **inputs} if named else inputs


@attrs.frozen
class Trial:
    """One resolved trial: which plan it runs and where each setting came from."""

    trial_id: str  # variant/task[/row]/NN
    variant_id: str
    experiment_id: str | None
    repeat: int
    source: str  # the task file
    task_dir: str
    plan: Plan
    plan_hash: str
    lineage: dict[str, str]
    # where the PLACED settings some layer set were written (their values' spans): `ce
    # run`'s pre-flight points at them (ce_lang.budget)
    places: dict[str, Span] = attrs.field(factory=dict)


# the settings whose place a trial keeps (dotted, as in `lineage`)
PLACED = (("agent", "type"), ("agent", "model"), ("run_limits", "max_usd"))


def lower(task: TaskSpec, *, task_dir: str, prompt: str | None, row_id: str | None,
          suite_id: str | None, digest_cache: dict[str, str] | None = None,
          instances: list | None = None, criteria_sources: dict[str, str] | None = None,
          calls: list[CriterionCall] | None = None
          ) -> Plan:
    criteria = list(calls) if calls is not None else [
        lower_criterion(i, c) for i, c in enumerate(task.success_criteria)]
    for i, c in enumerate(task.success_criteria):  # the task-level default, made explicit
        if isinstance(c, C.CommandsEfficiency) and c.expected_commands is None:
            args = {**criteria[i].args, "expected_commands": task.expected_commands}
            criteria[i] = attrs.evolve(criteria[i], args=args)
    steps: list[PlanStep] = []
    if instances is not None:
        from ce_lang.lang.instances import plan_steps

        read_only = {i: bool(getattr(c, "read_only", False))
                     for i, c in enumerate(task.success_criteria)}
        disabled = {i for i, c in enumerate(task.success_criteria)
                    if getattr(c, "enabled", True) is False}
        raw_steps = plan_steps([None if inst is not None and inst.index in disabled else inst
                                for inst in instances], read_only)
        steps = [PlanStep(s.id, s.func, list(s.args), s.effect, s.epoch, list(s.used_by))
                 for s in raw_steps]
        criteria = [_with_facts(c, inst, raw_steps) for c, inst in
                    zip(criteria, instances, strict=True)]
    legacy = any(c.stop_early is not None for c in task.success_criteria)
    master = task.run_limits.stop_early
    enabled = master is True or (master is None and legacy)
    armed = tuple(c.id for c in criteria if c.arming is not None) if enabled else ()
    ignore = effective_ignore_patterns(task.sandbox.ignore_patterns)
    return Plan(
        plan_version=PLAN_VERSION,
        task_id=task.task_id if row_id is None else f"{task.task_id}/{row_id}",
        suite_id=suite_id,
        row_id=row_id,
        description=task.description,
        tags=list(task.tags),
        prompt=prompt,
        agent=_relative_agent(task.agent, task_dir),
        sandbox=_relative_sandbox(task.sandbox, task_dir),
        ignore_patterns=ignore,
        run_limits=task.run_limits,
        early_stop=EarlyStop(enabled and bool(armed), armed,
                             "weighted" if legacy else "polarity",
                             task.run_limits.stop_early_gate_threshold),
        criteria=criteria,
        reference=_relative_reference(task.reference, task_dir),
        pre_run=list(task.pre_run),
        post_run=list(task.post_run),
        simulation=task.simulation,
        checker_context=task.checker_context,
        expected_commands=task.expected_commands,
        skip=task.skip,
        inputs=_inputs(task, task_dir, ignore, criteria,
                       {} if digest_cache is None else digest_cache),
        steps=steps,
        criteria_sources=criteria_sources or {},
        stdlib_digest=stdlib_digest(),
        semantics_version=SEMANTICS_VERSION,
    )


def _with_facts(call: CriterionCall, inst, steps) -> CriterionCall:
    if inst is None:
        return call
    d = inst.decision
    return attrs.evolve(
        call, definition=inst.definition, result_kind=inst.result_kind,
        effects=sorted(inst.effects), can_decide_pass=d.can_pass, can_decide_fail=d.can_fail,
        decidability=d.why, offline="model" not in inst.effects,
        steps=[s.id for s in steps if call.id in s.used_by])


def lower_criterion(i: int, c: C.CriterionBase) -> CriterionCall:
    if isinstance(c, C.UserCall):
        args = dict(c.args)
    else:
        raw = _converter().unstructure(c)
        args = {k: v for k, v in raw.items() if k not in COMMON_FIELDS}
    if isinstance(c, C.ReferenceComparison):
        threshold = c.similarity_threshold  # the domain field wins, as in coder_eval
    elif c.pass_threshold is not None:
        threshold = c.pass_threshold
    else:
        threshold = type(c).DEFAULT_PASS_THRESHOLD
    enabled = getattr(c, "enabled", True)
    arming = None
    if c.stop_when is not None:
        arming = Arming(c.stop_when, "stop_when")
    elif c.stop_early is not None:
        polarity = "decided" if c.stop_early.on_pass == "stop" else "fail"
        arming = Arming(polarity, "stop_early", c.stop_early.decide_within)
    return CriterionCall(
        id=f"c{i}", type=c.type, description=c.description or default_description(c),
        weight=c.weight,
        pass_threshold=threshold, gating=c.weight > 0 and enabled,
        result_kind=type(c).RESULT, args=args, arming=arming,
        suite_thresholds=c.suite_thresholds,
    )


_SUMMARY_FIELDS = ("path", "agent_file", "command", "skill_name", "command_pattern",
                   "tool_name", "agent_name", "prompt")


def default_description(c: C.CriterionBase) -> str:
    """`file_exists app.py`: what reports show for a criterion without a description."""
    for name in _SUMMARY_FIELDS:
        value = getattr(c, name, None)
        if isinstance(value, str) and value.strip():
            first = value.strip().splitlines()[0]
            return f"{c.type} {first[:60]}"
    return c.type


def effective_ignore_patterns(overrides: list[str]) -> list[str]:
    patterns = list(DEFAULT_IGNORE_PATTERNS)
    for raw in overrides:
        p = raw.strip()
        if p.startswith("!"):
            patterns = [x for x in patterns if x != p[1:].strip()]
        elif p and p not in patterns:
            patterns.append(p)
    return patterns


def _rel(path: str | None, task_dir: str) -> str | None:
    if path is None or not os.path.isabs(path):
        return path
    return os.path.relpath(path, task_dir)


def _relative_sandbox(sb: SandboxConfig, task_dir: str) -> SandboxConfig:
    sources = [
        attrs.evolve(s, path=_rel(s.path, task_dir)) if isinstance(s, TemplateDirSource) else s
        for s in sb.template_sources
    ]
    return attrs.evolve(sb, template_sources=sources)


def _relative_agent(agent: AgentConfig, task_dir: str) -> AgentConfig:
    return attrs.evolve(agent, system_prompt_file=_rel(agent.system_prompt_file, task_dir))


def _relative_reference(ref: Reference | None, task_dir: str) -> Reference | None:
    if ref is None:
        return None
    return attrs.evolve(ref, file=_rel(ref.file, task_dir), directory=_rel(ref.directory, task_dir))


def _converter():
    """cattrs' converter, imported when a plan is first (un)structured: `ce run` of cached
    plans need not load cattrs at all."""
    from ce_lang.convert import converter

    return converter


def plan_to_json(plan: Plan) -> dict[str, Any]:
    return _converter().unstructure(plan)


def block_to_json(block: Any) -> dict[str, Any]:
    """One block of a plan (its agent, run_limits or reference) as `plan_to_json`
    spells it. Those blocks hold plain values only (no tagged union), so attrs.asdict
    gives the same dict (tested on every bundled task) without loading cattrs: each
    trial hands its agent these three."""
    return attrs.asdict(block, recurse=True)


@functools.cache
def stdlib_digest() -> str:
    from ce_lang.lang.stdlib import stdlib_texts

    h = hashlib.sha256()
    for name, text in sorted(stdlib_texts().items()):
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def plan_hash(plan: Plan) -> str:
    """sha256 of the plan's hashed form (ce_lang.plan_identity): equal plans hash equal
    on any machine, and a field added to the schema with default None renames no plan."""
    return plan_json_hash(plan_to_json(plan))


_CONFIG_GROUPS = ("agent", "sandbox", "run_limits", "simulation", "checker_context")


def full_lineage(trial: Trial) -> dict[str, str]:
    """Every setting of the agent, sandbox, limits and simulation blocks with the layer it
    came from; those no layer set are "default" (the schema's value)."""
    out = dict(trial.lineage)
    plan = plan_to_json(trial.plan)

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict) and value and not path.endswith("sdk_options"):
            for k, v in value.items():
                walk(v, f"{path}.{k}")
        elif not any(path == k or path.startswith(k + ".") or path.startswith(k + "[")
                     or k.startswith(path + ".") for k in trial.lineage):
            out[path] = "default"

    for group in _CONFIG_GROUPS:
        if plan.get(group) is not None:
            walk(plan[group], group)
    return dict(sorted(out.items()))


def trial_to_json(trial: Trial) -> dict[str, Any]:
    return {
        "trial_id": trial.trial_id, "variant_id": trial.variant_id,
        "experiment_id": trial.experiment_id, "repeat": trial.repeat,
        "source": trial.source, "plan_hash": trial.plan_hash,
        "lineage": full_lineage(trial),
    }


def plan_from_json(data: dict[str, Any]) -> Plan:
    """A plan written by `plan_to_json` (e.g. `plans/<hash>.json`), structured back."""
    return _converter().structure(data, Plan)
