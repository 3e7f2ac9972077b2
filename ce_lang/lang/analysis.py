"""Constant folding and decidability of one criterion instance.

Parameters are constants once bound, so conditions on them fold away first (the branch
not taken contributes nothing, not even its effects). Every remaining trace-dependent term
gets a monotonicity as the trace grows: `up` (counts, exists), `down` (all, not exists),
`const`, or `none`. From those, for P = (score >= pass_threshold, `meets`):

- can_decide_pass: P can become true on a trace prefix and stay true on every extension;
- can_decide_fail: P can become false on a prefix and stay false.

`and` decides true only if both sides can, false if either can; `or` dually; `not`
swaps. Terms with no monotonicity still decide what the live monitor (`live.py`) can
decide of them: a conditional once its test is decided, `max(x, count)` by its lower
bound, a number by the highest lower / lowest upper bound the monitor can reach. These
are over-approximations of the monitor, so a live verdict never contradicts them (the
property tests in tests/test_decidability_property.py check exactly that). Anything that
reads the workspace, runs a command or calls a model is graded after the run, so it
decides nothing live.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ce_lang.lang import ast as A
from ce_lang.lang.builtins import BUILTINS, CriterionError
from ce_lang.lang.evaluate import Evaluator
from ce_lang.lang.records import BUILTIN_RECORDS
from ce_lang.lang.totality import may_raise
from ce_lang.lang.values import Regex

INF = math.inf
UNKNOWN: Any = type("Unknown", (), {"__repr__": lambda self: "UNKNOWN"})()
POST_HOC = frozenset({"workspace", "exec", "model"})


@attrs.frozen
class Fact:
    mono: str  # const | up | down | none | grows (a list that only gets longer)
    value: Any = UNKNOWN  # the folded value when const
    effects: frozenset[str] = frozenset()
    # What the live monitor (`ce_lang.lang.live`) can learn of the final value on some
    # prefix: for booleans that it is true (ct) / false (cf); for numbers the highest lower
    # bound (lo) and the lowest upper bound (hi) it can reach (-inf / inf: none), and whether
    # it can know the value exactly (kn). Over-approximations: whatever the monitor can
    # decide must be allowed here, or the static decision is contradicted live.
    ct: bool = False
    cf: bool = False
    elem: str | None = None  # record type of a lambda parameter / trace root
    lo: float = -INF
    hi: float = INF
    kn: bool = False

    @property
    def const(self) -> bool:
        return self.mono == "const" and self.value is not UNKNOWN


def const(value: Any) -> Fact:
    return Fact("const", value)


NONE = Fact("none")


def _bool_fact(mono: str, effects: frozenset[str]) -> Fact:
    return Fact(mono, UNKNOWN, effects, ct=mono == "up", cf=mono == "down")


def _flip(m: str) -> str:
    return {"up": "down", "down": "up"}.get(m, m)


def _combine(a: str, b: str) -> str:
    if a == "const":
        return b
    if b == "const" or a == b:
        return a
    return "none"


@attrs.frozen
class Decision:
    can_pass: bool
    can_fail: bool
    why: str  # human explanation of what the analysis found
    effects: frozenset[str]
    folded: tuple[str, ...]  # conditions on parameters that folded, e.g. "`max_count == null` is false"


class Analyzer:
    def __init__(self) -> None:
        self.facts: dict[int, Fact] = {}
        # errors as values (totality.py): node id -> may raise on some trace; and whether
        # the operator itself may, given its operands' values
        self.raises: dict[int, bool] = {}
        self.raises_here: dict[int, bool] = {}
        self.folded: list[str] = []
        self.evaluator = Evaluator()

    def fact(self, node: A.Node, env: dict[str, Fact]) -> Fact:
        f = _settle(self._fact(node, env))
        self.facts[node.id] = f
        return f

    def _fact(self, node: A.Node, env: dict[str, Fact]) -> Fact:
        if isinstance(node, A.Lit):
            return const(Regex(node.value) if node.kind == "regex" else node.value)
        if isinstance(node, A.Name):
            if node.name in env:
                return env[node.name]
            if node.name == "trace":
                return Fact("none", UNKNOWN, frozenset({"trace"}), elem="Trace")
            return NONE
        if isinstance(node, A.Member):
            obj = self.fact(node.obj, env)
            if obj.const:
                return self._fold(node, {"__o": obj.value}, obj.effects,
                                  lambda v: v["__o"].get(node.name) if isinstance(v["__o"], dict)
                                  else getattr(v["__o"], node.name))
            record = BUILTIN_RECORDS.get(obj.elem or "")
            if record is not None and node.name in record.fields:
                field = record.fields[node.name]
                elem = field.type.elem.name if field.type.name == "list" else field.type.name
                mono = field.mono if obj.elem == "Trace" or obj.mono == "elem" else "none"
                return Fact(mono, UNKNOWN, obj.effects, ct=mono == "up", cf=mono == "down",
                            elem=elem if elem in BUILTIN_RECORDS else None)
            return Fact("none", UNKNOWN, obj.effects)
        if isinstance(node, A.Method):
            obj = self.fact(node.obj, env)
            args = [self.fact(a, env) for a in node.args]
            effects = obj.effects.union(*(a.effects for a in args))
            record = BUILTIN_RECORDS.get(obj.elem or "")
            if obj.mono == "elem" and record and node.name in record.methods \
                    and all(a.const for a in args):
                mono = record.methods[node.name].mono
                return Fact(mono, UNKNOWN, effects, ct=mono == "up", cf=mono == "down")
            return Fact("none", UNKNOWN, effects)
        if isinstance(node, A.Index):
            obj, idx = self.fact(node.obj, env), self.fact(node.index, env)
            if obj.const and idx.const:
                return self._fold(node, {}, obj.effects | idx.effects,
                                  lambda _: _index(obj.value, idx.value))
            return Fact("none", UNKNOWN, obj.effects | idx.effects)
        if isinstance(node, A.Unary):
            f = self.fact(node.operand, env)
            if f.const:
                return const((not f.value) if node.op == "not" else -f.value)
            if node.op == "not":
                return Fact(_flip(f.mono), UNKNOWN, f.effects, ct=f.cf, cf=f.ct)
            return Fact(_flip(f.mono), UNKNOWN, f.effects, lo=-f.hi, hi=-f.lo)
        if isinstance(node, A.Binary):
            return self.binary(node, env)
        if isinstance(node, A.Cond):
            test = self.fact(node.test, env)
            if test.const:
                self.folded.append(f"`{_text(node.test)}` is {_show(test.value)}")
                return self.fact(node.then if test.value else node.else_, env)
            then, else_ = self.fact(node.then, env), self.fact(node.else_, env)

            def either(flag: str) -> bool:  # live: the branch taken, or both branches agree
                a, b = getattr(then, flag), getattr(else_, flag)
                return (test.ct and a) or (test.cf and b) or (a and b)

            # live bounds a conditional by its branch once the test is decided, else by both
            lo = max([then.lo] * test.ct + [else_.lo] * test.cf + [min(then.lo, else_.lo)])
            hi = min([then.hi] * test.ct + [else_.hi] * test.cf + [max(then.hi, else_.hi)])
            return Fact("none", UNKNOWN, test.effects | then.effects | else_.effects,
                        ct=either("ct"), cf=either("cf"), lo=lo, hi=hi, kn=either("kn"))
        if isinstance(node, A.ListLit):
            items = [self.fact(i, env) for i in node.items]
            effects = frozenset().union(*(i.effects for i in items))
            if all(i.const for i in items):
                return Fact("const", [i.value for i in items], effects)
            return Fact("none", UNKNOWN, effects)
        if isinstance(node, A.MapLit):
            vals = [self.fact(v, env) for v in node.values]
            effects = frozenset().union(*(v.effects for v in vals))
            if all(v.const for v in vals):
                return Fact("const", dict(zip(node.keys, [v.value for v in vals], strict=True)),
                            effects)
            return Fact("none", UNKNOWN, effects)
        if isinstance(node, A.Call):
            return self.call(node, env)
        if isinstance(node, A.Lambda):
            return NONE
        return NONE

    def _fold(self, node: A.Node, env: dict[str, Any], effects: frozenset[str], fn) -> Fact:
        try:
            return Fact("const", fn(env), effects)
        except (CriterionError, AttributeError, TypeError, KeyError, ValueError,
                ZeroDivisionError):
            return Fact("none", UNKNOWN, effects)

    def binary(self, node: A.Binary, env: dict[str, Fact]) -> Fact:
        op = node.op
        a = self.fact(node.left, env)
        if op in ("and", "or") and a.const:  # short-circuit folding
            if (op == "and") != bool(a.value):
                return const(bool(a.value))
            return self.fact(node.right, env)
        b = self.fact(node.right, env)
        effects = a.effects | b.effects
        if a.const and b.const:
            return self._fold(node, {}, effects, lambda _: apply_binary(op, a.value, b.value))
        if op in ("and", "or"):
            mono = _combine(a.mono, b.mono)
            mono = mono if mono in ("up", "down", "const") else "none"
            if op == "and":
                return Fact(mono, UNKNOWN, effects, ct=a.ct and b.ct, cf=a.cf or b.cf)
            return Fact(mono, UNKNOWN, effects, ct=a.ct or b.ct, cf=a.cf and b.cf)
        if op in ("<=", "<"):
            a, b = b, a
        if op in (">=", ">", "<=", "<"):
            f = _bool_fact(_combine(a.mono, _flip(b.mono)), effects)
            # live: true once a's lower bound reaches b's upper bound; false dually
            strict = op in (">", "<")
            return attrs.evolve(f, ct=f.ct or _above(a.lo, b.hi, strict),
                                cf=f.cf or _above(b.lo, a.hi, not strict))
        if op in ("==", "!="):
            const_side, other = (b, a) if b.const else (a, b) if a.const else (None, None)
            if const_side is not None and isinstance(const_side.value, bool):
                same = const_side.value == (op == "==")
                mono = other.mono if same else _flip(other.mono)
                return Fact(mono if mono in ("up", "down") else "none", UNKNOWN, effects,
                            ct=other.ct if same else other.cf, cf=other.cf if same else other.ct)
            if a.mono == b.mono == "const":
                return Fact("const", UNKNOWN, effects)
            # live: both sides decided or known, or disjoint bounds (a count equal to 2,
            # once it is 3, never is again)
            known = a.kn and b.kn
            same = (a.ct and b.ct) or (a.cf and b.cf) or known
            differ = (a.ct and b.cf) or (a.cf and b.ct) or _above(a.lo, b.hi, True) \
                or _above(b.lo, a.hi, True) or known
            return Fact("none", UNKNOWN, effects, ct=same if op == "==" else differ,
                        cf=differ if op == "==" else same)
        if op == "in" and a.mono == b.mono == "const":  # e.g. c.tool in ["Write", "Edit"]
            return Fact("const", UNKNOWN, effects)
        if op == "+":
            return Fact(_numeric(_combine(a.mono, b.mono)), UNKNOWN, effects,
                        lo=-INF if -INF in (a.lo, b.lo) else a.lo + b.lo,
                        hi=INF if INF in (a.hi, b.hi) else a.hi + b.hi)
        if op == "-":
            return Fact(_numeric(_combine(a.mono, _flip(b.mono))), UNKNOWN, effects,
                        lo=-INF if a.lo == -INF or b.hi == INF else a.lo - b.hi,
                        hi=INF if a.hi == INF or b.lo == -INF else a.hi - b.lo)
        if op in ("*", "/"):
            k, other = (b, a) if b.const else (a, b) if (a.const and op == "*") else (None, None)
            if k is not None and isinstance(k.value, int | float) \
                    and not isinstance(k.value, bool):
                if k.value:  # live scales the bounds as the evaluator does
                    x, y = (other.lo / k.value, other.hi / k.value) if op == "/" \
                        else (other.lo * k.value, other.hi * k.value)
                    if k.value > 0:
                        return Fact(_numeric(other.mono), UNKNOWN, effects, lo=x, hi=y)
                    return Fact(_numeric(_flip(other.mono)), UNKNOWN, effects, lo=y, hi=x)
                if op == "*":  # times zero: live knows it is 0
                    return Fact("none", UNKNOWN, effects, lo=0.0, hi=0.0)
            elif b.kn or (a.kn and op == "*"):
                # a factor live may come to know but the analysis does not: any bounds
                return Fact("none", UNKNOWN, effects, lo=INF, hi=-INF)
            return Fact("none", UNKNOWN, effects)
        return Fact("none", UNKNOWN, effects)

    def call(self, node: A.Call, env: dict[str, Fact]) -> Fact:
        fn = BUILTINS[node.func]
        lambdas = [a for a in node.args if isinstance(a, A.Lambda)]
        plain = [self.fact(a, env) for a in node.args if not isinstance(a, A.Lambda)]
        effects = frozenset().union(*(p.effects for p in plain))
        if fn.effect != "pure":
            return Fact("none", UNKNOWN, effects | {fn.effect})
        if lambdas:
            lst, lam = plain[0], lambdas[0]
            if lst.mono == "grows":
                elem = Fact("elem", UNKNOWN, frozenset(), elem=lst.elem)
            else:
                elem = Fact("none")  # a value of a constant or unknown list
            body = self.fact(lam.body, {**env, lam.param: elem})
            effects |= body.effects
            if lst.const and not body.effects:
                return self._fold_call(node, env, effects)
            if lst.mono != "grows" or effects & POST_HOC:
                return Fact("none", UNKNOWN, effects)
            pm = body.mono
            if fn.mono in ("count", "exists", "filter") and pm in ("const", "up"):
                if fn.mono == "exists":
                    return _bool_fact("up", effects)
                return Fact("up" if fn.mono == "count" else "grows", UNKNOWN, effects)
            if fn.mono == "all" and pm in ("const", "down"):
                return _bool_fact("down", effects)
            if fn.mono == "map" and pm == "const":
                return Fact("grows", UNKNOWN, effects)
            return Fact("none", UNKNOWN, effects)
        if all(p.const for p in plain):
            return self._fold_call(node, env, effects)
        if fn.mono == "len" and plain and plain[0].mono == "grows":
            return Fact("up", UNKNOWN, effects)
        if fn.mono == "monotone" and len(plain) == 2:
            x, y = plain
            pick = {"min": min, "max": max}[node.func]
            return Fact(_numeric(_combine(x.mono, y.mono)), UNKNOWN, effects,
                        lo=pick(x.lo, y.lo), hi=pick(x.hi, y.hi))
        if node.func == "clamp":
            x, low, high = plain
            if low.const and high.const:  # live: within [low, high]
                return Fact(_numeric(x.mono), UNKNOWN, effects,
                            lo=min(max(x.lo, low.value), high.value),
                            hi=min(max(x.hi, low.value), high.value))
            if low.mono == high.mono == "const":
                return Fact("none", UNKNOWN, effects, lo=INF, hi=-INF)
            return Fact("none", UNKNOWN, effects)
        if node.func == "float" and plain:
            return attrs.evolve(plain[0], effects=effects)
        if all(p.mono == "const" for p in plain):  # e.g. of a tool call's fixed fields
            return Fact("const", UNKNOWN, effects)
        return Fact("none", UNKNOWN, effects)

    def _fold_call(self, node: A.Call, env: dict[str, Fact], effects: frozenset[str]) -> Fact:
        values = {k: f.value for k, f in env.items() if f.const}
        try:
            return Fact("const", self.evaluator.eval(node, values), effects)
        except (CriterionError, AttributeError, TypeError, KeyError, ValueError,
                ZeroDivisionError):
            return Fact("none", UNKNOWN, effects)


def _true(f: Fact) -> bool:
    return f.const and f.value is True


def _false(f: Fact) -> bool:
    return f.const and f.value is False


def _numeric(m: str) -> str:
    return m if m in ("const", "up", "down") else "none"


def _index(obj: Any, idx: Any) -> Any:
    return obj.get(idx) if isinstance(obj, dict) else obj[idx]


def apply_binary(op: str, left: Any, right: Any) -> Any:
    """A binary operator on two known values, with the evaluator's semantics."""
    if op == "and":
        return bool(left) and bool(right)
    if op == "or":
        return bool(left) or bool(right)
    if op in ("==", "!="):
        same = isinstance(left, bool) == isinstance(right, bool) and left == right
        return same if op == "==" else not same
    if op == "in":
        return False if right is None else left in right
    return _OPS[op](left, right)


