"""Type and effect checking of expressions (inline ones and those of definitions).

The AST is never modified: the checker fills side tables keyed by node id (`types`,
`effects`, `overloads`) and collects diagnostics, like cel-go's checker. Checking a
`.ce` module's records and criteria as wholes is `definitions.py`.
"""

from __future__ import annotations

import re

import attrs

from ce_lang.diagnostics import Diagnostics, did_you_mean
from ce_lang.lang import ast as A
from ce_lang.lang.builtins import BUILTINS, GLOBALS, Fn, Overload, regex_error
from ce_lang.lang.records import BUILTIN_RECORDS, RecordType
from ce_lang.lang.types import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    JSON,
    NULL,
    PRIMITIVES,
    REGEX,
    STR,
    T,
    assignable,
    is_numeric,
    join,
    list_of,
    map_of,
)

RESULT_KINDS = ("binary", "fraction", "continuous", "classification")
# `require kind: ...` -> the diagnostic code a violated constraint is reported with
REQUIRE_KINDS = {"range": "CE0104", "choice": "CE0105", "conflict": "CE0109",
                 "empty": "CE0110", "missing": "CE0102", "invalid": "CE0111"}
# in a `require` message: `{param}` its value, `{@param}` the field as the task spells it
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
FIELD_PLACEHOLDER = re.compile(r"\{@([A-Za-z_][A-Za-z0-9_]*)\}")
EFFECT_ORDER = ("pure", "trace", "workspace", "exec", "model")


@attrs.define
class Tables:
    types: dict[int, T] = attrs.field(factory=dict)
    effects: dict[int, frozenset[str]] = attrs.field(factory=dict)
    overloads: dict[int, Overload] = attrs.field(factory=dict)


@attrs.frozen
class CheckedDef:
    defn: A.CriterionDef
    params: dict[str, T]
    defaults: dict[str, A.Node]
    lets: dict[str, T]
    score_type: T
    effects: frozenset[str]
    tables: Tables


class Registry:
    """Record types and criterion definitions visible to a check."""

    def __init__(self) -> None:
        self.records: dict[str, RecordType] = dict(BUILTIN_RECORDS)
        self.record_defaults: dict[str, dict[str, A.Node]] = {}
        self.criteria: dict[str, CheckedDef] = {}
        self.origin: dict[str, str] = {}  # name -> "stdlib" | file
        # definitions whose check failed: known (a call is no "unknown type"), never run
        self.broken: set[str] = set()

    def resolve_type(self, texpr: A.TypeExpr, diags: Diagnostics) -> T:
        args = tuple(self.resolve_type(a, diags) for a in texpr.args)
        name = texpr.name
        if name in PRIMITIVES:
            if args:
                diags.emit("CE0608", f"type `{name}` takes no parameters", texpr.span)
            return attrs.evolve(PRIMITIVES[name], optional=texpr.optional)
        if name in ("list", "map"):
            if len(args) != 1:
                diags.emit("CE0608", f"`{name}` takes one type parameter, e.g. {name}[str]",
                           texpr.span)
                return T(name, (ANY,), texpr.optional)
            return T(name, args, texpr.optional)
        if name in self.records:
            return T(name, (), texpr.optional)
        diags.emit("CE0608", f"unknown type `{name}`", texpr.span,
                   help=did_you_mean(name, [*PRIMITIVES, "list", "map", *self.records]))
        return ANY


