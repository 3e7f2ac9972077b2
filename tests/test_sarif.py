"""SARIF 2.1.0 export of failed criteria (ce_runtime/report/sarif.py, `ce run --sarif`):
the essentials a SARIF consumer (GitHub code scanning) needs: version and schema, the
tool driver's name and rules, and results with ruleId, ruleIndex, level, message and a
location in the task file, on the criterion's line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ce_runtime.report.sarif import render_sarif

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: sarif-demo
description: two criteria fail, one passes
agent: {type: none}
sandbox: {driver: tempdir, python: null}
pre_run:
  - command: echo hello > hello.txt
success_criteria:
  - type: file_exists
    path: hello.txt
    description: hello.txt exists
  - type: run_command
    command: grep -q goodbye hello.txt
    description: says goodbye
  - type: file_exists
    path: missing.txt
    description: a file nobody wrote
    weight: 0
"""

LEVELS = {"none", "note", "warning", "error"}


def check_essentials(doc: dict) -> list[dict]:
    assert doc["version"] == "2.1.0"
    assert doc["$schema"].endswith("sarif-2.1.0.json")
    [run] = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "ce" and isinstance(driver["version"], str)
    rule_ids = [r["id"] for r in driver["rules"]]
    assert len(rule_ids) == len(set(rule_ids))
    for r in run["results"]:
        assert r["ruleId"] == rule_ids[r["ruleIndex"]]
        assert r["level"] in LEVELS
        assert isinstance(r["message"]["text"], str) and r["message"]["text"]
        [loc] = r["locations"]
        phys = loc["physicalLocation"]
        assert phys["artifactLocation"]["uri"] and "\\" not in phys["artifactLocation"]["uri"]
        assert isinstance(phys["region"]["startLine"], int) and phys["region"]["startLine"] >= 1
    return run["results"]


