"""Behaviour of the resolved trials: layering, lineage, overrides, datasets, plans."""

import json
import os

import pytest

from ce_lang.compiler import CompileOptions, compile_paths

TASK = """\
task_id: t1
description: a task
initial_prompt: do it
agent: {model: task-model, allowed_tools: [Read]}
run_limits: {max_turns: 7}
sandbox:
  template_sources:
    - {type: starter_files, files: [{path: a.txt, content: task}]}
pre_run:
  - command: echo task
post_run:
  - command: echo task-post
success_criteria:
  - type: file_exists
    path: a.txt
    description: a exists
"""

EXPERIMENT = """\
experiment_id: ab
defaults:
  repeats: 2
  agent: {model: default-model, sdk_options: {effort: low}}
  run_limits: {max_turns: 3, task_timeout: 120}
  template_sources:
    - {type: starter_files, files: [{path: d.txt, content: defaults}]}
  pre_run:
    - command: echo defaults
  post_run:
    - command: echo defaults-post
variants:
  - variant_id: base
  - variant_id: hint
    agent: {model: hint-model}
    repeats: 1
    template_sources:
      - {type: starter_files, files: [{path: CLAUDE.md, content: hint}]}
"""


def ok(result):
    assert result.errors == 0, [(d.code, str(d.span), d.message) for d in result.diagnostics]
    return result


def by_variant(result):
    out = {}
    for t in result.trials:
        out.setdefault(t.variant_id, []).append(t)
    return out


def test_layers_merge_and_lineage(write):
    task = write("t1.yaml", TASK)
    exp = write("ab.yaml", EXPERIMENT)
    result = ok(compile_paths([task], CompileOptions(experiment=exp)))
    variants = by_variant(result)
    assert len(variants["base"]) == 2 and len(variants["hint"]) == 1
    base, hint = variants["base"][0], variants["hint"][0]
    assert base.plan.agent.model == "task-model"  # task beats experiment defaults
    assert hint.plan.agent.model == "hint-model"  # variant beats task
    assert base.plan.agent.sdk_options == {"effort": "low"}
    assert base.plan.run_limits.max_turns == 7 and base.plan.run_limits.task_timeout == 120
    assert [c.command for c in base.plan.pre_run] == ["echo defaults", "echo task"]
    assert [c.command for c in base.plan.post_run] == ["echo task-post", "echo defaults-post"]
    files = [[f.path for f in s.files] for s in hint.plan.sandbox.template_sources]
    assert files == [["d.txt"], ["a.txt"], ["CLAUDE.md"]]
    assert base.lineage["agent.model"] == "task"
    assert hint.lineage["agent.model"] == "variant hint"
    assert base.lineage["run_limits.task_timeout"] == "experiment ab: defaults"
    assert base.lineage["run_limits.turn_timeout"] == "built-in defaults"
    assert base.lineage["sandbox.template_sources[0]"] == "experiment ab: defaults"
    assert hint.lineage["sandbox.template_sources[2]"] == "variant hint"
    assert base.lineage["repeats"] == "experiment ab: defaults"
    assert hint.lineage["repeats"] == "variant hint"
    assert [t.trial_id for t in variants["base"]] == ["base/t1/00", "base/t1/01"]
    # repeats of one variant share a plan; variants differ
    assert variants["base"][0].plan_hash == variants["base"][1].plan_hash
    assert base.plan_hash != hint.plan_hash


def test_command_line_beats_every_layer(write):
    task = write("t1.yaml", TASK)
    exp = write("ab.yaml", EXPERIMENT)
    result = ok(compile_paths([task], CompileOptions(
        experiment=exp, overrides=("agent.model=cli-model", "run_limits.max_turns=9",
                                   "success_criteria.0.weight=2.5",
                                   "agent.sdk_options.effort=high"),
        repeats=1, driver="bwrap")))
    for t in result.trials:
        assert t.plan.agent.model == "cli-model"
        assert t.plan.run_limits.max_turns == 9
        assert t.plan.criteria[0].weight == 2.5
        assert t.plan.agent.sdk_options == {"effort": "high"}
        assert t.plan.sandbox.driver == "bwrap"
        assert t.lineage["agent.model"] == "command line"
        assert t.lineage["repeats"] == "command line"
    assert len(result.trials) == 2


