"""Where a dataset's rows reach a task's settings: the `${row.KEY}` references of the
task file, of an experiment's layers and of `-D` (checked against the rows), and those
layers with a row substituted. The compiler calls these per task; the grammar of a
reference and its substitution are `dataset`'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ce_lang import dataset as ds
from ce_lang.diagnostics import Diagnostics
from ce_lang.layers import Layer
from ce_lang.spans import Span
from ce_lang.yaml_source import LocatedDoc

# the task's own settings rows are substituted in
ROW_FIELDS = ("initial_prompt", "success_criteria", "reference")


def _task_sources(value: dict[str, Any], span_of: Callable, text: str) -> list:
    sources = [s for key in ROW_FIELDS
               for s in ds.string_sources(value.get(key), (key,), span_of, text)]
    return [*sources, *ds.string_sources(_agent_script(value), ("agent", "script"), span_of,
                                         text)]


def check_task_refs(value: dict[str, Any], doc: LocatedDoc, original_path: Callable,
                    rows: list[ds.Row] | None, diags: Diagnostics) -> set[tuple[str, Span]]:
    """The task file's references: each names a key every row has (errors stop the plan's
    emission), none sits where rows are not substituted, near misses (`{row.q}`) warn.
    Returns (row id, reference span) of each reference a row cannot fill."""
    broken: set[tuple[str, Span]] = set()
    if "${row." not in doc.text and rows is None:  # most tasks have no rows at all
        return broken
    span_of = lambda p: doc.span(original_path(p))  # noqa: E731
    sources = _task_sources(value, span_of, doc.text)
    if "${row." in doc.text:
        ds.check_refs(ds.find_refs(sources), rows, diags, broken)
        _warn_in_keys(value, lambda p: doc.key_span(original_path(p)), diags)
        ds.warn_unsubstituted(ds.find_refs(list(ds.unsubstituted_sources(
            value, span_of, doc.text))), diags)
    if rows is not None:
        ds.warn_near_misses(sources, diags)
    return broken


def check_layer_refs(experiment: Any, cli: Layer | None, rows: list[ds.Row] | None,
                     task_id: str, diags: Diagnostics) -> set[tuple[str, Span]]:
    """`${row.key}` an experiment or `-D` writes where rows substitute (a variant's
    prompt, its prompt mutations, `agent.script`): a key every row has, as in the task
    itself; in a task without a dataset it stays as written (a warning)."""
    layers = (experiment.defaults, *(v.layer for v in experiment.variants), cli)
    sources = [s for layer in layers if layer is not None
               for s in ds.row_key_sources(layer.value, layer.span_of)]
    sources += [s for v in experiment.variants for s in v.mutation_sources]
    refs = ds.find_refs(sources)
    broken: set[tuple[str, Span]] = set()
    if rows is not None:
        ds.check_refs(refs, rows, diags, broken)
        return broken
    for _src, key, span in refs:
        if ds.KEY.fullmatch(key):
            diags.emit("CE0304", f"`${{row.{key}}}` stays as written in task "
                       f"{task_id!r}: it has no dataset", span,
                       help="rows are substituted only in the trials of a task with a "
                       "`dataset`")
    return broken


def mutation_with_row(mutation: Any, row: ds.Row) -> Any:
    """A prompt mutation with the row substituted in its text (`type` aside)."""
    return attrs.evolve(mutation, **{
        f.name: ds.substitute_tree(getattr(mutation, f.name), row)
        for f in attrs.fields(type(mutation)) if f.name != "type"})


def report_row_problems(problems: list, n_rows: int, diags: Diagnostics,
                        broken: set[tuple[str, Span]] = frozenset()) -> None:
    """One diagnostic per problem, naming the dataset rows it occurs on; none for a row
    at a value holding a reference that row cannot fill (`broken`: CE0303 said so, and
    the rest is what the empty substitute did)."""
    grouped: dict[tuple, list[str]] = {}
    for p in problems:
        if any(row == p.row_id and _within(span, p.span) for row, span in broken):
            continue
        rows = grouped.setdefault((p.code, p.message, p.span, p.help), [])
        if p.row_id not in rows:
            rows.append(p.row_id)
    for (code, message, span, help_), rows in grouped.items():
        names = ", ".join(repr(r) for r in rows[:5]) + (
            f" and {len(rows) - 5} more" if len(rows) > 5 else "")
        word = "row" if len(rows) == 1 else "rows"
        diags.emit(code, f"{message} (dataset {word} {names}; {len(rows)} of {n_rows})",
                   span, help=help_)


def _within(inner: Span, outer: Span) -> bool:
    return inner.file == outer.file and (outer.line, outer.col) <= (inner.line, inner.col) \
        and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)


def _agent_script(value: dict[str, Any]) -> Any:
    """The task's own `agent.script` (its rows substitute there, as in `reference`)."""
    agent = value.get("agent")
    return agent.get("script") if isinstance(agent, dict) else None


def _warn_in_keys(value: dict[str, Any], span_of: Callable, diags: Diagnostics) -> None:
    """CE0304: a `${row.key}` in a mapping's key (`params: {"${row.k}": v}`) is not
    substituted, even where the values are: said at the entry."""
    def walk(node: Any, path: tuple) -> None:
        if isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))
        elif isinstance(node, dict):
            for k, v in node.items():
                if isinstance(k, str) and "${row." in k:
                    diags.emit("CE0304", f"`{k}` is a mapping key: `${{row...}}` is not "
                               "substituted in keys, only in values; it stays as written",
                               span_of((*path, k)),
                               help="put the row-dependent part in a value")
                walk(v, (*path, k))

    for key in ROW_FIELDS:
        walk(value.get(key), (key,))
    walk(_agent_script(value), ("agent", "script"))
