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
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import weakref
from typing import Any

from ce_runtime.execute.sandbox.base import (
    GRADER,
    SandboxError,
    SandboxSpec,
    host_env_passthrough,
)
from ce_runtime.execute.sandbox.supervised import (
    LAUNCH_ENV,
    READY_TIMEOUT_S,
    SHIM,
    ShimClient,
    SupervisedSandbox,
    _python,
    launch_init,
)

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote.py")


class ForkedInit:
    """A trial's init forked by the zygote: what the sandbox uses of an
    asyncio.subprocess.Process (pid, returncode, wait, stderr). The zygote reaps it and
    says how it exited on the connection that asked for it."""

    def __init__(self, pid: int, replies: asyncio.StreamReader,
                 conn: asyncio.StreamWriter, stderr: asyncio.StreamReader,
                 stderr_transport: asyncio.BaseTransport):
        self.pid = pid
        self.returncode: int | None = None
        self.stderr = stderr
        self._conn = conn
        self._stderr_transport = stderr_transport
        self._exited = asyncio.ensure_future(self._watch(replies))

    async def _watch(self, replies: asyncio.StreamReader) -> None:
        try:
            line = await replies.readline()
            try:
                code = int(json.loads(line).get("exit", -9)) if line else -9
            except ValueError:
                code = -9
            self.returncode = code
        finally:
            self._conn.close()

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        assert self.returncode is not None
        return self.returncode


class _Zygote:
    """The run's zygote (zygote.py): started once per event loop, it forks each
    tempdir trial's init (a fork instead of an interpreter start per trial)."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.ctl_dir: str | None = None
        self.starting: asyncio.Future | None = None
        self.drain: asyncio.Task | None = None

    async def _start(self, where: str) -> None:
        early = _take_early()
        if early is not None:
            with contextlib.suppress(SandboxError):
                self.proc, self.ctl_dir = await early.adopt(), early.ctl_dir
                self.drain = asyncio.ensure_future(self.proc.stderr.read())
                return
        ctl_dir = tempfile.mkdtemp(prefix="ce-zygote-", dir=where)
        try:
            self.proc = await launch_init(
                [_python(), "-I", "-S", ZYGOTE, os.path.join(ctl_dir, "ctl.sock")],
                dict(LAUNCH_ENV), "tempdir")
        except BaseException:
            shutil.rmtree(ctl_dir, ignore_errors=True)
            raise
        self.ctl_dir = ctl_dir
        self.drain = asyncio.ensure_future(self.proc.stderr.read())

    def prestart(self, where: str) -> None:
        """Start it now, without waiting (its start-up overlaps the run's first steps)."""
        if (self.proc is None or self.proc.returncode is not None) and \
                (self.starting is None or self.starting.done()):
            self.starting = asyncio.ensure_future(self._start(where))

    def request(self, ctl_path: str) -> tuple[int, socket.socket] | None:
        """Ask for an init listening on `ctl_path` now, if the zygote is up (its fork
        proceeds while the caller does something else; `fork` takes the answer). The
        stderr pipe's read end and the connection; None when the zygote is not up."""
        if self.proc is None or self.proc.returncode is not None or self.ctl_dir is None:
            return None
        read_end, write_end = os.pipe()
        try:
            client = ShimClient(os.path.join(self.ctl_dir, "ctl.sock"))
            try:
                sock = client._connect({"op": "init", "ctl": ctl_path}, [write_end])
            finally:
                client.close()
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        return read_end, sock

    async def fork(self, ctl_path: str, where: str,
                   requested: tuple[int, socket.socket] | None = None) -> ForkedInit:
        if requested is None:
            if self.proc is None or self.proc.returncode is not None:
                if self.starting is None or self.starting.done():
                    self.starting = asyncio.ensure_future(self._start(where))
                await asyncio.shield(self.starting)
            requested = self.request(ctl_path)
            assert requested is not None
        read_end, sock = requested
        loop = asyncio.get_running_loop()
        stderr = asyncio.StreamReader()
        try:
            pipe = os.fdopen(read_end, "rb", 0)
        except BaseException:
            sock.close()
            os.close(read_end)
            raise
        try:  # the file owns read_end now; so does the transport once made
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stderr), pipe)
        except BaseException:
            # cancelled (Ctrl-C, SIGTERM) while the transport started: it closes `pipe`
            # itself, later; closing the bare fd here too closed it twice (EBADF in a
            # callback, or a descriptor opened meanwhile closed under its owner)
            sock.close()
            pipe.close()
            raise
        replies, conn = await asyncio.open_unix_connection(sock=sock)
        line = await asyncio.wait_for(replies.readline(), 20.0)
        reply = json.loads(line) if line else {}
        if "pid" not in reply:
            conn.close()
            rest = b""
            with contextlib.suppress(Exception):
                rest = await asyncio.wait_for(stderr.read(), 2.0)
            transport.close()
            raise SandboxError("the tempdir sandbox did not start: " + (
                rest.decode("utf-8", "replace").strip() or str(reply) or "no answer")[-2000:])
        return ForkedInit(int(reply["pid"]), replies, conn, stderr, transport)

    async def close(self) -> None:
        if self.starting is not None and not self.starting.done():
            self.starting.cancel()
            with contextlib.suppress(BaseException):
                await self.starting
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await self.proc.wait()
            if self.drain is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.drain, 5.0)
        if self.ctl_dir is not None:
            shutil.rmtree(self.ctl_dir, ignore_errors=True)


