"""A Ray cluster of one or two nodes on this machine, for tests and bench/ray_pool.py.

Each node is a `ray start --block` in a session of its own, with its own ports and temp
directory; the cluster is stopped by its own process ids (SIGTERM to each `ray start`,
then SIGKILL to whatever is left in their sessions), never `ray stop`, which kills every
Ray process on the machine. Token auth (on by default in Ray 2.60) needs RAY_AUTH_MODE=token
in every node's and every driver's environment: `env` has it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tests.processes import session_members

BIN = os.path.join(os.path.dirname(sys.executable), "ray")


def ray_missing() -> str | None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return "ray is not installed (pip install -e '.[dev]' or 'ce[ray]')"
    if not os.path.exists(BIN):
        return f"no `ray` command beside {sys.executable}"
    return None


def _ensure_token(env: dict[str, str]) -> None:
    """The machine's Ray token (~/.ray/auth_token), made if missing: `ray start` refuses
    to start without one (only `ray.init` makes it), so on a fresh machine the first
    cluster of a test run failed, or not, by which test had called ray.init before.
    Created whole or not at all (a link of a finished file), so concurrent clusters all
    read the one that won; a token the environment names is left to it."""
    import secrets

    if env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH"):
        return
    path = os.path.join(os.path.expanduser("~"), ".ray", "auth_token")
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staged = f"{path}.{os.getpid()}.tmp"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
    finally:
        os.close(fd)
    try:
        os.link(staged, path)
    except FileExistsError:
        pass  # another cluster's token won: every node uses that one
    finally:
        os.unlink(staged)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    def __init__(self, nodes: int = 1, cpus: int = 2, tmpdir: str | None = None):
        """`tmpdir`: the nodes' TMPDIR (where workers put trial scratch)."""
        self.nodes, self.cpus = nodes, cpus
        self.temp = tempfile.mkdtemp(prefix="ce-ray-", dir="/tmp")  # short: unix sockets
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = dict(os.environ, RAY_AUTH_MODE="token")
        self.env.pop("RAY_ADDRESS", None)
        if tmpdir:
            self.env["TMPDIR"] = tmpdir
        self.procs: list[subprocess.Popen] = []

    def _start(self, args: list[str], log: str) -> None:
        with open(os.path.join(self.temp, log), "wb") as out:
            self.procs.append(subprocess.Popen(
                [BIN, "start", "--block", "--node-ip-address=127.0.0.1",
                 "--disable-usage-stats", f"--temp-dir={self.temp}",
                 f"--num-cpus={self.cpus}", *args],
                env=self.env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True))

    def start(self, timeout: float = 180) -> RayCluster:
        _ensure_token(self.env)
        try:
            self._start(["--head", f"--port={self.port}", "--include-dashboard=false",
                         f"--dashboard-port={_free_port()}",
                         f"--metrics-export-port={_free_port()}"], "head.log")
            for i in range(1, self.nodes):
                self._start([f"--address={self.address}",
                             f"--metrics-export-port={_free_port()}"], f"node{i}.log")
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, timeout: float) -> None:
        """Until the cluster has every node's CPUs (one driver, polling)."""
        want = self.nodes * self.cpus
        code = ("import ray, time, sys\n"
                f"ray.init(address={self.address!r}, logging_level='ERROR')\n"
                f"end = time.time() + {timeout}\n"
                f"while ray.cluster_resources().get('CPU', 0) < {want}:\n"
                "    if time.time() > end: sys.exit('nodes missing')\n"
                "    time.sleep(0.3)\n")
        deadline = time.monotonic() + timeout
        while True:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"ray start exited ({p.returncode}): {self.logs()}")
            res = subprocess.run([sys.executable, "-c", code], env=self.env,
                                 capture_output=True, text=True,
                                 timeout=max(5, deadline - time.monotonic()))
            if res.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Ray cluster did not come up: {res.stderr[-1500:]}")
            time.sleep(1)

    def logs(self) -> str:
        out = []
        for name in sorted(os.listdir(self.temp)):
            if name.endswith(".log"):
                with open(os.path.join(self.temp, name), errors="replace") as fh:
                    out.append(f"--- {name}\n{fh.read()[-1500:]}")
        return "\n".join(out)

    def worker_pids(self) -> list[int]:
        """The cluster's worker processes (`ray::...` titles), all nodes."""
        found = []
        for p in self.procs:
            for pid in session_members(p.pid):
                with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if fh.read().startswith(b"ray::"):
                        found.append(pid)
        return found

    def stop(self) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        for p in self.procs:
            for pid in session_members(p.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)
        self.procs.clear()
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
