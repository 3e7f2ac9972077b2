"""Command-line settings (`-D path=value`, `--model`, `--type`, `--driver`) as a config layer.

Each `-D` argument becomes its own little source file, so its diagnostics point into the
argument exactly as a YAML error points into a file.

A bad `-D` hides no task's errors. The rule:

- A `-D` malformed in itself (no `=`, nothing before it, a `[` that is not `[N]`) is a
  usage error (exit status 2).
- Any other problem of a `-D` is an ordinary error at the argument, reported once: a
  path no task has (an unknown or removed field, a field of a single value, a list
  indexed by a name, the dataset), or a value the setting does not take.
- Either way that `-D` is left out, every task is still checked, and the setting it
  names is held on every task (`CommandLine.held`): it counts as broken for the rules
  (`RuleContext.broken`), so none reports an error only the bad `-D` caused. It names
  the path as far as it resolves; an unknown field, the one its did-you-mean names (none:
  nothing held); a removed field or the dataset, nothing.
- What does not fit one task, though the schema has it (an index past the end of its
  list, a field its criterion's type lacks), is reported for that task, naming it; the
  task is then checked without the command line (`ce_lang.compiler`).
"""

from __future__ import annotations

import re
import shlex
import typing
from typing import Any

import attrs
import yaml

from ce_lang.diagnostics import Diagnostics, closest
from ce_lang.paths import SuiteRoots
from ce_lang.schema.fields import REMOVED_FIELDS_ATTR, Rule, Tagged
from ce_lang.schema.task import TaskSpec
from ce_lang.spans import Path, Span, format_path
from ce_lang.validate import Context, Walker, fields_of, strip_optional


@attrs.frozen
class Override:
    path: Path
    value: Any
    source: str  # pseudo file name, e.g. "-D #1"
    text: str
    part_spans: tuple[Span, ...]  # one per path segment

    def span_of_part(self, depth: int) -> Span:
        return self.part_spans[min(depth, len(self.part_spans) - 1)]


def _span(source: str, text: str, start: int, end: int) -> Span:
    return Span(source, 1, start + 1, 1, max(end, start + 1) + 1, start, end)


def flag_span(flag: str, value: str, sources: dict[str, str]) -> Span:
    """Where a setting given by a flag (`--agent codex`) is: a one-line source of its
    own, `<--agent>`, shown with a caret under the value like a `-D`'s."""
    source, text = f"<{flag}>", f"{flag} {value}"
    sources[source] = text
    return _span(source, text, len(flag) + 1, len(text))


@attrs.frozen
class CommandLine:
    overrides: tuple[Override, ...]
    held: frozenset[Path] = frozenset()  # the settings a `-D` with an error names
    ok: bool = True  # no `-D` has an error


def parse_overrides(args: list[str], usage: Diagnostics, diags: Diagnostics,
                    sources: dict[str, str], roots: SuiteRoots | None = None) -> CommandLine:
    """The valid `-D`s; a malformed one is reported to `usage`, the other errors to `diags`."""
    out = []
    held: set[Path] = set()
    errors = usage.count("error") + diags.count("error")
    for n, arg in enumerate(args, start=1):
        source = f"<-D #{n}>"
        sources[source] = arg
        key, eq, raw = arg.partition("=")
        if not eq or not key.strip():
            usage.emit("CE0501", f"`-D {arg}` is not of the form path=value",
                       _span(source, arg, 0, len(arg)), help="e.g. -D agent.model=claude-opus-4-1")
            if not eq:  # `-D agent.model`: the setting it names, if it names one
                path, _ = resolve_path(arg.strip(), source, arg, Diagnostics())
                held.update([path] if path else [])
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw  # not YAML: take the text as a string
        path, ok = resolve_path(key.strip(), source, arg, diags, usage)
        if not ok:
            held.update([path] if path else [])
            continue
        vspan = _span(source, arg, len(key) + 1, len(arg))
        leaf_tp, leaf_rule = ok
        walker = Walker(Context(diags, lambda _p, s=vspan: s, lambda _p, s=vspan: s,
                                roots=roots))
        before = len(diags)
        value = walker.check(value, leaf_tp, path, leaf_rule, partial=True)
        if len(diags) == before:
            out.append(Override(path, value, source, arg, _part_spans(source, arg, key)))
        else:
            held.add(path)
            _quoting_help(diags, before, key, raw, path, leaf_tp, leaf_rule, vspan, roots)
    return CommandLine(tuple(out), frozenset(held),
                       usage.count("error") + diags.count("error") == errors)


def _quoting_help(diags: Diagnostics, before: int, key: str, raw: str, path: Path,
                  tp: Any, rule: Rule, vspan: Span, roots: SuiteRoots | None) -> None:
    """A value YAML read as no string (`Fix it: now` a mapping, `yes` a boolean, `[a]` a
    list) where the text itself would do: the type error's help shows the argument
    quoted for YAML inside the shell's quotes (the shell's own quotes reach no YAML)."""
    as_text = Diagnostics()
    walker = Walker(Context(as_text, lambda _p, s=vspan: s, lambda _p, s=vspan: s,
                            roots=roots))
    walker.check(raw, tp, path, rule, partial=True)
    if as_text:
        return  # the text is no value of the setting either
    fixed = key + "='" + raw.replace("'", "''") + "'"
    shown = f'"{fixed}"' if not re.search(r'["$`\\!]', fixed) else shlex.quote(fixed)
    help_ = f"a -D value is YAML: for this text, quote it for YAML inside the shell's " \
            f"quotes: -D {shown}"
    expects = f"`{format_path(path)}` expects"
    for i in range(before, len(diags)):
        if diags[i].code == "CE0103" and diags[i].message.startswith(expects):
            diags[i] = attrs.evolve(diags[i], help=help_)


