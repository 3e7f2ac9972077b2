"""The run's zygote (`python -I -S zygote.py CONTROL_SOCKET`, tempdir without limits):
one process per run that forks a fresh init per trial, so a trial pays a fork (~1 ms)
instead of an interpreter's start-up (~30 ms of CPU). One connection per init:
  {"op": "init", "ctl": PATH} + fds (the init's stderr)  ->  {"pid": N} (sent by the
      init once it listens on PATH) ... {"exit": CODE} (sent by the zygote, which reaps it)
The init forked this way is what a launched one is: its own session, a child subreaper,
SIGTERM when its parent dies (the zygote, which itself gets SIGTERM when ce dies).
The zygote forks each init ahead of its request (a spare, in the zygote's process group
until a request hands it its socket path, stderr and connection: a spare dies with the
zygote), and the next spare while that trial runs.

It runs on the host (tempdir only: nothing of it is copied into a confinement) and
forks inits that run shim.py's code, loaded here by path as the init's own module. Stdlib
only, and free of ce imports, as shim.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import signal
import socket
import struct
import sys


def _load_shim():
    """shim.py beside this file (`-I` puts no script directory on sys.path)."""
    spec = importlib.util.spec_from_file_location(
        "ce_shim", os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["ce_shim"] = module
    spec.loader.exec_module(module)
    return module


shim = _load_shim()


class Zygote(shim._Server):
    """Forks the trials' inits (see the module's docstring). One init is forked ahead,
    a spare waiting for its trial: a request hands it the trial's socket path, stderr and
    connection, and the next spare is forked while that trial runs."""

    def __init__(self, ctl_path: str):
        super().__init__(ctl_path, lambda: os._exit(0))  # its inits hear it too
        shim._spawner()  # made once, inherited by every init
        self.pending: dict[socket.socket, tuple[bytearray, list[int]]] = {}
        self.inits: dict[int, socket.socket] = {}  # pid -> the connection that asked
        self.spare: tuple[int, socket.socket] | None = None  # its pid, our end of its line

    def serve(self) -> None:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        self._fork_spare()
        while True:
            for key, _ in self.sel.select(timeout=1.0):
                if key.data == "accept":
                    self._accept()
                elif key.data == "reap":
                    self._drain_wakeup()
                else:
                    self._readable(key.fileobj)
            self._reap()

    def _accept(self) -> None:
        for conn in self._accepted():
            self.pending[conn] = (bytearray(), [])

    def _readable(self, conn: socket.socket) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(conn, 1 << 16, shim.MAX_FDS)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        buf, got = self.pending.get(conn, (bytearray(), []))
        got.extend(fds)
        buf.extend(data)
        if not data or (len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]):
            self.pending.pop(conn, None)
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(conn)
            if data:
                message = json.loads(bytes(buf[4:4 + struct.unpack(">I", buf[:4])[0]]))
                self._fork(conn, message, got)
                return
            for fd in got:
                shim._close(fd)
            conn.close()

    def _fork(self, conn: socket.socket, msg: dict, fds: list[int]) -> None:
        if msg.get("op") != "init" or len(fds) != 1:
            for fd in fds:
                shim._close(fd)
            shim._reply(conn, {"error": "expected an init request with one descriptor"})
            conn.close()
            return
        pid = self._hand_to_spare(msg, fds[0], conn)
        if pid is None:  # no spare alive: fork one for this request
            pid = self._fork_init(lambda: (msg, fds[0], conn))
        shim._close(fds[0])
        self.inits[pid] = conn
        self._fork_spare()  # while the trial runs

    def _hand_to_spare(self, msg: dict, stderr: int, conn: socket.socket) -> int | None:
        spare, self.spare = self.spare, None
        if spare is None:
            return None
        pid, line = spare
        payload = json.dumps(msg).encode()
        try:
            line.setblocking(True)
            socket.send_fds(line, [struct.pack(">I", len(payload)) + payload],
                            [stderr, conn.fileno()])
        except OSError:  # it died: reaped as an orphan of ours, reported to nobody
            return None
        finally:
            line.close()
        return pid

    def _fork_spare(self) -> None:
        if self.spare is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = self._fork_init(lambda: _assignment(theirs), keep=theirs, drop=ours)
        except OSError:  # no spare: the next request forks its init itself
            ours.close()
            theirs.close()
            return
        theirs.close()
        self.spare = (pid, ours)

    def _fork_init(self, assignment, keep: socket.socket | None = None,
                   drop: socket.socket | None = None) -> int:
        """Fork an init. The child frees what is the zygote's, waits for `assignment()`
        (the request, its stderr, the connection that asked; None: the zygote is gone),
        then takes its own session, listens on the request's socket, says its pid on the
        connection and serves the trial."""
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:  # the trial's init
            subreaper = shim.become_subreaper()
            if os.getppid() != self.me:  # the zygote died before PDEATHSIG was set
                os._exit(1)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 0)
            os.dup2(devnull, 1)
            signal.set_wakeup_fd(-1)
            self.sel.close()
            self.listener.close()
            for fd in (self.wake_r, self.wake_w, devnull):
                shim._close(fd)
            for other, (_, got) in list(self.pending.items()):
                other.close()
                for fd in got:
                    shim._close(fd)
            for other in self.inits.values():
                other.close()
            if self.spare is not None:
                self.spare[1].close()
            if drop is not None:
                drop.close()
            given = assignment()
            if keep is not None:
                keep.close()
            if given is None:
                code = 0
                return
            msg, stderr, conn = given
            os.setsid()  # out of the zygote's group only now: a spare dies with it
            os.dup2(stderr, 2)
            shim._close(stderr)
            if not subreaper:
                sys.stderr.write("ce sandbox: cannot become a child subreaper; "
                                 "daemons may escape\n")
            init = shim.Shim(str(msg["ctl"]))
            shim._reply(conn, {"pid": os.getpid()})
            conn.close()
            init.serve(announce=False)
            code = 0
        except BaseException as exc:
            with contextlib.suppress(Exception):
                sys.stderr.write(f"ce sandbox: the init did not start: {exc}\n")
                sys.stderr.flush()
        finally:
            os._exit(code)

    def _reap(self) -> None:
        for pid, status in shim.exited_children():
            if self.spare is not None and self.spare[0] == pid:  # a spare died unused
                self.spare[1].close()
                self.spare = None
            conn = self.inits.pop(pid, None)
            if conn is not None:
                shim._reply(conn, {"exit": os.waitstatus_to_exitcode(status)})
                conn.close()


def _assignment(line: socket.socket) -> tuple[dict, int, socket.socket] | None:
    """What a spare init waits for: the request, its stderr and the connection that
    asked (None when the zygote closed the line: it is gone)."""
    line.setblocking(True)
    buf = bytearray()
    fds: list[int] = []
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        data, got, _, _ = socket.recv_fds(line, 1 << 16, 2)
        fds.extend(got)
        if not data:
            for fd in fds:
                shim._close(fd)
            return None
        buf.extend(data)
    if len(fds) != 2:
        raise OSError(f"a spare init got {len(fds)} descriptors, not 2")
    msg = json.loads(bytes(buf[4:4 + struct.unpack(">I", buf[:4])[0]]))
    return msg, fds[0], socket.socket(fileno=fds[1])


def main(argv: list[str]) -> int:
    """`zygote.py CONTROL_SOCKET`, or `zygote.py -`: started before ce knows the run (the
    `ce` script, ce_runtime/zygote_process.py), it makes ready what needs no socket, then
    reads the socket's path as a line on stdin (end of input: not needed, exit 0)."""
    if len(argv) != 2 or (argv[1].startswith("-") and argv[1] != "-"):
        sys.stderr.write("usage: zygote.py CONTROL_SOCKET|-\n")
        return 2
    with contextlib.suppress(OSError, AttributeError):  # ce dies: so does the zygote
        ctypes.CDLL(None, use_errno=True).prctl(shim.PR_SET_PDEATHSIG, signal.SIGTERM,
                                                0, 0, 0)
    ctl_path = argv[1]
    if ctl_path == "-":
        shim._spawner()  # what Zygote makes first, made while ce still loads
        ctl_path = sys.stdin.readline().rstrip("\n")
        if not ctl_path:
            return 0
        null = os.open(os.devnull, os.O_RDONLY)  # as when started for the run: no pipe
        os.dup2(null, 0)  # of ce's for the inits to inherit
        os.close(null)
    Zygote(ctl_path).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
