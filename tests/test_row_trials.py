"""A dataset task's rows compile through one merged, structured template per variant
(ce_lang/row_trials.py) and per-compile memos of what no row changes: each row's plan
must still be the plan of that row's task written out by hand, hashed the same."""

import glob
import itertools
import json
import os

import pytest

from ce_lang.compiler import CompileOptions, compile_paths
from ce_lang.diagnostics import Diagnostics
from ce_lang.plan import plan_hash, plan_json_hash, plan_to_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TASK = """\
task_id: cls
description: sentiment of a review
initial_prompt: "Classify this review: ${row.text}"
agent: {allowed_tools: [Read, Write]}
reference:
  solve:
    - tool: Write
      params: {file_path: label.txt, content: "${row.label}"}
success_criteria:
  - type: classification_match
    path: label.txt
    expected_label: "${row.label}"
    allowed_labels: [pos, neg, mixed]
    description: "row ${row.id} is ${row.label}"
  - type: file_contains
    path: label.txt
    includes: ["${row.label}"]
    description: names the label
  - type: file_exists
    path: label.txt
    description: the label is written
  - type: llm_judge
    prompt: "The review was: ${row.text}. Score 1 if label.txt says ${row.label}."
    files: [label.txt]
    description: a judge agrees
  - type: run_command
    command: "grep -q '${row.label}' label.txt"
    description: grep finds it
"""

ROWS = [{"id": f"r{i}", "text": f"review number {i} was {w}", "label": lab}
        for i, (w, lab) in enumerate([("great", "pos"), ("awful", "neg"), ("so-so", "mixed"),
                                      ("fine", "pos"), ("great", "pos"), ("bad", "neg")])]

EXPERIMENT = """\
experiment_id: ab
defaults:
  prompt_mutations: [{type: prefix, content: "Be brief."}]
variants:
  - variant_id: base
  - variant_id: small
    agent: {model: small-model}
    run_limits: {max_turns: 3}
"""


def _by_hand(text: str, row: dict) -> str:
    for key, value in row.items():
        text = text.replace("${row." + key + "}", value)
    return text


@pytest.mark.parametrize("options", [
    {}, {"experiment": "exp.yaml"},
    {"overrides": ("success_criteria.1.weight=2", "run_limits.max_turns=9"), "model": "m"},
])
def test_each_rows_plan_is_the_plan_of_its_task_written_out(write, tmp_path, options):
    write("exp.yaml", EXPERIMENT)
    write("rows.jsonl", "".join(json.dumps(r) + "\n" for r in ROWS))
    dataset_task = write("cls.yaml", TASK.replace(
        "agent:", "dataset: {paths: [rows.jsonl]}\nagent:"))
    opts = CompileOptions(**{k: (str(tmp_path / v) if k == "experiment" else v)
                             for k, v in options.items()})
    result = compile_paths([dataset_task], opts)
    assert result.diagnostics == [] and len(result.trials) == len(ROWS) * (
        2 if "experiment" in options else 1)
    for trial in result.trials:
        row = next(r for r in ROWS if r["id"] == trial.plan.row_id)
        alone = compile_paths([write(f"alone/{row['id']}.yaml", _by_hand(TASK, row))], opts)
        twin = next(t for t in alone.trials if t.variant_id == trial.variant_id)
        expected = plan_to_json(twin.plan)
        expected.update(task_id=f"cls/{row['id']}", suite_id="cls", row_id=row["id"])
        assert plan_to_json(trial.plan) == expected
        assert trial.plan_hash == plan_json_hash(expected)
        assert trial.lineage == twin.lineage and trial.places == twin.places


