"""The report worker: a process `ce run` (and `ce rescore`) starts first thing to write
the reports at the end.

Polars (and the report modules) take 0.15-0.2 s of CPU to import. Imported in `ce run`'s
own process, on a thread while the trials ran, they held the GIL against the trials'
event loop (starting a thread, forking an init, every step of a trial waited), and
imported at the end, they were the end's longest step. The worker imports them on
another CPU while the trials run, then reads the job on stdin (msgpack: the records and
what the summary needs), writes every report file (report/run_end.write_run_reports)
and answers with run.json's summary on stdout. This module is `ce run`'s side and
imports nothing but the standard library, so the worker starts before anything else is
loaded; the job, the reply and the worker's own side are in report/job.py, outside the
cli package: the worker would load click with it, which it never uses (nor attrs: the
report modules hold their values in msgspec structs and named tuples).

The worker is an optimisation, never a second behaviour: when it cannot start, dies, or
fails on anything but a write (an OSError, re-raised in `ce run` as if raised there),
`ce run` writes the reports itself. It runs in its own session (a Ctrl-C at the
terminal is `ce run`'s to handle) and exits on end of input, so it never outlives `ce
run`, however that ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any


class ReportWorker:
    """`ce run`'s side of the worker."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    @classmethod
    def start(cls) -> ReportWorker | None:
        if os.environ.get("CE_REPORT_WORKER", "1") == "0":
            return None
        try:
            proc = subprocess.Popen([sys.executable, "-m", "ce_runtime.report.job"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    start_new_session=True)
        except OSError:
            return None
        return cls(proc)

    def write_reports(self, job: Any) -> dict[str, Any] | None:
        """run.json's summary once the worker wrote every report (`job`: a
        report.job.RunReports or RescoreReports); None when it could not (the caller
        writes them itself). A write that failed raises its OSError."""
        import msgspec

        from ce_runtime.report.job import Reply

        try:
            out, _ = self.proc.communicate(msgspec.msgpack.encode(job))
        except (OSError, ValueError):  # it died before reading the job
            self.close()
            return None
        if self.proc.returncode != 0:
            return None
        try:
            reply = msgspec.msgpack.decode(out, type=Reply)
        except msgspec.MsgspecError:
            return None
        if reply.write_failed is not None:
            w = reply.write_failed
            if w.errno is None:
                raise OSError(w.strerror)
            raise OSError(w.errno, w.strerror, w.filename, None, w.filename2)
        return reply.summary

    def close(self) -> None:
        """End a worker that got no job (end of input), killing it if it does not go."""
        if self.proc.poll() is not None:
            return
        try:
            if self.proc.stdin is not None and not self.proc.stdin.closed:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
