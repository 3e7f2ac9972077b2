"""The `opencode` agent: OpenCode (npm `opencode-ai`, pinned; ce installs it) pointed at
any OpenAI-compatible endpoint, `opencode run --format json --auto` in the sandbox.

Its configuration is the JSON in OPENCODE_CONFIG_CONTENT (one provider, the task's model,
autoupdate and sharing off) and private XDG directories in the sandbox's HOME;
OPENCODE_DISABLE_MODELS_FETCH and npm's offline mode keep it off the network. The prompt
goes as separate words (OpenCode quotes an argument with spaces). Events: `step_start` /
`step_finish` are turns (with tokens and cost), `tool_use` a call and its result (its
tools get Claude Code's names: `bash` is Bash, `write` Write, `skill` Skill ...,
`T.normalize_tool`), `text` the assistant's words, `error` the run's error.

OpenCode prices a call from the cost its configuration gives the model, and ce's holds
none: its own figure would be $0 for every call. ce prices the tokens itself, from its
rate card or the task's `agent.pricing` (`ce_runtime.pricing`), as for Codex.
"""

from __future__ import annotations

import json
from typing import Any

from ce_agents.cli_agent import CliAgent, Events, model_url
from ce_runtime import pricing
from ce_runtime.execute.agent_protocol import AGENT, AgentRequest
from ce_runtime.trace import events as T

DEFAULT_MODEL = "scripted"


class OpenCodeAgent(CliAgent):
    name = "opencode"
    default_model = DEFAULT_MODEL
    priced_by_ce = True  # its tokens are priced from ce's rate card (ce_runtime.pricing)

    async def prepare(self, request: AgentRequest, events: Events):
        home = request.sandbox.env(AGENT).get("HOME", "/tmp")
        base = await model_url(request, "https://api.openai.com/v1")
        model, events.rates = pricing.agent_rates(request.agent, DEFAULT_MODEL)
        config = {"provider": {"ce": {
            "npm": "@ai-sdk/openai-compatible", "name": "ce",
            "options": {"baseURL": base, "apiKey": "{env:CE_OPENCODE_API_KEY}"},
            "models": {model: {"name": model, "tool_call": True,
                               "limit": {"context": 128000, "output": 8192}}}}},
            "model": f"ce/{model}", "small_model": f"ce/{model}",
            "enabled_providers": ["ce"], "autoupdate": False, "share": "disabled"}
        env = {"OPENCODE_CONFIG_CONTENT": json.dumps(config),
               "OPENCODE_DISABLE_MODELS_FETCH": "1", "npm_config_offline": "true",
               "XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
               "XDG_CACHE_HOME": f"{home}/.cache", "XDG_STATE_HOME": f"{home}/.local/state",
               "NO_PROXY": "127.0.0.1,localhost"}
        words = (request.prompt or "").split()
        argv = [request.tools["opencode"], "run", "--format", "json", "--auto", *words]
        return argv, env, {"CE_OPENCODE_API_KEY":
                           (request.model_endpoint or {}).get("api_key") or ""}

    def on_line(self, obj: dict[str, Any], events: Events) -> None:
        kind, part = obj.get("type"), obj.get("part") or {}
        events.session = events.session or (f"session {obj['sessionID']}"
                                             if obj.get("sessionID") else None)
        if kind == "step_start":
            events.turn_start()
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
        elif kind == "tool_use":
            state = part.get("state") or {}
            call_id = str(part.get("callID") or part.get("id"))
            events.call(call_id, str(part.get("tool")), state.get("input") or {})
            exit_code = (state.get("metadata") or {}).get("exit")
            ok = state.get("status") == "completed" and exit_code in (0, None)
            events.result(call_id, ok, str(state.get("output") or state.get("error") or ""))
        elif kind == "text":
            events.emit(T.Message, "assistant", str(part.get("text") or ""))
        elif kind == "error":
            error = obj.get("error") or {}
            events.error = str((error.get("data") or {}).get("message") or error or obj)
