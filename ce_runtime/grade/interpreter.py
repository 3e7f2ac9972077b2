"""Grading: a checked plan evaluated over a trace and a workspace, with evidence.

Each criterion's definition is evaluated with the runtime host; every node it evaluates
is recorded with its value (the evidence `ce explain` prints). A criterion whose
evaluation fails scores 0 with the error kept; an infrastructure failure (a judge that
cannot be reached, a lost sandbox) raises and makes the trial ERROR.
"""

from __future__ import annotations

import math
import time
from typing import Any

import attrs

from ce_lang.api import (
    CriterionCall,
    CriterionError,
    Evaluator,
    Instance,
    Plan,
    Program,
    Regex,
    Registry,
    ToolCallView,
    meets,
    program_for,
)
from ce_lang.api import ast as A
from ce_runtime.grade.host import Host, InfrastructureError

COMPREHENSIONS = ("count", "exists", "all", "filter", "map")


@attrs.frozen
class CriterionResult:
    id: str
    type: str
    description: str
    kind: str
    score: float
    pass_threshold: float
    passed: bool
    weight: float
    gating: bool  # counts for the verdict (weight > 0, enabled, not advisory)
    advisory: bool  # not gated because the trial stopped early and it was not armed
    error: str | None
    outputs: dict[str, Any]
    values: dict[int, Any]  # node id -> value (evidence)
    matched: dict[int, list[int]]  # comprehension node id -> matching element indexes
    duration_ms: float
    env: dict[str, Any] = attrs.field(factory=dict)  # parameters and lets, as evaluated
    disabled: bool = False  # a judge with `enabled: false`: not run, excluded from the score


@attrs.frozen
class GradeResult:
    criteria: list[CriterionResult]
    weighted_score: float
    success: bool
    stopped_early: bool


class EvidenceEvaluator(Evaluator):
    """Records the value of every node outside lambdas, and what each comprehension kept."""

    def __init__(self, host: Host, lambda_nodes: set[int] | frozenset[int], links=None):
        super().__init__(host, links=links)
        self.values: dict[int, Any] = {}
        self.matched: dict[int, list[int]] = {}
        self._inside = lambda_nodes

    def eval(self, node: A.Node, env: dict[str, Any]) -> Any:
        value = self._eval(node, env)
        if node.id not in self._inside:
            self.values[node.id] = value
        return value

    def call(self, node: A.Call, env: dict[str, Any]) -> Any:
        if node.func in COMPREHENSIONS and node.id not in self._inside and len(node.args) == 2 \
                and isinstance(node.args[1], A.Lambda):
            items = self.eval(node.args[0], env)
            lam = node.args[1]
            if node.func == "map":
                return [self.eval(lam.body, {**env, lam.param: item}) for item in items]
            hits = []
            for i, item in enumerate(items):
                ok = self.eval(lam.body, {**env, lam.param: item}) is True
                if ok:
                    hits.append(i)
                # like the plain evaluator: exists stops at the first hit, all at the
                # first miss (a later element's error must not change a decided result)
                if (node.func == "exists" and ok) or (node.func == "all" and not ok):
                    break
            kept = [items[i] for i in hits]
            self.matched[node.id] = [items[i].index if isinstance(items[i], ToolCallView)
                                     else i for i in hits]
            if node.func == "count":
                return len(kept)
            if node.func == "exists":
                return bool(kept)
            if node.func == "all":
                return len(kept) == len(items)
            return kept
        return super().call(node, env)


