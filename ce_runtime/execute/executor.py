"""Executors: what runs a run's trials. One protocol, two implementations: the local
asyncio pool (this module) and Ray (`ray_executor.py`, an optional extra).

An executor gets the trials still to run (in the order to start them), the run
directory and the run's options; it runs at most `options.jobs` trials at a time, calls
`on_start(trial)` when one starts and `on_done(trial, record)` once its files are in the
run directory, and returns the records. Cancelled (Ctrl-C, SIGTERM), it stops every
trial, waits for their teardown, and lets the CancelledError through; the trials written
by then are kept (a trial is finished when its task.json and every file of a finished
trial exist: `suite.already_run`) and `--resume` runs the others.

The local pool writes each trial's directory in place. A remote trial runs in a scratch
run directory of its own on the worker (`run_in_scratch`) and comes back as a
`TrialResult`: its trial files (task.json, trace.msgpack, workspace.json, evidence.json)
and the run-level files it created (workspace objects, judge verdicts: content-addressed,
so the same name holds the same bytes). The driver alone writes the run directory
(`write_result`): run-level files it does not have yet, then the trial's files, task.json
last, each atomically; a second result for a trial already written is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

import attrs

from ce_lang.api import Trial
from ce_runtime.execute.trial import (
    RunContext,
    TrialLost,
    execute_trial,
    finish_despite_cancels,
    trial_dir_of,
)
from ce_runtime.store.atomic import write_bytes_atomic
from ce_runtime.store.record import Status, TrialRecord, as_record

# A trial whose directory vanished mid-run: reported by `ce run` (exit 1), never written.
LOST = Status.LOST
EXECUTORS = ("local", "ray")
TRIAL_FILES = ("trace.msgpack", "workspace.json", "evidence.json", "task.json")  # task last
SHARED_DIRS = ("objects", "judges")  # run-level, content-addressed

OnStart = Callable[[Trial], None] | None
OnDone = Callable[[Trial, TrialRecord], None] | None


class ExecutorUnavailable(Exception):
    """The executor asked for cannot run here (a one-line reason, with the fix)."""


class Executor(Protocol):
    name: str

    async def execute(self, trials: list[Trial], run_dir: str, options: Any,
                      on_start: OnStart = None, on_done: OnDone = None
                      ) -> list[TrialRecord]: ...


@attrs.frozen
class WorkerParams:
    """What a trial needs besides itself, on whichever machine runs it (picklable)."""
    run_dir: str  # the driver's run directory: hidden from agents, read for dedup only
    uv_cache: str | None = None
    agent: str | None = None
    hidden: tuple[str, ...] = ()
    scripted_model: bool = False


@attrs.frozen
class TrialResult:
    """A trial run elsewhere: its record, its trial files and the run-level files it made
    (relative path -> bytes). `lost`: the trial's scratch vanished; nothing to write."""
    trial_id: str
    record: dict[str, Any] | TrialRecord  # a TrialRecord when the trial was lost
    files: dict[str, bytes] = attrs.Factory(dict)
    shared: dict[str, bytes] = attrs.Factory(dict)
    lost: bool = False


def make_context(run_dir: str, work_root: str, options: Any, hidden: tuple[str, ...]
                 ) -> RunContext:
    """`options`: a RunOptions or WorkerParams (uv_cache, agent, scripted_model)."""
    from ce_runtime.store.redact import Redactor

    return RunContext(run_dir, os.path.join(run_dir, "objects"), work_root, options.uv_cache,
                      options.agent, hidden, Redactor.from_environ(), options.scripted_model)


class LocalExecutor:
    """Trials as asyncio tasks of this process, `jobs` at a time, each writing its own
    trial directory (the run's scratch: a ce-run-<pid>-* temp directory)."""

    name = "local"

    async def execute(self, trials: list[Trial], run_dir: str, options: Any,
                      on_start: OnStart = None, on_done: OnDone = None
                      ) -> list[TrialRecord]:
        from ce_runtime.execute.suite import clean_stale_scratch, hidden_paths

        clean_stale_scratch()
        work_root = tempfile.mkdtemp(prefix=f"ce-run-{os.getpid()}-")
        from ce_runtime.execute.sandbox.tempdir import uses_zygote, zygote
        from ce_runtime.execute.trash import Trash

        trash = Trash()
        ctx = attrs.evolve(make_context(run_dir, work_root, options,
                                        hidden_paths(trials, options)), discard=trash.put)

        if any(uses_zygote(t.plan.sandbox) for t in trials):
            zygote().prestart(work_root)
        sem = asyncio.Semaphore(max(1, options.jobs))
        records: list[TrialRecord] = []

        async def one(trial: Trial) -> None:
            async with sem:
                if on_start:
                    on_start(trial)
                try:
                    record = as_record(await execute_trial(trial, ctx))
                except TrialLost as exc:  # reported; the other trials go on
                    record = lost_record(trial, str(exc))
                records.append(record)
                if on_done:
                    on_done(trial, record)

        tasks = [asyncio.ensure_future(one(t)) for t in trials]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # gather gives up at the first trial cancelled or failed while the others
            # still run; each must finish its own clean-up (processes killed and reaped,
            # scratch removed) before the run ends, or the loop's shutdown cuts it short
            for task in tasks:
                if not task.cancelling():  # once: a second cancel cuts a teardown short
                    task.cancel()
            if tasks:
                await asyncio.wait(tasks)
            raise
        finally:
            # whole even when a Ctrl-C lands in it (after the last trial): cut short, it
            # left the run's scratch behind
            await finish_despite_cancels(_teardown(trash, work_root))
        return records


