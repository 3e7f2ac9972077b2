"""`ce run --min-pass-rate`: a CI gate on the share of trials that succeed, instead of
"every trial must succeed" (real agents fail some trials; a team gates on the rate)."""

import json
import os
import subprocess
import sys

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: t{i}
description: an agentless trial that {what}
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "if test -f veto.txt; then printf bad > out.txt; else printf {content} > out.txt; fi"
success_criteria:
  - type: file_contains
    path: out.txt
    includes: [good]
    description: the file says good
"""


def _tasks(root, good: int, bad: int) -> None:
    (root / "tasks").mkdir()
    for i in range(good + bad):
        ok = i < good
        (root / "tasks" / f"t{i}.yaml").write_text(TASK.format(
            i=i, what="passes" if ok else "fails", content="good" if ok else "bad"))


def ce(*args, cwd):
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CE_PLAIN": "1"})


def test_the_run_passes_at_the_minimum_and_fails_below_it(tmp_path):
    _tasks(tmp_path, good=3, bad=1)
    strict = ce("run", "tasks", "--run-dir", "strict", cwd=tmp_path)
    assert strict.returncode == 1  # without it: every trial must succeed
    assert "not passed: 1 of 4 trial(s) did not succeed" in strict.stdout

    at = ce("run", "tasks", "--run-dir", "at", "--min-pass-rate", "0.75", cwd=tmp_path)
    assert at.returncode == 0, at.stdout + at.stderr
    run = json.loads((tmp_path / "at" / "run.json").read_text())
    assert run["exit_code"] == 0 and run["min_pass_rate"] == 0.75
    assert run["args"]["min_pass_rate"] == 0.75
    report = (tmp_path / "at" / "report.md").read_text()
    assert "**PASSED**" in report and "at least 75.0% of each variant's trials" in report

    below = ce("run", "tasks", "--run-dir", "below", "--min-pass-rate", "0.8", cwd=tmp_path)
    assert below.returncode == 1
    assert "not passed: 3 of 4 trial(s) succeeded (75.0%), below --min-pass-rate 0.8" in \
        below.stdout
    run = json.loads((tmp_path / "below" / "run.json").read_text())
    assert run["exit_reasons"] == [
        "3 of 4 trial(s) succeeded (75.0%), below --min-pass-rate 0.8"]
    # the report made again from the run's files says the same
    again = ce("report", "below", "-f", "json", cwd=tmp_path)
    assert json.loads(again.stdout)["exit_reasons"] == run["exit_reasons"]


def test_each_variant_must_reach_it(tmp_path):
    _tasks(tmp_path, good=2, bad=0)
    (tmp_path / "exp.yaml").write_text(
        "experiment_id: ab\n"
        "variants:\n"
        "  - variant_id: fine\n"
        "  - variant_id: broken\n"
        "    template_sources:\n"
        "      - type: starter_files\n"
        "        files: [{path: veto.txt, content: x}]\n")
    run = ce("run", "tasks", "-e", "exp.yaml", "--run-dir", "ab", "--min-pass-rate", "0.5",
             cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    doc = json.loads((tmp_path / "ab" / "run.json").read_text())
    assert doc["exit_reasons"] == [
        "variant broken: 0 of 2 trial(s) succeeded (0.0%), below --min-pass-rate 0.5"]


def test_a_rate_outside_0_to_1_is_a_usage_error(tmp_path):
    _tasks(tmp_path, good=1, bad=0)
    bad = ce("run", "tasks", "--min-pass-rate", "80", cwd=tmp_path)
    assert bad.returncode == 2 and "--min-pass-rate" in bad.stderr
    assert not (tmp_path / "runs").exists()


def test_a_nan_rate_is_a_usage_error_not_a_gate_that_always_passes(tmp_path):
    # NaN passed click's 0..1 range (every comparison with it is false), and a run of
    # failing trials then exited 0: `rate < nan` never holds
    _tasks(tmp_path, good=0, bad=1)
    for rate in ("nan", "NaN", "-nan"):
        bad = ce("run", "tasks", "--min-pass-rate", rate, cwd=tmp_path)
        assert bad.returncode == 2, bad.stdout + bad.stderr
        assert "--min-pass-rate" in bad.stderr and "not a number" in bad.stderr
        assert "Traceback" not in bad.stderr
    assert not (tmp_path / "runs").exists()


def test_a_resume_and_a_rescore_keep_the_gate(tmp_path):
    _tasks(tmp_path, good=3, bad=1)
    assert ce("run", "tasks", "--run-dir", "r", "--min-pass-rate", "0.8",
              cwd=tmp_path).returncode == 1
    os.remove(tmp_path / "r" / "default" / "t0" / "00" / "task.json")
    kept = ce("run", "--resume", "r", cwd=tmp_path)
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert json.loads((tmp_path / "r" / "run.json").read_text())["args"]["min_pass_rate"] == 0.8
    rescored = ce("rescore", "r", "--out", "rs", cwd=tmp_path)
    assert rescored.returncode == 1
    assert json.loads((tmp_path / "rs" / "run.json").read_text())["exit_reasons"] == [
        "3 of 4 trial(s) succeeded (75.0%), below --min-pass-rate 0.8"]

    os.remove(tmp_path / "r" / "default" / "t0" / "00" / "task.json")
    lowered = ce("run", "--resume", "r", "--min-pass-rate", "0.7", cwd=tmp_path)
    assert lowered.returncode == 0, lowered.stdout + lowered.stderr
    assert json.loads((tmp_path / "r" / "run.json").read_text())["args"]["min_pass_rate"] == 0.7
    assert ce("rescore", "r", "--out", "rs2", cwd=tmp_path).returncode == 0


def test_a_resume_refuses_settings_it_would_drop(tmp_path):
    _tasks(tmp_path, good=1, bad=0)
    assert ce("run", "tasks", "--run-dir", "r", cwd=tmp_path).returncode == 0
    res = ce("run", "--resume", "r", "tasks", "--model", "x", cwd=tmp_path)
    assert res.returncode == 2
    assert "PATHS, --model would change them" in res.stderr
