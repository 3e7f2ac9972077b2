"""Finding agents by name: built-ins, then the `ce.agents` entry points of installed
packages (third-party agents register there)."""

from __future__ import annotations

from typing import Any

BUILTIN = {
    "claude-code": "ce_agents.claude_code:ClaudeCodeAgent",
    "codex": "ce_agents.codex:CodexAgent",
    "opencode": "ce_agents.opencode:OpenCodeAgent",
    "pi": "ce_agents.pi:PiAgent",
    "openai": "ce_agents.openai_loop:OpenAIAgent",
    "none": "ce_agents.none:NoneAgent",
    "oracle": "ce_agents.oracle:OracleAgent",
    "script": "ce_agents.script:ScriptAgent",
}


PLANNED: tuple[str, ...] = ()  # accepted by the task format, adapters to come (none now)


class UnknownAgent(Exception):
    pass


def load_agent(name: str) -> Any:
    from ce_runtime.execute.registry import find

    cls = find(name, BUILTIN, "ce.agents")
    if cls is not None:
        return cls()
    if name in PLANNED:
        raise UnknownAgent(f"the {name} agent adapter is not in this build yet; run with "
                           "--agent oracle (reference solution) or --agent script")
    raise UnknownAgent(f"no agent named {name!r} is installed (built in: "
                       f"{', '.join(sorted(BUILTIN))})")
