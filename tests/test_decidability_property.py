"""Property: the static decidability facts and the live monitor are never contradicted.

Random well-typed criteria expressions (source text, through the real parser and checker)
over random event streams (tool calls, each with an optional result event arriving any time
later). On every prefix of the stream the live monitor gives a verdict (pass / fail / not
yet). Checked:

- soundness: a verdict given on a prefix is the concrete value of P (the boolean
  expression, or `score >= threshold` within the grader's tolerance, `meets`) on that
  prefix and on every longer prefix;
- the static analysis is not contradicted: a criterion the monitor ever decides pass is
  one the analysis said can decide pass (and likewise fail).

Completeness (that the monitor decides as soon as possible) is not promised, not checked.
"""

from __future__ import annotations

import os

import attrs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from ce_lang.diagnostics import Diagnostics
from ce_lang.lang.analysis import analyze, meets
from ce_lang.lang.checker import check_expression
from ce_lang.lang.definitions import check_definition
from ce_lang.lang.evaluate import Evaluator
from ce_lang.lang.live import live_score, live_verdict
from ce_lang.lang.parser import file_locator, parse_expression, parse_module
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
                          for i in seen], turns=len(seen))


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
def streams(draw, max_calls: int = 7) -> Stream:
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
    'c.command == "ls"', 'c.param("file_path") == "a.txt"', "c.index >= 2", "c.index < 2",
    'c.output == ""', "true", "false",
]
CMP = [">=", ">", "<=", "<", "==", "!="]
LIST = "trace.tool_calls"


@attrs.frozen
class Scope:
    """Names an expression may use besides `trace`: criterion parameters and lets."""

    nums: tuple[str, ...] = ()
    bools: tuple[str, ...] = ()
    strs: tuple[str, ...] = ()  # string parameters (compared with a call's tool)


EMPTY = Scope()


@st.composite
def preds(draw, depth: int, scope: Scope = EMPTY) -> str:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        if scope.strs and draw(st.integers(0, 3)) == 0:
            return f"c.tool == {draw(st.sampled_from(scope.strs))}"
        return draw(st.sampled_from(PRED_ATOMS))
    kind = draw(st.sampled_from(["not", "and", "or"]))
    if kind == "not":
        return f"not ({draw(preds(depth - 1, scope))})"
    return f"({draw(preds(depth - 1, scope))}) {kind} ({draw(preds(depth - 1, scope))})"


@st.composite
def nums(draw, depth: int, scope: Scope = EMPTY) -> str:
    """A numeric (int or float) expression."""
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["count", "count", "count", "len", "int", "float", "name",
                                     "filter", "map", "turns"]))
        if leaf == "count":
            return f"count({LIST}, c -> {draw(preds(2, scope))})"
        if leaf == "len":
            return f"len({LIST})"
        if leaf == "filter":
            return f"len(filter({LIST}, c -> {draw(preds(1, scope))}))"
        if leaf == "map":
            return f'count(map({LIST}, c -> c.tool), t -> t == "{draw(st.sampled_from(TOOLS))}")'
        if leaf == "turns":
            return "trace.turns"
        if leaf == "name" and scope.nums:
            return draw(st.sampled_from(scope.nums))
        if leaf in ("int", "name"):
            return str(draw(st.integers(0, 4)))
        return draw(st.sampled_from(["0.5", "1.0", "2.5", "0.0", "0.3", "0.7"]))
    d = depth - 1

    def num():
        return draw(nums(d, scope))

    kind = draw(st.sampled_from(["+", "-", "*", "/", "min", "max", "float", "neg", "if_const",
                                 "if", "clamp"]))
    if kind in ("+", "-"):
        return f"({num()} {kind} {num()})"
    if kind == "*":
        return f"({num()} * {draw(st.sampled_from(['2', '0', '-1', '0.5', '3']))})"
    if kind == "/":
        return f"({num()} / {draw(st.sampled_from(['2', '3', '10', '-2', '0.5']))})"
    if kind in ("min", "max"):
        return f"{kind}({num()}, {num()})"
    if kind == "float":
        return f"float({num()})"
    if kind == "neg":
        return f"-({num()})"
    if kind == "if_const":
        return f"(if {draw(st.sampled_from(['true', 'false']))} then {num()} else {num()})"
    if kind == "if":
        return f"(if {draw(bools(d, scope))} then {num()} else {num()})"
    return f"clamp({num()}, 0.0, 1.0)"


