"""Builtin functions: one declaration each (overloads, effect, monotonicity, docs).

Pure builtins are implemented here (the checker folds constants with them). Builtins with
an effect (`workspace`, `exec`, `model`) are implemented by the runtime's host; the
compiler only needs their declarations. `mono` names the rule the decidability analysis
applies to a call (see `ce_lang.lang.analysis`).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from ce_lang.lang.types import BOOL, FLOAT, INT, JSON, PATH, REGEX, STR, T, list_of, map_of

TV = T("'T")  # type variable
UV = T("'U")
OPT_STR = T("str", (), True)
OPT_FLOAT = T("float", (), True)


@attrs.frozen
class Fn:
    """A lambda argument's type: one parameter."""

    param: T
    ret: T


@attrs.frozen
class Overload:
    params: tuple[T | Fn, ...]
    ret: T


@attrs.frozen
class Builtin:
    name: str
    overloads: tuple[Overload, ...]
    effect: str  # pure | trace | workspace | exec | model
    mono: str  # pointwise | count | exists | all | filter | map | fixed
    doc: str
    impl: Callable[..., Any] | None = None  # pure builtins only


BUILTINS: dict[str, Builtin] = {}


def builtin(name: str, *overloads: Overload, effect: str = "pure", mono: str = "pointwise",
            doc: str = ""):
    def deco(fn: Callable[..., Any] | None):
        BUILTINS[name] = Builtin(name, overloads, effect, mono, doc, fn)
        return fn

    return deco


def declare(name: str, *overloads: Overload, effect: str, doc: str) -> None:
    BUILTINS[name] = Builtin(name, overloads, effect, "fixed", doc, None)


def sig(*params: T | Fn, ret: T) -> Overload:
    return Overload(tuple(params), ret)


class CriterionError(Exception):
    """A builtin failed for this criterion (invalid regex, ambiguous glob ...): score 0."""


# -- comprehensions -----------------------------------------------------------------------
@builtin("count", sig(list_of(TV), Fn(TV, BOOL), ret=INT), mono="count",
         doc="number of elements for which the predicate holds")
def _count(items, pred):
    return sum(1 for x in items if pred(x) is True)


@builtin("exists", sig(list_of(TV), Fn(TV, BOOL), ret=BOOL), mono="exists",
         doc="true if the predicate holds for some element")
def _exists(items, pred):
    return any(pred(x) is True for x in items)


@builtin("all", sig(list_of(TV), Fn(TV, BOOL), ret=BOOL), mono="all",
         doc="true if the predicate holds for every element (true for an empty list)")
def _all(items, pred):
    return all(pred(x) is True for x in items)


@builtin("filter", sig(list_of(TV), Fn(TV, BOOL), ret=list_of(TV)), mono="filter",
         doc="the elements for which the predicate holds")
def _filter(items, pred):
    return [x for x in items if pred(x) is True]


@builtin("map", sig(list_of(TV), Fn(TV, UV), ret=list_of(UV)), mono="map",
         doc="the mapper applied to every element")
def _map(items, fn):
    return [fn(x) for x in items]


# -- numbers ------------------------------------------------------------------------------
@builtin("len", sig(list_of(TV), ret=INT), sig(STR, ret=INT), sig(map_of(TV), ret=INT),
         mono="len", doc="length of a list, string or map")
def _len(x):
    return len(x)


@builtin("min", sig(INT, INT, ret=INT), sig(FLOAT, FLOAT, ret=FLOAT), mono="monotone",
         doc="the smaller of two numbers")
def _min(a, b):
    return min(a, b)


@builtin("max", sig(INT, INT, ret=INT), sig(FLOAT, FLOAT, ret=FLOAT), mono="monotone",
         doc="the larger of two numbers")
def _max(a, b):
    return max(a, b)


@builtin("clamp", sig(FLOAT, FLOAT, FLOAT, ret=FLOAT), mono="clamp",
         doc="clamp(x, lo, hi): x limited to [lo, hi]")
def _clamp(x, lo, hi):
    return min(max(x, lo), hi)


@builtin("abs", sig(INT, ret=INT), sig(FLOAT, ret=FLOAT), doc="absolute value")
def _abs(x):
    return abs(x)


@builtin("sum", sig(list_of(INT), ret=INT), sig(list_of(FLOAT), ret=FLOAT), doc="sum of a list")
def _sum(xs):
    return sum(xs)


@builtin("mean", sig(list_of(FLOAT), FLOAT, ret=FLOAT),
         doc="mean(xs, empty): the mean of xs, or `empty` when xs is empty")
def _mean(xs, empty):
    return sum(xs) / len(xs) if xs else empty


@builtin("mean_present", sig(list_of(OPT_FLOAT), FLOAT, ret=FLOAT),
         doc="mean of the non-null values, or the second argument when all are null: the "
             "score of criteria whose sub-checks are each optional (file_contains, ...)")
