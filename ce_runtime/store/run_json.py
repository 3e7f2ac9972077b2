"""run.json: the run's own record, written atomically and durably, secrets redacted."""

from __future__ import annotations

import os
from typing import Any

from ce_runtime.store.atomic import json_bytes, write_bytes_atomic

RUN_JSON = "run.json"


def write_run_json(run_dir: str, data: dict[str, Any], sync_later: bool = False) -> None:
    """`sync_later`: the file is flushed to the disk by a thread while the run goes on
    (the run's first record: a power loss in those milliseconds finds no trial finished
    either), not before this returns (an fsync takes 5-20 ms on some disks)."""
    path = os.path.join(run_dir, RUN_JSON)
    write_bytes_atomic(path, run_json_bytes(data), durable=not sync_later)
    if sync_later:
        import threading

        threading.Thread(target=_fsync, args=(path,), name="ce-run-json-sync",
                         daemon=True).start()


def _fsync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # already replaced by the run's next record (written durably)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def run_json_bytes(data: dict[str, Any]) -> bytes:
    """run.json's bytes for `data` (its secrets redacted)."""
    from ce_runtime.store.redact import Redactor

    return json_bytes(Redactor.from_environ().value(data))
