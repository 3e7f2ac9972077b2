"""Criteria compiled to Python closures, once per program: the evidence evaluator's exact
semantics without its per-node dispatch.

`EvidenceEvaluator` (interpreter.py) walks the tree on every trial: an isinstance chain
per node, ~270 node visits per trial of six criteria. Re-scoring grades thousands of
trials of one plan, so each criterion's nodes are turned once into closures that do only
the node's own work. Same values, same evidence (the value of every node outside
lambdas, in evaluation order; what each comprehension kept), same errors: a differential
test grades both ways and compares.

Memos: a shell command's normalized forms (shlex parses) are made once per distinct
command in a process (archives repeat their commands trial after trial), and only when
the raw command does not match already; another tool's `matches` texts once per call
per grading, not once per criterion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ce_lang.api import (
    CriterionError,
    Link,
    Regex,
    ToolCallView,
    index_value,
    normalize_shell,
    unwrap_shell,
)
from ce_lang.api import ast as A

COMPREHENSIONS = ("count", "exists", "all", "filter", "map")

Fn = Callable[["_State", dict[str, Any]], Any]


class _State:
    """What one criterion's evaluation writes: its evidence, and the per-grading memo."""

    __slots__ = ("host", "matched", "texts", "values")

    def __init__(self, host: Any, texts: dict[int, tuple[ToolCallView, list[str]]]):
        self.host = host
        self.values: dict[int, Any] = {}
        self.matched: dict[int, list[int]] = {}
        self.texts = texts


class CompiledEvaluator:
    """Drop-in for `EvidenceEvaluator` (eval, values, matched) over compiled closures."""

    __slots__ = ("_compiler", "_state", "matched", "values")

    def __init__(self, compiler: _Compiler, state: _State):
        self._compiler, self._state = compiler, state
        self.values, self.matched = state.values, state.matched

    def eval(self, node: A.Node, env: dict[str, Any]) -> Any:
        fn = self._compiler.roots.get(node.id)
        if fn is None:
            fn = self._compiler.roots[node.id] = self._compiler.node(node)
        return fn(self._state, env)


class CompiledProgram:
    """A factory for `Grader(evaluator=...)`: (host, lambda nodes, links) -> evaluator.
    A criterion's closures are built the first time its links are seen; keep one
    factory per program (a plan's criteria). Given the program, what inside a lambda
    depends on the criterion's parameters only (`tool_name == null`, evaluated per
    tool call) is computed once: it has no evidence of its own to record."""

    def __init__(self, program: Any = None) -> None:
        self._by_links: dict[int, tuple[Mapping[int, Link], _Compiler]] = {}
        self._memo: tuple[Any, dict[int, tuple[ToolCallView, list[str]]]] = (None, {})
        self._params: dict[int, dict[str, Any]] = {}
        for c in program.criteria if program is not None else ():
            self._params[id(c.links)] = _static_params(c.instance)

    def __call__(self, host: Any, nodes: frozenset[int] | set[int],
                 links: Mapping[int, Link]) -> CompiledEvaluator:
        hit = self._by_links.get(id(links))
        if hit is None or hit[0] is not links:
            hit = self._by_links[id(links)] = (links, _Compiler(
                frozenset(nodes), links, self._params.get(id(links))))
        if self._memo[0] is not host:  # the texts memo lives for one host (one grading)
            self._memo = (host, {})
        return CompiledEvaluator(hit[1], _State(host, self._memo[1]))


def _static_params(inst: Any) -> dict[str, Any]:
    """The instance's parameters no let and no lambda parameter shadows: constants."""
    shadowed = {let.name for let in inst.lets}
    for root in (inst.score, *(let.expr for let in inst.lets), *(o.expr for o in inst.outputs)):
        if root is not None:
            shadowed.update(n.param for n in A.walk(root) if isinstance(n, A.Lambda))
    return {k: v for k, v in dict(inst.params).items() if k not in shadowed}


