"""Secrets never reach a run directory: values of the host's variables whose names say
they hold a secret are replaced by `[redacted:NAME]` in everything ce writes (traces,
task.json, run.json, reports). The sandbox drivers use the same rule to keep such
variables out of the agent's environment.

Only values of at least `MIN_LENGTH` characters are redacted (a variable `AUTH=1` must
not turn every "1" into a marker). The workspace snapshot is the agent's work product
and is stored as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ce_lang.api import SECRET_NAME, looks_secret  # the compiler's rule too (CE0227)

__all__ = ["MIN_LENGTH", "SECRET_NAME", "Redactor", "looks_secret"]

MIN_LENGTH = 8


class Redactor:
    def __init__(self, secrets: Mapping[str, str]):
        # longest first: a secret containing another is replaced whole
        self.secrets = sorted(((v, n) for n, v in secrets.items() if len(v) >= MIN_LENGTH),
                              key=lambda p: -len(p[0]))
        self._bytes = [v.encode("utf-8", "replace") for v, _ in self.secrets]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        env = os.environ if environ is None else environ
        return cls({k: v for k, v in env.items() if looks_secret(k)})

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def hits(self, data: bytes) -> bool:
        return any(s in data for s in self._bytes)

    def text(self, text: str) -> str:
        for value, name in self.secrets:
            if value in text:
                text = text.replace(value, f"[redacted:{name}]")
        return text

    def value(self, obj: Any) -> Any:
        """Strings anywhere in JSON-like data (keys included)."""
        if not self.secrets:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.value(k): self.value(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.value(v) for v in obj]
        return obj
