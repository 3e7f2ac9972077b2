"""The `script` agent: replays `agent.script`, a list of actions, and emits exactly the
trace events a real agent would (tests, demos, budget and timeout checks).

Every action is one turn: `TurnStart(n)`, its events, `TurnEnd(n)`.

    {say: TEXT}                                     assistant message
    {write: PATH, content: TEXT}                    Write tool call; writes the file
    {edit: PATH, old: X, new: Y}                    Edit tool call; replaces the first X
    {read: PATH}                                    Read tool call; the file's text
    {run: COMMAND, timeout: SECONDS?}               Bash tool call; runs it in the workspace
    {tool: NAME, params: {...}?, output: TEXT?, status: ok?}
                                                    any tool call (Skill, ...), nothing runs
    {sleep: SECONDS}                                waits (a stop request ends the wait)
    {usage: {input_tokens, output_tokens, cost_usd, ...}}   a Usage event
    {fail: MESSAGE}                                 the agent ends with an error

`{workspace}` in any string becomes the workspace's absolute path. Relative paths are
relative to the workspace; tool calls record absolute `file_path`s, as Claude Code does.
A stop request is honoured between actions and interrupts a `sleep` or a running
command; `run_limits.max_turns` ends the replay after that many turns (`max_turns`).
Every action runs in the trial's sandbox, as the agent: commands through `exec`, file
actions through `write_file` / `read_file`, so a script is confined exactly as a real
agent's tools are (an action that leaves the workspace fails under bwrap and docker).
What a command leaves running (`server &`) lives on for the next actions and is killed
when the agent ends.

`ScriptPlayer` is shared with the oracle agent, which replays `reference.solve` actions
and records its own writes and commands through the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ce_runtime.execute.agent_protocol import (
    AGENT,
    AgentOutcome,
    AgentRequest,
    EventSink,
    ExecResult,
    SandboxError,
    SandboxFileError,
    capped_timeout,
)
from ce_runtime.trace import events as T

OUTPUT_LIMIT = 30_000  # characters of a tool result kept (Claude Code's Bash default)
READ_LIMIT = 4_000_000  # bytes of each stream of a command read at most (memory bound)

# action kind -> (required companion keys, optional companion keys)
ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "say": ((), ()),
    "write": (("content",), ()),
    "edit": (("old", "new"), ()),
    "read": ((), ()),
    "run": ((), ("timeout",)),
    "tool": ((), ("params", "output", "status")),
    "sleep": ((), ()),
    "usage": ((), ()),
    "fail": ((), ()),
}
USAGE_FIELDS = {"input_tokens": int, "output_tokens": int, "cache_read_tokens": int,
                "cache_creation_tokens": int, "cost_usd": (int, float)}


class ScriptError(Exception):
    """A malformed script action (the compiler does not check scripts yet)."""


def check_actions(actions: Any, label: str = "script") -> list[tuple[str, dict[str, Any]]]:
    """Each action as (kind, action); raise ScriptError naming the first bad one."""
    if not isinstance(actions, list):
        raise ScriptError(f"{label} must be a list of actions, not {type(actions).__name__}")
    out = []
    for i, action in enumerate(actions, 1):
        if not isinstance(action, dict):
            raise ScriptError(f"{label} action {i} must be a mapping such as "
                              f"{{say: TEXT}}, not {action!r}")
        kinds = [k for k in action if k in ACTIONS]
        if len(kinds) != 1:
            what = ("unknown" if not kinds else "ambiguous")
            raise ScriptError(
                f"{what} {label} action {i} (keys: {', '.join(map(str, action)) or 'none'}): "
                f"an action has exactly one of {', '.join(ACTIONS)}")
        kind = kinds[0]
        required, optional = ACTIONS[kind]
        extra = sorted(str(k) for k in action if k != kind and k not in required + optional)
        missing = [k for k in required if k not in action]
        if extra or missing:
            allowed = ", ".join(required + optional) or "nothing else"
            problem = (f"unknown key(s) {', '.join(extra)}" if extra
                       else f"missing {', '.join(missing)}")
            raise ScriptError(f"{label} action {i} ({kind}): {problem} (allowed: {allowed})")
        _check_types(kind, action, f"{label} action {i} ({kind})")
        out.append((kind, action))
    return out


def _check_types(kind: str, a: dict[str, Any], where: str) -> None:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise ScriptError(f"{where}: {what}")

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool) and v >= 0

    if kind in ("say", "write", "edit", "read", "run", "tool", "fail"):
        need(isinstance(a[kind], str), f"`{kind}` must be a string")
    if kind == "write":
        need(isinstance(a["content"], str), "`content` must be a string")
    elif kind == "edit":
        need(isinstance(a["old"], str) and a["old"] != "", "`old` must be a non-empty string")
        need(isinstance(a["new"], str), "`new` must be a string")
    elif kind == "run":
        need(a.get("timeout") is None or (number(a["timeout"]) and a["timeout"] > 0),
             "`timeout` must be a positive number of seconds")
    elif kind == "tool":
        need(isinstance(a.get("params", {}), dict), "`params` must be a mapping")
        need(isinstance(a.get("output", ""), str), "`output` must be a string")
        need(a.get("status", "ok") in T.STATUSES, f"`status` must be one of "
             f"{', '.join(T.STATUSES)}")
    elif kind == "sleep":
        need(number(a["sleep"]), "`sleep` must be a number of seconds")
    elif kind == "usage":
        u = a["usage"]
        need(isinstance(u, dict), "`usage` must be a mapping")
        unknown = sorted(str(k) for k in u if k not in USAGE_FIELDS)
        need(not unknown, f"unknown usage field(s) {', '.join(unknown)} (allowed: "
             f"{', '.join(USAGE_FIELDS)})")
        for k, v in u.items():
            need(isinstance(v, USAGE_FIELDS[k]) and not isinstance(v, bool) and v >= 0,
                 f"`{k}` must be a non-negative number")


def substitute(value: Any, workspace: str) -> Any:
    """`{workspace}` replaced in every string (plain replace: code keeps its braces)."""
    if isinstance(value, str):
        return value.replace("{workspace}", workspace)
    if isinstance(value, list):
        return [substitute(v, workspace) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, workspace) for k, v in value.items()}
    return value


def truncate(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """Head and tail of a long output (errors are usually at the end)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters truncated] ...\n{text[-half:]}"