@st.composite
def bools(draw, depth: int, scope: Scope = EMPTY) -> str:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["count", "cmp", "cmp", "exists", "all", "const", "name"]))
        if leaf == "count":  # the common shape: a count against a small number
            return f"count({LIST}, c -> {draw(preds(1, scope))}) {draw(st.sampled_from(CMP))} " \
                   f"{draw(st.integers(0, 3))}"
        if leaf == "cmp":
            left = draw(nums(max(depth - 1, 0), scope))
            right = draw(st.one_of(st.integers(0, 4).map(str), nums(max(depth - 2, 0), scope)))
            return f"{left} {draw(st.sampled_from(CMP))} {right}"
        if leaf in ("exists", "all"):
            source = draw(st.sampled_from([LIST, LIST, f"filter({LIST}, c -> c.ok)",
                                           f'filter({LIST}, c -> c.tool == "Bash")']))
            return f"{leaf}({source}, c -> {draw(preds(2, scope))})"
        if leaf == "name" and scope.bools:
            return draw(st.sampled_from(scope.bools))
        return draw(st.sampled_from(["true", "false"]))
    d = depth - 1

    def boolean():
        return draw(bools(d, scope))

    kind = draw(st.sampled_from(["not", "and", "or", "if_const", "if", "eq"]))
    if kind == "not":
        return f"not ({boolean()})"
    if kind in ("and", "or"):
        return f"({boolean()}) {kind} ({boolean()})"
    if kind == "if_const":
        return f"(if {draw(st.sampled_from(['true', 'false']))} then {boolean()} " \
               f"else {boolean()})"
    if kind == "if":
        return f"(if {boolean()} then {boolean()} else {boolean()})"
    right = draw(st.one_of(st.sampled_from(["true", "false"]), bools(d, scope)))
    return f"({boolean()}) {draw(st.sampled_from(['==', '!=']))} ({right})"


THRESHOLDS = st.one_of(st.sampled_from([1.0, 0.5, 0.9, 1 / 3, 2 / 3, 0.3, 0.7, 0.1, 0.25]),
                       st.floats(0.0, 1.0, exclude_min=True),
                       # what a score like `count / 3` lands on exactly (rounding edges)
                       st.sampled_from(sorted({x / k for k in (3, 6, 7, 10)
                                               for x in range(1, k + 1)})))


@st.composite
def criteria(draw) -> tuple[str, float]:
    """(expression, threshold): a boolean expression, or a number scored against a threshold."""
    depth = draw(st.integers(1, 4))
    if draw(st.booleans()):
        return draw(bools(depth)), 1.0
    return draw(nums(depth)), draw(THRESHOLDS)


PARAMS = Scope(nums=("n", "k"), bools=("flag",), strs=("tool",))


@st.composite
def definitions(draw) -> tuple[str, dict, float]:
    """A criterion definition with parameters (bound to random values) and lets."""
    params = {"n": draw(st.integers(0, 4)), "k": draw(st.sampled_from([0.0, 0.5, 1.0, 2.5])),
              "flag": draw(st.booleans()), "tool": draw(st.sampled_from(TOOLS))}
    scope, lets = PARAMS, []
    for name in draw(st.sampled_from([(), ("a",), ("b",), ("a", "b"), ("b", "a")])):
        depth = draw(st.integers(1, 3))
        if name == "a":
            lets.append(f"  let a = {draw(nums(depth, scope))}")
            scope = attrs.evolve(scope, nums=(*scope.nums, "a"))
        else:
            lets.append(f"  let b = {draw(bools(depth, scope))}")
            scope = attrs.evolve(scope, bools=(*scope.bools, "b"))
    depth = draw(st.integers(1, 4))
    if draw(st.booleans()):
        score, kind, threshold = draw(bools(depth, scope)), "binary", 1.0
    else:
        score, kind, threshold = draw(nums(depth, scope)), "continuous", draw(THRESHOLDS)
    text = "\n".join([f"criterion prop(n: int, k: float, flag: bool, tool: str) -> {kind}",
                      *lets, f"  score = {score}", "end", ""])
    return text, params, threshold