def _mean_present(xs, empty):
    present = [x for x in xs if x is not None]
    return sum(present) / len(present) if present else empty


@builtin("or_else", sig(OPT_STR, STR, ret=STR), sig(T("int", (), True), INT, ret=INT),
         sig(OPT_FLOAT, FLOAT, ret=FLOAT), sig(T("bool", (), True), BOOL, ret=BOOL),
         sig(JSON, JSON, ret=JSON),
         doc="or_else(x, fallback): x, or the fallback when x is null, e.g. "
             "`\"done\" in or_else(read_text(\"notes.md\"), \"\")`")
def _or_else(x, fallback):
    return fallback if x is None else x


@builtin("float", sig(INT, ret=FLOAT), sig(FLOAT, ret=FLOAT), doc="as a float")
def _float(x):
    return float(x)


@builtin("parse_float", sig(STR, ret=OPT_FLOAT),
         doc="the text as a finite number, or null when it is not one (`inf` and `nan` are not)")
def _parse_float(text):
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# -- strings ------------------------------------------------------------------------------
@builtin("lower", sig(STR, ret=STR), doc="lowercase")
def _lower(s):
    return s.lower()


@builtin("strip", sig(STR, ret=STR), doc="without leading and trailing whitespace")
def _strip(s):
    return s.strip()


@builtin("first_line", sig(STR, ret=STR), doc="the first line (empty for empty text)")
def _first_line(s):
    return s.split("\n", 1)[0] if s else ""


@builtin("str", sig(INT, ret=STR), sig(FLOAT, ret=STR), sig(BOOL, ret=STR), sig(JSON, ret=STR),
         doc="as text (JSON values as compact JSON; strings unchanged)")
def _str(x):
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return "true" if x else "false"
    if x is None or isinstance(x, list | dict):
        import json

        return json.dumps(x, separators=(",", ":"))
    return str(x)


@builtin("matches", sig(STR, REGEX, ret=BOOL), doc="regex search in the text")
def _matches(text, pattern):
    if hasattr(pattern, "search"):  # a Regex value
        return pattern.search(text)
    return _compiled(pattern, 0).search(text) is not None


@builtin("search", sig(STR, STR, INT, ret=BOOL),
         doc="search(text, pattern, flags): regex search with Python re flags; an invalid "
             "pattern is a criterion error")
def _search(text, pattern, flags):
    return _compiled(pattern, flags).search(text) is not None


@builtin("try_search", sig(STR, STR, INT, ret=T("bool", (), True)),
         doc="like search, but null (not an error) for an invalid pattern")
def _try_search(text, pattern, flags):
    try:
        return _compiled(pattern, flags).search(text) is not None
    except CriterionError:
        return None


@builtin("skill_base", sig(STR, ret=STR), doc="a skill name without its `plugin:` namespace")
def _skill_base(name):
    return name.rsplit(":", 1)[-1]


@builtin("label_of", sig(OPT_STR, list_of(STR), BOOL, ret=STR),
         doc="label_of(text, allowed, case_sensitive): the text (stripped) as one of the "
             "allowed labels, `(none)` when empty or missing, `(other)` otherwise")
def _label_of(text, allowed, case_sensitive):
    value = (text or "").strip()
    if not value:
        return "(none)"
    for label in allowed:
        if label == value or (not case_sensitive and label.lower() == value.lower()):
            return label
    return "(other)"


@builtin("canonical_label", sig(STR, list_of(STR), BOOL, ret=STR),
         doc="an expected label as written in `allowed` (case-insensitively unless "
             "case_sensitive)")
def _canonical_label(value, allowed, case_sensitive):
    for label in allowed:
        if label == value or (not case_sensitive and label.lower() == value.lower()):
            return label
    return value


# -- CLI invocations ----------------------------------------------------------------------
@builtin("cli_match", sig(list_of(STR), OPT_STR, T("list", (STR,), True),
                          T("list", (STR,), True), T("map", (T("FlagMatch"),), True),
                          list_of(STR), list_of(STR), ret=BOOL),
         doc="cli_match(argv, verb, verb_any_of, positional, flags, value_flags, "
             "ignore_flags): the arguments satisfy the pattern (the matcher record_cli "
             "shims answer with; see cli_called)")
def _cli_match(argv, verb, verb_any_of, positional, flags, value_flags, ignore_flags):
    from ce_lang import argv_match

    spec = argv_match.match_spec(verb, verb_any_of, positional, flags, value_flags,
                                 ignore_flags)
    try:
        return argv_match.argv_matches(spec, list(argv))
    except (re.error, ValueError) as exc:
        raise CriterionError(f"cannot match {argv!r}: {exc}") from exc


