"""The `openai` agent: ce's own small tool loop over any OpenAI-compatible endpoint (the
openai package, Chat Completions with function tools), for models no agent CLI serves.

Four tools, each run in the trial's sandbox as the agent:
  shell {command, timeout?}          a shell command in the workspace
  read {path}                        a file's text
  write {path, content}              a file, parents created
  edit {path, old, new}              the first `old` replaced by `new`
The trace records them as Bash, Read, Write and Edit (`T.normalize_tool`; raw_tool
keeps shell, read, ...). Paths are relative to the workspace (or absolute). The loop ends when the model answers
without a tool call, at `run_limits.max_turns` model calls, or on a stop request (the
calls of the answer it cut off are in the trace, unresolved, as other agents' are).
Endpoint: the task's `agent.base_url` / `agent.api_key_env`, else OPENAI_BASE_URL /
OPENAI_API_KEY, else the scripted model server (`--scripted-model`). The loop itself
runs in ce, so the endpoint is called from the host; only the tools run in the sandbox.
Each call's usage is priced from ce's rate card or `agent.pricing` (the API names no
price), its cached prompt tokens apart from the new input.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

from ce_agents.cli_agent import Events
from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import (
    AGENT,
    AgentOutcome,
    AgentRequest,
    EventSink,
    SandboxError,
    SandboxFileError,
)
from ce_runtime.trace import events as T

DEFAULT_MODEL = "gpt-4.1"
OUTPUT_LIMIT = 30_000
SYSTEM = ("You are a coding agent working in a sandboxed workspace ({workspace}). Use the "
          "tools to inspect and change files and to run commands; answer without a tool "
          "call when the task is done.")


def _fn(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": required}}}


TOOLS = [
    _fn("shell", "Run a shell command in the workspace.",
        {"command": {"type": "string"}, "timeout": {"type": "number"}}, ["command"]),
    _fn("read", "Read a text file.", {"path": {"type": "string"}}, ["path"]),
    _fn("write", "Write a file (parents are created).",
        {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]),
    _fn("edit", "Replace the first occurrence of `old` with `new` in a file.",
        {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
        ["path", "old", "new"]),
]


class UnreadableReply(Exception):
    """The model answered a body that is not the API's (not JSON, no choices)."""

    def __init__(self, detail: str):
        super().__init__(f"openai: the model's reply is not the API's: {detail}")