_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "%": lambda a, b: a % b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _show(value: Any) -> str:
    return "true" if value is True else "false" if value is False else repr(value)


def _text(node: A.Node) -> str:
    """The expression's source text (from its span), best effort."""
    return _SOURCES.get(node.span.file, "")[node.span.offset:node.span.end_offset] or "..."


_SOURCES: dict[str, str] = {}


def register_source(file: str, text: str) -> None:
    """Let folding explanations quote definitions' source text."""
    _SOURCES[file] = text


def source_text(file: str) -> str:
    """The text of a registered definition file (empty when unknown)."""
    return _SOURCES.get(file, "")


# -- instances ------------------------------------------------------------------------------
def analyze(score: A.Node | None, lets: tuple[A.Let, ...], params: dict[str, Any],
            threshold: float, result_bool: bool = False,
            outputs: tuple[A.Let, ...] = ()) -> tuple[Decision, Analyzer]:
    an = Analyzer()
    env: dict[str, Fact] = {k: const(v) for k, v in params.items()}
    for let in lets:
        env[let.name] = an.fact(let.expr, env)
        if env[let.name].const and isinstance(env[let.name].value, bool):
            an.folded.append(f"`{let.name}` is {_show(env[let.name].value)}")
    if score is None:
        return Decision(False, False, "has no score", frozenset(), ()), an
    f = an.fact(score, env)
    totality = may_raise(score, lets, an.facts, outputs)
    an.raises, an.raises_here = totality.raises, totality.here
    effects = _live_effects(score, lets, an, env)
    folded = tuple(dict.fromkeys(an.folded))
    if effects & POST_HOC:
        kinds = sorted(effects & POST_HOC)
        what = {"workspace": "reads the workspace", "exec": "runs a command",
                "model": "calls a model"}
        why = " and ".join(what[k] for k in kinds) + ", so it is only graded after the run"
        return Decision(False, False, why, effects, folded), an
    if "trace" not in effects or f.const:
        return Decision(False, False, "does not depend on the trace here, so it would decide "
                        "before the agent starts", effects, folded), an
    can_pass, can_fail = _decide(f, threshold, result_bool)
    if can_pass and can_fail:
        why = "can decide either way"
    elif can_pass:
        why = "can only decide pass here"
    elif can_fail:
        why = "can only decide fail here"
    else:
        why = "has a score that can move both ways as the trace grows, so it decides nothing"
    return Decision(can_pass, can_fail, why, effects, folded), an