def test_variant_prompt_replaces_task_prompt_file(write):
    write("prompt.md", "from the file\n")
    task = write("t.yaml", TASK.replace("initial_prompt: do it", "initial_prompt_file: prompt.md"))
    alone = ok(compile_paths([task]))
    assert alone.trials[0].plan.prompt == "from the file"
    exp = write("e.yaml", "experiment_id: e\nvariants:\n  - variant_id: v\n    initial_prompt: hi\n")
    result = ok(compile_paths([task], CompileOptions(experiment=exp)))
    assert result.trials[0].plan.prompt == "hi"


def test_a_variant_agent_type_is_over_an_agentless_task_and_its_error_says_so(write):
    """A variant is over the task (SEMANTICS.md, Experiments): its `agent: {type: ...}`
    replaces a task's `agent: {type: none}`, and the task then lacks a prompt (CE0201).
    The error pointed at the task's `task_id` with nothing about the variant; its note
    now names the variant and where it sets the type. The plain variant stays agentless."""
    task = write("t.yaml", "task_id: t\ndescription: d\nagent: {type: none}\n"
                 "success_criteria:\n  - {type: file_exists, path: a, description: a}\n")
    exp = write("e.yaml", "experiment_id: e\nvariants:\n  - variant_id: plain\n"
                "  - variant_id: coder\n    agent: {type: claude-code}\n")
    result = compile_paths([task], CompileOptions(experiment=exp))
    (d,) = [d for d in result.diagnostics if d.is_error]
    assert d.code == "CE0201" and d.span.file.endswith("t.yaml")
    assert d.notes[1] == ("`agent.type: claude-code` comes from the variant `coder` "
                          f"({exp}:5:13), which is over the task file's own `agent.type`, "
                          "`none` included (layers: docs/experiments.md)")
    plain = ok(compile_paths([task], CompileOptions(experiment=write(
        "p.yaml", "experiment_id: p\nvariants:\n  - variant_id: plain\n"))))
    assert plain.trials[0].plan.agent.type == "none"
    # the task's own type chosen in the task file: no such note
    alone = compile_paths([write("u.yaml", "task_id: u\ndescription: d\n"
                                 "success_criteria:\n  - {type: file_exists, path: a, "
                                 "description: a}\n")])
    (d,) = [d for d in alone.diagnostics if d.is_error]
    assert d.code == "CE0201" and len(d.notes) == 1


@pytest.mark.parametrize("arg, code, col, usage", [
    ("agent.modle=x", "CE0501", 7, False),
    ("run_limits.max_turns=lots", "CE0103", 22, False),
    ("nonsense", "CE0501", 1, True),  # malformed in itself: a usage error
    ("agent.model.x=1", "CE0501", 13, False),
    ("run_limits.max_turns=-1", "CE0104", 22, False),
])
def test_bad_overrides_are_errors_and_make_no_trials(write, arg, code, col, usage):
    task = write("t1.yaml", TASK)
    result = compile_paths([task], CompileOptions(overrides=(arg,)))
    assert result.usage_error is usage
    (d,) = result.diagnostics  # the task itself is clean
    assert (d.code, d.span.file, d.span.col) == (code, "<-D #1>", col)
    assert result.trials == [] and result.task_files == 1


@pytest.mark.parametrize("arg, shown", [
    ("initial_prompt=Fix it: now", '''-D "initial_prompt='Fix it: now'"'''),  # a mapping
    ("initial_prompt=[a, b]", '''-D "initial_prompt='[a, b]'"'''),  # a list
    ("initial_prompt=yes", '''-D "initial_prompt='yes'"'''),  # a boolean
    ("agent.model=it's: $X", """-D 'agent.model='"'"'it'"'"''"'"'s: $X'"'"''"""),
])
def test_a_d_value_yaml_reads_as_no_string_gets_the_quoting_to_use(write, arg, shown):
    import shlex

    task = write("t1.yaml", TASK)
    result = compile_paths([task], CompileOptions(overrides=(arg,)))
    (d,) = result.diagnostics
    assert d.code == "CE0103" and d.help is not None and d.help.endswith(shown), d.help
    # what the shell passes for the quoted form is a clean -D
    fixed = shlex.split(shown)[1]
    ok(compile_paths([task], CompileOptions(overrides=(fixed,))))
    # a value no text would do gets no quoting advice
    bad = compile_paths([task], CompileOptions(overrides=("run_limits.max_turns=a: b",)))
    assert [d.help for d in bad.diagnostics] == [None]


