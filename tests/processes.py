"""Processes a test left behind: found by a marker in their command line or environment."""

from __future__ import annotations

import os
from pathlib import Path


def processes_marked(mark: str) -> dict[int, str]:
    """Live (not zombie) processes other than this one with `mark` in their command line
    or environment: pid -> command line."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            env = Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (mark in cmd or mark in env) and state != "Z" and int(pid) != os.getpid():
            found[int(pid)] = cmd
    return found
