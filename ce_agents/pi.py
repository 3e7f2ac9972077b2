"""The `pi` agent: the Pi coding agent (npm `@mariozechner/pi-coding-agent`, pinned; ce
installs it) pointed at any OpenAI-compatible endpoint, `pi --mode json -p --no-session`
in the sandbox.

Its models.json and settings.json live in a private PI_CODING_AGENT_DIR (one provider,
the task's model, telemetry off) and PI_OFFLINE keeps it off the network. Events:
`turn_start`/`turn_end` are turns, an assistant `message_end` carries the text, the tool
calls (with Claude Code's names: `bash` is Bash, `write` Write, `find` Glob ...,
`T.normalize_tool`) and the usage (with cost), `tool_execution_end` a result; in JSON
mode a model error still exits 0, so a `stopReason: error` is the run's error.

A turn is a model call, opened as the call is made: Pi's `turn_start` comes before its
request, and ce's stop at a turn past `run_limits.max_turns` was a race (under load the
call was answered and its tools ran first). So ce gives Pi an extension of its own
(`EXTENSION`, `--extension`), which says each model call as it is made and holds the
call past the cap for good: ce ends the CLI once the last turn's events are read,
outcome `max_turns`, as OpenCode's plugin does.

Pi starts with four tools (read, bash, edit, write); ce enables its search tools too
(`TOOLS`: grep, find and ls, which are Grep, Glob and LS in the trace), so that a task's
criteria about searching see Pi search as Claude Code and OpenCode do. Its grep runs
ripgrep, its find fd, each its own copy ($PI_CODING_AGENT_DIR/bin) else the one on PATH,
and offline it downloads neither (the call fails: "fd is not available and could not be
downloaded"). ce installs a pinned rg with Pi (ce_runtime/execute/sandbox/ripgrep.py)
and puts a launcher of it there, and beside it an fd (`FD`) that runs a real fd from PATH
if there is one, else answers Pi's fd command with that rg: no registry ships fd.

Pi prices a call from the cost its models.json gives the model, and ce's holds none: its
own figure would be $0 for every call. ce prices the tokens itself, from its rate card or
the task's `agent.pricing` (`ce_runtime.pricing`), as for Codex.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from typing import Any

from ce_agents.cli_agent import CliAgent, Events, exec_script, model_url
from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import AGENT, AgentRequest
from ce_runtime.trace import events as T

DEFAULT_MODEL = "scripted"
# the tools Pi offers the model (`--tools`): its default four and its search tools
TOOLS = ("read", "bash", "edit", "write", "grep", "find", "ls")
# fd as Pi's find tool runs it (`fd --glob --color=never --hidden --no-require-git
# --max-results N [--full-path] -- PATTERN PATH`), for a sandbox without one: a real fd
# (or Debian's fdfind) on PATH is run instead. Else ce's rg (@RG@) lists the files under
# PATH that the ignore files keep (.gitignore, .ignore ...; .git itself left out, as fd
# 9+ does with --hidden), and of those prints the ones PATTERN matches (an rg glob
# overrides the ignore files: so two lists, the second filtered by the first), at most N.
# PATTERN as fd matches it: any case unless it has a capital (fd's smart case), a name
# at any depth, or with a `/` (--full-path) the path below PATH (fd: the absolute path;
# Pi writes `**/` before a relative one, and an absolute one under PATH is anchored at
# PATH). Files only: fd also names directories.
FD = r"""#!/bin/sh
for fd in fd fdfind; do
  command -v "$fd" >/dev/null 2>&1 && exec "$fd" "$@"
