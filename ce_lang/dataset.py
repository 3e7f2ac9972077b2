"""Datasets: load rows (inline or JSONL), sample them, substitute `${row.key}`.

Substitution problems are reported once per `${row.key}` occurrence, at its exact
position, naming the rows that cannot fill it (coder_eval crashes the whole run instead).
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from ce_lang import hostfs
from ce_lang.diagnostics import Diagnostics, did_you_mean
from ce_lang.paths import NotRegularFile, read_regular
from ce_lang.spans import Path, Span, format_path, offset_to_line_col

ROW_REF = re.compile(r"\$\{row\.([^}]*)\}")
ROW_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


@attrs.frozen
class Row:
    id: str
    values: dict[str, Any]
    label: str  # where the row came from, for messages: "rows[3]" or "data.jsonl:4"
    span: Span


@attrs.frozen
class TextSource:
    """A string value and the file text it was read from, to locate `${row.x}` inside it."""

    path: Path
    value: str
    span: Span
    text: str


def load_rows(dataset: dict[str, Any], span_of: Callable[[Path], Span], diags: Diagnostics,
              original: Callable[[Path], Path] = lambda p: p) -> list[Row] | None:
    here: Path = ("dataset",)
    rows_raw, paths = dataset.get("rows"), dataset.get("paths")
    if (rows_raw is None) == (paths is None):
        diags.emit("CE0301", "a dataset needs exactly one of `rows` or `paths`", span_of(here))
        return None
    records: list[tuple[Any, str, Span]] = []
    if rows_raw is not None:
        records = [(r, f"rows[{original((*here, 'rows', i))[-1]}]", span_of((*here, "rows", i)))
                   for i, r in enumerate(rows_raw)]
    else:
        if not paths:  # (or every entry was dropped, a special file: reported there)
            if not _error_within(diags, span_of((*here, "paths"))):
                diags.emit("CE0301", "`dataset.paths` lists no file", span_of((*here, "paths")))
            return None
        before = len(diags)
        unread = [f for f in paths if not hostfs.isfile(f)]  # reported where checked
        for i, file in enumerate(paths):
            if file not in unread:
                records.extend(_read_jsonl(file, span_of((*here, "paths", i)), diags))
        if unread or len(diags) > before:  # no follow-on "the dataset has no rows"
            return None
    if not records:
        files = ", ".join(repr(os.path.basename(f)) for f in paths or ())
        diags.emit("CE0301", "the dataset has no rows"
                   + (f": {files} hold{'s' if len(paths) == 1 else ''} no JSON line"
                      if files else ""), span_of(here))
        return None
    id_field = dataset.get("id_field", "id")
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for value, label, span in records:
        if not isinstance(value, dict):
            diags.emit("CE0301", f"dataset row {label} is not a mapping", span)
            continue
        rid = value.get(id_field)
        if isinstance(rid, bool) or not isinstance(rid, str | int):
            what = ("has no" if rid is None else "has a boolean" if isinstance(rid, bool)
                    else "has a non-scalar" if isinstance(rid, list | dict)
                    else "has a non-integer number as" if isinstance(rid, float)
                    else "has a non-text")
            diags.emit("CE0302", f"dataset row {label} {what} id field `{id_field}`", span)
            continue
        rid = str(rid)
        if not ROW_ID.fullmatch(rid):
            diags.emit("CE0302", f"dataset row {label}: id {rid!r} must match "
                       "[A-Za-z0-9_][A-Za-z0-9_.-]*", span)
            continue
        if len(rid) > hostfs.NAME_MAX:
            diags.emit("CE0302", f"dataset row {label}: id {rid[:20]!r}... is {len(rid)} "
                       f"characters long, more than {hostfs.NAME_MAX}", span,
                       notes=("a row id names its trials' directory, and a file name has at "
                              f"most {hostfs.NAME_MAX} characters",))
            continue
        if rid in seen:
            diags.emit("CE0213", f"dataset row {label}: id {rid!r} repeats row {seen[rid]}", span)
            continue
        seen[rid] = label
        rows.append(Row(rid, value, label, span))
    return rows


def _error_within(diags: Diagnostics, span: Span) -> bool:
    """An error already reported inside `span` (an entry the validator checked)."""
    return any(d.is_error and d.span is not None and d.span.file == span.file
               and span.offset <= d.span.offset < span.end_offset for d in diags)


def _read_jsonl(file: str, span: Span, diags: Diagnostics) -> Iterator[tuple[Any, str, Span]]:
    try:
        data = read_regular(file)
        text = data.decode("utf-8")
    except NotRegularFile as exc:
        diags.emit("CE0217", f"dataset file {os.path.basename(file)!r} {exc.strerror}", span)
        return
    except OSError as exc:
        diags.emit("CE0207", f"dataset file {os.path.basename(file)!r}: {exc.strerror}", span)
        return
    except UnicodeDecodeError as exc:  # said at the byte, as a JSON error is
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        n = data.count(b"\n", 0, exc.start) + 1
        col = len(data[line_start:exc.start].decode("utf-8", "replace")) + 1
        diags.emit("CE0301", f"dataset file {os.path.basename(file)!r} is not UTF-8: byte "
                   f"0x{data[exc.start]:02x}",
                   Span(file, n, col, n, col + 1, exc.start, exc.start + 1),
                   help="save it as UTF-8 (a spreadsheet's export may be Latin-1 or UTF-16)")
        return
    offset = 0
    if text.startswith("\ufeff"):  # a byte order mark (Windows tools write one): not a row
        text, offset = text[1:], 1
    invalid: list[tuple[str, Span]] = []  # said at the end: one error for a file of no JSON
    parsed = False
    for n, line in enumerate(text.split("\n"), start=1):
        line_span = Span(file, n, 1, n, len(line) + 1, offset, offset + len(line))
        offset += len(line) + 1
        if not line.strip():
            continue
        try:
            value = json.loads(line, object_pairs_hook=_no_repeated_key)
            parsed = True
            yield value, f"{os.path.basename(file)}:{n}", line_span
        except RepeatedKey as exc:  # as YAML's duplicate key (CE0003): no silent last wins
            cols = [m.start() + 1 for m in re.finditer(
                re.escape(json.dumps(exc.key, ensure_ascii=False)) + r"\s*:", line)]
            col = cols[-1] if len(cols) > 1 else 1
            diags.emit("CE0003", f"duplicate key `{exc.key}`",
                       attrs.evolve(line_span, col=col, end_col=col + len(exc.key) + 2),
                       notes=(f"first defined at {os.path.basename(file)}:{n}:{cols[0]}",)
                       if len(cols) > 1 else ())
        except json.JSONDecodeError as exc:
            invalid.append((f"invalid JSON line: {exc.msg}",
                            attrs.evolve(line_span, col=exc.colno, end_col=exc.colno + 1)))
        except RecursionError:
            invalid.append(("invalid JSON line: nested too deeply", line_span))
        except ValueError:  # e.g. an integer past Python's 4300-digit conversion limit
            invalid.append(("invalid JSON line: a number too long to read", line_span))
    if len(invalid) > 1 and not parsed:  # a CSV, a JSON array: not one error per line
        message, at = invalid[0]
        name = os.path.basename(file)
        diags.emit("CE0301", f"{message}; no line of {name!r} is JSON ({len(invalid)} lines): "
                   "a dataset file is JSONL, one JSON object per line", at,
                   help=_CSV_HELP.format(name=name, stem=os.path.splitext(name)[0])
                   if name.lower().endswith(".csv") else None)
        return
    for message, at in invalid:
        diags.emit("CE0301", message, at)


_CSV_HELP = ("ce reads no CSV; convert it once: python -c \"import csv, json, sys; "
             "[print(json.dumps(r)) for r in csv.DictReader(open(sys.argv[1]))]\" "
             "{name} > {stem}.jsonl")


class RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_repeated_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RepeatedKey(key)
        out[key] = value
    return out


def check_strata(rows: list[Row], dataset: dict[str, Any], flat_sample: int | None,
                 span_of: Callable[[Path], Span], diags: Diagnostics) -> None:
    """A `stratify_field` no row has puts every row in one stratum: `sample_per_stratum`
    then keeps N rows in all, silently (a misspelt field, or the `expected_skill` default
    on a dataset labelled otherwise)."""
    per = dataset.get("sample_per_stratum")
    if per is None or flat_sample is not None:  # --sample ignores the strata
        return
    field = dataset.get("stratify_field", "expected_skill")
    if any(field in r.values for r in rows):
        return
    keys = sorted({k for r in rows for k in r.values})
    where = ("stratify_field",) if "stratify_field" in dataset else ("sample_per_stratum",)
    diags.emit("CE0306", f"`sample_per_stratum` stratifies on `{field}`, a key no row "
               f"has: every row is in one stratum, and the sample keeps {per} row(s) in all",
               span_of(("dataset", *where)),
               help=did_you_mean(field, keys) or "set `stratify_field` to a key of the rows: "
               + ", ".join(f"`{k}`" for k in keys[:10]))


def sample_rows(rows: list[Row], dataset: dict[str, Any], flat_sample: int | None) -> list[Row]:
    """A reproducible sample: seed 0 unless `sample_seed` says otherwise."""
    seed = dataset.get("sample_seed")
    rng = random.Random(0 if seed is None else seed)
    if flat_sample is not None:
        if flat_sample >= len(rows):
            return rows
        keep = set(rng.sample(range(len(rows)), flat_sample))
        return [r for i, r in enumerate(rows) if i in keep]
    per = dataset.get("sample_per_stratum")
    if per is None:
        return rows
    field = dataset.get("stratify_field", "expected_skill")
    strata: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        strata[str(r.values.get(field, ""))].append(i)
    keep = set()
    for key in sorted(strata):
        members = strata[key]
        keep.update(members if len(members) <= per else rng.sample(members, per))
    return [r for i, r in enumerate(rows) if i in keep]


def find_refs(sources: list[TextSource], pattern: re.Pattern[str] = ROW_REF,
              ) -> list[tuple[TextSource, str, Span]]:
    """Every `${row.key}` occurrence with its exact span in the file (or every match of
    `pattern`, its first group or else the whole match standing for the key)."""
    found = []
    for src in sources:
        if pattern is ROW_REF and "${row." not in src.value:
            continue
        search_from = max(src.span.offset, 0)
        end = src.span.end_offset if src.span.end_offset > 0 else len(src.text)
        for m in pattern.finditer(src.value):
            token = m.group(0)
            pos = src.text.find(token, search_from, end) if src.text else -1
            if pos >= 0:
                search_from = pos + len(token)
                line, col = offset_to_line_col(src.text, pos)
                span = Span(src.span.file, line, col, line, col + len(token), pos, pos + len(token))
            else:
                span = src.span
            found.append((src, m.group(1) if pattern.groups else token, span))
    return found


# what a `${row.key}` looks like when mistyped: `{row.key}`, `$row.key`, `${rows.key}`,
# `${ row.key }`, `${Row.key}` (a correct one matches too, and is skipped)
NEAR_ROW_REF = re.compile(r"\$?\{\s*rows?\s*\.\s*[A-Za-z_][\w-]*\s*\}|\$rows?\.[A-Za-z_]\w*",
                          re.IGNORECASE)


def warn_near_misses(sources: list[TextSource], diags: Diagnostics) -> None:
    """A mistyped `${row.key}` stays as written in every row: a warning with the fix."""
    for _src, token, span in find_refs(sources, NEAR_ROW_REF):
        if ROW_REF.fullmatch(token):
            continue
        key = re.search(r"\.\s*([A-Za-z_][\w-]*)", token)
        fix = f"`${{row.{key.group(1)}}}`" if key else "`${row.KEY}`"
        diags.emit("CE0305", f"`{token}` is not a row reference: it stays as written in every "
                   "row", span, help=f"write {fix}")


def check_refs(refs: list[tuple[TextSource, str, Span]], rows: list[Row] | None,
               diags: Diagnostics, broken: set[tuple[str, Span]] | None = None) -> bool:
    """CE0303 for each reference some row cannot fill; `broken` collects (row id, span of
    the reference) for each, so the rules' problems with what those rows substituted
    there (an empty string) are not reported on top."""
    ok = True
    for _src, key, span in refs:
        if rows is None:
            diags.emit("CE0303", f"`${{row.{key}}}` used, but the task has no dataset", span)
            ok = False
            continue
        if not KEY.fullmatch(key):
            diags.emit("CE0303", f"`${{row.{key}}}`: {key!r} is not a row key", span,
                       help="write `${row.KEY}` with KEY a top-level field of each row")
            ok = False
            continue
        missing = [r for r in rows if key not in r.values]
        bad = [r for r in rows if key in r.values and not _is_scalar(r.values[key])]
        for group, what in ((missing, ("has no key", "have no key")),
                            (bad, ("has a non-scalar value for", "have non-scalar values for"))):
            if group:
                ok = False
                if broken is not None:
                    broken.update((r.id, span) for r in group)
                names = ", ".join(f"{r.id!r} ({r.label})" for r in group[:5])
                more = f" and {len(group) - 5} more" if len(group) > 5 else ""
                row_word = "row" if len(group) == 1 else "rows"
                what = what[0] if len(group) == 1 else what[1]
                # a key no row has may be a misspelling of one they have
                known = sorted({k for r in rows for k in r.values}) \
                    if group is missing and len(group) == len(rows) else []
                diags.emit(
                    "CE0303",
                    f"`${{row.{key}}}`: dataset {row_word} {names}{more} {what} `{key}`",
                    span, notes=(f"{len(group)} of {len(rows)} rows affected",),
                    help=did_you_mean(key, known) if known else None)
    return ok


def unsubstituted_sources(value: dict[str, Any], span_of: Callable[[Path], Span], text: str,
                          ) -> Iterator[TextSource]:
    """The task's strings a dataset row is not substituted in, where `${row.key}` is
    surely meant to be: all but the prompt, the criteria, `reference` and the script
    agent's `agent.script` (and `dataset` itself, and the prose of `description`)."""
    for key, v in value.items():
        if key in ("initial_prompt", "success_criteria", "reference", "dataset",
                   "description"):
            continue
        if key == "agent" and isinstance(v, dict):
            v = {k: x for k, x in v.items() if k != "script"}
        yield from string_sources(v, (key,), span_of, text)


