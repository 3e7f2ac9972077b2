"""The Sandbox protocol every driver implements, and what the drivers share.

A sandbox is one trial's place to run things: the workspace (a host directory, seen by
commands at `inner_workspace`), and every process the trial starts. ce never starts a
trial's process itself; it asks the sandbox:

- `start()` brings the confinement up (the init process, the container);
- `prepare()` fills the workspace (template sources, the Python venv, node packages);
- `exec()` runs a command to completion (cwd, env, timeout, output cap; on timeout or
  cancellation its whole process group dies); its stdout and stderr are pipes ce drains
  while it runs, keeping at most the cap of each (`CommandOutput`): never a file;
- `spawn()` starts a long-running process with stdio pipes (agent CLIs);
- `write_file()` / `read_file()` are file operations *as the agent*: they run inside the
  confinement, so an agent's `write: ../x` is as confined as its shell;
- `agent_starts()` / `agent_ended()` bracket the agent: grader-only inputs (the task
  directory, the reference) are unreachable in between, and whatever the agent left
  running is killed when it ends (a daemon must not keep editing files while grading);
- `teardown()` kills everything the trial started and says what it killed.

Commands run in one of two views: `agent` (the agent, its tools and the `script`
agent's actions: no TASK_DIR, no REFERENCE_DIR) and `grader` (pre_run, criteria,
post_run: the task directory and the reference at TASK_DIR / REFERENCE_DIR).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import shlex
import struct
import termios
from collections.abc import Sequence
from typing import IO, Any, Protocol

import attrs

from ce_runtime.store.redact import SECRET_NAME, looks_secret

AGENT = "agent"
GRADER = "grader"

# The environment a command gets from the host: nothing else passes unless the task
# lists it (`sandbox.env_passthrough`), and then never a secret-looking name.
ENV_ALLOWLIST = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM",
                 "COLORTERM", "NO_COLOR")


@attrs.frozen
class ExecResult:
    exit_code: int  # -1 on timeout or when the command could not start
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: float
    pgid: int = 0  # its process group (0: it never started)


@attrs.frozen
class Limits:
    """What the task asked for (`sandbox.limits`); None: no limit."""

    memory_mb: int | None = None
    pids: int | None = None
    cpus: float | None = None
    disk_mb: int | None = None
    command_timeout: float | None = None  # `timeout`: the longest one task command runs


def capped_timeout(sandbox: Any, timeout: float | None) -> float | None:
    """A task command's timeout under `sandbox.limits.timeout`, the longest any command ce
    runs in the sandbox for the task may take (pre_run, post_run, a criterion's command,
    the script agent's): the shorter of the two."""
    spec = getattr(sandbox, "spec", None)
    cap = spec.limits.command_timeout if isinstance(spec, SandboxSpec) else None
    if cap is None:
        return timeout
    return cap if timeout is None else min(timeout, cap)


@attrs.frozen
class SandboxSpec:
    """Everything a driver needs to know about one trial (plain data)."""

    trial_id: str
    scratch: str  # a private host directory of the trial; removed at teardown
    task_dir: str  # host path
    reference: tuple[str, ...] = ()  # host paths of the reference (files or directories)
    hidden: tuple[str, ...] = ()  # host paths the agent must never see (run dir, tasks ...)
    network: str = "none"  # none | model | full
    limits: Limits = Limits()
    env: dict[str, str] = attrs.field(factory=dict)  # the task's own variables
    env_passthrough: tuple[str, ...] = ()  # host variables the task lets through
    docker: Any = None  # the task's `sandbox.docker` block
    uv_cache: str | None = None
    workspace: str | None = None  # an existing workspace (re-grading); else scratch/ws
    setup_network: bool = False  # set-up downloads packages (docker: online until pre_run)
    warm: bool = False  # a run of many trials: tempdir forks its init from the run's zygote
    tools: tuple[str, ...] = ()  # host directories commands must see read-only (agent CLIs)
    mock_path_dirs: tuple[str, ...] = ()  # workspace dirs first on the agent's PATH
    record_cli: str | None = None  # the workspace dir of record_cli shims (cli_mocks)
    # where host files a container needs (an agent's CLI, uv) are copied once for the run
    # when they cannot be hard-linked (another file system); None: a copy per sandbox
    host_files: str | None = None


def agent_path(spec: SandboxSpec, inner_workspace: str, path: str, view: str) -> str:
    """PATH with the `record_cli` shims, then the task's mock executables first, for the
    agent's commands only (the grader sees the real tools, as in coder_eval)."""
    dirs = ([spec.record_cli] if spec.record_cli else []) + list(spec.mock_path_dirs)
    if view != AGENT or not dirs:
        return path
    mocks = [os.path.normpath(os.path.join(inner_workspace, d)) for d in dirs]
    return os.pathsep.join([*mocks, path])


class SandboxError(Exception):
    """The sandbox could not be brought up or was lost: the trial is ERROR."""


class SandboxFileError(Exception):
    """A file operation as the agent failed (the message is what its tool would say)."""


@attrs.frozen
class Enforcement:
    """How one driver, on this host, holds the trial: recorded in every task.json."""

    driver: str
    isolation: str  # one line: what separates the agent from the host
    network: str  # what `network` became here
    limits: dict[str, str] = attrs.field(factory=dict)  # limit -> how it is enforced
    not_enforced: tuple[str, ...] = ()  # "max_pids: why not" for each limit that is not

    def as_record(self) -> dict[str, Any]:
        return {"driver": self.driver, "isolation": self.isolation, "network": self.network,
                "limits": dict(self.limits), "not_enforced": list(self.not_enforced)}


class Sandbox(Protocol):
    driver: str
    workspace: str  # host path
    inner_workspace: str  # the same directory as the sandbox's commands see it
    enforcement: Enforcement

    async def start(self) -> None: ...

    async def prepare(self, plan: Any, cancel: Any = None, sources: bool = True) -> Any: ...

    def env(self, view: str = AGENT) -> dict[str, str]: ...

    async def exec(self, argv: Sequence[str] | str, *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   max_output: int | None = None, stdin: bytes | None = None,
                   view: str = AGENT, binary: bool = False) -> ExecResult: ...

    async def spawn(self, argv: Sequence[str], *, cwd: str | None = None,
                    env: dict[str, str] | None = None, view: str = AGENT,
                    secrets: dict[str, str] | None = None
                    ) -> asyncio.subprocess.Process: ...

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> bool: ...

    async def read_file(self, path: str, limit: int | None = None) -> bytes: ...

    async def agent_starts(self, trusted: bool = False) -> None: ...

    async def agent_ended(self) -> list[str]: ...

    def snapshot(self, objects: str) -> dict[str, Any]: ...

    async def teardown(self) -> list[str]: ...

    async def route_model(self, host: str, port: int) -> str: ...

    def launcher(self, argv: Sequence[str], env: dict[str, str], forward: Sequence[str] = (),
                 cwd: str | None = None) -> str: ...

    def share(self, host_path: str) -> str: ...

    def program(self, host_path: str) -> str: ...


def read_capped(fh: IO[bytes], limit: int | None) -> str:
    """The text written to `fh` (UTF-8, invalid bytes replaced), cut at `limit` bytes
    (workspace.py's set-up commands write to files; a sandbox command's output never
    does: `CommandOutput`)."""
    total = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    data = fh.read() if limit is None else fh.read(limit)
    text = data.decode("utf-8", "replace")
    if total > len(data):
        text += f"\n[... truncated: {total - len(data)} of {total} bytes not kept]"
    return text


def shell_argv(command: Sequence[str] | str) -> list[str]:
    return ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)


