"""Check a raw YAML value against a schema class and return it normalized.

One walker driven by the attrs classes and their `Rule`s reports every problem at its
span (unknown keys with did-you-mean, removed fields with their migration, wrong types,
ranges, choices, tagged unions, paths) and returns a copy that cattrs can structure
without surprises: aliases expanded, task-relative paths made absolute.
"""

from __future__ import annotations

import math
import os
import re
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Literal, Union

import attrs

from ce_lang import hostfs, vendor
from ce_lang.diagnostics import Diagnostics, closest, did_you_mean
from ce_lang.paths import SuiteRoots, host_path_problem
from ce_lang.schema.agent import BUILTIN_AGENT_TYPES
from ce_lang.schema.fields import REMOVED_FIELDS_ATTR, UNKNOWN_HELP_ATTR, Rule, Tagged, rule_of
from ce_lang.spans import Path, Span, format_path
from ce_lang.value_words import describe, looks_numeric, num, shape_help, snippet, yaml_kind

_NoneType = type(None)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class _Invalid:
    """Marks a value that failed validation; containers drop it so checking can go on."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()


@attrs.frozen
class Dropped:
    """An entry (a criterion; an experiment's variant or defaults) dropped for a missing or
    invalid field: the fields that passed, so the rules reading only those can still run on
    it (`stand_in`), or its valid settings still apply (`ce_lang.experiment`)."""

    path: Path  # where the entry is in the document
    cls: type  # the schema class its tag chose
    value: dict[str, Any]  # its fields that passed, normalized (user arguments unchecked)
    broken: frozenset[str]  # its fields that are missing or failed


@attrs.define
class Context:
    diags: Diagnostics
    span_of: Callable[[Path], Span]
    key_span_of: Callable[[Path], Span]
    check_paths_exist: bool = True
    user_types: frozenset[str] = frozenset()  # criteria defined in the user's .ce files
    # the user's criteria are not all known (an experiment's broken `criteria_files`): a
    # criterion of an unknown type may be one of theirs, so it is dropped unreported
    types_unknown: bool = False
    roots: SuiteRoots | None = None  # where task paths may resolve (None: unchecked)
    # top-level fields whose block (and the blocks inside it, not list entries) keeps
    # its intact fields when one is broken, defaults standing in for the broken ones:
    # the rules of the intact fields still run (`RuleContext.intact` holds the broken
    # ones), so one compile reports a bad `sandbox.driver` and a bad ignore pattern
    keep_intact: frozenset[str] = frozenset()


@cache
@cache
def fields_of(cls: type) -> tuple[tuple[str, Any, Rule, bool], ...]:
    """(name, resolved type, rule, required) for each attrs field of `cls` (once per
    class: the merge and the path rules ask for every block of every trial)."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, hints[f.name], rule_of(f), f.default is attrs.NOTHING)
        for f in attrs.fields(cls)
    )