def warn_unsubstituted(refs: list[tuple[TextSource, str, Span]], diags: Diagnostics) -> None:
    for src, key, span in refs:
        if not KEY.fullmatch(key):
            continue  # not a row reference at all
        diags.emit("CE0304", f"`${{row.{key}}}` is not substituted in `{format_path(src.path)}`"
                   ": it stays as written", span,
                   help="rows are substituted in initial_prompt (and its file), "
                   "success_criteria, reference and agent.script only")


def _is_scalar(v: Any) -> bool:
    return isinstance(v, str | int | float | bool) or v is None


def render_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def substitute(value: str, row: Row) -> str:
    return ROW_REF.sub(lambda m: render_value(row.values.get(m.group(1))), value)


def substitute_tree(value: Any, row: Row) -> Any:
    """`value` with `row` substituted in its strings; a list or mapping that holds no
    reference is returned itself, not copied (rows share what they do not change, and
    `row_trials` reuses the work done on it)."""
    if isinstance(value, str):
        return substitute(value, row) if "${row." in value else value
    if isinstance(value, list):
        items = [substitute_tree(v, row) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        out = {k: substitute_tree(v, row) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    return value


ROW_KEYS = ("initial_prompt", "success_criteria", "reference")


def substitute_row_keys(value: dict[str, Any], row: Row) -> dict[str, Any]:
    """`value` (a task-shaped layer) with `row` substituted where rows substitute: the
    prompt, the criteria, `reference` and the script agent's `agent.script`."""
    out = dict(value)
    for key in ROW_KEYS:
        if key in value:
            out[key] = substitute_tree(value[key], row)
    agent = value.get("agent")
    if isinstance(agent, dict) and agent.get("script") is not None:
        script = substitute_tree(agent["script"], row)
        if script is not agent["script"]:
            out["agent"] = {**agent, "script": script}
    return out


def row_key_sources(value: dict[str, Any], span_of: Callable[[Path], Span], text: str = "",
                    ) -> list[TextSource]:
    """The strings of a task-shaped layer that `substitute_row_keys` substitutes in."""
    agent = value.get("agent")
    script = agent.get("script") if isinstance(agent, dict) else None
    return [*(s for key in ROW_KEYS for s in string_sources(value.get(key), (key,), span_of,
                                                             text)),
            *string_sources(script, ("agent", "script"), span_of, text)]


def string_sources(value: Any, path: Path, span_of: Callable[[Path], Span], text: str,
                   ) -> Iterator[TextSource]:
    if isinstance(value, str):
        yield TextSource(path, value, span_of(path), text)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from string_sources(v, (*path, i), span_of, text)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from string_sources(v, (*path, k), span_of, text)
