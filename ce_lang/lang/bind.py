"""Binding a task's criterion entry to its definition: arguments -> typed constant values.

Standard criteria arrive already validated by the task schema; user criteria (from
`criteria_files`) are checked here against the definition's signature, with unknown
fields (did-you-mean), missing ones and wrong types reported at the YAML value's span.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ce_lang.diagnostics import Diagnostics, did_you_mean
from ce_lang.lang.builtins import regex_error
from ce_lang.lang.checker import CheckedDef, Registry
from ce_lang.lang.evaluate import Evaluator
from ce_lang.lang.records import RecordType
from ce_lang.lang.types import T
from ce_lang.lang.values import Regex
from ce_lang.spans import Path, Span

SpanOf = Callable[[Path], Span]


def bind(defn: CheckedDef, args: dict[str, Any], registry: Registry, diags: Diagnostics,
         at: SpanOf, key_at: SpanOf, base: Path, strict: bool) -> dict[str, Any] | None:
    """Typed values for every parameter, defaults applied; None if anything is wrong."""
    before = len(diags)
    out: dict[str, Any] = {}
    names = list(defn.params)
    if strict:
        for key in args:
            if key not in defn.params:
                diags.emit("CE0101", f"unknown field `{key}` for criterion `{defn.defn.name}`",
                           key_at((*base, key)), help=did_you_mean(key, names))
    for name, t in defn.params.items():
        if name in args:
            # standard criteria's paths were checked by the task schema already
            value = convert(args[name], t, registry, diags, at, (*base, name), name,
                            key_at if strict else None)
        elif name in defn.defaults:
            value = default_value(defn.defaults[name], t)
        elif t.optional:
            value = None
        else:
            diags.emit("CE0102", f"missing required field `{name}` for criterion "
                       f"`{defn.defn.name}`", at(base))
            continue
        out[name] = value
    return out if len(diags) == before else None


def default_value(node, t: T) -> Any:
    value = Evaluator().eval(node, {})
    if t.name == "regex" and isinstance(value, str):
        return Regex(value)
    return value


def convert(value: Any, t: T, registry: Registry, diags: Diagnostics, at: SpanOf, path: Path,
            name: str, key_at: SpanOf | None = None) -> Any:
    def wrong(expected: str) -> None:
        diags.emit("CE0103", f"`{name}` expects {expected}, found {_kind(value)}", at(path))

    if value is None:
        if t.optional or t.name in ("json", "any"):
            return None
        wrong(str(t))
        return None
    kind = t.name
    if kind in ("json", "any"):
        return value
    if kind == "bool":
        return value if isinstance(value, bool) else wrong("a boolean")
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) \
            else wrong("an integer")
    if kind == "float":
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
            else wrong("a number")
    if kind in ("str", "path"):
        if not isinstance(value, str):
            return wrong("a string")
        if kind == "path" and key_at is not None and "${row." not in value:
            from ce_lang.spans import format_path
            from ce_lang.validate import check_workspace_path

            check_workspace_path(value, at(path), format_path(path), diags)
        return value
    if kind == "regex":
        if isinstance(value, Regex):
            return value
        if not isinstance(value, str):
            return wrong("a regular expression (string)")
        if "${row." not in value:
            problem = regex_error(value)
            if problem is not None:
                diags.emit("CE0111", f"invalid regular expression: {problem}", at(path))
                return None
        return Regex(value)
    if kind == "list":
        if not isinstance(value, list):
            return wrong(str(t))
        return [convert(v, t.elem, registry, diags, at, (*path, i), f"{name}[{i}]", key_at)
                for i, v in enumerate(value)]
    if kind == "map":
        if not isinstance(value, dict):
            return wrong(str(t))
        return {k: convert(v, t.elem, registry, diags, at, (*path, k), f"{name}.{k}", key_at)
                for k, v in value.items()}
    record = registry.records.get(kind)
    if record is not None:
        if isinstance(value, str) and record.shorthand is not None:
            value = {record.shorthand: value}  # the record's declared shorthand
        if not isinstance(value, dict):
            return wrong(f"a {kind} mapping" + (" or a string" if record.shorthand else ""))
        out = {}
        for key in value:
            if key not in record.fields:
                diags.emit("CE0101", f"unknown field `{key}` in {kind}",
                           (key_at or at)((*path, key)),
                           help=did_you_mean(key, list(record.fields)))
        defaults = registry.record_defaults.get(kind, {})
        before = len(diags)
        for fname, field in record.fields.items():
            if fname in value:
                out[fname] = convert(value[fname], field.type, registry, diags, at,
                                     (*path, fname), f"{name}.{fname}", key_at)
            elif fname in defaults:
                out[fname] = default_value(defaults[fname], field.type)
            elif field.type.optional:
                out[fname] = None
            else:
                diags.emit("CE0102", f"missing field `{fname}` in {kind}", at(path))
        if record.requires and len(diags) == before:
            report_record(record, out, frozenset(value), path, diags, at, key_at or at)
        return out
    wrong(str(t))
    return None


def record_violations(record: RecordType, values: dict[str, Any]) -> list:
    """The `require` constraints of a record declaration that a bound value breaks (the
    same evaluation as a criterion's: a field still holding `${row.key}` waits)."""
    from ce_lang.lang.instances import check_requires

    if not record.requires:
        return []
    return check_requires(tuple(record.requires), values)


def report_record(record: RecordType, values: dict[str, Any], written: frozenset[str],
                  path: Path, diags: Diagnostics, at: SpanOf, key_at: SpanOf) -> bool:
    """Report the record's broken constraints at the first field each reads that the
    mapping sets (its key for conflicts), else at the record; one per field. `{@field}`
    in a message is the field's full path (`success_criteria[0].patterns[1].flags`).
    True when the value breaks none."""
    from ce_lang.lang.checker import FIELD_PLACEHOLDER
    from ce_lang.spans import format_path

    blamed: set[Path] = set()
    for v in record_violations(record, values):
        field = next((n for n in v.names if n in written), None)
        where = path if field is None else (*path, field)
        if where in blamed:
            continue
        blamed.add(where)
        span = key_at(where) if v.code == "CE0109" and field is not None else at(where)
        message, help_ = (None if t is None else FIELD_PLACEHOLDER.sub(
            lambda m: format_path((*path, m.group(1))), t) for t in (v.message, v.help))
        diags.emit(v.code, message, span, help=help_)
    return not blamed


def _kind(value: Any) -> str:
    from ce_lang.validate import yaml_kind

    return yaml_kind(value)
