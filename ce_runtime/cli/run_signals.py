"""`ce run`'s stop signals: Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the trials; they
never cut the writes that finish the run directory.

While the trials run, Ctrl-C is asyncio's (the first cancels the run, a second one
forces it); SIGTERM and SIGHUP (a `kill`, a closed terminal, a CI job cancelled) end the
run as Ctrl-C does: their handler cancels the main task itself rather than raising
SIGINT, so they work where SIGINT is ignored (a script's background job, nohup). The
trials are cancelled (their processes killed, their scratch removed). Before the trials
start and once they are done, each signal is noted and said, and the run directory is
finished first (run.json, the reports): a Ctrl-C there left run.json "running" and no
report. A signal before the trials start stops them before any starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


class Stops:
    """The signals a run receives, from `install` (before run.json says "running") to
    `restore` (every write done)."""

    def __init__(self) -> None:
        self.received: list[str] = []
        self._before: dict[int, object] = {}
        self._running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task]] = []
        # Ctrl-C is taken over only where it is Python's own (not ignored, as in a
        # script's background job, nor handled by whoever runs ce in-process)
        self._own_sigint = signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def install(self) -> Stops:
        for sig in (signal.SIGTERM, signal.SIGHUP) + \
                ((signal.SIGINT,) if self._own_sigint else ()):
            self._before[sig] = signal.signal(sig, self._on_signal)
        return self

    def restore(self) -> None:
        """The handlers before `install` (`ce run` called in-process: its caller's)."""
        for sig, handler in self._before.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame) -> None:
        name = f"{signal.Signals(signum).name} received"
        first = not self.received
        self.received.append(name)
        if self._running and not self._running[0][0].is_closed():
            if first:
                loop, task = self._running[0]
                loop.call_soon_threadsafe(task.cancel)  # also wakes the loop's select()
            return
        if first:  # os.write: safe wherever the handler interrupts the main thread
            with contextlib.suppress(OSError):
                os.write(2, f"\nce run: {name}: the run directory is finished first "
                            "(run.json, the reports)\n".encode())

    def run(self, work) -> str | None:
        """Run the trials' coroutine; what stopped it early ("interrupted" for Ctrl-C,
        "SIGTERM received", ...) or None when it finished."""
        running = self._running

        async def main():
            running.append((asyncio.get_running_loop(), asyncio.current_task()))
            if self.received:  # stopped before the loop started
                work.close()
                raise asyncio.CancelledError
            return await work

        if self._own_sigint:  # asyncio's Ctrl-C while the trials run
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            return self.received[0] if self.received else "interrupted"
        except asyncio.CancelledError:
            if not self.received:
                raise
            return self.received[0]
        finally:
            running.clear()
            if self._own_sigint:
                signal.signal(signal.SIGINT, self._on_signal)
        return self.received[0] if self.received else None
