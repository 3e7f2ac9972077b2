"""The `claude-code` agent: the real Claude Code CLI (the one claude-agent-sdk bundles),
driven through the SDK, its process started inside the trial's sandbox.

The SDK wants to spawn the CLI itself; it is given the sandbox's launcher as the CLI's
path, so the CLI and every tool it runs live in the sandbox (under bwrap: the model-only
network, the host read-only). Its configuration directory is fresh per trial
(`$HOME/.claude` of the sandbox's private HOME), and nothing of the host's settings,
credentials or telemetry reaches it.

What the task sets: `agent.model`, `permission_mode`, `allowed_tools` (auto-approved),
`disallowed_tools`, `sdk_options.tools` (the tool set offered), the system prompt
(Claude Code's own preset, with `system_prompt`/`system_prompt_file` appended, or
replacing it with `system_prompt_mode: replace`), `setting_sources` (default: project,
so the workspace's `.claude/skills`, settings and `.mcp.json` load), `plugins`,
`claude_settings`, `context_window`, `run_limits.max_turns`, and the `sdk_options`
pass-through (checked at compile time against ClaudeAgentOptions).

Every SDK message becomes trace events: a turn per model call (opened when its reply
starts, the first when the prompt is sent, and open until the next call's reply starts,
tool executions included: a CLI that ends after a call's tools, at max_turns or by a
stop, opens no turn without a model call), assistant text, tool calls with their ids and
inputs, results with their status (`denied` when a permission was refused, `unresolved`
for a tool the stop cut off while it ran: the CLI says "rejected" for it), token usage
per model call (from the stream's own message_start/message_delta, which the CLI's
per-block snapshots undercount), the cost the CLI computes, the session id and the
number of turns. The CLI says what the session cost only in its result, at the end: so
that `run_limits.max_usd` stops it in the call that spends it (as it stops the agents ce
prices), each call is priced as its usage streams in, from ce's rate card (the list
prices the CLI uses too); the result then adds what the CLI counted beyond that (its
side requests, a model off the card). A stop request (early stop, a budget) interrupts the CLI; the runner
kills it (and everything it started) if it does not end within its grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from typing import Any

from ce_agents.cli_agent import TurnEvents
from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import AGENT, AgentOutcome, AgentRequest, EventSink
from ce_runtime.trace import events as T
from ce_runtime.trace.claude_log import api_retry

CLI_ENV = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
           "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
           "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
           "IS_SANDBOX": "1"}  # ce's sandbox: bypassPermissions works as root inside
DENIED = re.compile(r"(permission|haven't granted|not allowed|denied)", re.IGNORECASE)
# what the CLI answers for a tool its interrupt (ce's stop, a timeout) cut off: said as a
# refusal, "corrected" to a call stopped while running; it never completed (unresolved)
CUT_OFF = "this call was stopped while running, not refused before it ran"
DEFAULT_MODEL = "claude-sonnet-4-6"


def bundled_cli() -> str:
    """The CLI inside the claude-agent-sdk wheel."""
    import claude_agent_sdk

    path = os.path.join(os.path.dirname(claude_agent_sdk.__file__), "_bundled", "claude")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"claude-agent-sdk has no bundled CLI at {path}")
    return path


def model_name(model: str | None) -> str:
    """`anthropic.claude-sonnet-4-6` (coder_eval's routing prefix) -> claude-sonnet-4-6."""
    return re.sub(r"^(?:[\w-]+[./])+(?=claude)", "", model or DEFAULT_MODEL)


class ClaudeCodeAgent:
    name = "claude-code"
    dialog = True  # a simulated dialog continues the same session, query after query

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome:
        try:
            import claude_agent_sdk as sdk
        except ImportError:
            sink.emit(T.AgentStart(sink.clock(), self.name, request.agent.get("model")))
            return AgentOutcome("error", "claude-code needs claude-agent-sdk")
        session = _Session(request, sink)
        sink.emit(T.AgentStart(sink.clock(), self.name, model_name(request.agent.get("model"))))
        try:
            options = await self._options(sdk, request, session)
        except Exception as exc:
            return self._end(sink, AgentOutcome("error", f"claude-code set-up: {exc}"))
        client = sdk.ClaudeSDKClient(options)
        interrupt = asyncio.ensure_future(self._interrupt_on(stop, client, session))
        try:
            await client.connect()
            session.turn_start()
            await client.query(request.prompt or "")
            async for message in client.receive_response():
                session.on(sdk, message)
            while request.dialog is not None and not stop.is_set() and \
                    session.result is not None and not session.result.is_error:
                reply = await request.dialog.reply(session.last_text)
                if reply is None:
                    break
                session.turn_end()
                session.turn_start()
                session.result = None
                await client.query(reply)
                async for message in client.receive_response():
                    session.on(sdk, message)
            outcome = session.outcome(stop)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            tail = "".join(session.stderr)[-1500:].strip()
            outcome = AgentOutcome("error", f"{type(exc).__name__}: {exc}"
                                   + (f"; stderr: {tail}" if tail else ""))
        finally:
            interrupt.cancel()
            with contextlib.suppress(Exception):
                await asyncio.shield(client.disconnect())
        session.turn_end()
        return self._end(sink, outcome)

    def _end(self, sink: EventSink, outcome: AgentOutcome) -> AgentOutcome:
        sink.emit(T.AgentEnd(sink.clock(), outcome.reason, outcome.detail))
        return outcome

    @staticmethod
    async def _interrupt_on(stop: asyncio.Event, client: Any, session: _Session) -> None:
        await stop.wait()
        session.stopped = True
        with contextlib.suppress(Exception):
            await client.interrupt()

    async def _options(self, sdk: Any, request: AgentRequest, session: _Session) -> Any:
        agent, box = request.agent, request.sandbox
        endpoint = request.model_endpoint or {}
        base_url = endpoint.get("base_url") or "https://api.anthropic.com"
        host, port = _host_port(base_url)
        if host in ("127.0.0.1", "localhost"):
            base_url = await box.route_model(host, port)
        env = box.env(AGENT)
        home = env.get("HOME", "/tmp")
        secret = {"ANTHROPIC_API_KEY": endpoint.get("api_key") or ""}
        for name, value in (endpoint.get("env") or {}).items():  # bedrock and the like
            secret[name] = value
        cli_env = {**CLI_ENV, "ANTHROPIC_BASE_URL": base_url,
                   "CLAUDE_CONFIG_DIR": f"{home}/.claude"}
        if agent.get("context_window"):
            cli_env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(agent["context_window"])
        launcher = box.launcher([bundled_cli()], {**env, **cli_env}, forward=list(secret))
        sdk_options = dict(agent.get("sdk_options") or {})
        disallowed = list(agent.get("disallowed_tools") or [])
        if "ToolSearch" not in disallowed:  # the same tool set on every backend
            disallowed.append("ToolSearch")
        limits = request.limits or {}
        settings = agent.get("claude_settings")
        if isinstance(settings, dict):
            import json

            settings = json.dumps(settings)
        return sdk.ClaudeAgentOptions(
            cwd=box.workspace, cli_path=launcher, model=model_name(agent.get("model")),
            permission_mode=agent.get("permission_mode") or "acceptEdits",
            allowed_tools=list(agent.get("allowed_tools") or []),
            disallowed_tools=disallowed, system_prompt=_system_prompt(request),
            setting_sources=agent.get("setting_sources") if agent.get("setting_sources")
            is not None else ["project"],
            max_turns=limits.get("max_turns"), env={**cli_env, **secret},
            stderr=session.stderr.append, include_partial_messages=True,
            plugins=_plugins(agent.get("plugins"), request), settings=settings,
            **sdk_options)


def _system_prompt(request: AgentRequest) -> Any:
    agent = request.agent
    text = agent.get("system_prompt")
    if text is None and agent.get("system_prompt_file"):
        with open(os.path.join(request.task_dir, agent["system_prompt_file"]),
                  encoding="utf-8") as fh:
            text = fh.read()
    if agent.get("system_prompt_mode") == "replace" and text is not None:
        return text
    preset: dict[str, Any] = {"type": "preset", "preset": "claude_code",
                              "exclude_dynamic_sections": True}
    if text is not None:
        preset["append"] = text
    return preset


def _plugins(plugins: Any, request: AgentRequest) -> list[dict[str, Any]]:
    out = []
    for plugin in plugins or []:
        item = {"type": "local", **plugin}  # the SDK's only type; it fails on a missing one
        path = item.get("path")
        if isinstance(path, str):
            path = os.path.expandvars(os.path.expanduser(path))
            if not os.path.isabs(path):
                path = os.path.join(request.task_dir, path)
            item["path"] = request.sandbox.share(path)
        out.append(item)
    return out


def _host_port(url: str) -> tuple[str, int]:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    return parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)


