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
import time
from typing import Any, Protocol

import attrs

from ce_runtime.trace import Event


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


async def run_shell(command: str, cwd: str, env: dict[str, str] | None = None,
                    timeout: float | None = None) -> ShellResult:
    """A shell command in its own process group; on timeout or cancellation the whole
    group is killed (nothing the command started survives)."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_shell(
        command, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)
    timed_out = False
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        timed_out = True
        kill_group(proc.pid)
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        kill_group(proc.pid)
        await proc.wait()
        raise
    return ShellResult(-1 if timed_out else (proc.returncode or 0),
                       out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                       timed_out, (time.monotonic() - started) * 1000)


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
