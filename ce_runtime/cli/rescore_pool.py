"""`ce rescore -j N`: an archive's trials graded by N forked processes.

Re-grading is CPU-bound Python (the trace decoded, the snapshot read, the criteria run,
task.json signed): one process uses one CPU. A fork made after the imports and the
compile starts a grader in about a millisecond with every module loaded. Child k grades
trials k, k+N, k+2N ... and writes their files (its own trial writer, into the one
staged directory); what the parent needs of each trial (its record for the reports, the
lines to print) comes back pickled down a pipe. The parent hands the outcomes on in
the archive's order, so what `ce rescore` prints and writes is the same with any -j.

The default is one process: on the 2-CPU VMs ce is measured on, whose ext4 disk (with
`discard`) serializes the file system work of the trials' reads and writes, -j 2 was
slower than -j 1 (4,000 trials: 6.5-6.8 s against 5.3-6.4 s); with the archive on
tmpfs it was 1.3x faster (3.5 s against 4.3-5.0 s). Where the disk keeps up, a grader
per CPU scales with the CPUs.

Forking is only done in a process without threads (a thread's locks would be copied
held); `usable` says how many processes grade. A child that fails sends its exception
(a failed write comes back as the same OSError); one that dies is a `PoolFailed`. A
Ctrl-C reaches the children too (one process group); each stops its writer and exits,
and the parent waits for them before its staged directory is removed.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

_LENGTH = struct.Struct("<Q")
_REAP_S = 5.0  # how long an interrupted child gets to stop its writer before SIGKILL


class PoolFailed(Exception):
    """A grading process died without saying why (killed, out of memory)."""


def usable(jobs: int | None, trials: int) -> int:
    """How many processes grade `trials`: `jobs` (None: 1), never more than the trials;
    1 (no fork) where forking is unavailable or unsafe (a thread is running)."""
    jobs = min(jobs or 1, trials)
    if jobs <= 1 or not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    return jobs


def run(items: Sequence[Any], jobs: int, grade: Callable[[int, Any], Any],
        finish: Callable[[], Any], abort: Callable[[], None],
        deliver: Callable[[Any], None]) -> list[Any]:
    """Grade `items` in `jobs` forked children: child k calls `grade(i, items[i])` for
    i = k, k+jobs, ..., then `finish()` (its results flushed; what it returns is sent
    back), or `abort()` when it fails or is interrupted. The parent calls `deliver` on
    each outcome in index order and returns the children's `finish()` values."""
    for stream in (sys.stdout, sys.stderr):  # a child must not inherit unwritten output
        with contextlib.suppress(Exception):
            stream.flush()
    children: dict[int, int] = {}  # read end -> pid
    ended: set[int] = set()  # children that sent their end (exiting: not interrupted)
    try:
        for k in range(jobs):
            read_end, write_end = os.pipe()
            # a Ctrl-C waits while the child is made: before its handler is in place it
            # would raise in a copy of this process's stack, not in _child
            unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                pid = os.fork()
                if pid == 0:  # pragma: no cover (the child: measured by its results)
                    _child(k, jobs, items, grade, finish, abort, write_end,
                           [read_end, *children], unblocked)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
            os.close(write_end)
            children[read_end] = pid
        return _collect(children, len(items), deliver, ended)
    finally:
        _reap(children, ended)


def _child(k: int, jobs: int, items: Sequence[Any], grade, finish, abort, fd: int,
           not_mine: list[int], unblocked) -> None:
    """Grade this child's share, send each outcome, then its end; never returns. SIGINT
    is blocked until its handler is in place, and only the first Ctrl-C raises; the
    nested `finally`: one landing in the first still exits."""
    code = 1
    try:
        try:
            for other in not_mine:
                os.close(other)
            interrupted: list[bool] = []

            def on_sigint(signum, frame) -> None:
                if not interrupted:
                    interrupted.append(True)
                    raise KeyboardInterrupt

            signal.signal(signal.SIGINT, on_sigint)
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
            code = _share(k, jobs, items, grade, finish, abort, fd)
        finally:
            os._exit(code)
    finally:
        os._exit(code)


def _share(k: int, jobs: int, items: Sequence[Any], grade, finish, abort, fd: int) -> int:
    out = os.fdopen(fd, "wb", buffering=1 << 16)
    try:
        for i in range(k, len(items), jobs):
            _send(out, ("item", i, grade(i, items[i])))
        _send(out, ("end", finish()))
        out.flush()
        return 0
    except KeyboardInterrupt:
        with contextlib.suppress(BaseException):
            abort()
        return 130
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            abort()
        with contextlib.suppress(BaseException):
            try:
                _send(out, ("error", exc))
            except Exception:  # an exception that does not pickle: its text
                _send(out, ("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
            out.flush()
        return 1
    finally:  # closed here, a failing flush suppressed: left to its finalizer, a parent
        # gone first (Ctrl-C, SIGTERM) printed "Exception ignored ... Broken pipe"
        with contextlib.suppress(BaseException):
            out.close()


def _send(out, message: tuple) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(data)))
    out.write(data)


class _Reader:
    """One child's pipe: bytes in, whole messages out."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.buffer = bytearray()
        self.ended = False

    def feed(self, chunk: bytes) -> list[tuple]:
        self.buffer += chunk
        messages = []
        at = 0
        while len(self.buffer) - at >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(self.buffer, at)
            if len(self.buffer) - at - _LENGTH.size < size:
                break
            start = at + _LENGTH.size
            messages.append(pickle.loads(self.buffer[start:start + size]))
            at = start + size
        del self.buffer[:at]
        return messages


def _collect(children: dict[int, int], total: int, deliver, ended: set[int]) -> list[Any]:
    pending: dict[int, Any] = {}
    ends: list[Any] = []
    following = 0  # the next index to deliver
    readers = {fd: _Reader(pid) for fd, pid in children.items()}
    with selectors.DefaultSelector() as sel:
        for fd, reader in readers.items():
            sel.register(fd, selectors.EVENT_READ, reader)
        while sel.get_map():
            for key, _ in sel.select():
                reader = key.data
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    if not reader.ended:
                        raise PoolFailed(_death(reader.pid))
                    continue
                for message in reader.feed(chunk):
                    if message[0] == "item":
                        pending[message[1]] = message[2]
                    elif message[0] == "end":
                        reader.ended = True
                        ended.add(reader.pid)
                        ends.append(message[1])
                    else:
                        raise message[1]
                while following in pending:
                    deliver(pending.pop(following))
                    following += 1
    if following != total:  # every child ended, yet an outcome is missing: a bug
        raise PoolFailed(f"{total - following} trial(s) came back from no grading process")
    return ends


def _death(pid: int) -> str:
    """Why a child's pipe closed before its end (it is reaped here)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return f"a grading process (pid {pid}) ended without its results"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ \
            else str(sig)
        return f"a grading process (pid {pid}) was killed by {name}"
    return (f"a grading process (pid {pid}) exited {os.waitstatus_to_exitcode(status)} "
            "without its results")


def _reap(children: dict[int, int], ended: set[int]) -> None:
    """Every child waited for. One still running (the parent failed or was interrupted)
    is asked to stop (SIGINT: it stops its writer), then killed after _REAP_S."""
    for fd in children:
        with contextlib.suppress(OSError):
            os.close(fd)
    deadline = time.monotonic() + _REAP_S
    asked: set[int] = set()
    for pid in children.values():
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # reaped already (_death)
                break
            if done:
                break
            if pid in ended:  # exiting
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                break
            if pid not in asked:
                asked.add(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                break
            time.sleep(0.005)
