"""The report worker itself: `python -m ce_runtime.report.job` (started by
cli/report_worker.ReportWorker, for `ce run` and `ce rescore`); its messages are
store/report_job.py's.

For `ce run` it follows the run as it goes: each finished trial's task.json is read
here while the next trials run, and once every trial of the run is in, the whole end is
made in memory (`run_end.prepare_run_reports`) while `ce run` ends its pool. The end
message then only confirms it: the same records (by their digests) and the same run
state write the files made; anything else (a Ctrl-C, a lost trial, a record that
changed) makes them again from what the end message says, as `ce run` itself would."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from typing import Any

import msgspec

from ce_runtime.store.record import TrialRecord
from ce_runtime.store.report_job import (  # the job's names, as before
    Begin,
    Done,
    Job,
    Message,
    RecordRef,
    Reply,
    RescoreReports,
    RunReports,
    WriteFailed,
    frame,
    read_frame,
)


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


class UnknownRecord(Exception):
    """A reference to a record this worker could not read as `ce run` read it."""


class RunStream:
    """A run's trials as they finish: their records, read from their task.json, and
    the end made in memory once every trial is in."""

    def __init__(self, begin: Begin) -> None:
        from ce_runtime.report.html_trial import TrialReads

        self.begin = begin
        self.records: dict[int, TrialRecord | None] = {}
        self.prepared: Any = None  # run_end.PreparedReports
        # what report.html shows of each trial, read as it finishes
        self.reads = TrialReads(os.path.realpath(begin.run_dir))
        for position in begin.earlier:
            self.add(position)

    def add(self, position: int) -> None:
        """The trial at `position` is finished: its record (None: unreadable)."""
        from ce_runtime.store.archive import DamagedArchive
        from ce_runtime.store.record import read_record

        try:
            rec = read_record(self.begin.trial_dirs[position])
        except (DamagedArchive, IndexError, OSError):
            rec = None
        self.records[position] = rec
        if rec is not None:
            self.reads.read_ahead(rec)

    def prepare_if_complete(self) -> None:
        """Make the end as a complete run's, once every trial of the run is read."""
        from ce_runtime.report.run_end import prepare_run_reports

        b = self.begin
        if len(self.records) != b.total or None in self.records.values():
            return
        records = [self.records[i] for i in sorted(self.records)]
        gc.freeze()  # see main
        try:
            self.prepared = prepare_run_reports(b.run_dir, b.run_id, b.config, records,
                                                b.total, False, b.junit_xml, [], None,
                                                self.reads)
        except Exception:  # the end makes them again, and fails as `ce run` would
            self.prepared = None

    def resolve(self, items: list[TrialRecord | RecordRef]) -> list[TrialRecord]:
        """The end's records: a reference is the record read here when its digest is
        `ce run`'s, else its task.json read again; UnknownRecord when neither is."""
        out = []
        for item in items:
            if isinstance(item, TrialRecord):
                out.append(item)
                continue
            position, digest = item
            rec = self.records.get(position)
            if rec is None or rec.record_sha256 != digest:
                self.add(position)
                rec = self.records[position]
                if rec is None or rec.record_sha256 != digest:
                    raise UnknownRecord(f"the record at {position}")
            out.append(rec)
        return out

    def prepared_for(self, job: RunReports, records: list[TrialRecord]) -> Any:
        """The end made ahead, when `job` is the one it was made for."""
        p = self.prepared
        if p is None or len(p.records) != len(records) or \
                any(a is not b for a, b in zip(p.records, records, strict=True)):
            return None
        inputs = (job.run_dir, job.run_id, job.config, job.total, job.interrupted,
                  job.junit_xml, job.lost, job.error, tuple(job.unrun),
                  tuple(sorted(job.unrun_files.items())))
        return p if p.inputs == inputs else None


def run_job(job: Job, stream: RunStream | None) -> dict[str, Any]:
    """Write the job's reports; run.json's summary."""
    from ce_runtime.report import run_end

    if isinstance(job, RescoreReports):
        return run_end.write_rescore_reports(job.out, job.records, job.run_id,
                                             job.rescored_from, job.status, job.planned,
                                             job.min_pass_rate, job.error, job.ran_in)
    if stream is None:
        if any(not isinstance(r, TrialRecord) for r in job.records):
            raise UnknownRecord("a reference without a Begin")
        records = list(job.records)
    else:
        records = stream.resolve(job.records)
    prepared = stream.prepared_for(job, records) if stream is not None else None
    if prepared is None:
        prepared = run_end.prepare_run_reports(
            job.run_dir, job.run_id, job.config, records, job.total, job.interrupted,
            job.junit_xml, job.lost, job.error, stream.reads if stream is not None else None,
            job.unrun, job.unrun_files)
    return run_end.write_prepared(prepared)


def _warm_up_while_idle(fd: int) -> bool:
    """run_end.warm_up (the first call of each step costs ~15 ms more than the next)
    unless input is waiting; whether it ran."""
    import select

    from ce_runtime.report.run_end import warm_up

    if select.select([fd], [], [], 0)[0]:
        return False
    with contextlib.suppress(Exception):  # a failed warm-up leaves the job as it was
        warm_up()
    return True


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
    from ce_runtime import startup_gc

    startup_gc.imports_done()
    decoder = msgspec.msgpack.Decoder(Message)
    stream: RunStream | None = None
    warm = False
    try:
        while True:
            if not warm and not (stream is not None and stream.prepared is not None):
                # only while nothing is to be read: a worker that is late (a busy
                # machine) has the end waiting, which warms what it uses itself
                warm = _warm_up_while_idle(sys.stdin.fileno())
            data = read_frame(sys.stdin.fileno())
            if data is None:  # no job: the run stopped before its end
                return 0
            message = decoder.decode(data)
            if isinstance(message, Begin):
                stream = RunStream(message)
            elif isinstance(message, Done):
                if stream is not None:
                    stream.add(message.position)
                    stream.prepare_if_complete()
            else:
                break
        # the records live until this process ends: the collector's full passes over
        # them (~25 ms each for 2,000 trials' records) would find nothing to free
        gc.freeze()
        reply = Reply(summary=run_job(message, stream))
    except OSError as exc:
        reply = Reply(write_failed=WriteFailed(
            exc.errno, exc.strerror, None if exc.filename is None else str(exc.filename),
            None if exc.filename2 is None else str(exc.filename2)))
    except Exception:
        if os.environ.get("CE_DEBUG"):
            raise
        return 3  # `ce run` writes the reports itself and says what failed
    data = frame(reply)
    while data:
        data = data[os.write(sys.stdout.fileno(), data):]
    return 0


def run_as_script() -> None:
    """The worker process's body (worker_process.WORKER_MAIN, or `python -m`)."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # nothing to tear down that anyone would see (see cli.entry)


if __name__ == "__main__":
    run_as_script()
