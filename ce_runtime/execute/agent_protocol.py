"""The one protocol every agent implements.

`ce_agents` imports this module, the trace schema and the rate card (`ce_runtime.pricing`),
nothing else of ce_runtime: an agent gets a request (plain data and the trial's
sandbox), an event sink and a stop signal, emits trace events as it works, and returns
how it ended. An agent never starts a process or touches a file itself: it asks
`request.sandbox` (`exec`, `spawn`, `write_file`, `read_file`), so it is confined as the
task's driver confines it, and a timeout or Ctrl-C kills everything it started.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import attrs

from ce_runtime.execute.sandbox.base import (
    AGENT,
    GRADER,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxFileError,
    capped_timeout,
)
from ce_runtime.trace.events import Event

__all__ = ["AGENT", "GRADER", "Agent", "AgentOutcome", "AgentRequest", "EventSink", "ExecResult",
           "Sandbox", "SandboxError", "SandboxFileError", "capped_timeout"]


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
    sandbox: Any = None  # the trial's Sandbox (base.Sandbox): every process and file op
    # where the agent's model answers: {"base_url", "api_key", "env": {...}, "scripted"}
    # (the scripted model server of `ce run --scripted-model`, or the real credentials)
    model_endpoint: dict[str, Any] | None = None
    tools: dict[str, str] = attrs.field(factory=dict)  # agent CLI name -> its binary
    # a simulated dialog (execute.dialog.Dialog): `await dialog.reply(text)` after each
    # reply gives the user's next message, or None when the dialog is over
    dialog: Any = None


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
    (the runner writes AgentEnd for an agent it had to kill). An agent with a true
    `trusted` attribute (the oracle: the task's own solution) keeps the grader's inputs
    reachable while it runs. One whose CLI reports tokens but no price sets
    `priced_by_ce` and its `default_model`, and prices its Usage events with
    `ce_runtime.pricing` (ce says a cost is unknown, and refuses a `max_usd` it could not
    enforce, by the same attributes). One with a true `starts_nothing` (`none`: it runs
    no command and writes no file) has no agent phase in the sandbox: nothing of it can
    be left running, nor can it change a file the grader trusts, so neither is looked
    for."""

    name: str

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome: ...
