"""The live monitor: armed criteria evaluated as the trace grows, deciding as early as
their three-valued semantics allows (see `ce_lang.lang.live`).

Comprehensions over the trace's tool calls (count, exists, all) are kept as incremental
aggregates: a new call evaluates the predicate for that call only, a result re-evaluates
it for its call only. Each event therefore costs O(1) per armed aggregate plus the size
of the criterion's expression, never a rescan of the trace.

Only predicates that are a function of their call are aggregated: the predicate may read
the call, parameters and constant lets, nothing else (not the trace, a let the trace
changes, nor an outer lambda's parameter), since it is not re-evaluated when other
events arrive. Other comprehensions are evaluated whole on each event (correct, O(n)).
A predicate that raises makes the aggregate raise exactly when the evaluator would
(`count` on any error; `exists` / `all` on an error before the first deciding call).
"""

from __future__ import annotations

from typing import Any

import attrs

from ce_lang.api import (
    CriterionError,
    Evaluator,
    Instance,
    LiveEvaluator,
    Plan,
    Program,
    RegexBudgetExceeded,
    ToolCallView,
    TraceView,
    analyze,
    criterion_bound,
    live_verdict,
    regex_budget,
)
from ce_lang.api import ast as A
from ce_runtime.trace import events as T
from ce_runtime.trace.view import ViewBuilder


@attrs.frozen
class LiveDecision:
    criterion: str
    verdict: str  # pass | fail
    event_index: int


class _Raises:
    """An aggregate whose evaluation raises (a predicate error the evaluator reaches)."""

    def __init__(self, message: str):
        self.message = message


class _Aggregate:
    """count / exists / all over trace.tool_calls, kept up to date call by call."""

    def __init__(self, node: A.Call):
        self.node = node
        self.lam: A.Lambda = node.args[1]  # type: ignore[assignment]
        self.truth: list[bool] = []
        self.true_count = 0
        self.errors: dict[int, str] = {}  # call index -> error message (rare)

    def update(self, call: ToolCallView, ev: Evaluator, env: dict[str, Any]) -> None:
        i = call.index
        try:
            value = ev.eval(self.lam.body, {**env, self.lam.param: call}) is True
            self.errors.pop(i, None)
        except RegexBudgetExceeded:
            raise  # the monitor gives the criterion up (see LiveMonitor.on_event)
        except CriterionError as exc:
            value = False
            self.errors[i] = str(exc)
        if i == len(self.truth):
            self.truth.append(value)
            self.true_count += value
        elif self.truth[i] != value:
            self.truth[i] = value
            self.true_count += 1 if value else -1

    def value(self) -> Any:
        if self.errors:  # raise where the evaluator's scan (in call order) would
            first = min(self.errors)
            func = self.node.func
            if func == "count" or (func == "exists" and True not in self.truth[:first]) \
                    or (func == "all" and False not in self.truth[:first]):
                return _Raises(self.errors[first])
        if self.node.func == "count":
            return self.true_count
        if self.node.func == "exists":
            return self.true_count > 0
        return self.true_count == len(self.truth)  # all


class _OverrideEvaluator(Evaluator):
    def __init__(self, host: Any, overrides: dict[int, Any], links: Any = None):
        super().__init__(host, links=links)
        self.overrides = overrides

    def eval(self, node: A.Node, env: dict[str, Any]) -> Any:
        if node.id in self.overrides:
            value = self.overrides[node.id]
            if isinstance(value, _Raises):
                raise CriterionError(value.message)
            return value
        return self._eval(node, env)


class _TraceHost:
    def __init__(self, view: TraceView):
        self.trace = view

    def call(self, name: str, args: list[Any]) -> Any:
        raise CriterionError(f"`{name}` is graded after the run")


@attrs.frozen
class StopInfo:
    """Why and where a run was stopped early (the trial's `early_stop`). `reason`:
    criterion_passed | criterion_failed | decision_budget_exceeded."""

    reason: str
    criterion: str  # the deciding criterion's id
    tool_call_index: int  # 1-based, the in-flight call included
    event_index: int
    armed: tuple[str, ...]
    gate_threshold: float


# The monitor runs on the event loop that enforces the trial's timeouts: a search gets
# this much there (the grader, in a worker thread, gets the full REGEX_BUDGET_S). A
# criterion whose search runs out is given up by the monitor (it stays undecided, so it
# never stops a run) and is graded after the run as usual: the loop is blocked at most
# this long per armed criterion, once.
MONITOR_REGEX_BUDGET_S = 0.25


