"""Source positions shared by every compiler stage.

A `Path` addresses a node of a YAML document (mapping keys and list indexes); passes
keep side tables keyed by `Path` instead of annotating the values themselves.
"""

from __future__ import annotations

import attrs

PathPart = str | int
Path = tuple[PathPart, ...]


@attrs.frozen(slots=True)
class Span:
    """A 1-based, end-exclusive range in one file; `offset`s index the file text."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    offset: int = -1
    end_offset: int = -1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @classmethod
    def point(cls, file: str, line: int = 1, col: int = 1) -> Span:
        return cls(file, line, col, line, col + 1)


def format_path(path: Path) -> str:
    """`('success_criteria', 2, 'weight')` -> `success_criteria[2].weight`."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        else:
            out.append(f".{part}" if out else part)
    return "".join(out) or "<document>"


def offset_to_line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset in `text`."""
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    return line, offset - start + 1
