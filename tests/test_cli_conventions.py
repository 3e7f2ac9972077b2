"""One CLI convention (issue 15): results on stdout, progress and diagnostics on stderr;
`--format` where there is more than one output form; `-q` quiet; `-D` takes the paths
diagnostics print; trial ids by unique prefix; unknown ids and criteria are errors with
a did-you-mean; report.md's failures name a `ce explain` command and a suite gate shows
its rows' own descriptions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CE = [sys.executable, "-m", "ce_runtime.cli"]


def ce(*args, cwd=None, env=None):
    full = {**os.environ, "CE_PLAIN": "1", **(env or {})}
    return subprocess.run([*CE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full, timeout=600)


# ---------------------------------------------------------------------------- report.md


def test_report_md_failures_point_to_explain_and_rows_keep_descriptions():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_report import crit, record

    from ce_runtime import report as R

    recs = [record("v", "suite", row=f"r{i}", status="FAILURE" if i == 2 else "SUCCESS",
                   criteria=[crit("c0", "file_exists", 0.0 if i == 2 else 1.0,
                                  description=f"row r{i} wrote out{i}.txt",
                                  suite_thresholds={"pass_rate": 0.5})])
            for i in (1, 2)]
    gates = R.suite_metrics(recs)
    text = R.render_markdown(R.summary(recs, gates, "r", None), recs, gates)
    failures = text.split("## Failures")[1].split("## Suite gates")[0]
    assert "`ce explain RUN/v/suite/r2/00`" in failures
    gate_row = next(line for line in text.splitlines() if line.startswith("| `v` | `suite`"))
    assert "row r1 wrote out1.txt" in gate_row and "row r2 wrote out2.txt" in gate_row


# ---------------------------------------------------------------------------- a run

TASK = """task_id: {id}
description: a {id} task
initial_prompt: Write hello.txt.
reference:
  solve:
    - {{write: {file}, content: hi}}
success_criteria:
  - {{type: file_exists, path: hello.txt, description: hello.txt exists}}
  - {{type: file_contains, path: hello.txt, includes: [hi], description: it says hi}}
"""


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Two tasks run by the oracle: `good` passes, `bad` writes the wrong file."""
    root = tmp_path_factory.mktemp("conv")
    (root / "tasks").mkdir()
    (root / "tasks" / "good.yaml").write_text(TASK.format(id="good", file="hello.txt"))
    (root / "tasks" / "bad.yaml").write_text(TASK.format(id="bad", file="other.txt"))
    res = ce("run", "tasks", "--agent", "oracle", cwd=root)
    assert res.returncode == 1, res.stderr
    return root, res


def test_run_results_on_stdout_progress_on_stderr(suite):
    _, res = suite
    assert "trial group" in res.stdout and "default/good" in res.stdout
    assert "2/2 trial(s): 1 SUCCESS, 1 FAILURE" in res.stdout  # the reports' order
    assert "trial group" not in res.stderr and "[1/2]" in res.stderr
    assert "[1/2]" not in res.stdout