_STATIC_KINDS = (A.Name, A.Unary, A.Binary, A.Cond, A.ListLit, A.MapLit, A.Member, A.Index)


class _Compiler:
    def __init__(self, inside: frozenset[int], links: Mapping[int, Link],
                 params: dict[str, Any] | None = None):
        self.inside, self.links, self.params = inside, links, params
        self.roots: dict[int, Fn] = {}
        self._static: dict[int, bool] = {}

    def node(self, node: A.Node) -> Fn:
        if node.id not in self.inside and isinstance(node, A.Lit | A.Name):
            return self._recorded_leaf(node)  # the most common nodes: one call, not two
        if node.id in self.inside and self.params is not None \
                and isinstance(node, A.Binary) and node.op in ("and", "or") \
                and self._is_static(node.left):
            decided = self._short_circuit(node)
            if decided is not None:
                return decided
        raw = self._raw(node)
        if node.id in self.inside:
            if self.params is not None and isinstance(node, _STATIC_KINDS) \
                    and self._is_static(node):
                try:  # a constant: computed now (an error is left to happen per trial)
                    value = raw(_State(None, {}), dict(self.params))
                except Exception:
                    return raw
                return lambda s, env: value
            return raw
        nid = node.id

        def recorded(s: _State, env: dict[str, Any]) -> Any:
            value = raw(s, env)
            s.values[nid] = value
            return value

        return recorded

    def _short_circuit(self, node: A.Binary) -> Fn | None:
        """`and` / `or` inside a lambda whose left operand is a constant (`tool_name ==
        null or c.tool == tool_name`): decided now, or just the right operand's truth
        (nothing inside a lambda is recorded). None: the constant raised; as written."""
        try:
            left = bool(self.node(node.left)(_State(None, {}), dict(self.params or {})))
        except Exception:
            return None
        if left is (node.op == "or"):  # `true or ...`, `false and ...`
            return lambda s, env: left
        right = self.node(node.right)
        return lambda s, env: bool(right(s, env))

    def _recorded_leaf(self, node: A.Lit | A.Name) -> Fn:
        nid = node.id
        if isinstance(node, A.Lit):
            value = Regex(node.value) if node.kind == "regex" else node.value

            def literal(s: _State, env: dict[str, Any]) -> Any:
                s.values[nid] = value
                return value

            return literal
        name, lookup = node.name, _name(node.name)

        def recorded_name(s: _State, env: dict[str, Any]) -> Any:
            value = env[name] if name in env else lookup(s, env)
            s.values[nid] = value
            return value

        return recorded_name

    def _is_static(self, node: A.Node) -> bool:
        """Only literals, unshadowed parameters and operators over them."""
        hit = self._static.get(node.id)
        if hit is None:
            if isinstance(node, A.Lit):
                hit = node.kind != "regex"
            elif isinstance(node, A.Name):
                hit = self.params is not None and node.name in self.params
            elif isinstance(node, _STATIC_KINDS):
                hit = all(self._is_static(c) for c in _children(node))
            else:
                hit = False
            self._static[node.id] = hit
        return hit

    def _raw(self, node: A.Node) -> Fn:
        if isinstance(node, A.Lit):
            value = Regex(node.value) if node.kind == "regex" else node.value
            return lambda s, env: value
        if isinstance(node, A.Name):
            return _name(node.name)
        if isinstance(node, A.Member):
            return _member(self.node(node.obj), node.name)
        if isinstance(node, A.Index):
            return _index(self.node(node.obj), self.node(node.index))
        if isinstance(node, A.Unary):
            operand = self.node(node.operand)
            if node.op == "not":
                return lambda s, env: not operand(s, env)
            return lambda s, env: -operand(s, env)
        if isinstance(node, A.Binary):
            return _binary(node.op, self.node(node.left), self.node(node.right))
        if isinstance(node, A.Cond):
            test, then, else_ = self.node(node.test), self.node(node.then), \
                self.node(node.else_)
            return lambda s, env: then(s, env) if test(s, env) else else_(s, env)
        if isinstance(node, A.ListLit):
            items = tuple(self.node(i) for i in node.items)
            return lambda s, env: [f(s, env) for f in items]
        if isinstance(node, A.MapLit):
            pairs = tuple(zip(node.keys, (self.node(v) for v in node.values), strict=True))
            return lambda s, env: {k: f(s, env) for k, f in pairs}
        if isinstance(node, A.Call):
            return self._call(node)
        if isinstance(node, A.Method):
            return self._method(node)
        kind = type(node).__name__

        def cannot(s: _State, env: dict[str, Any]) -> Any:
            raise CriterionError(f"cannot evaluate {kind}")

        return cannot

    def _call(self, node: A.Call) -> Fn:
        if node.func in COMPREHENSIONS and node.id not in self.inside \
                and len(node.args) == 2 and isinstance(node.args[1], A.Lambda):
            return _comprehension(node.func, node.id, self.node(node.args[0]),
                                  node.args[1].param, self.node(node.args[1].body))
        impl = self.links[node.id].impl
        func = node.func
        parts: list[tuple[bool, Any]] = []
        for a in node.args:
            if isinstance(a, A.Lambda):
                parts.append((True, (a.param, self.node(a.body))))
            else:
                parts.append((False, self.node(a)))
        if not any(is_lambda for is_lambda, _ in parts):
            return _plain_call(impl, func, tuple(part for _, part in parts))

        def call(s: _State, env: dict[str, Any]) -> Any:
            args: list[Any] = []
            for is_lambda, part in parts:
                if is_lambda:
                    args.append(_closure(s, env, *part))
                else:
                    args.append(part(s, env))
            if impl is not None:
                return impl(*args)
            return s.host.call(func, args)

        return call

    def _method(self, node: A.Method) -> Fn:
        obj_fn = self.node(node.obj)
        arg_fns = tuple(self.node(a) for a in node.args)
        link = self.links[node.id]
        name = node.name
        receiver, impl, regex_args = link.receiver, link.impl, link.regex_args
        fast_matches = receiver is ToolCallView and impl is ToolCallView.matches

        def method(s: _State, env: dict[str, Any]) -> Any:
            obj = obj_fn(s, env)
            args = [f(s, env) for f in arg_fns]
            if receiver is not None and type(obj) is receiver:
                for i in regex_args:
                    if isinstance(args[i], str):
                        args[i] = Regex(args[i])
                if fast_matches and len(args) == 1 and type(args[0]) is Regex:
                    return _matches(s, obj, args[0])
                return impl(obj, *args)
            if name == "matches" and args and isinstance(args[0], str):
                args[0] = Regex(args[0])
            return getattr(obj, name)(*args)

        return method


