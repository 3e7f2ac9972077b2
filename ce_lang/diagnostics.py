"""Diagnostics are values: passes append them to a `Diagnostics` list and go on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from ce_lang.codes import CODES
from ce_lang.spans import Span


@attrs.frozen
class Diagnostic:
    code: str
    severity: str
    message: str
    span: Span | None
    help: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def sort_key(self) -> tuple:
        s = self.span
        return (s.file, s.line, s.col, self.code) if s else ("", 0, 0, self.code)


class Diagnostics(list[Diagnostic]):
    """An append-only collector; `emit` takes the severity from the code table."""

    def emit(
        self,
        code: str,
        message: str,
        span: Span | None,
        *,
        help: str | None = None,
        notes: Iterable[str] = (),
        severity: str | None = None,
    ) -> Diagnostic:
        diag = Diagnostic(
            code, severity or CODES[code].severity, message, span, help, tuple(notes)
        )
        self.append(diag)
        return diag

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self)

    def count(self, severity: str) -> int:  # type: ignore[override]
        """Counted once per diagnostic: the compiler asks before and after every trial,
        and a dataset's rows may add thousands (rescanning them all was quadratic)."""
        counted = self.__dict__.setdefault("_counted", [0, {}])
        if counted[0] > len(self):  # items were removed: count again
            counted[:] = [0, {}]
        tally = counted[1]
        for d in self[counted[0]:] if counted[0] else self:
            tally[d.severity] = tally.get(d.severity, 0) + 1
        counted[0] = len(self)
        return tally.get(severity, 0)

    def __setitem__(self, index, value) -> None:  # type: ignore[no-untyped-def]
        super().__setitem__(index, value)
        self.__dict__.pop("_counted", None)  # a replaced item may change a tally


def closest(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate `word` is most likely a misspelling of, or None when nothing is close."""
    import difflib  # only for a misspelling: `ce run` and a cache hit load no difflib

    best = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    if not best:
        lowered = {c.lower(): c for c in candidates}
        if word.lower() in lowered:
            best = [lowered[word.lower()]]
    return best[0] if best else None


def did_you_mean(word: str, candidates: Sequence[str]) -> str | None:
    """The closest candidate, as a `help:` line, or None when nothing is close."""
    best = closest(word, candidates)
    return f"did you mean `{best}`?" if best else None


def dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by location, identical diagnostics (same span, code, message) once."""
    seen: set[tuple] = set()
    out = []
    for d in sorted(diags, key=Diagnostic.sort_key):
        key = (d.code, d.message, d.span)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out
