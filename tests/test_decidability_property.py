"""Property: the static decidability facts and the live monitor are never contradicted.

Random well-typed criteria expressions (source text, through the real parser and checker)
over random event streams (tool calls, each with an optional result event arriving any time
later). On every prefix of the stream the live monitor gives a verdict (pass / fail / not
yet). Checked:

- soundness: a verdict given on a prefix is the concrete value of P (the boolean
  expression, or `score >= threshold`) on that prefix and on every longer prefix;
- the static analysis is not contradicted: a criterion the monitor ever decides pass is
  one the analysis said can decide pass (and likewise fail).

Completeness (that the monitor decides as soon as possible) is not promised, not checked.
"""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ce_lang.diagnostics import Diagnostics
from ce_lang.lang.analysis import analyze
from ce_lang.lang.checker import check_expression
from ce_lang.lang.evaluate import Evaluator
from ce_lang.lang.live import live_score, live_verdict
from ce_lang.lang.parser import file_locator, parse_expression
from ce_lang.lang.stdlib import stdlib_registry
from ce_lang.lang.types import BOOL, is_numeric
from ce_lang.lang.values import ToolCallView, TraceView

# -- event streams ----------------------------------------------------------------------------
COMMANDS = ["curl x", "ls", "rm -rf /", "bash -lc 'curl y'", "cat skills/date-teller/SKILL.md"]
PATHS = ["skills/date-teller/SKILL.md", "a.txt", "src/main.py"]
SKILLS = ["date-teller", "plugin:date-teller", "other"]
TOOLS = ["Bash", "Read", "Write", "Skill", "Edit"]
RESULTS = ["ok", "error", "denied"]


@attrs.frozen
class Call:
    tool: str
    params: dict
    result: str | None  # None: the result never arrives


@attrs.frozen
class Stream:
    calls: tuple[Call, ...]
    events: tuple[tuple[str, int], ...]  # ("call", i) | ("result", i), in arrival order

    def trace(self, k: int) -> TraceView:
        """The trace after the first k events: calls seen, results arrived so far."""
        seen: list[int] = []
        status: dict[int, str] = {}
        for kind, i in self.events[:k]:
            if kind == "call":
                seen.append(i)
            else:
                status[i] = self.calls[i].result
        return TraceView([ToolCallView(i, self.calls[i].tool, self.calls[i].tool,
                                       dict(self.calls[i].params), status.get(i, "unresolved"))
                          for i in seen])


@st.composite
def calls(draw) -> Call:
    tool = draw(st.sampled_from(TOOLS))
    key = {"Bash": "command", "Skill": "skill"}.get(tool, "file_path")
    if draw(st.integers(0, 9)) == 0:  # occasionally a parameter of another tool
        key = draw(st.sampled_from(["command", "skill", "file_path"]))
    vocab = {"command": COMMANDS, "skill": SKILLS, "file_path": PATHS}[key]
    return Call(tool, {key: draw(st.sampled_from(vocab))},
                draw(st.one_of(st.none(), st.sampled_from(RESULTS))))


@st.composite
def streams(draw, max_calls: int = 6) -> Stream:
    cs = draw(st.lists(calls(), max_size=max_calls))
    n = len(cs)
    timed: list[tuple[float, int, str, int]] = []
    for i, c in enumerate(cs):
        timed.append((float(i), 0, "call", i))
        if c.result is not None:  # arrives after its call, maybe after later calls
            timed.append((i + draw(st.integers(0, n)) + 0.5, 1, "result", i))
    timed.sort()
    return Stream(tuple(cs), tuple((kind, i) for _, _, kind, i in timed))


# -- expressions ----------------------------------------------------------------------------
PRED_ATOMS = [
    *(f'c.tool == "{t}"' for t in TOOLS), 'c.tool != "Read"',
    "c.ok", "not c.ok",
    *(f'c.status == "{s}"' for s in ("ok", "error", "denied", "unresolved")),
    'c.status != "unresolved"',
    'c.matches(re"curl")', 'c.matches(re"^ls")', 'c.matches(re"rm -rf")',
    'c.mentions("skills/")', 'c.mentions("date-teller")', 'c.mentions("x")',
    "true", "false",
]
CMP = [">=", ">", "<=", "<", "==", "!="]
LIST = "trace.tool_calls"


@st.composite
def preds(draw, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(PRED_ATOMS))
    kind = draw(st.sampled_from(["not", "and", "or"]))
    if kind == "not":
        return f"not ({draw(preds(depth - 1))})"
    return f"({draw(preds(depth - 1))}) {kind} ({draw(preds(depth - 1))})"


