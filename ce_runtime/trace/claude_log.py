"""Claude Code's records that both the live agent (ce_agents/claude_code.py, through the
SDK) and `ce trace import` (import_claude.py, a stream-json file) map the same way."""

from __future__ import annotations

from typing import Any


def api_retry(data: dict[str, Any]) -> dict[str, Any]:
    """A `system`/`api_retry` record's ModelError fields, for the live agent and for
    `ce trace import`: {"attempt": 1, "max_retries": 10, "error_status": 529, "error":
    "overloaded"}."""
    def number(key: str) -> int | None:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    error = data.get("error")
    if isinstance(error, dict):  # an API error body: {"type": ..., "message": ...}
        error = error.get("message") or error.get("type")
    return {"error": str(error or "the model call failed"),
            "status": number("error_status"), "attempt": number("attempt"),
            "retries": number("max_retries")}
