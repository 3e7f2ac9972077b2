"""What the agents ce drives as command-line programs share: a CLI started in the
trial's sandbox (`spawn`, stdin closed at once: these CLIs wait for its end), its JSON
lines read as they come and mapped to trace events by the agent, a stop request ending
it (SIGTERM to the process the sandbox gave, whose death kills the CLI's whole process
group inside), and stderr kept for the error message.

`run_limits.max_turns` holds for every one of them the same way: a turn is a model call,
and the trial's sink asks for a stop as soon as a turn past the cap opens (ce cannot
keep these CLIs from making that call); the CLI is ended then, the calls it had started
stay in the trace (unresolved when they never completed), and the outcome is `max_turns`,
as Claude Code's own cap ends it. A CLI that can hold its next model call at the cap
itself (OpenCode, Pi and Codex, through ce's plugin, extension and hook) says so
(`Events.turns_exhausted`) and is ended there, no call past the cap made."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
from typing import Any

from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import AGENT, AgentOutcome, AgentRequest, EventSink
from ce_runtime.trace import events as T

STDERR_KEPT = 4000
OUTPUT_KEPT = 100_000  # characters of a tool result the trace keeps (head and tail)
LINE_LIMIT = 64 * 1024 * 1024  # a longer line of the CLI's output is skipped (and said)
FOLLOW_GRACE = 60  # seconds `follow` has, once the CLI has ended, to read the rest


def exec_script(program: str) -> bytes:
    """A script that runs `program` (as the sandbox names it) with its arguments intact:
    put where an agent looks for a helper of its own (OpenCode's and Pi's `rg`)."""
    return f'#!/bin/sh\nexec {shlex.quote(program)} "$@"\n'.encode()


class TurnEvents:
    """What every agent's event mapping does: emit with the sink's clock, and open and
    close numbered turns (each at most once)."""

    def __init__(self, sink: EventSink):
        self.sink = sink
        self.turn = 0
        self.open = False

    def emit(self, cls: type, *args: Any, **kw: Any) -> None:
        self.sink.emit(cls(self.sink.clock(), *args, **kw))

    def turn_start(self) -> None:
        if not self.open:
            self.turn += 1
            self.open = True
            self.emit(T.TurnStart, self.turn)

    def turn_end(self) -> None:
        if self.open:
            self.open = False
            self.emit(T.TurnEnd, self.turn)


class Events(TurnEvents):
    """Helpers for a CLI agent's event mapping: turns, tool calls matched to their
    results, usage, how the run ended."""

    def __init__(self, sink: EventSink):
        super().__init__(sink)
        self.error: str | None = None
        self.session: str | None = None
        self.calls: dict[str, str] = {}  # call id -> the tool as the agent named it
        self.aborted = False  # the run is failed: the CLI is ended (its output still read)
        self.rates: pricing.Rates | None = None  # what the model's tokens cost (None: unknown)
        self.max_turns: int | None = None  # run_limits.max_turns (None: no cap)
        self.exhausted: str | None = None  # the CLI held its next model call at the cap

    def turns_exhausted(self, detail: str) -> None:
        """The CLI has used its `max_turns` model calls and holds the next one: it is
        ended (its output still read), the outcome `max_turns`."""
        self.exhausted = self.exhausted or detail
        self.aborted = True

    def held_after(self, turns: int | None, agent: str) -> None:
        """ce's plugin in the CLI holds its model call after turn `turns` (None: none
        held): once that turn's events are all in, the CLI is ended, outcome max_turns."""
        if turns is not None and not self.open and self.turn >= turns:
            self.held(agent, turns)

    def held(self, agent: str, turns: Any) -> None:
        """The CLI holds its model call after turn `turns` (as its plugin, extension or
        hook counted them): it is ended, outcome max_turns, said as the cap."""
        cap = self.max_turns if self.max_turns is not None else turns
        self.turns_exhausted(f"{agent} held its next model call at max_turns {cap}")

    def abort(self, error: str) -> None:
        """The run has failed in a way the CLI does not end by itself (it would go on
        asking a model that answers nothing): an error, and the CLI is stopped."""
        self.error = self.error or error
        self.aborted = True

    def usage(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0,
              cache_write_tokens: int = 0) -> None:
        """A model call's Usage, priced at `rates` (ce's card or `agent.pricing`; no
        rate: $0 here, and the trial's cost is said to be unknown)."""
        cost = self.rates.cost(input_tokens, output_tokens, cache_read_tokens,
                               cache_write_tokens) if self.rates else 0.0
        self.emit(T.Usage, input_tokens=input_tokens, output_tokens=output_tokens,
                  cache_read_tokens=cache_read_tokens,
                  cache_creation_tokens=cache_write_tokens, cost_usd=cost)

    def call(self, call_id: str, raw: str, params: dict[str, Any]) -> None:
        """A tool call, its tool and params normalized (`T.normalize_tool`: the agent's
        `write` is `Write`, its shell tool `Bash` ...; `raw_tool` keeps its own name)."""
        tool, params = T.normalize_tool(raw, params)
        self.calls[call_id] = raw
        self.emit(T.ToolCall, call_id, tool, raw, params)

    def result(self, call_id: str, ok: bool | str, output: str) -> None:
        status = ok if isinstance(ok, str) else ("ok" if ok else "error")
        self.emit(T.ToolResult, call_id, status, truncate(output or ""))


