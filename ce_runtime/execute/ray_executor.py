"""The Ray executor: every trial a Ray task (`pip install 'ce[ray]'`; Ray is imported
only here, and only when `--executor ray` runs).

The driver (`ce run`) starts a local Ray instance for the run, or joins a cluster
(`--ray-address auto|HOST:PORT`). It keeps at most `jobs` trials in flight, each a task
of one CPU. A worker runs its trial with a scratch run directory of its own
(`executor.run_in_scratch`) and returns a `TrialResult`; the driver alone writes the run
directory (`executor.write_result`), keyed by trial id, and ignores a second result for a
trial it already wrote.

Assumptions: the workers see the task directories (and the venv with ce) at the same
paths as the driver: one machine, or a shared file system. They run with their node's
environment: agents' credentials must be there (a Ray instance ce starts inherits ce's).

A worker that dies mid-trial (killed, out of memory, its node lost) is retried by Ray:
the trial's body runs again from the start, with a fresh scratch, and one result comes
back. What the dead worker left: its sandbox's init hears its death (PR_SET_PDEATHSIG)
and kills every process of the trial; its scratch (<tmp>/ce-ray-<uid>/<worker pid>-*)
is swept by the next worker started on that node and by the driver at the end of the
run (on its own machine), as `clean_stale_scratch` sweeps a dead local run's.

Cancelled (Ctrl-C, SIGTERM): the tasks in flight are cancelled (a KeyboardInterrupt in
the worker: the trial tears down, processes killed, scratch removed), waited for up to
CANCEL_GRACE_S, then force-cancelled (their workers killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import tempfile
import threading
from typing import Any

from ce_lang.api import Trial
from ce_runtime.execute.executor import (
    ExecutorUnavailable,
    OnDone,
    OnStart,
    TrialResult,
    WorkerParams,
    lost_record,
    run_in_scratch,
    write_result,
)
from ce_runtime.store.record import TrialRecord, as_record

CANCEL_GRACE_S = 30.0


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None):
        self.address = address

    async def execute(self, trials: list[Trial], run_dir: str, options: Any,
                      on_start: OnStart = None, on_done: OnDone = None
                      ) -> list[TrialRecord]:
        ray = _import_ray()

        from ce_runtime.execute.suite import clean_stale_scratch, hidden_paths

        clean_stale_scratch()
        jobs = max(1, options.jobs)
        started_here = not ray.is_initialized()
        if started_here:
            try:
                life = threading.Event()  # set once Ray is shut down
                await _in_daemon_thread(life, _init, ray, self.address, jobs)
            except Exception as exc:  # no cluster there, auth refused, no resources ...
                where = f"join the Ray cluster at {self.address}" if self.address \
                    else "start a local Ray instance"
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ExecutorUnavailable(f"cannot {where}: {first}") from None
        job = ray.get_runtime_context().get_job_id()
        params = WorkerParams(run_dir, options.uv_cache, options.agent,
                              hidden_paths(trials, options), options.scripted_model)
        remote = ray.remote(num_cpus=1)(run_trial)
        pending = list(reversed(trials))
        inflight: dict[asyncio.Future, tuple[Trial, Any]] = {}
        written: set[str] = set()
        records: list[TrialRecord] = []
        try:
            while pending or inflight:
                while pending and len(inflight) < jobs:
                    trial = pending.pop()
                    if on_start:
                        on_start(trial)
                    ref = remote.remote(trial, params)
                    inflight[asyncio.wrap_future(ref.future())] = (trial, ref)
                done, _ = await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    trial, _ref = inflight.pop(fut)
                    record = await self._take(ray, fut, trial, run_dir, written)
                    if record is None:
                        continue
                    records.append(record)
                    if on_done:
                        on_done(trial, record)
        except BaseException:
            for fut in inflight:  # their results (cancelled tasks) are not wanted
                fut.add_done_callback(_ignore_result)
            await asyncio.shield(asyncio.to_thread(_cancel_all, ray, inflight))
            raise
        finally:
            if started_here:  # the job ends: Ray ends its workers
                await asyncio.shield(asyncio.to_thread(ray.shutdown))
                life.set()
            # what this run's workers on this machine left (killed, or ended just now)
            await asyncio.shield(asyncio.to_thread(sweep_worker_scratch, job if started_here
                                                   else None))
        return records

    async def _take(self, ray, fut: asyncio.Future, trial: Trial, run_dir: str,
                    written: set[str]) -> TrialRecord | None:
        """A finished task's record, its files written first; None for a trial already
        written (a second result)."""
        try:
            result: TrialResult = fut.result()
        except ray.exceptions.RayTaskError as exc:  # the trial's own failure: as local
            cause = exc.as_instanceof_cause()
            raise cause from None
        except ray.exceptions.RayError as exc:  # the worker or node died, retries spent
            return lost_record(trial, f"the Ray task died and was not retried: "
                                      f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        if result.trial_id in written:
            return None
        if not result.lost:
            await asyncio.to_thread(write_result, run_dir, trial, result)
        written.add(result.trial_id)
        return as_record(result.record)


def _import_ray():
    """Ray, without its failure signal handler in this process (read when Ray is first
    imported): it would take SIGTERM (a stack dump, then an abort at exit), where ce
    stops as on Ctrl-C, quietly."""
    had = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER" in os.environ
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    finally:
        if not had:  # the workers keep theirs
            os.environ.pop("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None)
    return ray


async def _in_daemon_thread(life: threading.Event, fn, *args) -> Any:
    """`fn(*args)` (ray.init) in a daemon thread that lives on until `life` is set (Ray is
    shut down): the processes a local Ray instance starts die with the thread that
    started them (PR_SET_PDEATHSIG is per thread). A Ctrl-C while it blocks (ray.init
    waiting for a cluster) ends the run at once instead of waiting for it."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def settle(value: Any, exc: BaseException | None) -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    def call() -> None:
        value, error = None, None
        try:
            value = fn(*args)
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: the run was stopped
            loop.call_soon_threadsafe(settle, value, error)
        if error is None:
            life.wait()

    threading.Thread(target=call, name="ce-ray-init", daemon=True).start()
    return await fut


