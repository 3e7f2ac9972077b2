"""An experiment file (`-e`) as the layers every task is resolved under, even when broken.

Errors in the experiment hide no task's errors. The rule:

- Every error in the experiment file is reported, and the compile makes no trials from a
  broken experiment (`Experiment.ok`).
- Every task is still checked under each of its variants, against what is valid in the
  experiment: a variant (or `defaults`) with a bad field still applies its other fields.
- A setting the experiment's errors leave unknown is *held* (`VariantLayers.held`): it
  counts as broken for the task's rules (`RuleContext.broken`), as a task's own invalid
  field does, so a rule reading it stays silent instead of reporting a follow-on error.
  Held are: the task setting an invalid or missing field would set
  (`defaults.run_limits.max_turns` -> `run_limits.max_turns`, `variants[1].driver` ->
  `sandbox.driver`, cut before a list index); for an unknown key, the setting its
  did-you-mean names (`variants[0].agent.modle` -> `agent.model`; a key close to no field
  holds nothing); every setting `defaults` can make when `defaults` is not a mapping, and
  every setting a variant can make for a variant that is not a mapping or when `variants`
  is missing, empty or not a list (then one stand-in variant is checked).
- An experiment that cannot be used at all (not found, unreadable, not YAML, not a
  mapping, a task file) holds every setting an experiment can make.
- When the experiment's `criteria_files` are held, the user's criterion types are
  unknown (`Experiment.criteria_unknown`): a task's criterion of a type nobody defines is
  dropped unreported (the files may define it), the rules over the list stay silent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import attrs

from ce_lang.convert import converter
from ce_lang.dataset import string_sources
from ce_lang.diagnostics import Diagnostic, Diagnostics
from ce_lang.layers import Layer, Merged, experiment_layer, task_setting
from ce_lang.paths import SuiteRoots
from ce_lang.spans import Path, Span
from ce_lang.validate import INVALID, Context, Walker, fields_of
from ce_lang.yaml_source import LocatedDoc

# The run directory's own directories, beside its variants' (VARIANT/TASK/NN): a variant
# named like one would put its trials among the run's files (CE0224).
RUN_LEVEL_DIRS = frozenset(("plans", "objects", "definitions", "task_files", "templates",
                            "judges", "rescored", "attempts"))


@attrs.frozen
class VariantLayers:
    """One variant as the compiler resolves tasks under it."""

    variant_id: str
    layer: Layer | None
    repeats: tuple[int, str] | None  # value, layer name
    mutations: tuple = ()  # PromptMutation, the defaults' first
    held: frozenset[Path] = frozenset()  # task settings the experiment's errors leave unknown
    # the mutations' strings, located: a dataset's rows substitute in them as in the prompt
    mutation_sources: tuple = ()  # dataset.TextSource
    mutation_layers: tuple[str, ...] = ()  # the layers whose mutations apply (lineage)


@attrs.frozen
class Experiment:
    experiment_id: str | None
    variants: tuple[VariantLayers, ...]
    defaults: Layer | None = None
    criteria_files: tuple[tuple[str, str, Span], ...] = ()  # (path, as written, where)
    ok: bool = True  # no errors: trials are made under its variants
    criteria_unknown: bool = False  # its `criteria_files` are held


NO_EXPERIMENT = Experiment(None, (VariantLayers("default", None, None),))


@cache
def _settings(part: str) -> frozenset[Path]:
    """Every task setting experiment `defaults` or a `variant` can make."""
    from ce_lang.schema.experiment import ExperimentDefaults, Variant

    cls = ExperimentDefaults if part == "defaults" else Variant
    return frozenset(p for f in fields_of(cls) if (p := task_setting((f[0],))) is not None)


def unusable_experiment() -> Experiment:
    """An experiment nothing is known of (its error reported): every setting held."""
    held = _settings("defaults") | _settings("variants")
    return Experiment(None, (VariantLayers("default", None, None, held=held),),
                      ok=False, criteria_unknown=True)


def load_experiment(doc: LocatedDoc | None, diags: Diagnostics,
                    roots: SuiteRoots | None) -> Experiment:
    """The checked experiment in `doc` (None: unusable, already reported); its errors go to
    `diags`, and its valid part is kept as the module docstring says."""
    if doc is None:
        return unusable_experiment()
    from ce_lang.schema.experiment import ExperimentSpec

    before = diags.count("error")
    walker = Walker(Context(diags, doc.span, doc.key_span, roots=roots))
    value = walker.check(doc.value, ExperimentSpec, ())
    original: Callable[[Path], Path] = _same
    if diags.count("error") == before:
        exp_id = value["experiment_id"]
        defaults = value.get("defaults") or {}
        variants = list(enumerate(value["variants"]))
        held_defaults: frozenset[Path] = frozenset()
        held: dict[int, frozenset[Path]] = {}
    else:
        raw_id = doc.value.get("experiment_id")
        exp_id = raw_id if isinstance(raw_id, str) else "?"
        defaults, variants, original = _salvage(doc, roots)
        held_defaults, held = _held(walker)
    span_of = lambda p: doc.span(original(p))  # noqa: E731
    default_layer = None
    if defaults:
        default_layer = experiment_layer(f"experiment {exp_id}: defaults", defaults, doc,
                                         ("defaults",), original)
    exp_dir = os.path.dirname(os.path.abspath(doc.file))
    criteria_files = tuple(
        (f, os.path.relpath(f, exp_dir), span_of(("defaults", "criteria_files", i)))
        for i, f in enumerate(defaults.get("criteria_files") or []))
    out = []
    seen: dict[str, int] = {}
    for i, v in variants:
        vid = v.get("variant_id") or f"variants[{i}]"
        if vid in seen:
            diags.emit("CE0213", f"variant_id {vid!r} repeats variants[{seen[vid]}]",
                       span_of(("variants", i, "variant_id")))
        elif vid in RUN_LEVEL_DIRS:
            diags.emit("CE0224", f"variant_id {vid!r} is the name of one of the run "
                       "directory's own directories",
                       span_of(("variants", i, "variant_id")),
                       notes=("reserved: " + ", ".join(sorted(RUN_LEVEL_DIRS)),))
        seen.setdefault(vid, i)
        layer = experiment_layer(f"variant {vid}", v, doc, ("variants", i), original)
        if "repeats" in v:
            repeats = (v["repeats"], f"variant {vid}")
        elif "repeats" in defaults:
            repeats = (defaults["repeats"], f"experiment {exp_id}: defaults")
        else:
            repeats = None
        mutations = _mutations(defaults, span_of, ("defaults",), diags) + \
            _mutations(v, span_of, ("variants", i), diags)
        for key in ("initial_prompt", "initial_prompt_file"):
            if v.get("prompt_mutations") and key in v:
                diags.emit("CE0109", f"`prompt_mutations` and `{key}` exclude each other in "
                           "a variant", doc.key_span(original(("variants", i, key))))
        located = [*string_sources(defaults.get("prompt_mutations"),
                                   ("defaults", "prompt_mutations"), span_of, doc.text),
                   *string_sources(v.get("prompt_mutations"),
                                   ("variants", i, "prompt_mutations"), span_of, doc.text)]
        applied = tuple(name for name, where in ((f"experiment {exp_id}: defaults", defaults),
                                                 (f"variant {vid}", v))
                        if where.get("prompt_mutations"))
        out.append(VariantLayers(vid, layer, repeats, mutations,
                                 held=held_defaults | held.get(i, frozenset()),
                                 mutation_sources=tuple(located), mutation_layers=applied))
    if not out:  # `variants` missing, empty or no list (reported): what they set is unknown
        out.append(VariantLayers("default", None, None,
                                 held=held_defaults | _settings("variants")))
    return Experiment(exp_id, tuple(out), default_layer, criteria_files,
                      ok=diags.count("error") == before,
                      criteria_unknown=any(p[:1] == ("criteria_files",) for p in held_defaults))


def _same(path: Path) -> Path:
    return path


def _salvage(doc: LocatedDoc, roots: SuiteRoots | None
             ) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]], Callable[[Path], Path]]:
    """The valid fields of `defaults` and of each variant (checked again, quietly: the
    errors are reported already), and the map back to the file's list indexes."""
    from ce_lang.schema.experiment import ExperimentDefaults, Variant

    walker = Walker(Context(Diagnostics(), doc.span, doc.key_span, roots=roots))

    def valid_part(value: Any, cls: type, path: Path) -> dict[str, Any]:
        if not isinstance(value, dict):
            return {}
        out = walker.record(value, cls, path, False, keep_dropped=True)
        if out is INVALID:
            kept = [d.value for d in walker.dropped if d.path == path]
            return kept[-1] if kept else {}
        return out

    raw = doc.value
    defaults = valid_part(raw.get("defaults"), ExperimentDefaults, ("defaults",))
    variants = raw.get("variants")
    parts = [(i, valid_part(v, Variant, ("variants", i))) for i, v in enumerate(variants)] \
        if isinstance(variants, list) else []
    return defaults, parts, walker.original_path


