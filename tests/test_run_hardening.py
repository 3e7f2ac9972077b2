"""`ce run` under hostile conditions, through the real CLI in subprocesses: SIGTERM and
SIGHUP end a run as Ctrl-C does, a run directory is locked while a run writes it (a dead
holder never blocks), a write failure names the path and exits 1, and a reader that stops
early (`ce ... | head -1`) ends ce quietly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest

from tests.test_run_e2e import (
    CE,
    REPEATS,
    SLOWISH,
    _resume_and_check,
    _start_and_stop,
    ce,
    check_interrupted_then_resumed,
    env_for,
    load_run_json,
    run_dir_in,
    task_jsons,
)

pytestmark = pytest.mark.slow


# -- SIGTERM / SIGHUP ----------------------------------------------------------------------
@pytest.mark.parametrize(("sig", "sigint_ignored"), [
    (signal.SIGTERM, False), (signal.SIGHUP, False),
    (signal.SIGTERM, True),  # a background job of a script: SIGINT is ignored there
], ids=["SIGTERM", "SIGHUP", "SIGTERM-in-a-background-job"])
def test_sigterm_and_sighup_stop_like_ctrl_c_and_resume_finishes(tmp_path, sig,
                                                                 sigint_ignored):
    # sent to ce alone, not its group
    proc, run_dir, err, out = _start_and_stop(tmp_path, sig, sigint_ignored)
    assert f"{signal.Signals(sig).name} received" in err
    assert "Traceback" not in err and "internal error" not in err, err
    check_interrupted_then_resumed(tmp_path, proc, run_dir, err, out)


# -- the run directory's lock --------------------------------------------------------------
def test_a_second_resume_while_the_run_writes_says_who_holds_it_and_changes_nothing(tmp_path):
    (tmp_path / "slowish.yaml").write_text(SLOWISH)
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [CE, "run", "slowish.yaml", "--repeats", str(REPEATS), "--runs-root", str(runs)],
        cwd=str(tmp_path), env=env_for(str(tmp_path)), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        run_dir = None
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = [d for d in runs.glob("*") if d.is_dir() and not d.is_symlink()]
            if dirs and list(dirs[0].glob("default/slowish/*/task.json")):
                run_dir = str(dirs[0])
                break
            time.sleep(0.02)
        assert run_dir is not None and proc.poll() is None, "the run ended too soon"
        holder = json.loads((runs / run_dir / "run.lock").read_text())
        assert holder["pid"] == proc.pid and holder["host"] == socket.gethostname()
        before = (tmp_path / run_dir / "run.json").read_bytes()
        lock_before = (tmp_path / run_dir / "run.lock").read_bytes()

        res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
        assert res.returncode == 1, res.stderr
        assert f"pid {proc.pid}" in res.stderr and socket.gethostname() in res.stderr
        assert holder["started_at"] in res.stderr
        assert "Traceback" not in res.stderr
        assert "trial(s)" not in res.stderr  # it stopped before planning anything
        assert (tmp_path / run_dir / "run.json").read_bytes() == before
        assert (tmp_path / run_dir / "run.lock").read_bytes() == lock_before

        os.kill(proc.pid, signal.SIGKILL)  # the holder dies holding the lock
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert os.path.exists(os.path.join(run_dir, "run.lock"))  # the file stays; the lock not
    done_before = task_jsons(run_dir)
    _resume_and_check(tmp_path, run_dir, done_before)  # a dead holder does not block
    mine = json.loads((tmp_path / run_dir / "run.lock").read_text())
    assert mine["pid"] != proc.pid


# -- write failures ------------------------------------------------------------------------
def test_a_run_dir_that_cannot_be_created_is_named_and_exits_2(tmp_path):
    # (tests may run as root, where a chmod'ed directory stays writable: a path under a
    # regular file cannot be created by anyone). Bad input, said once: nothing of the
    # run exists yet (it was exit 1 and a second line saying no run.json was marked)
    (tmp_path / "t.yaml").write_text(SLOWISH)
    (tmp_path / "a_file").write_text("not a directory")
    for option in ("--runs-root", "--run-dir"):
        res = ce("run", "t.yaml", option, "a_file/runs", cwd=str(tmp_path))
        assert res.returncode == 2, res.stderr
        assert f"Invalid value for {option}: cannot create a_file/runs: Not a directory" \
            in res.stderr, res.stderr
        assert "no run.json" not in res.stderr
        assert "Traceback" not in res.stderr and "internal error" not in res.stderr


def test_a_write_failure_in_a_run_dir_names_the_path_and_marks_run_json(tmp_path):
    (tmp_path / "t.yaml").write_text(SLOWISH)
    res = ce("run", "t.yaml", "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    # plans/ replaced by a file: every write under it fails (as for root as for anyone)
    plans = os.path.join(run_dir, "plans")
    for name in os.listdir(plans):
        os.unlink(os.path.join(plans, name))
    os.rmdir(plans)
    with open(plans, "w") as fh:
        fh.write("in the way")
    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr
    assert f"cannot write {plans}/" in res.stderr and "Not a directory" in res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    meta = load_run_json(run_dir)
    assert meta["status"] == "failed"
    assert plans in meta["error"]
    assert "marked failed" in res.stderr


@pytest.mark.parametrize("markable", [True, False])
def test_a_full_disk_says_so_and_how_to_go_on(tmp_path, capsys, markable):
    """A write() that fails with ENOSPC names no file: the run said only `operating
    system error: No space left on device`, and nothing of what to do when run.json could
    not be marked either (measured on a 2 MB tmpfs: stopped at trial 120 of 240; a resume
    once there was space finished the run)."""
    import errno

    from ce_runtime.cli.run import _write_failed

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({"status": "running"}))
    if not markable:  # run.json cannot be rewritten (on a full disk: its rewrite fails)
        (run_dir / "run.json").write_text("{")
    with pytest.raises(SystemExit) as stop:
        _write_failed(OSError(errno.ENOSPC, "No space left on device"), str(run_dir))
    err = capsys.readouterr().err
    assert stop.value.code == 1
    assert f"ce run: the disk holding {run_dir} is full (No space left on device)\n" in err
    assert f"finished trials are kept (`ce run --resume {run_dir}` once there is space)" \
        in err, err
    if markable:
        assert load_run_json(str(run_dir))["error"] == \
            f"the disk holding {run_dir} is full (No space left on device)"
    else:
        assert "could not be marked failed either" in err


# -- a reader that stops early -------------------------------------------------------------
LONG = ("task_id: long\ndescription: long\ninitial_prompt: go\nagent:\n  type: script\n"
        "  script:\n    - say: '" + "x" * 200_000 + "'\nsandbox: {python: null}\n"
        "success_criteria:\n  - type: file_exists\n    description: d\n    path: nothing\n")


def _piped_to_head(args: list[str], cwd: str) -> tuple[int, str]:
    ce_proc = subprocess.Popen([CE, *args], cwd=cwd, env=env_for(cwd), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = subprocess.Popen(["head", "-1"], stdin=ce_proc.stdout, stdout=subprocess.PIPE)
    ce_proc.stdout.close()  # head alone reads it: ce sees EPIPE once head exits
    first, _ = head.communicate(timeout=60)
    err = ce_proc.stderr.read().decode()
    ce_proc.stderr.close()
    assert first.strip(), "head printed nothing"
    return ce_proc.wait(timeout=60), err


def test_piping_to_head_ends_quietly(tmp_path):
    (tmp_path / "long.yaml").write_text(LONG)
    res = ce("run", "long.yaml", "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr  # unsolved, but run
    (record,) = task_jsons(run_dir_in(str(tmp_path / "runs"))).values()
    trace = os.path.join(run_dir_in(str(tmp_path / "runs")), "default", "long", "00",
                         "trace.msgpack")
    assert record["task_id"] == "long" and os.path.isfile(trace)
    for args in (["trace", "dump", trace], ["criteria", "list"]):
        for _ in range(4):
            code, err = _piped_to_head(args, str(tmp_path))
            assert code in (0, 1), (args, code, err)  # never 3 (an "internal error")
            assert "Traceback" not in err and "Error" not in err, (args, err)
            assert "internal error" not in err and "Exception ignored" not in err, err
    # more than a pipe's buffer of output: ce was cut off, and says nothing about it
    code, err = _piped_to_head(["trace", "dump", trace], str(tmp_path))
    assert code == 1 and err == ""


def test_a_reader_of_the_progress_that_leaves_does_not_stop_the_run(tmp_path):
    """`ce run ... 2>&1 | head -2`: the progress lines' reader is gone after the second
    line. The run goes on unheard and ends complete, its reports written (it died at
    the next progress line, its run.json left `running`); the summary on the closed
    stdout makes the exit 1, as any command cut off."""
    (tmp_path / "tasks").mkdir()
    for i in range(5):
        (tmp_path / "tasks" / f"t{i}.yaml").write_text(
            f"task_id: t{i}\ndescription: d\nagent: {{type: none}}\nsandbox: {{python: null}}\n"
            "pre_run:\n  - command: 'printf x > a'\nsuccess_criteria:\n"
            "  - {type: file_exists, path: a, description: d}\n")
    piped = subprocess.run(["sh", "-c", f'"{CE}" run tasks -j 2 --run-dir run 2>&1 | head -2'],
                           cwd=tmp_path, env=env_for(str(tmp_path)), capture_output=True,
                           text=True, timeout=300)
    assert len(piped.stdout.splitlines()) == 2, piped.stdout
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["status"] == "complete" and run["trials"] == 5, run
    assert (tmp_path / "run" / "report.html").is_file()


# -- a trial directory deleted while its trial runs ----------------------------------------
def test_a_trial_directory_deleted_mid_run_is_reported_and_the_others_finish(tmp_path):
    """The trial whose directory vanished is LOST (named, with the resume hint), nothing
    of it is written back, the others finish, run.json says incomplete with the lost
    trial, exit 1; `--resume` runs it again."""
    import shutil

    from tests.test_run_e2e import _task

    (tmp_path / "slow.yaml").write_text(_task(
        "slow", "    - write: done.txt\n      content: ok\n    - sleep: 2\n",
        criterion="  - type: file_exists\n    description: d\n    path: done.txt\n"))
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [CE, "run", "slow.yaml", "--repeats", "3", "--runs-root", str(runs)],
        cwd=str(tmp_path), env=env_for(str(tmp_path)), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        first = None
        while time.monotonic() < deadline and proc.poll() is None:
            found = list(runs.glob("2*/default/slow/00/trace.msgpack"))
            if found:
                first = found[0].parent
                break
            time.sleep(0.02)
        assert first is not None and proc.poll() is None, "the first trial never started"
        shutil.rmtree(first)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run_dir = run_dir_in(str(runs))
    assert proc.returncode == 1, err
    assert "LOST      default/slow/00" in err and "Traceback" not in err
    assert f"ce run: trial default/slow/00 lost: {first} was deleted" in err
    assert "ce run --resume" in err
    records = task_jsons(run_dir)
    assert sorted(records) == ["default/slow/01", "default/slow/02"]
    assert not (first / "task.json").exists()
    meta = load_run_json(run_dir)
    assert meta["status"] == "incomplete"
    assert [t["trial_id"] for t in meta["lost_trials"]] == ["default/slow/00"]

    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "2 already done" in res.stderr
    assert sorted(task_jsons(run_dir)) == ["default/slow/00", "default/slow/01",
                                           "default/slow/02"]
    assert load_run_json(run_dir)["status"] == "complete"
    assert "lost_trials" not in load_run_json(run_dir)


# -- a resume checks what it finds ---------------------------------------------------------
def test_resume_repairs_a_damaged_plan_and_reruns_a_changed_record(tmp_path):
    from ce_runtime.grade.rescore import load_plan_file
    from ce_runtime.store.archive import load_task_record
    from tests.test_run_e2e import _task

    (tmp_path / "quick.yaml").write_text(_task(
        "quick", "    - write: done.txt\n      content: ok\n",
        criterion="  - type: file_exists\n    description: d\n    path: done.txt\n"))
    res = ce("run", "quick.yaml", "--repeats", "3", "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    records = task_jsons(run_dir)
    [plan_hash] = {r["plan_hash"] for r in records.values()}
    plan_path = os.path.join(run_dir, "plans", f"{plan_hash}.json")
    with open(plan_path, "r+b") as fh:  # truncated, as a full disk would leave it
        fh.truncate(100)
    changed = os.path.join(run_dir, "default", "quick", "01", "task.json")
    with open(changed) as fh:
        record = json.load(fh)
    record["weighted_score"] = 0.5  # edited by hand
    os.unlink(changed)
    with open(changed, "w") as fh:
        json.dump(record, fh)

    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert f"ce run: damaged archive: {plan_path}: not valid JSON" in res.stderr
    assert "written again from the task file" in res.stderr
    assert f"ce run: damaged archive: {changed}: the record does not match its own " \
           "recorded digest (record_sha256): it was changed after the trial; the trial " \
           "runs again" in res.stderr
    assert "2 already done" in res.stderr
    assert load_plan_file(run_dir, plan_hash)  # checked against its name
    again = load_task_record(os.path.dirname(changed))  # signed again
    assert again["weighted_score"] == 1.0


def test_resume_says_which_finished_trials_run_again_because_their_task_changed(tmp_path):
    """A task edited between the interrupt and the resume: its finished trials run again
    under the new plan (their results replaced), and the resume says so, naming them."""
    from tests.test_run_e2e import _task

    task = tmp_path / "quick.yaml"
    task.write_text(_task("quick", "    - write: done.txt\n      content: ok\n",
                          criterion="  - type: file_exists\n    description: d\n"
                                    "    path: done.txt\n"))
    res = ce("run", "quick.yaml", "--repeats", "2", "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 0 and "2 already done" in res.stderr
    assert "another plan" not in res.stderr
    task.write_text(task.read_text().replace("description: d\n", "description: d2\n"))
    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert ("ce run: 2 finished trial(s) ran with another plan (the task, the experiment or "
            "ce's criteria changed since): default/quick/00, default/quick/01; they run "
            "again and their results are replaced") in res.stderr
    assert "0 already done" in res.stderr


# -- an agent's FIFO where the grader reads ------------------------------------------------
def test_a_fifo_the_agent_leaves_where_a_criterion_reads_is_an_error_not_a_hang(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes: grading (and with it the
    trial) would never end. The grader opens workspace files non-blocking and refuses
    anything but a regular file."""
    from tests.test_run_e2e import _task

    (tmp_path / "fifo.yaml").write_text(_task(
        "fifo", "    - run: mkfifo out.txt\n",
        criterion="  - type: file_contains\n    description: d\n    path: out.txt\n"
                  "    includes: [x]\n"))
    res = ce("run", "fifo.yaml", "--runs-root", "runs", cwd=str(tmp_path), timeout=120)
    assert res.returncode == 1, res.stderr
    [record] = task_jsons(run_dir_in(str(tmp_path / "runs"))).values()
    [criterion] = record["criteria"]
    assert record["status"] == "FAILURE"
    assert "cannot read out.txt" in criterion["error"] and "FIFO" in criterion["error"], \
        criterion


