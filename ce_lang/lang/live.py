"""Three-valued evaluation on a trace prefix: what is already decided, whatever comes next.

Each node's monotonicity (from the analysis) bounds its final value given its value now:
an `up` count that is 3 now ends in [3, +inf); an `up` boolean that is true now stays
true. Compound nodes combine their children's bounds (interval arithmetic, three-valued
logic). Errors are values too: a bound also says whether the final value may be an error
(`err`), from the static totality of each node (`totality.py`) and from what raised
now. An error scores 0 and fails, so a criterion is decided pass on a prefix when its
score's lower bound already meets the threshold and it cannot still raise, decided
fail when its upper bound is below the threshold (an error fails too). Scores are
compared as graded: booleans as 0/1, numbers clamped to [0, 1]. This is the semantics
of the live monitor; the property tests check it never disagrees with the verdict on
the full trace.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from ce_lang.lang import ast as A
from ce_lang.lang.analysis import Analyzer, meets
from ce_lang.lang.builtins import CriterionError
from ce_lang.lang.evaluate import Evaluator, Host, Link

INF = math.inf


@attrs.frozen
class Bound:
    """The final value lies in [lo, hi] (booleans as 0/1), or is an error when `err`;
    exact when lo == hi and known."""

    lo: float
    hi: float
    exact: Any = None
    known: bool = False
    err: bool = False

    def may_err(self, err: bool) -> Bound:
        return attrs.evolve(self, err=True) if err and not self.err else self

    @staticmethod
    def of(value: Any) -> Bound:
        if isinstance(value, bool):
            return Bound(float(value), float(value), value, True)
        if isinstance(value, int | float):
            return Bound(float(value), float(value), value, True)
        return Bound(-INF, INF, value, True)


TOP = Bound(-INF, INF)
TOP_ERR = Bound(-INF, INF, err=True)
UNKNOWN_BOOL = Bound(0.0, 1.0)


def _truth(b: Bound) -> bool | None:
    if b.known and isinstance(b.exact, bool):
        return b.exact
    if b.lo >= 1.0:
        return True
    if b.hi <= 0.0:
        return False
    return None


def _bool(v: bool | None, err: bool = False) -> Bound:
    return (UNKNOWN_BOOL if v is None else Bound.of(v)).may_err(err)


class LiveEvaluator:
    """`analyzer`: an `Analyzer`, or a program's read-only `Analysis` of the instance
    (anything with its `facts`, `raises` and `raises_here`); `links`: the program's link
    table for the instance's nodes (None: calls found by name)."""

    def __init__(self, analyzer: Analyzer, host: Host, links: Mapping[int, Link] | None = None):
        self.facts = analyzer.facts
        self.raises = analyzer.raises
        self.raises_here = analyzer.raises_here
        self.ev = Evaluator(host, links=links)

    def may_raise(self, node: A.Node) -> bool:
        return self.raises.get(node.id, True)

    def raises_itself(self, node: A.Node) -> bool:
        return self.raises_here.get(node.id, True)

    def settled(self, node: A.Node, now: Any) -> bool:
        """Is this value final even if the node may raise? `exists` true now stays true
        without evaluating the calls after its first match (`all` false dually); whatever
        raises later is never reached. Only when the predicate's value at each call is
        final (`const`): a predicate reading the trace may turn a call it found true, or
        one before it, into an error as calls arrive."""
        if isinstance(node, A.Unary) and node.op == "not":
            return self.settled(node.operand, not now)
        if not (isinstance(node, A.Call) and len(node.args) == 2
                and isinstance(node.args[1], A.Lambda)):
            return False
        body = self.facts.get(node.args[1].body.id)
        return body is not None and body.mono == "const" and (
            (node.func == "exists" and now is True) or (node.func == "all" and now is False))

    def bound(self, node: A.Node, env: dict[str, Any], abs_env: dict[str, Bound]) -> Bound:
        fact = self.facts.get(node.id)
        if fact is not None and fact.const:
            return Bound.of(fact.value)
        if fact is not None and fact.mono in ("up", "down", "const"):
            try:
                now = self.ev.eval(node, env)
            except CriterionError:
                return TOP_ERR
            if fact.mono == "const":  # the same value on every extension
                return Bound.of(now)
            err = self.may_raise(node) and not self.settled(node, now)
            if isinstance(now, bool):
                if fact.mono == "up":
                    return (Bound.of(True) if now else UNKNOWN_BOOL).may_err(err)
                return (Bound.of(False) if not now else UNKNOWN_BOOL).may_err(err)
            if isinstance(now, int | float):
                b = Bound(float(now), INF) if fact.mono == "up" else Bound(-INF, float(now))
                return b.may_err(err)
            return TOP.may_err(err)
        return self.compose(node, env, abs_env)

    def compose(self, node: A.Node, env: dict[str, Any], abs_env: dict[str, Bound]) -> Bound:
        if isinstance(node, A.Name) and node.name in abs_env:
            return abs_env[node.name]
        if isinstance(node, A.Unary):
            b = self.bound(node.operand, env, abs_env)
            if node.op == "not":
                t = _truth(b)
                return _bool(None if t is None else not t, b.err)
            return Bound(-b.hi, -b.lo, err=b.err or self.raises_itself(node))
        if isinstance(node, A.Binary):
            return self.binary(node, env, abs_env)
        if isinstance(node, A.Cond):
            test = self.bound(node.test, env, abs_env)
            t = _truth(test)
            if t is not None:
                return self.bound(node.then if t else node.else_, env, abs_env).may_err(test.err)
            a = self.bound(node.then, env, abs_env)
            b = self.bound(node.else_, env, abs_env)
            return Bound(min(a.lo, b.lo), max(a.hi, b.hi), err=test.err or a.err or b.err)
        if isinstance(node, A.Call) and node.func in ("min", "max", "clamp", "float"):
            args = [self.bound(a, env, abs_env) for a in node.args]
            err = any(a.err for a in args) or self.raises_itself(node)
            if node.func == "float":
                return args[0].may_err(err)
            if node.func == "min":
                return Bound(min(args[0].lo, args[1].lo), min(args[0].hi, args[1].hi), err=err)
            if node.func == "max":
                return Bound(max(args[0].lo, args[1].lo), max(args[0].hi, args[1].hi), err=err)
            x, lo, hi = args
            if lo.known and hi.known:
                return Bound(min(max(x.lo, lo.lo), hi.hi), min(max(x.hi, lo.lo), hi.hi),
                             err=err)
        return TOP.may_err(self.may_raise(node))

    def binary(self, node: A.Binary, env: dict[str, Any], abs_env: dict[str, Bound]) -> Bound:
        op = node.op
        a = self.bound(node.left, env, abs_env)
        if op in ("and", "or"):
            ta = _truth(a)
            if op == "and" and ta is False:  # the right side is never evaluated
                return _bool(False, a.err)
            if op == "or" and ta is True:
                return _bool(True, a.err)
            b = self.bound(node.right, env, abs_env)
            tb, err = _truth(b), a.err or b.err
            if op == "and":
                return _bool(False if tb is False else True if ta and tb else None, err)
            return _bool(True if tb is True else False if ta is False and tb is False else None,
                         err)
        b = self.bound(node.right, env, abs_env)
        here = op not in ("==", "!=", "in") and self.raises_itself(node)
        return self.arith(node, a, b, env, abs_env).may_err(a.err or b.err or here)

    def arith(self, node: A.Binary, a: Bound, b: Bound, env: dict[str, Any],
              abs_env: dict[str, Bound]) -> Bound:
        op = node.op
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
                    return TOP_ERR
                lo, hi = a.lo / k, a.hi / k
            else:
                lo = a.lo * k if a.lo != -INF or k else 0.0
                hi = a.hi * k if a.hi != INF or k else 0.0
            return Bound(min(lo, hi), max(lo, hi))
        if op == "*" and a.known and isinstance(a.exact, int | float):
            return self.arith(A.Binary(node.id, node.span, op, node.right, node.left), b, a,
                              env, abs_env)
        return TOP


