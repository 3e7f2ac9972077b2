"""The `codex` agent: OpenAI's Codex CLI (npm `@openai/codex`, pinned; ce installs it),
`codex exec --json` in the trial's sandbox.

A fresh CODEX_HOME per trial (in the sandbox's private HOME) holds the only config it
reads: the model, one provider pointing at the trial's endpoint (Responses API), and
analytics, plugins and apps off. Codex's own sandbox is bypassed: ce's is the boundary
(Codex's breaks inside another sandbox, and under tempdir its CODEX_HOME would sit under
TMPDIR, where it refuses to work).

The trace comes from Codex's session log ("rollout", `$CODEX_HOME/sessions/.../
rollout-*.jsonl`), followed live from inside the sandbox while Codex runs (`follow`):
`codex exec --json` has one turn per prompt, nothing per model call, its usage only at
the end of the turn, and no event for an apply_patch that failed. The log has what the
model answered, each answer's usage (`token_usage_record`, written as the answer
arrives, before its tools run) and every tool call with its output, whatever the
provider. So: a turn per model answer (max_turns holds), Usage per answer (a stopped or
timed-out trial keeps what it spent; token budgets stop it live), `exec_command` calls
as Bash (the command as the model wrote it) with the command's output and exit status,
`apply_patch` calls as Edit (raw_tool apply_patch) with the patch and Codex's answer
(an error when it failed), other tools with their output (names normalized as for
every agent: `update_plan` is TodoWrite), and the model's messages. `codex exec --json` still gives the
session, and errors (a failed turn, an `error` item). Without the log (it was never
found) ce falls back on that stream: one turn, the usage at the end, a system message
saying so.

A turn past `run_limits.max_turns` never starts: ce gives Codex a PreModelRequest hook
of its own (`HOOK`, in the config, trusted there by its hash: see below), which counts
the run's model calls as ce counts its turns (the main thread's first attempts: a
request Codex retries is the same turn) and holds the call past the cap for good (its
`timeout` is 10^9 s: at a hook's timeout Codex makes the call). It says so on Codex's
own stdout (`/proc/<codex>/fd/1`: a hook's stdout is Codex's to parse), and ce ends the
CLI then, outcome `max_turns`, the log's last lines read once it has ended, as the holds
of OpenCode's plugin and Pi's extension. A hook that cannot say so (no /proc, a stdout
that is no pipe or file) lets the call go: ce's stop at the turn past the cap stays, a
race (under load the call was answered and a tool of it ran first).

Codex runs a command hook only when it is trusted: its config's `[hooks.state."KEY"]`
holds the hook's `trusted_hash`. ce writes that entry for its own hook, and no
`--dangerously-bypass-hook-trust` (which ran every enabled hook untrusted). A task's
workspace may carry hooks of its own (`.codex/config.toml`, `.codex/hooks.json`): Codex
disables the project's layer while the project is untrusted, and ce trusts none, so they
never ran, flag or not (measured with Codex 0.171); without the flag, a hook from any
other source would need its own trust entry as well.

Codex reports tokens, no price: ce prices each answer's usage from its rate card or the
task's `agent.pricing` (`ce_runtime.pricing`), so `max_usd` stops Codex like the agents
that report their cost. Codex's `input_tokens` include the cached and cache-written
parts; the trace's are the new input only, as every agent's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shlex
from typing import Any

from ce_agents.cli_agent import CliAgent, Events, lines, model_url
from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import AGENT, AgentOutcome, AgentRequest
from ce_runtime.trace import events as T
from ce_runtime.trace.codex_log import (
    ANSWER_ITEMS,
    EXIT,
    PATCH_OK,
    UNSUPPORTED,
    call_params,
    output_with_exit,
    tool_output_text,
)

DEFAULT_MODEL = "gpt-5.5"
# `exec --json`'s `error` while it retries a failed model call:
# "Reconnecting... 2/5 (unexpected status 529 <unknown status code>: overloaded, url: ...)"
RECONNECTING = re.compile(r"Reconnecting\.\.\. (?P<attempt>\d+)/(?P<retries>\d+) "
                          r"\((?P<why>.*)\)\s*$", re.S)
STATUS = re.compile(r"\bstatus (\d{3})\b")
CONFIG = """model = "{model}"
model_provider = "ce"

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false