def _reachable(address: str) -> None:
    """HOST:PORT must accept a connection (ray.init would wait minutes for none)."""
    import socket

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return  # `auto`, ray://..., let Ray say
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or exc})") \
            from None


def _init(ray, address: str | None, jobs: int) -> None:
    # initialised off the main thread: Ray leaves ce's SIGTERM handler alone (and would
    # warn about that, as about token auth, which is on by default: errors only)
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "logging_level": logging.ERROR}
    if address is None:  # a new local instance for this run (never one found running),
        kwargs["address"] = "local"  # as wide as -j
        kwargs["num_cpus"] = max(jobs, os.cpu_count() or 1)
        if "RAY_TMPDIR" not in os.environ and len(tempfile.gettempdir()) > 40:
            # Ray's sockets live in its temp dir (TMPDIR/ray) and a unix socket's path
            # has at most 107 bytes: a deep TMPDIR (a test's) would fail the start
            kwargs["_temp_dir"] = "/tmp/ray"
    else:
        _reachable(address)
        kwargs["address"] = address
    # ce's own settings (CE_JUDGE_URL of --judge-replies ...) reach the workers of a
    # cluster started without them; credentials are the nodes' own
    from ce_runtime.store.redact import looks_secret

    ce_vars = {k: v for k, v in os.environ.items()
               if k.startswith("CE_") and not looks_secret(k)}
    if ce_vars:
        kwargs["runtime_env"] = {"env_vars": ce_vars}
    ray.init(**kwargs)


def _ignore_result(fut: asyncio.Future) -> None:
    if not fut.cancelled():
        fut.exception()


def _cancel_all(ray, inflight: dict[asyncio.Future, tuple[Trial, Any]]) -> None:
    """Cancel the tasks in flight; wait for their teardown, then kill what still runs."""
    refs = [ref for _trial, ref in inflight.values()]
    if not refs:
        return
    for ref in refs:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=False)
    _ready, left = ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
    for ref in left:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)


# -- the worker's side ------------------------------------------------------------------

_WORKER: dict[str, Any] = {}
_WORKER_LOCK = threading.Lock()


def worker_scratch_base() -> str:
    """Where this node's workers keep their scratch: one directory per worker process,
    <pid>-*, inside (the trials' integrity checks skip the whole of it)."""
    return os.path.join(tempfile.gettempdir(), f"ce-ray-{os.getuid()}")


def sweep_worker_scratch(job: str | None = None, wait_s: float = 10.0) -> None:
    """Remove the scratch of this node's dead workers (a killed worker cannot). `job`:
    also wait (up to `wait_s`) for the workers of that Ray job to end, then sweep theirs
    (the driver, once its job is over)."""
    import shutil
    import time

    base = worker_scratch_base()
    try:
        names = os.listdir(base)
    except OSError:
        return
    deadline = time.monotonic() + wait_s
    for name in names:
        m = re.fullmatch(r"(\d+)-\w+", name)
        if m is None:
            continue
        root = os.path.join(base, name)
        ours = False
        if job is not None:
            with contextlib.suppress(OSError), open(os.path.join(root, "job")) as fh:
                ours = fh.read() == job
        while True:
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                shutil.rmtree(root, ignore_errors=True)
                break
            except PermissionError:
                break
            if not ours or time.monotonic() > deadline:
                break
            time.sleep(0.05)


def _worker_state() -> tuple[asyncio.AbstractEventLoop, str]:
    """This worker process's event loop (a thread of its own, alive as long as the
    process: the sandboxes' inits started from it die with the process, and stay warm
    between trials) and its scratch root (swept once this pid is gone). The first trial
    of a worker sweeps what dead workers of this node left."""
    with _WORKER_LOCK:
        if _WORKER.get("pid") != os.getpid():
            sweep_worker_scratch()
            base = worker_scratch_base()
            os.makedirs(base, mode=0o700, exist_ok=True)
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ce-trials", daemon=True).start()
            root = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base)
            with contextlib.suppress(Exception):  # whose it is: the driver sweeps its own
                import ray

                with open(os.path.join(root, "job"), "w") as fh:
                    fh.write(ray.get_runtime_context().get_job_id())
            _WORKER.update(pid=os.getpid(), loop=loop, root=root)
        return _WORKER["loop"], _WORKER["root"]


def run_trial(trial: Trial, params: WorkerParams) -> TrialResult:
    """A Ray task's body: the trial, start to end, on this worker. Interrupted (the task
    cancelled), the trial is cancelled and torn down before the interruption goes on."""
    loop, root = _worker_state()
    finished = threading.Event()

    async def guarded() -> TrialResult:
        try:
            return await run_in_scratch(trial, params, root)
        finally:
            finished.set()

    fut = asyncio.run_coroutine_threadsafe(guarded(), loop)
    try:
        return fut.result()
    except BaseException:
        fut.cancel()
        finished.wait(CANCEL_GRACE_S)
        raise
