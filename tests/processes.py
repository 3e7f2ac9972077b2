"""Processes a test left behind: found by a marker in their command line or environment."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def new_mark(fraction: str) -> str:
    """A number no other test's processes carry (tests on two workers start in the same
    millisecond, so a clock-derived mark once made one test see the other's processes),
    usable as a sleep's seconds: `fraction` tells the tests of one file apart."""
    return f"{100_000 + secrets.randbelow(900_000)}.{fraction}"


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


def process_stats() -> dict[int, tuple[str, str, list[str]]]:
    """Every process: pid -> (command name, state, the /proc stat fields after the state:
    ppid, pgrp, session, ...)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        end = stat.rindex(")")
        fields = stat[end + 2:].split()
        out[int(entry)] = (stat[stat.index("(") + 1:end], fields[0], fields[1:])
    return out


def session_members(sid: int) -> list[int]:
    """The processes of session `sid`."""
    return [pid for pid, (_, _, rest) in process_stats().items() if int(rest[2]) == sid]


def children_of(pid: int) -> list[str]:
    """'pid state comm' of every child of `pid`, zombies included."""
    return [f"{child} {state} {comm}" for child, (comm, state, rest) in process_stats().items()
            if int(rest[0]) == pid]
