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
import shutil
import subprocess
import sys
from typing import Any

import msgspec

from ce_runtime.store import trial_writer
from ce_runtime.store.archive import DIGEST_KEYS, ascii_sorted_json, file_sha256, held_sha256
from ce_runtime.store.atomic import write_bytes_atomic


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


def reserve(parent: str, name: str) -> str:
    """A new directory PARENT/NAME, or NAME-2, NAME-3 ... when it is taken: made here, so
    two commands choosing the same name (two rescores in one second) get two. Empty: a
    StagedRun puts its results in its place."""
    os.makedirs(parent, exist_ok=True)
    for n in range(1, 10_000):
        path = os.path.join(parent, name if n == 1 else f"{name}-{n}")
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(os.path.join(parent, name))


class StagedRun:
    """Write a run directory at `final`; `commit()` puts it in place. Use as a context
    manager: leaving it by an exception removes what was staged.

    Staged, a trial's files are made by a writer process (store/trial_writer.py), in
    order, while the caller grades the next trial; its bytes are made here. A failed
    write is raised by the next `trial()` or by `commit()`, as it would have been by the
    write. When the process cannot start, the files are written here."""

    def __init__(self, final: str, reserved: bool = False):
        self.final = os.path.abspath(final)
        self.reserved = reserved
        parent, name = os.path.split(self.final)
        os.makedirs(parent, exist_ok=True)
        in_place = os.path.isdir(self.final) and bool(os.listdir(self.final))
        self.staged = not in_place
        self.path = self.final if in_place else \
            os.path.join(parent, f".{name}.partial-{os.getpid()}")
        if self.staged:
            shutil.rmtree(self.path, ignore_errors=True)
        os.makedirs(self.path, exist_ok=True)
        self._files = trial_writer.TrialFiles(
            self.path, trial_writer.write_plain if self.staged else write_bytes_atomic)
        self._writer: subprocess.Popen | None = None
        self._writer_tried = False
        self._failed: BaseException | None = None

    def __enter__(self) -> StagedRun:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is not None:
            self._stop_writer()  # what is still queued is not written
            if self.staged:
                shutil.rmtree(self.path, ignore_errors=True)
                if self.reserved:  # its name, made for it by `reserve`, is free again
                    with contextlib.suppress(OSError):
                        os.rmdir(self.final)

    def write(self, rel: str, data: bytes) -> None:
        """One file of the run; plain in a staging directory, atomic in place."""
        self._files.write(rel, data)

    def link(self, src: str, rel: str) -> None:
        """A hard link to an archived file (a copy across file systems)."""
        self._files.link(src, rel)

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
        writer = self._writer_process()
        if writer is None:
            self._files.trial(rel, trace if has_trace else None, manifest, shared, record)
            return
        message = trial_writer.frame(rel, trace if has_trace else None, manifest, shared,
                                     record)
        try:
            view = memoryview(message)
            while view:
                view = view[os.write(writer.stdin.fileno(), view):]
        except BrokenPipeError:  # it failed (and said why) or died
            self._finish_writer()
            raise self._failed or OSError("the trial writer ended early") from None

    def flush(self) -> None:
        """Wait until every trial sent is written (a failed write is raised here); the
        next trial starts a writer again. A forked grader's end (cli/rescore_pool.py)."""
        self._finish_writer()
        self._writer_tried = False
        if self._failed is not None:
            raise self._failed

    def abort(self) -> None:
        """Stop the writer: what is still queued is not written (a failed or
        interrupted grader, whose staged directory its parent removes)."""
        self._stop_writer()

    def commit(self) -> None:
        """Put the staged directory in place (an empty target directory is replaced),
        once every trial sent is written (a failed write is raised here)."""
        self._finish_writer()
        if self._failed is not None:
            raise self._failed
        if not self.staged:
            return
        with contextlib.suppress(FileNotFoundError, OSError):
            os.rmdir(self.final)  # an empty directory the user named
        os.rename(self.path, self.final)
        self.staged = False
        self.path = self.final

    def _writer_process(self) -> subprocess.Popen | None:
        """The writer, started with the first staged trial (None: in place, or it could
        not start). Its own session: a Ctrl-C is ce's, which then stops it."""
        if self._writer is None and not self._writer_tried and self.staged:
            self._writer_tried = True
            if not (sys.executable and os.path.isfile(trial_writer.__file__)):
                return None  # no interpreter to start, or ce runs from an archive
            try:
                self._writer = subprocess.Popen(
                    [os.path.realpath(sys.executable), "-I", "-S", trial_writer.__file__,
                     self.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True)
            except OSError:
                self._writer = None
        return self._writer

    def _finish_writer(self) -> None:
        """End of input: wait for the writer to write everything; its failure kept."""
        proc = self._writer
        if proc is None:
            return
        self._writer = None
        with contextlib.suppress(OSError):
            proc.stdin.close()
        said, err = proc.stdout.read(), proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()
        if proc.wait() == 0 or self._failed is not None:
            return
        try:
            w = json.loads(said.splitlines()[0])
            self._failed = OSError(w["errno"], w["strerror"], w["filename"], None,
                                   w["filename2"]) if w["errno"] is not None \
                else OSError(w["strerror"])
        except (ValueError, IndexError, KeyError, TypeError):
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            self._failed = OSError(f"the trial writer failed (exit {proc.returncode}): "
                                   f"{tail[0]}")

    def _stop_writer(self) -> None:
        proc = self._writer
        if proc is None:
            return
        self._writer = None
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