# -- JSON -----------------------------------------------------------------------------------
@builtin("json_assert", sig(JSON, STR, STR, JSON, ret=BOOL),
         doc="json_assert(doc, jmespath, operator, expected): one json_check assertion "
             "(equals, not_equals, contains, gt, gte, lt, lte, type, regex, exists)")
def _json_assert(doc, expression, operator, expected):
    import jmespath

    try:
        value = jmespath.search(expression, doc)
    except jmespath.exceptions.ParseError as exc:
        raise CriterionError(f"invalid JMESPath expression {expression!r}: {exc}") from exc
    except jmespath.exceptions.JMESPathError:
        # An error of the expression on this document (`length(x)` where x is a number
        # or missing): that assertion fails, the others still count (as in coder_eval).
        # Unknown functions and wrong arities are compile errors (rules_criterion._json_rules).
        return False
    return json_compare(value, operator, expected)


_JSON_TYPES = {"string": str, "boolean": bool, "array": list, "object": dict}


def json_compare(value: Any, operator: str, expected: Any) -> bool:
    if operator == "exists":
        return value is not None
    if operator == "equals":
        return (value == expected and type(value) is type(expected)) or _num_eq(value, expected)
    if operator == "not_equals":
        return not ((value == expected and type(value) is type(expected))
                    or _num_eq(value, expected))
    if operator == "contains":
        if isinstance(value, str):
            return isinstance(expected, str) and expected in value
        if isinstance(value, list):
            return expected in value
        if isinstance(value, dict):
            return isinstance(expected, str) and expected in value
        return False
    if operator in ("gt", "gte", "lt", "lte"):
        # two numbers, or two strings in code point order (ISO dates and times compare
        # as dates), as coder_eval's Python comparison; anything else fails the assertion
        if not (_is_num(value) and _is_num(expected)) \
                and not (isinstance(value, str) and isinstance(expected, str)):
            return False
        return {"gt": value > expected, "gte": value >= expected,
                "lt": value < expected, "lte": value <= expected}[operator]
    if operator == "type":
        if expected == "number":
            return _is_num(value)
        if expected == "null":
            return value is None
        kind = _JSON_TYPES.get(expected)
        return kind is not None and isinstance(value, kind) and (
            kind is not bool or isinstance(value, bool)) and not (
            kind is not bool and isinstance(value, bool))
    if operator == "regex":
        return isinstance(value, str) and _compiled(str(expected), 0).search(value) is not None
    raise CriterionError(f"unknown operator {operator!r}")


def _is_num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _num_eq(a: Any, b: Any) -> bool:
    return _is_num(a) and _is_num(b) and a == b


# Patterns come from task files and run on text the agent wrote: `^(a|aa)+$` on a short
# line backtracks for minutes. Every search has a time budget (the `regex` engine's,
# which also backtracks less); running out is a criterion error, never a hang.
REGEX_BUDGET_S = 2.0
_REGEX_CACHE: dict[tuple[str, int], Any] = {}
_BUDGET: contextvars.ContextVar[float] = contextvars.ContextVar("regex_budget",
                                                               default=REGEX_BUDGET_S)


class RegexBudgetExceeded(CriterionError):
    """A search ran out of its time budget (a criterion error to the grader; the live
    monitor, on a smaller budget, gives the criterion up instead)."""


@contextlib.contextmanager
def regex_budget(seconds: float) -> Iterator[None]:
    """Searches in this context (thread, task) get `seconds` each instead of the
    default: the live monitor runs on the event loop that enforces timeouts."""
    token = _BUDGET.set(seconds)
    try:
        yield
    finally:
        _BUDGET.reset(token)


class _Budgeted:
    """A compiled pattern whose `search` keeps to the budget (and says so when it can't)."""

    __slots__ = ("compiled", "pattern")

    def __init__(self, pattern: str, compiled: Any):
        self.pattern, self.compiled = pattern, compiled

    def search(self, text: str) -> Any:
        budget = _BUDGET.get()
        try:
            return self.compiled.search(text, timeout=budget)
        except TimeoutError:
            raise RegexBudgetExceeded(
                f"regular expression {self.pattern!r} ran out of its {budget:g} s "
                f"budget on {len(text)} characters (catastrophic backtracking?)") from None


# Python's `re` flag bits as the `regex` engine spells them: the two modules agree on
# IGNORECASE, LOCALE, MULTILINE, DOTALL, UNICODE and VERBOSE, not on ASCII (re 256 is
# regex's VERSION1, regex's ASCII is 128, which is re.DEBUG). Other bits mean nothing to
# `re` (it ignores them, as coder_eval does) but something to `regex` (REVERSE, WORD,
# BESTMATCH, POSIX ...): they are dropped. re.DEBUG only prints: dropped too.
_RE_TO_REGEX = ((re.IGNORECASE, 2), (re.LOCALE, 4), (re.MULTILINE, 8), (re.DOTALL, 16),
                (re.UNICODE, 32), (re.VERBOSE, 64), (re.ASCII, 128))