def host_env_passthrough(names: Sequence[str]) -> dict[str, str]:
    """The host's allowlisted variables, plus the names a task passes through (never one
    that looks like a secret: that is the agent adapter's to give, explicitly)."""
    out = {k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ}
    for name in names:
        if name in os.environ and not looks_secret(name):
            out[name] = os.environ[name]
    return out


# File operations as the agent: small POSIX shell programs (busybox has every command),
# run through `exec` in the agent view, so they are confined like the agent's own shell.
WRITE_SCRIPT = ('set -e; if [ -e "$1" ]; then echo existed; fi; '
                'mkdir -p -- "$(dirname -- "$1")"; cat > "$1"; '
                'if [ -n "$2" ]; then chmod "$2" "$1"; fi')
READ_SCRIPT = 'exec cat -- "$1"'
FILE_OP_TIMEOUT = 60


class FileOps:
    """`write_file` / `read_file` on top of a driver's `exec`, and the workspace snapshot
    (mixed into drivers whose workspace is a host directory)."""

    def snapshot(self, objects: str) -> dict[str, Any]:
        """The workspace's files into the content-addressed store: the manifest (what the
        grading then finds where a snapshot skips is added by workspace_snapshot.keep_found)."""
        from ce_runtime.store.workspace_snapshot import snapshot_workspace

        return snapshot_workspace(self.workspace, objects)  # type: ignore[attr-defined]

    async def write_file(self, path: str, data: bytes, mode: int | None = None) -> bool:
        """Write `data` at `path` as the agent; True when the file existed before."""
        res = await self.exec(  # type: ignore[attr-defined]
            ["/bin/sh", "-c", WRITE_SCRIPT, "sh", path, f"{mode:o}" if mode else ""],
            stdin=data, timeout=FILE_OP_TIMEOUT, max_output=4096, view=AGENT)
        if res.exit_code != 0 or res.timed_out:
            raise SandboxFileError(_file_error(res))
        return res.stdout.startswith("existed")

    async def read_file(self, path: str, limit: int | None = None) -> bytes:
        res = await self.exec(  # type: ignore[attr-defined]
            ["/bin/sh", "-c", READ_SCRIPT, "sh", path], timeout=FILE_OP_TIMEOUT,
            max_output=limit, view=AGENT, binary=True)
        if res.exit_code != 0 or res.timed_out:
            raise SandboxFileError(_file_error(res))
        if limit is None and len(res.stdout) >= OUTPUT_HARD_CAP:
            # all of it was asked for (an edit writes it back): a part will not do
            raise SandboxFileError(f"File too large: ce reads files under {OUTPUT_HARD_CAP} "
                                   "bytes whole")
        return res.stdout  # type: ignore[return-value]


