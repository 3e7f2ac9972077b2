"""Claude Code transcripts -> trace events: `claude -p --output-format stream-json` output
and the session transcripts Claude Code writes under $CLAUDE_CONFIG_DIR/projects/.

The two share the record shapes (assistant and user messages with content blocks); they
differ in framing: stream-json has system/result records and no timestamps, sessions
have timestamps and no result. The mapping is in `ce_runtime.trace.importers`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from ce_runtime.trace.claude_log import api_retry
from ce_runtime.trace.import_builder import (
    Builder,
    ImportResult,
    as_float,
    as_int,
    json_lines,
    parse_datetime,
    stem_id,
)


def _anthropic_tokens(usage: Any) -> tuple[int, int, int, int]:
    if not isinstance(usage, dict):
        return (0, 0, 0, 0)
    return (as_int(usage.get("input_tokens")), as_int(usage.get("output_tokens")),
            as_int(usage.get("cache_read_input_tokens")),
            as_int(usage.get("cache_creation_input_tokens")))


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


class _Claude(Builder):
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
    for line, rec in json_lines(data, b.warnings):
        last_line = line
        kind = rec.get("type")
        if kind == "system":
            if rec.get("subtype") == "init":
                if isinstance(rec.get("model"), str):
                    b.model = b.model or rec["model"]
                session_id = session_id or str(rec.get("session_id") or "")
            elif rec.get("subtype") == "api_retry":
                b.model_error(api_retry(rec))
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
                        as_float(rec.get("total_cost_usd")))
            b.end_agent(*_result_reason(rec))
            b.agent_base = b.snapshot()
            ended = True
    if not ended:
        b.warn(last_line, "no result record after the last assistant message: "
                          "the agent's end is unknown")
    return b.finish("claude-stream", trial_id or stem_id(name) or session_id or "imported",
                    task_id or stem_id(name) or "imported", plan_hash, 0.0)


def import_claude_session(data: bytes, *, task_id: str | None = None,
                          trial_id: str | None = None, plan_hash: str = "",
                          name: str = "") -> ImportResult:
    """A Claude Code session transcript (`projects/<dir>/<session>.jsonl`)."""
    b = _Claude(timed=True)
    seen: set[str] = set()
    t0: datetime | None = None
    session_id = ""
    cost: float | None = None  # the session's own total (its last `cost-state` record)
    for line, rec in json_lines(data, b.warnings):
        ts = parse_datetime(rec.get("timestamp"))
        if ts is not None and t0 is None:
            t0 = ts
        kind = rec.get("type")
        if kind == "cost-state" and isinstance(rec.get("totalCostUSD"), int | float):
            cost = float(rec["totalCostUSD"])
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
    if cost is not None:  # messages carry tokens, no cost: the CLI's total prices them
        b.end_turn()
        b.reconcile(b.agent_base, tuple(b.tokens), cost)  # type: ignore[arg-type]
    if b.last_stop in ("end_turn", "stop_sequence"):
        b.end_agent("finished", f"inferred: the last message stopped with {b.last_stop}")
    return b.finish("claude-session", trial_id or stem_id(name) or session_id or "imported",
                    task_id or stem_id(name) or "imported", plan_hash,
                    t0.timestamp() if t0 else 0.0)
