"""Golden files: a test's output compared with the file that holds it, rewritten when
CE_UPDATE_GOLDENS is set (then read the diff before committing it)."""

from __future__ import annotations

import os
from pathlib import Path


def match_golden(path: Path, text: str) -> None:
    if os.environ.get("CE_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden {path}: run with CE_UPDATE_GOLDENS=1 and read it"
    assert text == path.read_text(encoding="utf-8"), f"output differs from {path}"