def _file_error(res: ExecResult) -> str:
    if res.timed_out:
        return "timed out"
    text = (res.stderr or "").strip().splitlines()
    line = text[-1] if text else f"exit code {res.exit_code}"
    # "sh: can't create /etc/x: Read-only file system" / "cat: x: No such file ..."
    return re.sub(r"^(/bin/)?(sh|cat|mkdir|chmod|dirname)(: line \d+)?: ", "", line)


INNER_GRADER = "/run/ce-grader"  # where bwrap and docker show grader commands their inputs


def under(path: str, parent: str) -> bool:
    path, parent = os.path.abspath(path), os.path.abspath(parent)
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def grader_mounts(spec: SandboxSpec, grader_dir: str) -> list[tuple[str, str]]:
    """(host path, inner path) of the references outside the task directory: each gets a
    mount point in the grader directory (one inside the task directory is already seen
    there, under task/)."""
    mounts = []
    for i, ref in enumerate(spec.reference):
        if spec.task_dir and under(ref, spec.task_dir):
            continue
        target = os.path.join(grader_dir, f"reference{i}")
        if os.path.isdir(ref):
            os.makedirs(target, exist_ok=True)
        else:
            with open(target, "a", encoding="utf-8"):
                pass
        mounts.append((ref, f"{INNER_GRADER}/reference{i}"))
    return mounts


def grader_reference_dir(spec: SandboxSpec) -> str | None:
    """REFERENCE_DIR as grader commands of a confining driver see it."""
    if not spec.reference:
        return None
    ref = spec.reference[0]
    if spec.task_dir and under(ref, spec.task_dir):
        inner = f"{INNER_GRADER}/task/{os.path.relpath(ref, spec.task_dir)}"
    else:
        inner = f"{INNER_GRADER}/reference0"
    return inner if os.path.isdir(ref) else os.path.dirname(inner)


# The most ce keeps of one output stream of a command (stdout or stderr), whatever
# `max_output` its caller asks for, or none: what comes past it is read and dropped, so
# a command that floods its output costs ce neither memory nor disk.
OUTPUT_HARD_CAP = 64 * 1024 * 1024
_CHUNK = 1 << 16