DATASET_TASK = """\
task_id: ds
description: dataset task
initial_prompt: "Say ${row.word} please"
dataset:
  rows:
    - {id: a, word: one, expected_skill: s}
    - {id: b, word: two, expected_skill: s}
    - {id: c, word: three, expected_skill: ""}
    - {id: d, word: four, expected_skill: ""}
success_criteria:
  - type: file_contains
    path: out.txt
    includes: ["${row.word}"]
    description: "says ${row.word}"
  - type: skill_triggered
    skill_name: s
    expected_skill: "${row.expected_skill}"
    description: skill
    suite_thresholds: {recall.yes: 0.5, f1.macro: 0.5}
"""


def test_dataset_rows_expand_and_substitute(write):
    result = ok(compile_paths([write("ds.yaml", DATASET_TASK)]))
    plans = {t.plan.task_id: t.plan for t in result.trials}
    assert sorted(plans) == ["ds/a", "ds/b", "ds/c", "ds/d"]
    b = plans["ds/b"]
    assert b.prompt == "Say two please"
    assert b.criteria[0].args["includes"] == ["two"]
    assert b.criteria[0].description == "says two"
    assert plans["ds/c"].criteria[1].args["expected_skill"] == ""
    assert b.suite_id == "ds" and b.row_id == "b"
    assert b.criteria[1].suite_thresholds == {"recall.yes": 0.5, "f1.macro": 0.5}


def test_top_level_suite_thresholds_gate_the_one_classification_criterion(write):
    """The guide's and docs' top-level form: its thresholds reach the plan's criterion
    (they were checked, then dropped: the gate never ran). Beside the criterion's own,
    it is an error, not a silent merge."""
    own = "    suite_thresholds: {recall.yes: 0.5, f1.macro: 0.5}\n"
    top = DATASET_TASK.replace(own, "").replace(
        "success_criteria:", "suite_thresholds: {accuracy: 0.9}\nsuccess_criteria:", 1)
    plans = [t.plan for t in ok(compile_paths([write("top.yaml", top)])).trials]
    assert [p.criteria[1].suite_thresholds for p in plans] == [{"accuracy": 0.9}] * 4
    assert all(p.criteria[0].suite_thresholds is None for p in plans)
    both = DATASET_TASK.replace("success_criteria:",
                                "suite_thresholds: {accuracy: 0.9}\nsuccess_criteria:", 1)
    result = compile_paths([write("both.yaml", both)])
    line = both.splitlines().index("suite_thresholds: {accuracy: 0.9}") + 1
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("CE0212", line)]


def test_rows_substitute_in_the_script_agents_actions_and_nowhere_else(write):
    text = DATASET_TASK.replace("success_criteria:", """agent:
  type: script
  model: m-${row.word}
  script:
    - write: "${row.word}.txt"
      content: "${row.word} ${row.expected_skill}"
success_criteria:""", 1)
    plans = {t.plan.task_id: t.plan for t in ok(compile_paths([write("ds.yaml", text)])).trials}
    assert plans["ds/b"].agent.script == [{"write": "two.txt", "content": "two s"}]
    assert plans["ds/b"].agent.model == "m-${row.word}"  # agent settings stay as written
    bad = text.replace("${row.word} ${row.expected_skill}", "${row.word} ${row.nope}")
    line = bad.splitlines().index('      content: "${row.word} ${row.nope}"') + 1
    missing = compile_paths([write("ds2.yaml", bad)])
    model_line = line - 3
    assert [(d.code, d.span.line) for d in missing.diagnostics] == [
        ("CE0214", model_line),  # the script agent calls no model
        ("CE0304", model_line), ("CE0303", line)]  # the model's stays as written: a warning


ROW_EXPERIMENT = """\
experiment_id: rows
defaults:
  prompt_mutations: [{type: prefix, content: "row ${row.id}:"}]
variants:
  - variant_id: own-prompt
    initial_prompt: "Spell ${row.word}"
    agent: {type: script, script: [{write: out.txt, content: "${row.word}"}]}
  - variant_id: mutated
    prompt_mutations: [{type: suffix, content: "(${row.expected_skill})", separator: " "}]
"""


