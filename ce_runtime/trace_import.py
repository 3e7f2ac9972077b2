"""Foreign transcripts -> ce trace events, so that runs ce did not make can be scored too.

Formats (`detect_format` tells them apart by content):

  claude-stream   what `claude -p --output-format stream-json --verbose` prints (the same
                  records the Agent SDK parses): system/init, assistant, user, result
  claude-session  the transcript Claude Code itself writes under
                  $CLAUDE_CONFIG_DIR/projects/<dir>/<session>.jsonl
  coder-eval      a coder_eval `task.json` (an EvaluationResult)

The mapping, the same for every format:

- A `RunHeader` comes first: trial and task ids from the caller, else from the content
  (coder_eval's task_id) or the file name; `plan_hash` is "" unless given. An
  `AgentStart` precedes the agent's first activity (again after each `AgentEnd`).
- Turns: one per assistant API message. `TurnStart(n)` (n counts from 1) comes before
  the message's first content block; consecutive records with the same message id are
  one turn (Claude Code writes one record per content block). `TurnEnd(n)` comes when
  the next assistant message starts or the agent ends, so the tool results answering a
  turn's calls lie inside it. A transcript that stops without an end record leaves its
  last turn open, as a crashed live run does. Sub-agent records (`parent_tool_use_id`,
  `isSidechain`) add their messages, calls, results and usage but no turn boundaries:
  they run inside the main turn that called the sub-agent.
- Assistant text -> `Message(assistant)`; user text -> `Message(user)` (Claude Code's
  meta entries are skipped); thinking is not recorded.
- A tool use -> `ToolCall` (`raw_tool` as the agent named it, `tool` normalized: Codex
  shell tools `exec_command`, `shell`, `local_shell`, `command_execution` and `bash`
  become `Bash` with params `{"command": str, ...}`; Claude's names are already canonical).
  A tool result -> `ToolResult`, status `error` when the source says so, `denied` for
  the calls a stream-json result lists in `permission_denials`, else `ok`.
- A call without a result gets no `ToolResult`: the interpreter treats a missing result
  as unresolved, exactly as for a live run that was cut off.
- `Usage` events are increments: their sum over a trace is the run's total. Claude Code
  repeats a message's usage on every record of that message; only growth beyond what
  was already counted for that message id is emitted. An authoritative total (the
  stream-json result, a coder_eval turn's or run's `token_usage`) adds one final `Usage`
  with the difference, clamped at zero, and the cost, so the sum matches it.
  `input_tokens` is the uncached input (Anthropic's meaning; coder_eval's
  `uncached_input_tokens`); cache reads and writes are counted apart.
- `t` is seconds since the first timestamp of the source (session entries, coder_eval
  datetimes; naive times are read as UTC) and never decreases. stream-json has no timestamps: everything is at 0
  except the end, at the result's `duration_ms`.
- `RunEnd` is never emitted: an import is not a run of ce's; the source's own verdict,
  when it has one, goes into the `AgentEnd` detail.
- Unknown record types and content blocks are skipped; malformed lines and records
  become warnings `(line, message)` (line 0 when no line applies), never errors.

coder_eval specifics (field names as in coder_eval 0.12.16's models): each entry of
`iterations` (legacy alias `turns`) is a TurnRecord, one agent invocation between
`AgentStart` and `AgentEnd`. Its `messages` give the turns and the text: AssistantMessage
(`message_id`, `started_at`/`completed_at`, `content_blocks` of `block_type` text /
tool_use with `tool_use_id`, per-call `input_tokens`/`output_tokens`/`cache_read_tokens`/
`cache_creation_tokens`), ReconciliationMessage (residual tokens), UserMessage (simulator
text). Its `commands` (CommandTelemetry, joined on `tool_id`) give the calls and results:
`tool_name`, `parameters`, `result_status` success|error (unknown or null: unresolved),
`result_summary` (else `error_message`), `duration_ms`, `execution_completed_at`; results
come at the end of their turn in completion order. Without messages, the commands make
one turn per `assistant_turn_index`. `user_input` is the user message when no
UserMessage exists; `agent_output` is used only when no assistant text was recorded.
`token_usage` (`uncached_input_tokens`, `output_tokens`, `cache_read_input_tokens`,
`cache_creation_input_tokens`, `total_cost_usd`) and the run's `total_token_usage` are
the authoritative totals. AgentEnd reason: `crashed` -> error, `max_turns_exhausted` ->
max_turns, `result_summary.is_error` -> error; on the last iteration the run's
`early_stop` -> stopped_early and `final_status` TIMEOUT -> timeout, *_BUDGET_EXCEEDED ->
budget, MAX_TURNS_EXHAUSTED -> max_turns, ERROR -> error. Also read: a minimal shape,
`iterations[].turns[]` with `assistant_text` and `commands` of `{tool_name, parameters,
status, output, duration_ms, tool_id?}` (status ok|success|error|failed|denied, anything
else unresolved).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from ce_runtime import trace as T

FORMATS = ("claude-stream", "claude-session", "coder-eval")
SHELL_TOOLS = frozenset({"exec_command", "shell", "local_shell", "command_execution", "bash"})

Problem = tuple[int, str]


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


def normalize_tool(raw: str, params: Any) -> tuple[str, dict[str, Any]]:
    """(tool, params) as criteria see them; Codex-style shell tools become `Bash`."""
    params = dict(params) if isinstance(params, dict) else {}
    if raw not in SHELL_TOOLS:
        return raw, params
    command = params.pop("command", None)
    cmd = params.pop("cmd", None)
    if command is None:
        command = cmd
    if isinstance(command, list):
        command = shlex.join(str(part) for part in command)
    elif command is not None and not isinstance(command, str):
        command = str(command)
    return "Bash", {"command": command if command is not None else "", **params}


# ---------------------------------------------------------------- the shared builder

class _Builder:
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
        self.warnings.append((line, message))

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


# ---------------------------------------------------------------- helpers

def _json_lines(data: bytes, warnings: list[Problem]):
    """(line number, object) for each non-blank line; bad lines become warnings."""
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            value = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            warnings.append((lineno, f"not JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            warnings.append((lineno, f"expected a JSON object, got {type(value).__name__}"))
            continue
        yield lineno, value


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _float(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else 0.0


def _anthropic_tokens(usage: Any) -> tuple[int, int, int, int]:
    if not isinstance(usage, dict):
        return (0, 0, 0, 0)
    return (_int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
            _int(usage.get("cache_read_input_tokens")),
            _int(usage.get("cache_creation_input_tokens")))


def _datetime(value: Any) -> datetime | None:
    """ISO 8601 -> an aware datetime (a naive one is read as UTC)."""
    if not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _block_text(content: Any) -> str:
    """A tool_result's content: a string, or a list of blocks (text kept, others named)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                parts.append(f"[{block.get('type', 'block')}]")
            else:
                parts.append(str(block))
        return "\n".join(parts)
    return msgspec.json.encode(content).decode()


