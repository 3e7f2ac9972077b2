"""A run directory written whole: built under a hidden staging name, renamed into place.

`ce rescore` writes thousands of trial directories (task.json, evidence.json, the trace
and workspace manifest linked from the archive). An atomic write per file (a temp file,
a rename) costs more than the grading; staged, each file is written once, plainly, and
the one rename at the end is the commit: an interrupted rescore leaves no results
directory at all, never half of one (only `.NAME.partial-PID`, hidden from `ce` and
removed when the interruption is an exception). When the target already exists and is
not empty, files are written in place, each atomically, as before.

The files are the ones `write_trial_files` writes, byte for byte (task.json's digests
included); the trace and workspace.json are hard links to the archived ones (their
digests are the verified ones the archive recorded).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import threading
import time
from typing import Any

import msgspec

from ce_runtime.store.archive import DIGEST_KEYS, ascii_sorted_json, file_sha256, held_sha256
from ce_runtime.store.atomic import FILE_MODE, write_bytes_atomic


def json_bytes(value: Any) -> bytes:
    """`json.dumps(value, indent=2, sort_keys=True) + "\\n"`, byte for byte, at C speed:
    the compact form (msgspec's when it is json's: `ascii_sorted_json`) reformatted
    (NaN and Infinity, which msgspec refuses to format, take the slow path)."""
    fast = ascii_sorted_json(value)
    if fast is not None:
        return msgspec.json.format(fast, indent=2) + b"\n"
    compact = json.dumps(value, separators=(",", ":"), sort_keys=True)
    try:
        return msgspec.json.format(compact.encode(), indent=2) + b"\n"
    except msgspec.DecodeError:
        return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def signed_record(task: dict[str, Any], trace_sha256: str | None,
                  workspace_sha256: str) -> bytes:
    """task.json's bytes as `write_trial_files` makes them: the digests of the trace and
    manifest, then `record_sha256` over the canonical JSON of the rest (`record_digest`:
    sorted, compact, UTF-8; a re-scored record holds JSON values only, so its JSON round
    trip is the identity and is skipped). One encoding serves both: the keys sorting
    before and after `record_sha256` are encoded apart and joined around it."""
    body = {k: v for k, v in task.items() if k not in DIGEST_KEYS}
    if trace_sha256 is not None:
        body["trace_sha256"] = trace_sha256
    body["workspace_sha256"] = workspace_sha256
    fast = _signed_fast(body)
    if fast is not None:
        return fast
    before = _compact({k: v for k, v in body.items() if k < "record_sha256"})
    after = _compact({k: v for k, v in body.items() if k > "record_sha256"})
    compact = _joined(before, after)  # == json.dumps(body, sort_keys=True, compact)
    # ASCII-escaped and UTF-8 forms differ only where a \\u escape is (or might be)
    canonical = compact if "\\u" not in compact else json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    signed = _joined(_joined(before, f'{{"record_sha256":"{digest}"}}'), after)
    try:
        return msgspec.json.format(signed.encode(), indent=2) + b"\n"
    except msgspec.DecodeError:  # NaN or Infinity: json's own indented form
        return (json.dumps({**body, "record_sha256": digest}, indent=2, sort_keys=True)
                + "\n").encode()


def _signed_fast(body: dict[str, Any]) -> bytes | None:
    """`signed_record`'s bytes from msgspec's encoding (`ascii_sorted_json`: where it is
    exactly json's ASCII form, which then is the canonical UTF-8 form too), or None."""
    before = ascii_sorted_json({k: v for k, v in body.items() if k < "record_sha256"})
    after = ascii_sorted_json({k: v for k, v in body.items() if k > "record_sha256"})
    if before is None or after is None:
        return None
    digest = held_sha256(_joined_bytes(before, after))
    signed = _joined_bytes(_joined_bytes(before, b'{"record_sha256":"%s"}' % digest.encode()),
                           after)
    return msgspec.json.format(signed, indent=2) + b"\n"


def _joined_bytes(left: bytes, right: bytes) -> bytes:
    """`_joined` of encoded objects."""
    if left == b"{}":
        return right
    if right == b"{}":
        return left
    return left[:-1] + b"," + right[1:]


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _joined(left: str, right: str) -> str:
    """Two compact JSON objects whose keys all sort left before right, as one."""
    if left == "{}":
        return right
    if right == "{}":
        return left
    return left[:-1] + "," + right[1:]


class StagedRun:
    """Write a run directory at `final`; `commit()` puts it in place. Use as a context
    manager: leaving it by an exception removes what was staged.

    Staged, a trial's files are made by a writer thread, in order, while the caller
    grades the next trial (its bytes are made in the caller's thread: the writer only
    makes directories, links and writes, which release the GIL). A failed write is
    raised by the next `trial()` or by `commit()`, as it would have been by the write."""

    def __init__(self, final: str):
        self.final = os.path.abspath(final)
        parent, name = os.path.split(self.final)
        os.makedirs(parent, exist_ok=True)
        in_place = os.path.isdir(self.final) and bool(os.listdir(self.final))
        self.staged = not in_place
        self.path = self.final if in_place else \
            os.path.join(parent, f".{name}.partial-{os.getpid()}")
        if self.staged:
            shutil.rmtree(self.path, ignore_errors=True)
        os.makedirs(self.path, exist_ok=True)
        self._dirs: set[str] = {self.path}
        self._written: dict[bytes, str] = {}  # small files' digests -> a staged copy
        self._queue: queue.SimpleQueue | None = None
        self._writer: threading.Thread | None = None
        self._failed: BaseException | None = None
        self._abandoned = False

    def __enter__(self) -> StagedRun:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None:
            self._abandoned = True  # what is still queued is not written
            self._drain()
            if self.staged:
                shutil.rmtree(self.path, ignore_errors=True)

    def write(self, rel: str, data: bytes) -> None:
        """One file of the run; plain in a staging directory, atomic in place."""
        path = os.path.join(self.path, rel)
        self._dir(os.path.dirname(path))
        if not self.staged:
            write_bytes_atomic(path, data)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def link(self, src: str, rel: str) -> None:
        """A hard link to an archived file (a copy across file systems)."""
        dst = os.path.join(self.path, rel)
        self._dir(os.path.dirname(dst))
        try:
            os.link(src, dst)
        except FileExistsError:
            return
        except OSError:
            shutil.copy2(src, dst)

    def trial(self, rel: str, src: str, task: dict[str, Any], evidence: dict | None,
              has_trace: bool, trace_sha256: str | None,
              workspace_sha256: str | None) -> None:
        """A re-scored trial at `rel`, from the archived trial directory `src`: what
        `write_trial_files` writes (task.json last), its trace and manifest linked.
        The digests are the archive's verified ones (None: not recorded, computed)."""
        if self._failed is not None:
            raise self._failed
        trace = os.path.join(src, "trace.msgpack")
        if has_trace and trace_sha256 is None:
            trace_sha256 = file_sha256(trace)
        manifest = os.path.join(src, "workspace.json")
        if workspace_sha256 is None:
            workspace_sha256 = file_sha256(manifest)
        shared = json_bytes(evidence) if evidence is not None else None
        record = signed_record(task, trace_sha256 if has_trace else None, workspace_sha256)
        if not self.staged:
            self._files(rel, trace if has_trace else None, manifest, shared, record)
            return
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            self._writer = threading.Thread(target=self._write_queued, daemon=True,
                                            name="ce-staged-writer")
            self._writer.start()
        self._queue.put((rel, trace if has_trace else None, manifest, shared, record))

    def pause(self) -> None:
        """Let the writer thread run now, if it has trials to write: it needs the GIL
        back after each system call, and a thread computing (grading) gives it up only
        every few milliseconds, so the writes fall behind and wait for the end. The
        caller pauses a few times per trial (a sleep(0): a few microseconds)."""
        queued = self._queue
        if queued is not None and not queued.empty():
            time.sleep(0)

    def _files(self, rel: str, trace: str | None, manifest: str, evidence: bytes | None,
               record: bytes) -> None:
        if trace is not None:
            self.link(trace, os.path.join(rel, "trace.msgpack"))
        self.link(manifest, os.path.join(rel, "workspace.json"))
        if evidence is not None:
            self._shared(os.path.join(rel, "evidence.json"), evidence)
        self.write(os.path.join(rel, "task.json"), record)  # last: the trial is complete

    def _write_queued(self) -> None:
        """The writer thread: each queued trial's files, until None; after a failure
        only the queue is emptied (the failure is raised in the caller's thread)."""
        assert self._queue is not None
        while (item := self._queue.get()) is not None:
            if self._failed is None and not self._abandoned:
                try:
                    self._files(*item)
                except BaseException as exc:  # raised in the caller's thread
                    self._failed = exc

    def _drain(self) -> None:
        """Wait for the writer to finish what was queued."""
        if self._writer is not None and self._queue is not None:
            self._queue.put(None)
            self._writer.join()
            self._writer = self._queue = None

    def _shared(self, rel: str, data: bytes) -> None:
        """A file many trials write alike (trace and file criteria file no evidence:
        every evidence.json is the same 44 bytes): written once, then hard-linked, as
        the archive links traces and manifests (a link costs a tenth of a new file)."""
        if len(data) > 65536 or not self.staged:
            self.write(rel, data)
            return
        key = hashlib.sha256(data).digest()
        first = self._written.get(key)
        if first is not None:
            dst = os.path.join(self.path, rel)
            self._dir(os.path.dirname(dst))
            try:
                os.link(first, dst)
                return
            except OSError:
                pass  # too many links, or another file system: a file of its own
        self.write(rel, data)
        if len(self._written) < 1024:
            self._written[key] = os.path.join(self.path, rel)

    def commit(self) -> None:
        """Put the staged directory in place (an empty target directory is replaced),
        once every queued trial is written (a failed write is raised here)."""
        self._drain()
        if self._failed is not None:
            raise self._failed
        if not self.staged:
            return
        with contextlib.suppress(FileNotFoundError, OSError):
            os.rmdir(self.final)  # an empty directory the user named
        os.rename(self.path, self.final)
        self.staged = False
        self.path = self.final

    def _dir(self, path: str) -> None:
        """`os.makedirs(path, exist_ok=True)`, each directory made once (a known parent:
        one mkdir, not a stat of each ancestor and a mkdir)."""
        if path in self._dirs:
            return
        parent = os.path.dirname(path)
        if parent != path:
            self._dir(parent)
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        self._dirs.add(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