def _plain_call(impl: Any, func: str, fns: tuple[Fn, ...]) -> Fn:
    """A call without lambda arguments: the arguments evaluated in order, then the
    builtin (or the host's effect), without building a list where none is needed."""
    if impl is None:
        return lambda s, env: s.host.call(func, [f(s, env) for f in fns])
    if len(fns) == 1:
        (f0,) = fns
        return lambda s, env: impl(f0(s, env))
    if len(fns) == 2:
        f0, f1 = fns
        return lambda s, env: impl(f0(s, env), f1(s, env))
    return lambda s, env: impl(*[f(s, env) for f in fns])


def _children(node: A.Node) -> tuple[A.Node, ...]:
    if isinstance(node, A.Unary):
        return (node.operand,)
    if isinstance(node, A.Binary):
        return (node.left, node.right)
    if isinstance(node, A.Cond):
        return (node.test, node.then, node.else_)
    if isinstance(node, A.ListLit):
        return tuple(node.items)
    if isinstance(node, A.MapLit):
        return tuple(node.values)
    if isinstance(node, A.Member):
        return (node.obj,)
    if isinstance(node, A.Index):
        return (node.obj, node.index)
    return ()


def _matches(s: _State, call: ToolCallView, pattern: Regex) -> bool:
    """`ToolCallView.matches`: the pattern searched in each of the call's texts, in
    order. The raw command is searched before its shell-normalized forms are made
    (shlex parses, once per distinct command in a process, only when the raw one
    misses; a call without a command: its texts once per call per grading)."""
    cmd = call.command
    if cmd is not None:
        if pattern.search(cmd):
            return True
        forms = _FORMS.get(cmd)
        if forms is None:
            forms = _shell_forms(cmd)
        return any(pattern.search(t) for t in forms)
    hit = s.texts.get(id(call))
    if hit is None or hit[0] is not call:
        hit = s.texts[id(call)] = (call, call.texts())
    return any(pattern.search(t) for t in hit[1])


