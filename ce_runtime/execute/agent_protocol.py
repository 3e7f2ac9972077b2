"""The one protocol every agent implements, and the helpers agents share.

`ce_agents` imports this module and the trace schema, nothing else of ce_runtime: an
agent gets a request (plain data), an event sink and a stop signal, emits trace events
as it works, and returns how it ended. Agents that start processes run them in their own
process group with `run_shell`, so a timeout or Ctrl-C kills everything they started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
import time
from typing import IO, Any, Protocol

import attrs

from ce_runtime.trace.events import Event


@attrs.frozen
class AgentRequest:
    trial_id: str
    prompt: str | None
    workspace: str
    task_dir: str
    agent: dict[str, Any]  # the task's `agent:` block, resolved (plain data)
    limits: dict[str, Any]  # run_limits (plain data)
    reference: dict[str, Any] | None = None  # file / code / directory (task-relative)
    criteria: list[dict[str, Any]] = attrs.field(factory=list)  # [{id, type, args}]
    env: dict[str, str] = attrs.field(factory=dict)  # the sandbox's command environment


@attrs.frozen
class AgentOutcome:
    reason: str  # finished | max_turns | stopped | error
    detail: str = ""


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...

    def clock(self) -> float:
        """Seconds since the trial started (the `t` of every event)."""
        ...


class Agent(Protocol):
    """Emits AgentStart, its turns and tool calls, and AgentEnd when it ends by itself
    (the runner writes AgentEnd for an agent it had to kill)."""

    name: str

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome: ...


@attrs.frozen
class ShellResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: float
    pgid: int = 0  # the command's process group (what it left running can be killed by it)


async def run_shell(command: str, cwd: str, env: dict[str, str] | None = None,
                    timeout: float | None = None,
                    max_output: int | None = None) -> ShellResult:
    """A shell command in its own process group; on timeout or cancellation the whole
    group is killed (nothing the command started survives).

    Output goes to temporary files, not pipes: a background child (`server &`) inherits
    the shell's stdout, so reading a pipe to its end would wait for the daemon. The call
    returns when the shell exits; what the command left running stays in its process
    group (`pgid`) for the caller to kill when it tears down. `max_output` keeps only the
    first bytes of each stream (a note says how much was cut).
    """
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = await asyncio.create_subprocess_shell(
            command, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=out, stderr=err, start_new_session=True)
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
            kill_group(proc.pid)
            await proc.wait()
        except asyncio.CancelledError:
            kill_group(proc.pid)
            await proc.wait()
            raise
        stdout, stderr = read_capped(out, max_output), read_capped(err, max_output)
    return ShellResult(-1 if timed_out else (proc.returncode or 0), stdout, stderr,
                       timed_out, (time.monotonic() - started) * 1000, proc.pid)


def read_capped(fh: IO[bytes], limit: int | None) -> str:
    """The text written to `fh` (UTF-8, invalid bytes replaced), cut at `limit` bytes."""
    total = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    data = fh.read() if limit is None else fh.read(limit)
    text = data.decode("utf-8", "replace")
    if total > len(data):
        text += f"\n[... truncated: {total - len(data)} of {total} bytes not kept]"
    return text


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
