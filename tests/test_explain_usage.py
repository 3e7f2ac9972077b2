"""`ce explain`'s usage errors teach: the trial and the criterion given as words after
TASK (`ce explain RUN TRIAL CRITERION`) say the options to type; a trial directory that
does not exist names the trials that do; `--criterion` given twice shows both criteria
(it kept the last one only, silently)."""

from __future__ import annotations

import json

import pytest

from tests.test_explain_cli import TASK, TASKS, ce, explain


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run of one scripted trial, default/fine/00 (c0 passes, c1 and c2 fail)."""
    root = tmp_path_factory.mktemp("explain-usage")
    (root / "fine.yaml").write_text(TASK.format(task_id="fine", **TASKS["fine"]))
    made = ce("run", "fine.yaml", "--run-dir", "run", cwd=root)
    assert made.returncode == 1, made.stdout + made.stderr
    return root


def _error(res) -> str:
    """The `Error: ...` line of a usage error, joined if click wrapped it."""
    return " ".join(res.stderr.split("Error: ", 1)[1].split())


@pytest.mark.parametrize("args, then", [
    (["run", "default/fine/00", "c1"],
     "ce explain run --trial default/fine/00 --criterion c1"),
    (["run/default/fine/00", "c1"], "ce explain run/default/fine/00 --criterion c1"),
    (["run", "default/fine", "file_contains"],
     "ce explain run --trial default/fine --criterion file_contains"),
    (["fine.yaml", "2", "--trial", "default"],
     "ce explain fine.yaml --criterion 2 --trial default"),
])
def test_a_trial_and_a_criterion_given_as_words_say_the_options_to_type(run, args, then):
    """Click said `Got unexpected extra arguments (default/fine/00 c1)`: what to type was
    left to --help."""
    res = explain(*args, cwd=run)
    assert res.returncode == 2 and res.stdout == "", res.stdout
    said = _error(res)
    assert "TASK is the only argument; the trial and the criterion are options" in said, said
    assert said.endswith(then), said
    # the command it says runs
    fixed = explain(*then.split()[2:], cwd=run)
    assert fixed.returncode in (0, 1), fixed.stderr
    assert "c0 " not in fixed.stdout and ("c1 " in fixed.stdout or "c2 " in fixed.stdout)


def test_two_tasks_are_explained_one_at_a_time(run):
    res = explain("run/default/fine/00", "fine.yaml", cwd=run)
    assert res.returncode == 2
    assert "ce explain takes one TASK (a task file, a trial directory, a run or a " \
           "directory of runs), got 2: run/default/fine/00 fine.yaml; explain one at a " \
           "time" in _error(res), res.stderr


def test_a_trial_directory_that_does_not_exist_names_the_trials_there(run):
    """`RUN/default/fine/01` when only 00 exists: click said `Path ... does not exist`."""
    res = explain("run/default/fine/01", cwd=run)
    assert res.returncode == 2 and res.stdout == ""
    assert _error(res) == "Invalid value for TASK: run/default/fine/01 does not exist; " \
        "did you mean `run/default/fine/00`? (run/default/fine holds 1 trial: " \
        "run/default/fine/00)", res.stderr
    typo = explain("run/default/fien/00", cwd=run)
    assert "did you mean `run/default/fine/00`? (run/default holds 1 trial: " \
        "run/default/fine/00)" in _error(typo), typo.stderr
    task = explain("fine.yml", cwd=run)
    assert task.returncode == 2
    assert _error(task) == "Invalid value for TASK: fine.yml does not exist; did you mean " \
        "`fine.yaml`?", task.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("args", [["run/default/fine/00"], ["fine.yaml"],
                                  ["fine.yaml", "--workspace", "run/default/fine/00"]])
def test_criterion_twice_shows_both(run, fmt, args):
    """The second --criterion replaced the first without a word; it shows both, in the
    plan's order, as a type naming several criteria does."""
    if "--workspace" in args:  # a workspace of the task's files, as the agent left them
        ws = run / "ws"
        ws.mkdir(exist_ok=True)
        (ws / "a.txt").write_text("hi\n")
        args = ["fine.yaml", "--workspace", ws]
    res = explain(*args, "--criterion", "c2", "--criterion", "c0", "-f", fmt, cwd=run)
    assert res.returncode in (0, 1), res.stderr
    if fmt == "json":
        assert [c["id"] for c in json.loads(res.stdout)["criteria"]] == ["c0", "c2"]
    else:
        shown = [line.split()[0] for line in res.stdout.splitlines()
                 if line[:1] == "c" and line.split()[0][1:].isdigit()]
        assert shown == ["c0", "c2"], res.stdout
    wrong = explain(*args, "--criterion", "c0", "--criterion", "c9", cwd=run)
    assert wrong.returncode == 2 and "no criterion 'c9'" in wrong.stderr