# a command's shell-normalized forms after the raw one (a function of the string only:
# archives repeat their commands, trial after trial)
_FORMS: dict[str, tuple[str, ...]] = {}


def _shell_forms(cmd: str) -> tuple[str, ...]:
    """`texts()[1:]` of a call whose command is `cmd`: the unwrapped command parsed once
    instead of twice."""
    unwrapped = unwrap_shell(cmd)
    forms = [cmd]
    for form in (unwrapped, _normalized(unwrapped)):
        if form not in forms:
            forms.append(form)
    if len(_FORMS) >= 20_000:
        _FORMS.clear()
    out = _FORMS[cmd] = tuple(forms[1:])
    return out


_normalized = normalize_shell


def _closure(s: _State, env: dict[str, Any], param: str, body: Fn) -> Callable[[Any], Any]:
    def apply(x: Any) -> Any:
        return body(s, {**env, param: x})

    return apply


def _comprehension(func: str, nid: int, items_fn: Fn, param: str, body: Fn) -> Fn:
    """count / exists / all / filter / map outside lambdas: what each kept is evidence."""
    if func == "map":
        return lambda s, env: [body(s, {**env, param: item}) for item in items_fn(s, env)]

    def comprehension(s: _State, env: dict[str, Any]) -> Any:
        items = items_fn(s, env)
        hits = []
        inner = dict(env)  # one scope for all elements: closures made in the body are
        for i, item in enumerate(items):  # called before the next element, never kept
            inner[param] = item
            ok = body(s, inner) is True
            if ok:
                hits.append(i)
            if (func == "exists" and ok) or (func == "all" and not ok):
                break
        kept = [items[i] for i in hits]
        s.matched[nid] = [items[i].index if isinstance(items[i], ToolCallView) else i
                          for i in hits]
        if func == "count":
            return len(kept)
        if func == "exists":
            return bool(kept)
        if func == "all":
            return len(kept) == len(items)
        return kept

    return comprehension


