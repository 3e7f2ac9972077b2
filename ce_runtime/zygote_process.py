"""The run's zygote process (execute/sandbox/zygote.py) started by the `ce` script
before anything else loads (ce_runtime/boot.py), as the report worker is.

A tempdir trial's init is forked by the run's zygote; the zygote's own start (an
interpreter, the shim loaded: ~15-20 ms) ran once the run's tasks were compiled and its
directory locked, and the first trial waited for it. Started here, it overlaps ce's
imports. Nothing is decided yet, so nothing is made in $TMPDIR: the zygote waits on
stdin for its socket's path, which the run gives it once it knows it uses one
(execute/sandbox/tempdir.py claims it); a run that does not (bwrap, docker, Ray, bad
input) ends it (`discard`), and so does the exit. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "execute", "sandbox",
                      "zygote.py")
# what every init of ce's starts with (supervised.py launches the others with it)
LAUNCH_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
_early: Any = None  # a zygote started ahead of its run (a Popen), until claimed


def start_early() -> None:
    """Start a zygote that waits for its socket's path; ended at exit unless claimed."""
    import atexit
    import subprocess

    global _early
    try:
        _early = subprocess.Popen(
            [os.path.realpath(sys.executable), "-I", "-S", ZYGOTE, "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(LAUNCH_ENV), start_new_session=True)
    except OSError:
        return  # the run starts its zygote as before
    atexit.register(discard)


def claim() -> Any:
    """The zygote started early (once: the caller owns it from now), or None."""
    global _early
    proc, _early = _early, None
    return proc


def discard() -> None:
    """End the early zygote if nobody claimed it (the run does not use one)."""
    proc = claim()
    if proc is None:
        return
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            pipe.close()