def test_run_quiet_prints_no_progress(suite, tmp_path):
    root, _ = suite
    res = ce("run", root / "tasks" / "good.yaml", "--agent", "oracle", "-q",
             "--sarif", tmp_path / "ce.sarif", cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == ""  # not even "SARIF: ce.sarif (0 ...)"
    assert "1/1 trial(s): 1 SUCCESS" in res.stdout and (tmp_path / "ce.sarif").is_file()


def test_rescore_results_on_stdout_and_quiet(suite, tmp_path):
    root, _ = suite
    res = ce("rescore", "runs/latest", "--out", tmp_path / "a", cwd=root)
    assert res.returncode == 1, res.stderr
    assert "default/good/00" in res.stdout and "2 trial(s) re-scored, 0 changed" in res.stdout
    assert "re-scored" not in res.stderr
    quiet = ce("rescore", "runs/latest", "-q", "--out", tmp_path / "b", cwd=root)
    # exit 1 says why, as `ce run` does (a CI log showed the summary line alone)
    assert quiet.returncode == 1 and quiet.stdout.splitlines() == [
        f"2 trial(s) re-scored, 0 changed; results: {tmp_path / 'b'}",
        "not passed: 1 of 2 trial(s) did not succeed"]


# ---------------------------------------------------------------------------- run dirs


def test_run_dir_is_the_run_directory(suite, tmp_path):
    root, _ = suite
    good = root / "tasks" / "good.yaml"
    res = ce("run", good, "--agent", "oracle", "-q", "--run-dir", "out/mine", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    meta = json.loads((tmp_path / "out" / "mine" / "run.json").read_text())
    assert meta["run_id"] == "mine" and not (tmp_path / "out" / "latest").exists()
    again = ce("run", good, "--agent", "oracle", "--run-dir", "out/mine", cwd=tmp_path)
    assert again.returncode == 2 and "ce run --resume out/mine" in again.stderr
    # --runs-root: a new timestamped run and a latest link
    res = ce("run", good, "--agent", "oracle", "-q", "--runs-root", "many", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "many" / "latest" / "run.json").is_file()
    # the old meaning: a --run-dir that is a directory of runs is still one, with a note
    old = ce("run", good, "--agent", "oracle", "-q", "--run-dir", "many", cwd=tmp_path)
    assert old.returncode == 0 and "is a directory of runs" in old.stderr
    assert len([p for p in (tmp_path / "many").iterdir() if not p.is_symlink()]) == 2


def test_run_id_survives_a_resume_through_latest(suite, tmp_path):
    root, _ = suite
    good = root / "tasks" / "good.yaml"
    assert ce("run", good, "--agent", "oracle", "-q", cwd=tmp_path).returncode == 0
    real = os.path.basename(os.path.realpath(tmp_path / "runs" / "latest"))
    res = ce("run", "--resume", "runs/latest", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "runs" / "latest" / "run.json").read_text())["run_id"] == real
    # a directory of runs: its latest
    res = ce("run", "--resume", "runs", "-q", cwd=tmp_path)
    assert res.returncode == 0 and f"using the latest, {tmp_path / 'runs' / real}" in res.stderr


def test_commands_take_a_directory_of_runs(suite, tmp_path):
    root, _ = suite
    res = ce("rescore", "runs", "-q", "--out", tmp_path / "r", cwd=root)
    assert "ce rescore: runs is a directory of runs; using the latest" in res.stderr
    exp = ce("explain", "runs", "--trial", "default/go", cwd=root)
    assert exp.returncode == 0, exp.stderr
    assert "ce explain: runs is a directory of runs; using the latest" in exp.stderr
    assert exp.stdout.startswith("trial default/good/00")
    for cmd in (("report", "runs"), ("compare", "runs", "runs")):
        assert ce(*cmd, cwd=root).returncode in (0, 1)


# ---------------------------------------------------------------------------- explain


def test_explain_format_json_and_the_hidden_json_alias(suite):
    root, _ = suite
    trial = "runs/latest/default/bad/00"
    a = ce("explain", trial, "--format", "json", cwd=root)
    b = ce("explain", trial, "--json", cwd=root)
    assert a.returncode == b.returncode == 1
    assert json.loads(a.stdout) == json.loads(b.stdout)
    text = ce("explain", trial, "-f", "text", cwd=root)
    assert text.stdout.startswith("trial default/bad/00")
    assert "--json" not in ce("explain", "--help").stdout


def test_trial_prefixes_and_unknown_ids(suite):
    root, _ = suite
    ok = ce("explain", "runs/latest", "--trial", "default/b", cwd=root)
    assert ok.stdout.startswith("trial default/bad/00"), ok.stderr
    ambiguous = ce("explain", "runs/latest", "--trial", "default/", cwd=root)
    assert ambiguous.returncode == 2 and "is the prefix of 2 trials" in ambiguous.stderr
    unknown = ce("explain", "runs/latest", "--trial", "default/goood/00", cwd=root)
    assert unknown.returncode == 2
    assert "no trial 'default/goood/00'; did you mean `default/good/00`?" in unknown.stderr
    none = ce("explain", "runs/latest", cwd=root)
    assert none.returncode == 2 and "name one with --trial" in none.stderr
    # a task file's trials too
    task = ce("explain", "tasks/good.yaml", "--trial", "def", cwd=root)
    assert task.returncode == 0 and "c0" in task.stdout
    bad = ce("explain", "tasks/good.yaml", "--trial", "other", cwd=root)
    assert bad.returncode == 2 and "no trial 'other'" in bad.stderr
    res = ce("rescore", "runs/latest", "--trial", "default/g", "--out", root / "one", cwd=root)
    assert res.returncode == 0 and "1 trial(s) re-scored" in res.stdout


def test_unknown_criterion_is_an_error(suite):
    root, _ = suite
    for target in ("runs/latest/default/bad/00", "tasks/good.yaml"):
        res = ce("explain", target, "--criterion", "c9", cwd=root)
        assert res.returncode == 2, res.stderr
        assert "no criterion 'c9'" in res.stderr and "c0 (file_exists)" in res.stderr
        typo = ce("explain", target, "--criterion", "file_exist", cwd=root)
        assert "did you mean `file_exists`?" in typo.stderr
    one = ce("explain", "runs/latest/default/bad/00", "--criterion", "c1", cwd=root)
    assert one.returncode == 1 and "c1" in one.stdout


# ---------------------------------------------------------------------------- -D paths


def test_d_accepts_the_paths_diagnostics_print(suite):
    root, _ = suite
    good = root / "tasks" / "good.yaml"
    bad = ce("compile", good, "-D", "success_criteria[1].weight=-1")
    assert bad.returncode == 1  # a bad value: an error, not a usage error
    printed = "`success_criteria[1].weight` must be >= 0"
    assert printed in bad.stderr  # the path as diagnostics print it ...
    ok = ce("compile", good, "-D", "success_criteria[1].weight=2", "--emit", root / "emit")
    assert ok.returncode == 0, ok.stderr  # ... is the path -D takes
    plans = list((root / "emit" / "plans").glob("*.json"))
    plan = json.loads(plans[0].read_text())["plan"]
    assert plan["criteria"][1]["weight"] == 2
    same = ce("compile", good, "-D", "success_criteria.1.weight=2")
    assert same.returncode == 0
    malformed = ce("compile", good, "-D", "success_criteria[1.weight=2")
    assert malformed.returncode == 2 and "an index is written `[N]`" in malformed.stderr


# ---------------------------------------------------------------------------- --agent


def test_compile_takes_agent_as_run_does(tmp_path):
    """`ce run X --agent oracle` and `ce compile X --agent oracle` check the same thing
    (`--type` is the other name, on both): an oracle with nothing to apply is CE0220."""
    task = tmp_path / "t.yaml"
    task.write_text("task_id: t\ndescription: x\ninitial_prompt: x\n"
                    "success_criteria:\n  - type: file_exists\n    path: a.txt\n"
                    "    description: x\n")
    for flag in ("--agent", "--type"):
        proc = ce("compile", task, flag, "oracle", "--no-cache", cwd=tmp_path)
        assert proc.returncode == 1, (flag, proc.stderr)
        assert "CE0220" in proc.stderr, (flag, proc.stderr)
    assert ce("compile", task, "--agent", "none", "--no-cache", cwd=tmp_path).returncode == 1


def test_resume_help_says_which_trials_run_again():
    """A resume also runs a trial whose files are damaged or whose plan changed
    (docs/run-directory.md), not only the trials without a task.json."""
    text = " ".join(ce("run", "--help").stdout.split())
    assert "only trials without a task.json are run" not in text
    assert "missing or damaged" in text and "changed plan" in text


def test_a_misspelt_command_gets_a_did_you_mean():
    """The top-level group loads its commands lazily; click's suggestion needs their
    names, so `ce compil` said only "No such command" while `ce criteria lst` suggested."""
    res = ce("explian")
    assert res.returncode == 2
    assert "No such command 'explian'. Did you mean 'explain'?" in res.stderr
    assert "'compile'" in ce("compil").stderr
    assert "Did you mean" not in ce("zzz").stderr
