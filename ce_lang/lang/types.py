"""Types of the criteria language and the assignability rules between them.

Explicit rules, no inference beyond what each expression form states:
- int is assignable to float; str is assignable to path; a str literal to regex (it is
  compiled and checked where it is bound);
- null is assignable to any `T?`; `T` to `T?`;
- list[T] / map[T] are covariant; json accepts any value built from JSON shapes;
- `any` exists only inside the checker (an expression already reported as wrong).
"""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class T:
    name: str
    args: tuple[T, ...] = ()
    optional: bool = False

    def __str__(self) -> str:
        inner = f"[{', '.join(map(str, self.args))}]" if self.args else ""
        return f"{self.name}{inner}{'?' if self.optional and self.name != 'null' else ''}"

    @property
    def required(self) -> T:
        return attrs.evolve(self, optional=False) if self.optional else self

    def opt(self) -> T:
        return self if self.optional else attrs.evolve(self, optional=True)

    @property
    def elem(self) -> T:
        return self.args[0] if self.args else ANY


BOOL, INT, FLOAT, STR = T("bool"), T("int"), T("float"), T("str")
REGEX, PATH, JSON, NULL, ANY = T("regex"), T("path"), T("json"), T("null", (), True), T("any")
NUMERIC = ("int", "float")
PRIMITIVES = {"bool": BOOL, "int": INT, "float": FLOAT, "str": STR, "regex": REGEX,
              "path": PATH, "json": JSON}


def list_of(t: T) -> T:
    return T("list", (t,))


def map_of(t: T) -> T:
    return T("map", (t,))


def is_numeric(t: T) -> bool:
    return t.name in NUMERIC and not t.optional


def assignable(src: T, dst: T) -> bool:
    """Can a value of type `src` be used where `dst` is expected?"""
    if src.name == "any" or dst.name == "any":
        return True
    if src.name == "null":
        return dst.optional or dst.name == "json"
    if src.optional and not dst.optional and dst.name != "json":
        return False
    if dst.name == "json":
        return src.name in ("json", "bool", "int", "float", "str", "path", "null") or (
            src.name in ("list", "map") and all(assignable(a, JSON) for a in src.args))
    if src.name == dst.name:
        return all(assignable(a, b) for a, b in zip(src.args, dst.args, strict=False))
    if src.name == "int" and dst.name == "float":
        return True
    if src.name == "str" and dst.name == "path":
        return True
    return src.name == "path" and dst.name == "str"


def join(a: T, b: T) -> T | None:
    """The type of `if c then a else b`: the wider of the two, or None if unrelated."""
    if a.name == "null":
        return b.opt() if b.name != "null" else a
    if b.name == "null":
        return a.opt()
    if assignable(a, b):
        return b.opt() if a.optional else b
    if assignable(b, a):
        return a.opt() if b.optional else a
    return None
