"""Archived trials: trial directories (workspace snapshots: workspace_snapshot.py).

A run directory holds `plans/<hash>.json` and an `objects/` store shared by all its
trials (a file's bytes stored once under its sha256, however many trials wrote it). A
trial directory holds `task.json`, `trace.msgpack` and `workspace.json` (the snapshot
manifest: path -> digest and mode). From these a trial can be explained and re-scored
offline, without the agent.

Nothing read back from an archive is believed unchecked: a plan must hash to its file
name, a workspace object to its digest, task.json to its own `record_sha256`, and the
trace and workspace.json to the digests task.json recorded when the trial was written
(`trace_sha256`, `workspace_sha256`). A restore writes only inside its target. What
fails a check is `DamagedArchive` ("damaged archive: PATH: why").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, NamedTuple

import msgspec

from ce_runtime.store.atomic import write_bytes_atomic, write_json_atomic

SNAPSHOT_VERSION = 1
# A workspace file over MAX_FILE_BYTES is recorded (size, mode, "too_large") but not kept,
# and so is every file once the kept ones reach MAX_SNAPSHOT_BYTES: an agent's
# `truncate -s 100G` costs it no disk, and ce would read it whole and store it in full.
# The grader reads no file over MAX_FILE_BYTES either (`check_size`): a trial and its
# re-score then say the same.
MAX_FILE_BYTES = 256 << 20
MAX_SNAPSHOT_BYTES = 4 << 30


class FileTooLarge(OSError):
    """A read of a file over MAX_FILE_BYTES (or one the snapshot did not keep)."""

    def __init__(self, size: int):
        super().__init__(27, f"too large to read: {size:,} bytes (the limit is "
                             f"{MAX_FILE_BYTES >> 20} MiB)")  # EFBIG
        self.size = size


def check_size(size: int) -> None:
    if size > MAX_FILE_BYTES:
        raise FileTooLarge(size)
DIGEST_KEYS = ("trace_sha256", "workspace_sha256", "record_sha256")
HEX64 = re.compile(r"[0-9a-f]{64}")


class DamagedArchive(Exception):
    """An archived file that is unreadable, malformed or not what was written."""

    def __init__(self, path: str, why: str):
        super().__init__(f"damaged archive: {path}: {why}")
        self.path, self.why = path, why


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_digest(record: dict[str, Any]) -> str:
    """sha256 of a task.json record's canonical JSON, its own `record_sha256` left out."""
    body = {k: v for k, v in json.loads(json.dumps(record)).items() if k != "record_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def held_sha256(data: bytes) -> str:
    """`hashlib.sha256(data).hexdigest()` without letting go of the GIL: hashlib lets
    other threads run while it hashes 2 KiB or more, and getting the GIL back from a
    thread that took it meanwhile (rescore's reader and writer) costs more than hashing
    a task.json. In pieces under 2 KiB it keeps it."""
    if len(data) < 2048:
        return hashlib.sha256(data).hexdigest()
    h = hashlib.sha256()
    view = memoryview(data)
    for start in range(0, len(view), 2047):
        h.update(view[start:start + 2047])
    return h.hexdigest()


def _decoded_record_digest(record: dict[str, Any], plain: bool = False) -> str:
    """`record_digest` of a record just decoded from JSON: already plain JSON values,
    so the round trip that normalizes a built record is skipped. `plain`: msgspec
    decoded it and saw only floats it spells as Python does (`_archived_json`)."""
    body = {k: v for k, v in record.items() if k != "record_sha256"}
    data = _SORTED.encode(body) if plain else sorted_json(body)
    if data is None:
        data = json.dumps(body, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
    return held_sha256(data)


class _NotPython(Exception):
    """A float msgspec spells otherwise than Python's repr."""


def _spelled_alike(value: float) -> bool:
    """msgspec writes `value` as repr() does: exactly the floats repr writes without an
    exponent (msgspec writes its own exponent, and 1e-05 as 0.00001). Checked over
    every exponent and 10^6 random doubles when this was written (and by
    tests/test_staged_run.py)."""
    return value == 0 or 1e-4 <= abs(value) < 1e16  # NaN and infinities: False


def _python_float(text: str) -> float:
    value = float(text)
    if not _spelled_alike(value):
        raise _NotPython(text)
    return value


_UNLIKE = [0]  # floats `_watched_float` saw that msgspec spells otherwise (a counter)


def _watched_float(text: str) -> float:
    value = float(text)
    if not _spelled_alike(value):
        _UNLIKE[0] += 1
    return value


_SORTED = msgspec.json.Encoder(order="sorted")
_CHECKED = msgspec.json.Decoder(float_hook=_python_float)
_WATCHED = msgspec.json.Decoder(float_hook=_watched_float)


def sorted_json(value: Any) -> bytes | None:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
    as UTF-8, made by msgspec (several times faster), or None when msgspec's bytes might
    differ: every float must be spelled as Python spells it (`_spelled_alike`), and the
    bytes must decode to `value` again (NaN and Infinity, which msgspec writes as null,
    tuples, non-string keys, values json cannot encode: all None, and the caller uses
    json)."""
    try:
        data = _SORTED.encode(value)
        if _CHECKED.decode(data) == value:  # _NotPython: a float spelled otherwise
            return data
    except Exception:  # anything msgspec refuses or spells otherwise: json decides
        pass
    return None


def ascii_sorted_json(value: Any) -> bytes | None:
    """`sorted_json`, only when it is also `json.dumps`'s default ASCII form (no
    character json would escape as \\uXXXX: none above 0x7e)."""
    data = sorted_json(value)
    if data is None or not data.isascii() or b"\x7f" in data:
        return None
    return data


def find_run_root(trial_dir: str) -> str | None:
    """The run directory above a trial directory (it has plans/ and objects/): up to
    RUN/attempts/VARIANT/TASK/ROW/NN/<n>, a dataset row's earlier attempt (`ce run
    --retry-errors`), six levels below it."""
    d = os.path.abspath(trial_dir)
    for _ in range(8):
        if os.path.isdir(os.path.join(d, "plans")) and os.path.isdir(os.path.join(d, "objects")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return None


def write_trial_files(trial_dir: str, task: dict[str, Any], manifest: dict[str, Any],
                      evidence: dict[str, Any] | None = None) -> None:
    """task.json last: a trial directory with a task.json is complete. `evidence`: what
    grading ran and asked, per criterion (evidence.json): the scores in task.json are
    reproducible bit for bit, the commands' own output (timings, say) need not be.
    task.json records the digests of the trace (if written by now) and of workspace.json,
    and its own (`record_sha256`), for `verified_trial` to check."""
    os.makedirs(trial_dir, exist_ok=True)
    ws_bytes = _json_bytes(manifest)
    write_bytes_atomic(os.path.join(trial_dir, "workspace.json"), ws_bytes)
    if evidence is not None:
        write_json_atomic(os.path.join(trial_dir, "evidence.json"), evidence)
    task = {k: v for k, v in task.items() if k not in DIGEST_KEYS}
    trace = os.path.join(trial_dir, "trace.msgpack")
    if os.path.isfile(trace):
        task["trace_sha256"] = file_sha256(trace)
    task["workspace_sha256"] = hashlib.sha256(ws_bytes).hexdigest()
    task["record_sha256"] = record_digest(task)
    write_bytes_atomic(os.path.join(trial_dir, "task.json"), _json_bytes(task))


def missing_trial_file(trial_dir: str, record: Any) -> DamagedArchive | None:
    """Whether a trial directory whose task.json was read (`record`: its TrialRecord)
    holds every file a finished trial has (docs/run-directory.md), or the
    DamagedArchive naming the first one missing: workspace.json (always written); the
    trace, unless task.json says none was written (it records `workspace_sha256` but no
    `trace_sha256`; a record of a ce before the digests has a trace); evidence.json
    of a graded trial (criteria recorded; a ce that records the digests writes it). A
    trial missing one (deleted, or a copy that lost it) is not finished: `ce run
    --resume` runs it again. Only there-or-not is checked (a stat each): the digests
    are checked where the files are read (rescore, explain)."""
    ws = getattr(record, "workspace_sha256", None)
    needed = ["workspace.json"]
    if getattr(record, "trace_sha256", None) is not None or ws is None:
        needed.append("trace.msgpack")
    if ws is not None and getattr(record, "criteria", None):
        needed.append("evidence.json")
    for name in needed:
        path = os.path.join(trial_dir, name)
        if not os.path.isfile(path):
            return DamagedArchive(path, "missing (task.json is there, so the trial "
                                        "looked finished: its files are incomplete)")
    return None


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def read_bytes(path: str) -> bytes:
    """A file's bytes in three system calls (`open()` adds a seek, a tty check and a
    buffer: per file of an archive of thousands, that adds up)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)
        if len(data) != size:  # short, or grown since the fstat: read on to the end
            chunks = [data]
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
        return data
    finally:
        os.close(fd)


def load_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def load_archived_json(path: str, data: bytes | OSError | None = None) -> dict[str, Any]:
    """A JSON object from the archive, or DamagedArchive (never a traceback). `data`:
    the file's bytes, when the caller read them already."""
    return _archived_json(path, data)[0]


def _archived_json(path: str, data: bytes | OSError | None = None
                   ) -> tuple[dict[str, Any], bool]:
    """`load_archived_json`, and whether the value is plain for msgspec: it decoded it
    (strict JSON: no NaN) and every float in it is one it spells as Python does, so
    msgspec encodes it again as json would (`_decoded_record_digest`). `data` may be
    the OSError reading the file raised (`read_trial_files`)."""
    try:
        if isinstance(data, OSError):
            raise data
        if data is None:
            data = read_bytes(path)
        try:  # msgspec is strict JSON: what it refuses, json says why (or accepts: NaN)
            unlike = _UNLIKE[0]
            value = _WATCHED.decode(data)
            plain = _UNLIKE[0] == unlike  # (another thread's count: only less plain)
        except msgspec.DecodeError:
            plain = False
            value = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise DamagedArchive(path, f"unreadable ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DamagedArchive(path, f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise DamagedArchive(path, "not a JSON object")
    return value, plain


def load_task_record(trial_dir: str, data: bytes | OSError | None = None
                     ) -> dict[str, Any]:
    """A trial's task.json, checked: its own digest (when recorded) and the fields that
    name other files (plan_hash). `data`: its bytes, read already (`read_trial_files`)."""
    path = os.path.join(trial_dir, "task.json")
    task, plain = _archived_json(path, data)
    want = task.get("record_sha256")
    if want is not None and want != _decoded_record_digest(task, plain):
        raise DamagedArchive(path, "the record does not match its own recorded digest "
                                   "(record_sha256): it was changed after the trial")
    if not isinstance(task.get("plan_hash"), str) or not HEX64.fullmatch(task["plan_hash"]):
        raise DamagedArchive(path, f"bad plan_hash {task.get('plan_hash')!r}")
    for key in ("trial_id", "variant_id", "task_id", "task_dir", "status"):
        if not isinstance(task.get(key, ""), str):
            raise DamagedArchive(path, f"bad {key} {task.get(key)!r}")
    if not isinstance(task.get("trial_id"), str):
        raise DamagedArchive(path, "no trial_id")
    score = task.get("weighted_score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise DamagedArchive(path, f"bad weighted_score {score!r}")
    criteria = task.get("criteria") or []
    if not isinstance(criteria, list) or not all(
            isinstance(c, dict) and isinstance(c.get("id"), str)
            and isinstance(c.get("type"), str) for c in criteria):
        raise DamagedArchive(path, "bad criteria")
    return task


def verified_trial(trial_dir: str) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """(task.json record, workspace manifest, trace path or None), each checked against
    the digests task.json recorded. A trial written by an older ce records none: then
    only the parts' form is checked (the record says so: no `record_sha256`)."""
    return verified_trial_data(trial_dir)[:3]


def verified_trial_data(trial_dir: str, files: TrialFiles | None = None,
                        ) -> tuple[dict[str, Any], dict[str, Any], str | None, bytes | None]:
    """`verified_trial` and the trace's bytes (read once: checked, then decoded).
    `files`: the trial's files as `read_trial_files` read them (by the caller, ahead):
    checked and refused exactly as when they are read here."""
    if files is None:
        files = read_trial_files(trial_dir)
    task = load_task_record(trial_dir, files.task)
    trace = os.path.join(trial_dir, "trace.msgpack")
    trace_data = files.trace
    if isinstance(trace_data, OSError):
        if not isinstance(trace_data, (FileNotFoundError, NotADirectoryError,
                                       IsADirectoryError)):
            raise trace_data
        trace_data = None  # what os.path.isfile says is no trace
    want = task.get("trace_sha256")
    if want is not None:
        if trace_data is None:
            raise DamagedArchive(trace, "the recorded trace is missing")
        if hashlib.sha256(trace_data).hexdigest() != want:
            raise DamagedArchive(trace, "the trace does not match its recorded digest")
    ws_path = os.path.join(trial_dir, "workspace.json")
    want = task.get("workspace_sha256")
    data = files.workspace  # read once: checked, then decoded
    if want is not None:
        if isinstance(data, OSError):
            raise DamagedArchive(ws_path, f"unreadable ({data.strerror})") from None
        if hashlib.sha256(data).hexdigest() != want:
            raise DamagedArchive(ws_path, "the workspace manifest does not match its "
                                          "recorded digest")
    manifest = load_archived_json(ws_path, data)
    if not isinstance(manifest.get("files"), dict):
        raise DamagedArchive(ws_path, "no `files` mapping")
    return task, manifest, (trace if trace_data is not None else None), trace_data


class TrialFiles(NamedTuple):
    """A trial directory's three archived files as read: each its bytes, or the OSError
    reading it raised (raised again where `verified_trial_data` checks that file)."""

    task: bytes | OSError
    trace: bytes | OSError
    workspace: bytes | OSError


def read_trial_files(trial_dir: str) -> TrialFiles:
    """Read a trial's task.json, trace.msgpack and workspace.json. Nothing is checked
    here: `verified_trial_data` checks what was read."""
    out: list[bytes | OSError] = []
    for name in ("task.json", "trace.msgpack", "workspace.json"):
        try:
            out.append(read_bytes(os.path.join(trial_dir, name)))
        except OSError as exc:
            out.append(exc)
    return TrialFiles(*out)


def write_definitions(run_dir: str, digest: str, texts: dict[str, str]) -> None:
    """The standard criteria a run's plans were compiled against, kept with the run:
    `definitions/stdlib-<digest>/<file>.ce` (content-addressed, written once)."""
    base = os.path.join(run_dir, "definitions", f"stdlib-{digest}")
    if os.path.isdir(base):
        return
    os.makedirs(base + ".partial", exist_ok=True)
    for name, text in texts.items():
        write_bytes_atomic(os.path.join(base + ".partial", name), text.encode())
    os.replace(base + ".partial", base)


def load_definitions(run_dir: str, digest: str) -> dict[str, str] | None:
    base = os.path.join(run_dir, "definitions", f"stdlib-{digest}")
    if not os.path.isdir(base):
        return None
    out = {}
    for name in sorted(os.listdir(base)):
        with open(os.path.join(base, name), encoding="utf-8") as fh:
            out[name] = fh.read()
    return out