class _EarlyZygote:
    """The run's zygote started before the run's event loop exists (`start_zygote_early`):
    a plain child, adopted by the loop's `_Zygote` when the first trial needs it."""

    def __init__(self) -> None:
        # named as a run's scratch (`ce-run-<pid>-`): swept as a dead run's if ce is killed
        self.ctl_dir = tempfile.mkdtemp(prefix=f"ce-run-{os.getpid()}-")
        ctl = os.path.join(self.ctl_dir, "ctl.sock")
        try:
            self.popen = _booted(ctl) or subprocess.Popen(
                [_python(), "-I", "-S", ZYGOTE, ctl],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=dict(LAUNCH_ENV), start_new_session=True)
        except BaseException:
            shutil.rmtree(self.ctl_dir, ignore_errors=True)
            raise

    async def adopt(self) -> _AdoptedProcess:
        """The zygote as the loop sees an init it launched, once it said it is ready;
        SandboxError (the zygote discarded) when it did not start."""
        loop = asyncio.get_running_loop()
        transports = []
        try:
            readers = []
            for pipe in (self.popen.stdout, self.popen.stderr):
                reader = asyncio.StreamReader()
                transport, _ = await loop.connect_read_pipe(
                    lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)
                transports.append(transport)
                readers.append(reader)
            line = await asyncio.wait_for(readers[0].readline(), READY_TIMEOUT_S)
        except BaseException as exc:
            for transport in transports:
                transport.close()
            self.discard()
            if isinstance(exc, Exception):
                raise SandboxError(f"the early zygote did not start: {exc}") from exc
            raise
        if line.strip() != b"ready":
            for transport in transports:
                transport.close()
            self.discard()
            raise SandboxError("the early zygote did not start")
        return _AdoptedProcess(self.popen, readers[1], transports)

    def discard(self) -> None:
        """Kill it (if it runs) and remove its directory: it was not adopted."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()
        for pipe in (self.popen.stdout, self.popen.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
        shutil.rmtree(self.ctl_dir, ignore_errors=True)


def _booted(ctl: str) -> subprocess.Popen | None:
    """The zygote the `ce` script started ahead (ce_runtime/zygote_process.py), told its
    socket's path now; None when there is none, or it is gone."""
    from ce_runtime import zygote_process

    popen = zygote_process.claim()
    if popen is None:
        return None
    try:
        popen.stdin.write(ctl.encode() + b"\n")
        popen.stdin.close()
    except (OSError, ValueError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        for pipe in (popen.stdout, popen.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
        return None
    return popen


class _AdoptedProcess:
    """What `_Zygote` uses of an asyncio Process, for the early zygote's Popen."""

    def __init__(self, popen: subprocess.Popen, stderr: asyncio.StreamReader,
                 transports: list) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stderr = stderr
        self.transports = transports

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    async def wait(self) -> int:
        try:
            return await asyncio.to_thread(self.popen.wait)
        finally:
            for transport in self.transports:
                transport.close()


_EARLY: list[_EarlyZygote] = []  # started, not yet adopted (at most one)


def start_zygote_early() -> None:
    """Start the run's zygote now, before the event loop: its interpreter's start-up
    (~30 ms of CPU) then overlaps ce's own imports and set-up instead of delaying the
    first trial. The loop's zygote adopts it; one never adopted is ended at exit."""
    if _EARLY:
        return
    try:
        _EARLY.append(_EarlyZygote())
    except OSError:
        return  # the run starts its zygote as usual
    import atexit

    atexit.register(discard_early_zygote)


def _take_early() -> _EarlyZygote | None:
    return _EARLY.pop() if _EARLY else None


def discard_early_zygote() -> None:
    """End the early zygote, if one was started and not adopted (also run at exit)."""
    while _EARLY:
        _EARLY.pop().discard()


def uses_zygote(box: Any) -> bool:
    """A plan's sandbox (`plan.sandbox`) whose trials get their init from the zygote: a
    tempdir without limits (limits need the init started inside the trial's cgroups)."""
    lim = box.limits
    return box.driver == "tempdir" and all(
        v is None for v in (lim.max_memory_mb, lim.max_pids, lim.max_cpus))


_ZYGOTES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def zygote() -> _Zygote:
    loop = asyncio.get_running_loop()
    if loop not in _ZYGOTES:
        _ZYGOTES[loop] = _Zygote()
    return _ZYGOTES[loop]


async def close_warm_inits() -> None:
    """End the run's zygote (the run is over; the trials' inits are gone already)."""
    with contextlib.suppress(RuntimeError):
        found = _ZYGOTES.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.close()


class TempdirSandbox(SupervisedSandbox):
    driver = "tempdir"
    # its set-up is the host's (workspace.py) and needs nothing of the init: a trial runs
    # it while the init starts
    prepare_overlaps_start = True

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        self.home = os.path.join(spec.scratch, "home")
        self.tmp = os.path.join(spec.scratch, "tmp")
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)
        self._requested: tuple[int, socket.socket] | None = None

    def _forked(self) -> bool:
        lim = self.spec.limits
        return getattr(self.spec, "warm", False) and all(
            v is None for v in (lim.memory_mb, lim.pids, lim.cpus))

    def begin_start(self) -> None:
        """Ask the run's zygote for this trial's init now: it forks (or hands over its
        spare) while the trial sets up its workspace; `start` then takes the answer. A
        problem here is left for `start` to meet and report."""
        if self._forked() and self._requested is None:
            with contextlib.suppress(SandboxError, OSError, RuntimeError):
                self._requested = zygote().request(self.inner_ctl())

    async def start(self) -> None:
        if not self._forked():
            return await super().start()
        where = os.path.dirname(os.path.abspath(self.spec.scratch))
        requested, self._requested = self._requested, None
        self.init = await zygote().fork(self.inner_ctl(), where, requested)
        self.enforcement = self._enforcement()
        self._drain = asyncio.ensure_future(self._drain_stderr())

    async def teardown(self) -> list[str]:
        if self._requested is not None and self.init is None:  # asked for, never taken
            requested, self._requested = self._requested, None
            with contextlib.suppress(Exception):
                where = os.path.dirname(os.path.abspath(self.spec.scratch))
                self.init = await zygote().fork(self.inner_ctl(), where, requested)
                self._drain = asyncio.ensure_future(self._drain_stderr())
        return await super().teardown()

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
