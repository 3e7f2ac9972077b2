"""The `ce` script: `ce run` and `ce rescore` start their report worker before anything
else is loaded.

The worker's imports (Polars and the report modules, ~0.45 s of CPU) are the longest
of a short run. Started from the command's own code, it began once click, attrs and the
runtime had loaded (~0.15 s in) and was still importing while the first trials ran, on a
machine with few CPUs against their processes. Started here, 20-30 ms after the
interpreter, it imports while `ce` itself does (8 agentless trials, 2 CPUs: -30 to -50
ms of wall time, bench/README). Only the standard library is loaded before the command
line is read, and nothing is decided here but whether to start the worker: the command
claims it (cli/report_worker.ReportWorker.start), and one that never does (a usage
error, `ce run --help`) kills it on the way out (ce_runtime/worker_process.py).

`ce run` also starts its tempdir trials' zygote here, waiting for the socket the run
names once it knows it uses one (ce_runtime/zygote_process.py): the first trial no longer
waits for that interpreter's start (15-30 ms).
"""

from __future__ import annotations

import os
import sys

WORKER_COMMANDS = ("run", "rescore")


def command_of(argv: list[str]) -> str | None:
    """The subcommand `argv` (sys.argv[1:]) names; None for `ce --help`, `ce
    --version` or no command (the group takes no option with a value)."""
    for arg in argv:
        if arg in ("-h", "--help", "--version"):
            return None
        if not arg.startswith("-"):
            return arg
    return None


def wants_report_worker(argv: list[str]) -> bool:
    """Whether `ce ARGV` is a command that writes its reports by a worker (not when it
    only prints its help, nor with CE_REPORT_WORKER=0)."""
    return (command_of(argv) in WORKER_COMMANDS and not {"-h", "--help"} & set(argv)
            and os.environ.get("CE_REPORT_WORKER", "1") != "0")


def entry() -> None:
    """The installed `ce` script."""
    from ce_runtime import startup_gc

    startup_gc.quiet_startup()
    if wants_report_worker(sys.argv[1:]):
        from ce_runtime import worker_process

        worker_process.start_early()
        if command_of(sys.argv[1:]) == "run":  # its tempdir trials' zygote, waiting
            from ce_runtime import zygote_process  # for a socket

            zygote_process.start_early()
    from ce_runtime.cli import entry as cli_entry

    cli_entry()
