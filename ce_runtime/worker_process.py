"""The report worker's process: started here, by the `ce` script before anything else
loads (ce_runtime/boot.py) or by the command itself (cli/report_worker.py), and claimed
by the command that uses it. The standard library only: it is imported first thing."""

from __future__ import annotations

import os
import sys
from typing import Any

# `python -m ce_runtime.report.job`, with the collector quiet from its first import
WORKER_MAIN = ("from ce_runtime import startup_gc; startup_gc.quiet_startup(); "
               "from ce_runtime.report.job import run_as_script; run_as_script()")
_early: Any = None  # a worker started ahead of its command (a Popen), until claimed


def spawn() -> Any:
    """A report worker process (WORKER_MAIN, in its own session:
    a Ctrl-C at the terminal is the command's to handle), its input not blocking; None
    when it cannot start."""
    import subprocess

    try:
        proc = subprocess.Popen([sys.executable, "-c", WORKER_MAIN],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                start_new_session=True)
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)
    except OSError:
        return None
    return proc


def start_early() -> None:
    """Start the worker before its command loads; ended at exit unless claimed."""
    import atexit

    global _early
    _early = spawn()
    atexit.register(_end_unclaimed)


def claim() -> Any:
    """The worker started early (once: the caller owns it from now), or None."""
    global _early
    proc, _early = _early, None
    return proc


def _end_unclaimed() -> None:
    proc = claim()
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