class Checker:
    def __init__(self, registry: Registry, diags: Diagnostics):
        self.reg = registry
        self.diags = diags
        self.tables = Tables()

    # -- expressions ------------------------------------------------------------------------
    def check(self, node: A.Node, scope: dict[str, T]) -> T:
        t, eff = self._check(node, scope)
        self.tables.types[node.id] = t
        self.tables.effects[node.id] = eff
        return t

    def eff(self, node: A.Node) -> frozenset[str]:
        return self.tables.effects.get(node.id, frozenset())

    def _check(self, node: A.Node, scope: dict[str, T]) -> tuple[T, frozenset[str]]:
        none: frozenset[str] = frozenset()
        if isinstance(node, A.Lit):
            if node.kind == "regex":
                problem = regex_error(node.value)
                if problem is not None:
                    self.diags.emit("CE0610", f"invalid regex literal: {problem}", node.span)
                return REGEX, none
            return {"int": INT, "float": FLOAT, "str": STR, "bool": BOOL,
                    "null": NULL}[node.kind], none
        if isinstance(node, A.Name):
            if node.name in scope:
                return scope[node.name], none
            if node.name in GLOBALS:
                t, effect, _ = GLOBALS[node.name]
                return t, frozenset({effect})
            self.diags.emit("CE0602", f"unknown name `{node.name}`", node.span,
                            help=did_you_mean(node.name, [*scope, *GLOBALS]))
            return ANY, none
        if isinstance(node, A.Lambda):
            self.diags.emit("CE0609", "a lambda (`x -> ...`) is only allowed as an argument of "
                            "count, exists, all, filter or map", node.span)
            return ANY, none
        if isinstance(node, A.Member):
            obj = self.check(node.obj, scope)
            return self.member(node, obj), self.eff(node.obj)
        if isinstance(node, A.Index):
            obj = self.check(node.obj, scope)
            idx = self.check(node.index, scope)
            effects = self.eff(node.obj) | self.eff(node.index)
            if obj.name == "list" and not obj.optional:
                self.expect(node.index, idx, INT)
                return obj.elem, effects
            if obj.name == "map" and not obj.optional:
                self.expect(node.index, idx, STR)
                return obj.elem.opt(), effects
            if obj.name in ("json", "any"):
                return obj if obj.name == "any" else JSON, effects
            self.diags.emit("CE0603", f"cannot index a value of type {obj}", node.obj.span)
            return ANY, effects
        if isinstance(node, A.Unary):
            t = self.check(node.operand, scope)
            if node.op == "not":
                self.expect(node.operand, t, BOOL)
                return BOOL, self.eff(node.operand)
            if not is_numeric(t) and t.name != "any":
                self.diags.emit("CE0603", f"`-` needs a number, found {t}", node.operand.span)
                return ANY, self.eff(node.operand)
            return t, self.eff(node.operand)
        if isinstance(node, A.Binary):
            return self.binary(node, scope)
        if isinstance(node, A.Cond):
            test = self.check(node.test, scope)
            self.expect(node.test, test, BOOL)
            when_true, when_false = narrowing(node.test)
            then = self.check(node.then, _narrow(scope, when_true))
            else_ = self.check(node.else_, _narrow(scope, when_false))
            effects = self.eff(node.test) | self.eff(node.then) | self.eff(node.else_)
            joined = join(then, else_)
            if joined is None:
                self.diags.emit("CE0603", f"the branches have different types: {then} and "
                                f"{else_}", node.span)
                return ANY, effects
            return joined, effects
        if isinstance(node, A.ListLit):
            item_types = [self.check(i, scope) for i in node.items]
            effects = frozenset().union(*(self.eff(i) for i in node.items))
            elem: T | None = item_types[0] if item_types else ANY
            for t, item in zip(item_types[1:], node.items[1:], strict=True):
                elem = join(elem, t) if elem is not None else None
                if elem is None:
                    self.diags.emit("CE0603", f"list items of different types ({t})", item.span)
                    elem = ANY
            return list_of(elem or ANY), effects
        if isinstance(node, A.MapLit):
            value_types = [self.check(v, scope) for v in node.values]
            effects = frozenset().union(*(self.eff(v) for v in node.values))
            elem = value_types[0] if value_types else JSON
            for t in value_types[1:]:
                elem = join(elem, t) or JSON
            return map_of(elem), effects
        if isinstance(node, A.Call):
            return self.call(node, scope)
        if isinstance(node, A.Method):
            return self.method(node, scope)
        raise AssertionError(f"unknown node {node!r}")

    def member(self, node: A.Member, obj: T) -> T:
        if obj.name in ("json", "any"):
            return obj if obj.name == "any" else JSON
        record = self.reg.records.get(obj.name)
        if record is None or obj.optional:
            what = f"{obj} (check it against null first)" if obj.optional else str(obj)
            self.diags.emit("CE0605", f"a value of type {what} has no field `{node.name}`",
                            node.name_span or node.span)
            return ANY
        field = record.fields.get(node.name)
        if field is None:
            self.diags.emit("CE0605", f"{record.name} has no field `{node.name}`",
                            node.name_span or node.span,
                            help=did_you_mean(node.name, list(record.fields)))
            return ANY
        return field.type

    def binary(self, node: A.Binary, scope: dict[str, T]) -> tuple[T, frozenset[str]]:
        op = node.op
        left = self.check(node.left, scope)
        if op in ("and", "or"):
            when_true, when_false = narrowing(node.left)
            right = self.check(node.right, _narrow(scope, when_true if op == "and"
                                                   else when_false))
        else:
            right = self.check(node.right, scope)
        effects = self.eff(node.left) | self.eff(node.right)
        if ANY in (left, right):
            return (BOOL if op in ("and", "or", "==", "!=", "<", "<=", ">", ">=", "in")
                    else ANY), effects
        if op in ("and", "or"):
            self.expect(node.left, left, BOOL)
            self.expect(node.right, right, BOOL)
            return BOOL, effects
        if op in ("==", "!="):
            if not (assignable(left, right) or assignable(right, left)):
                self.diags.emit("CE0603", f"`{op}` compares {left} with {right}: they can never "
                                "be equal", node.span)
            return BOOL, effects
        if op == "in":
            ok = (right.name in ("str", "path") and left.name in ("str", "path")) or (
                right.name == "list" and assignable(left, right.elem)) or (
                right.name == "map" and left.name == "str") or right.name == "json"
            if right.optional or not ok:
                hint = " (check it against null first, or use or_else)" if right.optional \
                    else ""
                self.diags.emit("CE0603", f"`in` cannot look for {left} in {right}{hint}",
                                node.span)
            return BOOL, effects
        if op in ("<", "<=", ">", ">="):
            if not ((is_numeric(left) and is_numeric(right))
                    or (left.name == right.name == "str" and not left.optional
                        and not right.optional)):
                self.diags.emit("CE0603", f"`{op}` needs two numbers (or two strings), found "
                                f"{left} and {right}", node.span)
            return BOOL, effects
        if op == "+" and left.name == right.name == "str" and not (left.optional or right.optional):
            return STR, effects
        if op == "+" and left.name == right.name == "list":
            return list_of(join(left.elem, right.elem) or ANY), effects
        if not (is_numeric(left) and is_numeric(right)):
            both = "two numbers or two strings" if op == "+" else "two numbers"
            self.diags.emit("CE0603", f"`{op}` needs {both}, found {left} and {right}",
                            node.span)
            return ANY, effects
        if op == "/":
            return FLOAT, effects
        return (INT if left.name == right.name == "int" else FLOAT), effects

    # -- calls ---------------------------------------------------------------------------------
    def call(self, node: A.Call, scope: dict[str, T]) -> tuple[T, frozenset[str]]:
        fn = BUILTINS.get(node.func)
        if fn is None:
            for arg in node.args:
                if not isinstance(arg, A.Lambda):
                    self.check(arg, scope)
            self.diags.emit("CE0604", f"unknown function `{node.func}`", node.span,
                            help=did_you_mean(node.func, list(BUILTINS)))
            return ANY, frozenset()
        effects = frozenset() if fn.effect == "pure" else frozenset({fn.effect})
        plain = [None if isinstance(a, A.Lambda) else self.check(a, scope) for a in node.args]
        for a in node.args:
            if not isinstance(a, A.Lambda):
                effects |= self.eff(a)
        candidates = [o for o in fn.overloads if len(o.params) == len(node.args)]
        for i, a in enumerate(node.args):
            if isinstance(a, A.Lambda) and not any(
                    isinstance(o.params[i], Fn) for o in candidates):
                self.diags.emit("CE0609", f"`{node.func}` does not take a lambda here; `x -> "
                                "...` is only allowed as the predicate or mapper of count, "
                                "exists, all, filter and map", a.span)
                return _subst(fn.overloads[0].ret, {}) if not _has_var(
                    fn.overloads[0].ret) else ANY, effects
        for overload in candidates:
            bindings: dict[str, T] = {}
            if all(isinstance(p, Fn) == isinstance(a, A.Lambda)
                   and (isinstance(p, Fn) or _unify(p, t, bindings)
                        or (p.name == "regex" and self.accepts(a, t, p, node.func)))
                   for p, a, t in zip(overload.params, node.args, plain, strict=True)):
                for i, (p, a, t) in enumerate(zip(overload.params, node.args, plain,
                                                  strict=True)):
                    if not isinstance(p, Fn) and p.name in ("regex", "path"):
                        self.accepts(a, t, p, node.func)
                    elif node.func in ("search", "try_search") and i == 1:
                        self.accepts(a, t, REGEX, node.func)  # a literal pattern: compile it
                for p, a in zip(overload.params, node.args, strict=True):
                    if isinstance(p, Fn):
                        elem = _subst(p.param, bindings)
                        body_t = self.check(a.body, {**scope, a.param: elem})
                        self.tables.types[a.id] = body_t
                        effects |= self.eff(a.body)
                        self.tables.effects[a.id] = self.eff(a.body)
                        expected = _subst(p.ret, bindings)
                        if expected.name.startswith("'"):
                            bindings[expected.name] = body_t
                        elif not assignable(body_t, expected):
                            self.diags.emit("CE0603", f"`{node.func}` needs a lambda returning "
                                            f"{expected}, this one returns {body_t}", a.body.span)
                self.tables.overloads[node.id] = overload
                return _subst(overload.ret, bindings), effects
        shown = ", ".join("lambda" if t is None else str(t) for t in plain)
        sigs = "; ".join(f"{node.func}({', '.join(signature_text(p) for p in o.params)})"
                         for o in fn.overloads)
        self.diags.emit("CE0604", f"`{node.func}` does not take ({shown})", node.span,
                        notes=(f"signatures: {sigs}",))
        return _subst(fn.overloads[0].ret, {}) if not _has_var(fn.overloads[0].ret) else ANY, \
            effects

    def method(self, node: A.Method, scope: dict[str, T]) -> tuple[T, frozenset[str]]:
        obj = self.check(node.obj, scope)
        arg_types = [self.check(a, scope) for a in node.args]
        effects = self.eff(node.obj).union(*(self.eff(a) for a in node.args))
        if obj.name == "any":
            return ANY, effects
        record = self.reg.records.get(obj.name)
        sig = record.methods.get(node.name) if record and not obj.optional else None
        if sig is None:
            names = list(record.methods) if record else []
            hint = " (check it against null first)" if obj.optional and record else ""
            self.diags.emit("CE0604", f"{obj} has no method `{node.name}`{hint}",
                            node.name_span or node.span,
                            help=did_you_mean(node.name, names) if names else None)
            return ANY, effects
        want = ", ".join(map(str, sig.params))
        if len(arg_types) != len(sig.params):
            self.diags.emit("CE0604", f"`{node.name}` takes ({want})",
                            node.name_span or node.span)
            return sig.ret, effects
        for arg, a, p in zip(node.args, arg_types, sig.params, strict=True):
            if not self.accepts(arg, a, p, node.name):
                self.diags.emit("CE0603", f"`{node.name}` takes ({want}); this argument is {a}",
                                arg.span)
        return sig.ret, effects

    def accepts(self, arg: A.Node, got: T, want: T, what: str = "path") -> bool:
        """Argument passing: assignability, plus a string literal where a regex is expected
        (compiled here) and a literal workspace path (checked here)."""
        if want.name == "regex" and got.name == "str" and not got.optional \
                and isinstance(arg, A.Lit):
            problem = regex_error(arg.value)
            if problem is not None:
                self.diags.emit("CE0610", f"invalid regular expression: {problem}", arg.span)
            return True
        if want.name == "path" and isinstance(arg, A.Lit) and isinstance(arg.value, str):
            from ce_lang.validate import check_workspace_path

            check_workspace_path(arg.value, arg.span, what, self.diags,
                                 label=f"`{what}` path")
        return assignable(got, want)

    def expect(self, node: A.Node, got: T, want: T) -> None:
        if not assignable(got, want):
            hint = " (check it against null first)" if got.optional and assignable(
                got.required, want) else ""
            self.diags.emit("CE0603", f"expected {want}, found {got}{hint}", node.span)


