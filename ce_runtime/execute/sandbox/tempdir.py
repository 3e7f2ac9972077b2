"""`driver: tempdir`: the workspace is a temporary directory and commands run as you.

It isolates nothing. The agent can read and write every file you can, reach the
network and your loopback services, signal your processes (ce included) and read
/proc. What it does do: commands get a private HOME and TMPDIR and an environment
without your variables (no key of yours reaches the agent through its environment);
the task directory and the reference are never named to the agent (TASK_DIR and
REFERENCE_DIR exist for grader commands only); everything the trial started, daemons
that `setsid` included, is killed at the end (ce's init is their child subreaper);
`sandbox.limits` are enforced through control groups where the host lets ce make them;
secrets are redacted from what ce writes; files the grader trusts are checked before
grading. Use `bwrap` (or `docker`) for an agent you do not trust: every real agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import weakref

from ce_runtime.execute.sandbox.base import GRADER, SandboxSpec, host_env_passthrough
from ce_runtime.execute.sandbox.supervised import (
    LAUNCH_ENV,
    SHIM,
    ShimClient,
    SupervisedSandbox,
    _python,
    launch_init,
)

WARM = 2  # inits kept started ahead, per event loop


class _WarmInits:
    """Inits started ahead of the trials that will use them: a tempdir trial without
    limits adopts one (its 30 ms start-up is paid while the previous trial runs)."""

    def __init__(self) -> None:
        self.ready: list[tuple[asyncio.subprocess.Process, str]] = []
        self.filling: set[asyncio.Task] = set()

    def take(self) -> tuple[asyncio.subprocess.Process, str] | None:
        while self.ready:
            init, ctl_dir = self.ready.pop()
            if init.returncode is None:
                return init, ctl_dir
            shutil.rmtree(ctl_dir, ignore_errors=True)
        return None

    def refill(self, where: str) -> None:
        """Start inits ahead, their control sockets under `where` (the run's scratch)."""
        while len(self.ready) + len(self.filling) < WARM:
            task = asyncio.ensure_future(self._one(where))
            self.filling.add(task)
            task.add_done_callback(self.filling.discard)

    async def _one(self, where: str) -> None:
        ctl_dir = tempfile.mkdtemp(prefix="ce-init-", dir=where)
        try:
            init = await launch_init([_python(), "-I", "-S", SHIM,
                                      os.path.join(ctl_dir, "ctl.sock")], dict(LAUNCH_ENV),
                                     "tempdir")
        except Exception:
            shutil.rmtree(ctl_dir, ignore_errors=True)
            return
        self.ready.append((init, ctl_dir))

    async def close(self) -> None:
        filling = list(self.filling)
        for task in filling:
            task.cancel()
        # an init that became ready as it was cancelled lands in `ready`: wait for them all
        await asyncio.gather(*filling, return_exceptions=True)
        for init, ctl_dir in self.ready:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(init.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await init.wait()
            shutil.rmtree(ctl_dir, ignore_errors=True)
        self.ready.clear()


_WARM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def warm_inits() -> _WarmInits:
    loop = asyncio.get_running_loop()
    if loop not in _WARM:
        _WARM[loop] = _WarmInits()
    return _WARM[loop]


async def close_warm_inits() -> None:
    """End the inits started ahead (the run is over)."""
    with contextlib.suppress(RuntimeError):
        pool = _WARM.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()


class TempdirSandbox(SupervisedSandbox):
    driver = "tempdir"

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        self.home = os.path.join(spec.scratch, "home")
        self.tmp = os.path.join(spec.scratch, "tmp")
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)

    async def start(self) -> None:
        lim = self.spec.limits
        if any(v is not None for v in (lim.memory_mb, lim.pids, lim.cpus)) \
                or not getattr(self.spec, "warm", False):
            return await super().start()
        pool = warm_inits()
        warm = pool.take()
        pool.refill(os.path.dirname(os.path.abspath(self.spec.scratch)))
        if warm is None:
            return await super().start()
        self.init, ctl_dir = warm
        shutil.rmtree(self.ctl_dir, ignore_errors=True)
        self.ctl_dir = ctl_dir
        self._adopted = ctl_dir
        self.client = ShimClient(os.path.join(ctl_dir, "ctl.sock"))
        self.enforcement = self._enforcement()
        self._drain = asyncio.ensure_future(self._drain_stderr())

    async def teardown(self) -> list[str]:
        try:
            return await super().teardown()
        finally:
            if getattr(self, "_adopted", None):
                shutil.rmtree(self._adopted, ignore_errors=True)

    def launch_argv(self, python: str) -> list[str]:
        return [python, "-I", "-S", SHIM, self.inner_ctl()]

    def isolation(self) -> str:
        return ("none: the agent runs as you, with your files, network and processes "
                "(private HOME and TMPDIR, a clean environment, every process reaped)")

    def network_note(self) -> str:
        return "host (tempdir cannot restrict the network)"

    def base_env(self, view: str) -> dict[str, str]:
        env = host_env_passthrough(self.spec.env_passthrough)
        env.update({"HOME": self.home, "TMPDIR": self.tmp, "PATH": os.environ.get(
            "PATH", "/usr/local/bin:/usr/bin:/bin"), "SHELL": "/bin/sh"})
        for name in ("USER", "LOGNAME"):
            if name in os.environ:
                env[name] = os.environ[name]
        if view == GRADER:
            env["TASK_DIR"] = self.spec.task_dir
            if self.spec.reference:
                first = self.spec.reference[0]
                env["REFERENCE_DIR"] = first if os.path.isdir(first) else \
                    os.path.dirname(first)
        return env
