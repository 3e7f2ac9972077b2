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
    """`also_read`: stores consulted after this one (a re-scoring reads the original
    run's verdicts and keeps those it uses in its own directory, so it is explainable
    on its own)."""

    def __init__(self, directory: str, mode: str = "use", also_read: tuple[str, ...] = (),
                 redact: Any = None, unanswered: dict[str, dict[str, Any]] | None = None):
        if mode not in MODES:
            raise ValueError(f"judge cache mode must be one of {', '.join(MODES)}")
        self.directory = directory
        self.mode = mode
        self.also_read = tuple(d for d in also_read
                               if os.path.abspath(d) != os.path.abspath(directory))
        self.redact = redact  # the run's secret redaction, applied to what is stored
        self.hits = 0
        self.asked = 0
        # offline: the judges a trial's run asked that ended without a verdict (a
        # timeout, a crash: never recorded), by request, as its evidence.json keeps them;
        # an explanation says the run's outcome for the same request, not just "no
        # recorded verdict"
        self.unanswered = dict(unanswered or {})

    def get(self, key: str) -> dict[str, Any] | None:
        if self.mode == "refresh":
            return None
        for n, directory in enumerate((self.directory, *self.also_read)):
            try:
                with open(os.path.join(directory, f"{key}.json"), encoding="utf-8") as fh:
                    verdict = json.load(fh)
            except (OSError, json.JSONDecodeError):
                continue
            if n:
                self.put(key, verdict)
            self.hits += 1
            return verdict
        return None

    def put(self, key: str, verdict: dict[str, Any]) -> None:
        """A verdict just asked for (or found in `also_read`), kept under its key."""
        os.makedirs(self.directory, exist_ok=True)
        if self.redact is not None:
            verdict = self.redact(verdict)
        write_json_atomic(os.path.join(self.directory, f"{key}.json"), verdict)