class Walker:
    """Checks and normalizes; a record with an invalid field is dropped (not the root, nor
    a block under `Context.keep_intact`: its intact fields are kept), and
    `index_maps` records, per list that lost items, the original index of each kept item."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.diags = ctx.diags
        self.index_maps: dict[Path, list[int]] = {}
        self.dropped: list[Dropped] = []  # tagged entries dropped for a field, in order
        # every field or list item the walker dropped (missing, or reported invalid)
        self.broken_paths: list[Path] = []
        # the root record when it has a broken field: its intact fields, the broken ones
        self.root: Dropped | None = None
        # each unknown (or removed) key: its path, and the field its did-you-mean names
        self.unknown_keys: list[tuple[Path, str | None]] = []

    def original_path(self, path: Path, fixed: int = 0) -> Path:
        """Map a path into the normalized value back to the source document's path; the
        first `fixed` parts already are the document's (a dropped entry's own path)."""
        out: list[Any] = list(path[:fixed])
        for part in path[fixed:]:
            mapping = self.index_maps.get(tuple(out))
            out.append(mapping[part] if isinstance(part, int) and mapping is not None
                       and part < len(mapping) else part)
        return tuple(out)

    # -- entry ---------------------------------------------------------------------------
    def check(self, value: Any, tp: Any, path: Path, rule: Rule | None = None,
              partial: bool = False) -> Any:
        rule = rule or _NO_RULE
        kind = _shape(tp)
        if kind == "union":
            return self.union(value, tp, path, rule, partial)
        if tp is Any:
            return value
        if value is None:
            return self.wrong_type(value, tp, path)
        if kind == "scalar":
            return self.scalar(value, tp, path, rule)
        if kind == "record":
            return self.record(value, tp, path, partial or rule.partial)
        if kind == "list":
            return self.list(value, tp, path, rule, partial)
        if kind == "tagged":
            return self.tagged(value, tp, path, partial)
        if kind == "literal":
            return self.literal(value, tp, path)
        return self.dict(value, tp, path, rule)

    # -- scalars ---------------------------------------------------------------------------
    def scalar(self, value: Any, tp: type, path: Path, rule: Rule) -> Any:
        if tp is bool:
            if not isinstance(value, bool):
                return self.wrong_type(value, tp, path)
            return value
        if tp is str:
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)  # `commit: 1234567`, `expected_stdout: 42`
            if not isinstance(value, str):
                return self.wrong_type(value, tp, path)
            if rule.non_empty and not value.strip():
                self.diags.emit("CE0110", f"`{self.name(path)}` must not be empty",
                                self.ctx.span_of(path))
            elif rule.pattern and len(value) > hostfs.NAME_MAX:  # ce run failed: File name too long
                self.diags.emit(
                    "CE0111", f"`{self.name(path)}` {value[:20]!r}... is {len(value)} "
                    f"characters long, more than {hostfs.NAME_MAX}", self.ctx.span_of(path),
                    notes=("an identifier names a file or directory (a trial's directory, "
                           f"a mock's file), and a file name has at most {hostfs.NAME_MAX} "
                           "characters",))
            elif rule.pattern and not re.fullmatch(rule.pattern, value):
                self.diags.emit(
                    "CE0111", f"`{self.name(path)}` {value!r} is not a valid identifier",
                    self.ctx.span_of(path), help=rule.pattern_hint or None)
            elif rule.choices is not None and value not in (allowed := rule.choices(value)):
                self.diags.emit(
                    "CE0105", f"`{self.name(path)}` must be one of {', '.join(allowed)}; "
                    f"found {snippet(value)}", self.ctx.span_of(path),
                    help=did_you_mean(value, list(allowed)))
                return INVALID
            if rule.path:
                value = self.path_value(value, path, rule)
            return value
        if tp is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return self.wrong_type(value, tp, path)
            if not INT64_MIN <= value <= INT64_MAX:  # the archive's integers are 64-bit
                self.diags.emit(
                    "CE0104", f"`{self.name(path)}` is out of range: a whole number here "
                    f"must be at most {INT64_MAX:,} in size, found {snippet(value)}",
                    self.ctx.span_of(path))
                return INVALID
        elif tp is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return self.wrong_type(value, tp, path)
            if not math.isfinite(value):
                self.diags.emit("CE0104", f"`{self.name(path)}` must be a finite number",
                                self.ctx.span_of(path))
                return INVALID
            value = float(value)
        return value if self.range(value, path, rule) else INVALID

    def range(self, value: float, path: Path, rule: Rule) -> bool:
        checks = (
            (rule.ge, lambda b: value >= b, ">="), (rule.gt, lambda b: value > b, ">"),
            (rule.le, lambda b: value <= b, "<="), (rule.lt, lambda b: value < b, "<"),
        )
        bounds = [f"{op} {num(b)}" for b, _, op in checks if b is not None]
        for bound, ok, _op in checks:
            if bound is not None and not ok(bound):
                percent = rule.ge == 0 and rule.le == 1 and 5 <= value <= 100  # 90 for 0.9
                self.diags.emit(
                    "CE0104",
                    f"`{self.name(path)}` must be {' and '.join(bounds)}, found {num(value)}",
                    self.ctx.span_of(path), help=f"a fraction: write {num(value / 100)} for "
                    f"{num(value)}%" if percent else None)
                return False
        return True

    def literal(self, value: Any, tp: Any, path: Path) -> Any:
        choices = typing.get_args(tp)
        if value in choices and type(value) is type(choices[0]):
            return value
        listed = ", ".join(str(c) for c in choices)
        hint = did_you_mean(str(value), [str(c) for c in choices]) if isinstance(value, str) else None
        self.diags.emit(
            "CE0105", f"`{self.name(path)}` must be one of {listed}; found {snippet(value)}",
            self.ctx.span_of(path), help=hint)
        return INVALID

    def union(self, value: Any, tp: Any, path: Path, rule: Rule, partial: bool) -> Any:
        members = [a for a in typing.get_args(tp) if a is not _NoneType]
        if value is None:
            if _NoneType in typing.get_args(tp):
                return None
            return self.wrong_type(value, tp, path)
        if len(members) == 1:
            return self.check(value, members[0], path, rule, partial)
        for member in members:  # first member whose YAML shape fits
            if _fits(value, member):
                return self.check(value, member, path, rule, partial)
        return self.wrong_type(value, tp, path)

    # -- containers ------------------------------------------------------------------------
    def list(self, value: Any, tp: Any, path: Path, rule: Rule, partial: bool) -> Any:
        if not isinstance(value, list):
            return self.wrong_type(value, tp, path)
        if rule.non_empty and not value:
            self.diags.emit("CE0110", f"`{self.name(path)}` must list at least one entry",
                            self.ctx.span_of(path))
        (item_tp,) = typing.get_args(tp) or (Any,)
        item_rule = Rule(path=rule.path, non_empty=False) if rule.path else None
        items = [self.check(v, item_tp, (*path, i), item_rule, partial) for i, v in enumerate(value)]
        if any(v is INVALID for v in items):
            self.index_maps[path] = [i for i, v in enumerate(items) if v is not INVALID]
            self.broken_paths.extend((*path, i) for i, v in enumerate(items) if v is INVALID)
            return [v for v in items if v is not INVALID]
        return items

    def dict(self, value: Any, tp: Any, path: Path, rule: Rule) -> Any:
        if not isinstance(value, dict):
            return self.wrong_type(value, tp, path)
        if rule.non_empty and not value:
            self.diags.emit("CE0110", f"`{self.name(path)}` must not be empty",
                            self.ctx.span_of(path))
        _, val_tp = typing.get_args(tp) or (str, Any)
        checked = {k: self.check(v, val_tp, (*path, k)) for k, v in value.items()}
        if any(v is INVALID for v in checked.values()):
            # the mapping as written is broken: what is left of it would be checked as if
            # it were the whole (`thresholds: {accuracy: high}` is not an empty mapping)
            self.broken_paths.extend((*path, k) for k, v in checked.items() if v is INVALID)
            return INVALID
        return checked

    def record(self, value: Any, cls: type, path: Path, partial: bool,
               skip: frozenset[str] = frozenset(), keep_dropped: bool = False) -> Any:
        """`keep_dropped`: when a field breaks the record, its intact fields go to
        `dropped` (a criterion; an experiment's variant)."""
        if not isinstance(value, dict):
            return self.wrong_type(value, cls, path)
        fields = fields_of(cls)
        names = [f[0] for f in fields]
        removed: dict[str, str] = getattr(cls, REMOVED_FIELDS_ATTR, {})
        kind = value.get("type")
        if path == ("agent",) and isinstance(kind, str) and kind in vendor.AGENT_TYPES:
            # its own settings would only add noise: CE0113 says it all
            self.diags.emit("CE0113", vendor.message("agent type", kind,
                                                     vendor.AGENT_TYPES[kind]),
                            self.ctx.span_of((*path, "type")),
                            help="ce's agent types: " + ", ".join(BUILTIN_AGENT_TYPES))
            return INVALID
        for key in value:
            if key in names or key in skip:
                continue
            where = self.where(path, cls)
            self.unknown_keys.append(((*path, key), closest(key, names)))
            if key in removed:
                self.diags.emit("CE0106", f"`{key}` is no longer supported {where}: {removed[key]}",
                                self.ctx.key_span_of((*path, key)))
            else:
                self.diags.emit("CE0101", f"unknown field `{key}` {where}",
                                self.ctx.key_span_of((*path, key)),
                                help=getattr(cls, UNKNOWN_HELP_ATTR, {}).get(key)
                                or did_you_mean(key, names))
        out: dict[str, Any] = {}
        broken: list[str] = []
        for name, tp, rule, required in fields:
            if name in value:
                checked = self.check(value[name], tp, (*path, name), rule, partial)
                if checked is not INVALID:
                    out[name] = checked
                else:
                    self.broken_paths.append((*path, name))
                    if required or path:  # an optional top-level field is only left out
                        broken.append(name)
            elif required and not partial and name not in skip:
                self.diags.emit("CE0102", f"missing required field `{name}` {self.where(path, cls)}",
                                self.ctx.span_of(path))
                self.broken_paths.append((*path, name))
                broken.append(name)
        for name in skip:  # passed through unchecked: another pass owns them
            if name in value:
                out[name] = value[name]
        complete = not broken
        if broken and keep_dropped and not partial:  # the rules of its other fields still run
            self.dropped.append(Dropped(path, cls, out, frozenset(broken)))
        if broken and not path:  # the task's rules reading its intact fields still run
            self.root = Dropped(path, cls, out, frozenset(broken))
        if broken and not partial and self._keeps_intact(path):
            filled = stand_in(Dropped(path, cls, out, frozenset(broken)))
            if filled is not None:
                return filled
        record = getattr(cls, "__ce_record__", None)
        if record is not None and record.requires and complete and not partial \
                and not self._record_ok(record, cls, value, out, path):
            return INVALID  # a broken constraint drops the record, as a bad field does
        return out if complete or partial else INVALID

    def _keeps_intact(self, path: Path) -> bool:
        """A block under a `Context.keep_intact` field, reached through blocks only."""
        return bool(path) and path[0] in self.ctx.keep_intact \
            and all(isinstance(part, str) for part in path)

    def _record_ok(self, record: Any, cls: type, value: dict[str, Any], out: dict[str, Any],
                   path: Path) -> bool:
        """The `require` constraints of the `.ce` record a generated class stands for."""
        from ce_lang.lang.bind import report_record

        values = {}
        for f in attrs.fields(cls):
            if f.name in out:
                values[f.name] = out[f.name]
            elif isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
                values[f.name] = f.default.factory()
            elif f.default is not attrs.NOTHING:
                values[f.name] = f.default
        return report_record(record, values, frozenset(value), path, self.diags,
                             self.ctx.span_of, self.ctx.key_span_of)

    def tagged(self, value: Any, base: type[Tagged], path: Path, partial: bool) -> Any:
        if not isinstance(value, dict):
            return self.wrong_type(value, base, path)
        tag_field = base.TAG_FIELD
        tag = value.get(tag_field)
        if tag is None:
            self.diags.emit("CE0102", f"missing `{tag_field}` ({base.KIND}) at {format_path(path)}",
                            self.ctx.span_of(path),
                            help="one of: " + ", ".join(sorted(base.MEMBERS)))
            return INVALID
        tag_path = (*path, tag_field)
        if not isinstance(tag, str):
            return self.wrong_type(tag, str, tag_path)
        if tag in base.REMOVED:
            self.diags.emit("CE0107", f"{base.KIND} `{tag}` was removed: {base.REMOVED[tag]}",
                            self.ctx.span_of(tag_path))
            return INVALID
        if tag in base.ALIASES:
            alias = tag
            tag, forced = base.ALIASES[tag]
            for name, fixed in forced.items():  # the alias sets them: another value is lost
                if name in value and value[name] != fixed:
                    shown = ", ".join(f"{k}: {v}" for k, v in forced.items())
                    self.diags.emit("CE0109", f"`{alias}` is `{tag}` with {shown}; it does not "
                                    f"take `{name}: {value[name]}`",
                                    self.ctx.span_of((*path, name)),
                                    help=f"use `type: {tag}` to set `{name}`")
            value = {**value, **forced, tag_field: tag}
        cls = base.MEMBERS.get(tag)
        if cls is None and tag in self.ctx.user_types and base.USER_BASE is not None:
            # a user-defined criterion: common fields here, arguments against its signature
            extra = frozenset(value) - {f[0] for f in fields_of(base.USER_BASE)}
            return self.record(value, base.USER_BASE, path, partial, skip=extra,
                               keep_dropped=True)
        if cls is None and base.KIND == "criterion type" and tag in vendor.CRITERION_TYPES:
            self.diags.emit("CE0113", vendor.message("criterion type", tag,
                                                     vendor.CRITERION_TYPES[tag]),
                            self.ctx.span_of(tag_path))
            return INVALID
        if cls is None and self.ctx.types_unknown and base.USER_BASE is not None:
            return INVALID  # perhaps a criterion of the files that could not be read
        if cls is None:
            self.diags.emit("CE0108", f"unknown {base.KIND} `{tag}`", self.ctx.span_of(tag_path),
                            help=did_you_mean(tag, [*base.MEMBERS, *base.ALIASES,
                                                    *self.ctx.user_types]))
            return INVALID
        return self.record(value, cls, path, partial, keep_dropped=True)

    # -- paths ---------------------------------------------------------------------------
    def path_value(self, value: str, path: Path, rule: Rule) -> str:
        span = self.ctx.span_of(path)
        if rule.path == "workspace":
            check_workspace_path(value, span, self.name(path), self.diags)
            return value
        base = os.path.dirname(os.path.abspath(span.file))
        resolved = os.path.normpath(os.path.join(base, value))
        if self.ctx.roots is not None and "${row." not in value:
            problem = host_path_problem(value, resolved, span.file, self.ctx.roots)
            if problem is not None:
                code, message, help_ = problem
                self.diags.emit(code, f"`{self.name(path)}`: {message}", span, help=help_)
                return INVALID
        if self.ctx.check_paths_exist:
            want_dir = rule.path == "task_dir"
            ok = hostfs.isdir(resolved) if want_dir else hostfs.isfile(resolved)
            if not ok:
                kind = "directory" if want_dir else "file"
                exists = hostfs.exists(resolved)
                self.diags.emit(
                    "CE0207",
                    f"`{self.name(path)}`: {kind} {value!r} "
                    + ("is not a " + kind if exists else "not found"),
                    span, notes=(f"resolved against {_base_name(span.file)}: {resolved}",),
                    help=_task_dir_help(value))
        return resolved

    # -- messages ------------------------------------------------------------------------
    def wrong_type(self, value: Any, tp: Any, path: Path) -> Any:
        found = yaml_kind(value)
        shown = f" {snippet(value)}" if not isinstance(value, dict | list) and value is not None else ""
        help_ = None
        if tp is str and isinstance(value, float | bool):
            help_ = "quote the value to make it a string"
        elif tp in (int, float) and isinstance(value, str) and looks_numeric(value):
            help_ = (f"YAML 1.1 reads `{value}` as a string; write it with a decimal point "
                     "and a signed exponent (e.g. 1.0e+3) or in full"
                     if "e" in value.lower() else "remove the quotes")
        elif isinstance(value, str) and getattr(tp, "SCALAR_HELP", None):
            help_ = tp.SCALAR_HELP.format(value=value)
        else:
            help_ = shape_help(value, tp, path)
        self.diags.emit("CE0103", f"`{self.name(path)}` expects {describe(tp)}, found {found}{shown}",
                        self.ctx.span_of(path), help=help_)
        return INVALID

    @staticmethod
    def name(path: Path) -> str:
        return format_path(path)

    @staticmethod
    def where(path: Path, cls: type) -> str:
        if not path:
            return "at the top level"
        tags = [t for t, c in getattr(cls, "MEMBERS", {}).items() if c is cls]
        kind = f" ({tags[0]})" if tags else ""
        return f"in `{format_path(path)}`{kind}"


def stand_in(dropped: Dropped) -> dict[str, Any] | None:
    """A dropped entry's value made structurable: each broken field that has a default
    takes it, each required one a placeholder of its type ("", 0, [] ...). Rules must
    not read the broken fields; None when a placeholder cannot be made."""
    out = dict(dropped.value)
    for name, tp, _rule, required in fields_of(dropped.cls):
        if name not in dropped.broken or not required:
            continue  # an optional field left out takes its default
        filler = _placeholder(tp)
        if filler is INVALID:
            return None
        out[name] = filler
    return out


def broken_fields(broken_paths: list[Path]) -> frozenset[Path]:
    """The task fields a schema error dropped (`Walker.broken_paths`), for the rules
    (`RuleContext.broken`). Inside `success_criteria` only the dropped entries: an entry
    kept is intact (a list inside it that lost an item is its own rules' business)."""
    return frozenset(p for p in broken_paths
                     if p and not (p[0] == "success_criteria" and len(p) > 2))


def _placeholder(tp: Any) -> Any:
    if _shape(tp) == "union" and _NoneType in typing.get_args(tp):
        return None
    tp = strip_optional(tp)
    empty = {str: "", int: 0, float: 0.0, bool: False}
    if tp in empty:
        return empty[tp]
    shape = _shape(tp)
    if shape == "list":
        return []
    if shape == "dict":
        return {}
    if shape == "literal":
        return typing.get_args(tp)[0]
    return INVALID


def check_workspace_path(value: str, span: Span, name: str, diags: Diagnostics,
                         root: str = "the workspace", label: str | None = None) -> None:
    """Workspace paths are relative and never climb out of the workspace."""
    what = label or f"`{name}`"
    if value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", value):
        diags.emit("CE0206", f"{what} must be relative to {root}, found {value!r}", span)
        return
    depth = 0
    for part in re.split(r"[\\/]+", value):
        if part == "..":
            depth -= 1
            if depth < 0:
                diags.emit("CE0206", f"{what} {value!r} escapes {root}", span)
                return
        elif part not in ("", "."):
            depth += 1


_NO_RULE = Rule()


def strip_optional(tp: Any) -> Any:
    """`T | None` -> `T`; other types unchanged."""
    args = typing.get_args(tp)
    if args and _NoneType in args:
        rest = [a for a in args if a is not _NoneType]
        if len(rest) == 1:
            return rest[0]
    return tp


@cache
def _shape(tp: Any) -> str:
    """How the walker treats a schema type (computed once per type)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return "union"
    if origin is Literal:
        return "literal"
    if origin is list:
        return "list"
    if origin is dict:
        return "dict"
    if isinstance(tp, type) and issubclass(tp, Tagged):
        return "tagged"
    if attrs.has(tp):
        return "record"
    return "scalar"


def _fits(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is list:
        return isinstance(value, list)
    if origin is dict or attrs.has(tp) or (isinstance(tp, type) and issubclass(tp, Tagged)):
        return isinstance(value, dict)
    if tp is bool:
        return isinstance(value, bool)
    if tp is str:
        return isinstance(value, str)
    if tp in (int, float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if origin is Literal:
        return True
    return True


def _task_dir_help(value: str) -> str | None:
    """`$TASK_DIR/x` in a task path: criteria's commands and files expand it, a path the
    task file names does not (it is relative to that file's directory already)."""
    for prefix in ("$TASK_DIR/", "${TASK_DIR}/"):
        if value.startswith(prefix):
            return (f"`$TASK_DIR` is expanded in criteria only; this path is relative to "
                    f"the file's directory already: write `{value[len(prefix):]}`")
    return None


def _base_name(file: str) -> str:
    """What a relative host path was resolved against: a `-D` value (pseudo-file `<-D
    #1>`) against the current directory, else its file's directory."""
    return "the current directory" if file.startswith("<") else "the file's directory"