class _Session(TurnEvents):
    """Maps the SDK's messages to trace events as they arrive."""

    def __init__(self, request: AgentRequest, sink: EventSink):
        super().__init__(sink)
        self.stderr: list[str] = []
        self.result: Any = None
        self.session_id: str | None = None
        self.stopped = False
        self.calls: set[str] = set()
        self.usage: dict[str, dict[str, int]] = {}  # message id -> its usage so far
        self.last_text = ""  # the agent's last words (what a simulated user answers)
        self.cost = 0.0  # the session's cost recorded so far (results are cumulative)
        self.model = model_name(request.agent.get("model"))
        self.rates: dict[str, pricing.Rates | None] = {}  # model -> its card rates
        self.priced: dict[str, pricing.Rates | None] = {}  # message id -> its rates
        self.turn_calls = 0  # model calls answered in the open turn (one turn each)
        self.current: dict[str | None, str] = {}  # thread -> the message it streams

    def turn_start(self) -> None:
        if not self.open:
            self.turn_calls = 0
        super().turn_start()

    def _next_turn(self) -> None:
        self.turn_end()
        self.turn_start()

    def on(self, sdk: Any, message: Any) -> None:
        if isinstance(message, sdk.StreamEvent):
            self._stream(message.event, message.parent_tool_use_id)
        elif isinstance(message, sdk.SystemMessage):
            if message.subtype == "init":
                self.session_id = message.data.get("session_id")
                self.emit(T.Message, "system", f"claude-code session {self.session_id} "
                          f"(model {message.data.get('model')}, tools: "
                          f"{', '.join(message.data.get('tools') or [])})")
            elif message.subtype == "api_retry":  # a model call failed; the CLI retries it
                self.emit(T.ModelError, **api_retry(message.data))
        elif isinstance(message, sdk.AssistantMessage):
            if message.parent_tool_use_id:
                return  # a sub-agent's message: its tool calls are its own
            self.turn_start()
            for block in message.content:
                if isinstance(block, sdk.TextBlock) and block.text:
                    self.last_text = block.text
                    self.emit(T.Message, "assistant", block.text)
                elif isinstance(block, sdk.ToolUseBlock) and block.id not in self.calls:
                    self.calls.add(block.id)
                    self.emit(T.ToolCall, block.id, block.name, block.name,
                              dict(block.input or {}))
        elif isinstance(message, sdk.UserMessage):
            if message.parent_tool_use_id or not isinstance(message.content, list):
                return
            results = [b for b in message.content if isinstance(b, sdk.ToolResultBlock)]
            for block in results:
                output = _text(block.content)
                status = "error" if block.is_error else "ok"
                if block.is_error and CUT_OFF in output:
                    status = "unresolved"
                elif block.is_error and DENIED.search(output):
                    status = "denied"
                self.emit(T.ToolResult, block.tool_use_id, status, output)
        elif isinstance(message, sdk.ResultMessage):
            self.result = message
            self.session_id = message.session_id or self.session_id
            total = float(message.total_cost_usd or 0.0)
            if total > self.cost + 1e-9:  # each result reports the session's cost so far
                self.emit(T.Usage, cost_usd=total - self.cost)
                self.cost = total

    def _rates(self, model: str | None) -> pricing.Rates | None:
        model = model or self.model
        if model not in self.rates:
            self.rates[model] = pricing.lookup(model)
        return self.rates[model]

    def _usage(self, rates: pricing.Rates | None, **tokens: int) -> None:
        cost = rates.cost(tokens.get("input_tokens", 0), tokens.get("output_tokens", 0),
                          tokens.get("cache_read_tokens", 0),
                          tokens.get("cache_creation_tokens", 0)) if rates else 0.0
        self.cost += cost
        self.emit(T.Usage, cost_usd=cost, **tokens)

    def _stream(self, event: dict[str, Any], thread: str | None = None) -> None:
        """Usage per model call (a sub-agent's included), from the raw stream events;
        each model call of the main thread is a turn."""
        kind = event.get("type")
        if kind == "message_start":
            msg = event.get("message") or {}
            u = msg.get("usage") or {}
            self.usage[msg.get("id", "")] = u
            self.priced[msg.get("id", "")] = rates = self._rates(msg.get("model"))
            self.current[thread] = msg.get("id", "")
            if thread is None:
                if self.turn_calls:  # a second model call in the open turn: a new one
                    self._next_turn()
                self.turn_start()
                self.turn_calls += 1
            self._usage(rates, input_tokens=int(u.get("input_tokens") or 0),
                        cache_read_tokens=int(u.get("cache_read_input_tokens") or 0),
                        cache_creation_tokens=int(u.get("cache_creation_input_tokens") or 0),
                        output_tokens=int(u.get("output_tokens") or 0))
        elif kind == "message_delta":
            u = event.get("usage") or {}
            current = self.current.get(thread, "")
            seen = self.usage.get(current, {})
            total = int(u.get("output_tokens") or 0)  # cumulative for the message
            extra = total - int(seen.get("output_tokens") or 0)
            if extra > 0:
                seen["output_tokens"] = total
                self._usage(self.priced.get(current), output_tokens=extra)

    def outcome(self, stop: asyncio.Event) -> AgentOutcome:
        r = self.result
        detail = f"session {self.session_id}" if self.session_id else ""
        if r is None:
            tail = "".join(self.stderr)[-1500:].strip()
            return AgentOutcome("stopped" if self.stopped else "error",
                                "the CLI ended without a result"
                                + (f"; stderr: {tail}" if tail else ""))
        detail += f", {self.turn} turns"  # ce's count: one per model call, as the trace
        if self.stopped or stop.is_set():
            return AgentOutcome("stopped", detail)
        if r.subtype == "error_max_turns":
            return AgentOutcome("max_turns", detail)
        if r.is_error:  # (a failed model call ends as subtype `success`, is_error true)
            why = "; ".join(r.errors or []) or (r.result or r.subtype)
            kind = "the CLI ended with an error" if r.subtype == "success" else r.subtype
            return AgentOutcome("error", f"{kind}: {why[:500]} ({detail})")
        return AgentOutcome("finished", detail)


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict):
            parts.append(str(block.get("text") or block.get("content") or ""))
    return "\n".join(p for p in parts if p)