done
rg=@RG@ max=0
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    --max-results) max=$2; shift ;;
    --max-results=*) max=${1#*=} ;;
  esac
  shift
done
pattern=$1 dir=${2:-.}
[ -d "$dir" ] || { echo "[fd error]: Search path '$dir' is not a directory." >&2; exit 1; }
case $pattern in "${dir%/}"/*) pattern=${pattern#"${dir%/}"} ;; esac
cd "$dir" || exit 1  # (where rg anchors a glob's leading /)
case $pattern in *[[:upper:]]*) glob=--glob ;; *) glob=--iglob ;; esac
{ "$rg" --files --hidden --no-require-git --glob '!.git' -- "$dir"
  echo
  "$rg" --files --hidden --no-ignore --glob '!.git' "$glob" "$pattern" -- "$dir"
} | awk -v max="$max" 'listed { if ($0 in kept) { print; if (++n == max) exit } next }
  $0 == "" { listed = 1; next } { kept[$0] = 1 }'
"""
# ce's Pi extension (see above): says each model call as it is made (`ce_model_call`), and
# holds a call past `run_limits.max_turns` (written into it: 0 for none) for good
# (`ce_max_turns`), counted as ce counts Pi's turns: its answered calls (a failed call Pi
# retries is the same turn). Its lines go to fd 1 itself: Pi's JSON mode sends an
# extension's process.stdout to stderr.
EXTENSION = """\
import { writeSync } from "node:fs";
const MAX = @MAX_TURNS@;
const say = (obj) => writeSync(1, JSON.stringify(obj) + "\\n");
export default function (pi) {
  let answered = 0;
  let held = false;
  say({type: "ce_extension"});
  pi.on("message_end", async (event) => {
    const m = event && event.message;
    if (m && m.role === "assistant" && m.stopReason !== "error") answered += 1;
  });
  pi.on("before_provider_request", async () => {
    if (MAX > 0 && answered >= MAX) {
      if (!held) say({type: "ce_max_turns", turns: answered});
      held = true;
      await new Promise(() => {});
    }
    say({type: "ce_model_call"});
  });
}
"""


class _State:
    """What mapping one Pi run keeps besides `Events`."""

    def __init__(self) -> None:
        self.failed = False  # the open turn's model call failed (Pi may retry it)
        self.extension = False  # ce's extension said it is loaded
        self.held: int | None = None  # the extension holds the model call after this turn
        # the failure of that call, said once Pi says whether it retries it (its
        # `auto_retry_start` names the retry and the most it makes): (error, status)
        self.failure: tuple[str, int | None] | None = None


def _say_failure(events: Events, attempt: int | None = None,
                 retries: int | None = None) -> None:
    """The failed model call as a ModelError, `attempt` of `retries` when Pi retries it
    (as Claude Code's api_retry and Codex's reconnects say theirs)."""
    state = _state(events)
    if state.failure is not None:
        error, status = state.failure
        state.failure = None
        events.emit(T.ModelError, error, status, attempt, retries)


def _state(events: Events) -> _State:
    state = getattr(events, "pi", None)
    if state is None:
        state = events.pi = _State()  # type: ignore[attr-defined]
    return state


def _prompt_arg(prompt: str) -> str:
    """The prompt as Pi's argument. Pi reads an argument that starts with `-` as an
    option (an unknown one is an error, exit 1) and one with `@` as a file to attach,
    and knows no `--`: such a prompt goes after a newline, as text."""
    return "\n" + prompt if prompt.startswith(("-", "@")) else prompt


class PiAgent(CliAgent):
    name = "pi"
    default_model = DEFAULT_MODEL
    priced_by_ce = True  # its tokens are priced from ce's rate card (ce_runtime.pricing)

    async def prepare(self, request: AgentRequest, events: Events):
        box = request.sandbox
        home = box.env(AGENT).get("HOME", "/tmp")
        agent_dir = f"{home}/.pi-agent"
        base = await model_url(request, "https://api.openai.com/v1")
        model, events.rates = pricing.agent_rates(request.agent, DEFAULT_MODEL)
        models = {"providers": {"ce": {
            "baseUrl": base, "api": "openai-completions", "apiKey": "CE_PI_API_KEY",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": model, "name": model, "contextWindow": 128000,
                        "maxTokens": 8192}]}}}
        settings = {"defaultProvider": "ce", "defaultModel": model,
                    "enableInstallTelemetry": False, "quietStartup": True}
        await box.write_file(f"{agent_dir}/models.json", json.dumps(models).encode())
        await box.write_file(f"{agent_dir}/settings.json", json.dumps(settings).encode())
        extension = f"{agent_dir}/ce-extension.js"
        await box.write_file(extension, EXTENSION.replace(
            "@MAX_TURNS@", str(int(events.max_turns or 0))).encode())
        rg = request.tools.get("rg")
        if rg is not None:  # Pi's own rg and fd (`FD`), looked for before PATH's
            rg = box.program(rg)
            await box.write_file(f"{agent_dir}/bin/rg", exec_script(rg), mode=0o755)
            await box.write_file(f"{agent_dir}/bin/fd",
                                 FD.replace("@RG@", shlex.quote(rg)).encode(), mode=0o755)
        argv = [*_node_script(box, request.tools["pi"]), "--mode", "json", "-p", "--no-session",
                "--tools", ",".join(TOOLS), "--extension", extension, "--provider", "ce",
                "--model", model, _prompt_arg(request.prompt or "")]
        env = {"PI_CODING_AGENT_DIR": agent_dir, "PI_OFFLINE": "1",
               "NO_PROXY": "127.0.0.1,localhost"}
        return argv, env, {"CE_PI_API_KEY": (request.model_endpoint or {}).get("api_key") or ""}

    def on_line(self, obj: dict[str, Any], events: Events) -> None:
        self._line(obj, events)
        events.held_after(_state(events).held, self.name)

    def _line(self, obj: dict[str, Any], events: Events) -> None:
        kind = obj.get("type")
        state = _state(events)
        if kind in ("turn_start", "message_start", "message_end", "auto_retry_end"):
            _say_failure(events)  # Pi went on without retrying it (its turn_end and
            # agent_end come between the failure and its auto_retry_start)
        if kind == "ce_extension":
            state.extension = True
        elif kind == "ce_model_call":  # a model call is made: it opens its turn (a retry's
            events.turn_start()  # is in the failed call's turn, still open)
        elif kind == "ce_max_turns":
            state.held = int(obj.get("turns") or 0)
        elif kind == "session":
            events.session = f"session {obj.get('id')}"
        elif kind == "turn_start":
            state.failed = False
            if not state.extension:  # (its model call opens the turn)
                if events.turn == 0:
                    events.emit(T.Message, "system", "ce: pi did not load ce's extension: "
                                "max_turns is held only by ce's stop, once a turn past it "
                                "has begun")
                events.turn_start()  # (a retry's: the open turn, kept open for it)
        elif kind == "turn_end":
            if not state.failed:  # a failed call's turn waits: Pi may retry it
                events.turn_end()
        elif kind == "auto_retry_start":  # the failed call again: the same turn
            attempt, most = obj.get("attempt"), obj.get("maxAttempts")
            _say_failure(events, attempt if isinstance(attempt, int) else None,
                         most if isinstance(most, int) else None)
            events.error = None
        elif kind == "auto_retry_end" and not obj.get("success"):
            # no more retries: the failure is the run's error, and ends its turn (so does
            # the end of the run when Pi does not retry it at all)
            events.error = events.error or str(obj.get("finalError") or "the model call failed")
            events.turn_end()
        elif kind == "message_end":
            message = obj.get("message") or {}
            if message.get("role") != "assistant":
                return
            failed = message.get("stopReason") == "error"
            for item in message.get("content") or []:
                if item.get("type") == "text" and item.get("text"):
                    events.emit(T.Message, "assistant", str(item["text"]))
                elif item.get("type") == "toolCall" and not failed:  # (a failed one's never run)
                    events.call(str(item.get("id")), str(item.get("name")),
                                item.get("arguments") or {})
            u = message.get("usage") or {}
            if not failed or any(u.get(k) for k in ("input", "output", "totalTokens")):
                events.usage(int(u.get("input") or 0), int(u.get("output") or 0),
                             int(u.get("cacheRead") or 0), int(u.get("cacheWrite") or 0))
            if failed:  # (Pi may retry it: `auto_retry_start` follows)
                state.failed = True
                events.error = str(message.get("errorMessage") or "the model call failed")
                status = re.match(r"([45]\d\d)\b", events.error)
                state.failure = (events.error, int(status[1]) if status else None)
            elif not message.get("content") and not any(
                    u.get(k) for k in ("input", "output", "totalTokens")):
                # nothing and no usage: the reply never came (a stream cut off is taken
                # for an empty answer, and the run would end as if the agent were done)
                events.abort("pi: a model call returned no content and no usage: the "
                             "model's reply was cut off or empty")
        elif kind == "tool_execution_end":
            result = obj.get("result") or {}
            text = "\n".join(str(c.get("text") or "") for c in result.get("content") or []
                             if isinstance(c, dict))
            events.result(str(obj.get("toolCallId")), not obj.get("isError"), text)


    def ended(self, events: Events) -> None:
        _say_failure(events)  # (the CLI ended before it said whether it retries it)


def _node_script(box, script: str) -> list[str]:
    """pi is a node script (`#!/usr/bin/env node`): run by the node that installed it, as
    the sandbox runs that (a docker image needs none of its own)."""
    node = shutil.which("node")
    return [box.program(node), os.path.realpath(script)] if node else [script]