def test_bad_rows_are_reported_where_they_are_referenced(write):
    rows = [*ROWS[:2], {"id": "nolabel", "text": "x"}, {"id": "deep", "text": {"a": 1},
                                                         "label": "pos"},
            {"id": "odd", "text": "y", "label": "weird"}]
    write("rows.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    task = write("cls.yaml", TASK.replace("agent:", "dataset: {paths: [rows.jsonl]}\nagent:"))
    result = compile_paths([task])
    assert result.trials == []
    got = [(d.code, f"{d.span.line}:{d.span.col}", d.message) for d in result.diagnostics]
    no_label = "dataset row 'nolabel' (rows.jsonl:3) has no key `label`"
    deep = "`${row.text}`: dataset row 'deep' (rows.jsonl:4) has a non-scalar value for `text`"
    assert got == [
        ("CE0303", "3:40", deep),
        ("CE0303", "9:48", f"`${{row.label}}`: {no_label}"),
        ("CE0111", "13:21", "expected_label 'weird' is not one of allowed_labels ['pos', "
                            "'neg', 'mixed'] (dataset row 'odd'; 1 of 5)"),
        ("CE0303", "13:22", f"`${{row.label}}`: {no_label}"),
        ("CE0303", "15:36", f"`${{row.label}}`: {no_label}"),
        ("CE0303", "18:17", f"`${{row.label}}`: {no_label}"),
        ("CE0303", "24:30", deep),
        ("CE0303", "24:69", f"`${{row.label}}`: {no_label}"),
        ("CE0303", "28:24", f"`${{row.label}}`: {no_label}"),
    ]


def test_a_memo_hashes_each_plan_as_its_full_json_does(write):
    """`plan_hash` with a memo (the blocks' hashed forms kept by object) is the hash of
    the plan's JSON, for every bundled task and valid corpus case, one memo for all."""
    memo: dict = {}
    paths = [os.path.join(ROOT, "tasks"),
             *sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "valid", "*.yaml")))]
    plans = [t.plan for p in paths for t in compile_paths([p]).trials]
    assert len(plans) > 20
    for plan in plans:
        assert plan_hash(plan, memo) == plan_json_hash(plan_to_json(plan)) == plan_hash(plan)


def test_counted_diagnostics_follow_appends_and_replacements():
    diags = Diagnostics()
    assert diags.count("error") == 0
    diags.emit("CE0301", "an error", None)
    diags.emit("CE0305", "a warning", None)
    assert (diags.count("error"), diags.count("warning")) == (1, 1)
    diags.emit("CE0301", "another", None)
    assert diags.count("error") == 2
    diags[0] = diags[1]  # a warning where an error was
    assert (diags.count("error"), diags.count("warning")) == (1, 2)
    diags.pop()
    assert (diags.count("error"), diags.count("warning")) == (0, 2)


def test_a_row_shares_the_blocks_and_criteria_it_leaves_as_they_were(write):
    """What makes a row cheap: its structured task is the template's but for what the
    row substitutes, so the work keyed by those objects is done once for all rows."""
    from ce_lang import dataset as ds
    from ce_lang.convert import converter
    from ce_lang.layers import Layer
    from ce_lang.row_trials import RowTemplate
    from ce_lang.schema.task import TaskSpec
    from ce_lang.spans import Span
    from ce_lang.yaml_source import parse_yaml

    doc = parse_yaml(TASK, "cls.yaml", Diagnostics())
    template = RowTemplate([Layer("task", doc.value, lambda p: Span.point("cls.yaml"))])
    row = ds.Row("r1", ROWS[1], "rows[1]", Span.point("cls.yaml"))
    merged = template.merged_for(row)
    task = template.structure(merged)
    assert task == converter.structure(merged.value, TaskSpec)
    assert task.initial_prompt == "Classify this review: review number 1 was awful"
    assert task.agent is template.task.agent and task.sandbox is template.task.sandbox
    kept = [a is b for a, b in zip(task.success_criteria, template.task.success_criteria,
                                   strict=True)]
    assert kept == [False, False, True, False, False]  # file_exists names no row key


@pytest.mark.parametrize("criterion", [
    {"type": "llm_judge", "prompt": "{text}", "files": ["label.txt"], "description": "j"},
    {"type": "run_command", "command": "echo '{text}'", "description": "c"},
    {"type": "file_contains", "path": "{text}.txt", "includes": ["{text}"], "description": "f"},
    {"type": "reference_comparison", "agent_file": "{text}", "reference_file": "r.txt",
     "description": "r"},
])
def test_a_criterion_analyzed_once_for_all_texts_is_analyzed_as_each_alone(criterion):
    """A text parameter the analysis never looks into (a judge's prompt, a command) is
    analyzed once with a stand-in; each row's instance must be the one analyzing that
    row's text gives, its `require` violations (a blank prompt) included."""
    from ce_lang.convert import converter
    from ce_lang.lang.instances import check_instances
    from ce_lang.lang.stdlib import stdlib_registry
    from ce_lang.schema.criteria import Criterion
    from ce_lang.spans import Span

    registry, cache = stdlib_registry(), {}
    at = lambda _p: Span.point("t.yaml")  # noqa: E731
    for text in ["good", "bad", "", "  ", "it's ${row.x}", "good"]:
        c = converter.structure({k: (v.format(text=text) if isinstance(v, str) else
                                     [x.format(text=text) for x in v])
                                 for k, v in criterion.items()}, Criterion)
        fast = check_instances([c], [0.5], None, registry, Diagnostics(), at, at, {}, cache)
        alone = check_instances([c], [0.5], None, registry, Diagnostics(), at, at, {})
        assert fast == alone
        assert fast[0].params == alone[0].params and fast[0].calls == alone[0].calls