def _held(walker: Walker) -> tuple[frozenset[Path], dict[int, frozenset[Path]]]:
    """The task settings the experiment's errors leave unknown: under every variant (by
    `defaults`, or by a broken `variants`), and per variant index."""
    # a record with a broken field is broken too: only the innermost paths say what
    found = set(walker.broken_paths)
    broken = [p for p in found if not any(len(q) > len(p) and q[:len(p)] == p for q in found)]
    broken += [(*p[:-1], fix) for p, fix in walker.unknown_keys if fix is not None]
    defaults: set[Path] = set()
    variants: dict[int, set[Path]] = {}
    every_variant = False
    for path in broken:
        if path[:1] == ("defaults",):
            defaults |= _held_by(path[1:], "defaults")
        elif path == ("variants",):
            every_variant = True
        elif path[:1] == ("variants",) and isinstance(path[1], int):
            variants.setdefault(path[1], set()).update(_held_by(path[2:], "variants"))
    if every_variant:
        defaults |= _settings("variants")
    return frozenset(defaults), {i: frozenset(s) for i, s in variants.items()}


def _held_by(path: Path, part: str) -> set[Path]:
    """What a broken path inside `defaults` or a variant leaves unknown (the whole part
    when the path is the part itself)."""
    if not path:
        return set(_settings(part))
    setting = task_setting(path)
    return {setting} if setting else set()


