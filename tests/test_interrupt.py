"""An interrupted trial (Ctrl-C) does not wait for work running in a worker thread: the
sandbox set-up command and the grading commands are killed at once.

(`ce run` itself, interrupted during grading, is covered in test_run_e2e.py.)
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from ce_lang.compiler import compile_paths
from ce_runtime.execute.sandbox import workspace as sandbox
from ce_runtime.grade.host import Host, InfrastructureError


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _gone(pid: int, within: float = 5.0) -> bool:
    """The process is dead (a zombie or reaped) within `within` seconds: a SIGKILL is
    delivered when the process is next scheduled, which on a loaded machine is not at
    once (CI saw `sleep` alive right after the cancel returned)."""
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def _wait_for_pid(path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


def test_cancel_kills_the_set_up_command_and_fails_the_set_up(tmp_path, monkeypatch):
    pid_file = tmp_path / "uv.pid"
    fake_uv = tmp_path / "uv"
    fake_uv.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 30\n")
    fake_uv.chmod(0o755)
    monkeypatch.setattr(sandbox, "_uv_bin", lambda: str(fake_uv))
    task = tmp_path / "task.yaml"
    task.write_text("task_id: t\ndescription: d\ninitial_prompt: p\n"
                    "success_criteria:\n  - type: file_exists\n    description: d\n    path: x\n")
    plan = compile_paths([str(task)]).trials[0].plan  # default sandbox: a venv
    cancel = threading.Event()
    out: list = []
    worker = threading.Thread(target=lambda: out.append(sandbox.prepare_workspace(
        plan, str(tmp_path), str(tmp_path / "ws"), None, cancel)))
    worker.start()
    pid = _wait_for_pid(pid_file)
    started = time.monotonic()
    cancel.set()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 5
    (res,) = out
    assert not res.ok and "uv venv: cancelled" in res.error
    assert _gone(pid)


def test_without_cancel_a_set_up_command_still_times_out(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "CANCEL_POLL_S", 0.01)
    started = time.monotonic()
    with pytest.raises(sandbox.SetupError, match=r"timed out after 0\.3 s"):
        sandbox._run(["sleep", "5"], cwd=str(tmp_path), env=dict(os.environ), timeout=0.3,
                     what="sleep")
    assert time.monotonic() - started < 3
    assert sandbox._run(["echo", "ok"], cwd=str(tmp_path), env=dict(os.environ), timeout=5,
                        what="echo") == "ok\n"


def test_host_cancel_kills_the_running_command_and_refuses_more(tmp_path):
    from ce_runtime.execute.sandbox.runner import local_runner

    with local_runner(str(tmp_path)) as runner, local_runner(str(tmp_path)) as fresh:
        _cancel_scenario(tmp_path, Host(workspace=str(tmp_path), runner=runner),
                         Host(workspace=str(tmp_path), runner=fresh))


def _cancel_scenario(tmp_path, host, fresh) -> None:
    out: list = []

    def grade() -> None:
        try:
            host.b_run("echo $$ > grader.pid; exec sleep 30", 60)
        except InfrastructureError as exc:
            out.append(exc)

    worker = threading.Thread(target=grade)
    worker.start()
    pid = _wait_for_pid(tmp_path / "grader.pid")
    started = time.monotonic()
    host.cancel()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 5
    assert len(out) == 1 and "cancelled" in str(out[0])
    assert _gone(pid)
    with pytest.raises(InfrastructureError, match="cancelled"):
        host.b_run("true", 5)
    assert fresh.b_run("echo fine", 5)["stdout"] == "fine\n"
