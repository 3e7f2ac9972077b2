"""Which criterion of one grading is which of another: `ce rescore` and `ce explain` set
a re-graded criterion against the recorded one, `ce compare` run B's against run A's.
An id is the criterion's index unless the task names it, so the id alone pairs the
wrong criteria once one is removed or inserted before them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

C = TypeVar("C", bound=Mapping[str, Any])


def pair_criteria(old: Sequence[C], new: Sequence[C]) -> tuple[list[tuple[C, C | None]],
                                                               list[C]]:
    """Each `new` criterion with the `old` one it is (None: it is new), and the `old` ones
    no longer there. The same id, type and description; else the same type and
    description at another id (it moved); else the same id and type (its description
    edited). Criteria are mappings with `id`, `type` and `description`."""
    def key(c: Mapping[str, Any]) -> tuple[Any, Any]:
        return c.get("type"), c.get("description")

    left = {c["id"]: c for c in old}
    match: dict[int, C] = {}
    for i, c in enumerate(new):
        was = left.get(c["id"])
        if was is not None and key(was) == key(c):
            match[i] = left.pop(c["id"])
    for i, c in enumerate(new):
        if i not in match:
            was = next((w for w in left.values() if key(w) == key(c)), None)
            if was is not None:
                match[i] = left.pop(was["id"])
    for i, c in enumerate(new):
        was = left.get(c["id"])
        if i not in match and was is not None and was.get("type") == c.get("type"):
            match[i] = left.pop(c["id"])
    return [(c, match.get(i)) for i, c in enumerate(new)], list(left.values())
