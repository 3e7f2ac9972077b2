"""A broken experiment (`-e`) or `-D` hides no task's errors (ce_lang.experiment and
ce_lang.overrides state the rule): the experiment's or the override's errors are reported
beside every task's own, with no follow-on error, through `ce compile` (human, JSON,
SARIF), `ce run`, `ce rescore` and the API; nor does a criteria file that is missing or
has errors cause an "unknown criterion type" at its callers. Golden cases:
tests/corpus/experiment/*_task_errors.yaml, independent_experiment_errors.yaml,
tests/corpus/overrides/*_task_errors.yaml, tests/corpus/lang/ce_syntax_error_used.yaml."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ce_lang.compiler import CompileOptions, compile_paths

CE = [sys.executable, "-m", "ce_runtime.cli"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a: two criteria and its own errors (a bad tag at 4:8, a misspelt field at 7:59)
TASK_A = """\
task_id: a
description: task a
initial_prompt: Go.
tags: [Smoke]
success_criteria:
  - {type: file_exists, path: a.txt, description: exists}
  - {type: file_exists, path: b.txt, description: exists, weigth: 2}
"""
# b: one criterion and its own error (a timeout out of range at 5:51)
TASK_B = """\
task_id: b
description: task b
initial_prompt: Go.
success_criteria:
  - {type: run_command, command: "true", timeout: 0, description: runs}
"""
# c: clean, two criteria
TASK_C = """\
task_id: c
description: task c
initial_prompt: Go.
success_criteria:
  - {type: file_exists, path: a.txt, description: exists}
  - {type: command_executed, tool_name: Bash, description: ran bash}
"""
# an unknown key (3:3) and a wrong type (7:29), in defaults and in a variant
BROKEN_EXP = """\
experiment_id: ab
defaults:
  repeat: 2
variants:
  - variant_id: base
  - variant_id: other
    run_limits: {max_turns: many}
"""
TASK_ERRORS = [("CE0203", "tasks/a.yaml", 4, 8), ("CE0101", "tasks/a.yaml", 7, 59),
               ("CE0104", "tasks/b.yaml", 5, 51)]


@pytest.fixture
def suite(tmp_path):
    (tmp_path / "tasks").mkdir()
    for name, text in (("a", TASK_A), ("b", TASK_B), ("c", TASK_C)):
        (tmp_path / "tasks" / f"{name}.yaml").write_text(text)
    (tmp_path / "exp.yaml").write_text(BROKEN_EXP)
    return tmp_path


def ce(cwd, *args):
    env = {**os.environ, "CE_NO_COMPILE_CACHE": "1", "NO_COLOR": "1", "PYTHONPATH": ROOT}
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


def located(res) -> list[tuple[str, str, int, int]]:
    """(code, file, line, col) of each diagnostic `ce compile --format json` printed."""
    return [(d["code"], d["file"], d["line"], d["col"])
            for d in json.loads(res.stdout)["diagnostics"]]


def headers(text: str) -> list[str]:
    """The `file:line:col: severity[CODE]: message` lines of a human rendering."""
    return re.findall(r"^(?:<[^>]+>|\S+):\d+:\d+: (?:error|warning)\[CE\d{4}\]: .*$", text,
                      re.M)


# -- the experiment ----------------------------------------------------------------------

def test_compile_reports_the_experiments_errors_and_every_tasks_own(suite):
    res = ce(suite, "compile", "tasks/", "-e", "exp.yaml", "--format", "json")
    assert res.returncode == 1, res.stderr
    assert located(res) == [("CE0101", "exp.yaml", 3, 3), ("CE0103", "exp.yaml", 7, 29),
                            *TASK_ERRORS]
    summary = json.loads(res.stdout)["summary"]
    assert summary == {"tasks": 3, "trials": 0, "plans": 0, "errors": 5, "warnings": 0}


def test_human_and_sarif_output_carry_both(suite):
    human = ce(suite, "compile", "tasks/", "-e", "exp.yaml")
    assert human.returncode == 1
    assert [h.split(": ")[0] for h in headers(human.stderr)] == [
        "exp.yaml:3:3", "exp.yaml:7:29", "tasks/a.yaml:4:8", "tasks/a.yaml:7:59",
        "tasks/b.yaml:5:51"]
    assert "  = help: did you mean `repeats`?" in human.stderr
    assert human.stderr.rstrip().endswith(
        "compile failed: 3 task files, 0 trials (0 distinct plans), 5 errors, 0 warnings")
    sarif = json.loads(ce(suite, "compile", "tasks/", "-e", "exp.yaml", "-f", "sarif").stdout)
    (run,) = sarif["runs"]
    where = [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
              r["locations"][0]["physicalLocation"]["region"]["startLine"])
             for r in run["results"]]
    assert where == [("CE0101", "exp.yaml", 3), ("CE0103", "exp.yaml", 7),
                     ("CE0203", "tasks/a.yaml", 4), ("CE0101", "tasks/a.yaml", 7),
                     ("CE0104", "tasks/b.yaml", 5)]


def test_api_a_broken_experiment_makes_no_trials_and_no_usage_error(suite):
    result = compile_paths([str(suite / "tasks")],
                           CompileOptions(experiment=str(suite / "exp.yaml")))
    assert not result.usage_error and result.trials == []
    assert [(d.code, os.path.relpath(d.span.file, suite), d.span.line, d.span.col)
            for d in result.diagnostics][2:] == TASK_ERRORS
    fixed = (suite / "exp.yaml").read_text().replace("repeat:", "repeats:").replace(
        "many", "5")
    (suite / "exp.yaml").write_text(fixed)
    (suite / "tasks" / "a.yaml").write_text(TASK_C.replace("task_id: c", "task_id: a"))
    (suite / "tasks" / "b.yaml").unlink()
    clean = compile_paths([str(suite / "tasks")],
                          CompileOptions(experiment=str(suite / "exp.yaml")))
    assert clean.diagnostics == [] and len(clean.trials) == 8  # 2 tasks x 2 variants x 2


NO_PROMPT = """\
task_id: scripted
description: "no prompt: fine only if the experiment makes the agent `none`"
success_criteria:
  - {type: file_exists, path: a.txt, description: exists}
