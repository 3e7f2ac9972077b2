"""What a Codex session log (`rollout-*.jsonl`) says, read the same way by ce's live
codex agent (ce_agents/codex.py) and by `ce trace import` of a log made elsewhere
(trace/import_codex.py): which items are the model's answer, how a command's exit and a
call of a tool Codex lacks are written, and a tool output as the model got it."""

from __future__ import annotations

import json
import re
from typing import Any

# what the model answers (a turn starts at the first of an answer)
ANSWER_ITEMS = {"message", "reasoning", "function_call", "custom_tool_call",
                "local_shell_call", "web_search_call", "image_generation_call",
                "tool_search_call"}
EXIT = re.compile(r"^Process exited with code (-?\d+)", re.MULTILINE)
PATCH_OK = re.compile(r"^Exit code: 0\b")
# Codex's answer to a call of a tool it does not have (the model's error, not a result)
UNSUPPORTED = re.compile(r"^unsupported (?:custom tool )?call: ")


def call_params(raw: Any) -> dict[str, Any]:
    """A function call's arguments (JSON text) as its params; kept whole under
    `arguments` when they are not a JSON object."""
    try:
        params = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        params = None
    return params if isinstance(params, dict) else {"arguments": raw}


def tool_output_text(output: Any) -> str:
    """A tool's output as the model got it, from a string or content items."""
    if isinstance(output, dict):
        output = output.get("content") or output.get("text") or json.dumps(output)
    if isinstance(output, list):
        return "\n".join(str(c.get("text") or "") if isinstance(c, dict) else str(c)
                         for c in output)
    return str(output or "")


def output_with_exit(output: Any, code: Any) -> str:
    """A command's output with `[exit code N]` after it when it failed (Codex reports the
    code apart from the output)."""
    output = str(output or "")
    if code not in (0, None):
        output += ("" if output.endswith("\n") or not output else "\n") + \
            f"[exit code {code}]"
    return output