def _part_spans(source: str, arg: str, key: str) -> tuple[Span, ...]:
    return tuple(_span(source, arg, start, end) for _, start, end in split_key(key) or ())


_INDEX = re.compile(r"\[(-?\w*)\]")


def split_key(key: str) -> list[tuple[str, int, int]] | None:
    """A -D path's parts with their offsets: `a.b.0.c` and the form diagnostics print,
    `a.b[0].c` (0-based), are the same path. None when a `[` is not a `[N]`."""
    parts: list[tuple[str, int, int]] = []
    offset = 0
    for segment in key.split("."):
        name_end = segment.find("[")
        if name_end < 0:
            parts.append((segment, offset, offset + len(segment)))
        else:
            if name_end:
                parts.append((segment[:name_end], offset, offset + name_end))
            pos = name_end
            while pos < len(segment):
                m = _INDEX.match(segment, pos)
                if m is None:
                    return None
                parts.append((m.group(1), offset + m.start(), offset + m.end()))
                pos = m.end()
        offset += len(segment) + 1
    return parts


def resolve_path(key: str, source: str, arg: str, diags: Diagnostics,
                 usage: Diagnostics | None = None) -> tuple[Path, tuple[Any, Rule] | None]:
    """Walk the schema along `a.b.0.c` (or `a.b[0].c`, as diagnostics print paths);
    return the path and the leaf's (type, rule), or, with an error (a malformed key's to
    `usage`), None and the setting the key names (the module docstring's rule; () none)."""
    parts = split_key(key)
    path: list[str | int] = []
    if parts is None:
        (usage if usage is not None else diags).emit("CE0501", f"`{key}` is not a setting path: an index is written `[N]`",
                   _span(source, arg, 0, len(key)),
                   help="e.g. -D 'success_criteria[0].weight=2' (0-based, as diagnostics "
                        "print it) or -D success_criteria.0.weight=2")
        return (), None
    tp: Any = TaskSpec
    rule = Rule()
    for part, start, end in parts:
        span = _span(source, arg, start, end)
        tp = strip_optional(tp)
        origin = typing.get_origin(tp)
        if origin is list:
            if not part.isdigit():
                diags.emit("CE0501", f"`{format_path(tuple(path))}` is a list: index it with a "
                           f"number, not `{part}`", span,
                           help=f"e.g. `{format_path(tuple(path))}[0]` (0-based)")
                return tuple(path), None
            path.append(int(part))
            tp, rule = typing.get_args(tp)[0], Rule()
            continue
        if origin is dict or tp is Any:
            path.append(part)
            tp, rule = (typing.get_args(tp)[1] if origin is dict else Any), Rule()
            continue
        if isinstance(tp, type) and issubclass(tp, Tagged):
            names = sorted({f[0] for m in tp.MEMBERS.values() for f in fields_of(m)})
            fields = {f[0]: f for m in tp.MEMBERS.values() for f in fields_of(m)}
        elif attrs.has(tp):
            fields = {f[0]: f for f in fields_of(tp)}
            names = list(fields)
        else:
            diags.emit("CE0501", f"`{format_path(tuple(path))}` is a single value; it has "
                       f"no field `{part}`", span)
            return tuple(path), None
        removed = getattr(tp, REMOVED_FIELDS_ATTR, {}) if attrs.has(tp) else {}
        if part in removed:
            where = f"in `{format_path(tuple(path))}`" if path else "at the top level"
            diags.emit("CE0106", f"`{part}` is no longer supported {where}: {removed[part]}",
                       span)
            return (), None
        if part not in fields:
            where = f"`{format_path(tuple(path))}`" if path else "a task"
            fix = closest(part, names)
            option = _RUN_OPTIONS.get(part) if not path else None
            diags.emit("CE0501", f"unknown setting `{part}` in {where}", span,
                       help=option or (f"did you mean `{fix}`?" if fix else None))
            return ((*path, fix) if fix and not option else ()), None
        if not path and part == "dataset":
            diags.emit("CE0501", "the dataset cannot be overridden: rows are expanded before "
                       "the config layers apply", span)
            return (), None
        path.append(part)
        _, tp, rule, _ = fields[part]
    return tuple(path), (tp, rule)


# what an experiment sets, or an option does, that is no task setting: `-D repeats=3`
_RUN_OPTIONS = {
    "repeats": "trials per task are not a task setting: `--repeats N` (or `repeats:` in "
               "an experiment's defaults or variant)",
    "model": "the model is `agent.model`: `-D agent.model=M`, or `--model M`",
}


def overrides_layer_value(overrides: list[Override], flags: dict[Path, Any]) -> dict[str, Any]:
    """Nest the overrides into one task-shaped mapping (later -D wins)."""
    root: dict[Any, Any] = {}
    for path, value in [*((o.path, o.value) for o in overrides), *flags.items()]:
        node = root
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return root
