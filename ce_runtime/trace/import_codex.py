"""Codex session logs -> trace events: the rollout Codex writes under
$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl (`{"timestamp", "type", "payload"}` per
line), as ce's own codex agent reads it live (ce_agents/codex.py), so that a session
recorded elsewhere maps to the trace a ce run of it would have.

- A turn per model answer: the first answer item (an assistant message, reasoning, a
  tool call) after the previous answer was complete (its usage recorded, or a tool's
  output given back to the model) opens the next turn.
- `function_call` / `custom_tool_call` / `local_shell_call` -> tool calls, normalized as
  every agent's are (`exec_command` is Bash with the command as the model wrote it,
  `apply_patch` is Edit with the patch); their outputs -> results: a command is an error
  when it exited non-zero, a patch when Codex did not apply it.
- Usage: `token_usage_record` per answer, else the growth of `token_count`'s running
  totals (older logs). Codex's input count includes the cache's parts: the trace has
  the new input and the cache reads apart. Priced from ce's rate card by the session's
  model (`thread_settings_applied`, `turn_context`); $0 for a model the card lacks.
- User messages: the user's own text; the harness's (environment context,
  instructions) is skipped. `task_complete` ends the agent (its last message as the
  detail); `turn_aborted` and `error` end it in an error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ce_runtime import pricing
from ce_runtime.trace.codex_log import (
    ANSWER_ITEMS,
    EXIT,
    PATCH_OK,
    UNSUPPORTED,
    call_params,
    output_with_exit,
    tool_output_text,
)
from ce_runtime.trace.import_builder import (
    Builder,
    ImportResult,
    as_int,
    json_lines,
    parse_datetime,
    stem_id,
)

HARNESS_TEXT = ("<environment_context>", "<user_instructions>", "<turn_aborted>")
TOTALS = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens")


class _Codex(Builder):
    def __init__(self) -> None:
        super().__init__("codex", timed=True)
        self.answer = 0  # model answers seen: a turn's id
        self.answered = True  # the current answer is complete: the next item opens a turn
        self.usage_records = False  # the log has usage per answer
        self.totals = dict.fromkeys(TOTALS, 0)  # token_count's running totals so far
        self.patches: dict[str, str] = {}  # apply_patch call id -> Codex's FileChange status
        self.raw: dict[str, str] = {}  # call id -> the tool as Codex named it
        self.rates: pricing.Rates | None = None

    def set_model(self, model: Any) -> None:
        if isinstance(model, str) and model and self.model is None:
            self.model = model
            self.rates = pricing.lookup(model)

    def item(self, line: int, p: dict[str, Any]) -> None:
        kind = p.get("type")
        if kind in ANSWER_ITEMS and (kind != "message" or p.get("role") == "assistant"):
            if self.answered or not self.turn_open:
                self.answer += 1
                self.answered = False
            self.begin_message(self.answer, False)
        call_id = p.get("call_id") or p.get("id")
        call_id = call_id if isinstance(call_id, str) else None
        if kind == "message":
            text = "".join(str(c.get("text") or "") for c in p.get("content") or ()
                           if isinstance(c, dict))
            if p.get("role") == "assistant":
                self.message("assistant", text)
            elif p.get("role") == "user" and not text.lstrip().startswith(HARNESS_TEXT):
                self.message("user", text)
        elif kind == "function_call":
            self._call(line, call_id, p.get("name"), call_params(p.get("arguments")))
        elif kind == "custom_tool_call":
            name = p.get("name")
            self._call(line, call_id, name, {"patch" if name == "apply_patch" else "input":
                                             p.get("input") or ""})
        elif kind == "local_shell_call":
            action = p.get("action") if isinstance(p.get("action"), dict) else {}
            self._call(line, call_id, "local_shell", {"command": action.get("command") or ""})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.answered = True  # the model sees it in its next call
            if call_id in self.results or call_id not in self.calls:
                if call_id not in self.calls:
                    self.warn(line, f"output of an unknown tool call {call_id}; skipped")
                return
            output = tool_output_text(p.get("output"))
            if self.raw.get(call_id) == "apply_patch":
                ok = self.patches.get(call_id) == "completed" or bool(PATCH_OK.match(output))
            else:
                code = EXIT.search(output)
                ok = (code is None or code.group(1) == "0") and not UNSUPPORTED.match(output)
            self.result(line, call_id, "ok" if ok else "error", output)

    def _call(self, line: int, call_id: str | None, name: Any, params: dict[str, Any]) -> None:
        call_id = self.call(line, call_id, name, params)
        self.raw[call_id] = name if isinstance(name, str) else "unknown"

    def completed(self, line: int, item: dict[str, Any]) -> None:
        """Codex's own record of a tool's run: a command's output and exit status, an
        apply_patch's outcome."""
        kind, item_id = item.get("type"), item.get("id")
        if not isinstance(item_id, str):
            return
        if kind == "FileChange":
            self.patches[item_id] = str(item.get("status"))
        elif kind == "CommandExecution" and item_id in self.calls \
                and item_id not in self.results:
            code = item.get("exit_code")
            self.result(line, item_id, "ok" if code == 0 else "error",
                        output_with_exit(item.get("aggregated_output"), code))

    def spend(self, u: dict[str, Any]) -> None:
        cached = as_int(u.get("cached_input_tokens"))
        written = as_int(u.get("cache_write_input_tokens"))
        fresh = max(0, as_int(u.get("input_tokens")) - cached - written)
        output = as_int(u.get("output_tokens"))
        cost = self.rates.cost(fresh, output, cached, written) if self.rates else 0.0
        self.add_usage((fresh, output, cached, written), cost)

    def running_totals(self, total: dict[str, Any]) -> None:
        delta = {k: as_int(total.get(k)) - v for k, v in self.totals.items()}
        if any(delta.values()):
            self.totals = {k: as_int(total.get(k)) for k in self.totals}
            self.spend({k: max(0, v) for k, v in delta.items()})