# -- the oracle ------------------------------------------------------------------------------
class Host:
    def __init__(self, trace: TraceView):
        self.trace = trace

    def call(self, name, args):
        raise AssertionError(f"effectful builtin {name} in a trace-only expression")


@attrs.frozen
class Compiled:
    score: object  # the score's AST node
    lets: tuple = ()
    params: dict = attrs.field(factory=dict)
    result_bool: bool = True


def compile_expr(text: str) -> Compiled:
    diags = Diagnostics()
    node = parse_expression(text, file_locator("<property>", text), diags)
    assert node is not None and not diags, (text, [d.message for d in diags])
    t, _ = check_expression(node, stdlib_registry(), diags)
    assert not diags, ("generated expression does not type-check", text,
                       [d.message for d in diags])
    assert t == BOOL or is_numeric(t), (text, t)
    return Compiled(node, (), {}, t == BOOL)


def compile_definition(text: str, params: dict) -> Compiled:
    diags = Diagnostics()
    module = parse_module(text, "<property>.ce", diags)
    assert module is not None and not diags, (text, [d.message for d in diags])
    (defn,) = module.criteria
    checked = check_definition(defn, stdlib_registry(), diags)
    assert not diags, ("generated definition does not type-check", text,
                       [d.message for d in diags])
    return Compiled(defn.score, defn.lets, params, checked.score_type == BOOL)


