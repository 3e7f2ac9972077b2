"""Immutable AST of the criteria language. Every node has an `id` (unique per parse) and
a `span`; passes keep their results in side tables keyed by `id`."""

from __future__ import annotations

from typing import Any

import attrs

from ce_lang.spans import Span


@attrs.frozen(slots=True)
class Node:
    id: int
    span: Span


@attrs.frozen(slots=True)
class Lit(Node):
    value: Any
    kind: str  # int | float | str | bool | null | regex


@attrs.frozen(slots=True)
class Name(Node):
    name: str


@attrs.frozen(slots=True)
class Member(Node):
    obj: Node
    name: str
    name_span: Span | None = None


@attrs.frozen(slots=True)
class Index(Node):
    obj: Node
    index: Node


@attrs.frozen(slots=True)
class Call(Node):
    func: str
    args: tuple[Node, ...]


@attrs.frozen(slots=True)
class Method(Node):
    obj: Node
    name: str
    args: tuple[Node, ...]
    name_span: Span | None = None


@attrs.frozen(slots=True)
class Lambda(Node):
    param: str
    body: Node


@attrs.frozen(slots=True)
class Unary(Node):
    op: str  # "not" | "-"
    operand: Node


@attrs.frozen(slots=True)
class Binary(Node):
    op: str  # + - * / % == != < <= > >= in and or
    left: Node
    right: Node


@attrs.frozen(slots=True)
class Cond(Node):
    test: Node
    then: Node
    else_: Node


@attrs.frozen(slots=True)
class ListLit(Node):
    items: tuple[Node, ...]


@attrs.frozen(slots=True)
class MapLit(Node):
    keys: tuple[str, ...]
    values: tuple[Node, ...]


# -- definitions -------------------------------------------------------------------------
@attrs.frozen(slots=True)
class TypeExpr:
    name: str
    args: tuple[TypeExpr, ...]
    optional: bool
    span: Span

    def __str__(self) -> str:
        inner = f"[{', '.join(map(str, self.args))}]" if self.args else ""
        return f"{self.name}{inner}{'?' if self.optional else ''}"


@attrs.frozen(slots=True)
class Param:
    name: str
    type: TypeExpr
    default: Node | None
    doc: str
    span: Span


@attrs.frozen(slots=True)
class Let:
    name: str
    expr: Node
    span: Span


@attrs.frozen(slots=True)
class Require:
    """`require [kind:] cond "message" ["help"]`: a constraint on a criterion's arguments
    or a record's fields."""

    kind: str  # range | choice | conflict | empty | missing | invalid
    cond: Node
    message: str
    span: Span
    kind_span: Span | None = None
    help: str | None = None


@attrs.frozen
class RecordDef:
    name: str
    fields: tuple[Param, ...]
    doc: str
    span: Span
    requires: tuple[Require, ...] = ()
    source: str = ""  # the .ce text, for `ce criteria show`
    shorthand: str | None = None  # a bare string where the record is expected: this field
    shorthand_span: Span | None = None


@attrs.frozen
class CriterionDef:
    name: str
    params: tuple[Param, ...]
    result: str  # binary | fraction | continuous | classification
    doc: str
    lets: tuple[Let, ...]
    score: Node | None
    outputs: tuple[Let, ...]
    span: Span
    source: str  # the .ce text, for `ce criteria show`
    result_span: Span | None = None
    requires: tuple[Require, ...] = ()


@attrs.frozen
class Module:
    file: str
    records: tuple[RecordDef, ...]
    criteria: tuple[CriterionDef, ...]


def children(node: Node) -> tuple[Node, ...]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(node, Member):
        return (node.obj,)
    if isinstance(node, Index):
        return (node.obj, node.index)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Method):
        return (node.obj, *node.args)
    if isinstance(node, Lambda):
        return (node.body,)
    if isinstance(node, Unary):
        return (node.operand,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Cond):
        return (node.test, node.then, node.else_)
    if isinstance(node, ListLit):
        return node.items
    if isinstance(node, MapLit):
        return node.values
    return ()


def walk(node: Node):
    yield node
    for child in children(node):
        yield from walk(child)
