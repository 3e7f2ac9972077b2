"""`ce run` and `ce run --resume` at the edges a user hits, through the real CLI on a
small agentless task: a resume with nothing left to run, an executor that cannot start,
a Ctrl-C once every trial has finished or while the reports are written, and a resume
whose task files no longer have some of the run's finished trials.

A signal that must land at one moment (after the last trial, during the report writing)
is sent while `ce` waits at that moment: `ce` runs from a small wrapper that makes one of
its steps wait for a file the test writes after the signal (`paused_ce`). Nothing else of
`ce` is changed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.test_run_e2e import ce, env_for, load_run_json, scratch_left, task_jsons
from tests.test_run_resume_options import AGENTLESS, REPEATS, start, unfinish

pytestmark = pytest.mark.slow

UNREACHABLE = "127.0.0.1:9"  # nothing answers there: Ray cannot join it


def _need_ray() -> None:
    from ce_runtime.execute.executor import ray_missing

    if ray_missing():
        pytest.skip(ray_missing())


# -- nothing left to run / an executor that does not start ---------------------------------
def test_a_resume_with_nothing_left_to_run_starts_no_executor_and_completes(tmp_path):
    _need_ray()
    run_dir = start(tmp_path)
    res = ce("run", "--resume", run_dir, "--executor", "ray", "--ray-address", UNREACHABLE,
             cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert f"{REPEATS} already done" in res.stderr and "nothing left to run" in res.stderr
    assert "interrupted" not in res.stderr and "Ray" not in res.stderr, res.stderr
    assert f"{REPEATS}/{REPEATS} trial(s): {REPEATS} SUCCESS" in res.stdout
    assert "not passed" not in res.stdout
    meta = load_run_json(run_dir)
    assert (meta["status"], meta["trials"], meta["trials_planned"], meta["exit_code"]) == \
        ("complete", REPEATS, REPEATS, 0)
    assert meta["exit_reasons"] == [] and "error" not in meta
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        assert "**PASSED**" in fh.read()


def test_an_executor_that_cannot_start_is_named_and_interrupts_nothing(tmp_path):
    _need_ray()
    run_dir = start(tmp_path)
    unfinish(run_dir, 1)
    res = ce("run", "--resume", run_dir, "--executor", "ray", "--ray-address", UNREACHABLE,
             cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr
    failed = f"the ray executor did not start: cannot join the Ray cluster at {UNREACHABLE}"
    assert f"ce run: {failed}" in res.stderr, res.stderr
    assert f"`ce run --resume {run_dir}` runs the other 1" in res.stderr
    assert "interrupted" not in res.stderr + res.stdout
    assert f"not passed: {failed}" in res.stdout
    meta = load_run_json(run_dir)
    assert (meta["status"], meta["trials"], meta["trials_planned"], meta["exit_code"]) == \
        ("incomplete", REPEATS - 1, REPEATS, 1)
    assert meta["error"].startswith(failed)
    assert meta["exit_reasons"][0].startswith(failed)
    assert f"{REPEATS - 1} of {REPEATS} planned trial(s) ran" in meta["exit_reasons"][0]
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        report = fh.read()
    assert "**INCOMPLETE**" in report and failed in report

    done = ce("run", "--resume", run_dir, "--executor", "local", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    meta = load_run_json(run_dir)
    assert (meta["status"], meta["trials"], meta["exit_code"]) == ("complete", REPEATS, 0)
    assert "error" not in meta and meta["args"]["executor"] == "local"
    assert len(task_jsons(run_dir)) == REPEATS


# -- a stop once the trials are done ------------------------------------------------------
WRAPPER = """\
import asyncio, importlib, os, sys, time

module = importlib.import_module({module!r})
real = getattr(module, {name!r})
ready, go = os.environ["CE_TEST_READY"], os.environ["CE_TEST_GO"]

def wait_sync():
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)

async def wait_async():
    open(ready, "w").close()
    while not os.path.exists(go):
        await asyncio.sleep(0.01)

if asyncio.iscoroutinefunction(real):
    async def paused(*args, **kwargs):
        await wait_async()
        return await real(*args, **kwargs)
else:
    def paused(*args, **kwargs):
        wait_sync()
        return real(*args, **kwargs)

