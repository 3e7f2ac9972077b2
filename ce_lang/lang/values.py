"""Runtime values the language computes with that are not plain JSON-like Python values."""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any

import attrs

SHELL_TOOLS = frozenset({"Bash", "bash", "shell", "exec_command", "local_shell", "command_execution"})


@attrs.frozen
class Regex:
    pattern: str
    flags: int = re.DOTALL

    def search(self, text: str) -> bool:
        from ce_lang.lang.builtins import regex_search

        return regex_search(self.pattern, self.flags, text)


def unwrap_shell(command: str) -> str:
    """`bash -lc 'cmd'` -> `cmd`; anything else unchanged. The shell is any program whose
    name ends in `sh` (sh, bash, zsh, dash, ksh ...); options before the command flag
    are skipped (`bash -l -c`), and the command flag is any short-option cluster with a
    `c` (`-c`, `-lc`, `-ic`, `-lic`), as coder_eval unwraps. Words after the command
    string (`$0`, `$1` ...) are kept, joined by spaces."""
    try:
        parts = shlex.split(command)
    except ValueError:
        return command
    if not parts or not parts[0].rsplit("/", 1)[-1].endswith("sh"):
        return command
    for i in range(1, len(parts) - 1):
        word = parts[i]
        if _is_command_flag(word):
            rest = parts[i + 1:]
            return unwrap_shell(rest[0]) if len(rest) == 1 else " ".join(rest)
        if not word.startswith("-"):
            break  # an argument before any -c: a script, not a wrapper
    return command


def _is_command_flag(word: str) -> bool:
    return len(word) >= 2 and word[0] == "-" and word[1:].isalpha() and "c" in word[1:]


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
    turn: int = 0  # the turn it was made in, from 1; 0: the trace has no turns (evidence)
    # when it was made and when its result came, in unix time (evidence: which call ran a
    # recorded CLI invocation); None when the trace does not say
    started_at: float | None = attrs.field(default=None, eq=False)
    ended_at: float | None = attrs.field(default=None, eq=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def command(self) -> str | None:
        """A shell tool's command (a non-empty string); None for other tools."""
        if self.tool in SHELL_TOOLS and isinstance(self.params, dict):
            cmd = self.params.get("command", self.params.get("cmd"))
            if isinstance(cmd, list):
                cmd = " ".join(map(str, cmd))
            return cmd if isinstance(cmd, str) and cmd else None
        return None

    def texts(self) -> list[str]:
        """What `matches` searches: the raw command and its shell-normalized forms
        (`bash -lc '...'` unwrapped, quoting removed: `c'u'rl` reads `curl`), or the
        JSON parameters of other tools: as coder_eval writes them (in the agent's key
        order, `json.dumps` defaults: `{"file_path": "a.md", "content": "..."}`, non-ASCII
        escaped) and, when it differs, with non-ASCII characters as they are."""
        cmd = self.command
        if cmd is not None:
            forms = [cmd]
            for form in (unwrap_shell(cmd), normalize_shell(unwrap_shell(cmd))):
                if form not in forms:
                    forms.append(form)
            return forms
        escaped = json.dumps(self.params)
        plain = json.dumps(self.params, ensure_ascii=False)
        return [escaped] if plain == escaped else [escaped, plain]

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
