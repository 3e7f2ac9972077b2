"""Runtime values the language computes with that are not plain JSON-like Python values."""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any

import attrs

SHELL_TOOLS = frozenset({"Bash", "bash", "shell", "exec_command", "command_execution"})


@attrs.frozen
class Regex:
    pattern: str
    flags: int = re.DOTALL

    def search(self, text: str) -> bool:
        from ce_lang.lang.builtins import regex_search

        return regex_search(self.pattern, self.flags, text)


def unwrap_shell(command: str) -> str:
    """`bash -lc 'cmd'` (and sh -c, zsh -lc ...) -> `cmd`; anything else unchanged."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return command
    if len(parts) == 3 and parts[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash") \
            and parts[1] in ("-c", "-lc", "-cl"):
        return unwrap_shell(parts[2])
    return command


def normalize_shell(command: str) -> str:
    """The command's words with shell quoting removed (`c'u'rl "x"` -> `curl x`)."""
    try:
        return " ".join(shlex.split(command))
    except ValueError:
        return command


@attrs.define
class ToolCallView:
    """One tool call as criteria see it; `status` changes once, when the result arrives."""

    index: int
    tool: str
    raw_tool: str
    params: Any
    status: str = "unresolved"  # unresolved | ok | error | denied
    output: str = ""
    event_index: int = -1  # where the call is in the trace (evidence; not visible to criteria)
    call_id: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def command(self) -> str | None:
        if self.tool in SHELL_TOOLS and isinstance(self.params, dict):
            cmd = self.params.get("command", self.params.get("cmd"))
            if isinstance(cmd, list):
                cmd = " ".join(map(str, cmd))
            return cmd if isinstance(cmd, str) else None
        return None

    def texts(self) -> list[str]:
        """What `matches` searches: the raw command and its shell-normalized forms
        (`bash -lc '...'` unwrapped, quoting removed: `c'u'rl` reads `curl`), or the
        JSON parameters of other tools."""
        cmd = self.command
        if cmd is not None:
            forms = [cmd]
            for form in (unwrap_shell(cmd), normalize_shell(unwrap_shell(cmd))):
                if form not in forms:
                    forms.append(form)
            return forms
        return [json.dumps(self.params, sort_keys=True, ensure_ascii=False)]

    def matches(self, pattern: Regex) -> bool:
        return any(pattern.search(t) for t in self.texts())

    def mentions(self, text: str) -> bool:
        return any(text in s for s in _strings(self.params))

    def mentions_path(self, path: str) -> bool:
        """Like `mentions`, with each `/` of `path` matching any run of `/` and `\\`:
        the path as a Windows agent writes it, or JSON-escaped (`skills\\\\x\\\\`)."""
        pattern = _path_pattern(path)
        return any(pattern.search(s) for s in _strings(self.params))

    def param(self, name: str) -> Any:
        return self.params.get(name) if isinstance(self.params, dict) else None


@functools.lru_cache(maxsize=256)
def _path_pattern(path: str) -> re.Pattern[str]:
    return re.compile(r"[\\/]+".join(re.escape(part) for part in path.split("/")))


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


@attrs.define
class MessageView:
    role: str
    text: str


@attrs.define
class TraceView:
    tool_calls: list[ToolCallView] = attrs.field(factory=list)
    messages: list[MessageView] = attrs.field(factory=list)
    turns: int = 0

    @property
    def final_output(self) -> str:
        for m in reversed(self.messages):
            if m.role == "assistant":
                return m.text
        return ""
