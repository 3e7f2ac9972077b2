"""Three-valued evaluation on a trace prefix: what is already decided, whatever comes next.

Each node's monotonicity (from the analysis) bounds its final value given its value now:
an `up` count that is 3 now ends in [3, +inf); an `up` boolean that is true now stays
true. Compound nodes combine their children's bounds (interval arithmetic, three-valued
logic). A criterion is decided pass on a prefix when its score's lower bound already
meets the threshold, decided fail when its upper bound is below it. This is the
semantics of the live monitor; the property tests check it never disagrees with the
verdict on the full trace.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ce_lang.lang import ast as A
from ce_lang.lang.analysis import Analyzer
from ce_lang.lang.builtins import CriterionError
from ce_lang.lang.evaluate import Evaluator, Host

INF = math.inf


@attrs.frozen
class Bound:
    """The final value lies in [lo, hi] (booleans as 0/1); exact when lo == hi and known."""

    lo: float
    hi: float
    exact: Any = None
    known: bool = False

    @staticmethod
    def of(value: Any) -> Bound:
        if isinstance(value, bool):
            return Bound(float(value), float(value), value, True)
        if isinstance(value, int | float):
            return Bound(float(value), float(value), value, True)
        return Bound(-INF, INF, value, True)


TOP = Bound(-INF, INF)
UNKNOWN_BOOL = Bound(0.0, 1.0)


def _truth(b: Bound) -> bool | None:
    if b.known and isinstance(b.exact, bool):
        return b.exact
    if b.lo >= 1.0:
        return True
    if b.hi <= 0.0:
        return False
    return None


def _bool(v: bool | None) -> Bound:
    return UNKNOWN_BOOL if v is None else Bound.of(v)


class LiveEvaluator:
    def __init__(self, analyzer: Analyzer, host: Host):
        self.facts = analyzer.facts
        self.ev = Evaluator(host)

    def bound(self, node: A.Node, env: dict[str, Any], abs_env: dict[str, Bound]) -> Bound:
        fact = self.facts.get(node.id)
        if fact is not None and fact.const:
            return Bound.of(fact.value)
        if fact is not None and fact.mono in ("up", "down", "const"):
            try:
                now = self.ev.eval(node, env)
            except CriterionError:
                return TOP
            if fact.mono == "const":
                return Bound.of(now)
            if isinstance(now, bool):
                if fact.mono == "up":
                    return Bound.of(True) if now else UNKNOWN_BOOL
                return Bound.of(False) if not now else UNKNOWN_BOOL
            if isinstance(now, int | float):
                return Bound(float(now), INF) if fact.mono == "up" else Bound(-INF, float(now))
            return TOP
        return self.compose(node, env, abs_env)

    def compose(self, node: A.Node, env: dict[str, Any], abs_env: dict[str, Bound]) -> Bound:
        if isinstance(node, A.Name) and node.name in abs_env:
            return abs_env[node.name]
        if isinstance(node, A.Unary):
            b = self.bound(node.operand, env, abs_env)
            if node.op == "not":
                t = _truth(b)
                return _bool(None if t is None else not t)
            return Bound(-b.hi, -b.lo)
        if isinstance(node, A.Binary):
            return self.binary(node, env, abs_env)
        if isinstance(node, A.Cond):
            t = _truth(self.bound(node.test, env, abs_env))
            if t is not None:
                return self.bound(node.then if t else node.else_, env, abs_env)
            a = self.bound(node.then, env, abs_env)
            b = self.bound(node.else_, env, abs_env)
            return Bound(min(a.lo, b.lo), max(a.hi, b.hi))
        if isinstance(node, A.Call) and node.func in ("min", "max", "clamp", "float"):
            args = [self.bound(a, env, abs_env) for a in node.args]
            if node.func == "float":
                return args[0]
            if node.func == "min":
                return Bound(min(args[0].lo, args[1].lo), min(args[0].hi, args[1].hi))
            if node.func == "max":
                return Bound(max(args[0].lo, args[1].lo), max(args[0].hi, args[1].hi))
            x, lo, hi = args
            if lo.known and hi.known:
                return Bound(min(max(x.lo, lo.lo), hi.hi), min(max(x.hi, lo.lo), hi.hi))
        return TOP

    def binary(self, node: A.Binary, env: dict[str, Any], abs_env: dict[str, Bound]) -> Bound:
        op = node.op
        a = self.bound(node.left, env, abs_env)
        if op in ("and", "or"):
            ta = _truth(a)
            if op == "and" and ta is False:
                return _bool(False)
            if op == "or" and ta is True:
                return _bool(True)
            tb = _truth(self.bound(node.right, env, abs_env))
            if op == "and":
                return _bool(False if tb is False else True if ta and tb else None)
            return _bool(True if tb is True else False if ta is False and tb is False else None)
        b = self.bound(node.right, env, abs_env)
        if op in (">=", ">", "<=", "<"):
            if op in ("<=", "<"):
                a, b, op = b, a, {"<=": ">=", "<": ">"}[op]
            if (a.lo >= b.hi) if op == ">=" else (a.lo > b.hi):
                return _bool(True)
            if (a.hi < b.lo) if op == ">=" else (a.hi <= b.lo):
                return _bool(False)
            return UNKNOWN_BOOL
        if op in ("==", "!="):
            if a.known and b.known:
                same = a.exact == b.exact and isinstance(a.exact, bool) == isinstance(b.exact,
                                                                                       bool)
                return _bool(same if op == "==" else not same)
            if a.hi < b.lo or b.hi < a.lo:
                return _bool(op == "!=")
            return UNKNOWN_BOOL
        if op == "+":
            return Bound(a.lo + b.lo, a.hi + b.hi)
        if op == "-":
            return Bound(a.lo - b.hi, a.hi - b.lo)
        if op in ("*", "/") and b.known and isinstance(b.exact, int | float) \
                and not isinstance(b.exact, bool):
            k = float(b.exact)
            if op == "/":  # divide, as the evaluator does: `x * (1 / k)` rounds differently
                if k == 0:
                    return TOP
                lo, hi = a.lo / k, a.hi / k
            else:
                lo = a.lo * k if a.lo != -INF or k else 0.0
                hi = a.hi * k if a.hi != INF or k else 0.0
            return Bound(min(lo, hi), max(lo, hi))
        if op == "*" and a.known and isinstance(a.exact, int | float):
            return self.binary(A.Binary(node.id, node.span, op, node.right, node.left), env,
                               abs_env)
        return TOP


def live_score(score: A.Node, lets: tuple[A.Let, ...], params: dict[str, Any],
               analyzer: Analyzer, host: Host) -> Bound:
    """Bounds on the final score given the trace so far (the host's trace)."""
    live = LiveEvaluator(analyzer, host)
    env = dict(params)
    abs_env: dict[str, Bound] = {}
    for let in lets:
        abs_env[let.name] = live.bound(let.expr, env, abs_env)
        try:
            env[let.name] = live.ev.eval(let.expr, env)
        except CriterionError:
            env[let.name] = None
    return live.bound(score, env, abs_env)


def live_verdict(bound: Bound, threshold: float, result_bool: bool = False) -> bool | None:
    """True: decided pass; False: decided fail; None: not yet."""
    if result_bool:
        t = _truth(bound)
        return t
    lo = min(1.0, max(0.0, bound.lo))  # scores are clamped to [0, 1] when graded
    hi = min(1.0, max(0.0, bound.hi))
    if lo >= threshold:
        return True
    if hi < threshold:
        return False
    return None