@attrs.define
class _Armed:
    call_id: str
    polarity: str
    threshold: float
    inst: Instance
    result_bool: bool
    aggregates: list[_Aggregate]
    analyzer: Any
    const_env: dict[str, Any]
    links: Any = None  # the program's link table for the instance (None: by name)
    only_aggregates: bool = False  # the trace is read only through `aggregates`
    last_values: tuple | None = None  # aggregate values at the last (undecided) verdict
    decided: str | None = None  # the latched effective verdict: pass | fail
    weight: float = 1.0
    can_pass: bool = True
    can_fail: bool = True
    decide_within: int | None = None
    timed_out: bool = False  # its fail is a decide_within timeout, not its own verdict
    gave_up: str | None = None  # a search ran out of the monitor's budget: stays undecided
    decided_at: int = -1  # event index

    @property
    def on_pass_stop(self) -> bool:
        return self.polarity == "decided"


class LiveMonitor:
    """`program`: the plan's `Program` (its analyses and link tables are used as they
    are), or the plan's instances (each armed one is analyzed here)."""

    def __init__(self, plan: Plan, program: Program | list[Instance]):
        self.builder = ViewBuilder()
        self.host = _TraceHost(self.builder.view)
        self.armed: list[_Armed] = []
        self.decisions: list[LiveDecision] = []
        self.stop_reason: str | None = None
        self.stop_info: StopInfo | None = None
        self.rule = plan.early_stop.rule
        self.gate_threshold = plan.early_stop.gate_threshold
        self.call_ids: list[str] = []  # tool calls in order, for decide_within steps
        self.results: set[str] = set()  # calls whose result arrived
        if not plan.early_stop.enabled:
            return
        compiled = program.criteria if isinstance(program, Program) else None
        instances = program.instances if compiled is not None else program
        for i, (call, inst) in enumerate(zip(plan.criteria, instances, strict=True)):
            if call.id not in plan.early_stop.armed or call.arming is None:
                continue
            if compiled is not None:
                an, links = compiled[i].analysis, compiled[i].links
            else:
                _, an = analyze(inst.score, inst.lets, inst.params, call.pass_threshold,
                                result_bool=inst.score_bool, outputs=inst.outputs)
                links = None
            env = dict(inst.params)
            for let in inst.lets:  # lets folded to constants may appear in predicates
                fact = an.facts.get(let.expr.id)
                if fact is not None and fact.const:
                    env[let.name] = fact.value
            aggs = [_Aggregate(n) for n in _trace_aggregates(inst, an, set(env))]
            self.armed.append(_Armed(
                call.id, call.arming.polarity, call.pass_threshold, inst, inst.score_bool,
                aggs, an, env, links, _reads_trace_only_through(inst, aggs), weight=call.weight,
                can_pass=call.can_decide_pass, can_fail=call.can_decide_fail,
                decide_within=call.arming.decide_within))

    @property
    def active(self) -> bool:
        return bool(self.armed)

    @property
    def gave_up(self) -> dict[str, str]:
        """Armed criteria the monitor stopped following (why), graded after the run."""
        return {a.call_id: a.gave_up for a in self.armed if a.gave_up is not None}

    def on_event(self, event: T.Event) -> list[LiveDecision]:
        """Apply one event; return the decisions it caused (each criterion decides once)."""
        index = self.builder.events
        changed = self.builder.apply(event)
        if not self.armed or self.stop_reason is not None:
            return []
        if isinstance(event, T.ToolCall):
            self.call_ids.append(event.call_id)
        elif isinstance(event, T.ToolResult):
            self.results.add(event.call_id)
        new: list[LiveDecision] = []
        for a in self.armed:
            if a.decided is not None or a.gave_up is not None:
                continue
            try:
                with regex_budget(MONITOR_REGEX_BUDGET_S):
                    verdict = self._update(a, changed)
            except RegexBudgetExceeded as exc:
                a.gave_up = str(exc)  # undecided for good: the grader, with its own
                continue  # budget off the loop, gives the criterion its verdict
            if verdict is not None:
                a.decided, a.decided_at = ("pass" if verdict else "fail"), index
                d = LiveDecision(a.call_id, a.decided, index)
                new.append(d)
                self.decisions.append(d)
        if self.rule == "weighted":
            self._check_timeouts(index)
            self._check_weighted(index)
        else:
            self._check_stop(index)
        return new

    def _steps_done(self, n: int) -> bool:
        """N tool-call steps are over: the Nth call's result arrived, or a later call began."""
        return len(self.call_ids) > n or (len(self.call_ids) == n and n > 0 and
                                          self.call_ids[n - 1] in self.results)

    def _check_timeouts(self, index: int) -> None:
        """decide_within: still undecided after N steps is an effective fail (checked after
        the criterion's own verdict, so one deciding on that very step is not penalized);
        inert on a criterion that can never live-pass (a distractor)."""
        for a in self.armed:
            if a.decided is None and a.decide_within is not None and a.can_pass \
                    and self._steps_done(a.decide_within):
                a.decided, a.timed_out, a.decided_at = "fail", True, index

    def _check_weighted(self, index: int) -> None:
        """coder_eval's rules. Fail-stop: some armed criterion effectively failed and the
        armed set's ceiling (undecided and passed score 1, failed 0) is below the gate
        threshold; deferred while a pass-capable armed criterion is undecided (recall).
        Pass-stop: the floor of the pass-capable `on_pass: stop` subset (undecided score
        0) meets the threshold; deferred while a pass-capable armed criterion outside the
        subset is undecided."""
        armed, gate, eps = self.armed, self.gate_threshold, 1e-12
        total = sum(a.weight for a in armed)
        failed = [a for a in armed if a.decided == "fail"]
        waiting = [a for a in armed if a.decided is None and a.can_pass]
        if failed and total > 0 and not waiting:
            ceiling = sum(a.weight for a in armed if a.decided != "fail") / total
            if ceiling < gate - eps:
                last = max(failed, key=lambda a: a.decided_at)
                self._stop(last, "decision_budget_exceeded" if last.timed_out
                           else "criterion_failed", index)
                return
        subset = [a for a in armed if a.on_pass_stop and a.can_pass]
        weight = sum(a.weight for a in subset)
        if not subset or weight <= 0:
            return
        outside = [a for a in waiting if a not in subset]
        floor = sum(a.weight for a in subset if a.decided == "pass") / weight
        if floor >= gate - eps and not outside:
            last = max((a for a in subset if a.decided == "pass"), key=lambda a: a.decided_at)
            self._stop(last, "criterion_passed", index)

    def _stop(self, a: _Armed, reason: str, index: int) -> None:
        self.stop_reason = reason
        self.stop_info = StopInfo(reason, a.call_id, len(self.call_ids), index,
                                  tuple(x.call_id for x in self.armed), self.gate_threshold)

    def _update(self, a: _Armed, changed: ToolCallView | None) -> bool | None:
        if changed is not None:
            ev = Evaluator(self.host, links=a.links)
            for agg in a.aggregates:
                agg.update(changed, ev, a.const_env)
        if a.only_aggregates:  # nothing it reads moved: the verdict cannot have either
            values = tuple(_key(agg.value()) for agg in a.aggregates)
            if values == a.last_values:
                return None
            a.last_values = values
        return self._verdict(a)

    def _verdict(self, a: _Armed) -> bool | None:
        overrides = {agg.node.id: agg.value() for agg in a.aggregates}
        live = LiveEvaluator(a.analyzer, self.host, a.links)
        live.ev = _OverrideEvaluator(self.host, overrides, a.links)
        bound = criterion_bound(live, a.inst.score, a.inst.lets, a.inst.outputs,
                                dict(a.inst.params))
        return live_verdict(bound, a.threshold, a.result_bool)

    def _check_stop(self, index: int) -> None:
        for a in self.armed:
            if a.decided == "fail" and a.polarity in ("fail", "decided"):
                self._stop(a, "criterion_failed", index)
                self.stop_reason = f"{a.call_id} decided fail"
                return
        if all(a.decided == "pass" and a.polarity in ("pass", "decided") for a in self.armed):
            self._stop(max(self.armed, key=lambda a: a.decided_at), "criterion_passed", index)
            self.stop_reason = "every armed criterion decided pass"

    @property
    def should_stop(self) -> bool:
        return self.stop_reason is not None