async def _teardown(trash, work_root: str) -> None:
    """The local pool's end: the zygote ended, the trash emptied, the scratch removed."""
    from ce_runtime.execute.sandbox.tempdir import close_warm_inits

    try:
        await close_warm_inits()
        await asyncio.to_thread(trash.close)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


def lost_record(trial: Trial, error: str) -> TrialRecord:
    """A LOST trial's record: its ids and why (nothing of it was kept to say more)."""
    return TrialRecord(trial_id=trial.trial_id, variant_id=trial.variant_id,
                       task_id=trial.plan.task_id, repeat=trial.repeat, status=LOST,
                       error=error)


def executor_for(name: str, ray_address: str | None = None) -> Executor:
    """The executor called `name`; ExecutorUnavailable when it cannot run here."""
    if name == "local":
        return LocalExecutor()
    if name == "ray":
        why = ray_missing()
        if why:
            raise ExecutorUnavailable(why)
        from ce_runtime.execute.ray_executor import RayExecutor

        return RayExecutor(ray_address)
    raise ExecutorUnavailable(f"unknown executor {name!r} (one of {', '.join(EXECUTORS)})")


def ray_missing() -> str | None:
    """Why the Ray executor cannot run here (Ray not installed), else None."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return ("--executor ray needs Ray, which is not installed: "
                "pip install 'ce[ray]'")
    return None


# -- a trial run away from the run directory (a Ray worker) --------------------------

async def run_in_scratch(trial: Trial, params: WorkerParams, work_root: str) -> TrialResult:
    """Run the trial with a scratch run directory of its own under `work_root` and hand
    back its files; the scratch is removed however the trial ends. `work_root`'s parent
    holds the roots of the other workers of this node: ce's writes, like the run's."""
    scratch = tempfile.mkdtemp(prefix="run-", dir=work_root)
    try:
        scratch_run = os.path.join(scratch, "run")
        os.makedirs(os.path.join(scratch_run, "objects"))
        ctx = attrs.evolve(
            make_context(scratch_run, work_root, params, (*params.hidden, params.run_dir)),
            writes=(params.run_dir, os.path.dirname(params.run_dir),
                    os.path.dirname(work_root)))  # every worker's root on this node
        try:
            record = await execute_trial(trial, ctx)
        except TrialLost as exc:
            return TrialResult(trial.trial_id, lost_record(trial, str(exc)), lost=True)
        return await asyncio.to_thread(_collect_files, trial, record, scratch_run,
                                       params.run_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _collect_files(trial: Trial, record: dict[str, Any], scratch_run: str,
                   run_dir: str) -> TrialResult:
    tdir = trial_dir_of(scratch_run, trial)
    files = {}
    for name in TRIAL_FILES:
        path = os.path.join(tdir, name)
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                files[name] = fh.read()
    shared = {}
    for top in SHARED_DIRS:
        base = os.path.join(scratch_run, top)
        for root, _dirs, names in os.walk(base):
            for name in names:
                rel = os.path.relpath(os.path.join(root, name), scratch_run)
                if ".tmp" in name or os.path.exists(os.path.join(run_dir, rel)):
                    continue  # the run has it already (when this machine sees the run)
                with open(os.path.join(root, name), "rb") as fh:
                    shared[rel] = fh.read()
    return TrialResult(trial.trial_id, record, files, shared)


def write_result(run_dir: str, trial: Trial, result: TrialResult) -> None:
    """The driver's half: a remote trial's files into the run directory. Run-level files
    first (those the run has are skipped: same name, same bytes), then the trial's,
    task.json last, each atomically; files of an earlier attempt are removed first."""
    for rel, data in result.shared.items():
        parts = rel.split(os.sep)
        if parts[0] not in SHARED_DIRS or ".." in parts or os.path.isabs(rel):
            raise ValueError(f"a worker sent a file outside objects/ and judges/: {rel!r}")
        path = os.path.join(run_dir, rel)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_bytes_atomic(path, data)
    tdir = trial_dir_of(run_dir, trial)
    os.makedirs(tdir, exist_ok=True)
    for name in reversed(TRIAL_FILES):  # task.json first: the trial is unfinished
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(tdir, name))
    for name in TRIAL_FILES:
        if name in result.files:
            write_bytes_atomic(os.path.join(tdir, name), result.files[name])
