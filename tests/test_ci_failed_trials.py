"""What a CI log and its reports say of the trials that did not succeed: one real `ce
run` (a pass, a FAILURE, an agent that crashed after writing a file and so was graded,
a TIMEOUT; 4 repeats each: 12 trials that did not succeed) with --junit-xml and
--sarif, through the CLI.

- stdout names each trial that did not succeed with its status, run limit and failed
  criteria, the first 10 and how many more (it named the ERROR trials only);
- the SARIF of an ERROR trial with failed criteria has its `ce/trial-error` result
  beside theirs (it had the criteria's only), and the run's invocation succeeded;
- each JUnit testcase names its task file (`file`, relative to the current directory as
  the SARIF's URIs are: GitLab links the test to it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

CE = [sys.executable, "-m", "ce_runtime.cli"]

NONE_TASK = """\
task_id: {task_id}
description: pre_run writes value.txt
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "echo {value} > value.txt"
success_criteria:
  - {{type: run_command, command: grep -qx 1 value.txt, description: value.txt holds 1}}
"""
SCRIPT_TASK = """\
task_id: {task_id}
description: a scripted agent writes a.txt, then {how}
initial_prompt: write a.txt
agent:
  type: script
  script:
    - {{write: a.txt, content: "hi\\n"}}
    - {last}
run_limits: {{task_timeout: 1}}
sandbox: {{driver: tempdir, python: null}}
success_criteria:
  - {{type: file_exists, path: a.txt, description: wrote a.txt}}
  - {{type: file_contains, path: a.txt, includes: [bye], description: says bye}}
