"""A task whose top-level field is missing or invalid is not dropped whole: the rules that
read only its intact fields (each criterion's own, and the task's rules that read
neither the broken field nor a default standing in for it) still run in the same
compile, and nothing is reported that only the broken field causes. More cases in
tests/corpus/schema/task_field_*.yaml; a criterion dropped for its own field is
tests/test_compile_dropped_criteria.py. Also: a `reference_file` missing from the
reference directory is a compile error (CE0207), not a grading error."""

import json
import os

from ce_lang.compiler import CompileOptions, compile_paths
from tests.test_compile_dropped_criteria import compile_cli, found

NO_DESCRIPTION = """\
task_id: t
agent: {type: none}
sandbox: {driver: tempdir}
success_criteria:
  - type: file_matches_regex
    path: a.txt
    pattern: "(unclosed"
    description: d
"""


def test_missing_description_does_not_hide_the_bad_regex(tmp_path):
    res = compile_cli(tmp_path, NO_DESCRIPTION)
    assert res.exit_code == 1
    assert "t.yaml:1:1: error[CE0102]: missing required field `description`" in res.output
    assert "t.yaml:7:14: error[CE0111]: invalid regular expression" in res.output
    assert "1 task file, 0 trials (0 distinct plans), 2 errors, 0 warnings" in res.output


def test_json_output_carries_both(tmp_path):
    res = compile_cli(tmp_path, NO_DESCRIPTION, "--format", "json")
    out = json.loads(res.output)
    assert [(d["code"], d["line"], d["col"]) for d in out["diagnostics"]] == [
        ("CE0102", 1, 1), ("CE0111", 7, 14)]


def test_with_an_override_the_placeholder_is_not_checked_again(tmp_path):
    # -D re-checks the merged task: the stand-in for the missing description is no
    # blank description (CE0110), and the regex is still reported
    res = compile_cli(tmp_path, NO_DESCRIPTION, "-D", "run_limits.max_turns=3",
                      "--format", "json")
    out = json.loads(res.output)
    assert [(d["code"], d["line"]) for d in out["diagnostics"]] == [
        ("CE0102", 1), ("CE0111", 7)]


def test_checked_once_whatever_the_variants(write):
    task = write("t.yaml", NO_DESCRIPTION)
    exp = write("ab.exp.yaml", "experiment_id: ab\nvariants:\n  - variant_id: a\n"
                "  - variant_id: b\n")
    result = compile_paths([task], CompileOptions(experiment=exp))
    assert found(result) == [("CE0102", 1, 1), ("CE0111", 7, 14)]


def test_no_success_criteria_is_no_empty_list_to_count(write):
    # the placeholder [] would make the top-level suite_thresholds gate "0 criteria"
    # (CE0212); the tag is still checked
    task = write("t.yaml", """\
task_id: t
description: d
initial_prompt: Go.
tags: [Smoke Test]
dataset: {rows: [{id: a}]}
suite_thresholds: {accuracy: 0.5}
""")
    result = compile_paths([task])
    assert [d.code for d in result.diagnostics] == ["CE0102", "CE0203"]
    assert "`success_criteria`" in result.diagnostics[0].message


def test_an_agent_of_the_wrong_type_is_no_claude_code(write):
    # before: the built-in default stood in for it, so the task "had no prompt" (CE0201)
    task = write("t.yaml", NO_DESCRIPTION.replace("agent: {type: none}", "agent: none")
                 .replace("task_id: t\n", "task_id: t\ndescription: x\n"))
    result = compile_paths([task])
    assert [d.code for d in result.diagnostics] == ["CE0103", "CE0111"]


def test_reference_file_missing_from_the_reference_directory(write):
    write("ref/sol.py", "x = 1\n")
    write("ref/pkg/mod.py", "y = 2\n")
    task = write("t.yaml", """\
task_id: t
description: d
initial_prompt: Go.
reference: {directory: ref}
success_criteria:
  - {type: reference_comparison, agent_file: a.py, reference_file: sol.py, description: a}
  - {type: reference_comparison, agent_file: a.py, reference_file: pkg/mod.py, description: b}
  - {type: reference_comparison, agent_file: a.py, reference_file: so.py, description: c}
""")
    result = compile_paths([task])
    assert found(result) == [("CE0207", 8, 68)]
    diag = result.diagnostics[0]
    assert diag.message == ("`success_criteria[2].reference_file`: 'so.py' not found in the "
                            "reference directory 'ref'")
    assert diag.help == "did you mean `sol.py`?"
    assert os.path.dirname(task) not in diag.message  # no host path