class Grader:
    """Grades trials of one plan; build once, grade many (rescoring, benchmarks).

    The criteria come from the plan's `Program` (checked, analyzed and linked once per
    plan per process): `program` when given, else built against `registry` when given,
    else the cached program of the plan (`program_for`)."""

    def __init__(self, plan: Plan, registry: Registry | None = None, *,
                 program: Program | None = None, evaluator: Any = None):
        self.plan = plan
        # (host, lambda nodes, links) -> an evaluator; rescoring passes compiled closures
        self._evaluator = evaluator or EvidenceEvaluator
        if program is None:
            program = Program.build(plan, registry) if registry is not None \
                else program_for(plan)
        self.program = program
        self.instances: list[Instance] = program.instances
        self._lambda_nodes = [c.lambda_nodes for c in program.criteria]
        self._links = [c.links for c in program.criteria]

    def grade(self, host: Host, stopped_early: bool = False,
              armed: tuple[str, ...] = ()) -> GradeResult:
        results = [self.grade_one(call, inst, host, nodes, stopped_early, armed, links)
                   for call, inst, nodes, links in zip(self.plan.criteria, self.instances,
                                                       self._lambda_nodes, self._links,
                                                       strict=True)]
        weighted_gate = self.plan.early_stop.gate_threshold \
            if self.plan.early_stop.rule == "weighted" else None
        return summarize(results, stopped_early, weighted_gate)

    def grade_one(self, call: CriterionCall, inst: Instance, host: Host, nodes: set[int],
                  stopped_early: bool, armed: tuple[str, ...], links=None) -> CriterionResult:
        advisory = stopped_early and call.id not in armed
        if is_disabled(call):  # never call the model: excluded from the score and the gate
            return disabled_result(call, inst, advisory)
        ev = self._evaluator(host, nodes, links)
        if hasattr(host, "current"):
            host.current = call.id  # what it runs and asks is filed under this criterion
        return evaluated_result(call, inst, advisory, ev)


def disabled_result(call: CriterionCall, inst: Instance, advisory: bool) -> CriterionResult:
    """A disabled criterion's result: not evaluated, out of the score and the gate."""
    return CriterionResult(
        id=call.id, type=call.type, description=call.description, kind=inst.result_kind,
        score=0.0, pass_threshold=call.pass_threshold, passed=False, weight=call.weight,
        gating=False, advisory=advisory, error=None, outputs={}, values={}, matched={},
        duration_ms=0.0, disabled=True)


def evaluated_result(call: CriterionCall, inst: Instance, advisory: bool,
                     ev: Any) -> CriterionResult:
    """The criterion evaluated by `ev` (anything with `eval(node, env)`, `values` and
    `matched`: the tree walker, or compiled closures): its lets, score and outputs; an
    error in the criterion is its result (score 0), an infrastructure error is raised."""
    started = time.monotonic()
    env: dict[str, Any] = dict(inst.params)
    error = None
    score = 0.0
    outputs: dict[str, Any] = {}
    try:
        for let in inst.lets:
            env[let.name] = ev.eval(let.expr, env)
        score = _as_score(ev.eval(inst.score, env))
        for out in inst.outputs:
            outputs[out.name] = ev.eval(out.expr, env)
    except InfrastructureError:
        raise
    except CriterionError as exc:
        error, score = str(exc), 0.0
    except Exception as exc:
        error, score = f"{type(exc).__name__}: {exc}", 0.0
    return CriterionResult(
        id=call.id, type=call.type, description=call.description, kind=inst.result_kind,
        score=score, pass_threshold=call.pass_threshold,
        passed=error is None and meets(score, call.pass_threshold), weight=call.weight,
        gating=call.gating and not advisory, advisory=advisory, error=error,
        outputs=outputs, values=ev.values, matched=ev.matched,
        duration_ms=(time.monotonic() - started) * 1000, env=env)


def criterion_records(plan: Plan, graded: GradeResult) -> list[dict[str, Any]]:
    """The criteria of a trial's task.json (JSON-able; labels kept, other outputs not;
    the commands each ran and its judges' verdicts are the trial's evidence.json)."""
    return [{
        "id": r.id, "type": r.type, "description": r.description, "kind": r.kind,
        "score": r.score, "pass_threshold": r.pass_threshold, "passed": r.passed,
        "weight": r.weight, "gating": r.gating, "advisory": r.advisory,
        "disabled": getattr(r, "disabled", False), "error": r.error,
        "outputs": {k: v for k, v in r.outputs.items()
                    if isinstance(v, str | int | float | bool) or v is None},
        "suite_thresholds": call.suite_thresholds,
    } for call, r in zip(plan.criteria, graded.criteria, strict=True)]