def test_rows_substitute_in_what_an_experiment_and_the_command_line_set(write):
    # a variant's prompt, the prompt mutations and a script an experiment or -D sets
    # reached the agent as written, "${row.word}" and all, without a word from ce
    task = write("ds.yaml", DATASET_TASK)
    result = ok(compile_paths([task], CompileOptions(experiment=write("e.yaml",
                                                                      ROW_EXPERIMENT))))
    plans = {(t.variant_id, t.plan.row_id): t.plan for t in result.trials}
    own = plans["own-prompt", "b"]
    assert own.prompt == "row b:\n\nSpell two"
    assert own.agent.script == [{"write": "out.txt", "content": "two"}]
    assert plans["mutated", "a"].prompt == "row a:\n\nSay one please (s)"
    cli = ok(compile_paths([task], CompileOptions(overrides=(
        "initial_prompt=Echo ${row.word}", "agent.type=script",
        "agent.script=[{run: 'echo ${row.word}'}]"))))
    b = next(t.plan for t in cli.trials if t.plan.row_id == "b")
    assert (b.prompt, b.agent.script) == ("Echo two", [{"run": "echo two"}])


def test_an_experiments_row_reference_is_checked_against_the_rows(write):
    task = write("ds.yaml", DATASET_TASK)
    plain = write("plain.yaml", TASK)
    exp = write("e.yaml", ROW_EXPERIMENT.replace("${row.word}\"", "${row.wrd}\""))
    result = compile_paths([task, plain], CompileOptions(experiment=exp))
    found = {(d.code, d.span.file, d.span.line, d.message) for d in result.diagnostics}
    assert ("CE0303", exp, 6, "`${row.wrd}`: dataset rows 'a' (rows[0]), 'b' (rows[1]), "
            "'c' (rows[2]), 'd' (rows[3]) have no key `wrd`") in found
    # a task without a dataset keeps them as written: said once per reference
    assert ("CE0304", exp, 3, "`${row.id}` stays as written in task 't1': it has no "
            "dataset") in found
    assert not [t for t in result.trials if t.plan.row_id]


def test_dataset_sampling_is_reproducible(write):
    text = DATASET_TASK.replace("  rows:", "  sample_per_stratum: 1\n  rows:")
    path = write("ds.yaml", text)
    first = [t.plan.task_id for t in ok(compile_paths([path])).trials]
    again = [t.plan.task_id for t in ok(compile_paths([path])).trials]
    assert first == again and len(first) == 2  # one per stratum ("s" and "")
    flat = ok(compile_paths([path], CompileOptions(sample=3)))
    assert len(flat.trials) == 3


def test_missing_row_key_names_rows_at_exact_span(write):
    text = DATASET_TASK.replace("{id: c, word: three,", "{id: c,").replace(
        "{id: d, word: four,", "{id: d, word: [x],")
    result = compile_paths([write("ds.yaml", text)])
    msgs = {(d.code, d.span.line, d.span.col, d.message) for d in result.diagnostics}
    assert ("CE0303", 3, 22, "`${row.word}`: dataset row 'c' (rows[2]) has no key `word`") in msgs
    assert ("CE0303", 3, 22,
            "`${row.word}`: dataset row 'd' (rows[3]) has a non-scalar value for `word`") in msgs
    assert ("CE0303", 13, 17, "`${row.word}`: dataset row 'c' (rows[2]) has no key `word`") in msgs
    assert not result.trials


def test_jsonl_dataset(write):
    write("rows.jsonl", '{"id": "r1", "word": "x", "expected_skill": "s"}\n\n'
                        '{"id": "r2", "word": "y", "expected_skill": ""}\n')
    text = DATASET_TASK.replace("""  rows:
    - {id: a, word: one, expected_skill: s}
    - {id: b, word: two, expected_skill: s}
    - {id: c, word: three, expected_skill: ""}
    - {id: d, word: four, expected_skill: ""}
""", "  paths: [rows.jsonl]\n")
    result = ok(compile_paths([write("ds.yaml", text)]))
    assert [t.plan.task_id for t in result.trials] == ["ds/r1", "ds/r2"]


def test_plan_hash_is_independent_of_location_and_lineage(tmp_path):
    hashes = set()
    for sub in ("one", "two/deeper"):
        d = tmp_path / sub
        d.mkdir(parents=True)
        (d / "t.yaml").write_text(TASK)
        hashes.add(ok(compile_paths([str(d / "t.yaml")])).trials[0].plan_hash)
    assert len(hashes) == 1
    # the same setting from a different layer gives the same plan
    (tmp_path / "plain.yaml").write_text(TASK.replace("max_turns: 7", "max_turns: 8"))
    via_cli = ok(compile_paths([str(tmp_path / "plain.yaml")],
                               CompileOptions(overrides=("run_limits.max_turns=7",))))
    assert via_cli.trials[0].plan_hash in hashes