"""


@pytest.mark.parametrize("variant, reported", [
    # a valid variant that leaves the agent alone: the missing prompt is a real error
    ("  - variant_id: v\n    run_limits: {max_turns: 3}\n", ["CE0201"]),
    # the misspelt key meant the agent (did you mean `agent`): the agent type is unknown,
    # so whether the task needs a prompt is unknown too (no follow-on CE0201)
    ("  - variant_id: v\n    agnet: {type: none}\n", ["CE0101"]),
    # a broken agent block in a variant: same
    ("  - variant_id: v\n    agent: 5\n", ["CE0103"]),
    # no variants at all: what they would set is unknown
    ("  []\n", ["CE0110"]),
])
def test_no_follow_on_error_from_what_the_experiment_left_unknown(write, variant, reported):
    exp = write("e.yaml", "experiment_id: e\nvariants:\n" + variant)
    result = compile_paths([write("t.yaml", NO_PROMPT)], CompileOptions(experiment=exp))
    assert [d.code for d in result.diagnostics] == reported


def test_a_broken_variants_valid_settings_still_apply(write):
    """variants[0] is broken (its repeats), its `agent: {type: none}` still applies: the
    task's `command_executed` is reported against it."""
    exp = write("e.yaml", "experiment_id: e\nvariants:\n  - variant_id: v\n    repeats: -1\n"
                "    agent: {type: none}\n")
    task = write("t.yaml", TASK_C.replace("initial_prompt: Go.\n", ""))
    result = compile_paths([task], CompileOptions(experiment=exp))
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("CE0104", 4),
                                                                   ("CE0204", 5)]


@pytest.mark.parametrize("exp_text, code", [
    ("- a list\n", "CE0004"),
    ("experiment_id: [unclosed\n", "CE0002"),
    (TASK_C, "CE0402"),
])
def test_an_unusable_experiment_hides_no_task_error(suite, exp_text, code):
    (suite / "exp.yaml").write_text(exp_text)
    res = ce(suite, "compile", "tasks/", "-e", "exp.yaml", "--format", "json")
    assert res.returncode == 1
    found = located(res)
    assert found[0][:2] == (code, "exp.yaml") and found[1:] == TASK_ERRORS


def test_a_missing_experiment_is_a_usage_error_that_hides_no_task_error(suite):
    res = ce(suite, "compile", "tasks/", "-e", "nope.yaml", "--format", "json")
    assert res.returncode == 2
    assert located(res)[1:] == TASK_ERRORS
    assert json.loads(res.stdout)["diagnostics"][0]["message"] == \
        "experiment file 'nope.yaml' not found"


def test_an_experiment_that_is_a_device_is_not_called_missing(suite):
    """`-e /dev/null` said "not found": it exists, but a device or FIFO is never read."""
    res = ce(suite, "compile", "tasks/", "-e", "/dev/null", "--format", "json")
    assert res.returncode == 2
    assert located(res)[1:] == TASK_ERRORS
    first = json.loads(res.stdout)["diagnostics"][0]
    assert (first["code"], first["message"]) == \
        ("CE0217", "experiment file '/dev/null' is a character device")


# -- -D ----------------------------------------------------------------------------------

def test_an_index_past_a_tasks_list_is_reported_per_task_naming_it(suite):
    res = ce(suite, "compile", "tasks/", "-D", "success_criteria.1.weight=2",
             "-D", "success_criteria.9.weight=2", "--format", "json")
    assert res.returncode == 1
    diags = json.loads(res.stdout)["diagnostics"]
    misfits = [(d["file"], d["col"], d["message"]) for d in diags if d["file"] == "<-D #1>"
               or d["file"] == "<-D #2>"]
    assert misfits == [
        ("<-D #1>", 18, "index 1 is out of range: `success_criteria` has 1 entry "
                        "(task 'b'; 1 of 3)"),
        ("<-D #2>", 18, "index 9 is out of range: `success_criteria` has 2 entries "
                        "(tasks 'a', 'c'; 2 of 3)"),
        ("<-D #2>", 18, "index 9 is out of range: `success_criteria` has 1 entry "
                        "(task 'b'; 1 of 3)"),
    ]
    assert located(res)[3:] == TASK_ERRORS


