"""`ce compile` end to end: files -> resolved trials with plans, plus every diagnostic.

load (YAML with spans) -> validate (schema walker) -> dataset rows -> layers (experiment,
task, variant, command line) -> structure (cattrs) -> rules -> lower to a plan -> hash.

No error stops the others: a usage error (a malformed `-D`, a path that matches nothing,
a missing experiment file) makes the exit status 2, and every file that can be read is
still checked. A broken experiment or `-D` makes no trials, and each task is checked
against what is valid in them, the settings their errors leave unknown held
(`ce_lang.experiment`, `ce_lang.overrides`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ce_lang import dataset as ds
from ce_lang import hostfs
from ce_lang import overrides as ov
from ce_lang.codes import CODES
from ce_lang.diagnostics import Diagnostic, Diagnostics, dedupe
from ce_lang.experiment import (
    NO_EXPERIMENT,
    Experiment,
    VariantLayers,
    defaults_overridden,
    load_experiment,
    unusable_experiment,
)
from ce_lang.lang.checker import Registry
from ce_lang.lang.instances import check_instances
from ce_lang.lang.stdlib import load_file, stdlib_registry, user_registry
from ce_lang.layers import Layer, Merged, merge_layers
from ce_lang.lower import lower, lower_criterion
from ce_lang.overrides import CommandLine, Override, overrides_layer_value, parse_overrides
from ce_lang.paths import (
    NotRegularFile,
    SuiteRoots,
    host_path_problem,
    read_regular_text,
)
from ce_lang.plan import PLACED, Trial, plan_hash
from ce_lang.row_refs import (
    check_layer_refs,
    check_task_refs,
    mutation_with_row,
    report_row_problems,
)
from ce_lang.row_trials import RowTemplate, RowWalker
from ce_lang.rule_context import RowProblem, RuleContext
from ce_lang.rules import check_task
from ce_lang.rules_criterion import check_dropped_entries
from ce_lang.schema.agent import BUILTIN_AGENT_TYPES
from ce_lang.schema.experiment import ExperimentSpec
from ce_lang.schema.task import TaskSpec
from ce_lang.spans import Path, Span, format_path
from ce_lang.task_sources import find_yaml_files, load_yaml_file
from ce_lang.validate import (
    INVALID,
    Context,
    Dropped,
    Walker,
    broken_fields,
    stand_in,
)
from ce_lang.yaml_source import LocatedDoc, document_kind

BUILTIN_DEFAULTS: dict[str, Any] = {
    "agent": {"type": "claude-code"},
    "run_limits": {"max_turns": 100, "task_timeout": 600, "turn_timeout": 300},
}
# the task's blocks whose intact fields are still checked when one field is broken
# (`validate.Context.keep_intact`); their rules hold only the broken fields
KEEP_INTACT = frozenset({"sandbox", "run_limits", "reference", "simulation"})


@attrs.frozen
class CompileOptions:
    experiment: str | None = None
    overrides: tuple[str, ...] = ()
    model: str | None = None
    agent_type: str | None = None
    driver: str | None = None
    repeats: int | None = None
    sample: int | None = None
    check_criteria: bool = True  # bind and analyze criteria (off: front end only, for bench)
    # what this host can enforce, per driver: {driver: {limit: how, or "" when it cannot}}
    # (probed by the runtime; the compiler only reads it, and skips the check without it).
    # A function is called (once, as a logged `hostfs` probe) only if a task sets a limit.
    host_limits: dict[str, dict[str, str]] | Callable[[], dict] | None = None
    # directories task paths may resolve into besides the suite roots (--allow-path)
    allow_paths: tuple[str, ...] = ()
    # the agent `ce run --agent` runs every task with (type-none tasks excepted): the plans
    # are unchanged, the pre-flight rules check each task against it (ce_lang.rules_preflight)
    run_agent: str | None = None


@attrs.frozen
class CompileResult:
    trials: list[Trial]
    diagnostics: list[Diagnostic]
    sources: dict[str, str]
    task_files: int
    usage_error: bool = False  # malformed -D, a missing input: exit code 2

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "error")

    @property
    def warnings(self) -> int:
        return sum(1 for d in self.diagnostics if d.severity == "warning")


def compile_paths(paths: Iterable[str], options: CompileOptions = CompileOptions()
                  ) -> CompileResult:
    return _Compiler(options).run(list(paths))


class _Compiler:
    def __init__(self, options: CompileOptions):
        self.opt = options
        self.diags = Diagnostics()
        self.sources: dict[str, str] = {}
        self.trials: list[Trial] = []
        self.trial_ids: dict[str, Span] = {}
        self._agent_types: tuple[str, ...] | None = None
        self.digests: dict[str, str] = {}
        self.registries: dict[tuple[str, ...], Registry] = {}
        self.broken_registries: set[tuple[str, ...]] = set()  # a file missing or in error
        self.experiment: Experiment = NO_EXPERIMENT
        self.command_line = CommandLine(())
        self.cli: Layer | None = None
        self.cli_paths: frozenset[Path] = frozenset()  # the settings the command line makes
        self.misfits: dict[Diagnostic, list[str]] = {}  # -> the tasks it does not fit
        self.instance_cache: dict = {}
        self.block_memo: dict = {}  # a block's lowered and hashed forms (`lower`, `plan_hash`)
        self.registry_texts: dict[str, str] = {}  # user .ce files: shown name -> text
        self.host_limits = options.host_limits
        if callable(options.host_limits):
            hostfs.PROBES["host_limits"] = options.host_limits
            self.host_limits = lambda: hostfs.probe("host_limits")

    # -- driver --------------------------------------------------------------------------
    def run(self, paths: list[str]) -> CompileResult:
        usage = Diagnostics()
        self.roots = SuiteRoots.from_cli(paths, self.opt.allow_paths)
        self.command_line = parse_overrides(list(self.opt.overrides), usage, self.diags,
                                            self.sources, self.roots)
        files = find_yaml_files(paths, usage)
        self.experiment = self.load_experiment(usage)
        self.cli = self.cli_layer(list(self.command_line.overrides))
        compiled = 0
        unused: dict = {d: 0 for _, d in files if d is not None}  # dir -> YAML skipped
        scripts: list = []  # scripted model sessions named (`tasks/*.yaml`), with docs
        for file, under in files:
            errors_before = self.diags.count("error")
            doc = load_yaml_file(file, self.diags, self.sources)
            kind = "task" if doc is None else document_kind(doc.value)
            if kind == "model_script" and under is None:
                scripts.append((file, doc))
                continue
            if kind in (None, "model_script") and under is not None:  # a template's YAML
                if unused[under] is not None:
                    unused[under] += 1
                continue
            unused[under] = None  # a task or experiment found there
            if kind == "experiment":
                self.check_experiment_doc(doc, under is None)
                continue
            compiled += 1  # a doc that failed to load (said) is a task file that failed
            if doc is not None:
                self.compile_task(doc, errors_before)
        if scripts:  # a glob over a task's directory names its sessions too
            shown = ", ".join(f for f, _ in scripts[:3]) + (
                f" and {len(scripts) - 3} more" if len(scripts) > 3 else "")
            code = "CE0008" if compiled else "CE0006"  # (nothing else named: no task)
            usage.emit(code, f"skipped {len(scripts)} scripted model session(s), not "
                       f"task files: {shown}" + ("" if compiled else "; no task file left"),
                       scripts[0][1].span(()) if len(scripts) == 1 else None,
                       help="a task reads its session through `agent.model_script` or "
                       "`ce run --scripted-model`, and judge replies through "
                       "`--judge-replies`")
        for under, skipped in ((d, n) for d, n in unused.items() if d and n):  # a CI check
            usage.emit("CE0006", f"no task file under {under!r}: its {skipped} YAML file(s) "
                       "have no task_id or success_criteria", None)
        self.report_misfits(compiled)
        return self.result(usage, compiled, usage_error=usage.has_errors)

    def result(self, usage: Diagnostics, compiled: int, usage_error: bool = False
               ) -> CompileResult:
        return CompileResult(self.trials, dedupe([*usage, *self.diags]), self.sources, compiled,
                             usage_error)

    # -- inputs --------------------------------------------------------------------------
    # -- experiments ---------------------------------------------------------------------
    def load_experiment(self, usage: Diagnostics) -> Experiment:
        path = self.opt.experiment
        if path is None:
            return NO_EXPERIMENT
        if not hostfs.isfile(path):
            kind = hostfs.special_kind(path)
            if kind is not None:  # exists, but a FIFO or device is never read
                usage.emit("CE0217", f"experiment file {path!r} is {kind}", None,
                           help="ce reads only regular files and directories")
            else:
                usage.emit("CE0001", f"experiment file {path!r} not found", None)
            return unusable_experiment()
        doc = load_yaml_file(path, self.diags, self.sources)
        if doc is not None and document_kind(doc.value) == "task":
            self.diags.emit("CE0402", f"{path} is a task file, not an experiment",
                            doc.span(()), help="pass tasks as arguments and experiments with -e")
            doc = None
        return load_experiment(doc, self.diags, self.roots)

    def check_experiment_doc(self, doc: LocatedDoc, explicit: bool) -> None:
        """An experiment found among PATHS: checked on its own, unless it is the `-e`
        one (checked already; its errors are not said twice under another spelling)."""
        given = self.opt.experiment
        if given is not None and os.path.abspath(doc.file) == os.path.abspath(given):
            return
        if explicit:
            self.diags.emit("CE0402", f"{doc.file} is an experiment, not a task",
                            doc.span(()), help=f"use it with `-e {doc.file}`")
            return
        self.validate(doc, ExperimentSpec)

    def validate(self, doc: LocatedDoc, root: type, best_effort: bool = False,
                 user_types: frozenset[str] = frozenset(), types_unknown: bool = False
                 ) -> dict[str, Any] | None:
        """The normalized value; None on errors, unless `best_effort` and still usable."""
        before = self.diags.count("error")
        walker = Walker(Context(self.diags, doc.span, doc.key_span, user_types=user_types,
                                roots=self.roots, types_unknown=types_unknown,
                                keep_intact=KEEP_INTACT if root is TaskSpec else frozenset()))
        value = walker.check(doc.value, root, ())
        self.original_path = walker.original_path
        self.dropped = walker.dropped
        self.broken = broken_fields(walker.broken_paths)
        self.root_dropped = walker.root
        if value is INVALID:
            return None
        return value if best_effort or self.diags.count("error") == before else None

    # -- command line --------------------------------------------------------------------
    def cli_layer(self, overrides: list[Override]) -> Layer | None:
        flags: dict[Path, Any] = {}
        flag_spans: dict[Path, Span] = {}
        for path, value, name in ((("agent", "model"), self.opt.model, "--model"),
                                  (("agent", "type"), self.opt.agent_type, "--agent"),
                                  (("sandbox", "driver"), self.opt.driver, "--driver")):
            if value is not None:
                flags[path] = value
                flag_spans[path] = ov.flag_span(name, str(value), self.sources)
        self.cli_paths = frozenset([*(o.path for o in overrides), *flags])
        if not overrides and not flags:
            return None
        spans = {o.path: Span(o.source, 1, len(o.text.partition("=")[0]) + 2, 1,
                              len(o.text) + 1, len(o.text.partition("=")[0]) + 1,
                              len(o.text)) for o in overrides}
        spans.update(flag_spans)
        def lookup(path: Path) -> Span:
            for cut in range(len(path), 0, -1):
                if path[:cut] in spans:
                    return spans[path[:cut]]
            return Span.point("<command line>")

        def key_lookup(path: Path) -> Span:
            for o in reversed(overrides):  # the later -D wins, as in the merge
                if o.path[: len(path)] == path:
                    return o.span_of_part(len(path) - 1)
            return lookup(path)

        return Layer("command line", overrides_layer_value(overrides, flags), lookup,
                     key_lookup)

    # -- one task file -------------------------------------------------------------------
    def registry_for(self, doc: LocatedDoc) -> tuple[Registry, bool]:
        """The standard criteria plus the user's: the task's and the experiment's files;
        and whether every one of those files is known and loaded without an error (if not,
        a criterion type no file defines may be a broken file's: `Context.types_unknown`)."""
        base = os.path.dirname(os.path.abspath(doc.file))
        files = list(self.experiment.criteria_files)
        raw = doc.value.get("criteria_files")
        if isinstance(raw, list):
            files += [(os.path.normpath(os.path.join(base, f)), f,
                       doc.span(("criteria_files", i)))
                      for i, f in enumerate(raw) if isinstance(f, str)]
        known = not self.experiment.criteria_unknown and (raw is None or (
            isinstance(raw, list) and all(isinstance(f, str) for f in raw)))
        key = tuple(dict.fromkeys(f[0] for f in files))
        registry = self.registries.get(key)
        if registry is None:
            registry = user_registry() if key else stdlib_registry()
            loaded: set[str] = set()
            errors = self.diags.count("error")
            for path, shown, span in files:
                if path in loaded or not hostfs.isfile(path) or host_path_problem(
                        path, path, span.file, self.roots) is not None:
                    continue  # reported where the path is checked
                loaded.add(path)
                load_file(path, registry, self.diags, origin=shown, span=span)
                self.sources.setdefault(path, _source_of(path))
                self.registry_texts[shown] = self.sources[path]
            self.registries[key] = registry
            if len(loaded) < len(key) or self.diags.count("error") > errors:
                self.broken_registries.add(key)
        return registry, known and key not in self.broken_registries

    def compile_task(self, doc: LocatedDoc, errors_before: int) -> None:
        registry, complete = self.registry_for(doc)
        user_types = frozenset(n for n, o in registry.origin.items()
                               if not o.startswith("stdlib"))
        self.registry = registry
        value = self.validate(doc, TaskSpec, best_effort=True, user_types=user_types,
                              types_unknown=not complete)
        self.placeholders: frozenset[str] = frozenset()
        if value is None and self.root_dropped is not None and document_kind(doc.value) == "task":
            # a required top-level field is missing or invalid (reported): the rules that
            # read only the task's intact fields still run, on placeholders in the broken
            # ones (`RuleContext.broken` keeps the rest from reading them); not on a file
            # that is no task at all (given explicitly: its schema errors say it all)
            value = stand_in(self.root_dropped)
            self.placeholders = self.root_dropped.broken
        if value is None:
            return
        exp = self.experiment
        task_dir = os.path.dirname(os.path.abspath(doc.file))
        rows: list[ds.Row] | None = None
        dataset = value.get("dataset")
        if dataset is None and doc.value.get("dataset") is not None:
            # the dataset block itself is invalid (reported): without rows, only each
            # criterion's own rules run (on its values that wait for no row)
            self.check_dropped(doc, value, every=True)
            return
        if dataset is not None:
            original = self.original_path
            rows = ds.load_rows(dataset, lambda p, o=original: doc.span(o(p)), self.diags,
                                original)
            if rows is None:
                self.check_dropped(doc, value, every=True)
                return
            ds.check_strata(rows, dataset, self.opt.sample,
                            lambda p, o=original: doc.span(o(p)), self.diags)
            rows = ds.sample_rows(rows, dataset, self.opt.sample)
        self.check_dropped(doc, value)
        broken = check_task_refs(value, doc, self.original_path, rows, self.diags)
        broken |= check_layer_refs(self.experiment, self.cli, rows, value["task_id"], self.diags)
        base_id = value["task_id"]
        self.row_problems: list = []
        original = self.original_path  # the task's layer, each variant's merged once
        task_layer = Layer("task", {k: v for k, v in value.items() if k != "dataset" or not rows},
                           lambda p, o=original: doc.span(o(p)),
                           lambda p, o=original: doc.key_span(o(p)), original,
                           lambda p, o=original: o(p) in doc.key_spans)
        templates = [RowTemplate([x for x in (Layer(
            "built-in defaults", BUILTIN_DEFAULTS, lambda _p: Span.point("<built-in defaults>"),
            has_key=lambda _p: False), exp.defaults, task_layer, v.layer, self.cli) if x])
            for v in exp.variants]  # (no file wrote the built-in defaults)
        for row in rows if rows is not None else [None]:
            for variant, template in zip(exp.variants, templates, strict=True):
                if row is not None and variant.mutation_sources:
                    variant = attrs.evolve(variant, mutations=tuple(
                        mutation_with_row(m, row) for m in variant.mutations))
                merged = template.merged if row is None else template.merged_for(row)
                for d in defaults_overridden(exp.defaults, merged):
                    self.misfit(d, merged, doc)
                self.resolve(merged, doc, task_dir, row, base_id if row else None, variant,
                             exp.experiment_id, has_dataset=rows is not None,
                             emit=self.diags.count("error") == errors_before and exp.ok
                             and self.command_line.ok, template=template)
        report_row_problems(self.row_problems, len(rows) if rows else 0, self.diags, broken)

    def check_dropped(self, doc: LocatedDoc, value: dict[str, Any], every: bool = False
                      ) -> None:
        """Criteria the schema dropped for a missing or invalid field still get the rules
        that read only their other fields (`rules_criterion.dropped_criterion_rules`), once per
        file: one compile reports both the missing `description` and the bad regex.
        `every`: the kept criteria too, as the task goes no further (no dataset rows)."""
        entries = [d for d in self.dropped
                   if len(d.path) == 2 and d.path[0] == "success_criteria"]
        original = self.original_path
        if every:
            entries += [Dropped(original(("success_criteria", k)), object, v, frozenset())
                        for k, v in enumerate(value.get("success_criteria") or ())]
        if not entries:
            return

        check_dropped_entries(entries, doc, original, self.roots, self.diags,
                              self.registry if self.opt.check_criteria else None,
                              self.sources)

    def resolve(self, merged: Merged, doc: LocatedDoc, task_dir: str, row: ds.Row | None,
                suite_id: str | None, variant: VariantLayers, exp_id: str | None,
                has_dataset: bool, emit: bool, template: RowTemplate) -> None:
        held = self.broken | variant.held | self.command_line.held
        for layer_index, path, length in merged.unapplied:
            layer = merged.layers[layer_index]
            self.misfit(Diagnostic("CE0501", "error", f"index {path[-1]} is out of range: "
                                   f"`{format_path(path[:-1])}` has {length} "
                                   f"entr{'y' if length == 1 else 'ies'}",
                                   (layer.key_span_of or layer.span_of)(path)), merged, doc)
            emit = False
        if merged.layers[-1].name == "command line" and not self.cli_fits(merged, doc,
                                                                          template.fits):
            # checked without the command line, what it sets held: no follow-on errors
            merged = merge_layers(list(merged.layers[:-1]), TaskSpec)
            if row is not None:  # (the template's layers hold no row)
                merged = attrs.evolve(merged, value=ds.substitute_row_keys(merged.value, row))
            held |= self.cli_paths
            emit = False
        try:
            task = template.structure(merged)
        except Exception:  # only after schema errors, which are already reported
            if emit:
                raise
            return
        before = self.diags.count("error")
        problems_before = len(self.row_problems)
        calls = [lower_criterion(i, c) for i, c in enumerate(task.success_criteria)]
        thresholds = [c.pass_threshold for c in calls]
        instances = check_instances(task.success_criteria, thresholds, task.expected_commands,
                                    self.registry, self.diags, merged.span, merged.key_span,
                                    self.sources, self.instance_cache) \
            if self.opt.check_criteria else []
        check_task(RuleContext(task, merged.span, merged.key_span, self.diags,
                               self.agent_types(task), has_dataset,
                               row.id if row else None, self.row_problems,
                               merged.source_path, instances, merged.written,
                               self.host_limits, self.roots, self.opt.run_agent,
                               held, merged.layer_of))
        prompt = task.initial_prompt
        if prompt is None and task.initial_prompt_file is not None:
            prompt = self.read_prompt(task.initial_prompt_file, merged, row)
        if prompt is not None:
            for mutation in variant.mutations:
                prompt = mutation.apply(prompt)
        # a row's error drops its trial; a row's warning (CE0230, CE0231 ...) is said
        # once for the rows and the trial stays (it dropped every row's: "0 trials")
        row_errors = any(CODES[p.code].severity == "error"
                         for p in self.row_problems[problems_before:])
        if self.diags.count("error") > before or row_errors or not emit:
            return
        used = {inst.definition for inst in instances if inst is not None}
        criteria_sources = {
            origin: self.registry_texts[origin]
            for name, origin in self.registry.origin.items()
            if name in used and origin in self.registry_texts}
        plan = lower(task, task_dir=task_dir, prompt=prompt, row_id=row.id if row else None,
                     suite_id=suite_id, digest_cache=self.digests,
                     instances=instances if self.opt.check_criteria else None,
                     criteria_sources=criteria_sources, calls=calls, memo=self.block_memo)
        digest = plan_hash(plan, self.block_memo)
        lineage = merged.lineage()
        if prompt is not None and variant.mutations:  # the prompt is the mutations' too
            lineage["prompt_mutations"] = ", ".join(getattr(variant, "mutation_layers", ()))
        repeats, repeats_from = self.opt.repeats, "command line"
        if repeats is None:
            repeats, repeats_from = variant.repeats or (1, "built-in defaults")
        lineage["repeats"] = repeats_from
        places = {".".join(p): merged.span(p) for p in PLACED if ".".join(p) in lineage}
        n_sim = task.simulation.n_trials if task.simulation and task.simulation.enabled else 1
        for n in range(repeats * n_sim):
            trial_id = f"{variant.variant_id}/{plan.task_id}/{n:02d}"
            span = merged.span(("task_id",))
            if trial_id in self.trial_ids:
                prev = self.trial_ids[trial_id]
                self.diags.emit("CE0213", f"task_id {plan.task_id!r} is also defined at {prev}",
                                span, help="task ids must be unique across the compiled files")
                return
            self.trial_ids[trial_id] = span
            self.trials.append(Trial(trial_id, variant.variant_id, exp_id, n, doc.file,
                                     task_dir, plan, digest, lineage, places))

    def cli_fits(self, merged: Merged, doc: LocatedDoc, memo: dict) -> bool:
        """Whether the task with the command line's settings is still valid (a `-D` may
        change a criterion's type); its errors reported, those at the command line naming
        the task (`-D`s fit one task and not another)."""
        user_types = frozenset(n for n, o in self.registry.origin.items()
                               if not o.startswith("stdlib"))
        walker = RowWalker(Context(found := Diagnostics(), merged.span, merged.key_span,
                                   user_types=user_types, roots=self.roots), memo)
        # a placeholder standing in for a broken field (reported) is no value to check
        walker.record({k: v for k, v in merged.value.items() if k not in self.placeholders},
                      TaskSpec, (), False, skip=self.placeholders)
        for d in found:
            if d.span is not None and d.span.file.startswith("<"):
                self.misfit(d, merged, doc)
            else:
                self.diags.append(d)
        return not found.has_errors

    def misfit(self, d: Diagnostic, merged: Merged, doc: LocatedDoc) -> None:
        """A command-line setting that does not fit this task: reported once for all the
        tasks it does not fit, naming them (`report_misfits`)."""
        tasks = self.misfits.setdefault(d, [])
        name = repr(merged.value.get("task_id") or doc.file)
        if name not in tasks:
            tasks.append(name)

    def report_misfits(self, n_tasks: int) -> None:
        for d, tasks in self.misfits.items():
            names = ", ".join(tasks[:5]) + (f" and {len(tasks) - 5} more" if len(tasks) > 5
                                            else "")
            which = f"task {names}" if len(tasks) == 1 else f"tasks {names}"
            self.diags.append(attrs.evolve(
                d, message=f"{d.message} ({which}; {len(tasks)} of {n_tasks})"))

    def read_prompt(self, path: str, merged: Merged, row: ds.Row | None) -> str | None:
        if not hostfs.isfile(path):
            return None  # reported where the path was checked
        try:
            text = read_regular_text(path)
        except UnicodeDecodeError:
            self.diags.emit("CE0207", "initial_prompt_file is not UTF-8 text",
                            merged.span(("initial_prompt_file",)))
            return None
        except NotRegularFile as exc:
            self.diags.emit("CE0217", f"initial_prompt_file {exc.strerror}",
                            merged.span(("initial_prompt_file",)))
            return None
        except OSError as exc:
            self.diags.emit("CE0207", f"cannot read initial_prompt_file: {exc.strerror}",
                            merged.span(("initial_prompt_file",)))
            return None
        self.sources.setdefault(path, text)
        if not text.strip():  # as a blank `initial_prompt` (CE0110): no prompt at all
            self.diags.emit("CE0110", f"initial_prompt_file {os.path.basename(path)!r} is "
                            "empty", merged.span(("initial_prompt_file",)))
            return None
        src = ds.TextSource(("initial_prompt_file",), text,
                            Span(path, 1, 1, 1, 1, 0, len(text)), text)
        refs = ds.find_refs([src])
        if refs and not ds.check_refs(refs, [row] if row else None, self.diags):
            return None
        prompt = (ds.substitute(text, row) if row else text).strip()
        if not prompt:  # the file has text: its `${row.KEY}` filled it with nothing
            self.row_problems.append(RowProblem(
                "CE0110", f"initial_prompt_file {os.path.basename(path)!r} is blank once "
                "its `${row...}` are filled", merged.span(("initial_prompt_file",)), None,
                row.id if row else None))
            return None
        return prompt

    def agent_types(self, task: TaskSpec) -> tuple[str, ...]:
        if (task.agent.type or "claude-code") in BUILTIN_AGENT_TYPES:
            return BUILTIN_AGENT_TYPES
        if self._agent_types is None:
            extra = hostfs.entry_points("ce.agents")
            self._agent_types = BUILTIN_AGENT_TYPES + extra
        return self._agent_types


def _source_of(path: str) -> str:
    try:
        return read_regular_text(path)
    except (OSError, UnicodeDecodeError):
        return ""