setattr(module, {name!r}, paused)
sys.argv = ["ce", *sys.argv[1:]]
from ce_runtime.cli import entry
entry()
"""


def paused_ce(tmp_path, module: str, name: str, sig: int, *args: str,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`ce ARGS`, whose `module.name` waits (once) until the test has sent `sig` to ce's
    process group, as Ctrl-C at a terminal does; then it goes on."""
    wrapper = tmp_path / "paused_ce.py"
    wrapper.write_text(WRAPPER.format(module=module, name=name))
    ready, go = tmp_path / "ready", tmp_path / "go"
    full = {**env_for(str(tmp_path)), "CE_TEST_READY": str(ready), "CE_TEST_GO": str(go),
            **(env or {})}
    proc = subprocess.Popen([sys.executable, str(wrapper), *args], cwd=str(tmp_path),
                            env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        os.killpg(proc.pid, sig)
        go.write_text("")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_once_every_trial_has_finished_interrupts_nothing(tmp_path):
    """The signal lands while the executor tears down, after the last trial is written:
    the run is complete, not "interrupted: 3 of 3 planned trial(s) ran"."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    res = paused_ce(tmp_path, "ce_runtime.execute.sandbox.tempdir", "close_warm_inits",
                    signal.SIGINT, "run", "agentless.yaml", "--repeats", str(REPEATS),
                    "--run-dir", "r")
    assert res.returncode == 0, res.stderr
    assert "once every trial had finished: nothing was cut short" in res.stderr, res.stderr
    assert "--resume" not in res.stderr and "Aborted" not in res.stderr
    assert "not passed" not in res.stdout
    meta = load_run_json(str(tmp_path / "r"))
    assert (meta["status"], meta["trials"], meta["exit_code"]) == ("complete", REPEATS, 0)
    assert "**PASSED**" in (tmp_path / "r" / "report.md").read_text()
    assert scratch_left(str(tmp_path)) == []  # the pool's teardown was not cut short


def test_ctrl_c_while_the_reports_are_written_finishes_them(tmp_path):
    """The reports are ce's own writes (CE_REPORT_WORKER=0): a Ctrl-C then is said and
    they are finished, not cut (it left run.json "running", no report, "Aborted!")."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    res = paused_ce(tmp_path, "ce_runtime.report.run_end", "write_run_reports",
                    signal.SIGINT, "run", "agentless.yaml", "--repeats", str(REPEATS),
                    "--run-dir", "r", env={"CE_REPORT_WORKER": "0"})
    assert res.returncode == 0, res.stderr
    assert "ce run: SIGINT received: the run directory is finished first" in res.stderr
    assert "Aborted" not in res.stderr and "Traceback" not in res.stderr
    assert f"{REPEATS}/{REPEATS} trial(s): {REPEATS} SUCCESS" in res.stdout
    meta = load_run_json(str(tmp_path / "r"))
    assert (meta["status"], meta["trials"], meta["exit_code"]) == ("complete", REPEATS, 0)
    for name in ("report.md", "report.html", "trials.parquet", "results.parquet"):
        assert (tmp_path / "r" / name).is_file(), name


# -- the task files changed ---------------------------------------------------------------
def test_a_resume_names_the_finished_trials_its_tasks_no_longer_have(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("one", "two"):
        (suite / f"{name}.yaml").write_text(AGENTLESS.replace("agentless", name))
    res = ce("run", "suite", "--repeats", "2", "--run-dir", "r", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    run_dir = str(tmp_path / "r")
    os.unlink(os.path.join(run_dir, "default", "one", "01", "task.json"))
    os.unlink(suite / "two.yaml")
    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert ("ce run: 2 finished trial(s) are no longer among the run's tasks" in res.stderr
            and "default/two/00, default/two/01" in res.stderr), res.stderr
    meta = load_run_json(run_dir)
    assert (meta["status"], meta["trials"], meta["trials_planned"]) == ("complete", 2, 2)
    assert os.path.isfile(os.path.join(run_dir, "default", "two", "00", "task.json"))

    (suite / "two.yaml").write_text(AGENTLESS.replace("agentless", "two"))  # back: counted
    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 0 and "no longer" not in res.stderr, res.stderr
    assert load_run_json(run_dir)["trials"] == 4


# -- a resume that cannot take the run's lock ----------------------------------------------
def test_a_resume_that_cannot_write_its_lock_says_nothing_changed(tmp_path):
    # run.lock a directory: no lock file can be opened (as root too, unlike a chmod); the
    # message said "no run.json in the run directory was marked (none was written yet)",
    # of a run whose run.json is there, untouched
    run_dir = start(tmp_path)
    before = load_run_json(run_dir)
    lock = os.path.join(run_dir, "run.lock")
    os.remove(lock)
    os.mkdir(lock)
    res = ce("run", "--resume", run_dir, cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr
    assert f"cannot write {lock}" in res.stderr
    assert "none was written yet" not in res.stderr and "nothing was changed" in res.stderr
    assert "Traceback" not in res.stderr
    assert load_run_json(run_dir) == before