@pytest.mark.parametrize("arg, code, col, help_", [
    ("no_such_field=1", "CE0501", 1, None),
    ("run_limit.max_turns=3", "CE0501", 1, "did you mean `run_limits`?"),
    ("agent.modle=x", "CE0501", 7, "did you mean `model`?"),
    ("run_limits.max_turns=ten", "CE0103", 22, None),
    ("task_id.x=1", "CE0501", 9, None),
])
def test_a_bad_override_is_an_error_beside_every_tasks_own(suite, arg, code, col, help_):
    res = ce(suite, "compile", "tasks/", "-D", arg, "--format", "json")
    assert res.returncode == 1  # an error, not a usage error
    diags = json.loads(res.stdout)["diagnostics"]
    assert (diags[0]["code"], diags[0]["file"], diags[0]["line"], diags[0]["col"],
            diags[0].get("help")) == (code, "<-D #1>", 1, col, help_)
    assert located(res)[1:] == TASK_ERRORS
    assert json.loads(res.stdout)["summary"]["trials"] == 0


def test_a_malformed_override_stays_a_usage_error_and_hides_no_task_error(suite):
    res = ce(suite, "compile", "tasks/", "-D", "agent.model", "--format", "json")
    assert res.returncode == 2
    assert located(res) == [("CE0501", "<-D #1>", 1, 1), *TASK_ERRORS]


def test_an_override_that_does_not_fit_one_tasks_criterion(write):
    """`min_count` is a field of command_executed, not of file_exists: reported for the
    task it does not fit, which is then checked without the command line (its own error
    too); it applies to the task it fits."""
    a = write("a.yaml", TASK_A)
    c = write("c.yaml", TASK_C.replace("  - {type: file_exists, path: a.txt, description: "
                                       "exists}\n", "") + "  - {type: file_exists, path: "
                                                          "a.txt, description: exists}\n")
    result = compile_paths([a, c], CompileOptions(overrides=("success_criteria.0.min_count=3",
                                                             "agent.model=m")))
    found = [(d.code, os.path.basename(d.span.file), d.span.col, d.message)
             for d in result.diagnostics]
    assert found == [
        ("CE0203", "a.yaml", 8, "tag 'Smoke' is not lowercase kebab-case (optionally "
                                "`key:value`)"),
        ("CE0101", "a.yaml", 59, "unknown field `weigth` in `success_criteria[1]` "
                                 "(file_exists)"),
        ("CE0101", "<-D #1>", 20, "unknown field `min_count` in `success_criteria[0]` "
                                  "(file_exists) (task 'a'; 1 of 2)"),
    ]
    (trial,) = result.trials  # task c's: the command line fits it
    assert trial.plan.task_id == "c" and trial.plan.agent.model == "m"
    assert trial.plan.criteria[0].args["min_count"] == 3


@pytest.mark.parametrize("command", ["compile", "run", "rescore"])
def test_run_and_rescore_report_what_compile_does(suite, command):
    args = ["tasks/", "-e", "exp.yaml", "-D", "success_criteria.9.weight=2",
            "-D", "no_such_field=1"]
    expected = headers(ce(suite, "compile", *args).stderr)
    assert len(expected) == 8  # 2 in exp.yaml, 2 misfits and 1 unknown at -D, 3 tasks'
    if command == "run":
        res = ce(suite, "run", *args, "--no-cache")
        assert "nothing was run" in res.stderr and not (suite / "runs").exists()
    elif command == "rescore":
        (suite / "run" / "plans").mkdir(parents=True)  # compiled before the run is read
        res = ce(suite, "rescore", "run", *args)
    else:
        res = ce(suite, "compile", *args)
    assert res.returncode == (1 if command == "compile" else 2)
    assert headers(res.stderr) == expected


# -- criteria files ----------------------------------------------------------------------

USES_CRITERION = """\
task_id: t
description: calls a criterion its criteria file defines
initial_prompt: Go.
criteria_files: {files}
success_criteria:
  - {{type: used_tool, tool: Bash, description: user criterion}}
"""
USED_TOOL_CE = """\
criterion used_tool(tool: str "the tool") -> binary
  score = exists(trace.tool_calls, c -> c.tool == tool)
end
"""


@pytest.mark.parametrize("files, ce_text, reported", [
    ("[crit.ce]", USED_TOOL_CE, []),  # the control: the file defines it
    ("[crit.ce]", USED_TOOL_CE.replace("\nend\n", "\n"), ["CE0601"]),  # does not parse
    ("[nope.ce]", USED_TOOL_CE, ["CE0207"]),  # missing
    ("crit.ce", USED_TOOL_CE, ["CE0103"]),  # not a list
])
def test_a_broken_criteria_file_causes_no_unknown_type_error(write, files, ce_text,
                                                             reported):
    write("crit.ce", ce_text)
    result = compile_paths([write("t.yaml", USES_CRITERION.format(files=files))])
    assert [d.code for d in result.diagnostics] == reported