def note(label: str) -> None:
    """Coverage statistics (pytest --hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(label)


@attrs.frozen
class Run:
    can_pass: bool
    can_fail: bool
    trace_free: bool  # the analysis found the value does not depend on the trace
    verdicts: tuple[bool | None, ...]  # live verdict after each prefix (0..len(events))
    values: tuple[bool, ...]  # concrete P after each prefix


def evaluate(c: Compiled, trace: TraceView):
    ev = Evaluator(Host(trace))
    env = dict(c.params)
    for let in c.lets:
        env[let.name] = ev.eval(let.expr, env)
    return ev.eval(c.score, env)


def run(c: Compiled, threshold: float, stream: Stream) -> Run:
    decision, analyzer = analyze(c.score, c.lets, c.params, threshold, c.result_bool)
    trace_free = "trace" not in decision.effects or analyzer.facts[c.score.id].const
    verdicts, values = [], []
    for k in range(len(stream.events) + 1):
        trace = stream.trace(k)
        bound = live_score(c.score, c.lets, c.params, analyzer, Host(trace))
        verdicts.append(live_verdict(bound, threshold, c.result_bool))
        value = evaluate(c, trace)
        # the grader's P: a number clamped to [0, 1], then `meets` (within its tolerance,
        # a threshold of 1e-38 is met by 0, as a threshold of 0 is)
        values.append(value if c.result_bool else
                      meets(min(1.0, max(0.0, float(value))), threshold))
        assert isinstance(values[-1], bool), value
    return Run(decision.can_pass, decision.can_fail, trace_free, tuple(verdicts),
               tuple(values))


def check(text: str, threshold: float, stream: Stream, params: dict | None = None) -> Run:
    """Run `text` (an expression, or a definition when params are given) and check it."""
    c = compile_expr(text) if params is None else compile_definition(text, params)
    r = run(c, threshold, stream)
    what = f"{text!r} (threshold {threshold}{f', params {params}' if params else ''})"
    for k, v in enumerate(r.verdicts):
        if v is None:
            continue
        for j in range(k, len(r.values)):
            assert r.values[j] == v, (
                f"unsound: {what} decided {v} after {k} events but is {r.values[j]} after "
                f"{j}; events {stream.events}, calls {stream.calls}")
    if r.trace_free:
        note("trace-independent")
        # Decided before the agent starts: the analysis reports neither (nothing to arm),
        # and its claim is that the value is the same on every trace.
        assert not (r.can_pass or r.can_fail)
        assert len(set(r.values)) == 1, f"{what} said trace-independent but varies: {r.values}"
        return r
    if True in r.verdicts:
        assert r.can_pass, f"{what} decided pass live, but the analysis says it cannot"
    if False in r.verdicts:
        assert r.can_fail, f"{what} decided fail live, but the analysis says it cannot"
    decided = sorted({"pass" if v else "fail" for v in r.verdicts if v is not None})
    note("decided " + "/".join(decided) if decided else "never decided")
    if r.verdicts[0] is None and decided:
        note("decided mid-stream")
    return r


EXAMPLES = int(os.environ.get("CE_PROPERTY_EXAMPLES", "300"))  # more locally to shake out bugs
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(crit=criteria(), stream=streams())
def test_expression_verdicts_sound_and_static_facts_hold(crit, stream):
    text, threshold = crit
    check(text, threshold, stream)


@SETTINGS
@given(definition=definitions(), stream=streams())
def test_definition_verdicts_sound_and_static_facts_hold(definition, stream):
    """Criterion definitions: parameters fold, lets are bound live (`abs_env`)."""
    text, params, threshold = definition
    check(text, threshold, stream, params)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.integers(1, 4).flatmap(bools))
def test_generated_boolean_expressions_type_check(text):
    compile_expr(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.integers(1, 4).flatmap(nums))
def test_generated_numeric_expressions_type_check(text):
    compile_expr(text)


# -- known cases ----------------------------------------------------------------------------
def bash(cmd: str = "ls", result: str | None = "ok") -> Call:
    return Call("Bash", {"command": cmd}, result)


def read(path: str = "a.txt", result: str | None = "ok") -> Call:
    return Call("Read", {"file_path": path}, result)


def in_order(*cs: Call) -> Stream:
    """Each call immediately followed by its result (if any)."""
    events = []
    for i, c in enumerate(cs):
        events.append(("call", i))
        if c.result is not None:
            events.append(("result", i))
    return Stream(tuple(cs), tuple(events))


BASH = 'count(trace.tool_calls, c -> c.tool == "Bash")'
READ = 'count(trace.tool_calls, c -> c.tool == "Read")'
OK = "exists(trace.tool_calls, c -> c.ok)"


def first(verdicts, value) -> int | None:
    return next((k for k, v in enumerate(verdicts) if v is value), None)


def test_count_at_least_decides_pass_at_third_bash_call():
    s = Stream((bash(), read(), bash(), read(), bash(), bash()),
               tuple(("call", i) for i in range(6)))
    r = check(f"{BASH} >= 3", 1.0, s)
    assert r.can_pass and not r.can_fail
    # events are calls only: prefix k holds calls 0..k-1; the 3rd Bash is call 4 (k = 5)
    assert r.verdicts == (None,) * 5 + (True,) * 2


def test_count_at_most_decides_fail_at_third_bash_call():
    s = Stream((bash(), read(), bash(), read(), bash(), bash()),
               tuple(("call", i) for i in range(6)))
    r = check(f"{BASH} <= 2", 1.0, s)
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
    assert r.verdicts == (None, None, None, None, False)


def test_continuous_score_decides_pass_at_threshold():
    s = in_order(bash("curl a"), bash("ls"), bash("bash -lc 'curl b'"), bash("curl c"))
    r = check('min(1.0, float(count(trace.tool_calls, c -> c.matches(re"curl"))) / 3)', 0.6, s)
    assert r.can_pass and not r.can_fail
    # 2 of 3 curl calls (0.67 >= 0.6) after the third call's event: k = 5
    assert first(r.verdicts, True) == 5 and None not in r.verdicts[5:]


@pytest.mark.parametrize("text, threshold, can_pass, can_fail", [
    (f"{BASH} == 0", 1.0, False, True),
    (f"{BASH} != 2", 1.0, True, False),
    (f"if {OK} then 1.0 else 0.0", 0.5, True, False),
    (f"if {OK} then 0.0 else 1.0", 0.5, False, True),
    (f"if {OK} then 1.0 else 0.7", 0.5, True, False),  # passes whatever happens
    (f"if {OK} then 1.0 else 0.7", 0.9, True, False),
    ("min(1.0, 8.0 / max(len(trace.tool_calls), 1))", 0.9, False, False),  # no bound live
    (f"clamp(float({BASH} - {READ}), 0.0, 1.0)", 1.0, False, False),
    (f"clamp(float({BASH} - {READ}), 0.0, 1.0)", 0.5, False, False),
    (f"max({BASH} - {READ}, len(trace.tool_calls)) >= 2", 1.0, True, False),
    (f"({OK}) and ({BASH} <= 1)", 1.0, False, True),
    (f"({OK}) or ({BASH} <= 1)", 1.0, True, False),
])
def test_static_decisions_are_not_vacuous(text, threshold, can_pass, can_fail):
    # the properties only bound the analysis from one side; these pin its precision
    c = compile_expr(text)
    d, _ = analyze(c.score, c.lets, c.params, threshold, c.result_bool)
    assert (d.can_pass, d.can_fail) == (can_pass, can_fail), d.why


def test_undecidable_expression_never_decides():
    s = in_order(bash(result="error"), bash(result="ok"), read(result=None))
    r = check('count(trace.tool_calls, c -> c.status == "error") >= 1', 1.0, s)
    assert set(r.verdicts) == {None}


# -- regressions: counterexamples the properties found ------------------------------------------
# Each decided live where the analysis said it could not: the static decision was
# contradicted, so `stop_when` / `stop_early` were rejected as "can never trigger".


@pytest.mark.parametrize("text, threshold, stream, decided", [
    # REGRESSION: a constant right operand of and/or carried no truth facts (ct/cf) and
    # erased the left side's: `X and true` could not decide pass, `X and false` not fail.
    (f"({BASH} >= 0) and (true)", 1.0, in_order(), True),
    (f"({BASH} != 0) and (0 > 0)", 1.0, in_order(), False),
    # REGRESSION: a conditional on the trace decided nothing statically; live takes the
    # branch once the test is decided.
    (f'(if len(trace.tool_calls) >= 0 then all(trace.tool_calls, c -> c.tool == "Bash") '
     f"else {BASH} >= 0)", 1.0, in_order(read(result=None)), False),
    # REGRESSION: booleans compared for equality: live decides once both sides are decided.
    (f"{OK} == exists(trace.tool_calls, c -> c.tool == \"Bash\")", 1.0, in_order(bash()), True),
    # REGRESSION: a number with no monotonicity but a bound live learns (max of a count).
    (f"max({BASH} - {READ}, len(trace.tool_calls)) >= 2", 1.0, in_order(read(), read()), True),
    (f"max(float({BASH} - {READ}), float(len(trace.tool_calls)) / 2)", 1.0,
     in_order(read(), read()), True),
    # REGRESSION: both branches of a conditional score pass: decided before any event.
    (f"if {OK} then 1.0 else 0.5", 0.5, in_order(), True),
    # REGRESSION: times zero is known to be 0 live.
    (f"float({BASH}) * 0", 0.5, in_order(), False),
    # REGRESSION: a conditional's value becomes exactly known once its test is decided.
    (f"(if {OK} then 1 else 2) == 1", 1.0, in_order(bash()), True),
    (f"float({BASH}) * (if {OK} then 2 else 3) >= 2", 1.0, in_order(bash()), True),
])
def test_regression_static_decision_not_contradicted(text, threshold, stream, decided):
    r = check(text, threshold, stream)
    assert decided in r.verdicts


def test_regression_live_division_rounds_as_the_evaluator():
    # REGRESSION (live.py): `x / 10` was bounded as `x * (1 / 10)`, which rounds up for
    # x = 3 (0.30000000000000004), so `> 0.3` was decided true while the value is 0.3.
    s = in_order(read(), read(), read())
    r = check(f"max({BASH} - {READ}, len(trace.tool_calls)) / 10 > 0.3", 1.0, s)
    assert r.values[-1] is False and True not in r.verdicts