def _as_score(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise CriterionError(f"the score is {value}")
        return min(1.0, max(0.0, float(value)))
    raise CriterionError(f"the score is not a number: {value!r}")


def summarize(results: list[CriterionResult], stopped_early: bool,
              weighted_gate: float | None = None) -> GradeResult:
    """weighted = Σ score·weight / Σ weight over gating-weight criteria; success = every
    gating criterion passed (an early-stopped trial is gated on its armed criteria only).
    `weighted_gate` (coder_eval's `stop_early_gate_threshold`): an early-stopped trial
    passes when Σ weight·passed / Σ weight over its armed criteria reaches it (each one
    passed or not by its own pass_threshold; at 1.0 this is every one passed)."""
    weighted = [r for r in results if r.weight > 0 and not r.disabled]
    total = sum(r.weight for r in weighted)
    score = sum(r.score * r.weight for r in weighted) / total if total > 0 else 0.0
    gating = [r for r in results if r.gating]
    success = all(r.passed for r in gating)
    if stopped_early and weighted_gate is not None and gating:
        armed_weight = sum(r.weight for r in gating)
        rate = sum(r.weight for r in gating if r.passed) / armed_weight
        success = rate >= weighted_gate - 1e-12
    return GradeResult(results, score, success, stopped_early)


JUDGES = ("llm_judge", "agent_judge")


def is_disabled(call: CriterionCall) -> bool:
    """A judge with `enabled: false` (the plan made it non-gating): ce excludes it from the
    weighted score and the gate, and never calls its model (coder_eval scores it 1.0)."""
    return (call.weight > 0 and not call.gating) or (
        call.args.get("enabled") is False and (call.definition or call.type) in JUDGES)


def cli_call_text(call: dict[str, Any]) -> str:
    """A recorded CLI invocation (`read_cli_log`) as the command line it was, with what
    the shim answered."""
    import shlex

    line = shlex.join([call.get("tool") or "?", *call["argv"]])
    line = line if len(line) <= 100 else line[:97] + "..."
    facts = [f"line {call['line']}"] if call.get("line") is not None else []
    if call.get("exit") is not None:
        facts.append(f"exit {call['exit']}")
    if call.get("rule") is not None:
        facts.append(f"rule {call['rule']}")
    if call.get("fault"):
        facts.append(f"rule fault: {call['fault']}")
    return f"`{line}` ({', '.join(facts)})" if facts else f"`{line}`"


def regex_text(pattern: str) -> str:
    """A regex as the criteria language writes it, `re"^v\\d+"` (docs/criteria-language.md):
    every place of `ce explain` spells a pattern so (a Python repr, `'^v\\\\d+'`, doubled
    its backslashes in one place and not in another); a `"` in it escaped, a line break
    as `\\n` (the literal is one line, and the regex reads `\\n` as a line break)."""
    return 're"' + pattern.replace('"', '\\"').replace("\n", "\\n") + '"'


def show_value(value: Any, limit: int = 80) -> str:
    """A short, readable rendering of a value for explanations."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Regex):
        return regex_text(value.pattern)
    if isinstance(value, ToolCallView):
        return f"call#{value.index} {value.tool}"
    if isinstance(value, dict) and isinstance(value.get("argv"), list):
        return cli_call_text(value)
    if isinstance(value, dict) and isinstance(value.get("calls"), list) and "error" in value:
        return (f"error: {value['error']}" if value["error"]
                else f"{{{len(value['calls'])} recorded call(s)}}")
    if isinstance(value, list):
        if value and isinstance(value[0], ToolCallView):
            return f"[{len(value)} tool calls]"
        if value and isinstance(value[0], dict) and isinstance(value[0].get("argv"), list):
            return f"[{len(value)} recorded call(s)]"
        inner = ", ".join(show_value(v, 20) for v in value[:5])
        return f"[{inner}{', ...' if len(value) > 5 else ''}]"
    text = repr(value) if isinstance(value, str) else str(value)
    if "TraceView" in text:
        return "<trace>"
    return text if len(text) <= limit else text[:limit - 3] + "..."
