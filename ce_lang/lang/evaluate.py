"""Evaluate checked expressions. Pure builtins run here; effects go through a `Host`.

The same evaluator folds constants in the compiler and grades trials in the runtime (which
supplies a host that reads the workspace, runs commands and calls judges). Given a link
table (a `Program`'s, `ce_lang.lang.program`), calls and methods run what the table says
each node resolved to when the program was built; without one (constant folding at
compile time) they are found by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from ce_lang.lang import ast as A
from ce_lang.lang.builtins import BUILTINS, CriterionError
from ce_lang.lang.values import Regex, TraceView


class Host(Protocol):
    trace: TraceView | None

    def call(self, name: str, args: list[Any]) -> Any: ...


class NoHost:
    """No trace, no workspace: evaluating anything effectful is a bug in the caller."""

    trace = None

    def call(self, name: str, args: list[Any]) -> Any:
        raise CriterionError(f"`{name}` is not available here")


@attrs.frozen(slots=True)
class Link:
    """What a Call or Method node runs, resolved once. A call: the builtin's `impl` (None:
    an effectful builtin, which the host performs by `name`). A method: `impl` is the
    record class's method for receivers of class `receiver` (arguments at `regex_args`
    given as strings become regexes); with no `receiver` (a receiver the checker typed
    `any`) the method is found on the value."""

    name: str
    impl: Callable[..., Any] | None
    overload: Any = None  # the checker's resolved overload (calls)
    receiver: type | None = None
    regex_args: tuple[int, ...] = ()


class Evaluator:
    def __init__(self, host: Host | None = None,
                 on_value: Callable[[A.Node, Any], None] | None = None,
                 links: Mapping[int, Link] | None = None):
        self.host = host or NoHost()
        self.on_value = on_value  # evidence hook: every evaluated node and its value
        self.links = links  # node id -> Link (a program's); None: dispatch by name

    def eval(self, node: A.Node, env: dict[str, Any]) -> Any:
        value = self._eval(node, env)
        if self.on_value is not None:
            self.on_value(node, value)
        return value

    def _eval(self, node: A.Node, env: dict[str, Any]) -> Any:
        if isinstance(node, A.Lit):
            return Regex(node.value) if node.kind == "regex" else node.value
        if isinstance(node, A.Name):
            if node.name in env:
                return env[node.name]
            if node.name == "trace":
                if self.host.trace is None:
                    raise CriterionError("no agent trace is available")
                return self.host.trace
            raise CriterionError(f"unbound name {node.name!r}")
        if isinstance(node, A.Member):
            obj = self.eval(node.obj, env)
            if isinstance(obj, dict):
                return obj.get(node.name)
            if obj is None:
                raise CriterionError(f"`.{node.name}` of null")
            return getattr(obj, node.name)
        if isinstance(node, A.Index):
            return index_value(self.eval(node.obj, env), self.eval(node.index, env))
        if isinstance(node, A.Unary):
            v = self.eval(node.operand, env)
            return (not v) if node.op == "not" else -v
        if isinstance(node, A.Binary):
            return self.binary(node, env)
        if isinstance(node, A.Cond):
            return self.eval(node.then if self.eval(node.test, env) else node.else_, env)
        if isinstance(node, A.ListLit):
            return [self.eval(i, env) for i in node.items]
        if isinstance(node, A.MapLit):
            return {k: self.eval(v, env) for k, v in zip(node.keys, node.values, strict=True)}
        if isinstance(node, A.Call):
            return self.call(node, env)
        if isinstance(node, A.Method):
            obj = self.eval(node.obj, env)
            args = [self.eval(a, env) for a in node.args]
            if self.links is not None:
                link = self.links[node.id]
                if link.receiver is not None and type(obj) is link.receiver:
                    for i in link.regex_args:
                        if isinstance(args[i], str):
                            args[i] = Regex(args[i])
                    return link.impl(obj, *args)
            if node.name == "matches" and args and isinstance(args[0], str):
                args[0] = Regex(args[0])
            return getattr(obj, node.name)(*args)
        raise CriterionError(f"cannot evaluate {type(node).__name__}")

    def binary(self, node: A.Binary, env: dict[str, Any]) -> Any:
        op = node.op
        left = self.eval(node.left, env)
        if op == "and":
            return bool(left) and bool(self.eval(node.right, env))
        if op == "or":
            return bool(left) or bool(self.eval(node.right, env))
        right = self.eval(node.right, env)
        if op == "==":
            return _eq(left, right)
        if op == "!=":
            return not _eq(left, right)
        if op == "in":
            if right is None:
                return False
            return left in right
        try:
            if op == "+":
                return left + right
            if op == "-":
                return left - right
            if op == "*":
                return left * right
            if op == "/":
                return left / right
            if op == "%":
                return left % right
            if op == "<":
                return left < right
            if op == "<=":
                return left <= right
            if op == ">":
                return left > right
            if op == ">=":
                return left >= right
        except ZeroDivisionError as exc:
            raise CriterionError("division by zero") from exc
        except TypeError as exc:
            raise CriterionError(f"`{op}` on {left!r} and {right!r}") from exc
        raise CriterionError(f"unknown operator {op}")

    def call(self, node: A.Call, env: dict[str, Any]) -> Any:
        impl = self.links[node.id].impl if self.links is not None \
            else BUILTINS[node.func].impl
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, A.Lambda):
                args.append(self.closure(a, env))
            else:
                args.append(self.eval(a, env))
        if impl is not None:
            return impl(*args)
        return self.host.call(node.func, args)

    def closure(self, lam: A.Lambda, env: dict[str, Any]) -> Callable[[Any], Any]:
        def apply(x: Any) -> Any:
            return self.eval(lam.body, {**env, lam.param: x})

        return apply


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return a == b


def index_value(obj: Any, idx: Any) -> Any:
    """`obj[idx]`: null for a key a mapping lacks, a criterion error out of range."""
    try:
        if isinstance(obj, dict):
            return obj.get(idx)
        return obj[idx]
    except (IndexError, TypeError, KeyError) as exc:
        raise CriterionError(f"index {idx!r} out of range") from exc
