"""A control group per trial: memory, process and CPU limits over everything the trial
starts, and a list of its processes that nothing inside can leave.

cgroup v1 (one hierarchy per controller, as on these machines) and v2 (one unified
hierarchy) are both handled. The trial's group is made under ce's own group in each
hierarchy, where an unprivileged user may have been delegated one; where a controller
is missing or not writable, the limit it would enforce is reported as not enforced
(never silently ignored).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import attrs

from ce_runtime.execute.sandbox.base import Limits

V1_ROOT = "/sys/fs/cgroup"
CPU_PERIOD_US = 100_000


@attrs.frozen
class Controller:
    name: str  # memory | pids | cpu
    directory: str  # the trial's group in this controller's hierarchy


def _own_groups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's group path."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    out[c] = path
    except OSError:
        pass
    return out


def _v2_root() -> str | None:
    for candidate in (V1_ROOT, os.path.join(V1_ROOT, "unified")):
        if os.path.exists(os.path.join(candidate, "cgroup.controllers")):
            return candidate
    return None


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK)


def probe() -> dict[str, str]:
    """limit -> how this host can enforce it ("" when it cannot), without changing
    anything: `ce compile` and `ce run` report limits that would be ignored."""
    own = _own_groups()
    found: dict[str, str] = {}
    for controller, limit in (("memory", "max_memory_mb"), ("pids", "max_pids"),
                              ("cpu", "max_cpus")):
        base = os.path.join(V1_ROOT, controller)
        if controller in own and _writable_dir(base + own[controller]):
            found[limit] = f"cgroup v1 {controller}"
            continue
        root = _v2_root()
        if root and "" in own:
            group = root + own[""]
            try:
                with open(os.path.join(group, "cgroup.controllers"), encoding="ascii") as fh:
                    available = fh.read().split()
            except OSError:
                available = []
            if controller in available and _writable_dir(group):
                found[limit] = f"cgroup v2 {controller}"
                continue
        found[limit] = ""
    return found


class TrialCgroup:
    """The trial's groups; `procs_files` are what a starting process writes its pid to."""

    def __init__(self, name: str, limits: Limits):
        self.name = name
        self.controllers: list[Controller] = []
        self.enforced: dict[str, str] = {}
        self.problems: list[str] = []
        wanted = {"memory": limits.memory_mb, "pids": limits.pids, "cpu": limits.cpus}
        own = _own_groups()
        for controller, value in wanted.items():
            if value is None and controller != "pids":
                continue  # pids is always made: it is also how teardown finds stragglers
            made = self._make_v1(controller, own, value) or self._make_v2(controller, own,
                                                                          value)
            if made is not None:
                self.controllers.append(made)

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(c.directory, "cgroup.procs") for c in self.controllers]

    # -- creation ---------------------------------------------------------------------
    def _make_v1(self, controller: str, own: dict[str, str], value) -> Controller | None:
        if controller not in own:
            return None
        parent = os.path.join(V1_ROOT, controller) + own[controller]
        directory = os.path.join(parent, self.name)
        try:
            os.mkdir(directory)
            self._limit_v1(controller, directory, value)
        except OSError as exc:
            self._discard(directory)
            self.problems.append(f"cgroup v1 {controller}: {exc.strerror or exc}")
            return None
        if value is not None:
            self.enforced[controller] = f"cgroup v1 {controller}"
        return Controller(controller, directory)

    @staticmethod
    def _limit_v1(controller: str, directory: str, value) -> None:
        if value is None:
            return
        if controller == "memory":
            limit = str(int(value) * 1024 * 1024)
            _write(os.path.join(directory, "memory.limit_in_bytes"), limit)
            swap = os.path.join(directory, "memory.memsw.limit_in_bytes")
            if os.path.exists(swap):  # no way around the limit through swap
                with contextlib.suppress(OSError):
                    _write(swap, limit)
        elif controller == "pids":
            _write(os.path.join(directory, "pids.max"), str(int(value)))
        elif controller == "cpu":
            _write(os.path.join(directory, "cpu.cfs_period_us"), str(CPU_PERIOD_US))
            _write(os.path.join(directory, "cpu.cfs_quota_us"),
                   str(max(1000, int(float(value) * CPU_PERIOD_US))))

    def _make_v2(self, controller: str, own: dict[str, str], value) -> Controller | None:
        root = _v2_root()
        if root is None or "" not in own:
            return None
        parent = root + own[""]
        directory = os.path.join(parent, self.name)
        try:
            with open(os.path.join(parent, "cgroup.controllers"), encoding="ascii") as fh:
                if controller not in fh.read().split():
                    return None
            # a v2 group can enforce a controller only if its parent delegates it
            with contextlib.suppress(OSError):
                _write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")
            os.makedirs(directory, exist_ok=True)
            if value is not None:
                file, text = {"memory": ("memory.max", str(int(value) * 1024 * 1024)),
                              "pids": ("pids.max", str(int(value))),
                              "cpu": ("cpu.max", f"{max(1000, int(float(value) * CPU_PERIOD_US))}"
                                             f" {CPU_PERIOD_US}")}[controller]
                _write(os.path.join(directory, file), text)
                if controller == "memory":
                    with contextlib.suppress(OSError):
                        _write(os.path.join(directory, "memory.swap.max"), "0")
        except OSError as exc:
            self.problems.append(f"cgroup v2 {controller}: {exc.strerror or exc}")
            return None
        if value is not None:
            self.enforced[controller] = f"cgroup v2 {controller}"
        return Controller(controller, directory)

    # -- use --------------------------------------------------------------------------
    def pids(self) -> set[int]:
        out: set[int] = set()
        for f in self.procs_files:
            with contextlib.suppress(OSError), open(f, encoding="ascii") as fh:
                out.update(int(x) for x in fh.read().split())
        return out

    def kill_all(self, rounds: int = 50) -> int:
        """SIGKILL every process still in the group (fork loops included); how many."""
        killed: set[int] = set()
        for _ in range(rounds):
            live = self.pids() - {os.getpid()}
            if not live:
                break
            for pid in live:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            for pid in live:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            killed |= live
            time.sleep(0.01)
        return len(killed)

    def oom_killed(self) -> bool:
        for c in self.controllers:
            if c.name != "memory":
                continue
            for name, key in (("memory.oom_control", "oom_kill "), ("memory.events",
                                                                     "oom_kill ")):
                with contextlib.suppress(OSError), open(os.path.join(c.directory, name),
                                                        encoding="ascii") as fh:
                    for line in fh:
                        if line.startswith(key) and int(line.split()[1]) > 0:
                            return True
        return False

    def remove(self) -> None:
        self.kill_all()
        for c in self.controllers:
            self._discard(c.directory)

    @staticmethod
    def _discard(directory: str) -> None:
        for _ in range(20):  # a group empties a moment after its last process dies
            try:
                os.rmdir(directory)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)
