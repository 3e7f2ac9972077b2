"""`ce run`: trials of a suite executed (a local asyncio pool, or Ray) into a run directory.

runs/<run-id>/  run.json, plans/<hash>.json, objects/, trials.parquet, results.parquet,
report.md, <variant>/<task_id>[/<row_id>]/<NN>/{task.json, trace.msgpack, workspace.json}

A trial is finished when its task.json exists (written last, atomically): an interrupted
run keeps every finished trial, and `--resume` runs exactly the others.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import attrs

from ce_lang.api import Trial, plan_to_json
from ce_runtime.execute.executor import LOST  # noqa: F401 - a trial whose directory vanished
from ce_runtime.execute.trial import trial_dir_of
from ce_runtime.store.archive import load_json  # noqa: F401 - `ce run` reads run.json with it
from ce_runtime.store.record import TrialRecord
from ce_runtime.store.run_json import write_run_json  # noqa: F401 - `ce run` writes run.json
from ce_runtime.store.runs_root import LOCK_FILE


@attrs.frozen
class RunOptions:
    jobs: int = 1
    agent: str | None = None
    uv_cache: str | None = None
    scripted_model: bool = False
    executor: str = "local"  # executor.py: local (asyncio pool) or ray
    ray_address: str | None = None  # None: a Ray instance started for the run


def new_run_dir(root: str) -> str:
    from ce_runtime.store.runs_root import new_run_id

    os.makedirs(root, exist_ok=True)
    while True:  # ids sort by creation time; two of the same millisecond get another
        run_dir = os.path.join(root, new_run_id())
        try:
            os.mkdir(run_dir)
            break
        except FileExistsError:
            continue
    os.makedirs(os.path.join(run_dir, "plans"))
    os.makedirs(os.path.join(run_dir, "objects"))
    latest = os.path.join(root, "latest")
    tmp = latest + ".tmp"
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(run_dir), tmp)
        os.replace(tmp, latest)
    except OSError:
        pass  # no symlinks on this filesystem: runs/latest is a convenience
    return run_dir


class RunDirBusy(Exception):
    """Another `ce run` holds the run directory's lock; the message says who."""


def lock_run_dir(run_dir: str) -> int:
    """Lock the run directory for this process's lifetime (a `ce run` or `--resume`
    writing it): an flock on run.lock, which the kernel releases when the process ends,
    however it ends, so a dead holder never blocks. run.lock says who holds it (pid, host,
    started at). Returns the descriptor (kept open; closing it unlocks); raises RunDirBusy
    naming the holder, having written nothing."""
    import fcntl
    import socket

    path = os.path.join(run_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
            who = (f"pid {holder['pid']} on {holder['host']}, started at "
                   f"{holder['started_at']}")
        except (ValueError, KeyError, TypeError, OSError):
            who = "another process (run.lock does not say which)"
        os.close(fd)
        raise RunDirBusy(f"{run_dir} is being written by another `ce run`: {who}") from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                              "started_at": now_iso()}).encode() + b"\n", 0)
    return fd


def interleave(trials: list[Trial]) -> list[Trial]:
    """Round-robin across tasks, so a slow task's repeats don't queue up together."""
    by_task: dict[str, list[Trial]] = {}
    for t in trials:
        by_task.setdefault(f"{t.variant_id}/{t.plan.task_id}", []).append(t)
    queues = list(by_task.values())
    out: list[Trial] = []
    while queues:
        for q in list(queues):
            out.append(q.pop(0))
            if not q:
                queues.remove(q)
    return out


def plan_file_bytes(plan_hash: str, plan: Any) -> bytes:
    """plans/<hash>.json's bytes."""
    return (json.dumps({"hash": plan_hash, "plan": plan_to_json(plan)}, indent=2,
                       sort_keys=True) + "\n").encode()


def write_plans(run_dir: str, trials: list[Trial],
                encoded: dict[str, bytes] | None = None) -> list[str]:
    """plans/<hash>.json for every trial (`encoded`: files already made by
    `plan_file_bytes`, by hash). A plan file already there (a resumed run) is checked
    against its name; a damaged one is written again from the task file, which compiled
    to that very hash. Returns what was repaired ("PATH: why")."""
    from ce_lang.api import stdlib_digest, stdlib_texts
    from ce_runtime.grade.rescore import load_plan_file
    from ce_runtime.store.archive import DamagedArchive, write_definitions
    from ce_runtime.store.atomic import write_bytes_atomic
    from ce_runtime.store.task_files import archive as archive_task_files

    write_definitions(run_dir, stdlib_digest(), stdlib_texts())
    archive_task_files(run_dir, trials)
    repaired: list[str] = []
    for plan_hash, t in {t.plan_hash: t for t in trials}.items():
        path = os.path.join(run_dir, "plans", f"{plan_hash}.json")
        if os.path.exists(path):
            try:
                load_plan_file(run_dir, plan_hash)
                continue
            except DamagedArchive as exc:
                repaired.append(f"{path}: {exc.why}")
        data = (encoded or {}).get(plan_hash) or plan_file_bytes(plan_hash, t.plan)
        write_bytes_atomic(path, data)
    return repaired