def import_codex_session(data: bytes, *, task_id: str | None = None,
                         trial_id: str | None = None, plan_hash: str = "",
                         name: str = "") -> ImportResult:
    """A Codex session log (`sessions/.../rollout-*.jsonl`)."""
    b = _Codex()
    t0: datetime | None = None
    session_id = ""
    for line, rec in json_lines(data, b.warnings):
        ts = parse_datetime(rec.get("timestamp"))
        if ts is not None and t0 is None:
            t0 = ts
        if "timestamp" in rec and ts is None:
            b.warn(line, f"unreadable timestamp {rec.get('timestamp')!r}")
        b.at(None if ts is None or t0 is None else (ts - t0).total_seconds())
        kind, p = rec.get("type"), rec.get("payload")
        if not isinstance(p, dict):
            b.warn(line, f"{kind} record without a payload object; skipped")
            continue
        if kind == "session_meta":
            session_id = session_id or str(p.get("id") or "")
        elif kind == "turn_context":
            b.set_model(p.get("model"))
        elif kind == "response_item":
            b.item(line, p)
        elif kind == "token_usage_record":
            b.answered, b.usage_records = True, True
            b.spend(p.get("usage") if isinstance(p.get("usage"), dict) else {})
        elif kind == "event_msg":
            sub = p.get("type")
            if sub == "thread_settings_applied":
                settings = p.get("thread_settings")
                b.set_model(settings.get("model") if isinstance(settings, dict) else None)
            elif sub == "item_completed" and isinstance(p.get("item"), dict):
                b.completed(line, p["item"])
            elif sub == "token_count" and isinstance(p.get("info"), dict) \
                    and not b.usage_records:
                b.answered = True
                total = p["info"].get("total_token_usage")
                b.running_totals(total if isinstance(total, dict) else {})
            elif sub == "task_complete":
                last = p.get("last_agent_message")
                b.end_agent("finished", last if isinstance(last, str) else "")
            elif sub in ("turn_aborted", "error"):
                why = p.get("message") or p.get("reason") or sub
                b.end_agent("error", f"{sub}: {why}" if why != sub else sub)
    return b.finish("codex-session", trial_id or stem_id(name) or session_id or "imported",
                    task_id or stem_id(name) or "imported", plan_hash,
                    t0.timestamp() if t0 else 0.0)