def _mutations(value: dict[str, Any], span_of: Callable[[Path], Span], base: Path,
               diags: Diagnostics) -> tuple:
    from ce_lang.schema.experiment import PromptMutation, ReplaceMutation

    out = []
    for j, raw in enumerate(value.get("prompt_mutations") or ()):
        mutation = converter.structure(raw, PromptMutation)
        if isinstance(mutation, ReplaceMutation) and mutation.regex:
            try:
                re.compile(mutation.pattern)
            except re.error as exc:
                diags.emit("CE0111", f"invalid regex: {exc}",
                           span_of((*base, "prompt_mutations", j, "pattern")))
                continue
        out.append(mutation)
    return tuple(out)


# agent settings an A/B puts in `defaults` and a task may set too: the task's wins
AGENT_CHOICES = (("agent", "type"), ("agent", "model"))


def defaults_overridden(defaults: Layer | None, merged: Merged) -> list[Diagnostic]:
    """CE0228 for each agent choice of the experiment's `defaults` that this trial's
    task sets over (no variant or command line sets it): an A/B meant to run every task
    with one agent ran some with another, said nowhere (the compiler names the tasks)."""
    if _at(merged.value, ("agent", "type")) == "none":  # agentless: runs no agent anyway
        return []
    out = []
    for path in AGENT_CHOICES if defaults is not None else ():
        wanted = _at(defaults.value, path)
        layer, _ = merged.locate(path)
        got = _at(merged.value, path)
        if wanted is None or layer.name != "task" or got == wanted:
            continue
        name = ".".join(path)
        out.append(Diagnostic(
            "CE0228", "warning", f"the experiment's `defaults.{name}: {wanted}` does not "
            f"apply: the task sets `{name}: {got}`, which is over the defaults",
            defaults.span_of(path), help="set it in each variant (variants are over the "
            "tasks), or remove it from the tasks"))
    return out


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
