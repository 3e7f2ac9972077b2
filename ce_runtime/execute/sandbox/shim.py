"""The sandbox's init: one per trial, it starts every process of the trial and reaps them.

It runs inside the trial's confinement (under bwrap: in the new PID, network and mount
namespaces; under tempdir: as a plain child of ce) and listens on a unix socket. ce
connects once per command and sends a request with the command's stdin, stdout and
stderr as file descriptors (SCM_RIGHTS), so the command writes straight to ce's files
and pipes, whatever namespace it runs in. The shim is a child subreaper: a process that
daemonizes (`setsid`, double fork) is re-parented to it, so teardown finds and kills
every descendant, not only the ones it started.

Stdlib only, and free of ce imports: it is run by the host's interpreter from a path
bound into the sandbox, where ce's own packages may be masked.

Protocol (one connection per request): a 4-byte big-endian length, then a JSON object,
sent with the descriptors. Replies are JSON lines.
  {"op": "exec", "argv": [...], "cwd": DIR, "env": {...}, "rlimits": {"AS": bytes}}
      + fds (stdin, stdout, stderr)  ->  {"pid": N} ... {"exit": CODE}
      later on the same connection: {"op": "kill"} kills the command's process group;
      a connection closed before the command exits kills it too.
      The command is started by posix_spawn (no copy of the init's memory); by a fork
      when it has rlimits to set or does not start (the fork reports why on its stderr,
      exit 127). Either way: its own session, the three descriptors and no other, the
      same signal dispositions, `cwd`, argv[0] looked up on the PATH of `env`.
  {"op": "mark"}                       ->  {"mark": N}   (the agent starts: the N
                                           processes alive now are spared later)
  {"op": "kill_since"}                 ->  {"killed": [[pid, name], ...]}   (all others)
  {"op": "kill_all"}                   ->  {"killed": [...]}
  {"op": "forward", "port": P, "target": UNIX_SOCKET}  ->  {"ok": true}
      127.0.0.1:P inside the sandbox is forwarded to a unix socket ce listens on (the
      model endpoint of a `network: model` sandbox).
  {"op": "exit"}                       ->  {"killed": [...]}, then the shim exits.

`shim.py --forward PORT SOCKET` only forwards (as the `forward` op does; it prints
"ready" once listening): the model endpoint of a docker container, which has no init of
ce's.

The run's zygote (tempdir without limits) forks inits that run this module: zygote.py.
A process of the sandbox with its own stdio is started through run_client.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
MAX_FDS = 3
KILL_ROUNDS = 50
RLIMITS = {"AS": resource.RLIMIT_AS, "NOFILE": resource.RLIMIT_NOFILE,
           "FSIZE": resource.RLIMIT_FSIZE, "CORE": resource.RLIMIT_CORE}


def become_subreaper() -> bool:
    """Orphans of the trial come to us; and when ce dies, we hear it (SIGTERM: kill
    every descendant, then exit), so a killed ce leaves no daemon behind. Not dumpable:
    a process of the sandbox (same uid, no capability) cannot ptrace the init, write its
    memory or take its descriptors (pidfd_getfd, /proc/PID/fd)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, name) of a process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = data[data.index("(") + 1:data.rindex(")")]
    fields = data[data.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19]), name


