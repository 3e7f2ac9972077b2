"""The report worker's job and reply (msgpack), and the worker itself: `python -m
ce_runtime.report.job` (started by report_worker.ReportWorker, for `ce run` and
`ce rescore`)."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from typing import Any

import msgspec

from ce_runtime.store.record import TrialRecord


class RunReports(msgspec.Struct, frozen=True, tag="run"):
    """`ce run`'s end (run_end.write_run_reports)."""

    run_dir: str
    run_id: str
    config: dict[str, Any]
    records: list[TrialRecord]
    total: int
    interrupted: bool
    junit_xml: str | None
    lost: list[dict[str, Any]]
    error: str | None = None  # what cut the run short besides a signal (no executor)


class RescoreReports(msgspec.Struct, frozen=True, tag="rescore"):
    """`ce rescore`'s reports, into its (staged) results directory `out`
    (run_end.write_rescore_reports)."""

    out: str
    run_id: str
    rescored_from: str
    records: list[TrialRecord]
    # the re-scored run's own state, when the whole run was re-scored: a run a Ctrl-C
    # cut short is not a pass when re-scored either
    status: str = "complete"
    planned: int | None = None
    min_pass_rate: float | None = None  # the run's `--min-pass-rate` gate, kept


Job = RunReports | RescoreReports


class WriteFailed(msgspec.Struct, frozen=True):
    errno: int | None
    strerror: str | None
    filename: str | None
    filename2: str | None


class Reply(msgspec.Struct, frozen=True):
    summary: dict[str, Any] | None = None
    write_failed: WriteFailed | None = None


def load() -> None:
    """Everything the job uses, Polars first of all: the point of the worker is to have
    it loaded before the job arrives. Neither click nor attrs (~25 ms: tested)."""
    import ce_runtime.report
    import ce_runtime.report.html
    import ce_runtime.report.html_trial
    import ce_runtime.report.render
    import ce_runtime.report.run_end
    import ce_runtime.report.rundir

    ce_runtime.report.load_polars()


def main() -> int:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        # its imports are for later: the trials' processes (on a machine with few CPUs,
        # the same ones) come first; at the run's end it is all that runs anyway
        os.nice(10)
    try:
        load()
    except Exception:  # `ce run` writes the reports, and reports the import's failure
        return 3
    from ce_runtime.report.run_end import warm_up, write_rescore_reports, write_run_reports

    with contextlib.suppress(Exception):  # a failed warm-up leaves the job as it was
        warm_up()
    data = sys.stdin.buffer.read()
    if not data:  # no job: the run stopped before its end
        return 0
    try:
        job = msgspec.msgpack.decode(data, type=Job)
        # the records live until this process ends: the collector's full passes over
        # them (~25 ms each for 2,000 trials' records) would find nothing to free
        gc.freeze()
        if isinstance(job, RescoreReports):
            summary = write_rescore_reports(job.out, job.records, job.run_id,
                                            job.rescored_from, job.status, job.planned,
                                            job.min_pass_rate)
        else:
            summary = write_run_reports(job.run_dir, job.run_id, job.config, job.records,
                                        job.total, job.interrupted, job.junit_xml, job.lost,
                                        job.error)
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
