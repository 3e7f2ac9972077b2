"""Drivers whose processes are started by ce's init (`shim.py`): tempdir and bwrap.

The driver launches the init once per trial (bare, or inside bubblewrap), then asks it
over its unix socket to start each command with ce's own descriptors for stdio. What the
driver adds is only how the init is launched and what paths commands see.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from ce_runtime.execute.sandbox.base import (
    AGENT,
    CommandOutput,
    Enforcement,
    ExecResult,
    FileOps,
    SandboxError,
    SandboxSpec,
    agent_path,
    launcher_names,
    shell_argv,
)
from ce_runtime.execute.sandbox.cgroups import TrialCgroup
from ce_runtime.zygote_process import LAUNCH_ENV  # the early zygote's too: one definition

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim.py")
RUN_CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_client.py")
READY_TIMEOUT_S = 20.0
# joins the trial's control groups, then becomes the init (or bwrap)
CGROUP_JOIN = ('IFS=:; for p in $CE_CGROUP_PROCS; do echo $$ > "$p" || exit 125; done; '
               'unset CE_CGROUP_PROCS; exec "$@"')


LAUNCHER = """#!{python} -IS
import importlib.util, json, os, re, sys
spec = importlib.util.spec_from_file_location("ce_run_client", {client!r})
client = importlib.util.module_from_spec(spec)
spec.loader.exec_module(client)
request = json.loads({request})
{names}for name in names:
    request["env"][name] = os.environ[name]
request["argv"] += sys.argv[1:]
sys.exit(client.run_client({ctl!r}, json.dumps(request)))
"""


class ShimClient:
    """Requests to one trial's init (each on its own connection)."""

    def __init__(self, ctl_path: str):
        self.ctl_path = ctl_path
        self._dir_fd: int | None = None

    def short_path(self) -> str:
        """The socket through /proc/self/fd: a unix socket path is limited to 107 bytes
        and a scratch directory may be deeper (the directory's descriptor is kept)."""
        if self._dir_fd is None:
            self._dir_fd = os.open(os.path.dirname(self.ctl_path), os.O_PATH)
        return f"/proc/self/fd/{self._dir_fd}/{os.path.basename(self.ctl_path)}"

    def close(self) -> None:
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def _connect(self, message: dict[str, Any], fds: Sequence[int] = ()) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.short_path())
            payload = json.dumps(message).encode()
            data = struct.pack(">I", len(payload)) + payload
            sent = socket.send_fds(sock, [data], list(fds)) if fds else sock.send(data)
            if sent < len(data):
                sock.sendall(data[sent:])
        except OSError as exc:
            sock.close()
            raise SandboxError(f"the sandbox's init is gone ({exc.strerror or exc})") from exc
        return sock

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        sock = self._connect(message)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        try:
            line = await reader.readline()
        except ConnectionError as exc:  # it died with our request unread
            raise SandboxError(f"the sandbox's init is gone ({exc})") from exc
        finally:
            writer.close()
        if not line:
            raise SandboxError(f"the sandbox's init did not answer {message.get('op')!r}")
        return json.loads(line)

    async def start(self, message: dict[str, Any], fds: Sequence[int]
                    ) -> tuple[int, asyncio.StreamReader, asyncio.StreamWriter]:
        sock = self._connect(message, fds)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        try:
            reply = json.loads(await reader.readline() or b'{"error": "no answer"}')
        except ConnectionError as exc:  # it died with our request unread
            writer.close()
            raise SandboxError(f"the sandbox's init is gone ({exc})") from exc
        except BaseException:  # cancelled: the connection closed kills the command
            writer.close()
            raise
        if "pid" not in reply:
            writer.close()
            raise SandboxError(f"the sandbox could not start {message['argv'][0]}: "
                               f"{reply.get('error')}")
        return int(reply["pid"]), reader, writer


