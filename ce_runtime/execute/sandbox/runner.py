"""Criteria commands from the grading thread, run by a sandbox on its event loop.

Grading is synchronous and runs in a worker thread (so a slow criterion never blocks the
loop that enforces timeouts); the sandbox is asynchronous. `SandboxRunner` bridges the
two, and `local_runner` gives sync callers (rescore, explain, tests) a tempdir sandbox
around an existing workspace with a loop of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from ce_runtime.execute.sandbox.base import (
    GRADER,
    ExecResult,
    SandboxError,
    SandboxSpec,
    capped_timeout,
)
from ce_runtime.grade.host import InfrastructureError


class RunnerCancelled(InfrastructureError):
    pass


class SandboxRunner:
    """The grader's commands: `run` from a worker thread, `cancel` from any thread."""

    def __init__(self, sandbox, loop: asyncio.AbstractEventLoop, view: str = GRADER):
        self.sandbox = sandbox
        self.loop = loop
        self.view = view
        self._tasks: set[asyncio.Task] = set()  # touched in the loop's thread only
        self._cancelled = False

    def run(self, command: str, timeout: float, max_output: int) -> ExecResult:
        if self._cancelled:
            raise RunnerCancelled("grading was cancelled")
        future = asyncio.run_coroutine_threadsafe(
            self._exec(command, timeout, max_output), self.loop)
        try:
            return future.result()
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise RunnerCancelled("grading was cancelled") from None
        except SandboxError as exc:
            raise InfrastructureError(f"the sandbox was lost: {exc}") from None

    async def _exec(self, command: str, timeout: float, max_output: int) -> ExecResult:
        if self._cancelled:
            raise asyncio.CancelledError
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            return await self.sandbox.exec(command, timeout=capped_timeout(self.sandbox, timeout),
                                           max_output=max_output, view=self.view)
        finally:
            self._tasks.discard(task)

    def run_agent(self, work: str, prompt: str, agent: dict[str, Any],
                  endpoint: dict[str, Any], max_turns: int, timeout: float) -> dict[str, Any]:
        """An agent_judge's session in a sandbox of the trial's driver (see
        execute.judge_session), from the grading thread."""
        from ce_runtime.execute.judge_session import judge_session

        future = asyncio.run_coroutine_threadsafe(judge_session(
            self.sandbox.driver, work, prompt, agent, endpoint, max_turns, timeout),
            self.loop)
        try:
            return future.result()
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise RunnerCancelled("grading was cancelled") from None

    def cancel(self) -> None:
        """Kill the running commands and refuse more. From another thread it returns once
        they are dead; from the loop's own thread it cannot wait (the caller tears the
        sandbox down next, which kills everything anyway)."""
        self._cancelled = True

        async def cancel_all() -> None:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            for task in list(self._tasks):
                task.cancel()
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(30)


class LocalRunner:
    """A sandbox around an existing workspace, started on the first command, with a loop
    thread of its own (re-grading an archived trial, explaining it, tests): most
    re-gradings run no command and pay nothing. Given the trial's `plan`, it is the
    trial's own environment again: its driver, limits and variables, and its venv and
    node packages rebuilt in the workspace (the snapshot leaves them out)."""

    def __init__(self, workspace: str, task_dir: str = "", reference: tuple[str, ...] = (),
                 driver: str = "tempdir", plan: Any = None, uv_cache: str | None = None,
                 before_start: Any = None):
        self.args = (os.path.abspath(workspace), task_dir, tuple(reference), driver)
        self.plan = plan
        self.before_start = before_start  # called once, before the first command
        self.uv_cache = uv_cache
        self.setup_log: list[str] = []
        self._inner: SandboxRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sandbox = None
        self._scratch: str | None = None
        self._cancelled = False

    def _start(self) -> SandboxRunner:
        from ce_runtime.execute.sandbox import open_sandbox

        workspace, task_dir, reference, driver = self.args
        if self.before_start is not None:
            self.before_start()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ce-sandbox",
                                        daemon=True)
        self._thread.start()
        self._scratch = tempfile.mkdtemp(prefix="ce-regrade-")
        if self.plan is not None:
            from ce_runtime.execute.trial import spec_for_plan

            driver = self.plan.sandbox.driver
            spec = spec_for_plan(self.plan, task_dir, self._scratch, workspace=workspace,
                                 uv_cache=self.uv_cache)
        else:
            spec = SandboxSpec(trial_id="regrade", scratch=self._scratch, task_dir=task_dir,
                               reference=reference, workspace=workspace)
        self._sandbox = open_sandbox(driver, spec)

        async def up() -> None:
            await self._sandbox.start()
            if self.plan is not None:
                setup = await self._sandbox.prepare(self.plan, sources=False)
                self.setup_log = list(setup.log)
                if not setup.ok:
                    raise SandboxError(f"rebuilding the trial's environment: {setup.error}")
        try:
            asyncio.run_coroutine_threadsafe(up(), self._loop).result()
        except SandboxError as exc:
            raise InfrastructureError(str(exc)) from None
        return SandboxRunner(self._sandbox, self._loop)

    def run(self, command: str, timeout: float, max_output: int) -> ExecResult:
        if self._cancelled:
            raise RunnerCancelled("grading was cancelled")
        if self._inner is None:
            self._inner = self._start()
        return self._inner.run(command, timeout, max_output)

    def run_agent(self, work: str, prompt: str, agent: dict[str, Any],
                  endpoint: dict[str, Any], max_turns: int, timeout: float) -> dict[str, Any]:
        if self._cancelled:
            raise RunnerCancelled("grading was cancelled")
        if self._inner is None:
            self._inner = self._start()
        return self._inner.run_agent(work, prompt, agent, endpoint, max_turns, timeout)

    def cancel(self) -> None:
        self._cancelled = True
        if self._inner is not None:
            self._inner.cancel()

    def close(self) -> None:
        if self._loop is None:
            return
        if self._sandbox is not None:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._sandbox.teardown(),
                                                 self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop.close()
        self._loop = None
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)


@contextlib.contextmanager
def local_runner(workspace: str, task_dir: str = "", reference: tuple[str, ...] = (),
                 driver: str = "tempdir", plan: Any = None,
                 uv_cache: str | None = None, before_start: Any = None
                 ) -> Iterator[LocalRunner]:
    runner = LocalRunner(workspace, task_dir, reference, driver, plan, uv_cache, before_start)
    try:
        yield runner
    finally:
        runner.close()
