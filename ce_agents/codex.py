"""The `codex` agent: OpenAI's Codex CLI (npm `@openai/codex`, pinned; ce installs it),
`codex exec --json` in the trial's sandbox.

A fresh CODEX_HOME per trial (in the sandbox's private HOME) holds the only config it
reads: the model, one provider pointing at the trial's endpoint (Responses API), and
analytics, plugins and apps off. Codex's own sandbox is bypassed: ce's is the boundary
(Codex's breaks inside another sandbox, and under tempdir its CODEX_HOME would sit under
TMPDIR, where it refuses to work).

Its JSON events become trace events: a turn per `turn.started`/`turn.completed` (with the
turn's usage), `command_execution` items as Bash calls (the `bash -lc` wrapper unwrapped,
so command_executed sees the command the model wrote) with their output and exit status,
`file_change` items as `apply_patch` calls, agent messages, and errors.
"""

from __future__ import annotations

from typing import Any

from ce_agents.cli_agent import CliAgent, Events, model_url
from ce_runtime.execute.agent_protocol import AGENT, AgentRequest
from ce_runtime.trace import events as T

DEFAULT_MODEL = "gpt-5.5"
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


class CodexAgent(CliAgent):
    name = "codex"

    async def prepare(self, request: AgentRequest, events: Events):
        box = request.sandbox
        home = box.env(AGENT).get("HOME", "/tmp")
        codex_home = f"{home}/.codex"
        endpoint = request.model_endpoint or {}
        base = await model_url(request, "https://api.openai.com/v1")
        if not base.endswith("/v1"):
            base += "/v1"
        model = request.agent.get("model") or DEFAULT_MODEL
        await box.write_file(f"{codex_home}/config.toml",
                             CONFIG.format(model=model, base_url=base).encode())
        argv = [request.tools["codex"], "exec", "--json", "--skip-git-repo-check",
                "--ephemeral", "-C", request.workspace,
                "--dangerously-bypass-approvals-and-sandbox", request.prompt or ""]
        return argv, {"CODEX_HOME": codex_home, "NO_PROXY": "127.0.0.1,localhost"}, \
            {"CE_CODEX_API_KEY": endpoint.get("api_key") or ""}

    def on_line(self, obj: dict[str, Any], events: Events) -> None:
        kind = obj.get("type")
        if kind == "thread.started":
            events.session = f"thread {obj.get('thread_id')}"
        elif kind == "turn.started":
            events.turn_start()
        elif kind == "turn.completed":
            u = obj.get("usage") or {}
            events.emit(T.Usage, input_tokens=int(u.get("input_tokens") or 0),
                        output_tokens=int(u.get("output_tokens") or 0),
                        cache_read_tokens=int(u.get("cached_input_tokens") or 0))
            events.turn_end()
        elif kind == "turn.failed":
            events.error = str((obj.get("error") or {}).get("message") or obj)
            events.turn_end()
        elif kind in ("item.started", "item.completed"):
            self._item(obj.get("item") or {}, kind == "item.completed", events)
        elif kind == "error":
            events.emit(T.Message, "system", f"codex: {obj.get('message')}")

    @staticmethod
    def _item(item: dict[str, Any], done: bool, events: Events) -> None:
        kind, item_id = item.get("type"), str(item.get("id"))
        if kind == "command_execution":
            if item_id not in events.calls:
                events.call(item_id, "command_execution", {"command": item.get("command")})
            if done:
                code = item.get("exit_code")
                output = item.get("aggregated_output") or ""
                if code not in (0, None):
                    output += ("" if output.endswith("\n") or not output else "\n") + \
                        f"[exit code {code}]"
                events.result(item_id, code == 0, output)
        elif kind == "file_change" and done:
            changes = item.get("changes") or []
            events.call(item_id, "apply_patch", {"changes": changes})
            events.result(item_id, item.get("status") == "completed",
                          "\n".join(f"{c.get('kind')} {c.get('path')}" for c in changes))
        elif kind == "agent_message" and done:
            events.emit(T.Message, "assistant", str(item.get("text") or ""))
        elif kind == "error" and done:
            events.emit(T.Message, "system", f"codex: {item.get('message')}")
