"""run.json: the run's own record, written atomically and durably, secrets redacted."""

from __future__ import annotations

import os
from typing import Any

from ce_runtime.store.atomic import json_bytes, write_bytes_atomic

RUN_JSON = "run.json"


def write_run_json(run_dir: str, data: dict[str, Any]) -> None:
    write_bytes_atomic(os.path.join(run_dir, RUN_JSON), run_json_bytes(data), durable=True)


def run_json_bytes(data: dict[str, Any]) -> bytes:
    """run.json's bytes for `data` (its secrets redacted)."""
    from ce_runtime.store.redact import Redactor

    return json_bytes(Redactor.from_environ().value(data))
