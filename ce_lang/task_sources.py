"""The YAML files a command's arguments name (a file, a directory walked for `.yaml` /
`.yml`, a glob), and each one read into a located document: the compiler's input, apart
from what it does with it."""

from __future__ import annotations

import os

from ce_lang import hostfs
from ce_lang.diagnostics import Diagnostics
from ce_lang.paths import no_task_file, read_regular_text
from ce_lang.spans import Span
from ce_lang.validate import yaml_kind
from ce_lang.yaml_source import LocatedDoc, parse_yaml


def find_yaml_files(paths: list[str], diags: Diagnostics) -> list[tuple[str, str | None]]:
    """Each YAML file, with the directory argument it was found under (None: named
    itself, or matched by a glob); a file named twice once. A directory's hidden and
    `_`-prefixed subdirectories are skipped."""
    out: list[tuple[str, str | None]] = []
    for p in paths:
        if hostfs.isdir(p):
            found = sorted(
                os.path.join(root, f)
                for root, dirs, names in hostfs.walk(p)
                for f in names
                if f.endswith((".yaml", ".yml")) and not _hidden(root, p)
                for _ in [dirs.sort()]
            )
            out.extend((f, p) for f in found)
            if not found:
                diags.emit("CE0006", f"no .yaml/.yml files under {p!r}", None)
        elif hostfs.isfile(p):
            out.append((p, None))
        else:
            matches = hostfs.glob(p)
            files = [m for m in matches if hostfs.isfile(m)]
            if not files:
                code, message, help_ = no_task_file(p)
                diags.emit(code, message, None, help=help_)
            out.extend((m, None) for m in files)
    seen: set[str] = set()
    unique = []
    for f, under in out:
        key = os.path.abspath(f)
        if key not in seen:
            seen.add(key)
            unique.append((f, under))
    return unique


def load_yaml_file(file: str, diags: Diagnostics, sources: dict[str, str]
                   ) -> LocatedDoc | None:
    """The file's top-level mapping, located (its text kept in `sources`, for rendering
    diagnostics); None when it cannot be read or parsed, said in `diags`."""
    try:
        text = read_regular_text(file)
    except UnicodeDecodeError as exc:  # said where the first bad byte is
        before = exc.object[:exc.start]
        line = before.count(b"\n") + 1
        col = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
        diags.emit("CE0001", f"{file} is not UTF-8 ({exc.reason} at byte "
                   f"{exc.start})", Span.point(file, line, col))
        return None
    except OSError as exc:
        diags.emit("CE0001", f"cannot read {file}: {exc.strerror}", Span.point(file))
        return None
    sources[file] = text
    doc = parse_yaml(text, file, diags)
    if doc is not None and not isinstance(doc.value, dict):
        diags.emit("CE0004", "expected a mapping at the top level, found "
                   f"{yaml_kind(doc.value)}", doc.span(()))
        return None
    return doc


def _hidden(root: str, top: str) -> bool:
    rel = os.path.relpath(root, top)
    return any(part.startswith((".", "_")) for part in rel.split(os.sep) if part != ".")
