"""Where an agent's model answers: the scripted model server of `ce run --scripted-model`
(its session for this task and agent type), or the real service with the credentials in
ce's environment. Both are checked before any trial starts; a missing one is named, and
nothing of a key is ever printed."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

MODEL_AGENTS = {"claude-code": "anthropic", "codex": "openai", "openai": "openai",
                "opencode": "openai", "pi": "openai"}
# the variables an OpenAI-compatible agent reads, by agent (the first set one wins)
OPENAI_KEYS = {"codex": ("CODEX_API_KEY", "OPENAI_API_KEY")}
OPENAI_URLS = {"codex": ("CODEX_BASE_URL", "OPENAI_BASE_URL")}


def script_path(agent: Any, task_file: str, agent_type: str) -> str:
    """`agent.model_script` (relative to the task file), else
    `<task file stem>.<agent type>.model.yaml` beside the task."""
    base = os.path.dirname(os.path.abspath(task_file))
    if getattr(agent, "model_script", None):
        return os.path.normpath(os.path.join(base, agent.model_script))
    stem = os.path.splitext(os.path.basename(task_file))[0]
    return os.path.join(base, f"{stem}.{agent_type}.model.yaml")


def _openai(agent_type: str, agent: Any, env: Mapping[str, str]) -> tuple[str, str, str]:
    """(key variable, key, base URL) of an OpenAI-compatible agent."""
    names = OPENAI_KEYS.get(agent_type, ("OPENAI_API_KEY",))
    if agent is not None and getattr(agent, "api_key_env", None):
        names = (agent.api_key_env,)
    key_name = next((n for n in names if env.get(n)), names[0])
    url = (getattr(agent, "base_url", None) if agent is not None else None) or next(
        (env[n] for n in OPENAI_URLS.get(agent_type, ("OPENAI_BASE_URL",)) if env.get(n)),
        "https://api.openai.com/v1")
    return key_name, env.get(key_name, ""), url


def real_endpoint(agent_type: str, environ: Mapping[str, str] | None = None,
                  agent: Any = None) -> dict[str, Any] | None:
    env = os.environ if environ is None else environ
    if MODEL_AGENTS.get(agent_type) == "openai":
        _, key, url = _openai(agent_type, agent, env)
        return {"base_url": url, "api_key": key}
    if MODEL_AGENTS.get(agent_type) != "anthropic":
        return None
    if (env.get("API_BACKEND") or "direct") == "bedrock":
        return {"base_url": env.get("ANTHROPIC_BEDROCK_BASE_URL") or "",
                "api_key": "", "env": {k: env[k] for k in (
                    "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION", "ANTHROPIC_MODEL")
                    if k in env} | {"CLAUDE_CODE_USE_BEDROCK": "1"}}
    return {"base_url": env.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com",
            "api_key": env.get("ANTHROPIC_API_KEY", "")}


def missing(agent_type: str, environ: Mapping[str, str] | None = None,
            agent: Any = None) -> str | None:
    """What the real service needs and ce's environment lacks (None: all there)."""
    env = os.environ if environ is None else environ
    if MODEL_AGENTS.get(agent_type) == "openai":
        key_name, key, _ = _openai(agent_type, agent, env)
        return None if key else (f"{key_name} is not set (or run offline against scripted "
                                 "replies: --scripted-model)")
    if MODEL_AGENTS.get(agent_type) != "anthropic":
        return None
    backend = env.get("API_BACKEND") or "direct"
    if backend == "bedrock":
        lacking = [k for k in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION") if not env.get(k)]
        return f"API_BACKEND=bedrock needs {' and '.join(lacking)}" if lacking else None
    if backend != "direct":
        return f"API_BACKEND={backend!r} is not a backend ce knows (direct, bedrock)"
    if not env.get("ANTHROPIC_API_KEY"):
        return ("ANTHROPIC_API_KEY is not set (or run offline against scripted replies: "
                "--scripted-model)")
    return None
