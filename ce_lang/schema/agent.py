"""The `agent:` block (also nested in `agent_judge`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ce_lang.schema.fields import spec

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]

# Agent kinds ce ships; third-party agents add theirs through the `ce.agents` entry points.
BUILTIN_AGENT_TYPES = ("claude-code", "codex", "opencode", "pi", "openai", "none", "oracle", "script")
# those whose tokens ce prices from its rate card and `agent.pricing` (their CLI reports
# no cost, or $0 for the model ce configures; the adapters say `priced_by_ce`, and a test
# holds the two equal)
PRICED_BY_CE = ("codex", "opencode", "pi", "openai")
MODEL_FREE = ("none", "oracle", "script")  # those that call no model
# agent keys only some built-in types read (the adapters in ce_agents/, the endpoint in
# ce_runtime/execute/credentials.py): set where the task's type is another, the key has
# no effect (CE0214, ce_lang/rules_agent_keys.py). `model` and `pricing` have their own
# warnings, `sdk_options` its error (CE0112)
_CLAUDE = ("claude-code",)
_OPENAI_COMPATIBLE = ("codex", "opencode", "pi", "openai")
READ_BY: dict[str, tuple[str, ...]] = {
    "script": ("script",),
    "model_script": (*_CLAUDE, *_OPENAI_COMPATIBLE),
    "base_url": _OPENAI_COMPATIBLE,
    "api_key_env": _OPENAI_COMPATIBLE,
    **{key: _CLAUDE for key in (
        "permission_mode", "allowed_tools", "disallowed_tools", "system_prompt",
        "system_prompt_file", "system_prompt_mode", "context_window", "claude_settings",
        "setting_sources", "plugins")},
}


@attrs.frozen(kw_only=True)
class ModelRates:
    """One model's prices in `agent.pricing`, USD per million tokens."""

    input: float = spec(ge=0, doc="USD per million new input tokens (not from the cache)")
    output: float = spec(ge=0, doc="USD per million output tokens")
    cache_read: float | None = spec(None, ge=0,
        doc="USD per million input tokens read from the prompt cache (default: `input`)")
    cache_write: float | None = spec(None, ge=0,
        doc="USD per million input tokens written to the prompt cache (default: `input`)")


@attrs.frozen(kw_only=True)
class AgentConfig:
    __ce_removed__: ClassVar[dict[str, str]] = {
        "max_turns": "moved to `run_limits.max_turns`",
        "turn_timeout": "moved to `run_limits.turn_timeout`",
        "task_timeout": "moved to `run_limits.task_timeout`",
    }
    type: str | None = spec(None, doc="agent kind: claude-code (default), codex, openai, none, ...")
    model: str | None = spec(None, doc="model id passed to the agent")
    permission_mode: PermissionMode = spec("acceptEdits", doc="claude-code's permission mode")
    allowed_tools: list[str] | None = spec(None, merge="replace", doc="tools auto-approved")
    disallowed_tools: list[str] | None = spec(None, merge="replace",
        doc="tools the agent may not use (claude-code)")
    system_prompt: str | None = spec(None,
        doc="text appended to the agent's system prompt, or replacing it (claude-code)")
    system_prompt_file: str | None = spec(None, path="task", doc="a file holding system_prompt")
    system_prompt_mode: Literal["append", "replace"] = spec("append",
        doc="append system_prompt to the agent's own system prompt, or replace it")
    context_window: int | None = spec(None, gt=0,
        doc="claude-code's auto-compact window, in tokens")
    sdk_options: dict[str, Any] = spec(
        factory=dict, doc="Claude Code ClaudeAgentOptions pass-through (deep-merged)"
    )
    claude_settings: str | dict[str, Any] | None = spec(None, merge="replace",
        doc="claude-code settings: a settings file path or an inline mapping")
    setting_sources: list[Literal["user", "project", "local"]] | None = spec(
        None, merge="replace",
        doc="which Claude Code settings load (default: project: the workspace's .claude/)")
    plugins: list[dict[str, Any]] | None = spec(None, merge="replace",
        doc="Claude Code plugins (`path` relative to the task file, a directory; `type` "
            "defaults to `local`, the only type)")
    ignore_patterns: list[str] = spec(factory=list, merge="replace",
        doc="coder_eval's agent ignore patterns; accepted, not used by ce")
    base_url: str | None = spec(None, doc="OpenAI-compatible endpoint for `type: openai`")
    api_key_env: str | None = spec(None, doc="environment variable holding the API key")
    pricing: dict[str, ModelRates] | None = spec(
        None, doc="ce: what the model costs, for agents whose CLI reports tokens but no price "
                  "(codex, openai): model id -> rates, over ce's rate card; a model on "
                  "neither has an unknown cost")
    model_script: str | None = spec(
        None, path="task", doc="ce: the scripted model session `ce run --scripted-model` "
                               "replays for this agent (default: <task>.<agent type>.model.yaml "
                               "beside the task)")
    script: list[dict[str, Any]] | None = spec(
        None, merge="replace", doc="actions the `script` agent replays (tests and demos)")
