"""The task directory's integrity check (ce_runtime/execute/integrity.py) counts what the
agent could have changed there, not what ce writes: its own stdout/stderr redirected into
the task's folder, or another `ce run`'s run directory made there meanwhile. A QA pass
found trials of `ce run t.yaml -j 3 2> log.txt` (run from the task's folder) turned
ERROR ("$TASK_DIR/log.txt was changed"), and two concurrent runs marking each other's
trials ERROR."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ce_runtime.execute import integrity

TASK = """\
task_id: staggered
description: trials of different lengths, so that others write while one runs
initial_prompt: go
agent:
  type: script
  script:
    - run: "sleep 0.$(( {n} % 3 * 4 )); echo done > d.txt"
sandbox: {{python: null}}
success_criteria:
  - {{type: file_exists, path: d.txt, description: d exists}}
"""


def test_a_run_directory_made_in_the_task_directory_meanwhile_is_not_the_agents(tmp_path):
    task_dir = tmp_path / "task"
    (task_dir / "tests").mkdir(parents=True)
    (task_dir / "tests" / "test_hidden.py").write_text("def test(): pass\n")
    base = integrity.baseline(str(tmp_path / "ws"), (), str(task_dir))
    other = task_dir / "out" / "run"  # another `ce run --run-dir out/run`, started now
    (other / "plans").mkdir(parents=True)
    (other / "objects").mkdir()
    (other / "plans" / "p.json").write_text("{}")
    (other / "default" / "t" / "00").mkdir(parents=True)
    (other / "default" / "t" / "00" / "task.json").write_text("{}")
    assert integrity.check(base) == []
    (other / "run.lock").write_text("1")
    (task_dir / "stray.txt").write_text("x")  # but a file of its own is still seen
    assert integrity.check(base) == ["$TASK_DIR/stray.txt (the task directory) was added"]


def test_a_run_json_planted_beside_watched_files_hides_nothing(tmp_path):
    task_dir = tmp_path / "task"
    (task_dir / "tests").mkdir(parents=True)
    hidden = task_dir / "tests" / "test_hidden.py"
    hidden.write_text("def test(): pass\n")
    base = integrity.baseline(str(tmp_path / "ws"), (), str(task_dir))
    (task_dir / "tests" / "run.json").write_text("{}")
    hidden.write_text("def test(): assert True  # the agent's\n")
    assert integrity.check(base) == [
        "$TASK_DIR/tests/run.json (the task directory) was added",
        "$TASK_DIR/tests/test_hidden.py (the task directory) was changed"]


def test_ce_runs_own_log_in_the_task_directory_errs_no_trial(tmp_path):
    """`ce run t.yaml --repeats 6 -j 3 > log.txt 2>&1` from the task's folder: the log
    grows while trials run; none of them is ERROR for it."""
    (tmp_path / "t.yaml").write_text(TASK.format(n="$$"))
    with open(tmp_path / "log.txt", "wb") as log:
        res = subprocess.run(
            [sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml", "--repeats", "6",
             "-j", "3", "--run-dir", "run"], cwd=tmp_path, stdout=log, stderr=log,
            env={**os.environ, "CE_PLAIN": "1"}, timeout=300)
    said = (tmp_path / "log.txt").read_text()
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert "integrity" not in said, said
    assert res.returncode == 0 and run["passed"] == 6, said


def test_a_temp_directory_inside_the_task_directory_is_not_the_agents(tmp_path):
    """TMPDIR inside the task's folder (a CI job's, a test's): ce, Ray and other runs make
    and remove their scratch there while a trial runs; none of it is the agent's (CI
    found a resumed Ray trial ERROR: "$TASK_DIR/tmp/0sn4ulv1 (the task directory) was
    removed"). Two runs at once, each making and sweeping its scratch in that TMPDIR."""
    (tmp_path / "t.yaml").write_text(TASK.format(n="$$"))
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "CE_PLAIN": "1", "TMPDIR": str(tmp_path / "tmp")}
    runs = [subprocess.Popen(
        [sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml", "--repeats", "4", "-j", "2",
         "--run-dir", f"run{i}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True) for i in range(2)]
    for i, proc in enumerate(runs):
        said, _ = proc.communicate(timeout=300)
        run = json.loads((tmp_path / f"run{i}" / "run.json").read_text())
        assert "integrity" not in said, said
        assert proc.returncode == 0 and run["passed"] == 4, said
