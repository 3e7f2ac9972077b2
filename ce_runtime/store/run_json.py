"""run.json: the run's own record, written atomically and durably, secrets redacted."""

from __future__ import annotations

import os
from typing import Any

from ce_runtime.store.atomic import write_json_atomic


def write_run_json(run_dir: str, data: dict[str, Any]) -> None:
    from ce_runtime.store.redact import Redactor

    write_json_atomic(os.path.join(run_dir, "run.json"), Redactor.from_environ().value(data),
                      durable=True)