[model_providers.ce]
name = "ce"
base_url = "{base_url}"
env_key = "CE_CODEX_API_KEY"
wire_api = "responses"
"""
# ce's PreModelRequest hook (see above), `/bin/sh HOOK CODEX_PID MAX_TURNS DIR`: the
# run's model calls are the main thread's (its first call's) sampling requests, first
# attempts only (`attempt_number` 1: Codex retries a failed request under the same
# hook run; a stream's reconnect is a later attempt); their count is kept in DIR. The
# call past the cap is held on a FIFO the hook holds open (`ce-hook.hold`), till ce's
# last read of the log, once Codex has ended, writes it a line (`REST`: Codex runs its
# hooks in a process group of their own, which outlived Codex's) and waits for the hook
# (and a shell running it) to be gone, or ce's sweep a moment later finds it still there
# (CI under load: "the agent left processes running; killed: sh"); a hook that could
# not tell ce (`ce_max_turns` on Codex's stdout) lets the call go.
HOOK = r"""in=$(cat)
case $in in *'"kind":"sampling"'*) ;; *) exit 0 ;; esac
thread=$(printf '%s' "$in" | sed -n 's/.*"thread_id":"\([^"]*\)".*/\1/p')
[ -s "$3/ce-hook.thread" ] || printf '%s' "$thread" > "$3/ce-hook.thread"
[ "$(cat "$3/ce-hook.thread")" = "$thread" ] || exit 0
case $in in *'"attempt_number":1,'* | *'"attempt_number":1}'*) ;; *) exit 0 ;; esac
[ "$(cat "/proc/$1/comm" 2>/dev/null)" = codex ] || exit 0
n=$(cat "$3/ce-hook.calls" 2>/dev/null || echo 0)
if [ "$n" -lt "$2" ]; then
  echo $((n + 1)) > "$3/ce-hook.calls"
  [ "$n" -gt 0 ] || printf '{"type":"ce_hook"}\n' >> "/proc/$1/fd/1"
  exit 0
fi
rm -f "$3/ce-hook.hold"; mkfifo "$3/ce-hook.hold" && exec 3<>"$3/ce-hook.hold" || exit 0
echo $$ > "$3/ce-hook.pid"; [ "$PPID" = "$1" ] || echo "$PPID" >> "$3/ce-hook.pid"
printf '{"type":"ce_max_turns","turns":%s}\n' "$n" >> "/proc/$1/fd/1" || exit 0
read -r _ <&3
"""
HOOK_CONFIG = """
[[hooks.PreModelRequest]]
[[hooks.PreModelRequest.hooks]]
type = "command"
command = {command}
timeout = {timeout}
"""
HOOK_TIMEOUT = 10 ** 9  # seconds: at a hook's timeout Codex makes the call
# Codex's trust entry for a hook: the key is the config file (under CODEX_HOME, which Codex
# canonicalizes), the event and the hook's place (group, handler); the hash is Codex's
# `version_for_toml` of the hook as it normalizes it (`_trusted`)
TRUST = """
[hooks.state.{key}]
trusted_hash = "{digest}"
"""
# the session log, followed from its first line once Codex has made it ($1: CODEX_HOME;
# a fresh one per trial holds one log)
ROLLOUT = '"$1"/sessions/*/*/*/rollout-*.jsonl'
FOLLOW = ('while :; do for f in ' + ROLLOUT + '; do [ -f "$f" ] && exec tail -n +1 -f "$f"; '
          'done; sleep 0.1; done')
# (and the hook's hold, if any, let go: Codex has ended)
HOLD_GONE = ('if [ -p "$1/ce-hook.hold" ]; then echo 1<>"$1/ce-hook.hold"; '
             'for p in $(cat "$1/ce-hook.pid" 2>/dev/null); do i=0; while [ $i -lt 300 ]; do '
             'case $(cut -d" " -f3 "/proc/$p/stat" 2>/dev/null) in ""|Z) break ;; esac; '
             'sleep 0.01; i=$((i + 1)); done; done; fi; ')
REST = (HOLD_GONE + 'for f in ' + ROLLOUT + '; do [ -f "$f" ] && exec tail -n "+$2" "$f"; done')


def _trusted(command: str, codex_home: str) -> str:
    """The config lines that trust ce's hook (the only PreModelRequest hook of the config,
    `HOOK_CONFIG` running `command`): Codex hashes the hook as it normalizes it (type,
    command, timeout, async; no matcher for this event) as JSON with sorted keys, compact,
    UTF-8, sha256. Keyed by CODEX_HOME as given and as the host resolves it (Codex
    canonicalizes it: a HOME under a symlink, /tmp on macOS); a key that names no hook is
    no harm. A wrong hash runs no hook: ce's stop holds the cap then, and says so."""
    identity = {"event_name": "pre_model_request", "hooks": [
        {"type": "command", "command": command, "timeout": HOOK_TIMEOUT, "async": False}]}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":"),
                                       ensure_ascii=False).encode()).hexdigest()
    return "".join(TRUST.format(key=json.dumps(f"{home}/config.toml:pre_model_request:0:0"),
                                digest=f"sha256:{digest}")
                   for home in dict.fromkeys((codex_home, os.path.realpath(codex_home))))


