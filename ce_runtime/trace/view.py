"""Trace events -> the `TraceView` criteria read, built incrementally (one event at a time)."""

from __future__ import annotations

from collections.abc import Iterable

from ce_lang.api import MessageView, ToolCallView, TraceView
from ce_runtime.trace import events as T


class ViewBuilder:
    """Applies events in order; `apply` returns what changed so monitors stay O(1)."""

    def __init__(self) -> None:
        self.view = TraceView()
        self._by_id: dict[str, ToolCallView] = {}
        self.events = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read_tokens = 0
        self.cache_creation_tokens = 0
        self.cost_usd = 0.0
        self.started_at: float | None = None  # the run header's unix time: events' t from it

    def apply(self, event: T.Event) -> ToolCallView | None:
        """The tool call added or completed by this event, if any."""
        index = self.events
        self.events += 1
        if isinstance(event, T.ToolCall):
            call = ToolCallView(len(self.view.tool_calls), event.tool, event.raw_tool,
                                event.params, "unresolved", "", index, event.call_id,
                                self.view.turns, self._unix(event.t))
            self.view.tool_calls.append(call)
            self._by_id[event.call_id] = call
            return call
        if isinstance(event, T.ToolResult):
            call = self._by_id.get(event.call_id)
            if call is not None and call.status == "unresolved":
                call.status = event.status
                call.output = event.output
                call.ended_at = self._unix(event.t)
                return call
            return None
        if isinstance(event, T.RunHeader) and event.started_at:
            self.started_at = event.started_at
        elif isinstance(event, T.Message):
            self.view.messages.append(MessageView(event.role, event.text))
        elif isinstance(event, T.TurnStart):
            self.view.turns += 1
        elif isinstance(event, T.Usage):
            self.input_tokens += event.input_tokens
            self.output_tokens += event.output_tokens
            self.cache_read_tokens += event.cache_read_tokens
            self.cache_creation_tokens += event.cache_creation_tokens
            self.cost_usd += event.cost_usd
        return None

    def _unix(self, t: float) -> float | None:
        return None if self.started_at is None else self.started_at + t


def build_view(events: Iterable[T.Event]) -> TraceView:
    builder = ViewBuilder()
    for e in events:
        builder.apply(e)
    return builder.view
