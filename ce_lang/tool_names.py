"""The tool names a trace holds: every agent's tools under Claude Code's names.

Shared by the trace (`ce_runtime.trace.events.normalize_tool` renames each call) and the
compiler (a criterion's `tool_name` another agent's spelling of a tool matches nothing).
"""

from __future__ import annotations

# A ToolCall's `tool` is Claude Code's name for what the call does, whichever agent made it,
# so that a criterion's `tool_name: Write` or `c.tool == "Skill"` means the same for every
# agent; `raw_tool` keeps the agent's own name. Looked up in any case: Claude Code's own
# names map to themselves (`Read` -> `read` -> `Read`), unknown names (MCP tools, Codex's
# write_stdin, view_image ...) stay as the agent named them. Only the names the agents ce
# drives or imports emit (OpenCode 1.18, Pi 0.73, Codex 0.171, ce's `openai` loop,
# coder_eval's Codex records):
TOOL_NAMES: dict[str, str] = {
    "bash": "Bash",  # OpenCode, Pi
    "shell": "Bash",  # ce's openai loop; Codex's former shell tool
    "exec_command": "Bash",  # Codex
    "local_shell": "Bash",  # Codex's local_shell_call
    "command_execution": "Bash",  # `codex exec --json`; coder_eval's Codex records
    "read": "Read",  # OpenCode, Pi, openai loop
    "write": "Write",  # OpenCode, Pi, openai loop
    "edit": "Edit",  # OpenCode, Pi, openai loop
    "apply_patch": "Edit",  # Codex, OpenCode (see normalize_tool)
    "glob": "Glob",  # OpenCode
    "find": "Glob",  # Pi: files by a glob pattern
    "grep": "Grep",  # OpenCode, Pi
    "ls": "LS",  # Pi
    "skill": "Skill",  # OpenCode
    "webfetch": "WebFetch",  # OpenCode
    "websearch": "WebSearch",  # OpenCode
    "todowrite": "TodoWrite",  # OpenCode
    "update_plan": "TodoWrite",  # Codex's plan: its to-do list
    "task": "Task",  # OpenCode: a sub-agent
}

# Claude Code's names: what a ToolCall's `tool` is for every call the agents emit
CANONICAL = frozenset(TOOL_NAMES.values()) | {
    "MultiEdit", "NotebookEdit", "BashOutput", "KillShell", "ExitPlanMode"}


def canonical_spelling(name: str) -> str | None:
    """The name a trace records for the tool `name` denotes, when that differs from
    `name`: `bash` and `BASH` are `Bash`, Codex's `exec_command` is `Bash`, `apply_patch`
    is `Edit`. None for a canonical name or one ce does not know (an MCP tool)."""
    canon = TOOL_NAMES.get(name) or TOOL_NAMES.get(name.lower())
    if canon is None:
        canon = next((c for c in CANONICAL if c.lower() == name.lower()), None)
    return None if canon is None or canon == name else canon