def _stem_id(name: str) -> str:
    """A trial id from a file name; coder_eval files are all `task.json`: use the folder."""
    if not name:
        return ""
    stem = os.path.splitext(os.path.basename(name))[0]
    if stem == "task":
        parent = os.path.basename(os.path.dirname(os.path.abspath(name)))
        return parent or stem
    return stem


# ---------------------------------------------------------------- Claude Code

class _Claude(_Builder):
    def __init__(self, timed: bool):
        super().__init__("claude-code", timed)
        self.last_stop: Any = None
        self.agent_base = self.snapshot()

    def assistant(self, line: int, message: Any, sub: bool, t: float | None = None) -> None:
        if not isinstance(message, dict):
            self.warn(line, "assistant record without a message object; skipped")
            return
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            self.warn(line, "assistant message content is not a list; skipped")
            return
        model = message.get("model")
        if self.model is None and isinstance(model, str) and not model.startswith("<"):
            self.model = model
        msg_id = message.get("id") if isinstance(message.get("id"), str) else None
        self.begin_message(msg_id, sub, t)
        for block in content:
            if not isinstance(block, dict):
                self.warn(line, "content block is not an object; skipped")
                continue
            kind = block.get("type")
            if kind == "text":
                self.message("assistant", block.get("text"))
            elif kind in ("tool_use", "server_tool_use"):
                self.call(line, block.get("id"), block.get("name"), block.get("input"))
        if "usage" in message:
            self.usage(msg_id, _anthropic_tokens(message.get("usage")))
        if not sub:
            self.last_stop = message.get("stop_reason")

    def user(self, line: int, message: Any, meta: bool) -> None:
        if not isinstance(message, dict):
            self.warn(line, "user record without a message object; skipped")
            return
        content = message.get("content")
        if isinstance(content, str):
            if not meta:
                self.message("user", content)
            return
        if not isinstance(content, list):
            self.warn(line, "user message content is neither a string nor a list; skipped")
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and not meta:
                self.message("user", block.get("text"))
            elif kind == "tool_result":
                status = "error" if block.get("is_error") else "ok"
                self.result(line, block.get("tool_use_id"), status,
                            _block_text(block.get("content")))