def narrowing(test: A.Node) -> tuple[set[str], set[str]]:
    """Names known non-null when `test` is true, and when it is false."""
    if isinstance(test, A.Binary) and test.op in ("==", "!="):
        name = None
        if isinstance(test.left, A.Name) and _is_null(test.right):
            name = test.left.name
        elif isinstance(test.right, A.Name) and _is_null(test.left):
            name = test.right.name
        if name is not None:
            return (set(), {name}) if test.op == "==" else ({name}, set())
    if isinstance(test, A.Unary) and test.op == "not":
        t, f = narrowing(test.operand)
        return f, t
    if isinstance(test, A.Binary) and test.op == "and":
        lt, _ = narrowing(test.left)
        rt, _ = narrowing(test.right)
        return lt | rt, set()
    if isinstance(test, A.Binary) and test.op == "or":
        _, lf = narrowing(test.left)
        _, rf = narrowing(test.right)
        return set(), lf | rf
    return set(), set()


def _is_null(node: A.Node) -> bool:
    return isinstance(node, A.Lit) and node.kind == "null"


def _narrow(scope: dict[str, T], names: set[str]) -> dict[str, T]:
    if not names:
        return scope
    return {k: (v.required if k in names else v) for k, v in scope.items()}


def _unify(param: T, arg: T | None, bindings: dict[str, T]) -> bool:
    if arg is None:
        return False
    if param.name.startswith("'"):
        bound = bindings.get(param.name)
        if bound is None:
            bindings[param.name] = arg
            return True
        return assignable(arg, bound)
    if param.args and arg.name == param.name and not arg.optional:
        return all(_unify(p, a, bindings) for p, a in zip(param.args, arg.args, strict=False))
    if param.name in ("list", "map") and arg.name == param.name and not arg.args:
        return True
    return assignable(arg, param)