def live_score(score: A.Node, lets: tuple[A.Let, ...], params: dict[str, Any],
               analyzer: Analyzer, host: Host, outputs: tuple[A.Let, ...] = ()) -> Bound:
    """Bounds on the final score given the trace so far (the host's trace)."""
    live = LiveEvaluator(analyzer, host)
    return criterion_bound(live, score, lets, outputs, dict(params))


def criterion_bound(live: LiveEvaluator, score: A.Node, lets: tuple[A.Let, ...],
                    outputs: tuple[A.Let, ...], env: dict[str, Any]) -> Bound:
    """The score's bound; an error anywhere the grader evaluates (every let, the score,
    then the outputs) is an error of the criterion, used or not."""
    abs_env: dict[str, Bound] = {}
    bind_lets(live, lets, env, abs_env)
    bound = live.bound(score, env, abs_env)
    return bound.may_err(any(b.err for b in abs_env.values())
                         or any(live.may_raise(o.expr) for o in outputs))


def bind_lets(live: LiveEvaluator, lets: tuple[A.Let, ...], env: dict[str, Any],
              abs_env: dict[str, Bound]) -> None:
    """Each let's bound, and its value now; a let that raises now stays unbound, so what
    reads it raises too (an error, never a made-up null)."""
    for let in lets:
        abs_env[let.name] = live.bound(let.expr, env, abs_env)
        try:
            env[let.name] = live.ev.eval(let.expr, env)
        except CriterionError:
            env.pop(let.name, None)


def live_verdict(bound: Bound, threshold: float, result_bool: bool = False) -> bool | None:
    """True: decided pass; False: decided fail; None: not yet. On the score as graded:
    booleans are 0/1 (their bounds already are), numbers clamped to [0, 1]; an error
    scores 0 and fails, so a value that may still be an error never passes."""
    del result_bool  # a boolean's bound is its 0/1 interval
    lo = min(1.0, max(0.0, bound.lo))
    hi = min(1.0, max(0.0, bound.hi))
    if not meets(hi, threshold):
        return False
    if meets(lo, threshold) and not bound.err:
        return True
    return None