def _eq(a: Any, b: Any) -> bool:
    """The language's `==` (evaluate.py's): a bool never equals a number."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return a == b


def _name(name: str) -> Fn:
    if name == "trace":
        def trace(s: _State, env: dict[str, Any]) -> Any:
            if name in env:
                return env[name]
            if s.host.trace is None:
                raise CriterionError("no agent trace is available")
            return s.host.trace

        return trace

    def lookup(s: _State, env: dict[str, Any]) -> Any:
        try:
            return env[name]
        except KeyError:
            raise CriterionError(f"unbound name {name!r}") from None

    return lookup


def _member(obj_fn: Fn, name: str) -> Fn:
    def member(s: _State, env: dict[str, Any]) -> Any:
        obj = obj_fn(s, env)
        if isinstance(obj, dict):
            return obj.get(name)
        if obj is None:
            raise CriterionError(f"`.{name}` of null")
        return getattr(obj, name)

    return member


def _index(obj_fn: Fn, idx_fn: Fn) -> Fn:
    def index(s: _State, env: dict[str, Any]) -> Any:
        return index_value(obj_fn(s, env), idx_fn(s, env))

    return index


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "%": lambda a, b: a % b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def _binary(op: str, left: Fn, right: Fn) -> Fn:
    if op == "and":
        return lambda s, env: bool(left(s, env)) and bool(right(s, env))
    if op == "or":
        return lambda s, env: bool(left(s, env)) or bool(right(s, env))
    if op == "==":
        def eq(s: _State, env: dict[str, Any]) -> Any:
            a = left(s, env)
            b = right(s, env)
            return (type(a) is bool) == (type(b) is bool) and a == b  # _eq, inline

        return eq
    if op == "!=":
        return lambda s, env: not _eq(left(s, env), right(s, env))
    if op == "in":
        def contains(s: _State, env: dict[str, Any]) -> Any:
            a = left(s, env)
            b = right(s, env)
            return False if b is None else a in b

        return contains
    fn = _ARITH.get(op)
    if fn is None:
        def unknown(s: _State, env: dict[str, Any]) -> Any:
            left(s, env)
            right(s, env)
            raise CriterionError(f"unknown operator {op}")

        return unknown

    def arith(s: _State, env: dict[str, Any]) -> Any:
        a = left(s, env)
        b = right(s, env)
        try:
            return fn(a, b)
        except ZeroDivisionError as exc:
            raise CriterionError("division by zero") from exc
        except TypeError as exc:
            raise CriterionError(f"`{op}` on {a!r} and {b!r}") from exc

    return arith


def compiled_grader(plan: Any, program: Any) -> Any:
    """A `Grader` of `plan` over compiled closures (`CompiledGrader`)."""
    return _grader_class()(plan, program)


_GRADER: list[type] = []


def _grader_class() -> type:
    """`CompiledGrader`, defined on first use (interpreter.py imports the runtime's host,
    which this module does not need otherwise)."""
    if _GRADER:
        return _GRADER[0]
    from ce_runtime.grade.interpreter import (
        Grader,
        disabled_result,
        evaluated_result,
        is_disabled,
        summarize,
    )

    class CompiledGrader(Grader):
        """`Grader(plan, program=program, evaluator=CompiledProgram(program))`, with what
        the interpreter looks up per criterion per trial (is it disabled, its compiled
        closures, the early-stop gate) looked up once per plan. The same results: the
        differential test grades with all of them."""

        def __init__(self, plan: Any, program: Any) -> None:
            factory = CompiledProgram(program)
            super().__init__(plan, program=program, evaluator=factory)
            self._criteria = []
            for call, inst, nodes, links in zip(plan.criteria, self.instances,
                                                self._lambda_nodes, self._links, strict=True):
                compiler = _Compiler(frozenset(nodes), links, factory._params.get(id(links)))
                self._criteria.append((call, inst, compiler, is_disabled(call)))
            self._gate = plan.early_stop.gate_threshold \
                if plan.early_stop.rule == "weighted" else None

        def grade(self, host: Any, stopped_early: bool = False,
                  armed: tuple[str, ...] = ()) -> Any:
            texts: dict[int, tuple[ToolCallView, list[str]]] = {}  # one grading's memo
            has_current = hasattr(host, "current")
            results = []
            for call, inst, compiler, disabled in self._criteria:
                advisory = stopped_early and call.id not in armed
                if disabled:  # never call the model: out of the score and the gate
                    results.append(disabled_result(call, inst, advisory))
                    continue
                if has_current:
                    host.current = call.id  # what it runs and asks is filed under it
                results.append(evaluated_result(
                    call, inst, advisory, CompiledEvaluator(compiler, _State(host, texts))))
            return summarize(results, stopped_early, self._gate)

    _GRADER.append(CompiledGrader)
    return CompiledGrader