def test_plan_hash_is_independent_of_location_with_host_files(tmp_path):
    """agent.model_script and sandbox.docker.dockerfile_path were lowered as absolute
    host paths: the same task in another checkout was another plan (rescore and resume
    take a moved suite's trials for edited ones)."""
    task = ("task_id: t\ndescription: d\ninitial_prompt: go\n"
            "agent: {type: claude-code, model_script: m.yaml}\n"
            "sandbox: {driver: docker, python: null, docker: {dockerfile_path: Dockerfile}}\n"
            "success_criteria:\n  - {type: file_exists, path: a, description: a}\n")
    plans = []
    for sub in ("one", "two/deeper"):
        d = tmp_path / sub / "suite"
        d.mkdir(parents=True)
        (d / "t.yaml").write_text(task)
        (d / "m.yaml").write_text("turns: []\n")
        (d / "Dockerfile").write_text("FROM busybox\n")
        plans.append(ok(compile_paths([str(d / "t.yaml")])).trials[0])
    assert plans[0].plan_hash == plans[1].plan_hash
    plan = plans[0].plan
    assert (plan.agent.model_script, plan.sandbox.docker.dockerfile_path) == \
        ("m.yaml", "Dockerfile")


def test_lowered_criteria_are_calls_with_bound_arguments(write):
    text = TASK + """\
  - type: command_not_executed
    command_pattern: "rm -rf"
    description: never rm
    stop_when: fail
  - type: llm_judge
    prompt: grade
    description: judged
    weight: 0
  - type: reference_comparison
    agent_file: a.txt
    similarity_threshold: 0.6
    description: close to reference
reference: {code: "x = 1"}
run_limits: {max_turns: 7, stop_early: true}
"""
    text = text.replace("run_limits: {max_turns: 7}\n", "")
    plan = ok(compile_paths([write("t.yaml", text)])).trials[0].plan
    c0, c1, c2, c3 = plan.criteria
    assert (c0.id, c0.type, c0.args, c0.pass_threshold) == ("c0", "file_exists",
                                                            {"path": "a.txt"}, 0.9)
    assert c0.arming is None and plan.early_stop.armed == ("c1",)
    assert c1.type == "command_executed" and c1.args["min_count"] == 0
    assert c1.args["max_count"] == 0 and c1.arming.polarity == "fail"
    assert c2.pass_threshold == 0.7 and c2.args["model"] == "anthropic.claude-sonnet-4-6"
    assert not c2.gating and c0.gating
    assert c3.pass_threshold == 0.6


def test_duplicate_task_ids_across_files(write):
    a = write("a.yaml", TASK)
    b = write("b.yaml", TASK)
    result = compile_paths([a, b])
    assert [d.code for d in result.diagnostics] == ["CE0213"]
    assert result.diagnostics[0].span.file == b


def test_a_variant_named_like_a_directory_of_the_run_is_refused(write):
    """VARIANT/TASK/NN sits beside the run's own directories: a variant `objects` would
    put its trials among the objects, where rescore and resume never look (CE0224)."""
    from ce_lang.api import RUN_LEVEL_DIRS

    task = write("t.yaml", TASK)
    exp = write("exp.yaml", "experiment_id: e\nvariants:\n  - variant_id: base\n"
                            "  - variant_id: objects\n")
    result = compile_paths([task], CompileOptions(experiment=exp))
    (d,) = result.diagnostics
    assert (d.code, d.span.file, d.span.line, d.span.col) == ("CE0224", exp, 4, 17)
    assert "objects" in d.message and not result.trials
    assert {"plans", "objects", "task_files", "templates"} <= RUN_LEVEL_DIRS


def test_every_reserved_variant_name_is_in_ce0224s_explanation_and_the_docs():
    # `attempts` (--retry-errors' directory) was refused, but CE0224's explanation (`ce
    # compile --explain`, diagnostics.md) and experiments.md did not list it
    from pathlib import Path

    from ce_lang.api import RUN_LEVEL_DIRS
    from ce_lang.codes import CODES

    docs = (Path(__file__).parent.parent / "docs" / "experiments.md").read_text()
    for name in sorted(RUN_LEVEL_DIRS):
        assert name in CODES["CE0224"].explanation, name
        assert f"`{name}`" in docs, name


