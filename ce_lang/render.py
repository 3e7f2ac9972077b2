"""Diagnostics for people (rustc style), for programs (JSON) and for code scanning (SARIF)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from ce_lang.codes import CODES
from ce_lang.diagnostics import Diagnostic

ECHO_WIDTH = 160  # characters of a source line shown under a diagnostic, at most


def render_human(diags: Sequence[Diagnostic], sources: dict[str, str], color: bool = False
                 ) -> str:
    """Each file is split into lines once, however many diagnostics point into it (20,000
    diagnostics in one file render in linear time)."""
    lines_of: dict[str, list[str]] = {}

    def source_lines(file: str) -> list[str] | None:
        if file not in lines_of:
            text = sources.get(file)
            if text is None:
                return None
            lines_of[file] = text.split("\n")
        return lines_of[file]

    return "".join(_one(d, source_lines, color) for d in diags)


def _style(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def echo_window(src: str, col: int, width: int) -> tuple[str, int, int]:
    """The part of a source line shown, with the caret's column and width in it: a long
    line (minified JSON, a 100 KB flow list) is cut around the span to ECHO_WIDTH
    characters, marked with `...` where it was cut."""
    if len(src) <= ECHO_WIDTH:
        return src, col, width
    start = max(0, min(col - 1 - ECHO_WIDTH // 3, len(src) - ECHO_WIDTH))
    shown = src[start:start + ECHO_WIDTH]
    head = "..." if start > 0 else ""
    tail = "..." if start + ECHO_WIDTH < len(src) else ""
    col_in = col - start + len(head)
    width = max(1, min(width, len(shown) - (col - 1 - start)))
    return head + shown + tail, col_in, width


def _one(d: Diagnostic, source_lines, color: bool) -> str:
    sev_color = "1;31" if d.severity == "error" else "1;33"
    head = f"{_style(d.severity + '[' + d.code + ']', sev_color, color)}: {d.message}"
    lines = []
    if d.span is not None:
        lines.append(f"{_style(str(d.span), '1', color)}: {head}")
        src_lines = source_lines(d.span.file)
        if src_lines is not None and 1 <= d.span.line <= len(src_lines):
            src = src_lines[d.span.line - 1].rstrip("\r").expandtabs(1)
            gutter = str(d.span.line)
            pad = " " * len(gutter)
            width = (d.span.end_col - d.span.col) if d.span.end_line == d.span.line else \
                max(1, len(src.rstrip()) - d.span.col + 1)
            width = max(1, min(width, max(1, len(src) - d.span.col + 1)))
            src, col, width = echo_window(src, d.span.col, width)
            lines.append(f"{pad} |")
            lines.append(f"{gutter} | {src}")
            caret = " " * (col - 1) + "^" * width
            lines.append(f"{pad} | {_style(caret, sev_color, color)}")
    else:
        lines.append(head)
    if d.help:
        lines.append(f"  = help: {d.help}")
    lines.extend(f"  = note: {n}" for n in d.notes)
    return "\n".join(lines) + "\n\n"


def diagnostic_to_json(d: Diagnostic) -> dict[str, Any]:
    s = d.span
    return {
        "code": d.code, "severity": d.severity, "message": d.message,
        "file": s.file if s else None, "line": s.line if s else None,
        "col": s.col if s else None, "end_line": s.end_line if s else None,
        "end_col": s.end_col if s else None, "help": d.help, "notes": list(d.notes),
    }


def render_json(diags: Sequence[Diagnostic], summary: dict[str, Any]) -> str:
    return json.dumps({"diagnostics": [diagnostic_to_json(d) for d in diags],
                       "summary": summary}, indent=2) + "\n"


def render_sarif(diags: Sequence[Diagnostic], tool_version: str) -> str:
    """SARIF 2.1.0, the format GitHub code scanning uploads (`upload-sarif`)."""
    used = sorted({d.code for d in diags})
    rules = [{
        "id": code,
        "name": CODES[code].title.title().replace(" ", ""),
        "shortDescription": {"text": CODES[code].title},
        "fullDescription": {"text": CODES[code].explanation},
        "defaultConfiguration": {"level": _level(CODES[code].severity)},
        "help": {"text": CODES[code].explanation},
    } for code in used]
    index = {code: i for i, code in enumerate(used)}
    results = []
    for d in diags:
        text = d.message + (f"\nhelp: {d.help}" if d.help else "") + "".join(
            f"\nnote: {n}" for n in d.notes)
        result: dict[str, Any] = {
            "ruleId": d.code, "ruleIndex": index[d.code], "level": _level(d.severity),
            "message": {"text": text},
        }
        if d.span is not None and not d.span.file.startswith("<"):
            result["locations"] = [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(d.span.file)},
                "region": {"startLine": d.span.line, "startColumn": d.span.col,
                           "endLine": d.span.end_line, "endColumn": d.span.end_col},
            }}]
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ce", "version": tool_version, "rules": rules}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def _level(severity: str) -> str:
    return {"error": "error", "warning": "warning"}.get(severity, "note")


def _uri(path: str) -> str:
    """A URI reference, percent-encoded: a space is not allowed in one, and `#` or `?`
    in a file name would start a fragment or a query, naming another file."""
    from urllib.parse import quote

    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return quote(rel.replace(os.sep, "/"), safe="/")