class ScriptPlayer:
    """Turns, tool calls and actions of one agent run, emitted to the sink."""

    def __init__(self, name: str, request: AgentRequest, sink: EventSink,
                 stop: asyncio.Event, view: str = AGENT):
        self.name = name
        self.view = view  # the oracle's commands run with the grader's view
        self.request = request
        self.sink = sink
        self.stop = stop
        self.workspace = os.path.abspath(request.workspace)  # as the sandbox sees it
        self.sandbox = request.sandbox
        max_turns = (request.limits or {}).get("max_turns")
        self.max_turns: int | None = max_turns if isinstance(max_turns, int) else None
        self.turns = 0
        self._calls = 0

    # -- events ----------------------------------------------------------------------
    def emit(self, cls: type, *args: Any, **fields: Any) -> None:
        self.sink.emit(cls(self.sink.clock(), *args, **fields))

    def start(self) -> None:
        self.emit(T.AgentStart, self.name, (self.request.agent or {}).get("model"))

    def finish(self, outcome: AgentOutcome) -> AgentOutcome:
        self.emit(T.AgentEnd, outcome.reason, outcome.detail)
        return outcome

    def say(self, text: str, role: str = "assistant") -> None:
        self.emit(T.Message, role, text)

    def call(self, tool: str, params: dict[str, Any]) -> str:
        self._calls += 1
        call_id = f"call_{self._calls}"
        self.emit(T.ToolCall, call_id, tool, tool, params)
        return call_id

    def result(self, call_id: str, ok: bool | str, output: str = "",
               duration_ms: float = 0.0) -> None:
        status = ok if isinstance(ok, str) else ("ok" if ok else "error")
        self.emit(T.ToolResult, call_id, status, truncate(output), duration_ms)

    def path(self, path: str) -> str:
        return os.path.normpath(os.path.join(self.workspace, path))

    # -- turns -----------------------------------------------------------------------
    async def turn(self, body: Callable[[], Awaitable[AgentOutcome | None]]
                   ) -> AgentOutcome | None:
        """One turn around `body`; an outcome when the run must end (before or after it).
        A cancelled turn is left open, as a killed agent leaves it."""
        if self.stop.is_set():
            return AgentOutcome("stopped")
        if self.max_turns is not None and self.turns >= self.max_turns:
            return AgentOutcome("max_turns", f"stopped after {self.turns} turns")
        self.turns += 1
        n = self.turns
        self.emit(T.TurnStart, n)
        outcome = await body()
        self.emit(T.TurnEnd, n)
        return outcome

    async def replay(self, actions: Any, label: str = "script") -> AgentOutcome:
        """Every action, one turn each: the outcome of the whole replay."""
        try:
            checked = check_actions(actions, label)
        except ScriptError as exc:
            return AgentOutcome("error", str(exc))
        for kind, action in checked:
            action = substitute(action, self.workspace)
            outcome = await self.turn(lambda k=kind, a=action: self.act(k, a))
            if outcome is not None:
                return outcome
        return AgentOutcome("finished")

    # -- actions ---------------------------------------------------------------------
    async def act(self, kind: str, a: dict[str, Any]) -> AgentOutcome | None:
        """One checked action; an outcome only when it ends the run."""
        if kind == "say":
            self.say(a["say"])
        elif kind == "write":
            await self.write(a["write"], a["content"])
        elif kind == "edit":
            await self.edit(a["edit"], a["old"], a["new"])
        elif kind == "read":
            await self.read(a["read"])
        elif kind == "run":
            if await self.run(a["run"], a.get("timeout")) is None:
                return AgentOutcome("stopped")
        elif kind == "tool":
            call_id = self.call(a["tool"], a.get("params") or {})
            self.result(call_id, a.get("status", "ok"), a.get("output", ""))
        elif kind == "sleep":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), a["sleep"])
                return AgentOutcome("stopped")
        elif kind == "usage":
            self.emit(T.Usage, **a["usage"])
        elif kind == "fail":
            return AgentOutcome("error", a["fail"])
        return None

    async def write(self, path: str, content: str | bytes, mode: int | None = None,
                    shown: str | None = None) -> bool:
        """A Write call that writes `content` (bytes are written as is; `shown` is what the
        trace records for them). Parent directories are created."""
        target = self.path(path)
        text = content if isinstance(content, str) else (shown if shown is not None else
                                                         content.decode("utf-8", "replace"))
        call_id = self.call("Write", {"file_path": target, "content": text})
        started = time.monotonic()
        data = content.encode("utf-8") if isinstance(content, str) else content
        try:
            existed = await self.sandbox.write_file(target, data, mode)
        except (SandboxFileError, SandboxError) as exc:
            self.result(call_id, False, f"Error writing {target}: {exc}", _ms(started))
            return False
        self.result(call_id, True, f"The file {target} has been updated." if existed
                    else f"File created successfully at: {target}", _ms(started))
        return True

    async def edit(self, path: str, old: str, new: str) -> bool:
        target = self.path(path)
        call_id = self.call("Edit", {"file_path": target, "old_string": old,
                                     "new_string": new})
        started = time.monotonic()
        try:
            text = (await self.sandbox.read_file(target)).decode("utf-8")
            if old not in text:
                self.result(call_id, False, f"String to replace not found in {target}.",
                            _ms(started))
                return False
            await self.sandbox.write_file(target, text.replace(old, new, 1).encode("utf-8"))
        except (SandboxFileError, SandboxError, UnicodeDecodeError) as exc:
            self.result(call_id, False, f"Error editing {target}: {exc}", _ms(started))
            return False
        self.result(call_id, True, f"The file {target} has been updated.", _ms(started))
        return True

    async def read(self, path: str) -> bool:
        target = self.path(path)
        call_id = self.call("Read", {"file_path": target})
        started = time.monotonic()
        try:
            data = await self.sandbox.read_file(target, READ_LIMIT)
        except (SandboxFileError, SandboxError) as exc:
            self.result(call_id, False, f"Error reading {target}: {exc}", _ms(started))
            return False
        self.result(call_id, True, data.decode("utf-8", "replace"), _ms(started))
        return True

    async def run(self, command: str, timeout: float | None = None) -> ExecResult | None:
        """A Bash call run in the workspace, in the sandbox, as the agent. A stop request
        interrupts it (its process group is killed): None."""
        call_id = self.call("Bash", {"command": command})
        started = time.monotonic()
        if self.stop.is_set():
            self.result(call_id, False, "Interrupted: the agent was asked to stop.")
            return None
        timeout = capped_timeout(self.sandbox, timeout)
        shell = asyncio.ensure_future(self.sandbox.exec(
            command, timeout=timeout, max_output=READ_LIMIT, view=self.view))
        stopped = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({shell, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # a stop request, or this task cancelled: the command's group dies
            stopped.cancel()
            if not shell.done():
                shell.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await shell
        if shell.cancelled():
            self.result(call_id, False, "Interrupted: the agent was asked to stop.",
                        _ms(started))
            return None
        try:
            res = shell.result()
        except SandboxError as exc:
            self.result(call_id, False, f"Error: {exc}", _ms(started))
            return None
        output = res.stdout
        if res.stderr:
            output += ("" if not output or output.endswith("\n") else "\n") + res.stderr
        if res.timed_out:
            output += _line(output, f"[timed out after {timeout:g} s]")
        elif res.exit_code != 0:
            output += _line(output, f"[exit code {res.exit_code}]")
        self.result(call_id, res.exit_code == 0 and not res.timed_out, output, res.duration_ms)
        return res


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _why(exc: Exception) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc))


def _line(text: str, note: str) -> str:
    return ("" if not text or text.endswith("\n") else "\n") + note


class ScriptAgent:
    name = "script"

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome:
        player = ScriptPlayer(self.name, request, sink, stop)
        player.start()
        script = (request.agent or {}).get("script")
        if script is None:
            return player.finish(AgentOutcome(
                "error", "the script agent needs `agent.script`, a list of actions"))
        return player.finish(await player.replay(script, "script"))