@st.composite
def nums(draw, depth: int) -> str:
    """A numeric (int or float) expression."""
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["count", "count", "count", "len", "int", "float"]))
        if leaf == "count":
            return f"count({LIST}, c -> {draw(preds(2))})"
        if leaf == "len":
            return f"len({LIST})"
        if leaf == "int":
            return str(draw(st.integers(0, 4)))
        return draw(st.sampled_from(["0.5", "1.0", "2.5", "0.0"]))
    d = depth - 1
    kind = draw(st.sampled_from(["+", "-", "*", "/", "min", "max", "float", "neg", "if_const",
                                 "if", "clamp"]))
    if kind in ("+", "-"):
        return f"({draw(nums(d))} {kind} {draw(nums(d))})"
    if kind == "*":
        return f"({draw(nums(d))} * {draw(st.sampled_from(['2', '0', '-1', '0.5', '3']))})"
    if kind == "/":
        return f"({draw(nums(d))} / {draw(st.sampled_from(['2', '3', '10', '-2', '0.5']))})"
    if kind in ("min", "max"):
        return f"{kind}({draw(nums(d))}, {draw(nums(d))})"
    if kind == "float":
        return f"float({draw(nums(d))})"
    if kind == "neg":
        return f"-({draw(nums(d))})"
    if kind == "if_const":
        return f"(if {draw(st.sampled_from(['true', 'false']))} then {draw(nums(d))} " \
               f"else {draw(nums(d))})"
    if kind == "if":
        return f"(if {draw(bools(d))} then {draw(nums(d))} else {draw(nums(d))})"
    return f"clamp({draw(nums(d))}, 0.0, 1.0)"


@st.composite
def bools(draw, depth: int) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["cmp", "cmp", "exists", "all", "const"]))
        if leaf == "cmp":
            left = draw(nums(max(depth - 1, 0)))
            right = draw(st.one_of(st.integers(0, 4).map(str), nums(max(depth - 2, 0))))
            return f"{left} {draw(st.sampled_from(CMP))} {right}"
        if leaf in ("exists", "all"):
            return f"{leaf}({LIST}, c -> {draw(preds(2))})"
        return draw(st.sampled_from(["true", "false"]))
    d = depth - 1
    kind = draw(st.sampled_from(["not", "and", "or", "if_const", "if", "eq"]))
    if kind == "not":
        return f"not ({draw(bools(d))})"
    if kind in ("and", "or"):
        return f"({draw(bools(d))}) {kind} ({draw(bools(d))})"
    if kind == "if_const":
        return f"(if {draw(st.sampled_from(['true', 'false']))} then {draw(bools(d))} " \
               f"else {draw(bools(d))})"
    if kind == "if":
        return f"(if {draw(bools(d))} then {draw(bools(d))} else {draw(bools(d))})"
    right = draw(st.one_of(st.sampled_from(["true", "false"]), bools(d)))
    return f"({draw(bools(d))}) {draw(st.sampled_from(['==', '!=']))} ({right})"


THRESHOLDS = st.one_of(st.sampled_from([1.0, 0.5, 0.9, 1 / 3, 2 / 3, 0.3, 0.7, 0.1, 0.25]),
                       st.floats(0.0, 1.0, exclude_min=True))


@st.composite
def criteria(draw) -> tuple[str, float]:
    """(expression, threshold): a boolean expression, or a number scored against a threshold."""
    depth = draw(st.integers(1, 4))
    if draw(st.booleans()):
        return draw(bools(depth)), 1.0
    return draw(nums(depth)), draw(THRESHOLDS)


# -- the oracle ------------------------------------------------------------------------------
class Host:
    def __init__(self, trace: TraceView):
        self.trace = trace

    def call(self, name, args):
        raise AssertionError(f"effectful builtin {name} in a trace-only expression")


def compile_expr(text: str):
    diags = Diagnostics()
    node = parse_expression(text, file_locator("<property>", text), diags)
    assert node is not None and not diags, (text, [d.message for d in diags])
    t, _ = check_expression(node, stdlib_registry(), diags)
    assert not diags, ("generated expression does not type-check", text,
                       [d.message for d in diags])
    assert t == BOOL or is_numeric(t), (text, t)
    return node, t == BOOL


@attrs.frozen
class Run:
    can_pass: bool
    can_fail: bool
    trace_free: bool  # the analysis found the value does not depend on the trace
    verdicts: tuple[bool | None, ...]  # live verdict after each prefix (0..len(events))
    values: tuple[bool, ...]  # concrete P after each prefix


def run(text: str, threshold: float, stream: Stream) -> Run:
    node, result_bool = compile_expr(text)
    decision, analyzer = analyze(node, (), {}, threshold, result_bool)
    trace_free = "trace" not in decision.effects or analyzer.facts[node.id].const
    verdicts, values = [], []
    for k in range(len(stream.events) + 1):
        trace = stream.trace(k)
        verdicts.append(live_verdict(live_score(node, (), {}, analyzer, Host(trace)), threshold,
                                     result_bool))
        value = Evaluator(Host(trace)).eval(node, {})
        values.append(value if result_bool else value >= threshold)
        assert isinstance(values[-1], bool), (text, value)
    return Run(decision.can_pass, decision.can_fail, trace_free, tuple(verdicts),
               tuple(values))