def _key(value: Any) -> Any:
    return ("raises", str(value)) if type(value).__name__ == "_Raises" else value


def _reads_trace_only_through(inst: Instance, aggregates: list[_Aggregate]) -> bool:
    """True when every `trace` in the criterion sits inside one of its aggregates' lists:
    then its verdict can change only when an aggregate's value does."""
    inside: set[int] = set()
    for agg in aggregates:
        inside.update(n.id for n in A.walk(agg.node))
    roots = [inst.score, *(let.expr for let in inst.lets)]
    return all(n.id in inside for root in roots for n in A.walk(root)
               if isinstance(n, A.Name) and n.name == "trace")


def _trace_aggregates(inst: Instance, an, constants: set[str]) -> list[A.Call]:
    """count/exists/all calls over trace.tool_calls that the live score depends on, whose
    predicate reads only its call and `constants` (parameters, constant lets)."""
    found = []
    roots = [inst.score, *(let.expr for let in inst.lets)]
    for root in roots:
        for node in A.walk(root):
            if isinstance(node, A.Call) and node.func in ("count", "exists", "all") \
                    and node.id in an.facts and len(node.args) == 2 \
                    and isinstance(node.args[1], A.Lambda) and _is_tool_calls(node.args[0]) \
                    and _free_names(node.args[1]) <= constants:
                found.append(node)
    return found


def _free_names(node: A.Node) -> set[str]:
    """Names `node` reads that it does not bind (`trace` included)."""
    if isinstance(node, A.Name):
        return {node.name}
    if isinstance(node, A.Lambda):
        return _free_names(node.body) - {node.param}
    out: set[str] = set()
    for child in A.children(node):
        out |= _free_names(child)
    return out


def _is_tool_calls(node: A.Node) -> bool:
    return isinstance(node, A.Member) and node.name == "tool_calls" and \
        isinstance(node.obj, A.Name) and node.obj.name == "trace"