def test_the_host_path_walk_skips_only_fields_that_hold_no_record():
    """`_task_paths` looks only in fields that may hold a path (each dataset row walks
    the task again): it finds what walking every field finds, on every valid case."""
    import attrs

    from ce_lang.convert import converter
    from ce_lang.rules_paths import _task_paths
    from ce_lang.schema.task import TaskSpec
    from ce_lang.validate import fields_of
    from ce_lang.yaml_source import parse_yaml

    def every_field(obj, path):
        if not attrs.has(type(obj)):
            return
        for name, _tp, rule, _ in fields_of(type(obj)):
            value = getattr(obj, name)
            if rule.path in ("task", "task_dir") and isinstance(value, str):
                yield (*path, name), value
            elif rule.path in ("task", "task_dir") and isinstance(value, list):
                yield from (((*path, name, i), v) for i, v in enumerate(value)
                            if isinstance(v, str))
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    yield from every_field(v, (*path, name, i))
            elif attrs.has(type(value)):
                yield from every_field(value, (*path, name))

    found = 0
    for file in sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "valid", "*.yaml"))):
        with open(file) as fh:
            value = parse_yaml(fh.read(), file, Diagnostics()).value
        try:
            task = converter.structure(value, TaskSpec)
        except Exception:  # a case that needs the compiler's normalizing
            continue
        paths = list(_task_paths(task, ()))
        assert paths == list(every_field(task, ()))
        found += len(paths)
    assert found > 0


def test_checking_rows_with_the_command_line_checks_each_block_once(write):
    """`cli_fits` checks every row's merged task with the command line's settings: the
    `RowWalker` memo checks a block the row left as it was once for all rows, and finds
    on each row what a new `Walker` finds (diagnostics, dropped and broken paths ...),
    also where a substituted value breaks a criterion."""
    from ce_lang import dataset as ds
    from ce_lang.layers import Layer
    from ce_lang.row_trials import RowTemplate, RowWalker
    from ce_lang.schema.task import TaskSpec
    from ce_lang.spans import Span
    from ce_lang.validate import Context, Walker
    from ce_lang.yaml_source import parse_yaml

    doc = parse_yaml(TASK.replace("path: label.txt\n    expected_label",
                                  'path: "${row.p}"\n    expected_label'), "cls.yaml",
                     Diagnostics())
    cli = Layer("command line", {"agent": {"model": "m"}, "run_limits": {"max_turns": 9}},
                lambda p: Span.point("<command line>"))
    template = RowTemplate([Layer("task", doc.value, doc.span, doc.key_span), cli])
    rows = [{**r, "p": p} for r, p in zip(ROWS, ["a.txt", "/etc/x", "b", "../x", "a.txt", "c"],
                                          strict=True)]

    def walked(walker, merged):
        out = walker.record(merged.value, TaskSpec, (), False)
        return (out, list(walker.diags), walker.broken_paths, walker.dropped,
                walker.unknown_keys, walker.index_maps)

    sizes, found = [], []
    for i, r in enumerate(rows):
        merged = template.merged_for(ds.Row(r["id"], r, f"rows[{i}]", Span.point("r")))
        ctx = lambda: Context(Diagnostics(), merged.span, merged.key_span)  # noqa: B023, E731
        fast = walked(RowWalker(ctx(), template.fits), merged)
        assert fast == walked(Walker(ctx()), merged)
        sizes.append(len(template.fits))
        found.append([(d.code, d.span.line) for d in fast[1]])
    bad = [("CE0206", 11)]  # a path out of the workspace: as checked alone
    assert found == [[], bad, [], bad, [], []]
    agent, limits = template.merged.value["agent"], template.merged.value["run_limits"]
    assert {k[0] for k, v in template.fits.items() if v[0] is agent or v[0] is limits} \
        == {("agent",), ("run_limits",)}
    # a row adds only what it substituted (its criteria and their list), never the blocks
    # it shares: as many entries for each row after the first, fewer than the first's
    steps = {b - a for a, b in itertools.pairwise(sizes)}
    assert len(steps) == 1 and steps.pop() < sizes[0]
