"""The `none` agent: does nothing. Grades the workspace as set up (template, pre_run),
for tasks that check an environment rather than an agent."""

from __future__ import annotations

import asyncio

from ce_runtime.execute.agent_protocol import AgentOutcome, AgentRequest, EventSink
from ce_runtime.trace import events as T


class NoneAgent:
    name = "none"
    starts_nothing = True  # no sandbox round trips for an agent phase it does not have

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome:
        sink.emit(T.AgentStart(sink.clock(), self.name, (request.agent or {}).get("model")))
        outcome = AgentOutcome("finished")
        sink.emit(T.AgentEnd(sink.clock(), outcome.reason, outcome.detail))
        return outcome
