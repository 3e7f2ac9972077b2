"""A dataset task's rows, without redoing per row what no row changes.

A row changes only strings, and only under the settings rows substitute in (the prompt,
the criteria, `reference`, `agent.script`: `dataset.substitute_row_keys`). So a task's
layers are merged once per variant, and each row substitutes into that merged value: a
merge moves values by key and never reads a string, so this is the value merging the
substituted layers gives (tests/test_row_trials.py compares the two). Substitution
returns what holds no `${row.key}` itself, and the structured task of a row reuses the
template's blocks and criteria its row left as they were: the work keyed by those
objects (a criterion's checked instance, a block's lowered and hashed form) is then
done once for all rows.
"""

from __future__ import annotations

import contextlib
import typing
from typing import Any

import attrs

from ce_lang import dataset as ds
from ce_lang.convert import converter
from ce_lang.layers import Layer, Merged, merge_layers
from ce_lang.schema.task import TaskSpec
from ce_lang.spans import Path
from ce_lang.validate import Context, Walker


class RowTemplate:
    """One task under one variant, its layers merged before any row is substituted."""

    def __init__(self, layers: list[Layer]):
        self.merged = merge_layers(layers, TaskSpec)
        self.task: TaskSpec | None = None
        self.fits: dict = {}  # `RowWalker`'s memo: what checking each block found
        # it fails only after schema errors: each row then structures its own value
        with contextlib.suppress(Exception):
            self.task = converter.structure(self.merged.value, TaskSpec)

    def merged_for(self, row: ds.Row) -> Merged:
        """The row's merged config: the template's, the row substituted in its value."""
        return attrs.evolve(self.merged, value=ds.substitute_row_keys(self.merged.value, row))

    def structure(self, merged: Merged) -> TaskSpec:
        """`converter.structure(merged.value, TaskSpec)`, reusing the template's
        structured fields and criteria that `merged` (one of `merged_for`'s) shares."""
        base, template = self.merged.value, self.task
        value = merged.value
        if template is None or value.keys() != base.keys():
            return converter.structure(value, TaskSpec)
        changed: dict[str, Any] = {}
        for key, v in value.items():
            if v is base[key]:
                continue
            old = base[key]
            if key == "success_criteria" and isinstance(v, list) and isinstance(old, list) \
                    and len(v) == len(old):
                kept = template.success_criteria
                item_type = typing.get_args(_hints()[key])[0]
                changed[key] = [kept[i] if item is old[i] else
                                converter.structure(item, item_type)
                                for i, item in enumerate(v)]
            else:
                changed[key] = converter.structure(v, _hints()[key])  # keys are field names
        return attrs.evolve(template, **changed) if changed else template


_HINTS: dict[str, Any] = {}


def _hints() -> dict[str, Any]:
    if not _HINTS:
        _HINTS.update(typing.get_type_hints(TaskSpec))
    return _HINTS


class RowWalker(Walker):
    """A `Walker` that checks a block (a mapping or list below the top) once per object:
    what checking it did (diagnostics, dropped and broken paths ...) is kept in `memo` by
    the object at its path and done again from there. A dataset's rows share the blocks
    they leave as they were, so checking each row's merged task with the command line
    (`compiler.cli_fits`) checks only what the row substituted. The spans of a block's
    diagnostics come from the merge's layers, which all of a template's rows share."""

    def __init__(self, ctx: Context, memo: dict):
        super().__init__(ctx)
        self.memo = memo

    def check(self, value: Any, tp: Any, path: Path, rule: Any = None,
              partial: bool = False) -> Any:
        if not path or not isinstance(value, dict | list):
            return super().check(value, tp, path, rule, partial)
        key = (path, id(value), tp, rule, partial)
        hit = self.memo.get(key)
        if hit is None or hit[0] is not value:
            marks = (len(self.diags), len(self.broken_paths), len(self.dropped),
                     len(self.unknown_keys), set(self.index_maps))
            out = super().check(value, tp, path, rule, partial)
            hit = self.memo[key] = (value, out, self.diags[marks[0]:],
                                    self.broken_paths[marks[1]:], self.dropped[marks[2]:],
                                    self.unknown_keys[marks[3]:],
                                    {k: v for k, v in self.index_maps.items()
                                     if k not in marks[4]})
            return out
        _, out, diags, broken, dropped, unknown, index_maps = hit
        self.diags.extend(diags)
        self.broken_paths.extend(broken)
        self.dropped.extend(dropped)
        self.unknown_keys.extend(unknown)
        self.index_maps.update(index_maps)
        return out