def _live_effects(score: A.Node, lets: tuple[A.Let, ...], an: Analyzer,
                  env: dict[str, Fact]) -> frozenset[str]:
    """Effects of what the score still depends on after folding."""
    used: set[str] = set()
    effects: set[str] = set()

    def visit(node: A.Node) -> None:
        f = an.facts.get(node.id)
        if f is None:
            return  # a branch folded away
        effects.update(f.effects)
        if isinstance(node, A.Name) and node.name not in used:
            used.add(node.name)
            for let in lets:
                if let.name == node.name:
                    visit(let.expr)
        for child in A.children(node):
            visit(child)

    visit(score)
    return frozenset(effects)


# A score meets its pass_threshold within this: a mean of parts is computed in floats,
# and (1 + 1 + 0.4) / 3 is 0.7999999999999999, which failed `pass_threshold: 0.8` though
# the criterion's score is exactly 0.8 (SEMANTICS_VERSION 5). Far below any score step a
# criterion makes (a count of 10^6 calls is 1e-6).
THRESHOLD_TOLERANCE = 1e-9


def meets(score: float, threshold: float) -> bool:
    """P = score >= pass_threshold, as the grader, the live monitor and this analysis
    all read it."""
    return score >= threshold - THRESHOLD_TOLERANCE


