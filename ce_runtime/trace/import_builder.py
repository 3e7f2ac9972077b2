"""What every transcript importer shares: `ImportResult` and the `Builder` that turns a
format's records into trace events (tool names normalized by `normalize_tool`, the same
function as live agents': `ce_runtime.trace.events`).

The importers (`import_claude`, `import_coder_eval`) only read their format; the turn,
usage, tool-result and timing rules written down in `ce_runtime.trace.importers` are
enforced here, once, so every format maps the same way.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import msgspec

from ce_runtime.trace import events as T
from ce_runtime.trace.events import normalize_tool


class Problem(NamedTuple):
    """A warning, said as `FILE:LINE:COL: warning: MESSAGE` (1-based; 0: none applies)."""

    line: int
    message: str
    col: int = 0


_AT_BYTE = re.compile(r" \(byte (\d+)\)$")


def json_problem(exc: msgspec.DecodeError, text: bytes | str, start: int = 0,
                 line: int = 1) -> Problem:
    """`exc`, msgspec's error decoding `text[start:]` (which begins on line `line`), at
    the line and column (in characters) its byte offset falls on, without the offset
    ('expected ':' (byte 4)'); an input cut short ('Input data was truncated'), at its
    end."""
    data = text.encode() if isinstance(text, str) else text
    message = str(exc)
    found = _AT_BYTE.search(message)
    if found:
        message = message[:found.start()]
        pos = start + int(found.group(1))
    else:
        pos = len(data.rstrip())
    pos = min(pos, len(data))
    before = data[:pos]
    line += before.count(b"\n", start)
    col = len(before[before.rfind(b"\n") + 1:].decode("utf-8", "replace")) + 1
    return Problem(line, f"not JSON: {message}", col)


@dataclass
class ImportResult:
    events: list[T.Event]
    warnings: list[Problem] = field(default_factory=list)
    format: str = ""

    @property
    def tool_calls(self) -> int:
        return sum(isinstance(e, T.ToolCall) for e in self.events)

    @property
    def unresolved(self) -> int:
        answered = {e.call_id for e in self.events if isinstance(e, T.ToolResult)}
        return sum(isinstance(e, T.ToolCall) and e.call_id not in answered for e in self.events)


class Builder:
    """Accumulates the body of a trace; the header is added by `finish`."""

    def __init__(self, agent: str, timed: bool):
        self.agent = agent
        self.timed = timed  # t comes from real timestamps (tool durations can be derived)
        self.model: str | None = None
        self.body: list[T.Event] = []
        self.warnings: list[Problem] = []
        self.t = 0.0
        self.running = False
        self.turn = 0
        self.turn_open = False
        self.turn_id: Any = None
        self.calls: dict[str, float] = {}  # call_id -> t of the call
        self.results: dict[str, T.ToolResult] = {}
        self.deferred: list[T.ToolResult] = []  # results waiting for their turn's end
        self.usage_seen: dict[str, tuple[int, int, int, int]] = {}
        self.tokens = [0, 0, 0, 0]  # input, output, cache read, cache creation
        self.cost = 0.0
        self.synthetic = 0

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(Problem(line, message))

    def at(self, t: float | None) -> None:
        if t is not None and t > self.t:
            self.t = t

    def _emit(self, event: T.Event) -> None:
        self.body.append(event)

    def _activity(self) -> None:
        if not self.running:
            self.running = True
            self._emit(T.AgentStart(self.t, agent=self.agent, model=self.model))

    def message(self, role: str, text: Any) -> None:
        if isinstance(text, str) and text.strip():
            self._activity()
            self._emit(T.Message(self.t, role=role, text=text))

    def model_error(self, fields: dict[str, Any]) -> None:
        """A model call that failed (the CLI retried it): `T.ModelError`'s fields."""
        self._activity()
        self._emit(T.ModelError(self.t, **fields))

    def begin_message(self, msg_id: Any, sub: bool, t: float | None = None) -> None:
        """An assistant record arrived (at `t`): a new turn unless it continues the open one."""
        if sub or (self.turn_open and msg_id is not None and msg_id == self.turn_id):
            self.at(t)
            self._activity()
            return
        self.end_turn()  # the previous turn ends before the time moves on
        self.at(t)
        self._activity()
        self.turn += 1
        self.turn_open, self.turn_id = True, msg_id
        self._emit(T.TurnStart(self.t, turn=self.turn))

    def end_turn(self) -> None:
        self._flush_deferred()
        if self.turn_open:
            self._emit(T.TurnEnd(self.t, turn=self.turn))
            self.turn_open = False

    def call(self, line: int, call_id: Any, raw_tool: Any, params: Any) -> str:
        if not isinstance(call_id, str) or not call_id:
            self.synthetic += 1
            call_id = f"imported-{self.synthetic}"
        if call_id in self.calls:
            self.warn(line, f"tool call {call_id} repeated; the repeat is skipped")
            return call_id
        raw = raw_tool if isinstance(raw_tool, str) and raw_tool else "unknown"
        tool, params = normalize_tool(raw, params)
        self._activity()
        self.calls[call_id] = self.t
        self._emit(T.ToolCall(self.t, call_id=call_id, tool=tool, raw_tool=raw, params=params))
        return call_id

    def _result_event(self, line: int, call_id: Any, status: str, output: str,
                      duration_ms: float | None, t: float | None) -> T.ToolResult | None:
        if not isinstance(call_id, str) or not call_id:
            self.warn(line, "tool result without a tool_use_id; skipped")
            return None
        if call_id in self.results:
            self.warn(line, f"second result for tool call {call_id}; skipped")
            return None
        t = self.t if t is None else max(t, self.calls.get(call_id, 0.0))
        if call_id not in self.calls:
            self.warn(line, f"result for unknown tool call {call_id}")
        elif duration_ms is None and self.timed:
            duration_ms = round(max(0.0, (t - self.calls[call_id]) * 1000.0), 3)
        result = T.ToolResult(t, call_id=call_id, status=status, output=output,
                              duration_ms=float(duration_ms or 0.0))
        self.results[call_id] = result
        return result

    def result(self, line: int, call_id: Any, status: str, output: str,
               duration_ms: float | None = None) -> None:
        result = self._result_event(line, call_id, status, output, duration_ms, None)
        if result is not None:
            self._emit(result)

    def defer_result(self, line: int, call_id: str, status: str, output: str,
                     duration_ms: float | None, t: float | None) -> None:
        """A result known in advance (coder_eval): emitted at its turn's end, in time order."""
        result = self._result_event(line, call_id, status, output, duration_ms, t)
        if result is not None:
            self.deferred.append(result)

    def _flush_deferred(self) -> None:
        for result in sorted(self.deferred, key=lambda r: r.t):
            self.at(result.t)
            result.t = self.t
            self._emit(result)
        self.deferred.clear()

    def deny(self, call_id: Any) -> None:
        if not isinstance(call_id, str):
            return
        if call_id in self.results:
            self.results[call_id].status = "denied"
        elif call_id in self.calls:
            self.result(0, call_id, "denied", "")

    def usage(self, key: str | None, tokens: tuple[int, int, int, int]) -> None:
        """Usage as reported for one message; `key` de-duplicates repeats of one message."""
        if key is not None:
            before = self.usage_seen.get(key, (0, 0, 0, 0))
            now = tuple(max(a, b) for a, b in zip(tokens, before, strict=True))
            self.usage_seen[key] = now  # type: ignore[assignment]
            tokens = tuple(a - b for a, b in zip(now, before, strict=True))  # type: ignore[assignment]
        self.add_usage(tokens, 0.0)

    def snapshot(self) -> tuple[list[int], float]:
        return list(self.tokens), self.cost

    def reconcile(self, base: tuple[list[int], float], total: tuple[int, int, int, int],
                  cost: float) -> None:
        """Top up to an authoritative total for everything since `base`."""
        tokens, spent = base
        delta = tuple(max(0, want - (have - was))
                      for want, have, was in zip(total, self.tokens, tokens, strict=True))
        self.add_usage(delta, max(0.0, cost - (self.cost - spent)))  # type: ignore[arg-type]

    def add_usage(self, tokens: tuple[int, int, int, int], cost: float) -> None:
        if not any(tokens) and not cost:
            return
        for i, n in enumerate(tokens):
            self.tokens[i] += n
        self.cost += cost
        self._emit(T.Usage(self.t, input_tokens=tokens[0], output_tokens=tokens[1],
                           cache_read_tokens=tokens[2], cache_creation_tokens=tokens[3],
                           cost_usd=cost))

    def end_agent(self, reason: str, detail: str = "") -> None:
        self.end_turn()
        self._activity()
        self.running = False
        self._emit(T.AgentEnd(self.t, reason=reason, detail=detail))

    def finish(self, fmt: str, trial_id: str, task_id: str, plan_hash: str,
               started_at: float) -> ImportResult:
        for event in self.body:
            if isinstance(event, T.AgentStart) and event.model is None:
                event.model = self.model
        header = T.RunHeader(0.0, schema_version=T.SCHEMA_VERSION, trial_id=trial_id,
                             task_id=task_id, plan_hash=plan_hash, agent=self.agent,
                             model=self.model, started_at=started_at)
        return ImportResult([header, *self.body], self.warnings, fmt)


def json_lines(data: bytes, warnings: list[Problem]):
    """(line number, object) for each non-blank line; bad lines become warnings."""
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:  # at its column: FILE:LINE:COL
            warnings.append(json_problem(exc, raw, len(raw) - len(raw.lstrip()), lineno))
            continue
        if not isinstance(value, dict):
            warnings.append(Problem(lineno,
                                    f"expected a JSON object, got {type(value).__name__}"))
            continue
        yield lineno, value


def as_int(value: Any) -> int:
    """A count from the source: a positive int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def as_float(value: Any) -> float:
    """A number from the source (a cost), else 0.0."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else 0.0


def parse_datetime(value: Any) -> datetime | None:
    """ISO 8601 -> an aware datetime (a naive one is read as UTC)."""
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def stem_id(name: str) -> str:
    """A trial id from a file name; coder_eval files are all `task.json`: use the folder."""
    if not name:
        return ""
    stem = os.path.splitext(os.path.basename(name))[0]
    if stem == "task":
        parent = os.path.basename(os.path.dirname(os.path.abspath(name)))
        return parent or stem
    return stem
