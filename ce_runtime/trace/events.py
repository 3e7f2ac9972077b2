"""The trace: every event of a trial, as msgspec structs in one tagged union.

The file is append-only: each event is one frame (4-byte little-endian length, then the
msgpack body), so a crash leaves a readable prefix. Two readers: `load_trace` (strict,
for archived trials) raises TraceDamaged naming the file and the byte offset of a
truncated or undecodable frame; `read_trace` (tolerant, explicitly for a trace a crashed
run was still writing) returns the readable prefix and says how many bytes it ignored.
"""

from __future__ import annotations

import gc
import os
import shlex
import struct
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from ce_lang.api import TOOL_NAMES

SCHEMA_VERSION = 1


class _Event(msgspec.Struct, tag=True, array_like=True, gc=False, omit_defaults=True):
    t: float  # seconds since the run started


class RunHeader(_Event, tag="run"):
    schema_version: int
    trial_id: str
    task_id: str
    plan_hash: str
    agent: str
    model: str | None = None
    started_at: float = 0.0  # unix time


class AgentStart(_Event, tag="agent_start"):
    agent: str
    model: str | None = None


class TurnStart(_Event, tag="turn_start"):
    turn: int


class TurnEnd(_Event, tag="turn_end"):
    turn: int


class Message(_Event, tag="message"):
    role: str  # user | assistant | system
    text: str


class ToolCall(_Event, tag="tool_call"):
    call_id: str
    tool: str  # normalized (`normalize_tool`): Bash, Read, Write, Edit, Skill, ...
    raw_tool: str  # as the agent named it
    params: dict[str, Any] = {}


class ToolResult(_Event, tag="tool_result"):
    call_id: str
    status: str  # ok | error | denied | unresolved
    output: str = ""
    duration_ms: float = 0.0


class Usage(_Event, tag="usage"):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    cost_usd: float = 0.0


class ModelError(_Event, tag="model_error"):
    """A model call of the agent that failed: the API's error (`status` its HTTP status)
    or the connection lost. `attempt` of `retries` when the agent's CLI retries it."""
    error: str
    status: int | None = None
    attempt: int | None = None
    retries: int | None = None

    def summary(self) -> str:
        """"529 overloaded (attempt 6 of 10)": what a status line says of it."""
        what = f"{self.status} {self.error}" if self.status is not None and \
            str(self.status) not in self.error else self.error
        if self.attempt is not None:
            what += f" (attempt {self.attempt}" + (f" of {self.retries})" if self.retries
                                                   else ")")
        return what


class Decision(_Event, tag="decision"):
    criterion: str  # criterion id, e.g. "c2"
    verdict: str  # pass | fail
    event_index: int  # the event that decided it


class AgentEnd(_Event, tag="agent_end"):
    reason: str  # finished | max_turns | timeout | stopped_early | budget | error
    detail: str = ""


class RunEnd(_Event, tag="run_end"):
    status: str
    error: str | None = None


Event = (RunHeader | AgentStart | TurnStart | TurnEnd | Message | ToolCall | ToolResult
         | Usage | ModelError | Decision | AgentEnd | RunEnd)
STATUSES = ("ok", "error", "denied", "unresolved")

# -- tool names: ce_lang.tool_names.TOOL_NAMES (the compiler checks `tool_name` with it) --
# parameters criteria read by name, renamed to Claude Code's: (tool, agent's name) -> name
# (skill_triggered reads a Skill call's `skill`; OpenCode's skill tool calls it `name`)
PARAM_NAMES: dict[tuple[str, str], str] = {("Skill", "name"): "skill"}


def normalize_tool(raw: str, params: Any) -> tuple[str, dict[str, Any]]:
    """(tool, params) as criteria see them, for a call the agent named `raw`: the tool is
    Claude Code's name for it (`TOOL_NAMES`; others unchanged), so `tool_name: Write`
    matches OpenCode's, Pi's and the openai loop's `write` as well as Claude Code's
    `Write`. The one normalization of the live CLI agents (`ce_agents.cli_agent.Events`:
    Codex, OpenCode, Pi, the openai loop) and of `ce trace import`; Claude Code's own
    calls are recorded as named (its names are the canonical ones).

    Shell tools become `Bash` with the command, as the agent wrote it, in `command` (or
    from Codex's `cmd`; an argv list joined with shell quoting): criteria unwrap
    `bash -lc '...'` when they match, so the trace keeps what ran. Parameters are
    otherwise the agent's own, but for those a criterion reads by name (`PARAM_NAMES`:
    OpenCode's skill `name` becomes `skill`, as skill_triggered reads it).

    `apply_patch` (Codex; OpenCode for GPT models) becomes `Edit`: it changes files in
    the workspace, Edit's role, and a guard such as `tool_name: Edit, max_count: 0` must
    not pass because the agent edits through a patch. One patch may add, change, delete
    or move several files: it is not split, its params stay the agent's (`patch` /
    `patchText`, the paths inside the text, where `command_pattern` finds them), and a
    file the patch adds still counts as Edit, not Write.
    """
    params = dict(params) if isinstance(params, dict) else {}
    tool = TOOL_NAMES.get(raw) or TOOL_NAMES.get(raw.lower()) or raw
    if tool == "Bash":
        command = params.pop("command", None)
        if command is None:
            command = params.pop("cmd", None)
        if isinstance(command, list):
            command = shlex.join(str(part) for part in command)
        elif command is not None and not isinstance(command, str):
            command = str(command)
        return tool, {"command": command if command is not None else "", **params}
    for (canonical, name), to in PARAM_NAMES.items():
        if tool == canonical and name in params and to not in params:
            params = {(to if k == name else k): v for k, v in params.items()}
    return tool, params

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Event)
_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(Event)
_LEN = struct.Struct("<I")