# -- what the token budgets count ----------------------------------------------------------
@pytest.mark.parametrize(("flags", "status"), [
    ("", "SUCCESS"),  # 5,000 cache-read tokens do not count by default
    ("count_cached_input: true", "TOKEN_BUDGET_EXCEEDED"),
    ("count_cache_creation: true", "SUCCESS"),  # no cache writes here
])
def test_cached_tokens_count_toward_the_budget_only_when_the_task_says_so(tmp_path, flags,
                                                                          status):
    from tests.test_run_e2e import _task

    limits = "{max_input_tokens: 1000" + (f", {flags}" if flags else "") + "}"
    (tmp_path / "cached.yaml").write_text(_task(
        "cached", "    - usage: {input_tokens: 100, cache_read_tokens: 5000}\n"
                  "    - write: done.txt\n      content: ok\n", limits,
        criterion="  - type: file_exists\n    description: d\n    path: done.txt\n"))
    res = ce("run", "cached.yaml", "--runs-root", "runs", cwd=str(tmp_path))
    [record] = task_jsons(run_dir_in(str(tmp_path / "runs"))).values()
    assert record["status"] == status, res.stderr


def test_unreadable_or_unwritable_inputs_are_errors_never_bugs(tmp_path):
    """Three crashes found by hand (exit 3, "internal error"): --emit where no directory
    can be made, a .ce file of `ce criteria -f` that is not UTF-8, and a model-server
    script that is not UTF-8. Each is now one line naming the file."""
    (tmp_path / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: go\nsuccess_criteria:\n"
        "  - {type: file_exists, path: a, description: d}\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "x.ce").write_bytes(b"\xff")
    (tmp_path / "m.yaml").write_bytes(b"steps: []\n# \xff\n")
    (tmp_path / "empty.yaml").write_text("steps: []\n")
    for args, code, says in (
            (["compile", "t.yaml", "--emit", "afile/out"], 2, "cannot write afile/out"),
            (["criteria", "list", "-f", "x.ce"], 1, "error[CE0611]"),
            (["criteria", "show", "used_tool", "-f", "x.ce"], 1, "error[CE0611]"),
            (["model-server", "--script", "m.yaml"], 2, "m.yaml: not a UTF-8 text file"),
            (["model-server", "--script", "empty.yaml"], 2, "empty.yaml has no steps to serve"),
            (["model-server", "--script", "empty.yaml", "--judge"], 2,
             "has no `judge` verdicts nor `agent_judge` steps")):
        res = ce(*args, cwd=str(tmp_path))
        assert res.returncode == code and says in res.stderr, (args, res.stderr)
        assert "internal error" not in res.stderr and "Traceback" not in res.stderr


def test_a_resume_says_how_many_planned_trials_never_ran_and_are_gone(tmp_path):
    """A run interrupted before a task's trial ran, that task's file removed, then the
    run resumed: the resume ended `complete` with the remaining trials and said nothing
    of the one its run had planned (a finished trial whose task went is named)."""
    (tmp_path / "tasks").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "tasks" / f"{name}.yaml").write_text(
            f"task_id: {name}\ndescription: d\nagent: {{type: none}}\nsandbox: {{python: null}}\n"
            "pre_run:\n  - command: 'printf x > f'\nsuccess_criteria:\n"
            "  - {type: file_exists, path: f, description: d}\n")
    env = env_for(str(tmp_path))
    assert subprocess.run([CE, "run", "tasks", "--run-dir", "run"], cwd=tmp_path, env=env,
                          capture_output=True, timeout=300).returncode == 0
    # as an interrupted run leaves it: c's trial never ran
    run_json = tmp_path / "run" / "run.json"
    state = json.loads(run_json.read_text())
    assert state["trials_planned"] == 3
    run_json.write_text(json.dumps({**state, "status": "interrupted"}))
    import shutil

    shutil.rmtree(tmp_path / "run" / "default" / "c")
    (tmp_path / "tasks" / "c.yaml").unlink()
    resumed = subprocess.run([CE, "run", "--resume", "run"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "the run planned 3 trial(s) when it began; 1 of them never ran and are no " \
           "longer among its tasks" in resumed.stderr, resumed.stderr
    assert json.loads(run_json.read_text())["trials_planned"] == 2


def test_a_run_dir_that_is_a_dangling_symlink_says_so(tmp_path):
    """--run-dir D, D a symlink to a missing directory: it said "cannot create D/plans: No
    such file or directory" (--runs-root: "File exists")."""
    (tmp_path / "t.yaml").write_text(SLOWISH)
    (tmp_path / "D").symlink_to("missing")
    (tmp_path / "loop").symlink_to("loop")
    real = os.path.realpath(tmp_path)
    for option in ("--runs-root", "--run-dir"):
        res = ce("run", "t.yaml", option, "D", cwd=str(tmp_path))
        assert res.returncode == 2, res.stderr
        assert (f"Invalid value for {option}: D is a symlink to a missing directory "
                f"({real}/missing)") in res.stderr, res.stderr
        res = ce("run", "t.yaml", option, "loop", cwd=str(tmp_path))
        assert res.returncode == 2, res.stderr
        assert f"Invalid value for {option}: loop is a symlink loop" in res.stderr
        assert "Traceback" not in res.stderr and "cannot create" not in res.stderr
    assert not (tmp_path / "missing").exists()
