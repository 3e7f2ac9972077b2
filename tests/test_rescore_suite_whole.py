"""`ce rescore` compares a dataset suite's gate with the run's only when it re-graded every
trial of the suite, through the real CLI on a small offline classification task (the
oracle writes each row's label; one row is the only `bug`, one ends in an ERROR).

A trial the re-score could not grade (its directory deleted, its task.json damaged, or
no task of it in TASKS) was left out of the suite's metrics and the gate compared
anyway: `* suite gate default/triage/c0: passed -> failed (recall.bug 1.000 -> 0.000)`,
a flip the re-grade did not cause (recall.bug of a suite without its one `bug` row is
0). Such a gate is now said not compared, with the trials left out and why; a suite
re-graded whole is compared as before, an ERROR trial of it included.
"""

from __future__ import annotations

import json
import os
import shutil

from tests.test_rescore_guards import ce

TRIAGE = """\
task_id: triage
description: label each issue; one row is the only bug, one ends in an error
dataset:
  rows:
    - {id: crash, label: bug, code: 0}
    - {id: dark-mode, label: feature, code: 0}
    - {id: how-export, label: question, code: 0}
    - {id: slow, label: question, code: 3}
initial_prompt: "Write the issue's label to label.txt"
agent: {type: script, script: [{say: the oracle answers instead}]}
sandbox: {driver: tempdir, python: null}
reference:
  solve: "printf ${row.label} > label.txt; exit ${row.code}"
success_criteria:
  - type: classification_match
    path: label.txt
    expected_label: "${row.label}"
    allowed_labels: [bug, feature, question]
    description: the issue is labelled correctly
    suite_thresholds: {recall.bug: 1.0}
"""
NOT_COMPARED = ("  suite gate default/triage/c0: not compared: not every trial of its suite "
                "was re-scored ({})")
SUMMARY = "; 1 suite gate(s) not compared (not every trial of their suite re-scored);"
# the results' own run.json has the gate failed over the rows re-graded (recall.bug of a
# suite without its `bug` row is 0): not a verdict, said not evaluated instead
NOT_EVALUATED = ("not passed: suite gate default/triage/c0 not evaluated (not compared, "
                 "above): not every trial of its suite was re-scored ({})")


def _run(tmp_path, *tasks: str) -> None:
    """A run of TRIAGE (and a copy named `other` when asked): each gate passed, the
    `slow` row an ERROR (the oracle's command exited 3 after writing its label)."""
    (tmp_path / "triage.yaml").write_text(TRIAGE)
    (tmp_path / "other.yaml").write_text(TRIAGE.replace("task_id: triage", "task_id: other"))
    run = ce("run", *tasks, "--agent", "oracle", "-q", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr  # the ERROR trial
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [(g["suite_id"], g["passed"]) for g in doc["suite_gates"]] == \
        [(t.removesuffix(".yaml"), True) for t in tasks]
    assert doc["by_status"]["ERROR"] == len(tasks), doc["by_status"]


def _gate_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line[2:].startswith("suite gate")]


def _not_passed(stdout: str, about: str = "") -> list[str]:
    return [line for line in stdout.splitlines()
            if line.startswith(f"not passed: {about}")]