async def launch_init(argv: list[str], env: dict[str, str], driver: str,
                      pass_fds: Sequence[int] = ()) -> asyncio.subprocess.Process:
    """Start ce's init (bare or inside a confinement) and wait until it listens."""
    try:
        init = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
            pass_fds=pass_fds)
    except OSError as exc:
        raise SandboxError(f"cannot start the {driver} sandbox: {exc}") from exc
    try:
        line = await asyncio.wait_for(init.stdout.readline(), READY_TIMEOUT_S)
    except TimeoutError:
        line = b""
    except asyncio.CancelledError:  # the run was interrupted: this init must not outlive it
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(init.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(init.wait(), 10.0)
        raise
    if line.strip() != b"ready":
        rest = b""
        with contextlib.suppress(TimeoutError, Exception):
            rest = await asyncio.wait_for(init.stderr.read(), 2.0)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(init.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(init.wait(), 10.0)
        why = (line + rest).decode("utf-8", "replace").strip() or "no output"
        raise SandboxError(f"the {driver} sandbox did not start: {why[-2000:]}")
    return init


class SupervisedSandbox(FileOps):
    """The part of tempdir and bwrap that does not depend on how the init is launched."""

    driver = "?"

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.workspace = spec.workspace or os.path.join(spec.scratch, "ws")
        self.ctl_dir = os.path.join(spec.scratch, "ctl")
        self.grader_dir = os.path.join(spec.scratch, "grader")
        for d in (self.workspace, self.ctl_dir, self.grader_dir):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.ctl_dir, 0o700)
        self.inner_workspace = self.workspace
        self.client = ShimClient(os.path.join(self.ctl_dir, "ctl.sock"))
        self.cgroup: TrialCgroup | None = None
        self.init: asyncio.subprocess.Process | None = None
        self._init_stderr = bytearray()
        self._mark: int | None = None
        self._in_agent = False
        self._model_servers: list[asyncio.AbstractServer] = []
        self.enforcement = Enforcement(self.driver, "", spec.network)

    # -- what a driver provides ---------------------------------------------------------
    def launch_argv(self, python: str) -> list[str]:
        raise NotImplementedError

    def inner_ctl(self) -> str:
        return os.path.join(self.ctl_dir, "ctl.sock")

    def base_env(self, view: str) -> dict[str, str]:
        raise NotImplementedError

    # -- life cycle ---------------------------------------------------------------------
    async def start(self) -> None:
        limits = self.spec.limits
        wanted = any(v is not None for v in (limits.memory_mb, limits.pids, limits.cpus))
        env = dict(LAUNCH_ENV)
        argv = self.launch_argv(_python())
        if wanted:
            name = f"ce-{os.getpid()}-{self.spec.trial_id.replace('/', '_')[-60:]}-" \
                   f"{os.urandom(3).hex()}"
            self.cgroup = TrialCgroup(name, limits)
            if self.cgroup.procs_files:
                env["CE_CGROUP_PROCS"] = ":".join(self.cgroup.procs_files)
                argv = ["/bin/sh", "-c", CGROUP_JOIN, "sh", *argv]
        self.enforcement = self._enforcement()
        self.init = await launch_init(argv, env, self.driver, getattr(self, "pass_fds", ()))
        self._drain = asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self.init is not None and self.init.stderr is not None
        while chunk := await self.init.stderr.read(4096):
            if len(self._init_stderr) < 65536:
                self._init_stderr.extend(chunk)

    def _enforcement(self) -> Enforcement:
        limits, applied, missing = self.spec.limits, {}, []
        enforced = self.cgroup.enforced if self.cgroup else {}
        for name, value, controller in (("max_memory_mb", limits.memory_mb, "memory"),
                                        ("max_pids", limits.pids, "pids"),
                                        ("max_cpus", limits.cpus, "cpu")):
            if value is None:
                continue
            if controller in enforced:
                applied[name] = enforced[controller]
            elif name == "max_memory_mb":
                applied[name] = "RLIMIT_AS per process (no writable memory cgroup)"
            else:
                problems = "; ".join(self.cgroup.problems) if self.cgroup else ""
                missing.append(f"{name}: no writable {controller} cgroup on this host"
                               + (f" ({problems})" if problems else ""))
        if limits.disk_mb is not None:
            missing.append(f"max_disk_mb: not enforced by the {self.driver} driver")
        return Enforcement(self.driver, self.isolation(), self.network_note(), applied,
                           tuple(missing))

    def isolation(self) -> str:
        raise NotImplementedError

    def network_note(self) -> str:
        raise NotImplementedError

    async def prepare(self, plan: Any, cancel: threading.Event | None = None,
                      sources: bool = True):
        """Template sources, venv and node packages, made on the host (trusted inputs of
        the task; a venv made here works inside, the host being visible read-only).
        `sources=False`: the environments only (re-grading restores the files)."""
        from ce_runtime.execute.sandbox.workspace import prepare_workspace

        return await asyncio.to_thread(
            prepare_workspace, plan, self.spec.task_dir, self.workspace, self.spec.uv_cache,
            cancel, sources,
            # a run's trials keep the run's venvs in its scratch root (gone with it)
            os.path.dirname(os.path.abspath(self.spec.scratch)) if self.spec.warm else None)

    # -- environment --------------------------------------------------------------------
    def env(self, view: str = AGENT) -> dict[str, str]:
        env = self.base_env(view)
        ws = self.inner_workspace
        venv = os.path.join(ws, ".venv")
        env["PATH"] = agent_path(self.spec, ws, os.pathsep.join(
            [os.path.join(venv, "bin"), os.path.join(ws, "node_modules", ".bin"),
             env.get("PATH", "/usr/bin:/bin")]), view)
        if os.path.isdir(os.path.join(self.workspace, ".venv")):
            env["VIRTUAL_ENV"] = venv
        env.update(self.spec.env)
        return env

    # -- commands -----------------------------------------------------------------------
    def _rlimits(self) -> dict[str, int]:
        mem = self.spec.limits.memory_mb
        if mem is not None and not (self.cgroup and "memory" in self.cgroup.enforced):
            return {"AS": int(mem) * 1024 * 1024}
        return {}

    async def exec(self, argv: Sequence[str] | str, *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   max_output: int | None = None, stdin: bytes | None = None,
                   view: str = AGENT, binary: bool = False) -> ExecResult:
        started = time.monotonic()
        argv = shell_argv(argv)
        with _stdin_file(stdin) as inp, CommandOutput(max_output) as output:
            message = {"op": "exec", "argv": argv, "cwd": cwd or self.inner_workspace,
                       "env": env if env is not None else self.env(view),
                       "rlimits": self._rlimits()}
            try:
                pid, reader, writer = await self.client.start(
                    message, [inp.fileno(), *output.write_ends])
            finally:  # the init has its copies (sent with the request)
                output.release_write_ends()
            timed_out = False
            try:
                line = await asyncio.wait_for(reader.readline(), timeout)
            except TimeoutError:
                timed_out = True
                line = await self._kill_and_wait(reader, writer)
            except ConnectionError as exc:  # the init died under the command
                raise SandboxError(f"the sandbox's init is gone ({exc})") from exc
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._kill_and_wait(reader, writer))
                raise
            finally:
                writer.close()
            code = json.loads(line).get("exit", -1) if line else -1
            output.collect()  # what is in the pipes: a daemon it left may hold them open
            stdout, stderr = output.result(binary)
        return ExecResult(-1 if timed_out else int(code), stdout, stderr, timed_out,
                          (time.monotonic() - started) * 1000, pid)

    @staticmethod
    async def _kill_and_wait(reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> bytes:
        payload = json.dumps({"op": "kill"}).encode()
        writer.write(struct.pack(">I", len(payload)) + payload)
        with contextlib.suppress(Exception):
            await writer.drain()
        try:
            return await asyncio.wait_for(reader.readline(), 10.0)
        except TimeoutError:
            return b""

    async def spawn(self, argv: Sequence[str], *, cwd: str | None = None,
                    env: dict[str, str] | None = None, view: str = AGENT,
                    secrets: dict[str, str] | None = None) -> asyncio.subprocess.Process:
        """A process with pipes for stdio: a small host-side client of the init passes
        its own descriptors in, so killing it (or closing its pipes) ends the process.
        `secrets` reach the process through that client's environment, never its
        command line (which every user of the host can read)."""
        request = {"op": "exec", "argv": list(argv), "cwd": cwd or self.inner_workspace,
                   "env": env if env is not None else self.env(view),
                   "rlimits": self._rlimits(), "forward": sorted(secrets or {})}
        return await asyncio.create_subprocess_exec(
            _python(), "-I", "-S", RUN_CLIENT, self.client.ctl_path, json.dumps(request),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={**LAUNCH_ENV, **(secrets or {})},
            start_new_session=True)  # only ce stops it (see run_client)

    def launcher(self, argv: Sequence[str], env: dict[str, str], forward: Sequence[str] = (),
                 cwd: str | None = None) -> str:
        """A host executable that runs `argv + its own arguments` inside the sandbox with
        its own stdio, for libraries that spawn their process themselves (an agent SDK
        given it as the CLI's path). The command gets `env`, plus the variables named in
        `forward` (and the SDK's own CLAUDE_CODE_* / CLAUDE_AGENT_SDK* ones that do not
        look like secrets) read from the launcher's environment when it runs: values a
        caller hands over at spawn time never sit in a file."""
        path = os.path.join(self.ctl_dir, f"launch-{os.urandom(4).hex()}")
        request = {"op": "exec", "argv": list(argv), "cwd": cwd or self.inner_workspace,
                   "env": env, "rlimits": self._rlimits()}
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(LAUNCHER.format(python=_python(), client=RUN_CLIENT,
                                     ctl=self.client.ctl_path,
                                     request=json.dumps(json.dumps(request)),
                                     names=launcher_names(forward)))
        os.chmod(path, 0o700)
        return path

    def program(self, host_path: str) -> str:
        """A host executable as the sandbox's commands run it: the host's own (the
        sandbox sees the host's file system, read-only under bwrap)."""
        return host_path

    def share(self, host_path: str) -> str:
        """A copy of a host file or directory the agent may read (plugins): its path as
        the sandbox's commands see it."""
        shared = os.path.join(self.ctl_dir, "shared")
        os.makedirs(shared, exist_ok=True)
        dest = os.path.join(shared, f"{len(os.listdir(shared))}-{os.path.basename(host_path)}")
        if os.path.isdir(host_path):
            shutil.copytree(host_path, dest, symlinks=True)
        else:
            shutil.copy2(host_path, dest)
        return self.inner_path(dest)

    def inner_path(self, host_path: str) -> str:
        """A path under the trial's control directory as commands see it."""
        return host_path

    # -- phases -------------------------------------------------------------------------
    async def agent_starts(self, trusted: bool = False) -> None:
        if not trusted:  # the task directory and the reference: unreachable
            os.chmod(self.grader_dir, 0)
        self._mark = int((await self.client.request({"op": "mark"}))["mark"])
        self._in_agent = True

    async def agent_ended(self) -> list[str]:
        """Kill what the agent left running; open the grader's inputs again."""
        killed: list[str] = []
        if self._mark is not None:
            reply = await self.client.request({"op": "kill_since"})
            killed = [f"{name} (pid {pid})" for pid, name in reply.get("killed", [])]
        self._in_agent = False
        os.chmod(self.grader_dir, 0o755)
        return killed

    async def teardown(self) -> list[str]:
        killed: list[str] = []
        for server in self._model_servers:
            server.close()
        if self.init is not None and self.init.returncode is None:
            with contextlib.suppress(SandboxError, OSError, ValueError):
                reply = await asyncio.wait_for(self.client.request({"op": "exit"}), 10.0)
                killed = [f"{name} (pid {pid})" for pid, name in reply.get("killed", [])]
        await self._stop_init()
        self.client.close()
        if self.cgroup is not None:
            stragglers = self.cgroup.kill_all()
            if stragglers:
                killed.append(f"{stragglers} process(es) found in the trial's cgroup")
            self.cgroup.remove()
        with contextlib.suppress(OSError):
            os.chmod(self.grader_dir, 0o755)
        return killed

    async def _stop_init(self) -> None:
        init = self.init
        if init is None:
            return
        if init.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(init.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(init.wait(), 10.0)
        drain = getattr(self, "_drain", None)
        if drain is not None:  # the init's stderr ends with it: nothing left pending
            with contextlib.suppress(Exception):
                await asyncio.wait_for(drain, 5.0)

    def oom_killed(self) -> bool:
        return bool(self.cgroup and self.cgroup.oom_killed())

    # -- the model endpoint -------------------------------------------------------------
    async def route_model(self, host: str, port: int) -> str:
        """The base URL at which the sandbox's commands reach a model server listening on
        the host at host:port (agents call this before they start)."""
        return f"http://{host}:{port}"

    async def _unix_to_tcp(self, path: str, host: str, port: int) -> None:
        from ce_runtime.execute.sandbox.model_route import serve_unix_to_tcp

        self._model_servers.append(await serve_unix_to_tcp(path, host, port))


@contextlib.contextmanager
def _stdin_file(data: bytes | None):
    if data is None:
        with open(os.devnull, "rb") as fh:
            yield fh
        return
    with tempfile.TemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        fh.seek(0)
        yield fh


def _python() -> str:
    """The interpreter that runs the init: the real file, not a venv's link to it."""
    return os.path.realpath(sys.executable)


def copy_shim(ctl_dir: str) -> str:
    dest = os.path.join(ctl_dir, "shim.py")
    shutil.copyfile(SHIM, dest)
    return dest
