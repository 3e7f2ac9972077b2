"""Property: the live monitor decides exactly what the three-valued semantics decides, as
early as it decides it, never against the post-hoc grade, and stops by the armed set's rule.

Random task files (real YAML through `compile_paths`, `run_limits: {stop_early: true}`)
with 1-3 criteria: command_executed, skill_triggered, inline `type: expr`, and user
definitions from a `.ce` file (parameters, lets, lets and the trace read inside
predicates). Each criterion is first compiled unarmed; it is then armed with a polarity
its compiled facts allow (`stop_when: pass|fail|decided`, or left unarmed) and compiled
again. Random traces: tool calls whose results (ok / error / denied) arrive any time
later or never, turns, messages and usage in between. The events are fed one by one to
`LiveMonitor`. Checked:

(a) every live decision is the post-hoc verdict (`Grader` over the full trace): so is
    every verdict the non-incremental semantics reaches on any prefix;
(b) each armed criterion is decided at the FIRST event after which
    `live_verdict(live_score(...))` over the prefix's `TraceView` is definite, with that
    verdict, and never when it never is (up to the stop: nothing is decided after it);
(c) `stop_reason` is set at the first event where the armed set's rule holds: an armed
    `fail`/`decided` criterion decided fail, or every armed criterion is armed
    `pass`/`decided` and decided pass.

Thresholds 0 and predicates that raise are in the generators: errors are values of the
live semantics (an error fails; a value that may still become one never passes).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import attrs
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from ce_lang.compiler import compile_paths
from ce_lang.lang.analysis import analyze
from ce_lang.lang.instances import instances_from_plan
from ce_lang.lang.live import live_score, live_verdict
from ce_lang.lang.stdlib import registry_for_sources
from ce_runtime.grade.host import Host
from ce_runtime.grade.interpreter import Grader
from ce_runtime.grade.monitor import LiveMonitor
from ce_runtime.trace import events as T
from ce_runtime.trace.view import build_view

# -- traces ----------------------------------------------------------------------------------
COMMANDS = ["curl x", "ls", "rm -rf /", "bash -lc 'curl y'", "python --version",
            "cat skills/date-teller/SKILL.md"]
PATHS = ["skills/date-teller/SKILL.md", "a.txt", "src/main.py"]
SKILLS = ["date-teller", "plugin:date-teller", "other"]
TOOLS = ["Bash", "Read", "Write", "Skill", "Edit"]
STATUSES = ["ok", "error", "denied"]
OUTPUTS = ["", "done", "Permission denied"]


@attrs.frozen
class Call:
    tool: str
    params: dict
    result: str | None  # None: the result never arrives
    output: str = ""


@st.composite
def tool_calls(draw) -> Call:
    tool = draw(st.sampled_from(TOOLS))
    key = {"Bash": "command", "Skill": "skill"}.get(tool, "file_path")
    if draw(st.integers(0, 9)) == 0:  # occasionally a parameter of another tool
        key = draw(st.sampled_from(["command", "skill", "file_path"]))
    vocab = {"command": COMMANDS, "skill": SKILLS, "file_path": PATHS}[key]
    return Call(tool, {key: draw(st.sampled_from(vocab))},
                draw(st.one_of(st.none(), st.sampled_from(STATUSES))),
                draw(st.sampled_from(OUTPUTS)))


@st.composite
def traces(draw, max_calls: int = 7) -> list[T.Event]:
    """Realistic event order: each call's result after it (maybe after later calls, maybe
    never); turns, messages and usage anywhere; sometimes a run header first and a stray
    second result for a call (the view ignores it)."""
    calls = draw(st.lists(tool_calls(), max_size=max_calls))
    n = len(calls)
    timed: list[tuple[float, int, T.Event]] = []
    for i, c in enumerate(calls):
        cid = f"toolu_{i}"
        timed.append((float(i), 0, T.ToolCall(0.0, cid, c.tool, c.tool.lower(),
                                             dict(c.params))))
        if c.result is not None:
            at = i + draw(st.integers(0, n)) + 0.5
            timed.append((at, 1, T.ToolResult(0.0, cid, c.result, c.output)))
            if draw(st.integers(0, 9)) == 0:
                timed.append((at + 0.1, 1, T.ToolResult(0.0, cid,
                                                        draw(st.sampled_from(STATUSES)))))
    turn = 0
    for kind in draw(st.lists(st.sampled_from(["turn", "turn", "message", "usage"]),
                              max_size=4)):
        at = draw(st.integers(0, 2 * n + 1)) / 2 - 0.25
        if kind == "turn":
            turn += 1
            ev: T.Event = T.TurnStart(0.0, turn)
        elif kind == "message":
            ev = T.Message(0.0, "assistant", "working on it")
        else:
            ev = T.Usage(0.0, 100, 20, cost_usd=0.001)
        timed.append((at, 2, ev))
    timed.sort(key=lambda x: (x[0], x[1]))
    events = [e for _, _, e in timed]
    if draw(st.booleans()):
        events.insert(0, T.RunHeader(0.0, T.SCHEMA_VERSION, "t/00", "prop", "h", "claude-code"))
    return [msgspec.structs.replace(e, t=float(i)) for i, e in enumerate(events)]


# -- expressions (the ideas of test_decidability_property, plus what stresses the monitor:
# predicates that read the trace, lets, parameters and an outer lambda's parameter) -------
LIST = "trace.tool_calls"
PRED_ATOMS = [
    *(f'c.tool == "{t}"' for t in TOOLS), 'c.tool != "Read"',
    "c.ok", "not c.ok",
    *(f'c.status == "{s}"' for s in ("ok", "error", "denied", "unresolved")),
    'c.status != "unresolved"',
    'c.matches(re"curl")', 'c.matches(re"^ls")', 'c.matches(re"rm -rf")',
    'c.mentions("skills/")', 'c.mentions("date-teller")',
    'c.command == "ls"', 'c.param("file_path") == "a.txt"', "c.index >= 2", "c.index < 2",
    'c.output == ""', "true", "false",
]
# Not a function of the call alone: the monitor must not keep them as per-call aggregates.
TRACE_PRED_ATOMS = [
    f"len({LIST}) >= 2", "trace.turns >= 1", f"c.index + 1 == len({LIST})",
    f"exists({LIST}, d -> d.ok)", f"count({LIST}, d -> d.tool == c.tool) >= 2",
]
# Raises for every call but a shell call (`(` is not a regex): errors inside aggregates.
ERROR_PRED_ATOMS = ['search("ls", or_else(c.command, "("), 0)']
CMP = [">=", ">", "<=", "<", "==", "!="]


@attrs.frozen
class Scope:
    """Names an expression may use besides `trace`: parameters and lets."""

    nums: tuple[str, ...] = ()
    bools: tuple[str, ...] = ()
    strs: tuple[str, ...] = ()


EMPTY = Scope()


@st.composite
def preds(draw, depth: int, scope: Scope = EMPTY) -> str:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        pick = draw(st.integers(0, 7))
        if pick == 0:
            return draw(st.sampled_from(TRACE_PRED_ATOMS))
        if pick == 4 and draw(st.booleans()):
            return draw(st.sampled_from(ERROR_PRED_ATOMS))
        if pick == 1 and scope.strs:
            return f"c.tool == {draw(st.sampled_from(scope.strs))}"
        if pick == 2 and scope.nums:
            return f"c.index {draw(st.sampled_from(CMP))} {draw(st.sampled_from(scope.nums))}"
        if pick == 3 and scope.bools:
            return f"{draw(st.sampled_from(scope.bools))} {draw(st.sampled_from(['and', 'or']))}" \
                   f" c.ok"
        return draw(st.sampled_from(PRED_ATOMS))
    kind = draw(st.sampled_from(["not", "and", "or"]))
    if kind == "not":
        return f"not ({draw(preds(depth - 1, scope))})"
    return f"({draw(preds(depth - 1, scope))}) {kind} ({draw(preds(depth - 1, scope))})"


@st.composite
def nums(draw, depth: int, scope: Scope = EMPTY) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["count", "count", "count", "len", "int", "float", "name",
                                     "filter", "turns"]))
        if leaf == "count":
            return f"count({LIST}, c -> {draw(preds(2, scope))})"
        if leaf == "len":
            return f"len({LIST})"
        if leaf == "filter":
            return f"len(filter({LIST}, c -> {draw(preds(1, scope))}))"
        if leaf == "turns":
            return "trace.turns"
        if leaf == "name" and scope.nums:
            return draw(st.sampled_from(scope.nums))
        if leaf in ("int", "name"):
            return str(draw(st.integers(0, 4)))
        return draw(st.sampled_from(["0.5", "1.0", "2.5", "0.0", "0.3"]))
    d = depth - 1

    def num() -> str:
        return draw(nums(d, scope))

    kind = draw(st.sampled_from(["+", "-", "*", "/", "min", "max", "float", "if", "clamp"]))
    if kind in ("+", "-"):
        return f"({num()} {kind} {num()})"
    if kind == "*":
        return f"({num()} * {draw(st.sampled_from(['2', '0', '-1', '0.5']))})"
    if kind == "/":
        return f"({num()} / {draw(st.sampled_from(['2', '3', '-2', '0.5']))})"
    if kind in ("min", "max"):
        return f"{kind}({num()}, {num()})"
    if kind == "float":
        return f"float({num()})"
    if kind == "if":
        return f"(if {draw(bools(d, scope))} then {num()} else {num()})"
    return f"clamp({num()}, 0.0, 1.0)"


@st.composite
def bools(draw, depth: int, scope: Scope = EMPTY) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["count", "count", "cmp", "exists", "all", "name"]))
        if leaf == "count":
            return f"count({LIST}, c -> {draw(preds(1, scope))}) {draw(st.sampled_from(CMP))} " \
                   f"{draw(st.integers(0, 3))}"
        if leaf == "cmp":
            return f"{draw(nums(max(depth - 1, 0), scope))} {draw(st.sampled_from(CMP))} " \
                   f"{draw(st.integers(0, 4))}"
        if leaf in ("exists", "all") or not scope.bools:
            source = draw(st.sampled_from([LIST, LIST, f"filter({LIST}, c -> c.ok)"]))
            return f"{'all' if leaf == 'all' else 'exists'}({source}, c -> " \
                   f"{draw(preds(2, scope))})"
        return draw(st.sampled_from(scope.bools))
    d = depth - 1
    kind = draw(st.sampled_from(["not", "and", "or", "if", "eq"]))
    if kind == "not":
        return f"not ({draw(bools(d, scope))})"
    if kind in ("and", "or"):
        return f"({draw(bools(d, scope))}) {kind} ({draw(bools(d, scope))})"
    if kind == "if":
        return f"(if {draw(bools(d, scope))} then {draw(bools(d, scope))} " \
               f"else {draw(bools(d, scope))})"
    return f"({draw(bools(d, scope))}) {draw(st.sampled_from(['==', '!=']))} " \
           f"({draw(bools(d, scope))})"


BOOL_THRESHOLDS = st.sampled_from([None, 1.0, 0.5, 0.0])
NUM_THRESHOLDS = st.one_of(st.none(), st.sampled_from([1.0, 0.5, 0.9, 1 / 3, 2 / 3, 0.25, 0.0]),
                           st.floats(0.0, 1.0))


# -- criteria: YAML entries, and the .ce definitions they call ------------------------------
@attrs.frozen
class Entry:
    fields: dict  # the YAML mapping, without stop_when
    definition: str | None = None  # .ce source of a user criterion


@st.composite
def command_executed(draw) -> Entry:
    f: dict = {"type": "command_executed"}
    if draw(st.booleans()):
        f["tool_name"] = draw(st.sampled_from(TOOLS))
    if draw(st.integers(0, 3)):
        f["command_pattern"] = draw(st.sampled_from(
            ["curl", "^ls", "rm -rf", "date-teller", "skills/", "a\\.txt", ".*",
             "python3? (--version|-V)"]))
    if draw(st.integers(0, 4)) == 0:
        f["exclude_pattern"] = draw(st.sampled_from(["curl y", "^ls", "SKILL"]))
    f["min_count"] = draw(st.integers(0, 3))
    if draw(st.booleans()):  # min_count > max_count is a compile error
        f["max_count"] = f["min_count"] + draw(st.integers(0, 2))
    if draw(st.booleans()):
        f["require_success"] = draw(st.booleans())
    threshold = draw(NUM_THRESHOLDS)
    if threshold is not None:
        f["pass_threshold"] = threshold
    return Entry(f)


@st.composite
def skill_triggered(draw) -> Entry:
    name = draw(st.sampled_from(["date-teller", "other"]))
    f = {"type": "skill_triggered", "skill_name": name,
         "expected_skill": draw(st.sampled_from([name, name, "", "third"]))}
    threshold = draw(NUM_THRESHOLDS)
    if threshold is not None:
        f["pass_threshold"] = threshold
    return Entry(f)


@st.composite
def expr(draw) -> Entry:
    depth = draw(st.integers(1, 4))
    if draw(st.booleans()):
        f = {"type": "expr", "expr": draw(bools(depth))}
        threshold = draw(BOOL_THRESHOLDS)
    else:
        f = {"type": "expr", "expr": draw(nums(depth)), "kind": "continuous"}
        threshold = draw(NUM_THRESHOLDS)
    if threshold is not None:
        f["pass_threshold"] = threshold
    return Entry(f)


PARAMS = Scope(nums=("n",), bools=("flag",), strs=("tool",))


@st.composite
def user_criterion(draw, name: str) -> Entry:
    """A definition with parameters and lets; predicates may read both."""
    scope, lets = PARAMS, []
    for let in draw(st.sampled_from([(), ("a",), ("b",), ("a", "b"), ("b", "a")])):
        depth = draw(st.integers(1, 3))
        if let == "a":
            lets.append(f"  let a = {draw(nums(depth, scope))}")
            scope = attrs.evolve(scope, nums=(*scope.nums, "a"))
        else:
            lets.append(f"  let b = {draw(bools(depth, scope))}")
            scope = attrs.evolve(scope, bools=(*scope.bools, "b"))
    depth = draw(st.integers(1, 4))
    if draw(st.booleans()):
        score, kind, threshold = draw(bools(depth, scope)), "binary", draw(BOOL_THRESHOLDS)
    else:
        score, kind, threshold = draw(nums(depth, scope)), "continuous", draw(NUM_THRESHOLDS)
    text = "\n".join([f"criterion {name}(n: int, flag: bool, tool: str) -> {kind}", *lets,
                      f"  score = {score}", "end", ""])
    f = {"type": name, "n": draw(st.integers(0, 3)), "flag": draw(st.booleans()),
         "tool": draw(st.sampled_from(TOOLS))}
    if threshold is not None:
        f["pass_threshold"] = threshold
    return Entry(f, text)


@st.composite
def entries(draw) -> list[Entry]:
    out = []
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["command_executed", "skill_triggered", "expr", "expr",
                                     "user", "user"]))
        if kind == "command_executed":
            out.append(draw(command_executed()))
        elif kind == "skill_triggered":
            out.append(draw(skill_triggered()))
        elif kind == "expr":
            out.append(draw(expr()))
        else:
            out.append(draw(user_criterion(f"prop{i}")))
    return out


def task_yaml(items: list[Entry], arming: list[str | None]) -> str:
    lines = ["task_id: prop", "description: live monitor property", "initial_prompt: go",
             "agent: {type: claude-code}", "run_limits: {stop_early: true}"]
    if any(e.definition for e in items):
        lines.append("criteria_files: [p.ce]")
    lines.append("success_criteria:")
    for e, polarity in zip(items, arming, strict=True):
        fields = dict(e.fields)
        fields.setdefault("description", "d")
        if polarity is not None:
            fields["stop_when"] = polarity
        first = True
        for key, value in fields.items():
            lines.append(f"  {'- ' if first else '  '}{key}: {json.dumps(value)}")
            first = False
    return "\n".join(lines) + "\n"


def compile_task(directory: str, items: list[Entry], arming: list[str | None]):
    with open(os.path.join(directory, "t.yaml"), "w") as fh:
        fh.write(task_yaml(items, arming))
    defs = [e.definition for e in items if e.definition]
    if defs:
        with open(os.path.join(directory, "p.ce"), "w") as fh:
            fh.write("\n".join(defs))
    result = compile_paths([os.path.join(directory, "t.yaml")])
    errors = [d for d in result.diagnostics if d.severity == "error"]
    return result, errors


# -- the oracle ------------------------------------------------------------------------------
class TraceHost:
    def __init__(self, view):
        self.trace = view

    def call(self, name, args):
        raise AssertionError(f"effectful builtin {name} in an armed criterion")


def note(label: str) -> None:
    if currently_in_test_context():
        event(label)


def first_definite(inst, threshold: float, events: list[T.Event]) -> tuple[list, int | None]:
    """The non-incremental verdict after each event (prefix events[:k+1]), and the first k
    where it is definite."""
    _, an = analyze(inst.score, inst.lets, inst.params, threshold, result_bool=inst.score_bool,
                    outputs=inst.outputs)
    verdicts = []
    for k in range(len(events)):
        bound = live_score(inst.score, inst.lets, inst.params, an,
                           TraceHost(build_view(events[:k + 1])), inst.outputs)
        verdicts.append(live_verdict(bound, threshold, inst.score_bool))
    first = next((k for k, v in enumerate(verdicts) if v is not None), None)
    return verdicts, first


def stop_rule(plan, decided: dict[str, str]) -> str | None:
    """The armed set's rule: any armed fail/decided criterion decided fail, or every armed
    criterion armed pass/decided and decided pass."""
    polarity = {c.id: c.arming.polarity for c in plan.criteria if c.id in plan.early_stop.armed}
    for cid in plan.early_stop.armed:
        if decided.get(cid) == "fail" and polarity[cid] in ("fail", "decided"):
            return f"{cid} decided fail"
    if all(decided.get(cid) == "pass" and polarity[cid] in ("pass", "decided")
           for cid in plan.early_stop.armed):
        return "every armed criterion decided pass"
    return None


def check_run(plan, events: list[T.Event], workspace: str) -> LiveMonitor:
    """Feed `events` to a monitor for `plan` and check (a), (b), (c), also for criteria
    whose post-hoc evaluation raised (a predicate error scores 0 and fails: errors are
    values of the live semantics)."""
    registry = registry_for_sources(plan.criteria_sources)
    instances = instances_from_plan(plan.criteria, registry)
    monitor = LiveMonitor(plan, instances)
    stops: list[tuple[int, str]] = []
    for k, e in enumerate(events):
        for d in monitor.on_event(e):
            assert d.event_index == k
        if monitor.stop_reason is not None and not stops:
            stops.append((k, monitor.stop_reason))

    # post-hoc: the Grader over the full trace (armed criteria read only the trace)
    graded = Grader(plan, registry).grade(Host(workspace=workspace,
                                               trace=build_view(events)))
    posthoc = {r.id: ("pass" if r.passed else "fail") for r in graded.criteria}
    errors = {r.id: r.error for r in graded.criteria if r.error}
    if errors:
        note("post-hoc error")

    # the non-incremental semantics on every prefix
    by_id = {c.id: (c, inst) for c, inst in zip(plan.criteria, instances, strict=True)}
    first: dict[str, tuple[int, str]] = {}
    for cid in plan.early_stop.armed:
        call, inst = by_id[cid]
        verdicts, k = first_definite(inst, call.pass_threshold, events)
        what = f"{cid} ({call.type} {call.args}, threshold {call.pass_threshold})"
        # (a) for the semantics itself: every definite verdict is the post-hoc one
        for j, v in enumerate(verdicts):
            if v is not None:
                assert ("pass" if v else "fail") == posthoc[cid], (
                    f"{what}: the live semantics decided {v} after event {j}, the post-hoc "
                    f"grade is {posthoc[cid]} (error {errors.get(cid)})")
        if k is not None:
            first[cid] = (k, "pass" if verdicts[k] else "fail")

    # (b) + (c): replay the rule over the oracle's first-definite indexes
    expected: list[tuple[str, str, int]] = []
    decided: dict[str, str] = {}
    expected_stop = None
    for k in range(len(events)):
        for cid in plan.early_stop.armed:
            if cid not in decided and cid in first and first[cid][0] == k:
                decided[cid] = first[cid][1]
                expected.append((cid, first[cid][1], k))
        reason = stop_rule(plan, decided)
        if reason is not None:
            expected_stop = (k, reason)
            break
    got = [(d.criterion, d.verdict, d.event_index) for d in monitor.decisions]
    # (a) for the monitor
    for cid, verdict, k in got:
        assert verdict == posthoc[cid], (
            f"{cid} decided {verdict} live at event {k}, post-hoc {posthoc[cid]} "
            f"(error {errors.get(cid)}); events {events}")
    assert got == expected, f"monitor decided {got}, the semantics {expected}; events {events}"
    assert (stops[0] if stops else None) == expected_stop
    assert monitor.stop_reason == (expected_stop[1] if expected_stop else None)

    note("stopped" if expected_stop else "ran to the end")
    note(f"decided {len(got)} of {len(plan.early_stop.armed)} armed")
    if any(k > 0 for _, _, k in got):
        note("decided mid-trace")
    return monitor


EXAMPLES = int(os.environ.get("CE_MONITOR_EXAMPLES", "120"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def polarities(call) -> list[str]:
    out = []
    if call.can_decide_pass:
        out.append("pass")
    if call.can_decide_fail:
        out.append("fail")
    if out:
        out.append("decided")
    return out


@SETTINGS
@given(items=entries(), events=traces(), data=st.data())
def test_live_decisions_first_and_sound(items, events, data):
    with tempfile.TemporaryDirectory() as tmp:
        result, errors = compile_task(tmp, items, [None] * len(items))
        if errors:  # e.g. a generated definition the checker rejects: not this property
            note(f"rejected by the compiler: {errors[0].code}")
            return
        plan = result.trials[0].plan
        arming: list[str | None] = []
        for call in plan.criteria:
            options = polarities(call)
            if not options:
                arming.append(None)
            elif not any(arming):  # arm the first decidable criterion, maybe the others
                arming.append(data.draw(st.sampled_from(options)))
            else:
                arming.append(data.draw(st.sampled_from([None, *options])))
        if not any(arming):
            note("nothing decidable to arm")
            return
        result, errors = compile_task(tmp, items, arming)
        assert not errors, ("the compiler rejects the arming its own facts allow",
                            [d.message for d in errors], task_yaml(items, arming))
        plan = result.trials[0].plan
        assert plan.early_stop.enabled
        assert list(plan.early_stop.armed) == [f"c{i}" for i, p in enumerate(arming) if p]
        check_run(plan, events, tmp)


# -- known cases ----------------------------------------------------------------------------
def bash(i: int, cmd: str = "ls") -> T.ToolCall:
    return T.ToolCall(float(i), f"b{i}", "Bash", "bash", {"command": cmd})


def read(i: int, path: str = "a.txt") -> T.ToolCall:
    return T.ToolCall(float(i), f"r{i}", "Read", "read", {"file_path": path})


def result(call: T.ToolCall, status: str = "ok") -> T.ToolResult:
    return T.ToolResult(call.t + 0.5, call.call_id, status)


def compile_text(tmp_path, yaml_text: str, ce_text: str | None = None):
    (tmp_path / "t.yaml").write_text(yaml_text)
    if ce_text is not None:
        (tmp_path / "p.ce").write_text(ce_text)
    r = compile_paths([str(tmp_path / "t.yaml")])
    if any(d.severity == "error" for d in r.diagnostics):  # not an AssertionError (xfail)
        raise RuntimeError([d.message for d in r.diagnostics])
    return r.trials[0].plan


def armed_task(criteria: str, files: bool = False) -> str:
    return ("task_id: t\ndescription: d\ninitial_prompt: p\nrun_limits: {stop_early: true}\n"
            + ("criteria_files: [p.ce]\n" if files else "") + "success_criteria:\n" + criteria)


def test_early_stop_example_task_stops_at_the_version_command(tmp_path):
    text = (Path(__file__).parent.parent / "tasks" / "early_stop.yaml").read_text()
    plan = compile_text(tmp_path, text)
    a = bash(1)
    b = bash(3, "bash -lc 'python --version'")
    events = [T.RunHeader(0, 1, "x", "x", "h", "a"), a, result(a), b, result(b)]
    m = check_run(plan, events, str(tmp_path))
    assert [(d.criterion, d.verdict, d.event_index) for d in m.decisions] == [("c0", "pass", 3)]
    assert m.stop_reason == "every armed criterion decided pass"


def test_fail_armed_pass_decision_does_not_stop(tmp_path):
    # a `stop_when: fail` criterion that decides pass does not stop the run, nor count
    # towards "every armed criterion decided pass"
    plan = compile_text(tmp_path, armed_task(
        '  - type: expr\n    description: d\n    expr: \'count(trace.tool_calls, c -> c.tool == "Read") <= 1\'\n'
        "    stop_when: fail\n"
        '  - type: expr\n    description: d\n    expr: \'exists(trace.tool_calls, c -> c.tool == "Bash")\'\n'
        "    stop_when: pass\n"))
    events = [bash(0), read(1), read(2)]
    m = check_run(plan, events, str(tmp_path))
    assert [(d.criterion, d.verdict, d.event_index) for d in m.decisions] == \
        [("c1", "pass", 0), ("c0", "fail", 2)]
    assert m.stop_reason == "c0 decided fail"


# -- regressions: counterexamples the property found -------------------------------------------
LET_IN_PREDICATE = """\
criterion no_bash_after_read(n: int, flag: bool, tool: str) -> binary
  let seen = exists(trace.tool_calls, c -> c.tool == "Read")
  score = all(trace.tool_calls, c -> not seen)