"""
TASKS = {
    "a_passes": NONE_TASK.format(task_id="a_passes", value=1),
    "b_fails": NONE_TASK.format(task_id="b_fails", value=2),
    "c_crashed": SCRIPT_TASK.format(task_id="c_crashed", how="crashes",
                                    last="{fail: the model API went away}"),
    "d_slow": SCRIPT_TASK.format(task_id="d_slow", how="outlives its timeout",
                                 last="{sleep: 30}"),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("failed-trials")
    (root / "suite").mkdir()
    for name, text in TASKS.items():
        (root / "suite" / f"{name}.yaml").write_text(text)
    res = subprocess.run([*CE, "run", "suite", "--repeats", "4", "-j", "2", "--run-dir",
                          "run", "--junit-xml", "out/junit.xml", "--sarif", "out/ce.sarif"],
                         cwd=root, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    records = {}
    for path in (root / "run").glob("default/*/*/task.json"):
        rec = json.loads(path.read_text())
        records[rec["trial_id"]] = rec
    statuses = {t.split("/")[1]: r["status"] for t, r in records.items()}
    assert statuses == {"a_passes": "SUCCESS", "b_fails": "FAILURE", "c_crashed": "ERROR",
                        "d_slow": "TIMEOUT"}, statuses
    return SimpleNamespace(root=root, res=res, records=records)


@pytest.mark.slow
def test_stdout_names_the_trials_that_did_not_succeed(run):
    lines = run.res.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("not passed: "))
    assert lines[start] == "not passed: 12 of 16 trial(s) did not succeed"
    listed = lines[start + 1:start + 12]
    # the run's order, each with what failed; the first 10, then how many more
    assert listed[:10] == [
        *(f"FAILURE default/b_fails/{i:02d}: failed c0 run_command" for i in range(4)),
        *(f"ERROR default/c_crashed/{i:02d}: failed c1 file_contains" for i in range(4)),
        "TIMEOUT default/d_slow/00: task_timeout (1s); failed c1 file_contains",
        "TIMEOUT default/d_slow/01: task_timeout (1s); failed c1 file_contains"], listed
    assert listed[10] == ("... and 2 more trial(s) that did not succeed: see "
                          "run/report.md")
    # why the ERROR trials errored follows, as before
    assert lines[start + 12] == ("ERROR in 4 trial(s) (default/c_crashed/00, ...): the agent "
                                 "ended in an error: the model API went away")
    # -q: the results and why it failed, not the list
    quiet = subprocess.run([*CE, "run", "suite/b_fails.yaml", "-q", "--run-dir", "quiet"],
                           cwd=run.root, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 1 and "not passed: 1 of 1 trial(s) did not succeed" in \
        quiet.stdout and "FAILURE default/b_fails/00" not in quiet.stdout, quiet.stdout


@pytest.mark.slow
def test_an_error_trial_with_failed_criteria_has_its_error_result(run):
    doc = json.loads((run.root / "out" / "ce.sarif").read_text())
    [sarif_run] = doc["runs"]
    crashed = [(r["ruleId"], r["message"]["text"]) for r in sarif_run["results"]
               if r["properties"]["trial_id"] == "default/c_crashed/00"]
    assert crashed == [
        ("ce/file_contains", "default/c_crashed/00: criterion c1 file_contains (says bye) "
                             "scored 0.00 < 0.90: a.txt: 1 line; includes 0/1: 'bye' not found"),
        ("ce/trial-error", "default/c_crashed/00: ERROR: the agent ended in an error: the "
                           "model API went away")]
    assert sarif_run["invocations"] == [{"executionSuccessful": True}]  # every trial ran
    # `ce report -f sarif` writes the same file from the run directory
    again = subprocess.run([*CE, "report", "run", "-f", "sarif"], cwd=run.root,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout == (run.root / "out" / "ce.sarif").read_text()


@pytest.mark.slow
def test_each_junit_testcase_names_its_task_file(run):
    root = ET.parse(run.root / "out" / "junit.xml").getroot()
    files = {c.get("name"): c.get("file") for c in root.iter("testcase")}
    assert files == {t: f"suite/{t.split('/')[1]}.yaml" for t in run.records}
    # made from elsewhere, the file ran (not one of that name there): relative to the
    # current directory when under it, else absolute (as the SARIF's URIs are)
    (run.root / "suite" / "more").mkdir(exist_ok=True)
    for cwd, want in ((run.root / "suite", "{}.yaml"),
                      (run.root / "suite" / "more", str(run.root / "suite" / "{}.yaml"))):
        again = subprocess.run([*CE, "report", run.root / "run", "-f", "junit"], cwd=cwd,
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        files = {c.get("file") for c in ET.fromstring(again.stdout).iter("testcase")}
        assert files == {want.format(t) for t in TASKS}


@pytest.mark.slow
def test_rescore_names_the_trials_that_did_not_succeed_as_ce_run_does(run):
    """`ce rescore RUN` said 'not passed: 12 of 16 trial(s) did not succeed' and why the
    ERROR trials errored, not which trials did not succeed: the same list as `ce run`'s
    now follows its `not passed:` lines (its results' report.md for the rest); -q: not."""
    res = subprocess.run([*CE, "rescore", "run", "--out", "rescored"], cwd=run.root,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    start = lines.index("not passed: 12 of 16 trial(s) did not succeed")
    ran = run.res.stdout.splitlines()
    listed = ran[ran.index("not passed: 12 of 16 trial(s) did not succeed") + 1:][:12]
    assert lines[start + 1:start + 13] == [
        x.replace("see run/report.md", "see rescored/report.md") for x in listed]
    assert lines[start + 11] == ("... and 2 more trial(s) that did not succeed: see "
                                 "rescored/report.md")
    assert lines[start + 12].startswith("ERROR in 4 trial(s) (default/c_crashed/00, ...)")
    quiet = subprocess.run([*CE, "rescore", "run", "--out", "rescored-q", "-q"],
                           cwd=run.root, capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 1
    assert "not passed: 12 of 16 trial(s) did not succeed" in quiet.stdout
    assert "FAILURE default/b_fails/00" not in quiet.stdout, quiet.stdout
    assert "ERROR in 4 trial(s) (default/c_crashed/00, ...)" in quiet.stdout
