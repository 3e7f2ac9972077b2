"""Python's cyclic collector during a command's start-up.

Importing ce, click, attrs, asyncio (and, in the report worker, Polars) makes ~60,000
container objects that live as long as the process: the collector, run every 700 new
ones by default (2,000 on 3.13), ran ~80 times in `ce run`'s start-up and ~80 more in its report
worker's, ~10 ms of CPU in each, and found nothing to free (measured with gc.callbacks,
bench/README). So a command starts with a threshold no start-up reaches, and once its
imports are done (`imports_done`) the objects made so far are frozen out of every later
pass and the default thresholds come back. A command that never says so keeps the high
threshold: the collector still runs, every STARTUP_THRESHOLD new objects.
The standard library only: it is imported first thing."""

from __future__ import annotations

import gc

STARTUP_THRESHOLD = 200_000
_default: tuple[int, ...] | None = None  # the thresholds before `quiet_startup`


def quiet_startup() -> None:
    """Before the imports: no collection until `imports_done` (or ~200,000 objects)."""
    global _default
    if _default is None:
        _default = gc.get_threshold()
        gc.set_threshold(STARTUP_THRESHOLD, *_default[1:])


def imports_done() -> None:
    """After the imports: what they made is frozen (no pass looks at it again) and the
    thresholds are the defaults again. Nothing when `quiet_startup` was not called (ce's
    modules imported by a test or a library user: their collector is theirs)."""
    global _default
    if _default is not None:
        gc.freeze()
        gc.set_threshold(*_default)
        _default = None