def _subst(t: T, bindings: dict[str, T]) -> T:
    if t.name.startswith("'"):
        return bindings.get(t.name, ANY)
    if t.args:
        return T(t.name, tuple(_subst(a, bindings) for a in t.args), t.optional)
    return t


def _has_var(t: T) -> bool:
    return t.name.startswith("'") or any(_has_var(a) for a in t.args)


def signature_text(p: T | Fn) -> str:
    if isinstance(p, Fn):
        return f"{str(p.param).replace(chr(39), '')} -> {str(p.ret).replace(chr(39), '')}"
    return str(p).replace("'", "")


def check_expression(node: A.Node, registry: Registry, diags: Diagnostics,
                     scope: dict[str, T] | None = None) -> tuple[T, Tables]:
    checker = Checker(registry, diags)
    t = checker.check(node, scope or {})
    return t, checker.tables


def effect_rank(effects: frozenset[str]) -> str:
    """The strongest effect: what decides where and when a criterion can be evaluated."""
    best = "pure"
    for e in effects:
        if EFFECT_ORDER.index(e) > EFFECT_ORDER.index(best):
            best = e
    return best


def rescore_offline(effects: frozenset[str]) -> str:
    """How a criterion with these effects is re-scored from an archive (`ce rescore`):
    one wording for `ce criteria show` and the generated reference."""
    if "model" in effects:
        return "from the cached verdict (`judges/<sha256>.json`); otherwise needs the judge"
    if "exec" in effects:
        return "yes, re-running its command in the restored workspace"
    return "yes, from the archived trace and workspace"
