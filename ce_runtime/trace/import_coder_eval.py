"""A coder_eval `task.json` (an EvaluationResult) -> trace events.

The general mapping is in `ce_runtime.trace.importers`; this is the coder_eval part of it.

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

from collections.abc import Callable
from typing import Any

import msgspec

from ce_runtime.store.record import Status
from ce_runtime.trace.import_builder import (
    Builder,
    ImportResult,
    Problem,
    as_float,
    as_int,
    json_problem,
    parse_datetime,
    stem_id,
)

_CE_STATUS = {"success": "ok", "ok": "ok", "error": "error", "failure": "error",
              "failed": "error", "denied": "denied"}  # anything else: no result yet


def _ce_tokens(usage: Any) -> tuple[tuple[int, int, int, int], float] | None:
    """coder_eval TokenUsage -> (input, output, cache read, cache creation), cost."""
    if not isinstance(usage, dict):
        return None
    # Its loader reads a legacy `input_tokens` as the uncached input when
    # `uncached_input_tokens` is absent; current files carry both (input is derived).
    uncached = usage.get("uncached_input_tokens", usage.get("input_tokens"))
    tokens = (as_int(uncached), as_int(usage.get("output_tokens")),
              as_int(usage.get("cache_read_input_tokens")),
              as_int(usage.get("cache_creation_input_tokens")))
    return tokens, as_float(usage.get("total_cost_usd"))


def _ce_command(b: Builder, cmd: dict[str, Any], clock: Callable) -> None:
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


def _ce_simple_iteration(b: Builder, where: str, it: dict[str, Any], clock: Callable) -> None:
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


def _ce_turn_record(b: Builder, where: str, it: dict[str, Any], clock: Callable) -> None:
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
    return (as_int(m.get("input_tokens")), as_int(m.get("output_tokens")),
            as_int(m.get("cache_read_tokens")), as_int(m.get("cache_creation_tokens")))


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
    elif status == Status.TIMEOUT:  # coder_eval's FinalStatus: ce's statuses are its own
        reason = "timeout"
    elif status in (Status.TOKEN_BUDGET_EXCEEDED, Status.COST_BUDGET_EXCEEDED):
        reason = "budget"
    elif status == Status.MAX_TURNS_EXHAUSTED:
        reason = "max_turns"
    elif status == Status.ERROR and reason == "finished":
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
            warnings.append(json_problem(exc, data))
            doc = {}
    if not isinstance(doc, dict):
        warnings.append(Problem(0, f"expected a JSON object, got {type(doc).__name__}"))
        doc = {}
    agent = doc.get("agent_type") if isinstance(doc.get("agent_type"), str) else "coder-eval"
    b = Builder(agent, timed=True)
    b.warnings = warnings
    b.model = doc.get("model_used") if isinstance(doc.get("model_used"), str) else None
    iterations = doc.get("iterations", doc.get("turns"))  # `turns` is its legacy alias
    if not isinstance(iterations, list):
        if doc:
            b.warn(0, "no `iterations` list: nothing to import")
        iterations = []
    t0 = parse_datetime(doc.get("started_at"))
    if t0 is None:
        t0 = next((ts for it in iterations if isinstance(it, dict)
                   for ts in [parse_datetime(it.get("timestamp"))] if ts is not None), None)

    def clock(value: Any) -> float | None:
        ts = parse_datetime(value)
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
    return b.finish("coder-eval", trial_id or stem_id(name) or own_id or "imported",
                    task_id or own_id or stem_id(name) or "imported", plan_hash,
                    t0.timestamp() if t0 else 0.0)