@pytest.mark.slow
def test_ce_run_sarif_points_at_the_failed_criteria(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "demo.yaml").write_text(TASK)
    res = subprocess.run([*CE, "run", "tasks", "--sarif", "out/ce.sarif", "--junit-xml",
                          "out/junit.xml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1, res.stderr  # one gating criterion fails
    assert "SARIF: out/ce.sarif (1 result(s))" in res.stderr
    results = check_essentials(json.loads((tmp_path / "out" / "ce.sarif").read_text()))
    # the failing gating criterion (c1) only: the weight-0 one failing is not a failure
    [r] = results
    assert (r["ruleId"], r["level"]) == ("ce/run_command", "error")
    # with what the grader found (evidence.json), so the alert says why
    assert r["message"]["text"] == ("default/sarif-demo/00: criterion c1 run_command "
                                    "(says goodbye) scored 0.00 < 0.90: $ grep -q goodbye "
                                    "hello.txt: exit 1")
    phys = r["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"]["uri"] == "tasks/demo.yaml"
    lines = TASK.splitlines()
    assert lines[phys["region"]["startLine"] - 1] == "  - type: run_command"
    assert (tmp_path / "out" / "junit.xml").is_file()
    # `ce report -f sarif` makes the same file from the run directory, at any time later
    again = subprocess.run([*CE, "report", "runs/latest", "-f", "sarif", "-o", "again.sarif"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.sarif").read_bytes() == \
        (tmp_path / "out" / "ce.sarif").read_bytes()


def test_a_report_made_in_another_directory_points_at_the_task_file_ran(tmp_path):
    """The trial records its task file as `ce run` was given it (`tasks/demo.yaml`,
    relative to where it ran): `ce report -f sarif` run from another directory pointed
    at a `tasks/demo.yaml` there (none: line 1), not at the file the run graded."""
    (tmp_path / "proj" / "tasks").mkdir(parents=True)
    (tmp_path / "proj" / "tasks" / "demo.yaml").write_text(TASK)
    (tmp_path / "elsewhere" / "sub").mkdir(parents=True)
    res = subprocess.run([*CE, "run", "tasks", "-q", "--run-dir", "../elsewhere/run"],
                         cwd=tmp_path / "proj", capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    line = TASK.splitlines().index("  - type: run_command") + 1
    for cwd, uri in ((tmp_path / "elsewhere", (tmp_path / "proj/tasks/demo.yaml").as_uri()),
                     (tmp_path, "proj/tasks/demo.yaml")):
        again = subprocess.run([*CE, "report", str(tmp_path / "elsewhere" / "run"), "-f",
                                "sarif"], cwd=cwd, capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0, again.stderr
        [r] = check_essentials(json.loads(again.stdout))
        phys = r["locations"][0]["physicalLocation"]
        assert (phys["artifactLocation"]["uri"], phys["region"]["startLine"]) == (uri, line)


def test_render_sarif_trial_errors_and_run_limits(tmp_path):
    base = {"variant_id": "v", "task_file": str(tmp_path / "t.yaml"), "weighted_score": None}
    records = [
        {**base, "trial_id": "v/ok/00", "task_id": "ok", "status": "SUCCESS", "criteria": []},
        {**base, "trial_id": "v/skip/00", "task_id": "skip", "status": "NOT_GRADED",
         "criteria": []},
        {**base, "trial_id": "v/err/00", "task_id": "err", "status": "ERROR",
         "error": "sandbox lost", "criteria": []},
        {**base, "trial_id": "v/crash/00", "task_id": "crash", "status": "ERROR",
         "agent_outcome": {"reason": "error", "detail": "the model API went away"},
         "criteria": []},
        {**base, "trial_id": "v/slow/00", "task_id": "slow", "status": "TIMEOUT",
         "agent_outcome": {"reason": "timeout", "detail": "task_timeout 600s"},
         "criteria": []},
        {**base, "trial_id": "v/adv/00", "task_id": "adv", "status": "SUCCESS", "criteria": [
            {"id": "c3", "type": "llm_judge", "score": 0.0, "pass_threshold": 0.7,
             "passed": False, "gating": False, "error": "judge unreachable"}]},
    ]
    doc = json.loads(render_sarif(records, "0.1.0", base=str(tmp_path)))
    results = check_essentials(doc)
    got = [(r["ruleId"], r["level"], r["properties"]["trial_id"]) for r in results]
    assert got == [("ce/trial-error", "error", "v/err/00"),
                   ("ce/trial-error", "error", "v/crash/00"),
                   ("ce/trial-status", "warning", "v/slow/00"),
                   ("ce/llm_judge", "warning", "v/adv/00")]
    assert results[0]["message"]["text"] == "v/err/00: ERROR: sandbox lost"
    # the agent's own error, as report.md and JUnit say it (it said only `ERROR`)
    assert results[1]["message"]["text"] == \
        "v/crash/00: ERROR: the agent ended in an error: the model API went away"
    assert results[2]["message"]["text"] == "v/slow/00: TIMEOUT (task_timeout 600s)"
    # the task file is gone: the location is still the file, line 1
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in results} == {"t.yaml"}
    assert {r["locations"][0]["physicalLocation"]["region"]["startLine"]
            for r in results} == {1}
    assert len({json.dumps(r["partialFingerprints"]) for r in results}) == 4


def test_a_failed_suite_gate_is_a_result_on_its_criterion(tmp_path):
    # every row passes its own threshold, the gate over the rows does not: `ce run`
    # exits 1, and the SARIF had nothing to show for it
    (tmp_path / "ds.yaml").write_text(TASK.replace("task_id: sarif-demo", "task_id: ds"))
    crit = {"id": "c1", "type": "file_contains", "pass_threshold": 0.5, "gating": True,
            "weight": 1.0, "suite_thresholds": {"mean": 0.9}, "description": "row text"}
    records = [{"trial_id": f"v/ds/{row}/00", "variant_id": "v", "task_id": f"ds/{row}",
                "suite_id": "ds", "row_id": row, "status": "SUCCESS", "weighted_score": score,
                "task_file": str(tmp_path / "ds.yaml"),
                "criteria": [{**crit, "score": score, "passed": True}]}
               for row, score in (("a", 1.0), ("b", 0.6))]
    doc = json.loads(render_sarif(records, "0.1.0", base=str(tmp_path)))
    [r] = check_essentials(doc)
    assert (r["ruleId"], r["level"]) == ("ce/suite-gate", "error")
    assert r["message"]["text"] == "suite gate v/ds/c1 failed: mean 0.800 < 0.9"
    assert r["locations"][0]["physicalLocation"]["region"]["startLine"] == 11  # c1's entry
    assert r["properties"]["suite_id"] == "ds" and "trial_id" not in r["properties"]


def test_render_sarif_empty_run_is_valid():
    doc = json.loads(render_sarif([], "0.1.0"))
    assert check_essentials(doc) == []
    assert doc["runs"][0]["tool"]["driver"]["rules"] == []


def test_task_file_outside_base_is_a_file_uri(tmp_path):
    rec = {"trial_id": "v/t/00", "variant_id": "v", "task_id": "t", "status": "ERROR",
           "task_file": "/elsewhere/t.yaml", "criteria": []}
    doc = json.loads(render_sarif([rec], "0.1.0", base=str(tmp_path)))
    [r] = check_essentials(doc)
    uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "file:///elsewhere/t.yaml"


def test_a_task_path_with_a_space_or_hash_is_a_valid_uri_reference(tmp_path):
    """SARIF's `uri` is a URI reference: a space is not allowed in one and `#` starts a
    fragment, so `my tasks/t#1.yaml` must be percent-encoded or a consumer reads another
    file (`my tasks/t`)."""
    import urllib.parse

    rec = {"trial_id": "v/t/00", "variant_id": "v", "task_id": "t", "status": "ERROR",
           "task_file": str(tmp_path / "my tasks" / "t#1%.yaml"), "criteria": []}
    doc = json.loads(render_sarif([rec], "0.1.0", base=str(tmp_path)))
    [r] = check_essentials(doc)
    uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "my%20tasks/t%231%25.yaml"
    assert urllib.parse.unquote(uri) == "my tasks/t#1%.yaml"


# `ce run`, with the SARIF writer observed: at the moment it writes the SARIF, is the run
# directory's lock still held? (a second open file description's flock says so, even in
# the same process)
OBSERVED_RUN = """
import fcntl, os, sys
import ce_runtime.store.atomic as atomic
from ce_runtime.cli import main
real = atomic.write_bytes_atomic
def observed(path, data, *a, **k):
    if path.endswith(".sarif"):
        fd = os.open(os.path.join(sys.argv[-1], "run.lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            state = "free"
        except BlockingIOError:
            state = "held"
        os.close(fd)
        with open("lock-at-sarif", "w") as fh:
            fh.write(state)
    return real(path, data, *a, **k)
atomic.write_bytes_atomic = observed
sys.argv = ["ce", "run", "tasks", "--sarif", "ce.sarif", "--run-dir", sys.argv[-1]]
main()
"""


@pytest.mark.slow
def test_the_sarif_is_written_while_the_run_holds_its_lock(tmp_path):
    """Written after the lock was released, a `--resume` started in between could rewrite
    the run while its SARIF was read from it."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "demo.yaml").write_text(TASK)
    res = subprocess.run([sys.executable, "-c", OBSERVED_RUN, "-q", "r"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    assert "SARIF: ce.sarif (1 result(s))" in res.stderr
    assert (tmp_path / "lock-at-sarif").read_text() == "held"
