"""The `opencode` agent: OpenCode (npm `opencode-ai`, pinned; ce installs it) pointed at
any OpenAI-compatible endpoint, `opencode run --format json --auto` in the sandbox.

Its configuration is the JSON in OPENCODE_CONFIG_CONTENT (one provider, the task's model,
autoupdate and sharing off) and private XDG directories in the sandbox's HOME;
OPENCODE_DISABLE_MODELS_FETCH and npm's offline mode keep it off the network. Its config
directory is seeded as if its plugin helper package were installed (`DEPS`): OpenCode
otherwise loads npm's installer at every start to add it (offline, it only fails), and
waits for that before loading a plugin such as ce's: ~1 s of CPU before the first model
call, and more on a loaded machine. The prompt is
OpenCode's standard input, read from a file (as an argument, one with spaces is sent
wrapped in quotes, its own quotes escaped; as words, its lines and indentation were lost
and a word such as `--version` read as an option). Events: `step_start` /
`step_finish` are turns (with tokens and cost), `tool_use` a call and its result (its
tools get Claude Code's names: `bash` is Bash, `write` Write, `skill` Skill ...,
`T.normalize_tool`), `text` the assistant's words, `error` the run's error.

`opencode run` prints a tool call only once it has completed, and its `step_start` only
once the step's tools are under way: a call cut off (a timeout, a stop) never showed, nor
could ce's stop at a turn past `max_turns` come before that turn's tools ran. So ce gives
OpenCode a plugin of its own (`PLUGIN`, loaded from the sandbox's HOME by the config),
which prints on the same stdout a `ce_tool_start` line as each tool of the run's session
starts, and holds the session's model call past `run_limits.max_turns` (its count of the
session's steps, the turns ce counts): it prints `ce_max_turns` and never makes the call,
and ce ends the CLI once that turn's last events are read: outcome `max_turns`, as Claude
Code's own cap. It prints `ce_model_call` as each other model call of the session is
made, and that opens its turn: OpenCode's `step_start` shows only once the model has
answered, and a model slow to answer (or never answering) was in no turn, out of
`run_limits.turn_timeout`'s reach. The plugin's lines come straight from the tool's start, OpenCode's own
through its event stream, a little later: a tool of the next step may start before the
last step's `step_finish` is printed. So the turns are OpenCode's lines alone: a started
call is recorded when its step's `step_start` is read (the plugin says its step), or with
its result, or, cut off before either, when the CLI has ended (unresolved). A call's
result is the plugin's `ce_tool_end` line, printed as the tool returns: OpenCode prints
the completed call later, through its event stream, and a run ended in between (a turn
timeout, a stop) had a call that ran to its end recorded as unresolved.

Its glob, grep and skill tools run ripgrep, which OpenCode downloads when neither PATH
nor its cache directory has one: ce installs a pinned one beside it and puts a launcher
of it in the trial's cache directory (ce_runtime/execute/sandbox/ripgrep.py).

OpenCode prices a call from the cost its configuration gives the model, and ce's holds
none: its own figure would be $0 for every call. ce prices the tokens itself, from its
rate card or the task's `agent.pricing` (`ce_runtime.pricing`), as for Codex.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ce_agents.cli_agent import CliAgent, Events, exec_script, model_url
from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import AGENT, AgentRequest
from ce_runtime.trace import events as T

DEFAULT_MODEL = "scripted"
INVALID = "invalid"  # OpenCode's stand-in for a call it cannot make (`_called`)
# what OpenCode installs into each config directory at start (`@opencode-ai/plugin`, for
# plugins there to import: ce's imports nothing): it runs npm's installer unless the
# directory has a node_modules and a package-lock.json listing every dependency of its
# package.json. Offline the install only failed, so nothing is missing that was there.
DEPS = {"@opencode-ai/plugin": "*"}
# ce's OpenCode plugin (see above): the run's session is the one of its first model call
# (its title's, or its first step's; a sub-agent's session starts later). Its step-start
# parts are the turns (a failed request opens none); a model call of that session past
# the cap (written into it: 0 for none) is held for good (ce ends the CLI); a tool's start
# names its step (the message its part belongs to); a tool that returned (a thrown one is
# OpenCode's `tool_use` error alone) says its output and exit code.
PLUGIN = """\
const MAX = @MAX_TURNS@;
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\\n");
export const CePlugin = async () => {
  let root = null;
  const steps = new Set();
  const step = new Map();
  let held = false;
  say({type: "ce_plugin"});
  return {
    event: async ({event}) => {
      const status = event && event.type === "session.status" && event.properties;
      if (status && status.sessionID === root && status.status && status.status.type === "retry")
        say({type: "ce_model_retry", attempt: status.status.attempt, message: status.status.message});
      const part = event && event.properties && event.properties.part;
      if (event.type !== "message.part.updated" || !part || part.sessionID !== root) return;
      if (part.type === "step-start") steps.add(part.id);
      else if (part.type === "tool") step.set(part.callID, part.messageID);
    },
    "chat.params": async (input) => {
      if (root === null) root = input.sessionID;
      const agent = typeof input.agent === "string" ? input.agent : (input.agent || {}).name;
      if (MAX > 0 && input.sessionID === root && agent !== "title" && steps.size >= MAX) {
        if (!held) say({type: "ce_max_turns", turns: steps.size});
        held = true;
        await new Promise(() => {});
      }
      if (input.sessionID === root && agent !== "title") say({type: "ce_model_call"});
    },
    "tool.execute.before": async (input, output) => {
      if (input.sessionID === root) say({type: "ce_tool_start", callID: input.callID,
        messageID: step.get(input.callID) || null, tool: input.tool, args: output.args});
    },
    "tool.execute.after": async (input, output) => {
      if (input.sessionID !== root || !output || typeof output.output !== "string") return;
      const exit = output.metadata && output.metadata.exit;
      say({type: "ce_tool_end", callID: input.callID, tool: input.tool,
        exit: typeof exit === "number" ? exit : null, output: output.output});
    },
  };
};
"""


def _called(tool: Any, args: Any) -> tuple[str, dict[str, Any]]:
    """(the tool the model called, its arguments). A call OpenCode could not make (a tool
    it lacks, arguments its schema refuses) it runs as its tool `invalid`, `{tool,
    error}`, which answers the error: it is recorded as a call of the model's tool
    (its arguments are gone), and fails."""
    args = args if isinstance(args, dict) else {}
    if tool == INVALID and isinstance(args.get("tool"), str) and args["tool"]:
        return args["tool"], {}
    return str(tool), args


class _State:
    """What mapping one OpenCode run keeps besides `Events`."""

    def __init__(self) -> None:
        self.plugin = False  # ce's plugin said it is loaded
        self.held: int | None = None  # the plugin holds the model call after this turn
        self.step: str | None = None  # the message of the open turn's step
        self.early = False  # the open turn is a model call's whose step has not shown
        self.next = False  # a model call was made before the open turn's step_finish
        # calls started (the plugin's lines) and not recorded yet: id -> (step, tool, args)
        self.started: dict[str, tuple[str | None, str, dict[str, Any]]] = {}
        # results the plugin said of calls not recorded yet: id -> (ok, output)
        self.returned: dict[str, tuple[bool, str]] = {}
        self.resolved: set[str] = set()  # calls whose result is in the trace


def _state(events: Events) -> _State:
    state = getattr(events, "opencode", None)
    if state is None:
        state = events.opencode = _State()  # type: ignore[attr-defined]
    return state


class OpenCodeAgent(CliAgent):
    name = "opencode"
    default_model = DEFAULT_MODEL
    priced_by_ce = True  # its tokens are priced from ce's rate card (ce_runtime.pricing)

    async def prepare(self, request: AgentRequest, events: Events):
        home = request.sandbox.env(AGENT).get("HOME", "/tmp")
        base = await model_url(request, "https://api.openai.com/v1")
        model, events.rates = pricing.agent_rates(request.agent, DEFAULT_MODEL)
        plugin = f"{home}/.ce-opencode/ce-plugin.js"  # not in its config dir: loaded once
        await request.sandbox.write_file(plugin, PLUGIN.replace(
            "@MAX_TURNS@", str(int(events.max_turns or 0))).encode())
        config = {"provider": {"ce": {
            "npm": "@ai-sdk/openai-compatible", "name": "ce",
            "options": {"baseURL": base, "apiKey": "{env:CE_OPENCODE_API_KEY}"},
            "models": {model: {"name": model, "tool_call": True,
                               "limit": {"context": 128000, "output": 8192}}}}},
            "model": f"ce/{model}", "small_model": f"ce/{model}",
            "enabled_providers": ["ce"], "autoupdate": False, "share": "disabled",
            "plugin": [f"file://{plugin}"]}
        env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config),
               "OPENCODE_DISABLE_MODELS_FETCH": "1", "npm_config_offline": "true",
               "XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
               "XDG_CACHE_HOME": f"{home}/.cache", "XDG_STATE_HOME": f"{home}/.local/state",
               "NO_PROXY": "127.0.0.1,localhost"}
        config_dir = f"{env['XDG_CONFIG_HOME']}/opencode"
        await request.sandbox.write_file(f"{config_dir}/package.json",
                                         json.dumps({"dependencies": DEPS}).encode())
        await request.sandbox.write_file(f"{config_dir}/package-lock.json", json.dumps(
            {"lockfileVersion": 3, "packages": {"": {"dependencies": DEPS}}}).encode())
        # node_modules must exist (write_file makes it for a marker file in it)
        await request.sandbox.write_file(f"{config_dir}/node_modules/.ce-seeded", b"")
        rg = request.tools.get("rg")
        if rg is not None:  # where OpenCode looks for its rg when PATH has none (its bin)
            await request.sandbox.write_file(
                f"{env['XDG_CACHE_HOME']}/opencode/bin/rg",
                exec_script(request.sandbox.program(rg)), mode=0o755)
        prompt = f"{home}/.ce-opencode/prompt.txt"
        await request.sandbox.write_file(prompt, (request.prompt or "").encode())
        argv = ["sh", "-c", 'exec "$0" run --format json --auto < "$1"',
                request.tools["opencode"], prompt]
        return argv, env, {"CE_OPENCODE_API_KEY":
                           (request.model_endpoint or {}).get("api_key") or ""}

    def on_line(self, obj: dict[str, Any], events: Events) -> None:
        self._line(obj, events)
        events.held_after(_state(events).held, self.name)

    def _line(self, obj: dict[str, Any], events: Events) -> None:
        kind, part = obj.get("type"), obj.get("part") or {}
        state = _state(events)
        if kind == "ce_plugin":
            state.plugin = True
            return
        if kind == "ce_tool_start":  # a tool starts (its step_start may come after it)
            call_id = str(obj.get("callID"))
            if call_id not in events.calls:
                step = obj.get("messageID")
                state.started[call_id] = (step, *_called(obj.get("tool"), obj.get("args")))
                if step is not None and step == state.step and events.open:
                    self._record_started(events, step)
            return
        if kind == "ce_tool_end":  # a tool returned (OpenCode's tool_use may come later)
            call_id = str(obj.get("callID"))
            ok = obj.get("exit") in (0, None) and obj.get("tool") != INVALID
            state.returned[call_id] = (ok, str(obj.get("output") or ""))
            if call_id in events.calls:
                self._resolve(events, call_id)
            return
        if kind == "ce_max_turns":
            state.held = int(obj.get("turns") or 0)
            return
        if kind == "ce_model_retry":  # a model call failed; OpenCode retries it
            why = str(obj.get("message") or "the model call failed")
            status = re.search(r"\b([45]\d\d)\b", why)
            attempt = obj.get("attempt")
            events.emit(T.ModelError, why, int(status[1]) if status else None,
                        attempt if isinstance(attempt, int) else None)
            return
        if kind == "ce_model_call":  # (a retry's is the same call: its turn is open)
            if not events.open:
                events.turn_start()
                state.early = True
            elif not state.early:
                state.next = True  # the last step's step_finish is still on its way
            return
        events.session = events.session or (f"session {obj['sessionID']}"
                                             if obj.get("sessionID") else None)
        if kind == "step_start":
            if not state.plugin and events.turn == 0:
                events.emit(T.Message, "system", "ce: opencode did not load ce's plugin: a "
                            "tool call shows only once it completes, and max_turns is held "
                            "only by ce's stop")
            if state.early:  # its turn opened with its model call
                state.early = False
            else:
                events.turn_start()
            state.step = part.get("messageID")
            if state.step is not None:
                self._record_started(events, state.step)
        elif kind == "step_finish":
            tokens = part.get("tokens") or {}
            cache = tokens.get("cache") or {}
            if part.get("reason") in ("unknown", None) and not any(
                    tokens.get(k) for k in ("input", "output", "reasoning")):
                # no finish reason, no usage: the model's reply never came whole (its
                # stream was cut off); OpenCode would ask again and again, forever
                events.abort("opencode: a model call ended with no finish reason and no "
                             "usage: the model's reply was cut off or empty")
            events.usage(int(tokens.get("input") or 0), int(tokens.get("output") or 0),
                         int(cache.get("read") or 0), int(cache.get("write") or 0))
            events.turn_end()
            if state.next:  # the next model call is already under way
                state.next = False
                events.turn_start()
                state.early = True
        elif kind == "tool_use":
            tool = part.get("state") or {}
            call_id = str(part.get("callID") or part.get("id"))
            state.started.pop(call_id, None)
            state.returned.pop(call_id, None)
            if call_id not in events.calls:  # (else recorded once its step had started)
                events.call(call_id, *_called(part.get("tool"), tool.get("input")))
            if call_id in state.resolved:  # its result came from the plugin
                return
            state.resolved.add(call_id)
            exit_code = (tool.get("metadata") or {}).get("exit")
            ok = tool.get("status") == "completed" and exit_code in (0, None) \
                and part.get("tool") != INVALID
            events.result(call_id, ok, str(tool.get("output") or tool.get("error") or ""))
        elif kind == "text":
            events.emit(T.Message, "assistant", str(part.get("text") or ""))
        elif kind == "error":
            error = obj.get("error") or {}
            events.error = str((error.get("data") or {}).get("message") or error or obj)

    @staticmethod
    def _record_started(events: Events, step: str | None) -> None:
        """The started calls of `step` (None: every one left), in the open turn."""
        state = _state(events)
        for call_id, (of, tool, args) in list(state.started.items()):
            if step is None or of == step:
                del state.started[call_id]
                if call_id not in events.calls:
                    events.call(call_id, tool, args)
                    OpenCodeAgent._resolve(events, call_id)

    @staticmethod
    def _resolve(events: Events, call_id: str) -> None:
        """The result the plugin said of a recorded call, if it has said one."""
        state = _state(events)
        returned = state.returned.pop(call_id, None)
        if returned is not None and call_id not in state.resolved:
            state.resolved.add(call_id)
            events.result(call_id, *returned)

    def ended(self, events: Events) -> None:
        """Calls cut off before OpenCode printed their step or their end: in the turn
        still open (a new one if their step never showed), unresolved."""
        if _state(events).started:
            events.turn_start()
            self._record_started(events, None)
