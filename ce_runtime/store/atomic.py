"""Atomic file writes: a crash leaves the old file or the new one, never half of one.

Files get the mode a plain `open()` would give them (0666 less the umask), not the 0600
of a temporary file: reports, records and traces are all readable alike.

`durable=True` also fsyncs the file before the rename, so the new content survives a
power loss, not only a crash of ce. It costs milliseconds per file, so only the run's
own summary (run.json) pays it; a trial's files are checked by their digests when read
back (a power loss can leave one empty or torn: it is then a damaged archive, and
`ce run --resume` runs that trial again).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def _umask() -> int:
    """The process's umask, read without changing it (os.umask would, racily)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


FILE_MODE = 0o666 & ~_umask()


def write_bytes_atomic(path: str, data: bytes, durable: bool = False) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), FILE_MODE)
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def json_bytes(value: Any) -> bytes:
    """`value` as ce's JSON files hold it: sorted keys, indented, a final newline."""
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def write_json_atomic(path: str, value: Any, durable: bool = False) -> None:
    write_bytes_atomic(path, json_bytes(value), durable)
