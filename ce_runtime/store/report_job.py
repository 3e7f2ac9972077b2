"""The report worker's messages (msgpack, each framed by its length) and its reply.

`ce run` streams the run to its report worker (ce_runtime/report/job.py) as it goes:
`Begin` once the run's trials are known, `Done` as each trial's files are written (the
worker reads its task.json on its own CPU, while the next trials run), then the end:
`RunReports`, whose records the worker already read travel as references (position and
task.json digest) instead of whole records. `ce rescore` sends its `RescoreReports`
alone. Here, in the store, and not beside the worker: `ce run` imports these with
msgspec only, not the report package.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgspec

from ce_runtime.store.record import TrialRecord

# a record the worker read itself: (its trial's position in Begin.trial_dirs, the
# record_sha256 of the task.json `ce run` read): the same digest is the same record
RecordRef = tuple[int, str]


class Begin(msgspec.Struct, frozen=True, tag="begin"):
    """The run, before its trials run: the trial directories in the run's order (a
    `Done` names a position in it) and those finished before (a resume's)."""

    run_dir: str
    run_id: str
    config: dict[str, Any]
    total: int
    junit_xml: str | None
    trial_dirs: list[str]
    earlier: list[int] = []


class Done(msgspec.Struct, frozen=True, tag="done"):
    """The trial at `position` is finished: its files are in the run directory."""

    position: int


class RunReports(msgspec.Struct, frozen=True, tag="run"):
    """`ce run`'s end (run_end.write_run_reports); in `records`, a RecordRef stands for
    a record the worker read after a Begin or Done."""

    run_dir: str
    run_id: str
    config: dict[str, Any]
    records: list[TrialRecord | RecordRef]
    total: int
    interrupted: bool
    junit_xml: str | None
    lost: list[dict[str, Any]]
    error: str | None = None  # what cut the run short besides a signal (no executor)
    unrun: list[str] = []  # the planned trials' ids that did not run (a cut-short run)
    # {VARIANT/TASK[/ROW]: task file} of those (their JUnit testcases' `file`)
    unrun_files: dict[str, str] = {}


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
    error: str | None = None  # why trials of the run were not re-scored (missing, damaged)
    ran_in: str | None = None  # the run the trials ran in, when `rescored_from` is a re-score


Job = RunReports | RescoreReports
Message = Begin | Done | RunReports | RescoreReports


class WriteFailed(msgspec.Struct, frozen=True):
    errno: int | None
    strerror: str | None
    filename: str | None
    filename2: str | None


class Reply(msgspec.Struct, frozen=True):
    summary: dict[str, Any] | None = None
    write_failed: WriteFailed | None = None


_LENGTH = struct.Struct(">I")


def frame(message: Any) -> bytes:
    """`message` as msgpack, its length first."""
    data = msgspec.msgpack.encode(message)
    return _LENGTH.pack(len(data)) + data


def read_frame(fd: int) -> bytes | None:
    """The next frame's payload from the descriptor `fd`; None at end of input (also in
    the middle of a frame: the sender died)."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    return _read_exactly(fd, _LENGTH.unpack(head)[0])


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
