"""ce's PreModelRequest hook for Codex (ce_agents/codex.py HOOK), run by /bin/sh as Codex
runs it: each model call's JSON on stdin, Codex's pid, the cap and its directory as
arguments. A process named `codex` (a copy of `sleep`) stands for Codex: the hook's lines
go to its stdout (/proc/PID/fd/1), a pipe this test reads.

The end to end runs (the real Codex held at max_turns 2: two model calls, two turns) are
tests/test_agent_turn_limits.py::test_max_turns_ends_each_cli_at_the_cap,
tests/test_agent_fidelity.py::test_a_turn_is_a_model_call_and_max_turns_holds and (the
hook trusted by its hash, a workspace's own hooks not run)
tests/test_agents_real.py::test_codex_runs_ce_s_max_turns_hook_trusted_and_no_hook_the_workspace_carries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from ce_agents.codex import HOOK, REST, CodexAgent, Session
from ce_runtime.trace import events as T
from tests.test_agent_turn_limits import Sink

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


def call(thread: str = "t1", attempt: int = 1, kind: str = "sampling") -> str:
    return json.dumps({"kind": kind, "request_id": "r", "attempt_number": attempt,
                       "session_id": thread, "thread_id": thread, "turn_id": "u",
                       "cwd": "/w", "transcript_path": None, "model": "m",
                       "hook_event_name": "PreModelRequest"}, separators=(",", ":"))


@pytest.fixture
def codex(tmp_path):
    """A process named codex whose stdout is a pipe: (its pid, the read end)."""
    fake = tmp_path / "codex"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", fake)
    proc = subprocess.Popen([str(fake), "60"], stdout=subprocess.PIPE)
    os.set_blocking(proc.stdout.fileno(), False)
    yield proc
    proc.kill()
    proc.wait()


def hook(pid: int, home, stdin: str, max_turns: int = 2) -> subprocess.Popen:
    return subprocess.Popen(["/bin/sh", "-c", HOOK, "sh", str(pid), str(max_turns),
                             str(home)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def said(proc) -> list[dict]:
    data = proc.stdout.read() or b""
    return [json.loads(line) for line in data.decode().splitlines()]


def test_the_hook_counts_the_main_threads_first_attempts_and_holds_the_call_past_the_cap(
        codex, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    for stdin in (call(), call(attempt=2), call("sub"), call(kind="foreground_compaction"),
                  call(), call(attempt=3)):  # two turns: a retry, a sub-agent's, a compaction
        done = hook(codex.pid, home, stdin)
        assert done.communicate(stdin, timeout=10) == ("", None) and done.returncode == 0
    assert (home / "ce-hook.calls").read_text().strip() == "2"
    assert said(codex) == [{"type": "ce_hook"}]  # said once, at the first call

    held = hook(codex.pid, home, call())  # the third: held, and ce is told
    held.stdin.write(call())
    held.stdin.close()
    with pytest.raises(subprocess.TimeoutExpired):
        held.wait(timeout=2)
    assert said(codex) == [{"type": "ce_max_turns", "turns": 2}]
    assert (home / "ce-hook.calls").read_text().strip() == "2"
    # ce's last read of the log (once Codex has ended) lets the hold go, and returns once
    # the hook has ended (ce's sweep right after found it still running: CI under load)
    subprocess.run(["/bin/sh", "-c", REST, "sh", str(home), "1"], capture_output=True,
                   timeout=10)
    assert held.poll() == 0


def test_a_hook_that_cannot_tell_ce_lets_the_call_go(tmp_path):
    """Its pid is no Codex (no /proc to write to, a stdout it cannot open): the call past
    the cap is made, and ce's stop at the turn past the cap is the hold."""
    home = tmp_path / "home"
    home.mkdir()
    for _ in range(3):
        done = hook(os.getpid(), home, call())
        assert done.communicate(call(), timeout=10) == ("", None) and done.returncode == 0
    assert not (home / "ce-hook.hold").exists()
    # the release finds no hold, and blocks on nothing
    subprocess.run(["/bin/sh", "-c", REST, "sh", str(home), "1"], capture_output=True,
                   timeout=10)


def events_for(max_turns: int | None):
    from ce_agents.cli_agent import Events

    sink = Sink()
    events = Events(sink)
    events.max_turns = max_turns
    events.codex = Session("/h")  # type: ignore[attr-defined]
    return sink, events


def test_the_held_cap_ends_the_run_max_turns():
    sink, events = events_for(2)
    agent = CodexAgent()
    for line in ({"type": "thread.started", "thread_id": "t1"},
                 {"type": "ce_hook"}, {"type": "turn.started"}):
        agent.on_line(line, events)
    events.codex.log_seen = True  # type: ignore[attr-defined]
    events.turn_start()
    events.turn_end()
    events.turn_start()
    assert not events.aborted
    agent.on_line({"type": "ce_max_turns", "turns": 2}, events)
    assert events.aborted and events.error is None
    outcome = agent.finish(events, -15, False, "")
    assert outcome.reason == "max_turns"
    assert outcome.detail == "thread t1, 2 turns: codex held its next model call at max_turns 2"
    assert not [e for e in sink.events if isinstance(e, T.Message)]


def test_a_run_whose_hook_never_ran_says_so():
    sink, events = events_for(2)
    events.codex.log_seen = True  # type: ignore[attr-defined]
    events.turn_start()
    CodexAgent().finish(events, 0, False, "")
    assert [e.text for e in sink.events if isinstance(e, T.Message)] == [
        "ce: codex did not run ce's max_turns hook: max_turns is held only by ce's stop, "
        "once a turn past it has begun"]