def _result_reason(rec: dict[str, Any]) -> tuple[str, str]:
    subtype = rec.get("subtype") if isinstance(rec.get("subtype"), str) else ""
    text = rec.get("result") if isinstance(rec.get("result"), str) else ""
    errors = rec.get("errors")
    if subtype == "success":
        return ("error", text or "is_error") if rec.get("is_error") else ("finished", "")
    if subtype == "error_max_turns":
        return "max_turns", f"num_turns={rec.get('num_turns')}"
    if subtype == "error_max_budget_usd":
        return "budget", subtype
    if isinstance(errors, list) and errors:
        return "error", f"{subtype}: " + "; ".join(map(str, errors))
    return "error", subtype or text or "unknown result"


def import_claude_stream(data: bytes, *, task_id: str | None = None,
                         trial_id: str | None = None, plan_hash: str = "",
                         name: str = "") -> ImportResult:
    """Claude Code `--output-format stream-json` (one JSON object per line)."""
    b = _Claude(timed=False)
    session_id = ""
    last_line, ended = 0, True
    for line, rec in _json_lines(data, b.warnings):
        last_line = line
        kind = rec.get("type")
        if kind == "system":
            if rec.get("subtype") == "init":
                if isinstance(rec.get("model"), str):
                    b.model = b.model or rec["model"]
                session_id = session_id or str(rec.get("session_id") or "")
        elif kind == "assistant":
            b.assistant(line, rec.get("message"), rec.get("parent_tool_use_id") is not None)
            ended = False
        elif kind == "user":
            b.user(line, rec.get("message"), False)
        elif kind == "result":
            if isinstance(rec.get("duration_ms"), int | float):
                b.at(rec["duration_ms"] / 1000.0)
            b.end_turn()
            for denial in rec.get("permission_denials") or []:
                if isinstance(denial, dict):
                    b.deny(denial.get("tool_use_id"))
            # the result's usage and cost cover the query since the previous result
            b.reconcile(b.agent_base, _anthropic_tokens(rec.get("usage")),
                        _float(rec.get("total_cost_usd")))
            b.end_agent(*_result_reason(rec))
            b.agent_base = b.snapshot()
            ended = True
    if not ended:
        b.warn(last_line, "no result record after the last assistant message: "
                          "the agent's end is unknown")
    return b.finish("claude-stream", trial_id or _stem_id(name) or session_id or "imported",
                    task_id or _stem_id(name) or "imported", plan_hash, 0.0)


def import_claude_session(data: bytes, *, task_id: str | None = None,
                          trial_id: str | None = None, plan_hash: str = "",
                          name: str = "") -> ImportResult:
    """A Claude Code session transcript (`projects/<dir>/<session>.jsonl`)."""
    b = _Claude(timed=True)
    seen: set[str] = set()
    t0: datetime | None = None
    session_id = ""
    for line, rec in _json_lines(data, b.warnings):
        ts = _datetime(rec.get("timestamp"))
        if ts is not None and t0 is None:
            t0 = ts
        kind = rec.get("type")
        if kind not in ("user", "assistant"):
            continue  # summary, system, file-history-snapshot, ...: not agent activity
        uuid = rec.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen:
                continue  # a resumed session can repeat entries
            seen.add(uuid)
        if "timestamp" in rec and ts is None:
            b.warn(line, f"unreadable timestamp {rec.get('timestamp')!r}")
        t = None if ts is None or t0 is None else (ts - t0).total_seconds()
        session_id = session_id or str(rec.get("sessionId") or "")
        sub = bool(rec.get("isSidechain"))
        if kind == "assistant":
            b.assistant(line, rec.get("message"), sub, t)
        else:
            b.at(t)
            b.user(line, rec.get("message"), bool(rec.get("isMeta") or rec.get("isCompactSummary")))
    if b.last_stop in ("end_turn", "stop_sequence"):
        b.end_agent("finished", f"inferred: the last message stopped with {b.last_stop}")
    return b.finish("claude-session", trial_id or _stem_id(name) or session_id or "imported",
                    task_id or _stem_id(name) or "imported", plan_hash,
                    t0.timestamp() if t0 else 0.0)


