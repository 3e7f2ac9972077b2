"""The report worker: a process `ce run` (and `ce rescore`) starts first thing to write
the reports at the end.

Polars (and the report modules) take 0.15-0.2 s of CPU to import. Imported in `ce run`'s
own process, on a thread while the trials ran, they held the GIL against the trials'
event loop (starting a thread, forking an init, every step of a trial waited), and
imported at the end, they were the end's longest step. The worker imports them on
another CPU while the trials run. `ce run` then tells it the run's trials (a Begin) and
each trial as it finishes (a Done): the worker reads its task.json while the next
trials run and, once the last is in, makes every report in memory while `ce run` ends
its pool. The end (RunReports: the records it read go as references) finds them made:
it writes them (report/run_end.write_prepared) and answers with run.json's summary on
stdout. The messages are store/report_job.py's (framed msgpack), the worker's side is
report/job.py, outside the cli package: the worker would load click with it, which it
never uses (nor attrs: the report modules hold their values in msgspec structs and
named tuples). The `ce` script starts it before anything else is loaded
(ce_runtime/boot.py, ce_runtime/worker_process.py); this module is the command's side of it.

The worker is an optimisation, never a second behaviour: when it cannot start, dies, or
fails on anything but a write (an OSError, re-raised in `ce run` as if raised there),
`ce run` writes the reports itself, from the records it read. It runs in its own
session (a Ctrl-C at the terminal is `ce run`'s to handle) and exits on end of input,
so it never outlives `ce run`, however that ends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Any


class ReportWorker:
    """`ce run`'s side of the worker. What it sends while the trials run is never
    waited for: its pipe does not block, and what the worker has not read yet waits
    here (`_pending`) until the next send, or the end."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self._pending = bytearray()
        self._broken = False  # the worker is gone: nothing more is sent
        self._positions: dict[str, int] = {}  # trial id -> position in the Begin
        self._sent: set[int] = set()  # positions of the trials it was told of
        self._replied = False

    @classmethod
    def start(cls) -> ReportWorker | None:
        """The worker the `ce` script started for this command (ce_runtime/boot.py), or
        a new one (`main` called in-process, `python -m ce_runtime.cli`)."""
        from ce_runtime import worker_process

        if os.environ.get("CE_REPORT_WORKER", "1") == "0":
            return None
        proc = worker_process.claim() or worker_process.spawn()
        return None if proc is None else cls(proc)

    def begin(self, message: Any, trial_ids: list[str]) -> None:
        """The run's trials are known (`message`: a store.report_job.Begin; `trial_ids`:
        its trials' ids, in its order)."""
        from ce_runtime.store.report_job import frame

        self._positions = {trial_id: i for i, trial_id in enumerate(trial_ids)}
        self._sent.update(message.earlier)
        self._send(frame(message), wait=False)

    def trial_done(self, trial_id: str) -> None:
        """The trial `trial_id` has its files written."""
        from ce_runtime.store.report_job import Done, frame

        position = self._positions.get(trial_id)
        if position is not None:
            self._sent.add(position)
            self._send(frame(Done(position)), wait=False)

    def reference(self, record: Any) -> Any:
        """What the end sends for `record` (a TrialRecord `ce run` read): a RecordRef
        when the worker was told of its trial (it read it then), else the record."""
        position = self._positions.get(record.trial_id)
        if position in self._sent and record.record_sha256:
            return (position, record.record_sha256)
        return record

    def _send(self, data: bytes, wait: bool) -> None:
        if self._broken:
            return
        self._pending += data
        fd = self.proc.stdin.fileno()
        try:
            if wait:
                os.set_blocking(fd, True)
            while self._pending:
                del self._pending[:os.write(fd, self._pending)]
        except BlockingIOError:  # the pipe is full: the rest goes with the next send
            pass
        except (OSError, ValueError):  # it died: the caller writes the reports
            self._broken = True
            self._pending.clear()

    def write_reports(self, job: Any, meanwhile: Any = None) -> dict[str, Any] | None:
        """run.json's summary once the worker wrote every report (`job`: a
        store.report_job.RunReports or RescoreReports); None when it could not (the
        caller writes them itself). A write that failed raises its OSError.
        `meanwhile()`: the caller's own work, done while the worker writes."""
        import msgspec

        from ce_runtime.store.report_job import Reply, frame, read_frame

        self._send(frame(job), wait=True)
        if self._broken:
            self.close()
            return None
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        if meanwhile is not None:
            meanwhile()
        try:
            data = read_frame(self.proc.stdout.fileno())
            reply = None if data is None else msgspec.msgpack.decode(data, type=Reply)
        except (OSError, msgspec.MsgspecError):
            reply = None
        if reply is None:  # it failed (exit 3) or died: its exit is waited for here
            self.close()
            return None
        self._replied = True
        if reply.write_failed is not None:
            w = reply.write_failed
            if w.errno is None:
                raise OSError(w.strerror)
            raise OSError(w.errno, w.strerror, w.filename, None, w.filename2)
        return reply.summary

    def close(self) -> None:
        """End a worker that got no job (end of input), killing it if it does not go.
        One that replied is ending by itself: its exit (a few ms of unmapping Polars)
        is not waited for."""
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        if self._replied:
            return
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