def test_directory_walk_skips_non_task_yaml_and_checks_experiments(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "config.yaml").write_text("name: not a task\n")
    (tmp_path / "exp.yaml").write_text("experiment_id: e\nvariants: []\n")
    result = compile_paths([str(tmp_path)])
    assert result.task_files == 1 and len(result.trials) == 1
    assert [d.code for d in result.diagnostics] == ["CE0110"]  # the empty variants list


def test_the_experiment_given_with_e_is_not_checked_again_in_the_directory(tmp_path,
                                                                          monkeypatch):
    # `ce compile . -e exp.yaml` with the experiment beside the tasks printed each of its
    # errors twice (as ./exp.yaml and exp.yaml) and counted them twice
    (tmp_path / "t.yaml").write_text(TASK)
    (tmp_path / "exp.yaml").write_text("experiment_id: e\nvariants:\n  - variant_id: A\n")
    monkeypatch.chdir(tmp_path)
    result = compile_paths(["."], CompileOptions(experiment="exp.yaml"))
    assert [(d.code, d.span.file, d.span.line) for d in result.diagnostics] == [
        ("CE0111", "exp.yaml", 3)]
    # and `ce compile *.yaml -e exp.yaml` was CE0402, "use it with `-e exp.yaml`"
    (tmp_path / "exp.yaml").write_text("experiment_id: e\nvariants:\n  - variant_id: a\n")
    ok(compile_paths(["exp.yaml", "t.yaml"], CompileOptions(experiment="exp.yaml")))


@pytest.mark.parametrize("command", ["compile", "run", "rescore", "explain"])
def test_a_repeated_experiment_is_a_usage_error(write, command):
    # click kept the last `-e` silently: `ce compile t.yaml -e ab.yaml -e rep.yaml`
    # compiled rep's variants only
    from click.testing import CliRunner

    from ce_runtime.cli import main

    task = write("t1.yaml", TASK)
    first = write("ab.yaml", EXPERIMENT)
    second = write("other.yaml", "experiment_id: o\nvariants:\n  - variant_id: o\n")
    args = {"rescore": ["runs/x", task], "explain": ["runs/x"]}.get(command, [task])
    res = CliRunner().invoke(main, [command, *args, "-e", first, "--experiment", second])
    assert res.exit_code == 2, res.output
    assert "given 2 times" in res.output and first in res.output and second in res.output


def test_emit_writes_plans_and_trials(write, tmp_path):
    from click.testing import CliRunner

    from ce_runtime.cli import main

    task = write("t1.yaml", TASK)
    exp = write("ab.yaml", EXPERIMENT)
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["compile", task, "-e", exp, "--emit", str(out)])
    assert res.exit_code == 0, res.output
    trials = json.loads((out / "trials.json").read_text())["trials"]
    assert len(trials) == 3
    for t in trials:
        plan = json.loads((out / "plans" / f"{t['plan_hash']}.json").read_text())
        assert plan["hash"] == t["plan_hash"]
        assert plan["plan"]["task_id"] == "t1"
    assert len(os.listdir(out / "plans")) == 2
    lineage = trials[0]["lineage"]  # every setting, with the layer it came from
    assert lineage["agent.model"] == "task"
    assert lineage["run_limits.task_timeout"] == "experiment ab: defaults"
    assert lineage["sandbox.driver"] == "default"
    assert lineage["run_limits.max_usd"] == "default"


def test_plan_hash_follows_the_content_of_task_side_files(write):
    write("tpl/main.py", "print(1)\n")
    write("tpl/__pycache__/x.pyc", "junk")
    text = TASK.replace("    - {type: starter_files", "    - {type: template_dir, path: tpl}\n"
                        "    - {type: starter_files")
    task = write("t.yaml", text)
    first = ok(compile_paths([task])).trials[0]
    assert list(first.plan.inputs) == ["tpl"]
    write("tpl/__pycache__/x.pyc", "other junk")  # ignored by the default patterns
    assert ok(compile_paths([task])).trials[0].plan_hash == first.plan_hash
    write("tpl/main.py", "print(2)\n")
    assert ok(compile_paths([task])).trials[0].plan_hash != first.plan_hash


