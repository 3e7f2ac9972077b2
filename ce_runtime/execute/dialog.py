"""Simulated dialogs (`simulation:`): a second model plays the user.

The task's prompt is the user's opening message. After each of the agent's replies the
simulated user (a Messages API call with the persona, the goal and the constraints as its
system prompt, through the same model plumbing as the agent: the scripted server's
`user_turns` under `--scripted-model`) says the next thing, until one of, in this order:
every criterion passes (`stop_on_criteria_pass`, checked after each turn when
`check_criteria` is every_turn or both), the user says the stop token, `max_turns`
exchanges, the dialog's `max_total_tokens`. Every user message is a `user` Message in
the trace, so judges see the whole dialog with `include_dialog`; task.json keeps how the
dialog went (`dialog`: turns, how it ended, the per-turn checks).

An agent holds a dialog when its class says `dialog = True` (claude-code continues its
session; openai continues its loop): it calls `request.dialog.reply(text)` after each
reply and stops when that returns None.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from ce_runtime.model_server import SIMULATED_USER
from ce_runtime.store.record import DialogRecord
from ce_runtime.trace import events as T

SYSTEM = (SIMULATED_USER + " You are role-playing the USER of an AI coding assistant, not "
          "the assistant. Stay in character.\n\nWho you are:\n{persona}\n\nWhat you want:\n"
          "{goal}\n{constraints}\nReply with your next message to the assistant only. When "
          "your goal is met (or cannot be met), end your message with {stop}.")


class Dialog:
    def __init__(self, simulation: Any, endpoint: dict[str, Any], opening: str,
                 sink: Any, check: Callable[[], Awaitable[bool]] | None):
        self.sim = simulation
        self.endpoint = endpoint
        self.sink = sink
        self.check = check
        self.history: list[tuple[str, str]] = [("user", opening)]  # (speaker, text)
        self.turns = 0
        self.ended_by: str | None = None
        self.checks: list[dict[str, Any]] = []

    def user_said(self, text: str) -> None:
        self.sink.emit(T.Message(self.sink.clock(), "user", text))

    async def reply(self, agent_text: str) -> str | None:
        """The user's next message after the agent said `agent_text`, or None: the
        dialog is over (`ended_by` says why)."""
        self.turns += 1
        self.history.append(("agent", agent_text))
        s = self.sim
        if self.check is not None and s.check_criteria in ("every_turn", "both"):
            passed = await self.check()
            self.checks.append({"turn": self.turns, "passed": passed})
            if passed and s.stop_on_criteria_pass:
                return self._end("criteria_pass")
        if self.turns >= s.max_turns:
            return self._end("max_turns")
        if s.max_total_tokens and self._tokens() >= s.max_total_tokens:
            return self._end("max_total_tokens")
        text = await asyncio.to_thread(self._ask)
        stopped = s.stop_token in text
        text = text.replace(s.stop_token, "").strip()
        if text:
            self.history.append(("user", text))
            self.user_said(text)
        if stopped:
            return self._end("stop_token")
        return text or None

    def _end(self, why: str) -> None:
        self.ended_by = why
        return None

    def _tokens(self) -> int:
        view = getattr(self.sink, "view", None)
        return (view.input_tokens + view.output_tokens) if view is not None else 0

    def _ask(self) -> str:
        s = self.sim
        constraints = "".join(f"- {c}\n" for c in s.constraints)
        system = SYSTEM.format(persona=s.persona.strip(), goal=s.goal.strip(),
                               constraints=f"\nRules you follow:\n{constraints}"
                               if constraints else "", stop=s.stop_token)
        messages: list[dict[str, str]] = []
        pending = [f"You opened the conversation with:\n{self.history[0][1]}"]
        for speaker, text in self.history[1:]:
            if speaker == "agent":
                pending.append(f"The assistant replied:\n{text}")
            else:
                messages.append({"role": "user", "content": "\n\n".join(pending)})
                messages.append({"role": "assistant", "content": text})
                pending = []
        messages.append({"role": "user", "content": "\n\n".join(pending)})
        model = re.sub(r"^(?:[\w-]+[./])+(?=claude)", "", s.model or "claude-sonnet-4-6")
        body = {"model": model, "max_tokens": 1000, "system": system, "messages": messages}
        base = (self.endpoint.get("base_url") or "https://api.anthropic.com").rstrip("/")
        req = urllib.request.Request(
            base + "/v1/messages", data=json.dumps(body).encode(), method="POST",
            headers={"content-type": "application/json",
                     "x-api-key": self.endpoint.get("api_key") or "",
                     "anthropic-version": "2023-06-01"})
        try:
            with urllib.request.urlopen(req, timeout=300) as resp:
                reply = json.loads(resp.read())
        except (urllib.error.URLError, TimeoutError, OSError, json.JSONDecodeError) as exc:
            raise DialogError(f"the simulated user's model failed: {exc}") from exc
        return "".join(b.get("text", "") for b in reply.get("content", [])
                       if isinstance(b, dict))

    def record(self) -> DialogRecord:
        """How the dialog went, for the trial's record (task.json's `dialog`)."""
        return DialogRecord(turns=self.turns, ended_by=self.ended_by or "agent",
                            checks=self.checks,
                            user_messages=sum(1 for who, _ in self.history if who == "user"))


class DialogError(Exception):
    pass
