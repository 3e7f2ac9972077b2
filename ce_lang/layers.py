"""Config layers merged by the schema's merge rules, remembering where each setting came from.

Layers, lowest first: built-in defaults -> experiment defaults -> task -> variant ->
command line. Mappings merge per key, lists replace, except the fields whose `Rule.merge`
says append (template_sources, pre_run) or append-after (post_run). An experiment's
defaults and variants become task-shaped layers (`experiment_layer`).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

import attrs

from ce_lang.schema.fields import Rule, Tagged
from ce_lang.spans import Path, Span, format_path
from ce_lang.validate import fields_of, strip_optional

# Setting one of these in a higher layer removes the other one from the lower layers.
EXCLUSIVE = {
    "initial_prompt": "initial_prompt_file", "initial_prompt_file": "initial_prompt",
    "system_prompt": "system_prompt_file", "system_prompt_file": "system_prompt",
}


def _same(path: Path) -> Path:
    return path


@attrs.frozen
class Layer:
    """One layer's task-shaped value; `span_of`/`key_span_of` take paths into that value and
    `doc_path` maps them to the path in the file they came from (for messages)."""

    name: str
    value: dict[str, Any]
    span_of: Callable[[Path], Span]
    key_span_of: Callable[[Path], Span] | None = None
    doc_path: Callable[[Path], Path] = _same
    has_key: Callable[[Path], bool] | None = None  # was this key written (even as null)?


@attrs.frozen
class Merged:
    value: dict[str, Any]
    layers: tuple[Layer, ...]
    origin: dict[Path, tuple[int, Path]]
    leaves: frozenset[Path]
    # (layer, path, list length): a list index that does not exist
    unapplied: tuple[tuple[int, Path, int], ...] = ()

    def locate(self, path: Path) -> tuple[Layer, Path]:
        """The layer a path's value came from, and the path inside that layer's value."""
        for cut in range(len(path), -1, -1):
            hit = self.origin.get(path[:cut])
            if hit is not None:
                i, lpath = hit
                return self.layers[i], lpath + path[cut:]
        return self.layers[-1], path

    def span(self, path: Path) -> Span:
        layer, lpath = self.locate(path)
        return layer.span_of(lpath)

    def key_span(self, path: Path) -> Span:
        layer, lpath = self.locate(path)
        return (layer.key_span_of or layer.span_of)(lpath)

    def written(self, path: Path) -> bool:
        """Whether the key at `path` was written in its file (`x: null` counts)."""
        layer, lpath = self.locate(path)
        return layer.has_key(lpath) if layer.has_key is not None else True

    def source_path(self, path: Path) -> Path:
        """The path as written in its file (list indexes before invalid items were dropped)."""
        layer, lpath = self.locate(path)
        return layer.doc_path(lpath)

    def layer_of(self, path: Path) -> str | None:
        for cut in range(len(path), -1, -1):
            hit = self.origin.get(path[:cut])
            if hit is not None:
                return self.layers[hit[0]].name
        return None

    def lineage(self) -> dict[str, str]:
        """Each explicitly set setting -> the layer it came from (unset ones are defaults)."""
        return {format_path(p): self.layers[self.origin[p][0]].name for p in sorted(
            self.leaves, key=lambda p: tuple(str(x) for x in p))}


def merge_layers(layers: list[Layer], root: type) -> Merged:
    m = _Merger()
    value: Any = {}
    for i, layer in enumerate(layers):
        value = m.merge(value, layer.value, root, (), (), i, Rule())
    return Merged(value, tuple(layers), m.origin, frozenset(m.leaves), tuple(m.unapplied))


class _Merger:
    def __init__(self) -> None:
        self.origin: dict[Path, tuple[int, Path]] = {}
        self.leaves: set[Path] = set()
        self.unapplied: list[tuple[int, Path, int]] = []  # list indexes that do not exist

    def set_leaf(self, path: Path, layer: int, lpath: Path) -> None:
        self.drop_below(path)
        self.origin[path] = (layer, lpath)
        self.leaves.add(path)

    def drop_below(self, path: Path) -> None:
        n = len(path)
        for table in (self.origin, self.leaves):
            for p in [p for p in table if len(p) > n and p[:n] == path]:
                if isinstance(table, dict):
                    del table[p]
                else:
                    table.discard(p)

    def merge(self, low: Any, high: Any, tp: Any, path: Path, lpath: Path, layer: int,
              rule: Rule) -> Any:
        tp = strip_optional(tp)
        origin = typing.get_origin(tp)
        if high is None:
            self.set_leaf(path, layer, lpath)
            return None
        if isinstance(high, dict) and high and all(isinstance(k, int) for k in high):
            # -D success_criteria.0.weight=2 patches one item of a list
            out = list(low) if isinstance(low, list) else []
            item_tp = (typing.get_args(tp) or (Any,))[0]
            for k, v in high.items():
                if 0 <= k < len(out):
                    out[k] = self.merge(out[k], v, item_tp, (*path, k), (*lpath, k), layer, Rule())
                else:
                    self.unapplied.append((layer, (*lpath, k), len(out)))
            return out if isinstance(low, list) else _ABSENT
        if isinstance(high, dict) and (
            attrs.has(tp) or (isinstance(tp, type) and issubclass(tp, Tagged))
        ):
            if not isinstance(low, dict):
                low = {}
            self.origin.setdefault(path, (layer, lpath))
            out = dict(low)
            fields = {} if not attrs.has(tp) else {f[0]: f for f in fields_of(tp)}
            for key, v in high.items():
                partner = EXCLUSIVE.get(key)
                if partner in out and partner not in high:
                    del out[partner]
                    self.drop_below((*path, partner))
                    self.origin.pop((*path, partner), None)
                    self.leaves.discard((*path, partner))
                ftp, frule = (fields[key][1], fields[key][2]) if key in fields else (Any, Rule())
                merged = self.merge(low.get(key), v, ftp, (*path, key), (*lpath, key), layer,
                                    frule)
                if merged is not _ABSENT:
                    out[key] = merged
            return out
        if isinstance(high, dict) and (origin is dict or tp is Any) and isinstance(low, dict):
            out = dict(low)  # free mappings (sdk_options, params) merge deeply
            for key, v in high.items():
                val_tp = typing.get_args(tp)[1] if origin is dict else Any
                out[key] = self.merge(low.get(key), v, val_tp, (*path, key), (*lpath, key), layer,
                                      Rule())
            return out
        if isinstance(high, list) and rule.merge in ("append", "append_reverse") and low:
            if rule.merge == "append":
                out = [*low, *high]
                for j in range(len(high)):
                    self.set_leaf((*path, len(low) + j), layer, (*lpath, j))
            else:
                out = [*high, *low]
                self.shift(path, len(high))
                for j in range(len(high)):
                    self.set_leaf((*path, j), layer, (*lpath, j))
            self.origin.setdefault(path, (layer, lpath))
            return out
        if isinstance(high, list) and rule.merge in ("append", "append_reverse"):
            self.drop_below(path)
            self.origin[path] = (layer, lpath)
            for j in range(len(high)):
                self.set_leaf((*path, j), layer, (*lpath, j))
            return list(high)
        self.set_leaf(path, layer, lpath)
        return high

    def shift(self, path: Path, by: int) -> None:
        n = len(path)
        moved_o = {}
        for p in [p for p in self.origin if len(p) > n and p[:n] == path]:
            moved_o[(*path, p[n] + by, *p[n + 1:])] = self.origin.pop(p)
        moved_l = set()
        for p in [p for p in self.leaves if len(p) > n and p[:n] == path]:
            self.leaves.discard(p)
            moved_l.add((*path, p[n] + by, *p[n + 1:]))
        self.origin.update(moved_o)
        self.leaves |= moved_l


_ABSENT: Any = object()  # "leave this key unset": a patch of a list that does not exist


# experiment keys that land somewhere else in the task shape
_EXP_TO_TASK: dict[str, Path] = {
    "template_sources": ("sandbox", "template_sources"),
    "driver": ("sandbox", "driver"),
}
_EXP_SKIP = {"variant_id", "description", "repeats", "prompt_mutations"}


def experiment_layer(name: str, value: dict[str, Any], doc: Any, base: Path,
                     original: Callable[[Path], Path] = _same) -> Layer:
    """Reshape experiment defaults / a variant into a task-shaped layer with a path map;
    `original` maps a path of the checked experiment back to the file's (list items
    the schema dropped)."""
    shaped: dict[str, Any] = {}
    moves: list[tuple[Path, Path]] = []  # (task prefix, doc prefix)
    for key, v in value.items():
        if key in _EXP_SKIP:
            continue
        if key == "sandbox":
            shaped.setdefault("sandbox", {}).update(v)
            moves.append((("sandbox",), (*base, "sandbox")))
            continue
        target = _EXP_TO_TASK.get(key, (key,))
        node = shaped
        for part in target[:-1]:
            node = node.setdefault(part, {})
        node[target[-1]] = v
        moves.append((target, (*base, key)))
    moves.sort(key=lambda m: -len(m[0]))

    def translate(path: Path) -> Path:
        for task_prefix, doc_prefix in moves:
            if path[: len(task_prefix)] == task_prefix:
                return original(doc_prefix + path[len(task_prefix):])
        return original((*base, *path))

    return Layer(name, shaped, lambda p: doc.span(translate(p)),
                 lambda p: doc.key_span(translate(p)), translate)


def task_setting(path: Path) -> Path | None:
    """The task setting a path inside experiment defaults or a variant sets (`driver` ->
    `sandbox.driver`), cut before its first list index; None for the keys that set no task
    setting (`variant_id`, `repeats`, `prompt_mutations` ...)."""
    if not path or path[0] in _EXP_SKIP or not isinstance(path[0], str):
        return None
    key = path[0]
    out = (*_EXP_TO_TASK.get(key, (key,)), *path[1:])
    for i, part in enumerate(out):
        if isinstance(part, int):
            return out[:i]
    return out
