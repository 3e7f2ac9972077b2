"""Which expressions may raise a criterion error on some trace: errors as values.

An error makes the criterion score 0 and fail (whatever its threshold), so the live
monitor may decide *pass* only on a value that cannot still turn into an error: a
`count` that is 3 now ends >= 3 *or* raises, when a later call makes its predicate
raise. This pass runs after the decidability analysis, on the same instance and over
its facts (folded constants, record types of names), and gives every reachable node one
bit, `raises`: False only when evaluation provably succeeds on every trace.

The rules are a whitelist, over-approximating errors: a node is total when its
children are and the operation cannot fail on the values they can take. For that it
also tracks, per node, whether the value is surely non-null and surely a number (both
as the type checker left them; a `str?` field may be null, so `lower(c.command)` may
raise, `lower(or_else(c.command, ""))` does not).
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from ce_lang.lang import ast as A
from ce_lang.lang.records import BUILTIN_RECORDS


@attrs.frozen
class Info:
    raises: bool
    nonnull: bool = False
    num: bool = False


UNSAFE = Info(True)
_NUMERIC = frozenset({"int", "float", "bool"})
# builtins total on non-null arguments (the checker fixed their types)
_TEXT = frozenset({"lower", "strip", "first_line", "skill_base", "parse_float"})
_NUMS = frozenset({"min", "max", "clamp", "abs", "float"})
_LISTS = frozenset({"count", "exists", "all", "filter", "map"})


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float)


def _valid_regex(v: Any, flags: Any = 0) -> bool:
    if hasattr(v, "search"):
        return True  # a Regex value, checked when it was made
    if not isinstance(v, str) or not isinstance(flags, int):
        return False
    try:
        re.compile(v, flags & ~re.DEBUG)
    except (re.error, OverflowError, ValueError, TypeError, RecursionError):
        return False
    return True


class Totality:
    """Fills `raises` (node id -> may raise) for the nodes the analysis reached."""

    def __init__(self, facts: dict[int, Any]):
        self.facts = facts
        self.raises: dict[int, bool] = {}
        # the operation itself may raise on values its children can take (for the live
        # monitor, which bounds an operator from its operands' bounds)
        self.here: dict[int, bool] = {}

    def info(self, node: A.Node, names: dict[str, Info]) -> Info:
        i = self._info(node, names)
        self.raises[node.id] = i.raises
        return i

    def _const(self, node: A.Node) -> tuple[bool, Any]:
        f = self.facts.get(node.id)
        return (True, f.value) if f is not None and f.const else (False, None)

    def _info(self, node: A.Node, names: dict[str, Info]) -> Info:
        known, value = self._const(node)
        if known:  # folded: evaluation on constants succeeded and does not depend on the trace
            return Info(False, value is not None, _is_num(value))
        if isinstance(node, A.Lit):
            return Info(False, node.value is not None, _is_num(node.value))
        if isinstance(node, A.Name):
            if node.name in names:
                return names[node.name]
            return Info(False, True) if node.name == "trace" else UNSAFE
        if isinstance(node, A.Member):
            return self._member(node, names)
        if isinstance(node, A.Method):
            return self._method(node, names)
        if isinstance(node, A.Unary):
            o = self.info(node.operand, names)
            if node.op == "not":
                return Info(o.raises, True)
            self.here[node.id] = not o.num
            return Info(o.raises or not o.num, o.num, o.num)
        if isinstance(node, A.Binary):
            return self._binary(node, names)
        if isinstance(node, A.Cond):
            known, test = self._const(node.test)
            if known:
                self.info(node.test, names)
                return self.info(node.then if test else node.else_, names)
            t, a, b = (self.info(n, names) for n in (node.test, node.then, node.else_))
            return Info(t.raises or a.raises or b.raises, a.nonnull and b.nonnull,
                        a.num and b.num)
        if isinstance(node, A.ListLit | A.MapLit):
            items = node.items if isinstance(node, A.ListLit) else node.values
            parts = [self.info(i, names) for i in items]
            return Info(any(p.raises for p in parts), True)
        if isinstance(node, A.Call):
            return self._call(node, names)
        for child in A.children(node):  # Index and anything new: may raise
            self.info(child, names)
        return UNSAFE

    def _record_of(self, node: A.Node):
        f = self.facts.get(node.id)
        return BUILTIN_RECORDS.get(getattr(f, "elem", None) or "")

    def _member(self, node: A.Member, names: dict[str, Info]) -> Info:
        obj = self.info(node.obj, names)
        record = self._record_of(node.obj)
        if record is None or node.name not in record.fields or not obj.nonnull:
            return UNSAFE
        t = record.fields[node.name].type
        sure = not t.optional and t.name != "json"
        return Info(obj.raises, sure, sure and t.name in _NUMERIC)

    def _method(self, node: A.Method, names: dict[str, Info]) -> Info:
        obj = self.info(node.obj, names)
        args = [self.info(a, names) for a in node.args]
        record = self._record_of(node.obj)
        if record is None or node.name not in record.methods or not obj.nonnull:
            return UNSAFE
        consts = [self._const(a) for a in node.args]
        if not all(known and v is not None for known, v in consts):
            return UNSAFE
        if node.name == "matches" and not _valid_regex(consts[0][1]):
            return UNSAFE
        ret = record.methods[node.name].ret
        sure = not ret.optional and ret.name != "json"
        return Info(obj.raises or any(a.raises for a in args), sure,
                    sure and ret.name in _NUMERIC)

    def _binary(self, node: A.Binary, names: dict[str, Info]) -> Info:
        op = node.op
        a = self.info(node.left, names)
        if op in ("and", "or"):
            known, left = self._const(node.left)
            if known:  # folded by the analysis: the right side alone, or nothing
                if (op == "and") != bool(left):
                    return Info(False, True)
                return Info(self.info(node.right, names).raises, True)
        b = self.info(node.right, names)
        base = a.raises or b.raises
        if op in ("and", "or", "==", "!=", "in"):
            return Info(base, True)
        both = a.num and b.num
        if op in ("<", "<=", ">", ">="):
            self.here[node.id] = not both
            return Info(base or not both, True)
        if op in ("+", "-", "*"):
            self.here[node.id] = not both
            return Info(base or not both, both, both)
        if op in ("/", "%"):
            known, k = self._const(node.right)
            self.here[node.id] = not (both and known and _is_num(k) and k != 0)
            return Info(base or self.here[node.id], both, both)
        return UNSAFE

    def _call(self, node: A.Call, names: dict[str, Info]) -> Info:
        func = node.func
        if func in _LISTS and len(node.args) == 2 and isinstance(node.args[1], A.Lambda):
            items = self.info(node.args[0], names)
            lam = node.args[1]
            grows = getattr(self.facts.get(node.args[0].id), "mono", None) == "grows"
            body = self.info(lam.body, {**names, lam.param: Info(False, grows)})
            return Info(items.raises or not items.nonnull or body.raises, True,
                        func == "count")
        args = [self.info(a, names) if not isinstance(a, A.Lambda) else UNSAFE
                for a in node.args]
        base = any(a.raises for a in args)
        if func == "len" and args:
            return Info(base or not args[0].nonnull, True, True)
        if func in _NUMS:
            ok = all(a.num for a in args)
            self.here[node.id] = not ok
            return Info(base or not ok, ok, ok)
        if func == "str":
            return Info(base, True)
        if func == "or_else" and len(args) == 2:
            return Info(base, args[1].nonnull, args[1].num)
        if func in _TEXT and args:
            return Info(base or not args[0].nonnull, func != "parse_float")
        if func in ("mean", "mean_present", "sum") and args:
            return Info(base or not args[0].nonnull, True, True)
        if func in ("matches", "search", "try_search") and len(args) >= 2:
            known, pattern = self._const(node.args[1])
            kf, flags = self._const(node.args[2]) if len(node.args) > 2 else (True, 0)
            valid = func == "try_search" or (known and kf and _valid_regex(pattern, flags))
            sure = all(a.nonnull for a in args)
            return Info(base or not (valid and sure), func != "try_search")
        return UNSAFE


def may_raise(score: A.Node, lets: tuple[A.Let, ...], facts: dict[int, Any],
              outputs: tuple[A.Let, ...] = ()) -> Totality:
    """Which nodes may raise on some trace, in the grader's order: lets, score, outputs."""
    t = Totality(facts)
    names: dict[str, Info] = {}
    for let in lets:
        names[let.name] = t.info(let.expr, names)
    t.info(score, names)
    for out in outputs:
        t.info(out.expr, names)
    return t