# ---------------------------------------------------------------- coder_eval task.json

_CE_STATUS = {"success": "ok", "ok": "ok", "error": "error", "failure": "error",
              "failed": "error", "denied": "denied"}  # anything else: no result yet


def _ce_tokens(usage: Any) -> tuple[tuple[int, int, int, int], float] | None:
    """coder_eval TokenUsage -> (input, output, cache read, cache creation), cost."""
    if not isinstance(usage, dict):
        return None
    # Its loader reads a legacy `input_tokens` as the uncached input when
    # `uncached_input_tokens` is absent; current files carry both (input is derived).
    uncached = usage.get("uncached_input_tokens", usage.get("input_tokens"))
    tokens = (_int(uncached), _int(usage.get("output_tokens")),
              _int(usage.get("cache_read_input_tokens")),
              _int(usage.get("cache_creation_input_tokens")))
    return tokens, _float(usage.get("total_cost_usd"))


def _ce_command(b: _Builder, cmd: dict[str, Any], clock: Callable) -> None:
    """A CommandTelemetry: the call now, its result at the end of the turn."""
    call_id = b.call(0, cmd.get("tool_id") or cmd.get("call_id"), cmd.get("tool_name"),
                     cmd.get("parameters"))
    status = _CE_STATUS.get(str(cmd.get("result_status", cmd.get("status"))).lower())
    if status is None:
        return  # pending / unknown: unresolved
    output = cmd.get("result_summary", cmd.get("output"))
    if not output and status == "error":
        output = cmd.get("error_message")
    duration = cmd.get("duration_ms")
    duration = float(duration) if isinstance(duration, int | float) else None
    done = clock(cmd.get("execution_completed_at"))
    if done is None and duration is not None:
        started = clock(cmd.get("execution_started_at")) or clock(cmd.get("timestamp"))
        done = None if started is None else started + duration / 1000.0
    b.defer_result(0, call_id, status, "" if output is None else str(output), duration, done)


def _ce_simple_iteration(b: _Builder, where: str, it: dict[str, Any], clock: Callable) -> None:
    """The documented minimal shape: iterations[].turns[] with commands and assistant_text."""
    for j, turn in enumerate(it["turns"]):
        if not isinstance(turn, dict):
            b.warn(0, f"{where}.turns[{j}]: not an object; skipped")
            continue
        b.begin_message(None, False)
        b.message("assistant", turn.get("assistant_text"))
        for cmd in turn.get("commands") or []:
            if isinstance(cmd, dict):
                _ce_command(b, cmd, clock)
        if isinstance(turn.get("token_usage"), dict):
            tokens, cost = _ce_tokens(turn["token_usage"])  # type: ignore[misc]
            b.add_usage(tokens, cost)