def test_plan_blocks_spell_as_the_plan_does():
    """block_to_json (what each trial hands its agent, without cattrs) gives the agent,
    run_limits and reference blocks exactly as plan_to_json does, on every bundled task.
    (Not the guide examples' directory: another test writes wrapped copies into it.)"""
    from ce_lang.plan import block_to_json, plan_to_json

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = compile_paths([os.path.join(root, "tasks")],
                           CompileOptions(host_limits=lambda: {"tempdir": {}}))
    seen = {"agent": 0, "run_limits": 0, "reference": 0}
    for trial in result.trials:
        whole = plan_to_json(trial.plan)
        for name in seen:
            block = getattr(trial.plan, name)
            if block is not None:
                assert block_to_json(block) == whole[name], (trial.trial_id, name)
                seen[name] += 1
    assert seen["agent"] >= 16 and seen["run_limits"] >= 16 and seen["reference"] >= 15, seen


def test_a_file_that_is_not_yaml_counts_as_a_task_file_that_failed(tmp_path):
    """`ce compile DIR` over three files, one of them broken YAML: three task files, not
    the two that parsed (the summary line must add up with the errors it lists)."""
    from click.testing import CliRunner

    from ce_runtime.cli import main

    body = "task_id: {id}\ndescription: d\ninitial_prompt: p\nsuccess_criteria:\n" \
           "  - {{type: {kind}, path: x, description: d}}\n"
    (tmp_path / "good.yaml").write_text(body.format(id="a", kind="file_exists"))
    (tmp_path / "typo.yaml").write_text(body.format(id="c", kind="file_exist"))
    (tmp_path / "broken.yaml").write_text("task_id: b\n  bad: [\n")
    result = compile_paths([str(tmp_path)], CompileOptions())
    assert result.task_files == 3 and result.errors == 2
    out = CliRunner().invoke(main, ["compile", str(tmp_path)])
    assert out.exit_code == 1
    assert "compile failed: 3 task files, 1 trial (1 distinct plan), 2 errors" in out.output


def test_a_pass_threshold_on_reference_comparison_is_said_to_do_nothing(write):
    """reference_comparison passes at its similarity_threshold (coder_eval's rule): a
    `pass_threshold` there would be silently ignored, so it is a CE0214 warning at it."""
    task = write("t.yaml", """\
task_id: rc
description: d
initial_prompt: write solution.py
reference: {code: "x = 1"}
success_criteria:
  - type: reference_comparison
    agent_file: solution.py
    similarity_threshold: 0.6
    pass_threshold: 0.5
    description: close to the reference
  - {type: reference_comparison, agent_file: solution.py, description: no threshold given}
""")
    result = compile_paths([task])
    (d,) = result.diagnostics
    assert (d.code, d.severity, d.span.line, d.span.col) == ("CE0214", "warning", 9, 5)
    assert "similarity_threshold` (0.6)" in d.message
    assert [c.pass_threshold for c in result.trials[0].plan.criteria] == [0.6, 0.8]


def test_a_missing_judge_file_is_a_warning_a_missing_schema_an_error(write):
    """The task format: a judge's missing files "render as <file not found>", so the task
    compiles with a warning (CE0225); a JSON Schema it grades with must exist (CE0207)."""
    task = write("t.yaml", """\
task_id: judged
description: d
initial_prompt: write a.txt
success_criteria:
  - type: llm_judge
    prompt: is it good
    files: [a.txt, "$TASK_DIR/nothere.md"]
    description: judged
  - {type: json_check, path: a.json, json_schema: $TASK_DIR/gone.json, description: s}
""")
    result = compile_paths([task])
    assert [(d.code, d.severity, d.span.line) for d in result.diagnostics] == [
        ("CE0225", "warning", 7), ("CE0207", "error", 9)]
    with open(task) as fh:
        judged = write("j.yaml", fh.read().rsplit("  - {type: json_check", 1)[0])
    assert [d.code for d in compile_paths([judged]).diagnostics] == ["CE0225"]
    assert compile_paths([judged]).trials


def test_prompt_mutations_are_in_the_lineage(write):
    """The prompt a variant's mutations changed says so: `initial_prompt` is the task's,
    and `prompt_mutations` names the layers whose mutations applied, in order."""
    task = write("t.yaml", TASK)
    exp = write("pm.yaml", """\
experiment_id: pm
defaults:
  prompt_mutations: [{type: suffix, content: "END"}]
variants:
  - variant_id: both
    prompt_mutations: [{type: prefix, content: "START"}]
  - variant_id: defaults-only
""")
    variants = by_variant(ok(compile_paths([task], CompileOptions(experiment=exp))))
    both, only = variants["both"][0], variants["defaults-only"][0]
    assert both.plan.prompt.startswith("START") and both.plan.prompt.endswith("END")
    assert both.lineage["prompt_mutations"] == "experiment pm: defaults, variant both"
    assert only.lineage["prompt_mutations"] == "experiment pm: defaults"
    assert both.lineage["initial_prompt"] == "task"
    plain = ok(compile_paths([task])).trials[0]
    assert "prompt_mutations" not in plain.lineage


