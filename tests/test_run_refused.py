"""`ce run --junit-xml F --sarif S` that refuses its input (exit 2) writes F and S saying
so (ce_runtime/cli/run_refused.py): an earlier run's F and S stayed, and Jenkins, GitLab
and code scanning reported the previous build's results as this one's. F is one testcase
in error with why and the task files' errors at file:line:col (as pytest writes a
collection error); S is `ce compile --format sarif`'s diagnostics with an invocation
saying why. Real `ce run`s, each refused before any trial (a second or so each)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: demo
description: one criterion, its type misspelt
agent: {type: none}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - type: file_exits
    path: a.txt
    description: a.txt exists
"""
EARLIER_JUNIT = ('<testsuites name="ce" tests="1"><testsuite name="default"><testcase '
                 'classname="demo" name="default/demo/00"/></testsuite></testsuites>\n')
EARLIER_SARIF = '{"version": "2.1.0", "runs": [{"results": []}]}\n'


def ce(*args, cwd):
    return subprocess.run([*CE, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def earlier_run(tmp_path):
    """The files an earlier build left (a kept workspace, the step twice in a job)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "junit.xml").write_text(EARLIER_JUNIT)
    (tmp_path / "out" / "ce.sarif").write_text(EARLIER_SARIF)


def refusal(junit) -> ET.Element:
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("errors"), root.get("failures")) == ("1", "1", "0")
    [case] = root.iter("testcase")
    assert (case.get("classname"), case.get("name")) == ("run", "ce accepted its input")
    return case


def test_task_file_errors_replace_the_earlier_files(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "demo.yaml").write_text(TASK)
    earlier_run(tmp_path)
    res = ce("run", "tasks", "--junit-xml", "out/junit.xml", "--sarif", "out/ce.sarif",
             cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "ce run: 1 error(s) in the task files; nothing was run" in res.stderr
    assert "JUnit XML: out/junit.xml (the refusal: nothing was run)" in res.stderr
    assert "SARIF: out/ce.sarif (the refusal: nothing was run)" in res.stderr
    case = refusal(tmp_path / "out" / "junit.xml")
    assert case.get("file") == "tasks/demo.yaml"
    [error] = case
    assert (error.tag, error.get("type")) == ("error", "REFUSED")
    message = "ce run refused its input: 1 error(s) in the task files; nothing was run"
    assert error.get("message") == message
    # the text (all GitLab shows): why, then each error at its file:line:col
    assert error.text.splitlines() == [
        message, "tasks/demo.yaml:6:11: error[CE0108]: unknown criterion type `file_exits`"]
    # the SARIF is `ce compile --format sarif`'s, plus the run's invocation
    doc = json.loads((tmp_path / "out" / "ce.sarif").read_text())
    [invocation] = doc["runs"][0].pop("invocations")
    compiled = ce("compile", "tasks", "--format", "sarif", cwd=tmp_path)
    assert compiled.returncode == 1 and json.loads(compiled.stdout) == doc
    [result] = doc["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]
    assert (region["artifactLocation"]["uri"], region["region"]["startLine"]) == \
        ("tasks/demo.yaml", 6)
    # the check of the task files ran to its end, and these are its results (GitHub code
    # scanning processes no SARIF whose execution was not successful)
    assert invocation == {"executionSuccessful": True, "toolExecutionNotifications": [
        {"level": "note", "message": {"text": message},
         "descriptor": {"id": "ce/run-refused"}}]}


def test_a_bad_option_value_replaces_them_too(tmp_path):
    """Refused by click while the options are parsed: the raw arguments still name the
    files. -q: no line says they were written (the refusal itself is said)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "demo.yaml").write_text(TASK.replace("file_exits", "file_exists"))
    earlier_run(tmp_path)
    res = ce("run", "tasks", "--sarif", "out/ce.sarif", "--min-pass-rate", "2", "-q",
             "--junit-xml", "out/junit.xml", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "(the refusal" not in res.stderr and "--min-pass-rate" in res.stderr
    case = refusal(tmp_path / "out" / "junit.xml")
    assert case.get("file") is None  # no task file is to blame
    why = case.find("error").get("message")
    assert why.startswith("ce run refused its input: Invalid value for '--min-pass-rate'")
    run = json.loads((tmp_path / "out" / "ce.sarif").read_text())["runs"][0]
    # no results, and not a successful execution: code scanning closes no alert for it
    assert run["results"] == []
    assert run["invocations"][0]["executionSuccessful"] is False
    assert run["invocations"][0]["toolExecutionNotifications"][0] == {
        "level": "error", "message": {"text": why}, "descriptor": {"id": "ce/run-refused"}}
    # a refusal once the options are read (a pre-flight check: no such agent) as well
    (tmp_path / "out" / "junit.xml").write_text(EARLIER_JUNIT)
    res = ce("run", "tasks", "--junit-xml", "out/junit.xml", "--agent", "orcale", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "no agent named 'orcale'; did you mean `oracle`?" in \
        refusal(tmp_path / "out" / "junit.xml").find("error").get("message")


def test_a_path_the_pre_flight_refuses_is_not_written(tmp_path):
    """--junit-xml into another run's archive is itself the refusal: nothing is written
    there (it would replace part of that run)."""
    (tmp_path / "t.yaml").write_text(TASK.replace("file_exits", "file_exists"))
    assert ce("run", "t.yaml", "--run-dir", "old", "-q", cwd=tmp_path).returncode == 1
    plans = sorted(p.name for p in (tmp_path / "old" / "plans").iterdir())
    target = tmp_path / "old" / "default" / "demo" / "00" / "task.json"
    before = target.read_bytes()
    res = ce("run", "t.yaml", "--junit-xml", target, "--sarif", "s.sarif", cwd=tmp_path)
    assert res.returncode == 2 and "part of the run archived in" in res.stderr, res.stderr
    assert target.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "old" / "plans").iterdir()) == plans
    assert json.loads((tmp_path / "s.sarif").read_text())["runs"][0]["invocations"][0][
        "executionSuccessful"] is False


def test_nothing_is_written_in_the_run_directory_a_refused_run_did_not_make(tmp_path):
    """--junit-xml in the new --run-dir: written there, the refusal would leave the
    directory not empty, and the next `ce run --run-dir` (the input fixed) refused too."""
    (tmp_path / "t.yaml").write_text(TASK)
    args = ("run", "t.yaml", "--run-dir", "r", "--junit-xml", "r/junit.xml", "-q")
    res = ce(*args, cwd=tmp_path)
    assert res.returncode == 2 and not (tmp_path / "r").exists(), res.stderr
    (tmp_path / "t.yaml").write_text(TASK.replace("file_exits", "file_exists"))
    res = ce(*args, cwd=tmp_path)
    assert res.returncode == 1, res.stderr  # it ran (a.txt is never written)
    assert ET.parse(tmp_path / "r" / "junit.xml").getroot().get("failures") == "1"
