"""The resolved plan of one trial: what runs, under which limits, graded by which calls.

Each criterion is lowered (ce_lang.lower) to a `CriterionCall`: the name of its
definition (`type`), the bound arguments (its type-specific fields, defaults applied),
and the common scoring fields resolved (pass threshold defaults, gating, early-stop
arming). The criteria language checks these calls against the definitions' signatures
and adds types, effects and decidability in side tables keyed by the call's `id`,
without reshaping the plan.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import attrs

from ce_lang.plan_identity import legacy_plan_json_hash, plan_json_hash  # noqa: F401 - api
from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.blocks import (
    CheckerContext,
    PostRunCommand,
    PreRunCommand,
    Reference,
    RunLimits,
    SandboxConfig,
    Simulation,
)
from ce_lang.spans import Span

PLAN_VERSION = 1
# The grading semantics' version: bumped whenever ce's own code (not a definition) would
# score the same trace and workspace differently. Part of every plan's identity.
SEMANTICS_VERSION = 5  # 2: coder_eval's weighted early-stop rules and armed gate;
# 3: errors are values of the live semantics (a criterion that may still raise never
# decides pass), booleans and threshold 0 decided on the graded score;
# 4: as coder_eval reads: workspace files and run_command output with CRLF/CR line ends
# read as LF, a non-shell tool's parameters as json.dumps writes them (the agent's key
# order), shell wrappers unwrapped like coder_eval's, json_check's orderings on two
# strings, judge scores given as numeric strings, reference_comparison's similarities,
# a content read of a directory, or of a file over 256 MiB, an error;
# 5: a score meets its pass_threshold within 1e-9 (analysis.meets: float noise in a mean
# of parts failed a score that is exactly the threshold)


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


def plan_hash(plan: Plan, memo: dict | None = None) -> str:
    """sha256 of the plan's hashed form (ce_lang.plan_identity): equal plans hash equal
    on any machine, and a field added to the schema with default None renames no plan.
    `memo` (per compile) keeps the hashed form of each block (the agent, the sandbox ...)
    by the block object: a dataset's plans share them (`row_trials`)."""
    if memo is None:
        return plan_json_hash(plan_to_json(plan))
    from ce_lang.plan_identity import hash_of_form, hashed_field

    conv, form = _converter(), {}
    for name, tp in _plan_types().items():
        value = getattr(plan, name)
        if attrs.has(type(value)):
            key = ("plan field", name, id(value))
            hit = memo.get(key)
            if hit is None or hit[0] is not value:
                hit = memo[key] = (value, hashed_field(name, conv.unstructure(value, tp)))
            form.update(hit[1])
        else:
            form.update(hashed_field(name, conv.unstructure(value, tp)))
    return hash_of_form(form)


@functools.cache
def _plan_types() -> dict[str, Any]:
    import typing

    hints = typing.get_type_hints(Plan)
    return {f.name: hints[f.name] for f in attrs.fields(Plan)}


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