def finished(run_dir: str, trial: Trial, renamed: dict[str, str | None] | None = None
             ) -> TrialRecord | None:
    """The trial's record if it finished with this same plan (a task edited since the
    run started gives a new plan: that trial runs again on resume). A damaged record
    (unreadable, malformed, or changed after the trial) is not a finished trial.
    `renamed`: `ran_plan`'s memo, shared across a run's trials."""
    from ce_runtime.store.archive import DamagedArchive, missing_trial_file
    from ce_runtime.store.record import read_record

    tdir = trial_dir_of(run_dir, trial)
    if not os.path.isfile(os.path.join(tdir, "task.json")):
        return None
    try:
        record = read_record(tdir)
    except DamagedArchive:
        return None
    if missing_trial_file(tdir, record) is not None:
        return None
    return record if ran_plan(run_dir, record.plan_hash, trial,
                              {} if renamed is None else renamed) else None


def already_run(run_dir: str, trials: list[Trial]) -> tuple[set[str], list[str]]:
    """One read of every trial's record: the ids of the trials that finished with their
    same plan (skipped on resume), and the damaged records ("damaged archive: PATH: why"),
    whose trials a resume says so of, then runs again. A trial is finished when every
    file of a finished trial is there (`missing_trial_file`), not task.json alone: one
    whose trace was lost is damaged, and runs again."""
    from ce_runtime.store.archive import DamagedArchive, missing_trial_file
    from ce_runtime.store.record import read_record

    done: set[str] = set()
    damaged: list[str] = []
    renamed: dict[str, str | None] = {}
    for t in trials:
        tdir = trial_dir_of(run_dir, t)
        if not os.path.isfile(os.path.join(tdir, "task.json")):
            continue
        try:
            record = read_record(tdir)
        except DamagedArchive as exc:
            damaged.append(str(exc))
            continue
        missing = missing_trial_file(tdir, record)
        if missing is not None:
            damaged.append(str(missing))
            continue
        if ran_plan(run_dir, record.plan_hash, t, renamed):
            done.add(t.trial_id)
    return done, damaged


def ran_plan(run_dir: str, recorded: str | None, trial: Trial,
             renamed: dict[str, str | None]) -> bool:
    """Whether a finished trial that recorded plan `recorded` ran the plan `trial` has
    today: the same name, or an archived plan (plans/<recorded>.json, read as written)
    whose hash by today's ce is the trial's. A run of an older ce names its plans as that
    ce hashed them (before ce_lang/plan_identity.py's hashed form, or before a field
    was added): its finished trials are not run again unless their plan changed.
    `renamed` memoizes recorded name -> today's (None: no sound plan file)."""
    if recorded == trial.plan_hash:
        return True
    if not isinstance(recorded, str):
        return False
    if recorded not in renamed:
        from ce_runtime.grade.rescore import archived_plan_json
        from ce_runtime.store.archive import DamagedArchive

        try:
            renamed[recorded] = archived_plan_json(run_dir, recorded)[1]
        except DamagedArchive:
            renamed[recorded] = None  # unreadable or not its name: the trial runs again
    return renamed[recorded] == trial.plan_hash


def clean_stale_scratch() -> None:
    """Remove scratch directories of runs whose process is gone (a SIGKILLed run can't
    clean up after itself; its workspaces may hold whole venvs)."""
    import shutil

    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = re.fullmatch(r"ce-run-(\d+)-\w+", name)
        if m is None:
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
        except PermissionError:
            pass


def hidden_paths(trials: list[Trial], options: RunOptions) -> tuple[str, ...]:
    """What no agent of this run may see: every task directory of the suite (their
    hidden tests and references, the task files themselves), ce's caches."""
    paths = {os.path.abspath(t.task_dir) for t in trials if t.task_dir}
    from ce_lang.api import ce_cache

    paths.add(ce_cache())
    if options.uv_cache:
        paths.add(os.path.abspath(options.uv_cache))
    return tuple(sorted(paths))


async def execute(trials: list[Trial], run_dir: str, options: RunOptions,
                  on_start: Callable[[Trial], None] | None = None,
                  on_done: Callable[[Trial, TrialRecord], None] | None = None,
                  ) -> list[TrialRecord]:
    """Run the trials (skipping finished ones) with `options.jobs` at a time, on the
    executor `options.executor` names (executor.py: the local pool, or Ray)."""
    from ce_runtime.execute.executor import executor_for

    executor = executor_for(options.executor, options.ray_address)
    return await executor.execute(interleave(trials), os.path.abspath(run_dir), options,
                                  on_start, on_done)


def collect(run_dir: str, trials: list[Trial]) -> list[TrialRecord]:
    out = []
    renamed: dict[str, str | None] = {}
    for t in trials:
        rec = finished(run_dir, t, renamed)
        if rec is not None:
            out.append(rec)
    return out


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def eprint(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)


