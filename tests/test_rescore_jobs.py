"""`ce rescore -j N`: the trials graded by forked processes, with the output, files and
failures of -j 1 (ce_runtime/cli/rescore_pool.py)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from ce_runtime.cli import rescore_pool
from ce_runtime.store.archive import record_digest

CE = [sys.executable, "-m", "ce_runtime.cli"]
TASK = """\
task_id: files
description: a scripted agent leaves files and a trace for re-scoring
initial_prompt: write the files
agent:
  type: script
  script:
    - {write: report.json, content: '{"status": "ok", "items": [1, 2, 3]}'}
    - {write: notes.md, content: "# Notes\\n"}
    - {run: "ls"}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, description: the report exists, path: report.json}
  - {type: file_contains, description: notes, path: notes.md, includes: ["# Notes"]}
  - {type: json_check, description: status, path: report.json, assertions: [
       {expression: status, operator: equals, expected: ok}]}
  - {type: command_executed, description: listed, command_pattern: "^ls"}
"""


def clone(run: str, dest: str, n: int) -> list[str]:
    """A run directory of `n` trials copied from `run`'s first (each signed as ce signs
    it, as bench/rescore.py clones): a big archive without `n` real trials."""
    os.makedirs(dest)
    for part in ("plans", "objects", "definitions"):
        if os.path.isdir(os.path.join(run, part)):
            shutil.copytree(os.path.join(run, part), os.path.join(dest, part))
    shutil.copy2(os.path.join(run, "run.json"), dest)
    src = os.path.join(run, "default", "files", "00")
    with open(os.path.join(src, "task.json"), encoding="utf-8") as fh:
        record = json.load(fh)
    rels = []
    for i in range(n):
        rel = f"default/files/{i:03d}"
        d = os.path.join(dest, rel)
        os.makedirs(d)
        for name in ("trace.msgpack", "workspace.json", "evidence.json"):
            shutil.copy2(os.path.join(src, name), os.path.join(d, name))
        copy = {**record, "trial_id": rel, "repeat": i}
        with open(os.path.join(d, "task.json"), "w", encoding="utf-8") as fh:
            json.dump({**copy, "record_sha256": record_digest(copy)}, fh, indent=1)
        rels.append(rel)
    return rels


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    src = tmp_path_factory.mktemp("run")
    (src / "files.yaml").write_text(TASK)
    proc = subprocess.run([*CE, "run", "files.yaml"], cwd=src, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = os.path.realpath(src / "runs" / "latest")
    big = str(src / "big")
    clone(run, big, 40)
    return src, big


def rescore(*args, cwd):
    return subprocess.run([*CE, "rescore", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def tree(root: str) -> dict[str, bytes]:
    out = {}
    for here, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(here, name)
            out[os.path.relpath(path, root)] = open(path, "rb").read()  # noqa: SIM115
    return out


def test_any_jobs_prints_and_writes_what_one_process_does(archive, tmp_path):
    _src, big = archive
    copy = tmp_path / "big"
    shutil.copytree(big, copy)
    with open(copy / "default" / "files" / "007" / "workspace.json", "ab") as fh:
        fh.write(b" ")  # damaged: listed, the others re-scored
    # a changed criterion: every trial moves, and says which criterion changed
    (tmp_path / "files.yaml").write_text(TASK.replace("includes: [\"# Notes\"]",
                                                      "includes: [\"# Nothing\"]"))
    results = {}
    for jobs in ("1", "3", "64"):
        out = tmp_path / f"j{jobs}"
        out.mkdir()
        proc = rescore(str(copy), "files.yaml", "--out", str(out / "res"), "-j", jobs,
                       cwd=tmp_path)
        results[jobs] = proc, tree(str(out / "res"))
    one, files = results["1"]
    assert one.returncode == 1
    assert one.stdout.count("* default/files/") == 39 and "c1 file_contains" in one.stdout
    assert "! default/files/007" in one.stderr
    lines = one.stdout.splitlines()
    summary = lines.index(next(x for x in lines if x.startswith("39 trial(s) re-scored")))
    assert lines[summary].startswith(
        "39 trial(s) re-scored, 39 changed; 1 trial(s) not re-scored (damaged archive)")
    # why it is no pass, the re-score not being the whole run first
    assert lines[summary + 1] == ("not passed: 1 trial(s) of the run are damaged, not "
                                  "re-scored: 39 of 40 planned trial(s) re-scored")
    assert lines[summary + 2] == "not passed: 39 of 39 trial(s) did not succeed"
    # then which, as `ce run` says them: the first 10, and how many more
    assert lines[summary + 3:] == [
        *(f"FAILURE default/files/{i:03d}: failed c1 file_contains" for i in range(11)
          if i != 7),
        f"... and 29 more trial(s) that did not succeed: see {tmp_path}/j1/res/report.md"]
    for jobs in ("3", "64"):
        proc, more = results[jobs]
        assert proc.returncode == one.returncode
        assert proc.stdout.replace(f"j{jobs}/res", "j1/res") == one.stdout
        assert proc.stderr == one.stderr
        assert sorted(more) == sorted(files)
        differ = [name for name in files if files[name] != more[name]]
        assert differ == [], differ


def test_forked_graders_stop_with_a_ctrl_c_and_leave_nothing(archive, tmp_path):
    src, _big = archive
    copy = str(tmp_path / "many")
    clone(_first_run(src), copy, 400)  # enough to be interrupted while grading
    out = tmp_path / "out"
    proc = subprocess.Popen([*CE, "rescore", copy, "--out", str(out), "-j", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    first = proc.stdout.readline()  # grading has started
    assert b"default/files/" in first
    os.killpg(proc.pid, signal.SIGINT)  # a Ctrl-C: the whole process group
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert not out.exists() and [n for n in os.listdir(tmp_path)
                                 if n.startswith(".out")] == [], err
    deadline = time.monotonic() + 10
    while True:  # every process of the group is gone: graders and their writers
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a process of the rescore outlived it"
        time.sleep(0.05)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_sigterm_stops_a_rescore_as_a_ctrl_c_does_and_leaves_nothing(archive, tmp_path,
                                                                        jobs):
    """`kill PID` (SIGTERM, to ce alone, as a CI runner or `timeout` sends it) stops the
    re-score as Ctrl-C does: exit 1, said, and no results directory (neither the staged
    `.NAME.partial-PID` nor the reserved RUN/rescored/<time>). It killed the process:
    both were left behind."""
    src, _big = archive
    copy = tmp_path / "many"
    clone(_first_run(src), str(copy), 400)
    proc = subprocess.Popen([*CE, "rescore", str(copy), "-j", jobs],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    first = proc.stdout.readline()  # grading has started
    assert b"default/files/" in first
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert b"SIGTERM received" in err and b"Traceback" not in err, err
    rescored = copy / "rescored"
    assert not rescored.exists() or os.listdir(rescored) == [], os.listdir(rescored)
    deadline = time.monotonic() + 10
    while True:  # the graders and their writers are gone too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "a process of the rescore outlived it"
        time.sleep(0.05)


def _first_run(src) -> str:
    return os.path.realpath(src / "runs" / "latest")


# The pool's own cases run in a fresh interpreter: a pytest-xdist worker has threads
# (execnet's), and forking a threaded process is what ce refuses to do (rescore_pool.usable;
# Python 3.12+ warns of the deadlocks it may cause).
CASES = ("outcomes_come_in_order_and_each_child_finishes",
         "a_killed_grader_fails_the_pool_and_its_siblings_are_stopped",
         "a_graders_error_is_raised_as_it_was_and_it_aborts")


@pytest.mark.parametrize("case", CASES)
def test_pool(case, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import pathlib, sys, threading; from tests import test_rescore_jobs as t; "
            "assert threading.active_count() == 1; "
            f"t.case_{case}(pathlib.Path(sys.argv[1]))")
    proc = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code,
                           str(tmp_path)], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _grade_slowly_at_odd(i: int, item: str) -> tuple[int, str, int]:
    if i % 2:
        time.sleep(0.02)
    return i, item, os.getpid()


def case_outcomes_come_in_order_and_each_child_finishes(tmp_path):
    delivered = []
    items = [f"t{i}" for i in range(23)]
    ends = rescore_pool.run(items, 3, _grade_slowly_at_odd, lambda: os.getpid(),
                            lambda: None, delivered.append)
    assert [d[:2] for d in delivered] == list(enumerate(items))
    pids = {d[2] for d in delivered}
    assert len(pids) == 3 and os.getpid() not in pids and sorted(ends) == sorted(pids)
    for pid in pids:  # reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def case_a_killed_grader_fails_the_pool_and_its_siblings_are_stopped(tmp_path):
    started = tmp_path / "pids"
    started.mkdir()

    def grade(i, item):
        (started / str(os.getpid())).touch()
        if i == 4:  # once its sibling is grading too (a busy machine starts it late)
            deadline = time.monotonic() + 30
            while len(os.listdir(started)) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.05 if i % 2 else 0)  # the other child still busy
        return item

    with pytest.raises(rescore_pool.PoolFailed, match=r"killed by SIGKILL"):
        rescore_pool.run(list(range(400)), 2, grade, lambda: None, lambda: None,
                         lambda outcome: None)
    pids = [int(p) for p in os.listdir(started)]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def case_a_graders_error_is_raised_as_it_was_and_it_aborts(tmp_path):
    aborted = tmp_path / "aborted"

    def grade(i, item):
        if i == 5:
            raise OSError(28, "No space left on device", str(tmp_path / "x" / "task.json"))
        return item

    def abort():
        aborted.write_text(str(os.getpid()))

    with pytest.raises(OSError) as caught:
        rescore_pool.run(list(range(10)), 2, grade, lambda: None, abort, lambda o: None)
    assert caught.value.errno == 28 and caught.value.filename.endswith("task.json")
    assert aborted.read_text() != str(os.getpid())  # the failing child aborted


def test_no_fork_with_a_thread_running_or_for_one_trial():
    assert rescore_pool.usable(None, 10_000) == 1  # the default
    assert rescore_pool.usable(4, 3) == 3 and rescore_pool.usable(4, 1) == 1
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert rescore_pool.usable(4, 100) == 1
    finally:
        stop.set()
        thread.join()
    assert rescore_pool.usable(4, 100) == 4
