"""The task and experiment format pages, generated from the schema's attrs classes.

Every class reachable from `TaskSpec` and `ExperimentSpec` becomes one section (its
dotted path in a task file as the heading) with a table of its fields: YAML type,
default, allowed values and ranges (from the field's `Rule`), how config layers combine
it, and its documentation. `DIFFERENCES` adds where ce deliberately differs from
coder_eval (SEMANTICS.md); a test checks each of its keys names a field that exists.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

import attrs

from ce_lang.schema.agent import BUILTIN_AGENT_TYPES
from ce_lang.schema.fields import REMOVED_FIELDS_ATTR, Rule, Tagged, rule_of
from ce_lang.schema.task import BUILTIN_DRIVERS, driver_choices

_NoneType = type(None)

# field path -> where ce deliberately differs from coder_eval 0.12.16 (SEMANTICS.md)
DIFFERENCES: dict[str, str] = {
    "task": "an unknown key is an error at every level, the top level included "
            "(coder_eval warns at the top level and drops it)",
    "task.agent.script": "not in coder_eval",
    "task.criteria_files": "not in coder_eval",
    "task.dataset.rows": "a `${row.key}` naming a missing key (or a non-scalar value) is a "
                         "compile error at its span, naming the row (coder_eval crashes)",
    "task.dataset.sample_seed": "sampling is reproducible by default (seed 0)",
    "task.reference.code": "kept by ce (coder_eval 0.12.16 dropped it)",
    "task.reference.solve": "not in coder_eval",
    "task.sandbox.driver": "`bwrap` and driver plugins are ce's",
    "task.suite_thresholds": "`f1.macro` is accepted for `macro_f1`; an unknown metric is "
                             "a compile error",
    "criterion.type": "`expr` and the criteria of your `criteria_files` are ce's",
    "criterion.stop_when": "the guide's form, kept by ce (coder_eval 0.12.16 has only "
                           "`stop_early`)",
    "criterion.pass_threshold": "a criterion that ends in an error never passes, even at "
                                "`pass_threshold: 0` (coder_eval passes an error's 0 >= 0); "
                                "a score within 1e-9 below the threshold meets it (a mean "
                                "of parts that is exactly 0.8 computes as "
                                "0.7999999999999999, which a plain >= fails)",
}

ROOTS = {"task": "TaskSpec", "experiment": "ExperimentSpec"}


@attrs.define
class Section:
    path: str  # "task.sandbox.limits"
    cls: type
    rows: list[tuple[str, str, str, str, str]] = attrs.field(factory=list)
    skip: frozenset[str] = frozenset()  # fields documented in another section


def yaml_type(tp: Any, links: dict[type, str]) -> str:
    """The type of a field as a task author reads it."""
    origin = typing.get_origin(tp)
    if tp is str:
        return "string"
    if tp is int:
        return "integer"
    if tp is float:
        return "number"
    if tp is bool:
        return "boolean"
    if tp is Any:
        return "any"
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        parts = [yaml_type(a, links) for a in args if a is not _NoneType]
        text = " or ".join(parts)
        return text + " or null" if _NoneType in args else text
    if origin is Literal:
        return "string"
    if origin is list:
        return "list of " + yaml_type(typing.get_args(tp)[0], links)
    if origin is dict:
        return "mapping to " + yaml_type(typing.get_args(tp)[1], links)
    if isinstance(tp, type) and tp in links:
        return f"[{tp.__name__}]({links[tp]})"
    return "mapping"


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to `-`."""
    out = []
    for ch in heading.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def _literal_values(tp: Any) -> tuple[str, ...]:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return tuple(str(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType, list):
        for a in typing.get_args(tp):
            found = _literal_values(a)
            if found:
                return found
    return ()


def _default(field: attrs.Attribute) -> str:
    default = field.default
    if default is attrs.NOTHING:
        return "**required**"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        value = default.factory()
        if attrs.has(type(value)):
            return "see below"
        default = value
    return "`" + _yaml_scalar(default) + "`"


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return repr(value) if value == "" or value != value.strip() or "\n" in value else value
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_yaml_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in value.items()) + "}"
    return str(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def allowed(path: str, tp: Any, rule: Rule) -> str:
    """Allowed values and ranges, from the type and the field's rule."""
    parts = []
    values = _literal_values(tp)
    if values:
        parts.append(", ".join(f"`{v}`" for v in values))
    if rule.choices is driver_choices:
        parts.append(", ".join(f"`{d}`" for d in BUILTIN_DRIVERS) + ", or a `ce.sandboxes` "
                     "plugin")
    elif rule.choices is not None:
        parts.append(", ".join(f"`{c}`" for c in sorted(rule.choices(""))))
    if path.endswith(".agent.type"):
        parts.append(", ".join(f"`{t}`" for t in BUILTIN_AGENT_TYPES) + ", or a `ce.agents` "
                     "plugin")
    lo = (f">= {_num(rule.ge)}" if rule.ge is not None
          else f"> {_num(rule.gt)}" if rule.gt is not None else "")
    hi = (f"<= {_num(rule.le)}" if rule.le is not None
          else f"< {_num(rule.lt)}" if rule.lt is not None else "")
    if lo or hi:
        parts.append(", ".join(p for p in (lo, hi) if p))
    if rule.non_empty:
        parts.append("non-empty")
    if rule.pattern_hint:
        parts.append(rule.pattern_hint)
    if rule.path == "workspace":
        parts.append("path in the workspace")
    elif rule.path in ("task", "task_dir"):
        # a host path is resolved against the directory of the file it is written in
        home = "experiment" if path.startswith("experiment.") else "task"
        kind = "file" if rule.path == "task" else "directory"
        parts.append(f"{kind}, relative to the {home} file")
    if rule.merge == "replace":
        parts.append("layers: replaced")
    elif rule.merge == "append":
        parts.append("layers: appended, lower layers first")
    elif rule.merge == "append_reverse":
        parts.append("layers: appended, the task's first")
    return "; ".join(parts)


def _nested(tp: Any) -> list[type]:
    """The schema classes a field's type mentions (records and tagged-union members)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType, list, dict):
        out: list[type] = []
        for a in typing.get_args(tp):
            out += _nested(a)
        return out
    if isinstance(tp, type) and issubclass(tp, Tagged):
        return [tp]
    if isinstance(tp, type) and attrs.has(tp):
        return [tp]
    return []


def _is_list(tp: Any) -> bool:
    if typing.get_origin(tp) is list:
        return True
    return typing.get_origin(tp) in (Union, types.UnionType) and any(
        typing.get_origin(a) is list for a in typing.get_args(tp))


def _is_dict(tp: Any) -> bool:
    if typing.get_origin(tp) is dict:
        return True
    return typing.get_origin(tp) in (Union, types.UnionType) and any(
        typing.get_origin(a) is dict for a in typing.get_args(tp))


def walk(root: type, root_path: str, skip: tuple[type, ...] = ()) -> list[Section]:
    """Sections in order of first appearance (depth first, fields in declaration order).
    A class reached again (agent_judge's `agent`) is linked, not repeated."""
    sections: list[Section] = []
    seen: dict[type, str] = {}

    def visit(cls: type, path: str) -> None:
        if cls in seen or cls in skip:
            return
        if issubclass(cls, Tagged) and not attrs.has(cls):
            seen[cls] = path
            for tag in sorted(cls.MEMBERS):
                visit(cls.MEMBERS[tag], f"{path}[type={tag}]")
            return
        seen[cls] = path
        sections.append(Section(path, cls))
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            tp = hints[field.name]
            suffix = "[]" if _is_list(tp) else ".*" if _is_dict(tp) else ""
            for sub in _nested(tp):
                visit(sub, f"{path}.{field.name}" + ("" if issubclass(sub, Tagged) else suffix))

    visit(root, root_path)
    return sections


def fill(sections: list[Section], links: dict[type, str]) -> None:
    for section in sections:
        hints = typing.get_type_hints(section.cls)
        for field in attrs.fields(section.cls):
            if field.name in section.skip:
                continue
            rule = rule_of(field)
            tp = hints[field.name]
            path = f"{section.path}.{field.name}"
            if _tagged_arg(tp) is not None:
                base = _tagged_arg(tp)
                kinds = ", ".join(f"[`{t}`]({links[base.MEMBERS[t]]})"
                                  for t in sorted(base.MEMBERS))
                type_text = f"list of {base.KIND}s: {kinds}"
            else:
                type_text = yaml_type(tp, links)
            doc = " ".join(rule.doc.split())
            if doc.startswith("ce: "):
                doc = "**ce:** " + doc[4:]
            note = DIFFERENCES.get(_generic(path))
            if note:
                doc = f"{doc} **ce:** {note}" if doc else f"**ce:** {note}"
            section.rows.append((field.name, type_text, _default(field),
                                 allowed(path, tp, rule), doc))


def _tagged_arg(tp: Any) -> type | None:
    """The tagged-union base of `list[Base]` (or `list[Base] | None`)."""
    for a in typing.get_args(tp):
        if isinstance(a, type) and issubclass(a, Tagged):
            return a
        if typing.get_origin(a) is list:
            return _tagged_arg(a)
    return None


def _generic(path: str) -> str:
    """`task.success_criteria[type=x].stop_when` -> `criterion.stop_when` (DIFFERENCES keys)."""
    if "success_criteria[" in path:
        return "criterion." + path.rsplit(".", 1)[1]
    return path


def render_table(rows: list[tuple[str, str, str, str, str]]) -> list[str]:
    out = ["| field | type | default | allowed | description |", "|---|---|---|---|---|"]
    for row in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return out


def removed_fields(cls: type) -> dict[str, str]:
    return dict(getattr(cls, REMOVED_FIELDS_ATTR, {}))