class Session:
    """What mapping one trial's Codex run keeps: where its log is, and how far it got."""

    def __init__(self, codex_home: str, rates: pricing.Rates | None = None):
        self.codex_home = codex_home
        self.rates = rates  # what the model's tokens cost (None: unknown)
        self.log_seen = False  # a line of the session log arrived
        self.answered = False  # the current turn's model answer is complete
        self.usage_records = False  # the log has usage per answer (token_usage_record)
        self.totals = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0,
                       "cache_write_input_tokens": 0}  # token_count's totals so far
        self.results: set[str] = set()  # calls whose result is recorded
        self.patches: dict[str, str] = {}  # apply_patch call -> FileChange status
        self.stream: list[dict[str, Any]] = []  # `exec --json` events, till the log comes
        self.hook = False  # ce's max_turns hook ran (it says so at the first model call)


class CodexAgent(CliAgent):
    name = "codex"
    default_model = DEFAULT_MODEL
    priced_by_ce = True  # its tokens are priced from ce's rate card (ce_runtime.pricing)

    async def prepare(self, request: AgentRequest, events: Events):
        box = request.sandbox
        home = box.env(AGENT).get("HOME", "/tmp")
        codex_home = f"{home}/.codex"
        model, rates = pricing.agent_rates(request.agent, DEFAULT_MODEL)
        events.codex = Session(codex_home, rates)  # type: ignore[attr-defined]
        endpoint = request.model_endpoint or {}
        base = await model_url(request, "https://api.openai.com/v1")
        if not base.endswith("/v1"):
            base += "/v1"
        config = CONFIG.format(model=model, base_url=base)
        if events.max_turns is not None and events.max_turns > 0:
            await box.write_file(f"{codex_home}/ce-hook.sh", HOOK.encode())
            command = " ".join(["/bin/sh", shlex.quote(f"{codex_home}/ce-hook.sh"), '"$PPID"',
                                str(events.max_turns), shlex.quote(codex_home)])
            config += HOOK_CONFIG.format(command=json.dumps(command), timeout=HOOK_TIMEOUT) \
                + _trusted(command, codex_home)
        await box.write_file(f"{codex_home}/config.toml", config.encode())
        # not --ephemeral: the session log is where the trace comes from
        argv = [request.tools["codex"], "exec", "--json", "--skip-git-repo-check",
                "-C", request.workspace, "--dangerously-bypass-approvals-and-sandbox",
                "--", request.prompt or ""]  # a prompt such as `- fix it` is no option
        return argv, {"CODEX_HOME": codex_home, "NO_PROXY": "127.0.0.1,localhost"}, \
            {"CE_CODEX_API_KEY": endpoint.get("api_key") or ""}

    # -- the session log ----------------------------------------------------------------
    async def follow(self, request: AgentRequest, events: Events,
                     exited: asyncio.Event) -> None:
        """Follow the session log live (a `tail -f` in the sandbox); once Codex has
        ended, stop it and read the lines it had not delivered yet."""
        state: Session = events.codex  # type: ignore[attr-defined]
        box = request.sandbox
        proc = await box.spawn(["/bin/sh", "-c", FOLLOW, "sh", state.codex_home],
                               env=box.env(AGENT))
        proc.stdin.close()
        seen = 0

        async def read() -> None:
            nonlocal seen
            async for line in lines(proc.stdout, partial=False):
                seen += 1
                self.on_log(line, events)

        reading = asyncio.ensure_future(read())
        ended = asyncio.ensure_future(exited.wait())
        try:
            await asyncio.wait({reading, ended}, return_when=asyncio.FIRST_COMPLETED)
            await ended  # the follower may have failed early: the rest is read at the end
        finally:
            ended.cancel()
            reading.cancel()
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()  # the sandbox kills the follower's group
            with contextlib.suppress(BaseException):
                await reading
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), 10)
        rest = await box.exec(["/bin/sh", "-c", REST, "sh", state.codex_home, str(seen + 1)],
                              timeout=60, view=AGENT, binary=True)
        for line in rest.stdout.split(b"\n"):  # type: ignore[union-attr]
            if line:
                self.on_log(line, events)

    def on_log(self, line: bytes | None, events: Events) -> None:
        if line is None:
            events.emit(T.Message, "system", "ce: a line of codex's session log was "
                        "longer than ce reads and was skipped")
            return
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return
        if not isinstance(obj, dict):
            return
        state: Session = events.codex  # type: ignore[attr-defined]
        if not state.log_seen:
            state.log_seen = True
            state.stream.clear()
        try:
            self._log_entry(obj.get("type"), obj.get("payload") or {}, state, events)
        except Exception as exc:  # an entry of a shape the mapping does not know
            events.emit(T.Message, "system", f"ce: could not map a codex session log "
                        f"entry ({type(exc).__name__}: {exc}): {line[:300]!r}")

    def _log_entry(self, kind: str | None, p: dict[str, Any], state: Session,
                   events: Events) -> None:
        if kind == "session_meta":
            events.session = events.session or f"thread {p.get('id')}"
        elif kind == "event_msg":
            sub = p.get("type")
            if sub == "task_started":
                events.turn_start()  # the first model call is under way
            elif sub == "item_completed":
                self._log_item(p.get("item") or {}, state, events)
            elif sub == "token_count" and p.get("info") and not state.usage_records:
                state.answered = True  # an answer's usage (None: rate limits only)
                self._totals(p["info"].get("total_token_usage") or {}, state, events)
        elif kind == "token_usage_record":
            self._answer(state, events)
            state.answered = True
            state.usage_records = True
            self._usage(p.get("usage") or {}, events)
        elif kind == "response_item":
            self._response_item(p, state, events)

    @staticmethod
    def _answer(state: Session, events: Events) -> None:
        """A model answer arrives: the first of the next answer opens the next turn."""
        if state.answered or not events.open:
            events.turn_end()
            events.turn_start()
            state.answered = False

    def _response_item(self, p: dict[str, Any], state: Session, events: Events) -> None:
        kind = p.get("type")
        if kind in ANSWER_ITEMS and (kind != "message" or p.get("role") == "assistant"):
            self._answer(state, events)
        call_id = str(p.get("call_id") or p.get("id"))
        if kind == "message" and p.get("role") == "assistant":
            text = "".join(c.get("text") or "" for c in p.get("content") or ()
                           if isinstance(c, dict))
            events.emit(T.Message, "assistant", text)
        elif kind == "function_call":
            events.call(call_id, str(p.get("name")), call_params(p.get("arguments")))
        elif kind == "custom_tool_call":
            name = str(p.get("name"))
            events.call(call_id, name, {"patch" if name == "apply_patch" else "input":
                                        p.get("input") or ""})
        elif kind == "local_shell_call":
            action = p.get("action") or {}
            events.call(call_id, "local_shell", {"command": action.get("command") or ""})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            state.answered = True  # the model sees it in its next call
            if call_id in state.results or call_id not in events.calls:
                return
            output = tool_output_text(p.get("output"))
            if events.calls[call_id] == "apply_patch":  # Codex's name (the trace's: Edit)
                ok = state.patches.get(call_id) == "completed" or bool(PATCH_OK.match(output))
            else:
                code = EXIT.search(output)
                ok = (code is None or code.group(1) == "0") and not UNSUPPORTED.match(output)
            state.results.add(call_id)
            events.result(call_id, ok, output)

    @staticmethod
    def _log_item(item: dict[str, Any], state: Session, events: Events) -> None:
        """Codex's own record of a tool's run: a command's output and exit status (what
        `exec --json` showed), an apply_patch's outcome."""
        kind, item_id = item.get("type"), str(item.get("id"))
        if kind == "FileChange":
            state.patches[item_id] = str(item.get("status"))
        elif kind == "CommandExecution" and item_id in events.calls \
                and item_id not in state.results:
            state.results.add(item_id)
            code = item.get("exit_code")
            events.result(item_id, code == 0,
                          output_with_exit(item.get("aggregated_output"), code))

    @staticmethod
    def _usage(u: dict[str, Any], events: Events) -> None:
        """One answer's usage, priced; Codex's input count includes the cache's parts."""
        cached = int(u.get("cached_input_tokens") or 0)
        written = int(u.get("cache_write_input_tokens") or 0)
        fresh = max(0, int(u.get("input_tokens") or 0) - cached - written)
        output = int(u.get("output_tokens") or 0)
        rates: pricing.Rates | None = events.codex.rates  # type: ignore[attr-defined]
        events.emit(T.Usage, input_tokens=fresh, output_tokens=output,
                    cache_read_tokens=cached, cache_creation_tokens=written,
                    cost_usd=rates.cost(fresh, output, cached, written) if rates else 0.0)

    def _totals(self, total: dict[str, Any], state: Session, events: Events) -> None:
        """A log without usage per answer: the growth of its running totals."""
        delta = {k: int(total.get(k) or 0) - v for k, v in state.totals.items()}
        if any(delta.values()):
            state.totals = {k: int(total.get(k) or 0) for k in state.totals}
            self._usage(delta, events)

    # -- `codex exec --json` ------------------------------------------------------------
    def on_line(self, obj: dict[str, Any], events: Events) -> None:
        state: Session = events.codex  # type: ignore[attr-defined]
        kind = obj.get("type")
        if not state.log_seen:
            state.stream.append(obj)  # for the fallback, should the log never come
        if kind == "ce_hook":
            state.hook = True
        elif kind == "ce_max_turns":  # the hook holds the call past the cap: the log's
            # last lines are read once Codex has ended
            events.held(self.name, obj.get("turns"))
        elif kind == "thread.started":
            events.session = f"thread {obj.get('thread_id')}"
        elif kind == "turn.failed":
            events.error = str((obj.get("error") or {}).get("message") or obj)
        elif kind == "error":
            retry = RECONNECTING.match(str(obj.get("message") or ""))
            if retry:  # a model call failed; Codex retries it
                status = STATUS.search(retry["why"])
                events.emit(T.ModelError, retry["why"], int(status[1]) if status else None,
                            int(retry["attempt"]), int(retry["retries"]))
            else:
                events.emit(T.Message, "system", f"codex: {obj.get('message')}")
        elif kind == "item.completed" and (obj.get("item") or {}).get("type") == "error":
            events.emit(T.Message, "system", f"codex: {obj['item'].get('message')}")

    def finish(self, events: Events, code: int | None, stopped: bool,
               stderr: str) -> AgentOutcome:
        state: Session = events.codex  # type: ignore[attr-defined]
        if not state.log_seen:
            self._fallback(events)
        if events.max_turns and events.turn and not state.hook:
            events.emit(T.Message, "system", "ce: codex did not run ce's max_turns hook: "
                        "max_turns is held only by ce's stop, once a turn past it has begun")
        return super().finish(events, code, stopped, stderr)

    def _fallback(self, events: Events) -> None:
        """No session log: the trace from `exec --json` (one turn, usage at its end)."""
        state: Session = events.codex  # type: ignore[attr-defined]
        events.emit(T.Message, "system", "ce: codex's session log was not found: turns, "
                    "usage and tool calls come from `codex exec --json` (one turn, usage "
                    "at its end, no failed apply_patch)")
        for obj in state.stream:
            kind = obj.get("type")
            if kind == "turn.started":
                events.turn_start()
            elif kind == "turn.completed":
                self._usage(obj.get("usage") or {}, events)
                events.turn_end()
            elif kind in ("item.started", "item.completed"):
                self._item(obj.get("item") or {}, kind == "item.completed", events)
        state.stream.clear()
        events.turn_end()

    @staticmethod
    def _item(item: dict[str, Any], done: bool, events: Events) -> None:
        kind, item_id = item.get("type"), str(item.get("id"))
        if kind == "command_execution":
            if item_id not in events.calls:
                events.call(item_id, "command_execution", {"command": item.get("command")})
            if done:
                code = item.get("exit_code")
                events.result(item_id, code == 0,
                              output_with_exit(item.get("aggregated_output"), code))
        elif kind == "file_change" and done:
            changes = item.get("changes") or []
            events.call(item_id, "apply_patch", {"changes": changes})
            events.result(item_id, item.get("status") == "completed",
                          "\n".join(f"{c.get('kind')} {c.get('path')}" for c in changes))
        elif kind == "agent_message" and done:
            events.emit(T.Message, "assistant", str(item.get("text") or ""))