def test_a_d_path_not_found_says_it_was_resolved_against_the_current_directory(
        tmp_path, monkeypatch):
    (tmp_path / "suite").mkdir()
    task = tmp_path / "suite" / "t.yaml"
    task.write_text("task_id: t\ndescription: d\ninitial_prompt: go\nsuccess_criteria:\n"
                    "  - {type: file_exists, path: a, description: a}\n")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    for source, where in (("-D", tmp_path / "cwd"), ("task", tmp_path / "suite")):
        if source == "task":
            task.write_text(task.read_text() + "agent: {model_script: nothere.yaml}\n")
        options = CompileOptions(overrides=("agent.model_script=nothere.yaml",)) \
            if source == "-D" else CompileOptions()
        result = compile_paths([str(task)], options)
        [diag] = [d for d in result.diagnostics if d.code == "CE0207"]
        base = "the current directory" if source == "-D" else "the file's directory"
        assert diag.notes == (f"resolved against {base}: {where / 'nothere.yaml'}",)


def test_a_secret_looking_pass_through_is_a_warning_where_it_is_written(write):
    """`env_passthrough: [MY_API_KEY]` compiled and ran without a word while ce kept the
    variable out of the sandbox (the runtime's secret rule): CE0227 names each such name,
    in the task file or the experiment file that lists it; other names say nothing."""
    from ce_lang.secret_names import looks_secret
    from ce_runtime.store.redact import looks_secret as runtime_rule

    task = write("t.yaml", """\
task_id: passing
description: d
agent: {type: none}
sandbox:
  env_passthrough: [LANG_X, MY_API_KEY]
  docker: {env_passthrough_extra: [GITHUB_TOKEN], env_passthrough: [HOME_DIR]}
success_criteria:
  - {type: file_exists, path: a.txt, description: a}
""")
    exp = write("e.yaml", """\
experiment_id: e
defaults: {sandbox: {env_passthrough: [DB_PASSWORD]}}
variants: [{variant_id: a}]
""")
    result = compile_paths([task])
    assert [(d.code, d.severity, d.span.line, d.span.col) for d in result.diagnostics] == [
        ("CE0227", "warning", 5, 29), ("CE0227", "warning", 6, 36)]
    assert result.diagnostics[0].message.startswith(
        "`MY_API_KEY` is never passed to the sandbox: its name looks like a secret (`KEY`)")
    assert result.trials  # a warning: the task runs (without the variable)
    found = compile_paths([task], CompileOptions(experiment=exp)).diagnostics
    assert [(os.path.basename(d.span.file), d.span.line, d.message.split("`")[1])
            for d in found] == [("e.yaml", 2, "DB_PASSWORD"), ("t.yaml", 5, "MY_API_KEY"),
                                ("t.yaml", 6, "GITHUB_TOKEN")]
    assert runtime_rule is looks_secret  # one rule: what is warned of is what is kept out


def test_task_dir_in_a_task_files_path_is_told_how_to_write_it(write):
    """`initial_prompt_file: $TASK_DIR/../shared/rubric.md` failed with a note pointing
    at `sub/shared/rubric.md`: the task file's paths are relative to its directory and
    `$TASK_DIR` is a criteria word. The error says so and gives the path to write."""
    write("shared/rubric.md", "the prompt")
    task = write("sub/t.yaml", """\
task_id: t
description: d
initial_prompt_file: $TASK_DIR/../shared/rubric.md
success_criteria:
  - {type: file_exists, path: a.txt, description: a}
""")
    (d,) = compile_paths([task]).diagnostics
    assert (d.code, d.span.line, d.span.col) == ("CE0207", 3, 22)
    assert d.help == ("`$TASK_DIR` is expanded in criteria only; this path is relative to "
                      "the file's directory already: write `../shared/rubric.md`")
    with open(task) as fh:
        fixed = fh.read().replace("$TASK_DIR/", "")
    write("sub/t.yaml", fixed)
    assert compile_paths([task]).diagnostics == [] and compile_paths([task]).trials