end
"""


@pytest.mark.parametrize("events, decided", [
    ([bash(0), result(bash(0))], []),
    ([bash(0), result(bash(0)), read(2)], [("c0", "fail", 2)]),
])
def test_regression_predicate_reading_a_let_is_not_a_per_call_aggregate(tmp_path, events,
                                                                         decided):
    # REGRESSION (monitor.py): a predicate reading a let that is not a constant was kept
    # as a per-call aggregate, evaluated without the let (an "unbound name" error taken as
    # false): `all` was false at the first call, so the monitor decided fail at event 0
    # and stopped the run; post-hoc, with no Read at all, the criterion passes.
    plan = compile_text(tmp_path, armed_task(
        "  - type: no_bash_after_read\n    description: d\n    n: 1\n    flag: true\n    tool: Bash\n"
        "    stop_when: fail\n", files=True), LET_IN_PREDICATE)
    m = check_run(plan, events, str(tmp_path))
    assert [(d.criterion, d.verdict, d.event_index) for d in m.decisions] == decided


@pytest.mark.parametrize("expr, events, decided", [
    # REGRESSION (monitor.py): a predicate reading the trace was evaluated once per call,
    # when the call arrived, and never again: `len(trace.tool_calls) >= 2` stayed false
    # for the first call, so `count(...) >= 2` decided one event late (or never).
    ("count(trace.tool_calls, c -> len(trace.tool_calls) >= 2) >= 2",
     [bash(0), bash(1)], ("pass", 1)),
    ("exists(trace.tool_calls, c -> c.index == 0 and trace.turns >= 1)",
     [bash(0), T.TurnStart(1.0, 1)], ("pass", 1)),
    # ... or an outer lambda's parameter (unbound when evaluated alone: taken as false)
    ('exists(trace.tool_calls, c -> c.tool == "Bash" and '
     'count(trace.tool_calls, d -> d.index > c.index) >= 1)', [bash(0), read(1)], ("pass", 1)),
])
def test_regression_predicate_reading_more_than_its_call(tmp_path, expr, events, decided):
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: {json.dumps(expr)}\n    stop_when: pass\n"))
    m = check_run(plan, events, str(tmp_path))
    assert [(d.verdict, d.event_index) for d in m.decisions] == [decided]


SEARCH = 'search("ls", or_else(c.command, "("), 0)'  # raises but for a shell call


@pytest.mark.parametrize("expr, arm, events", [
    # REGRESSION (monitor.py): a predicate that raises counted as false. `all` was then
    # false at the Read (whose predicate raises), `not all` decided pass, and the run
    # stopped; post-hoc the criterion errs (score 0, fail). The evaluator raises: the
    # error comes before any false call, so live it is undecided.
    (f"not all(trace.tool_calls, c -> {SEARCH})", "pass", [read(0), bash(1, "curl x")]),
    # ... and `exists` was decided at a matching call after one that raises (the
    # evaluator raises at the first call; the semantics decides nothing).
    (f"not exists(trace.tool_calls, c -> {SEARCH})", "fail", [read(0), bash(1)]),
])
def test_regression_predicate_error_is_an_error_not_false(tmp_path, expr, arm, events):
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: {json.dumps(expr)}\n    stop_when: {arm}\n"))
    m = check_run(plan, events, str(tmp_path))
    assert m.decisions == [] and m.stop_reason is None


def test_errors_before_the_deciding_call_only(tmp_path):
    # the evaluator's scan order: an error after the first match does not raise `exists`
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: 'exists(trace.tool_calls, c -> {SEARCH})'\n"
        "    stop_when: pass\n"))
    m = check_run(plan, [bash(0), read(1)], str(tmp_path))
    assert [(d.verdict, d.event_index) for d in m.decisions] == [("pass", 0)]


# -- former known gaps: counterexamples to (a) the property found once errors and
# threshold 0 were in the generators ------------------------------------------------------
def test_regression_boolean_score_threshold_zero(tmp_path):
    # REGRESSION (live.py): a boolean score was decided on its truth, but P is
    # score >= threshold: with pass_threshold 0 every run passes (false is 0.0 >= 0), so
    # `stop_when: fail` can never trigger (now a compile error) ...
    task = ("  - type: expr\n    description: d\n"
            "    expr: 'count(trace.tool_calls, c -> c.tool == \"Bash\") <= 1'\n"
            "    pass_threshold: 0\n    stop_when: %s\n")
    with pytest.raises(RuntimeError, match="`stop_when: fail` can never trigger"):
        compile_text(tmp_path, armed_task(task % "fail"))
    # ... and the criterion is decided pass at once, though the boolean ends false
    plan = compile_text(tmp_path, armed_task(task % "pass"))
    m = check_run(plan, [bash(0), bash(1)], str(tmp_path))
    assert [(d.verdict, d.event_index) for d in m.decisions] == [("pass", 0)]


def test_regression_numeric_score_threshold_zero(tmp_path):
    # REGRESSION (live.py, fixed in 277f566): `0 - len(...)` is -1 live but graded
    # clamped to 0 >= 0; it was decided fail. (The analysis still says it can decide
    # fail, so `stop_when: fail` compiles but never triggers.)
    plan = compile_text(tmp_path, armed_task(
        "  - type: expr\n    description: d\n    expr: '0 - len(trace.tool_calls)'\n    kind: continuous\n"
        "    pass_threshold: 0\n    stop_when: decided\n"))
    m = check_run(plan, [bash(0), bash(1)], str(tmp_path))
    assert [(d.verdict, d.event_index) for d in m.decisions] == [("pass", 0)]


def test_regression_count_decided_before_a_later_call_raises(tmp_path):
    # REGRESSION (live.py): `count` is `up`, so `count(...) >= 1` was decided pass at the
    # first match; a predicate error on a LATER call makes the final value an error
    # (score 0, fail). A count whose predicate may raise is never decided pass now.
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: 'count(trace.tool_calls, c -> {SEARCH}) >= 1'\n"
        "    stop_when: pass\n"))
    m = check_run(plan, [bash(0), read(1)], str(tmp_path))
    assert m.decisions == []


def test_a_total_predicate_still_decides_at_the_deciding_call(tmp_path):
    # the same count over a predicate that cannot raise (a valid constant pattern, a
    # null command read through or_else) decides pass at the first match, as before
    total = 'search(or_else(c.command, \"\"), \"ls\", 0)'
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: 'count(trace.tool_calls, c -> {total}) >= 1'\n"
        "    stop_when: pass\n"))
    m = check_run(plan, [bash(0), read(1)], str(tmp_path))
    assert [(d.verdict, d.event_index) for d in m.decisions] == [("pass", 0)]


# REGRESSION (fixed): the evidence evaluator evaluated every element of exists/all and
# raised on an error after the deciding element; it now stops where the evaluator does.
def test_grader_stops_exists_at_the_deciding_element(tmp_path):
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: 'exists(trace.tool_calls, c -> {SEARCH})'\n"
        "    stop_when: pass\n"))
    check_run(plan, [bash(0), read(1)], str(tmp_path))


def test_regression_exists_match_that_a_later_call_turns_into_an_error(tmp_path):
    # REGRESSION (live.py, found by the property on Python 3.13): `exists` true now was
    # taken as settled (the evaluator stops at the first match), but this predicate reads
    # the trace: the first Read matches through `len(...) >= 2` once two calls are in,
    # and a second Read makes its `count(...) >= 2` true, so the grader then evaluates
    # `search` with the invalid pattern "(" at the first Read and the criterion errs. A
    # match is settled only when the predicate's value at an element cannot change.
    expr = (f'exists(trace.tool_calls, c -> ((count(trace.tool_calls, d -> d.tool == c.tool)'
            f' >= 2) and ({SEARCH})) or (len(trace.tool_calls) >= 2))')
    plan = compile_text(tmp_path, armed_task(
        f"  - type: expr\n    description: d\n    expr: {json.dumps(expr)}\n    stop_when: pass\n"))
    second_read = T.ToolCall(2.0, "r2", "Read", "read", {"command": "curl x"})
    m = check_run(plan, [read(0, "skills/date-teller/SKILL.md"), bash(1, "curl x"),
                         second_read], str(tmp_path))
    assert m.decisions == [] and m.stop_reason is None