def _ce_turn_record(b: _Builder, where: str, it: dict[str, Any], clock: Callable) -> None:
    """A real TurnRecord: `messages` give turns and text, `commands` the calls and results."""
    commands = [c for c in it.get("commands") or [] if isinstance(c, dict)]
    by_id = {c["tool_id"]: c for c in commands if isinstance(c.get("tool_id"), str)}
    messages = [m for m in it.get("messages") or [] if isinstance(m, dict)]
    assistants = [m for m in messages if m.get("role") == "assistant"]

    def tool_ids(m: dict[str, Any]) -> list[str]:
        blocks = sorted((bl for bl in m.get("content_blocks") or [] if isinstance(bl, dict)),
                        key=lambda bl: bl.get("sequence", 0))
        ids = [bl.get("tool_use_id") for bl in blocks if bl.get("block_type") == "tool_use"]
        return [i for i in ids if isinstance(i, str)] or \
            [i for i in m.get("tool_use_ids") or [] if isinstance(i, str)]

    referenced = {i for m in assistants for i in tool_ids(m)}
    by_index: dict[int, list[dict[str, Any]]] = {}
    leftovers = []
    for c in sorted(commands, key=lambda c: c.get("sequence_number", 0)):
        if c.get("tool_id") in referenced:
            continue
        k = c.get("assistant_turn_index")
        if assistants and isinstance(k, int) and 0 <= k < len(assistants):
            by_index.setdefault(k, []).append(c)
        else:
            leftovers.append(c)

    if not any(m.get("role") == "user" for m in messages):
        b.message("user", it.get("user_input"))
    if not assistants:
        # No messages (an agent that records none): the commands alone, one turn per
        # assistant_turn_index, and the final output inside the last turn.
        group: Any = None
        for cmd in leftovers:
            index = cmd.get("assistant_turn_index")
            if isinstance(index, int) and index != group:
                group = index
                b.begin_message(None, False, clock(cmd.get("timestamp")))
            b.at(clock(cmd.get("timestamp")))
            _ce_command(b, cmd, clock)
        b.message("assistant", it.get("agent_output"))
        return
    said = False
    k = 0
    for m in messages:
        role = m.get("role")
        if role == "user":
            b.at(clock(m.get("started_at")))
            b.message("user", m.get("text"))
        elif role == "assistant":
            b.begin_message(m.get("message_id"), m.get("parent_tool_use_id") is not None,
                            clock(m.get("started_at")))
            b.at(clock(m.get("completed_at")))
            blocks = sorted((bl for bl in m.get("content_blocks") or [] if isinstance(bl, dict)),
                            key=lambda bl: bl.get("sequence", 0))
            for bl in blocks:
                if bl.get("block_type") == "text" and isinstance(bl.get("text"), str):
                    said = said or bool(bl["text"].strip())
                    b.message("assistant", bl["text"])
            for call_id in tool_ids(m):
                cmd = by_id.get(call_id)
                if cmd is None:
                    b.warn(0, f"{where}: tool_use {call_id} has no command telemetry")
                    b.call(0, call_id, "unknown", {})
                else:
                    _ce_command(b, cmd, clock)
            for cmd in by_index.get(k, []):
                _ce_command(b, cmd, clock)
            k += 1
            b.usage(None, _ce_message_tokens(m))
        elif role == "reconciliation":
            b.usage(None, _ce_message_tokens(m))
    for cmd in leftovers:  # placed by no message: they stay in the last turn
        b.at(clock(cmd.get("timestamp")))
        _ce_command(b, cmd, clock)
    if not said:
        b.message("assistant", it.get("agent_output"))


def _ce_message_tokens(m: dict[str, Any]) -> tuple[int, int, int, int]:
    return (_int(m.get("input_tokens")), _int(m.get("output_tokens")),
            _int(m.get("cache_read_tokens")), _int(m.get("cache_creation_tokens")))


def _ce_end(it: dict[str, Any], data: dict[str, Any], last: bool) -> tuple[str, str]:
    reason, detail = "finished", ""
    summary = it.get("result_summary")
    if it.get("crashed"):
        reason, detail = "error", str(it.get("crash_reason") or "crashed")
    elif it.get("max_turns_exhausted"):
        reason, detail = "max_turns", f"num_turns={it.get('num_turns')}"
    elif isinstance(summary, dict) and summary.get("is_error"):
        reason, detail = "error", str(summary.get("result") or summary.get("subtype") or "")
    if not last:
        return reason, detail
    status = data.get("final_status")
    early = data.get("early_stop")
    if isinstance(early, dict):
        reason, detail = "stopped_early", str(early.get("reason") or "")
    elif status == "TIMEOUT":
        reason = "timeout"
    elif status in ("TOKEN_BUDGET_EXCEEDED", "COST_BUDGET_EXCEEDED"):
        reason = "budget"
    elif status == "MAX_TURNS_EXHAUSTED":
        reason = "max_turns"
    elif status == "ERROR" and reason == "finished":
        reason, detail = "error", str(data.get("error_message") or "")
    if isinstance(status, str):
        detail = f"coder_eval final_status={status}" + (f": {detail}" if detail else "")
    return reason, detail