class CappedOutput:
    """One output stream of a running command: a pipe ce reads while the command writes,
    keeping the first `limit` bytes (at most OUTPUT_HARD_CAP) and counting the rest. It
    reads on past the cap, and never closes the pipe early: a command that prints a lot
    and exits 0 must still exit 0, not die of SIGPIPE."""

    def __init__(self, fd: int, limit: int | None, loop: asyncio.AbstractEventLoop):
        self.fd = fd  # owned from here on: `close` closes it, once
        self.limit = OUTPUT_HARD_CAP if limit is None else max(0, min(limit, OUTPUT_HARD_CAP))
        self.kept = bytearray()
        self.total = 0
        self._loop = loop
        self._watched = False
        try:
            os.set_blocking(fd, False)
            loop.add_reader(fd, self._readable)
            self._watched = True
        except BaseException:
            self.close()
            raise

    def _keep(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._keep(data)
        else:  # every writer is gone
            self._unwatch()

    def collect(self) -> None:
        """Take what is in the pipe now, without waiting for its end: a process the
        command left running (`sleep 100 &`) may hold the pipe open, and write on, for as
        long as it lives."""
        if self.fd < 0:
            return
        try:
            pending = struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0" * 4))[0]
        except OSError:
            pending = 0
        while pending > 0:
            try:
                data = os.read(self.fd, min(pending, _CHUNK))
            except OSError:
                break
            if not data:
                break
            self._keep(data)
            pending -= len(data)

    def _unwatch(self) -> None:
        if self._watched:
            self._watched = False
            self._loop.remove_reader(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            try:
                if self._watched:
                    self._watched = False
                    self._loop.remove_reader(fd)
            finally:
                os.close(fd)

    def data(self) -> bytes:
        return bytes(self.kept)

    def text(self) -> str:
        """UTF-8 (invalid bytes replaced), with a note of what was not kept."""
        text = self.kept.decode("utf-8", "replace")
        if self.total > len(self.kept):
            text += (f"\n[... truncated: {self.total - len(self.kept)} of {self.total} "
                     "bytes not kept]")
        return text


class CommandOutput:
    """A command's stdout and stderr: two pipes, drained while it runs (`CappedOutput`).
    The driver hands `write_ends` to the command, then calls `release_write_ends` (the
    command has its own copies; ours would hold the pipes open); `collect` once the
    command has exited; `result`. Leaving the `with` closes every descriptor left, once."""

    def __init__(self, max_output: int | None):
        loop = asyncio.get_running_loop()
        self.write_ends: list[int] = []
        self.streams: list[CappedOutput] = []
        try:
            for _ in range(2):
                read_end, write_end = os.pipe()
                self.write_ends.append(write_end)
                self.streams.append(CappedOutput(read_end, max_output, loop))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> CommandOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def release_write_ends(self) -> None:
        ends, self.write_ends = self.write_ends, []
        for fd in ends:
            os.close(fd)

    def collect(self) -> None:
        for stream in self.streams:
            stream.collect()

    def close(self) -> None:
        try:
            self.release_write_ends()
        finally:
            for stream in self.streams:
                stream.close()

    def result(self, binary: bool) -> tuple[Any, str]:
        """stdout (bytes when `binary`, else text with its truncation note) and stderr."""
        out, err = self.streams
        return (out.data() if binary else out.text()), err.text()


def quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def launcher_names(forward) -> str:
    """The lines of a launcher script (every driver's: a standalone script, run with -IS)
    that choose which of its environment's variables reach the agent's CLI: those named
    in `forward` (values handed over at spawn, never written in a file), and the SDK's
    own CLAUDE_CODE_* / CLAUDE_AGENT_SDK* ones that do not look like secrets (by the
    same names the redactor hides). Leaves `names`, sorted."""
    import json

    return (f"forward = set(json.loads({json.dumps(sorted(set(forward)))!r}))\n"
            f"secret = re.compile({SECRET_NAME.pattern!r}, re.I)\n"
            "names = [name for name in sorted(os.environ) if name in forward or (\n"
            "    name.startswith((\"CLAUDE_CODE_\", \"CLAUDE_AGENT_SDK\"))\n"
            "    and not secret.search(name))]\n")