def truncate(text: str, limit: int = OUTPUT_KEPT) -> str:
    """Head and tail of a long tool output (a command that prints gigabytes must not
    make a trace of gigabytes; errors are usually at the end)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters truncated] ...\n{text[-half:]}"


async def lines(stream: asyncio.StreamReader, limit: int = LINE_LIMIT, partial: bool = True):
    """The stream's lines, however long (asyncio's readline gives up at 64 KiB: a tool
    output in one JSON line is longer); a line over `limit` comes as None (skipped, but
    read: the CLI never blocks on a full pipe). `partial=False`: an unterminated last
    line is dropped (a follower killed mid-line: the caller reads that line again)."""
    buf = bytearray()
    skipping = False
    while chunk := await stream.read(1 << 20):
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if not skipping:
                buf += chunk[start:end]
                yield bytes(buf)
            else:
                yield None
            buf.clear()
            skipping = False
            start = end + 1
        if not skipping:
            buf += chunk[start:]
            if len(buf) > limit:
                buf.clear()
                skipping = True
    if not partial:
        return
    if buf and not skipping:
        yield bytes(buf)
    elif skipping:
        yield None


class CliAgent:
    """Subclasses: `name`, `prepare(request) -> (argv, env, secrets)` (after any files
    they need are written through the sandbox), and `on_line(obj, events)`."""

    name = "?"
    default_model: str | None = None  # the model it runs when the task names none

    async def prepare(self, request: AgentRequest, events: Events
                      ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        raise NotImplementedError

    def on_line(self, obj: dict[str, Any], events: Events) -> None:
        raise NotImplementedError

    def ended(self, events: Events) -> None:
        """The CLI has ended and its output is read: the last of the run's events (its
        turn still open)."""

    async def follow(self, request: AgentRequest, events: Events,
                     exited: asyncio.Event) -> None:
        """A second source of the run's events beside the CLI's output (Codex: its
        session log), run while the CLI runs; once `exited` is set (the CLI has ended) it
        reads what is left and returns. Cancelled when the run is (a timeout)."""

    def finish(self, events: Events, code: int | None, stopped: bool,
               stderr: str) -> AgentOutcome:
        session = f"{events.session}, " if events.session else ""
        if events.exhausted is not None:
            turns = f"{events.turn} turn" + ("s" if events.turn != 1 else "")
            return AgentOutcome("max_turns", f"{session}{turns}: {events.exhausted}")
        if stopped:
            if events.max_turns is not None and events.turn > events.max_turns:
                # the sink stopped it when a turn past the cap opened
                return AgentOutcome("max_turns", f"{session}stopped in turn {events.turn}, "
                                    f"past max_turns {events.max_turns}")
            return AgentOutcome("stopped", events.session or "")
        if events.error:
            return AgentOutcome("error", events.error)
        if code not in (0, None):
            return AgentOutcome("error", f"{self.name} exited {code}"
                                + (f": {stderr.strip()[-1500:]}" if stderr.strip() else ""))
        return AgentOutcome("finished", events.session or "")

    async def run(self, request: AgentRequest, sink: EventSink,
                  stop: asyncio.Event) -> AgentOutcome:
        events = Events(sink)
        max_turns = (request.limits or {}).get("max_turns")
        events.max_turns = max_turns if isinstance(max_turns, int) else None
        # the model it runs, its default included: what task.json records as the model
        events.emit(T.AgentStart, self.name, request.agent.get("model") or self.default_model)
        try:
            await login_profile(request)
            argv, env, secrets = await self.prepare(request, events)
            proc = await request.sandbox.spawn(argv, env={**request.sandbox.env(AGENT), **env},
                                               secrets=secrets)
        except Exception as exc:
            outcome = AgentOutcome("error", f"{self.name} set-up: {exc}")
            events.emit(T.AgentEnd, outcome.reason, outcome.detail)
            return outcome
        proc.stdin.close()
        stderr = bytearray()

        async def drain() -> None:
            while chunk := await proc.stderr.read(4096):
                stderr.extend(chunk)
                del stderr[:-STDERR_KEPT]

        async def read() -> None:
            # read to the end whatever comes: a reader that gave up would leave the CLI
            # blocked on a full pipe, past every timeout
            async for line in lines(proc.stdout):
                if line is None:
                    events.emit(T.Message, "system", f"ce: a line of {self.name}'s output "
                                f"longer than {LINE_LIMIT} bytes was skipped")
                    continue
                try:
                    obj = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue  # a banner or a log line on stdout
                if not isinstance(obj, dict):
                    continue
                try:
                    self.on_line(obj, events)
                except Exception as exc:  # an event of a shape the mapping does not know
                    events.emit(T.Message, "system", f"ce: could not map a {self.name} "
                                f"event ({type(exc).__name__}: {exc}): {line[:300]!r}")
                if events.aborted and proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.terminate()  # the sandbox kills the CLI's group

        async def follow() -> None:
            try:
                await self.follow(request, events, exited)
            except Exception as exc:  # the run goes on with the CLI's own output
                events.emit(T.Message, "system", f"ce: following {self.name} failed "
                            f"({type(exc).__name__}: {exc})")

        exited = asyncio.Event()
        following = asyncio.ensure_future(follow())
        reading = asyncio.ensure_future(asyncio.gather(read(), drain()))
        stopping = asyncio.ensure_future(stop.wait())
        stopped = False
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stopping.done() and not reading.done():
                stopped = True
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()  # the sandbox kills the CLI's group
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(reading), 5)
            code = await proc.wait()
            exited.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(following), FOLLOW_GRACE)
        finally:  # cancelled (a timeout, Ctrl-C): nothing the CLI started survives
            stopping.cancel()
            following.cancel()
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):  # its pipes still drained meanwhile
                    await asyncio.wait_for(asyncio.shield(proc.wait()), 10)
            reading.cancel()
        try:
            self.ended(events)
        except Exception as exc:
            events.emit(T.Message, "system", f"ce: could not map the end of {self.name}'s "
                        f"run ({type(exc).__name__}: {exc})")
        events.turn_end()
        outcome = self.finish(events, code, stopped, stderr.decode("utf-8", "replace"))
        events.emit(T.AgentEnd, outcome.reason, outcome.detail)
        return outcome


async def login_profile(request: AgentRequest) -> None:
    """A login shell (`bash -lc`, as Codex runs every command) resets PATH from
    /etc/profile: the sandbox's private HOME gets a profile that puts the workspace's venv
    and node_modules back in front."""
    env = request.sandbox.env(AGENT)
    home = env.get("HOME")
    if not home:
        return
    lines = [f"export PATH={shlex.quote(env.get('PATH', ''))}"]
    if env.get("VIRTUAL_ENV"):
        lines.append(f"export VIRTUAL_ENV={shlex.quote(env['VIRTUAL_ENV'])}")
    profile = ("\n".join(lines) + "\n").encode()
    for name in (".bash_profile", ".profile"):
        await request.sandbox.write_file(f"{home}/{name}", profile)


def host_port(url: str) -> tuple[str, int]:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    return parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)


async def model_url(request: AgentRequest, default: str) -> str:
    """The endpoint's base URL as the sandbox reaches it (ends without a slash)."""
    base = ((request.model_endpoint or {}).get("base_url") or default).rstrip("/")
    host, port = host_port(base)
    if host in ("127.0.0.1", "localhost"):
        inner = await request.sandbox.route_model(host, port)
        from urllib.parse import urlparse

        path = urlparse(base).path
        return inner.rstrip("/") + path
    return base