def redacted(event: Event, redactor) -> Event:
    """The event with every secret value replaced (the same event when none occurs)."""
    if not redactor:
        return event
    body = _encoder.encode(event)
    if not redactor.hits(body):
        return event
    return msgspec.convert(redactor.value(msgspec.to_builtins(event)), Event)


def encode_frame(event: Event) -> bytes:
    body = _encoder.encode(event)
    return _LEN.pack(len(body)) + body


class TraceWriter:
    """Appends events as they happen; flushes every event (a crash loses nothing written)."""

    def __init__(self, path: str, fsync: bool = False):
        self.path = path
        self._fh = open(path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        st = os.fstat(self._fh.fileno())
        self._identity = (st.st_dev, st.st_ino)
        self._fsync = fsync
        self.count = 0

    def still_in_place(self) -> bool:
        """The file written is still the one at `path` (its directory was not deleted,
        moved or replaced meanwhile: the events would have gone nowhere anyone reads)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def write(self, event: Event) -> int:
        """Append one event; return its index in the trace."""
        self._fh.write(encode_frame(event))
        if self._fsync:
            os.fsync(self._fh.fileno())
        self.count += 1
        return self.count - 1

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TraceReadResult(msgspec.Struct):
    events: list[Event]
    truncated: bool = False  # the file ended inside a frame (a crash while writing)
    corrupt_at: int | None = None  # byte offset of an undecodable frame
    bytes_read: int = 0
    size: int = 0  # the file's length: size - bytes_read bytes were ignored

    @property
    def ignored_bytes(self) -> int:
        return max(0, self.size - self.bytes_read)

    @property
    def damaged(self) -> bool:
        return self.truncated or self.corrupt_at is not None


class TraceDamaged(ValueError):
    """A truncated or undecodable frame in a trace read strictly."""

    def __init__(self, path: str, offset: int, why: str):
        super().__init__(f"{path}: {why} at byte {offset}")
        self.path, self.offset, self.why = path, offset, why


def decode_frames(data: bytes) -> TraceReadResult:
    """Decode a whole trace (the garbage collector is paused: a trace is acyclic)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _decode_frames(data)
    finally:
        if enabled:
            gc.enable()


def _decode_frames(data: bytes) -> TraceReadResult:
    events: list[Event] = []
    append = events.append
    decode = _decoder.decode
    unpack = _LEN.unpack_from
    view = memoryview(data)  # zero-copy frames
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < 4:
            return TraceReadResult(events, truncated=True, bytes_read=pos, size=end)
        (n,) = unpack(data, pos)
        if pos + 4 + n > end:
            return TraceReadResult(events, truncated=True, bytes_read=pos, size=end)
        try:
            append(decode(view[pos + 4:pos + 4 + n]))
        except (msgspec.DecodeError, msgspec.ValidationError, ValueError, TypeError):
            return TraceReadResult(events, corrupt_at=pos, bytes_read=pos, size=end)
        pos += 4 + n
    return TraceReadResult(events, bytes_read=pos, size=end)


def read_trace(path: str) -> TraceReadResult:
    """Tolerant: the readable prefix of a trace a crashed run may have left half-written;
    `truncated` / `corrupt_at` / `ignored_bytes` say what was not read."""
    with open(path, "rb") as fh:
        return decode_frames(fh.read())


def load_trace(path: str) -> TraceReadResult:
    """Strict: every byte of the trace is a whole, decodable frame, or TraceDamaged."""
    return strict_frames(path, read_trace(path))


def strict_frames(path: str, result: TraceReadResult) -> TraceReadResult:
    """`result` (of the trace at `path`) when every byte was a whole, decodable frame;
    else TraceDamaged."""
    if result.truncated:
        raise TraceDamaged(path, result.bytes_read, f"truncated frame ({result.ignored_bytes} "
                                                    "byte(s) after the last whole frame)")
    if result.corrupt_at is not None:
        raise TraceDamaged(path, result.corrupt_at, "undecodable frame")
    return result


def write_trace(path: str, events: Iterable[Event]) -> None:
    """Write a whole trace at once (imports, tests); atomic."""
    from ce_runtime.store.atomic import write_bytes_atomic

    write_bytes_atomic(path, b"".join(encode_frame(e) for e in events))


def to_json_lines(events: Iterable[Event]) -> Iterator[bytes]:
    for e in events:
        yield _json_encoder.encode(e)


def event_to_dict(event: Event) -> dict[str, Any]:
    """A readable mapping (`type` first, then the fields) for `ce trace dump`."""
    out: dict[str, Any] = {"type": type(event).__struct_config__.tag}
    for name in event.__struct_fields__:
        out[name] = getattr(event, name)
    return out


def from_json(data: bytes) -> Event:
    return _json_decoder.decode(data)