def check(text: str, threshold: float, stream: Stream) -> Run:
    r = run(text, threshold, stream)
    for k, v in enumerate(r.verdicts):
        if v is None:
            continue
        for j in range(k, len(r.values)):
            assert r.values[j] == v, (
                f"unsound: {text!r} (threshold {threshold}) decided {v} after {k} events "
                f"but is {r.values[j]} after {j}; events {stream.events}, calls {stream.calls}")
    if r.trace_free:
        # Decided before the agent starts: the analysis reports neither (nothing to arm),
        # and its claim is that the value is the same on every trace.
        assert not (r.can_pass or r.can_fail)
        assert len(set(r.values)) == 1, f"{text!r} said trace-independent but varies: {r.values}"
        return r
    if True in r.verdicts:
        assert r.can_pass, f"{text!r} (threshold {threshold}) decided pass live, but the " \
                           "analysis says it cannot decide pass"
    if False in r.verdicts:
        assert r.can_fail, f"{text!r} (threshold {threshold}) decided fail live, but the " \
                           "analysis says it cannot decide fail"
    return r


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(crit=criteria(), stream=streams())
def test_live_verdicts_sound_and_static_facts_hold(crit, stream):
    text, threshold = crit
    check(text, threshold, stream)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.integers(1, 4).flatmap(bools).filter(lambda s: True))
def test_generated_boolean_expressions_type_check(text):
    compile_expr(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.integers(1, 4).flatmap(nums))
def test_generated_numeric_expressions_type_check(text):
    compile_expr(text)


# -- known cases ----------------------------------------------------------------------------
def bash(cmd: str = "ls", result: str | None = "ok") -> Call:
    return Call("Bash", {"command": cmd}, result)


def read(path: str = "a.txt", result: str | None = "ok") -> Call:
    return Call("Read", {"file_path": path}, result)


def stream_of(*events: tuple[str, int], calls: tuple[Call, ...]) -> Stream:
    return Stream(calls, events)


def in_order(*cs: Call) -> Stream:
    """Each call immediately followed by its result (if any)."""
    events = []
    for i, c in enumerate(cs):
        events.append(("call", i))
        if c.result is not None:
            events.append(("result", i))
    return Stream(tuple(cs), tuple(events))


BASH3 = 'count(trace.tool_calls, c -> c.tool == "Bash")'


def first(verdicts, value) -> int | None:
    return next((k for k, v in enumerate(verdicts) if v is value), None)


def test_count_at_least_decides_pass_at_third_bash_call():
    s = Stream((bash(), read(), bash(), read(), bash(), bash()),
               tuple(("call", i) for i in range(6)))
    r = check(f"{BASH3} >= 3", 1.0, s)
    assert r.can_pass and not r.can_fail
    # events are calls only: prefix k holds calls 0..k-1; the 3rd Bash is call 4 (k = 5)
    assert r.verdicts == (None,) * 5 + (True,) * 2


def test_count_at_most_decides_fail_at_third_bash_call():
    s = Stream((bash(), read(), bash(), read(), bash(), bash()),
               tuple(("call", i) for i in range(6)))
    r = check(f"{BASH3} <= 2", 1.0, s)
    assert r.can_fail and not r.can_pass
    assert r.verdicts == (None,) * 5 + (False,) * 2


def test_exists_ok_decides_pass_when_the_result_arrives_not_at_the_call():
    s = Stream((read(result="error"), bash(result="ok"), read(result=None)),
               (("call", 0), ("call", 1), ("call", 2), ("result", 0), ("result", 1)))
    r = check("exists(trace.tool_calls, c -> c.ok)", 1.0, s)
    assert r.can_pass and not r.can_fail
    assert r.verdicts == (None, None, None, None, None, True)


def test_all_not_ok_decides_fail_when_an_ok_result_arrives():
    s = in_order(bash(result="error"), bash(result="ok"))
    r = check("all(trace.tool_calls, c -> not c.ok)", 1.0, s)
    assert r.can_fail and not r.can_pass
    assert r.verdicts == (None, None, None, False)


def test_continuous_score_decides_pass_at_threshold():
    s = in_order(bash("curl a"), bash("ls"), bash("bash -lc 'curl b'"), bash("curl c"))
    r = check('min(1.0, float(count(trace.tool_calls, c -> c.matches(re"curl"))) / 3)', 0.6, s)
    assert r.can_pass and not r.can_fail
    # 2 of 3 curl calls (0.67 >= 0.6) after the third call's event: k = 5
    assert first(r.verdicts, True) == 5 and None not in r.verdicts[5:]


def test_undecidable_expression_never_decides():
    s = in_order(bash(result="error"), bash(result="ok"), read(result=None))
    r = check('count(trace.tool_calls, c -> c.status == "error") >= 1', 1.0, s)
    assert set(r.verdicts) == {None}