def import_coder_eval(data: bytes | str | dict[str, Any], *, task_id: str | None = None,
                      trial_id: str | None = None, plan_hash: str = "",
                      name: str = "") -> ImportResult:
    """A coder_eval `task.json`: an EvaluationResult whose `iterations` are TurnRecords."""
    doc: Any = data
    warnings: list[Problem] = []
    if isinstance(data, bytes | str):
        try:
            doc = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            warnings.append((0, f"not JSON: {exc}"))
            doc = {}
    if not isinstance(doc, dict):
        warnings.append((0, f"expected a JSON object, got {type(doc).__name__}"))
        doc = {}
    agent = doc.get("agent_type") if isinstance(doc.get("agent_type"), str) else "coder-eval"
    b = _Builder(agent, timed=True)
    b.warnings = warnings
    b.model = doc.get("model_used") if isinstance(doc.get("model_used"), str) else None
    iterations = doc.get("iterations", doc.get("turns"))  # `turns` is its legacy alias
    if not isinstance(iterations, list):
        if doc:
            b.warn(0, "no `iterations` list: nothing to import")
        iterations = []
    t0 = _datetime(doc.get("started_at"))
    if t0 is None:
        t0 = next((ts for it in iterations if isinstance(it, dict)
                   for ts in [_datetime(it.get("timestamp"))] if ts is not None), None)

    def clock(value: Any) -> float | None:
        ts = _datetime(value)
        return None if ts is None or t0 is None else (ts - t0).total_seconds()

    run_base = b.snapshot()
    for i, it in enumerate(iterations):
        where = f"iterations[{i}]"
        if not isinstance(it, dict):
            b.warn(0, f"{where}: not an object; skipped")
            continue
        if b.model is None and isinstance(it.get("model_used"), str):
            b.model = it["model_used"]
        base = b.snapshot()
        if isinstance(it.get("turns"), list):
            b.message("user", it.get("user_input"))
            _ce_simple_iteration(b, where, it, clock)
        else:
            _ce_turn_record(b, where, it, clock)
        b.end_turn()
        usage = _ce_tokens(it.get("token_usage"))
        if usage is not None:
            b.reconcile(base, *usage)
        last = i == len(iterations) - 1
        if last and (total := _ce_tokens(doc.get("total_token_usage"))) is not None:
            b.reconcile(run_base, *total)
        b.at(clock(it.get("timestamp")))
        b.end_agent(*_ce_end(it, doc, last))
    own_id = doc.get("task_id") if isinstance(doc.get("task_id"), str) else ""
    return b.finish("coder-eval", trial_id or _stem_id(name) or own_id or "imported",
                    task_id or own_id or _stem_id(name) or "imported", plan_hash,
                    t0.timestamp() if t0 else 0.0)


# ---------------------------------------------------------------- entry points

def detect_format(data: bytes) -> str | None:
    """Tell the formats apart by content; None when it is none of them."""
    text = data.lstrip()
    if not text:
        return None
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, dict) and ("iterations" in doc or "turns" in doc
                                  or ("task_id" in doc and "final_status" in doc)):
        return "coder-eval"
    for _, rec in _json_lines(b"\n".join(text.split(b"\n", 50)[:50]), []):
        kind = rec.get("type")
        if "parentUuid" in rec or "sessionId" in rec or kind in ("summary",
                                                                  "file-history-snapshot"):
            return "claude-session"
        if kind in ("system", "result") or "session_id" in rec \
                or (kind in ("assistant", "user") and "message" in rec):
            return "claude-stream"
    return None


_IMPORTERS = {
    "claude-stream": import_claude_stream,
    "claude-session": import_claude_session,
    "coder-eval": import_coder_eval,
}


class UnknownFormat(ValueError):
    pass


def import_file(path: str, fmt: str = "auto", *, task_id: str | None = None,
                trial_id: str | None = None, plan_hash: str = "") -> ImportResult:
    """Read a transcript and convert it; raises UnknownFormat when `auto` cannot tell."""
    with open(path, "rb") as fh:
        data = fh.read()
    if fmt == "auto":
        detected = detect_format(data)
        if detected is None:
            raise UnknownFormat(f"{path}: not a Claude Code stream-json, session transcript "
                                "or coder_eval task.json (pass --format to force one)")
        fmt = detected
    if fmt not in _IMPORTERS:
        raise UnknownFormat(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return _IMPORTERS[fmt](data, task_id=task_id, trial_id=trial_id, plan_hash=plan_hash,
                           name=path)