def test_a_missing_trial_leaves_its_suite_gate_uncompared(tmp_path):
    _run(tmp_path, "triage.yaml", "other.yaml")
    whole = ce("rescore", "run", "--out", "whole", cwd=tmp_path)
    # the ERROR trial is re-graded as any other: its suite is whole, its gate unchanged
    assert whole.returncode == 1 and _gate_lines(whole.stdout) == [], whole.stdout
    assert "not compared" not in whole.stdout + whole.stderr
    assert "not evaluated" not in whole.stdout

    shutil.rmtree(tmp_path / "run" / "default" / "triage" / "crash" / "00")
    res = ce("rescore", "run", "--out", "out", cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr  # a trial of the run is missing
    assert _gate_lines(res.stdout) == [
        NOT_COMPARED.format("missing from the run: default/triage/crash/00")], res.stdout
    assert "changed verdict" not in res.stdout
    assert ("8 trial(s) re-scored" not in res.stdout and "7 trial(s) re-scored, 0 changed; "
            "1 trial(s) missing from the run" + SUMMARY) in res.stdout, res.stdout
    assert "not re-scored: default/triage/crash/00" in res.stderr, res.stderr
    assert _not_passed(res.stdout, "suite gate") == [
        NOT_EVALUATED.format("missing from the run")], res.stdout
    failed = json.loads((tmp_path / "out" / "run.json").read_text())["exit_reasons"]
    assert any(r.startswith("suite gate default/triage/c0 failed:") for r in failed), failed

    # TASKS that move the other suite's gate: that flip is the re-grade's, and said;
    # the suite with a trial missing is still not compared
    (tmp_path / "tasks").mkdir()
    shutil.copy(tmp_path / "triage.yaml", tmp_path / "tasks" / "triage.yaml")
    (tmp_path / "tasks" / "other.yaml").write_text(
        (tmp_path / "other.yaml").read_text().replace("{id: crash, label: bug",
                                                      "{id: crash, label: feature"))
    moved = ce("rescore", "run", "tasks", "-q", "--out", "moved", cwd=tmp_path)
    flip, *rest = _gate_lines(moved.stdout)
    assert flip.startswith("* suite gate default/other/c0: passed -> failed (accuracy 1.000 "
                           "-> 0.750, "), moved.stdout
    assert "recall.bug 1.000 -> 0.000" in flip and "recall.feature 1.000 -> 0.500" in flip
    assert rest == [NOT_COMPARED.format("missing from the run: default/triage/crash/00")]
    assert "; 1 suite gate(s) changed verdict" + SUMMARY in moved.stdout, moved.stdout
    assert moved.returncode == 1
    # the gate compared fails as the re-grade says; the other, not compared, is not
    # evaluated
    compared, not_evaluated = _not_passed(moved.stdout, "suite gate")
    assert compared.startswith("not passed: suite gate default/other/c0 failed: "), compared
    assert not_evaluated == NOT_EVALUATED.format("missing from the run"), moved.stdout

    # which trials are missing unknown (no trials.parquet to name them): no suite is
    # known whole, none compared
    os.remove(tmp_path / "run" / "trials.parquet")
    blind = ce("rescore", "run", "-q", "--out", "blind", cwd=tmp_path)
    unknown = "1 trial(s) missing from the run, which ones unknown: trials.parquet cannot " \
        "be read"
    assert _gate_lines(blind.stdout) == [
        NOT_COMPARED.format(unknown),
        NOT_COMPARED.replace("triage", "other").format(unknown)], blind.stdout
    assert "; 2 suite gate(s) not compared" in blind.stdout and blind.returncode == 1
    assert _not_passed(blind.stdout, "suite gate") == [
        NOT_EVALUATED.format("missing from the run")], blind.stdout


def test_a_damaged_trial_leaves_its_suite_gate_uncompared(tmp_path):
    _run(tmp_path, "triage.yaml")
    (tmp_path / "run" / "default" / "triage" / "crash" / "00" / "task.json").write_text("{cut")
    said = NOT_COMPARED.format("damaged archive: default/triage/crash/00")
    outputs = []
    for jobs in ("1", "2"):  # each grading process says the trial it could not grade
        res = ce("rescore", "run", "-j", jobs, "--out", f"out{jobs}", cwd=tmp_path)
        assert res.returncode == 1, res.stdout + res.stderr
        assert _gate_lines(res.stdout) == [said], res.stdout
        assert "; 1 trial(s) not re-scored (damaged archive)" + SUMMARY in res.stdout
        assert "! default/triage/crash/00" in res.stderr, res.stderr
        assert _not_passed(res.stdout, "suite gate") == [
            NOT_EVALUATED.format("damaged archive")], res.stdout
        outputs.append(res.stdout.replace(f"out{jobs}", "OUT"))
    assert outputs[0] == outputs[1]


def test_a_row_tasks_no_longer_have_leaves_its_suite_gate_uncompared(tmp_path):
    """Rows removed from TASKS' dataset: the suite was compared on the rows left, without
    a word (its gate was silently dropped); it is said not compared, naming the trials
    with no task in TASKS."""
    _run(tmp_path, "triage.yaml")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "triage.yaml").write_text(
        TRIAGE.replace("    - {id: crash, label: bug, code: 0}\n", ""))
    res = ce("rescore", "run", "tasks", "-q", "--out", "out", cwd=tmp_path)
    assert _gate_lines(res.stdout) == [
        NOT_COMPARED.format("no task in TASKS: default/triage/crash/00")], res.stdout
    assert "; 1 trial(s) have no task in TASKS" + SUMMARY in res.stdout, res.stdout
    # the gate, failed over the rows left, was the exit's only other reason: still 1
    assert res.returncode == 1 and _not_passed(res.stdout) == [
        "not passed: 1 of 3 trial(s) did not succeed",
        NOT_EVALUATED.format("no task in TASKS")], res.stdout