def re_flags(flags: int) -> int:
    """A flags integer as `re.compile` is given it to check a pattern: without DEBUG
    (which would print the compiled pattern on ce's stdout)."""
    return flags & ~re.DEBUG


def regex_flags(flags: int) -> int:
    """Python `re` flags (what task files write) -> the `regex` engine's (VERSION0)."""
    import regex

    out = regex.VERSION0
    for bit, theirs in _RE_TO_REGEX:
        if flags & bit:
            out |= theirs
    return out


def _compiled(pattern: str, flags: int) -> _Budgeted:
    key = (pattern, flags)
    hit = _REGEX_CACHE.get(key)
    if hit is None:
        import regex

        try:
            re.compile(pattern, re_flags(flags))  # the language's regex syntax is `re`'s
            hit = _Budgeted(pattern, regex.compile(pattern, regex_flags(flags)))
        except (re.error, regex.error, ValueError, OverflowError, RecursionError) as exc:
            raise CriterionError(f"invalid regular expression {pattern!r}: {exc}") from exc
        if len(_REGEX_CACHE) > 4096:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[key] = hit
    return hit


def regex_match(text: str, pattern: str, flags: int = 0) -> Any:
    """The first match of `pattern` in `text` as the `search` builtin finds it (same
    engine, flags and time budget), or None; CriterionError for an invalid pattern.
    For explanations: where a search matched, or that it matched nothing."""
    return _compiled(pattern, flags).search(text)


def regex_error(pattern: str, flags: int = 0) -> str | None:
    """Why `pattern` does not compile (a message with its position), or None."""
    try:
        re.compile(pattern, re_flags(flags))
    except re.error as exc:
        return exc.msg + (f" at position {exc.pos}" if exc.pos is not None else "")
    except RecursionError:
        return "nested too deeply to compile"
    except (ValueError, OverflowError) as exc:
        return str(exc)
    return None


def regex_search(pattern: str, flags: int, text: str) -> bool:
    """A budgeted regex search (Regex values and every builtin use it)."""
    return _compiled(pattern, flags).search(text) is not None


# -- effects: declared here, implemented by the runtime --------------------------------------
JSON_FILE, COMMAND_RESULT, VERDICT = T("JsonFile"), T("CommandResult"), T("Verdict")

declare("path_exists", sig(PATH, ret=BOOL), effect="workspace",
        doc="the path exists in the workspace (a literal path, else a glob; directories count)")
declare("glob", sig(PATH, ret=list_of(PATH)), effect="workspace",
        doc="workspace files matching the glob, sorted (ignore patterns apply); pathlib's "
            "rules of Python 3.13 on every Python: `**` is any depth of directories, a "
            "trailing `**` the files below")
declare("read_text", sig(PATH, ret=OPT_STR), effect="workspace",
        doc="the UTF-8 text of the one file the path (or glob) names; null when none; a "
            "criterion error when several match or the file is not UTF-8")
declare("read_json", sig(PATH, ret=JSON_FILE), effect="workspace",
        doc="the one JSON file the path names, parsed")
declare("schema_valid", sig(JSON, STR, ret=BOOL), effect="workspace",
        doc="schema_valid(doc, schema_path): the document conforms to the JSON Schema file "
            "(workspace path, or $TASK_DIR/...)")
declare("similarity", sig(STR, PATH, OPT_STR, ret=FLOAT), effect="workspace",
        doc="similarity(method, agent_file, reference_file): ast | token | complexity "
            "similarity in [0, 1] to the task's reference; identical code scores 1.0")
declare("read_cli_log", sig(PATH, ret=T("CliLog")), effect="workspace",
        doc="read_cli_log(path): the JSON Lines invocation log (one record per call with "
            "an `argv` list); an `error` when it is missing or cannot be trusted")
declare("run", sig(STR, INT, ret=COMMAND_RESULT), effect="exec",
        doc="run(command, timeout): a shell command in the workspace with the sandbox "
            "environment")
declare("uipath_eval", sig(STR, STR, map_of(FLOAT), ret=FLOAT), effect="exec",
        doc="uipath_eval(agent, eval_set, thresholds): share of thresholds met")
declare("llm_judge", sig(STR, list_of(STR), map_of(JSON), ret=VERDICT), effect="model",
        doc="llm_judge(rubric, files, settings): one structured model verdict")
declare("agent_judge", sig(STR, list_of(STR), map_of(JSON), ret=VERDICT), effect="model",
        doc="agent_judge(rubric, files, settings): a Claude Code sub-agent's verdict")

# Globals: names every expression can use.
GLOBALS: dict[str, tuple[T, str, str]] = {
    "trace": (T("Trace"), "trace", "the agent's trace"),
}
