"""The files of re-scored trials, made by a process of their own (`python -I -S
trial_writer.py ROOT`, started by staged_run.StagedRun) or in the caller's.

Re-scoring is a loop of grading (CPU) and of file-system calls (a directory, links to the
archived trace and manifest, task.json, evidence.json: ~0.5 ms a trial on a slow disk).
A writer thread overlapped them badly: after each system call it needed the GIL back
from the grading thread, which gives it up every few milliseconds only, so the grader
had to pause for it (measured: 2,000 trials took 2.9 s with the thread, 1.9 s with no
writes at all). A process has no GIL to share: the caller sends each trial's bytes down a
pipe and grades on.

Standard library only, and run as a script: it starts in ~10 ms, loads nothing of ce.
The protocol (stdin): per trial, a header of five unsigned 32-bit lengths (the trial's
relative directory, the archived trace path, the archived manifest path, evidence.json
+ 1 (0: none), task.json) and the bytes. At end of input it exits 0. On the first
failed write it prints {"errno", "strerror", "filename", "filename2"} on stdout and exits
1 (the caller's next send fails: it stops grading for nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import sys
from collections.abc import Callable

HEADER = struct.Struct("<5I")
FILE_MODE = 0o644  # store.atomic.FILE_MODE (a test holds them equal)
_SHARED_MAX = 65536


def write_plain(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


class TrialFiles:
    """A run directory's trial files under `root`: directories made once each, the
    archive's files hard-linked, files many trials write alike written once and linked.
    `write_file(path, data)` writes one file (plainly in a staging directory; atomically
    in place)."""

    def __init__(self, root: str, write_file: Callable[[str, bytes], None] = write_plain):
        self.root = root
        self.write_file = write_file
        self._dirs: set[str] = {root}
        self._written: dict[bytes, str] = {}  # small files' digests -> a written copy

    def trial(self, rel: str, trace: str | None, manifest: str, evidence: bytes | None,
              record: bytes) -> None:
        """What `write_trial_files` writes, task.json last (the trial is then complete)."""
        if trace is not None:
            self.link(trace, os.path.join(rel, "trace.msgpack"))
        self.link(manifest, os.path.join(rel, "workspace.json"))
        if evidence is not None:
            self.shared(os.path.join(rel, "evidence.json"), evidence)
        self.write(os.path.join(rel, "task.json"), record)

    def write(self, rel: str, data: bytes) -> None:
        path = os.path.join(self.root, rel)
        self.dir(os.path.dirname(path))
        self.write_file(path, data)

    def link(self, src: str, rel: str) -> None:
        """A hard link to an archived file (a copy across file systems)."""
        dst = os.path.join(self.root, rel)
        self.dir(os.path.dirname(dst))
        try:
            os.link(src, dst)
        except FileExistsError:
            return
        except OSError:
            shutil.copy2(src, dst)

    def shared(self, rel: str, data: bytes) -> None:
        """A file many trials write alike (trace and file criteria file no evidence:
        every evidence.json is the same 44 bytes): written once, then hard-linked, as
        the archive links traces and manifests (a link costs a tenth of a new file)."""
        if len(data) > _SHARED_MAX or self.write_file is not write_plain:
            self.write(rel, data)
            return
        key = hashlib.sha256(data).digest()
        first = self._written.get(key)
        if first is not None:
            dst = os.path.join(self.root, rel)
            self.dir(os.path.dirname(dst))
            try:
                os.link(first, dst)
                return
            except OSError:
                pass  # too many links, or another file system: a file of its own
        self.write(rel, data)
        if len(self._written) < 1024:
            self._written[key] = os.path.join(self.root, rel)

    def dir(self, path: str) -> None:
        """`os.makedirs(path, exist_ok=True)`, each directory made once (a known parent:
        one mkdir, not a stat of each ancestor and a mkdir)."""
        if path in self._dirs:
            return
        parent = os.path.dirname(path)
        if parent != path:
            self.dir(parent)
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        self._dirs.add(path)


def frame(rel: str, trace: str | None, manifest: str, evidence: bytes | None,
          record: bytes) -> bytes:
    """One trial's message to the writer process."""
    parts = (os.fsencode(rel), os.fsencode(trace) if trace is not None else b"",
             os.fsencode(manifest))
    ev = b"" if evidence is None else evidence
    return HEADER.pack(len(parts[0]), len(parts[1]), len(parts[2]),
                       0 if evidence is None else len(ev) + 1, len(record)) \
        + b"".join(parts) + ev + record


def serve(root: str, stream, out) -> int:
    """The writer process: every trial of `stream` written under `root`; 0, or 1 at the
    first failure (said on `out`)."""
    files = TrialFiles(root)
    while True:
        header = stream.read(HEADER.size)
        if len(header) < HEADER.size:  # the end (or the caller died mid-message)
            return 0
        sizes = HEADER.unpack(header)
        lengths = (sizes[0], sizes[1], sizes[2], max(sizes[3] - 1, 0), sizes[4])
        body = stream.read(sum(lengths))
        if len(body) < sum(lengths):
            return 0
        cuts, at = [], 0
        for size in lengths:
            cuts.append(body[at:at + size])
            at += size
        rel, trace, manifest, evidence, record = cuts
        try:
            files.trial(os.fsdecode(rel), os.fsdecode(trace) if trace else None,
                        os.fsdecode(manifest), evidence if sizes[3] else None, record)
        except OSError as exc:  # said, then gone: the caller's next send fails at once
            out.write(json.dumps({
                "errno": exc.errno, "strerror": exc.strerror,
                "filename": None if exc.filename is None else os.fsdecode(exc.filename),
                "filename2": None if exc.filename2 is None else os.fsdecode(exc.filename2),
            }).encode() + b"\n")
            out.flush()
            return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write("usage: trial_writer.py ROOT (trials on stdin; started by ce)\n")
        sys.exit(2)
    code = serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
    sys.stdout.flush()
    os._exit(code)
