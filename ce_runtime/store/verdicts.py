"""Judge verdicts, kept with the run and keyed by the whole request.

The key is the sha256 of everything that decides a verdict: the judge kind, the model,
its parameters and the exact prompt (which holds the rubric and the contents of the
files shown), and for an agent_judge the digest of the workspace it grades. A run stores
each verdict as `judges/<key>.json` (score, rationale, usage, an agent_judge's
transcript); re-scoring and explaining the run find it there, so they are free and
deterministic. Modes: `use` (the default: a recorded verdict is reused, a missing one is
asked for), `refresh` (ask again and replace), `offline` (never ask: a missing verdict
is the criterion's error).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from ce_runtime.store.atomic import write_json_atomic

MODES = ("use", "refresh", "offline")


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False,
                                     default=str).encode()).hexdigest()


class VerdictStore:
    def __init__(self, directory: str, mode: str = "use"):
        if mode not in MODES:
            raise ValueError(f"judge cache mode must be one of {', '.join(MODES)}")
        self.directory = directory
        self.mode = mode

    def get(self, key: str) -> dict[str, Any] | None:
        if self.mode == "refresh":
            return None
        try:
            with open(os.path.join(self.directory, f"{key}.json"), encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, key: str, verdict: dict[str, Any]) -> None:
        os.makedirs(self.directory, exist_ok=True)
        write_json_atomic(os.path.join(self.directory, f"{key}.json"), verdict)
