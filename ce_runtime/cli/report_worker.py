"""The report worker: a process `ce run` starts with the run to write its reports.

Polars (and the report modules) take 0.15-0.2 s of CPU to import. Imported in `ce run`'s
own process, on a thread while the trials ran, they held the GIL against the trials'
event loop (starting a thread, forking an init, every step of a trial waited), and
imported at the end, they were the end's longest step. The worker imports them on
another CPU while the trials run, then reads the job on stdin (msgpack: the records and
what the summary needs), writes every report file (run_end.write_run_reports) and
answers with run.json's summary on stdout.

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

import msgspec

from ce_runtime.store.record import TrialRecord


class Job(msgspec.Struct, frozen=True):
    run_dir: str
    run_id: str
    config: dict[str, Any]
    records: list[TrialRecord]
    total: int
    interrupted: bool
    junit_xml: str | None
    lost: list[dict[str, Any]]


class WriteFailed(msgspec.Struct, frozen=True):
    errno: int | None
    strerror: str | None
    filename: str | None
    filename2: str | None


class Reply(msgspec.Struct, frozen=True):
    summary: dict[str, Any] | None = None
    write_failed: WriteFailed | None = None


class ReportWorker:
    """`ce run`'s side of the worker."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    @classmethod
    def start(cls) -> ReportWorker | None:
        if os.environ.get("CE_REPORT_WORKER", "1") == "0":
            return None
        try:
            proc = subprocess.Popen([sys.executable, "-m", "ce_runtime.report.worker"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    start_new_session=True)
        except OSError:
            return None
        return cls(proc)

    def write_reports(self, job: Job) -> dict[str, Any] | None:
        """run.json's summary once the worker wrote every report; None when it could not
        (the caller writes them itself). A write that failed raises its OSError."""
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


def main() -> int:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import polars  # noqa: F401 - the point: imported before the job arrives

        import ce_runtime.report
        import ce_runtime.report.html  # noqa: F401
        from ce_runtime.report.run_end import write_run_reports
    except Exception:  # `ce run` writes the reports, and reports the import's failure
        return 3
    data = sys.stdin.buffer.read()
    if not data:  # no job: the run stopped before its end
        return 0
    try:
        job = msgspec.msgpack.decode(data, type=Job)
        summary = write_run_reports(job.run_dir, job.run_id, job.config, job.records,
                                    job.total, job.interrupted, job.junit_xml, job.lost)
        reply = Reply(summary=summary)
    except OSError as exc:
        reply = Reply(write_failed=WriteFailed(
            exc.errno, exc.strerror, None if exc.filename is None else str(exc.filename),
            None if exc.filename2 is None else str(exc.filename2)))
    except Exception:
        if os.environ.get("CE_DEBUG"):
            raise
        return 3  # `ce run` writes the reports itself and says what failed
    sys.stdout.buffer.write(msgspec.msgpack.encode(reply))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing to tear down that anyone would see (see cli.entry)