def descendants(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (start time, name) of every live descendant of `root`: down the kernel's
    children lists (a few reads, where the whole /proc would be hundreds), or by a scan of
    /proc where the kernel has no such lists."""
    found = _by_children(root)
    return found if found is not None else _by_scan(root)


def _children(pid: int) -> list[int] | None:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(c) for c in fh.read().split())
        except FileNotFoundError:
            if tid == str(pid) and os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # no children lists in this kernel
        except OSError:
            continue
    return out


def _by_children(root: int) -> dict[int, tuple[int, str]] | None:
    first = _children(root)
    if first is None:
        return None
    out: dict[int, tuple[int, str]] = {}
    todo = list(first)
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        st = _stat(pid)
        if st is None:
            continue
        out[pid] = (st[1], st[2])
        todo.extend(_children(pid) or [])
    return out


def _by_scan(root: int) -> dict[int, tuple[int, str]]:
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is None:
            continue
        ppid, start, name = st
        children.setdefault(ppid, []).append(int(entry))
        info[int(entry)] = (start, name)
    out: dict[int, tuple[int, str]] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in out or pid not in info:
            continue
        out[pid] = info[pid]
        todo.extend(children.get(pid, []))
    return out


class _Server:
    """A unix-socket listener and a SIGCHLD wake-up pipe on one selector: what the init
    and the zygote both serve from."""

    def __init__(self, ctl_path: str, on_sigterm) -> None:
        self.me = os.getpid()
        self.sel = selectors.DefaultSelector()
        if ctl_path.startswith("fd:"):  # bound and listening already, by ce on the host
            self.listener = socket.socket(fileno=int(ctl_path[3:]))
        else:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _in_dir_of(ctl_path, self.listener.bind)
            self.listener.listen(128)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: on_sigterm())
        self.sel.register(self.wake_r, selectors.EVENT_READ, "reap")

    def _accepted(self) -> list[socket.socket]:
        """Every connection waiting, non-blocking and registered; one from a process of
        the sandbox is closed unread (only ce may ask)."""
        out = []
        while True:
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                return out
            if not self.peer_allowed(conn):
                conn.close()
                continue
            conn.setblocking(False)
            self.sel.register(conn, selectors.EVENT_READ, "conn")
            out.append(conn)

    def peer_allowed(self, conn: socket.socket) -> bool:
        """Whether the process at the other end may send requests: ce, never a process
        of the sandbox. A peer outside our PID namespace (ce, under bwrap) shows as pid 0;
        a visible one must be alive and not one of our descendants (a process the agent
        started; a dead peer is refused too: its pid says nothing any more)."""
        try:
            pid = struct.unpack("3i", conn.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        except OSError:
            return False
        if pid == 0:
            return True
        if pid == self.me or not _alive(pid):
            return False
        return not _descends_from(pid, self.me)

    def _drain_wakeup(self) -> None:
        try:
            while os.read(self.wake_r, 4096):
                pass
        except BlockingIOError:
            pass


class Shim(_Server):
    def __init__(self, ctl_path: str):
        super().__init__(ctl_path, lambda: self._exit())
        _no_inherit_open()
        self.buffers: dict[socket.socket, bytearray] = {}
        self.fds: dict[socket.socket, list[int]] = {}
        self.commands: dict[int, socket.socket] = {}  # pid -> its connection
        self.by_conn: dict[socket.socket, int] = {}
        self.before_agent: dict[int, int] = {}  # pid -> its start time
        self.running = True

    # -- loop ---------------------------------------------------------------------------
    def serve(self, announce: bool = True) -> None:
        if announce:
            sys.stdout.write("ready\n")
            sys.stdout.flush()
        while self.running:
            for key, _ in self.sel.select(timeout=1.0):
                if key.data == "accept":
                    self._accept()
                elif key.data == "reap":
                    self._drain_wakeup()
                    self._reap()
                else:
                    self._readable(key.fileobj)
            self._reap()

    def _accept(self) -> None:
        for conn in self._accepted():
            self.buffers[conn] = bytearray()
            self.fds[conn] = []

    def _readable(self, conn: socket.socket) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(conn, 1 << 16, MAX_FDS)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        _no_inherit(fds)
        self.fds[conn].extend(fds)
        if not data:
            self._closed(conn)
            return
        buf = self.buffers[conn]
        buf.extend(data)
        while len(buf) >= 4:
            size = struct.unpack(">I", buf[:4])[0]
            if len(buf) < 4 + size:
                break
            message = json.loads(bytes(buf[4:4 + size]))
            del buf[:4 + size]
            self._handle(conn, message)

    def _closed(self, conn: socket.socket) -> None:
        pid = self.by_conn.pop(conn, None)
        if pid is not None and pid in self.commands:  # still running: the caller gave up
            _killpg(pid)
            self.commands[pid] = None  # reaped later, reported to nobody
        for fd in self.fds.pop(conn, []):
            _close(fd)
        self.buffers.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn)
        conn.close()

    # -- requests ----------------------------------------------------------------------
    def _handle(self, conn: socket.socket, msg: dict) -> None:
        op = msg.get("op")
        if op == "exec":
            fds, self.fds[conn] = self.fds[conn], []
            self._exec(conn, msg, fds)
        elif op == "kill":
            pid = self.by_conn.get(conn)
            if pid is not None:
                _killpg(pid)
        elif op == "mark":  # the agent starts: what runs now is not the agent's
            self.before_agent = {pid: start for pid, (start, _) in descendants(self.me).items()}
            _reply(conn, {"mark": len(self.before_agent)})
        elif op == "kill_since":  # the agent ended: what it left running dies
            _reply(conn, {"killed": self.kill_descendants(self.before_agent)})
        elif op == "kill_all":
            _reply(conn, {"killed": self.kill_descendants(None)})
        elif op == "forward":
            try:
                _forward(int(msg["port"]), str(msg["target"]))
                _reply(conn, {"ok": True})
            except OSError as exc:
                _reply(conn, {"error": f"cannot listen on 127.0.0.1:{msg['port']}: {exc}"})
        elif op == "exit":
            _reply(conn, {"killed": self.kill_descendants(None)})
            self.running = False
        else:
            _reply(conn, {"error": f"unknown op {op!r}"})

    def _exec(self, conn: socket.socket, msg: dict, fds: list[int]) -> None:
        if len(fds) != 3:
            for fd in fds:
                _close(fd)
            _reply(conn, {"error": f"exec needs 3 descriptors, got {len(fds)}"})
            return
        argv = [str(a) for a in msg["argv"]]
        env = {str(k): str(v) for k, v in (msg.get("env") or {}).items()}
        cwd = msg.get("cwd") or "/"
        limits = msg.get("rlimits") or {}
        pid = None if limits else _spawn(argv, env, cwd, fds)
        if pid is None:  # rlimits to set, or a command that does not start: fork
            pid = self._fork_exec(argv, env, cwd, fds, limits)
        for fd in fds:
            _close(fd)
        self.commands[pid] = conn
        self.by_conn[conn] = pid
        _reply(conn, {"pid": pid})

    @staticmethod
    def _fork_exec(argv: list[str], env: dict[str, str], cwd: str, fds: list[int],
                   limits: dict) -> int:
        """The command in a fork of the init: rlimits set in the child, and a command
        that cannot start reported on its stderr (exit 127)."""
        pid = os.fork()
        if pid == 0:  # the command
            try:
                os.setsid()
                for i, fd in enumerate(fds):
                    os.dup2(fd, i)
                os.closerange(3, 65536)
                for name, value in limits.items():
                    resource.setrlimit(RLIMITS[name], (int(value), int(value)))
                for sig in (signal.SIGPIPE, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                signal.set_wakeup_fd(-1)
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            except BaseException as exc:
                try:
                    os.write(2, f"ce sandbox: cannot start {argv[0]}: {exc}\n".encode())
                finally:
                    os._exit(127)
        return pid

    def _reap(self) -> None:
        for pid, status in exited_children():
            if pid not in self.commands:
                continue  # an orphan re-parented to us: reaped, nobody waits for it
            conn = self.commands.pop(pid)
            if conn is not None:
                self.by_conn.pop(conn, None)
                _reply(conn, {"exit": os.waitstatus_to_exitcode(status)})

    def kill_descendants(self, spare: dict[int, int] | None) -> list[list]:
        """Stop, then kill every descendant (but those in `spare`: pid -> start time, the
        same process, not a later one that got its pid), until none is left: a fork loop
        cannot outrun it, each round freezes first."""
        spare = spare or {}
        killed: dict[int, str] = {}
        for _ in range(KILL_ROUNDS):
            victims = {pid: name for pid, (start, name) in descendants(self.me).items()
                       if spare.get(pid) != start}
            victims = {p: n for p, n in victims.items() if p not in killed or _alive(p)}
            if not victims:
                break
            for pid in victims:
                _signal(pid, signal.SIGSTOP)
            for pid in victims:
                _signal(pid, signal.SIGKILL)
            killed.update(victims)
            time.sleep(0.005)
            self._reap()
        self._reap()
        return [[pid, name] for pid, name in sorted(killed.items())]

    def _exit(self) -> None:
        self.kill_descendants(None)
        os._exit(0)



_SIGDEF = (signal.SIGPIPE, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)
POSIX_SPAWN_SETSIGDEF = 0x04
POSIX_SPAWN_SETSID = 0x80


class _Spawner:
    """glibc's posix_spawn through ctypes. Not os.posix_spawn: it has no chdir, and its
    `setsigdef` refuses glibc's two internal signals (32 and 33), which glibc's
    posix_spawn leaves ignored in the command unless they are in that set: a fork leaves
    them at their defaults."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.spawn = libc.posix_spawn
        self.fa_init = libc.posix_spawn_file_actions_init
        self.fa_destroy = libc.posix_spawn_file_actions_destroy
        self.fa_dup2 = libc.posix_spawn_file_actions_adddup2
        self.fa_chdir = libc.posix_spawn_file_actions_addchdir_np
        self.at_init = libc.posix_spawnattr_init
        self.at_destroy = libc.posix_spawnattr_destroy
        self.at_flags = libc.posix_spawnattr_setflags
        self.at_sigdef = libc.posix_spawnattr_setsigdefault
        self.at_flags.argtypes = [ctypes.c_void_p, ctypes.c_short]
        # a sigset_t as glibc lays it out (bit n-1 for signal n), built by hand:
        # sigaddset refuses 32 and 33
        words = [0] * 16
        for sig in (*_SIGDEF, 32, 33):
            words[(sig - 1) // 64] |= 1 << ((sig - 1) % 64)
        self.sigdef = (ctypes.c_uint64 * 16)(*words)

    def __call__(self, path: str, argv: list[str], env: dict[str, str], cwd: str,
                 fds: list[int]) -> int | None:
        fa = ctypes.create_string_buffer(512)  # larger than glibc's structures
        attr = ctypes.create_string_buffer(1024)
        if self.fa_init(fa) != 0:
            return None
        try:
            if self.at_init(attr) != 0:
                return None
            try:
                for i, fd in enumerate(fds):
                    if self.fa_dup2(fa, fd, i) != 0:
                        return None
                if self.fa_chdir(fa, os.fsencode(cwd)) != 0 or \
                        self.at_flags(attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID) != 0 \
                        or self.at_sigdef(attr, self.sigdef) != 0:
                    return None
                args = (ctypes.c_char_p * (len(argv) + 1))(
                    *[os.fsencode(a) for a in argv], None)
                envp = (ctypes.c_char_p * (len(env) + 1))(
                    *[os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()], None)
                pid = ctypes.c_int(0)
                if self.spawn(ctypes.byref(pid), os.fsencode(path), fa, attr, args,
                              envp) != 0:
                    return None
                return pid.value
            finally:
                self.at_destroy(attr)
        finally:
            self.fa_destroy(fa)


_SPAWNER: list[_Spawner | None] = []


def _spawner() -> _Spawner | None:
    """The process's spawner (made once: the zygote makes it for all its inits)."""
    if not _SPAWNER:
        try:
            _SPAWNER.append(_Spawner() if sys.platform.startswith("linux") else None)
        except (OSError, AttributeError):
            _SPAWNER.append(None)
    return _SPAWNER[0]


def _spawn(argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> int | None:
    """The command started as `_fork_exec` starts it, by posix_spawn (vfork and exec: no
    copy of the init's memory, a fraction of a fork's cost): its own session, the three
    descriptors as its stdio and no other (every other descriptor of the init is
    close-on-exec, `_no_inherit`), the same signals set back to their defaults, `cwd` its
    directory, `argv[0]` looked up on the PATH of `env` as `os.execvpe` does. None when it
    does not start (the fork path then reports why, as it always has)."""
    spawner = _spawner()
    if spawner is None or not argv:
        return None
    try:
        if any("\0" in a for a in argv) or \
                any("\0" in k or "=" in k or not k or "\0" in v for k, v in env.items()):
            return None  # refused by the fork path's execvpe: let it say so
        file = argv[0]
        candidates = [file] if os.path.dirname(file) else \
            [os.path.join(d, file) for d in os.get_exec_path(env)]
        for path in candidates:
            pid = spawner(path, argv, env, cwd, fds)
            if pid is not None:
                return pid
    except (OSError, ValueError, TypeError, UnicodeError):
        pass
    return None


def _no_inherit(fds) -> None:
    """Descriptors no command may inherit (those it gets are dup2'd to 0, 1 and 2)."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)


def _no_inherit_open() -> None:
    """Every descriptor the init holds now but stdio: close-on-exec (a descriptor its
    launcher passed, bwrap's arguments, say). Those Python opens later are already."""
    try:
        opened = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        opened = list(range(3, 1024))
    _no_inherit(fd for fd in opened if fd > 2)


def _forward(port: int, target: str) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(128)

    def accept_loop() -> None:
        while True:
            client, _ = server.accept()
            try:
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                upstream.connect(target)
            except OSError:
                client.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _in_dir_of(path: str, call) -> None:
    """`call(name)` from the socket's directory: a unix socket's path is limited to 107
    bytes, and a trial's scratch directory may be deep."""
    here = os.getcwd()
    os.chdir(os.path.dirname(path) or ".")
    try:
        call(os.path.basename(path))
    finally:
        os.chdir(here)


def _reply(conn: socket.socket, value: dict) -> None:
    data = (json.dumps(value) + "\n").encode()
    try:
        conn.setblocking(True)
        conn.sendall(data)
        conn.setblocking(False)
    except OSError:
        pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether `ancestor` is on `pid`'s chain of parents (an unreadable link: yes)."""
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        st = _stat(pid)
        if st is None:
            return True
        pid = st[0]
        if pid == ancestor:
            return True
    return False


def _alive(pid: int) -> bool:
    st = _stat(pid)
    if st is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def exited_children():
    """(pid, wait status) of every child that has exited, reaped; never blocks (the init
    and the zygote both reap this way)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--forward":  # a container's model forwarder (docker)
        _forward(int(argv[2]), argv[3])
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        threading.Event().wait()  # the forwarding threads run until the process is killed
    if len(argv) != 2 or argv[1].startswith("-"):  # `--help` is not a socket to make
        sys.stderr.write("usage: shim.py CONTROL_SOCKET | shim.py --forward PORT SOCKET\n")
        return 2
    subreaper = become_subreaper()
    if os.getpid() != 1 and not subreaper:
        sys.stderr.write("ce sandbox: cannot become a child subreaper; daemons may escape\n")
    Shim(argv[1]).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
