"""A resolved task lowered to its plan (`lower`): each criterion to a call of its
definition, paths made relative to the task's directory, the files it reads digested.

The compiler's step, apart from ce_lang.plan: loading a plan (`ce run`'s compile-cache
hit) needs the plan's classes, not the criterion classes lowering reads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs

from ce_lang.convert import converter
from ce_lang.inputs import input_digests, named_digests
from ce_lang.plan import (
    PLAN_VERSION,
    SEMANTICS_VERSION,
    Arming,
    CriterionCall,
    EarlyStop,
    Plan,
    PlanStep,
    stdlib_digest,
)
from ce_lang.schema import criteria as C
from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.criteria import COMMON_FIELDS
from ce_lang.schema.task import (
    DEFAULT_IGNORE_PATTERNS,
    Reference,
    SandboxConfig,
    TaskSpec,
    TemplateDirSource,
)


def lower(task: TaskSpec, *, task_dir: str, prompt: str | None, row_id: str | None,
          suite_id: str | None, digest_cache: dict[str, str] | None = None,
          instances: list | None = None, criteria_sources: dict[str, str] | None = None,
          calls: list[CriterionCall] | None = None, memo: dict | None = None
          ) -> Plan:
    """`memo` (per compile) keeps what lowering made of a block by the block itself: a
    dataset's rows share the template's agent, sandbox ... (`row_trials`)."""
    memo = {} if memo is None else memo
    criteria = list(calls) if calls is not None else [
        lower_criterion(i, c) for i, c in enumerate(task.success_criteria)]
    for i, c in enumerate(task.success_criteria):  # the task-level default, made explicit
        if isinstance(c, C.CommandsEfficiency) and c.expected_commands is None:
            args = {**criteria[i].args, "expected_commands": task.expected_commands}
            criteria[i] = attrs.evolve(criteria[i], args=args)
    classification = [i for i, c in enumerate(task.success_criteria)
                      if c.RESULT == "classification"]
    if task.suite_thresholds and len(classification) == 1:
        # top-level thresholds gate the task's one classification criterion (suite_rules
        # rejects them with none or several, and beside the criterion's own)
        i = classification[0]
        criteria[i] = attrs.evolve(criteria[i], suite_thresholds=dict(task.suite_thresholds))
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
    ignore = list(_once(memo, effective_ignore_patterns, task.sandbox.ignore_patterns))
    return Plan(
        plan_version=PLAN_VERSION,
        task_id=task.task_id if row_id is None else f"{task.task_id}/{row_id}",
        suite_id=suite_id,
        row_id=row_id,
        description=task.description,
        tags=list(task.tags),
        prompt=prompt,
        agent=_once(memo, _relative_agent, task.agent, task_dir),
        sandbox=_once(memo, _relative_sandbox, task.sandbox, task_dir),
        ignore_patterns=ignore,
        run_limits=task.run_limits,
        early_stop=EarlyStop(enabled and bool(armed), armed,
                             "weighted" if legacy else "polarity",
                             task.run_limits.stop_early_gate_threshold),
        criteria=criteria,
        reference=_once(memo, _relative_reference, task.reference, task_dir),
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


def _once(memo: dict, fn: Callable[..., Any], block: Any, *args: Any) -> Any:
    """fn(block, *args), once per block object (kept in the memo, so its id stays its)."""
    key = (fn.__name__, id(block), *args)
    hit = memo.get(key)
    if hit is None or hit[0] is not block:
        hit = memo[key] = (block, fn(block, *args))
    return hit[1]


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
        raw = converter.unstructure(c)
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
    docker = sb.docker
    if docker is not None and docker.dockerfile_path:
        docker = attrs.evolve(docker, dockerfile_path=_rel(docker.dockerfile_path, task_dir))
    return attrs.evolve(sb, template_sources=sources, docker=docker)


def _relative_agent(agent: AgentConfig, task_dir: str) -> AgentConfig:
    return attrs.evolve(agent, system_prompt_file=_rel(agent.system_prompt_file, task_dir),
                        model_script=_rel(agent.model_script, task_dir))


def _relative_reference(ref: Reference | None, task_dir: str) -> Reference | None:
    if ref is None:
        return None
    return attrs.evolve(ref, file=_rel(ref.file, task_dir), directory=_rel(ref.directory, task_dir))


def _inputs(task: TaskSpec, task_dir: str, ignore: list[str], criteria: list[CriterionCall],
            cache: dict[str, str]) -> dict[str, str]:
    """The task-side files the plan reads, by content: templates, the reference, the
    system prompt file, and what its criteria name as `$TASK_DIR/...` (hidden tests, a
    schema, a rubric): editing one is a new plan."""
    inputs = input_digests(task, task_dir, ignore, cache)
    named = named_digests([c.args for c in criteria], task_dir, ignore, cache)
    return {**named, **inputs} if named else inputs