class OpenAIAgent:
    name = "openai"
    dialog = True  # a simulated dialog continues the conversation
    default_model = DEFAULT_MODEL
    priced_by_ce = True  # its tokens are priced from ce's rate card (ce_runtime.pricing)

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome:
        events = Events(sink)
        model, rates = pricing.agent_rates(request.agent, DEFAULT_MODEL)
        events.emit(T.AgentStart, self.name, model)
        try:
            import openai
            from openai import AsyncOpenAI

            # the loop runs in ce (only its tools run in the sandbox): the endpoint as the
            # host reaches it, never routed into the sandbox's network
            base = ((request.model_endpoint or {}).get("base_url")
                    or "https://api.openai.com/v1").rstrip("/")
            if not base.endswith("/v1"):
                base += "/v1"
            client = AsyncOpenAI(base_url=base, max_retries=1, timeout=600,
                                 api_key=(request.model_endpoint or {}).get("api_key")
                                 or "none")
        except Exception as exc:
            return self._end(events, AgentOutcome("error", f"openai set-up: {exc}"))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM.format(workspace=request.workspace)},
            {"role": "user", "content": request.prompt or ""}]
        max_turns = (request.limits or {}).get("max_turns")
        try:
            while True:
                if stop.is_set():
                    return self._end(events, AgentOutcome("stopped"))
                if max_turns is not None and events.turn >= max_turns:
                    return self._end(events, AgentOutcome(
                        "max_turns", f"stopped after {events.turn} model calls"))
                events.turn_start()
                try:
                    reply = await self._until_stopped(client.chat.completions.create(
                        model=model, messages=messages, tools=TOOLS), stop)
                except (ValueError, TypeError) as exc:  # a body that is not JSON, or not
                    raise UnreadableReply(f"{type(exc).__name__}: {exc}") from exc  # the API's
                if reply is None:  # stopped while the model was answering
                    events.turn_end()
                    return self._end(events, AgentOutcome("stopped"))
                if not getattr(reply, "choices", None):
                    raise UnreadableReply(f"no choices in {str(reply)[:200]!r}")
                if reply.usage is not None:
                    events.emit(T.Usage, **_usage(reply.usage, rates))
                message = reply.choices[0].message
                if message.content:
                    events.emit(T.Message, "assistant", message.content)
                calls = message.tool_calls or []
                messages.append(message.model_dump(exclude_none=True))
                for call in calls:
                    if stop.is_set():  # asked for, never run: in the trace, unresolved
                        events.call(call.id, call.function.name, _args(call))
                        continue
                    output = await self._until_stopped(
                        self._tool(request, events, call), stop)
                    if output is None:  # stopped while it ran: unresolved
                        continue
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": output})
                events.turn_end()
                if not calls:
                    nxt = await request.dialog.reply(message.content or "") \
                        if request.dialog is not None else None
                    if nxt is None:
                        return self._end(events, AgentOutcome("finished"))
                    messages.append({"role": "user", "content": nxt})
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, openai.APIError | UnreadableReply):  # the model call failed
                status = getattr(exc, "status_code", None)  # (an APIError retried once)
                events.emit(T.ModelError, str(exc) or type(exc).__name__,
                            status if isinstance(status, int) else None)
            events.turn_end()
            return self._end(events, AgentOutcome("error", str(exc) if isinstance(
                exc, UnreadableReply) else f"{type(exc).__name__}: {exc}"))

    @staticmethod
    async def _until_stopped(work: Any, stop: asyncio.Event) -> Any:
        """What a model call or a tool gives, or None when a stop (a timeout, a budget)
        came first: it is cancelled (a command killed), as a CLI ends when told to stop,
        rather than run on until the grace period kills the whole agent."""
        run = asyncio.ensure_future(work)
        halt = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({run, halt}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            halt.cancel()
            if not run.done():
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run
        return None if run.cancelled() else run.result()

    @staticmethod
    def _end(events: Events, outcome: AgentOutcome) -> AgentOutcome:
        events.emit(T.AgentEnd, outcome.reason, outcome.detail)
        return outcome

    async def _tool(self, request: AgentRequest, events: Events, call: Any) -> str:
        name = call.function.name
        args = _args(call)
        events.call(call.id, name, args)
        box = request.sandbox
        try:
            if name == "shell":
                res = await box.exec(str(args.get("command", "")), view=AGENT,
                                     timeout=float(args.get("timeout") or 600),
                                     max_output=OUTPUT_LIMIT)
                output = res.stdout + res.stderr
                if res.timed_out:
                    output += "\n[timed out]"
                elif res.exit_code:
                    output += f"\n[exit code {res.exit_code}]"
                events.result(call.id, res.exit_code == 0 and not res.timed_out, output)
                return output
            path = os.path.join(request.workspace, str(args.get("path", "")))
            if name == "read":
                text = (await box.read_file(path, OUTPUT_LIMIT)).decode("utf-8", "replace")
                events.result(call.id, True, text)
                return text
            if name == "write":
                await box.write_file(path, str(args.get("content", "")).encode())
                events.result(call.id, True, f"wrote {args.get('path')}")
                return f"wrote {args.get('path')}"
            if name == "edit":
                text = (await box.read_file(path)).decode("utf-8")
                old = str(args.get("old", ""))
                if not old or old not in text:
                    events.result(call.id, False, "`old` not found")
                    return "error: `old` not found in the file"
                await box.write_file(path, text.replace(old, str(args.get("new", "")), 1)
                                     .encode())
                events.result(call.id, True, f"edited {args.get('path')}")
                return f"edited {args.get('path')}"
            events.result(call.id, False, f"no tool named {name}")
            return f"error: no tool named {name}"
        except (SandboxFileError, SandboxError, UnicodeDecodeError) as exc:
            events.result(call.id, False, str(exc))
            return f"error: {exc}"


def _args(call: Any) -> dict[str, Any]:
    try:
        args = json.loads(call.function.arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def _usage(u: Any, rates: pricing.Rates | None) -> dict[str, Any]:
    """A call's Usage fields: `prompt_tokens` include the cached prefix, priced apart."""
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    fresh = max(0, int(u.prompt_tokens or 0) - cached)
    output = int(u.completion_tokens or 0)
    return {"input_tokens": fresh, "output_tokens": output, "cache_read_tokens": cached,
            "cost_usd": rates.cost(fresh, output, cached) if rates else 0.0}