def _decide(f: Fact, threshold: float, result_bool: bool) -> tuple[bool, bool]:
    """As live decides on the graded score (a boolean is 0 or 1, a number is clamped to
    [0, 1]): a threshold that 0 meets passes whatever the value, one 1 does not meet
    fails."""
    if result_bool:
        can_pass, can_fail = f.ct, f.cf
    else:
        can_pass, can_fail = meets(f.lo, threshold), not meets(f.hi, threshold)
    return (can_pass and meets(1.0, threshold)) or meets(0.0, threshold), \
        (can_fail and not meets(0.0, threshold)) or not meets(1.0, threshold)


def _above(lo: float, hi: float, strict: bool) -> bool:
    """Can a lower bound `lo` (at most) reach an upper bound `hi` (at least)?"""
    return lo > -INF and hi < INF and (lo > hi if strict else lo >= hi)


def _settle(f: Fact) -> Fact:
    """What live learns of a node it evaluates itself: the bound its monotonicity gives.
    (Built with the constructor, not attrs.evolve: this runs for every analyzed node.)"""
    m = f.mono
    if m == "up":  # [now, inf): any lower bound, never an upper one
        return Fact(m, f.value, f.effects, True, False, f.elem, INF, INF, f.kn)
    if m == "down":
        return Fact(m, f.value, f.effects, False, True, f.elem, -INF, -INF, f.kn)
    if m == "const":
        v = f.value
        if v is UNKNOWN:
            return Fact(m, v, f.effects, True, True, f.elem, INF, -INF, True)
        if isinstance(v, bool):
            return Fact(m, v, f.effects, v, not v, f.elem, f.lo, f.hi, True)
        if isinstance(v, int | float):
            return Fact(m, v, f.effects, f.ct, f.cf, f.elem, float(v), float(v), True)
        return Fact(m, v, f.effects, f.ct, f.cf, f.elem, f.lo, f.hi, True)
    return f
