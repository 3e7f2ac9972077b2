"""pre_run and post_run: the task's own commands, in the trial's sandbox (grader view:
TASK_DIR and REFERENCE_DIR are set for them, never for the agent)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import attrs

from ce_runtime.execute.sandbox.base import GRADER, ExecResult, SandboxError, capped_timeout

OUTPUT_LIMIT = 100 * 1024  # bytes kept of each pre_run / post_run stream


@attrs.frozen
class CommandOutcome:
    command: str
    exit_code: int  # -1 on timeout or when the command could not start
    stdout: str  # at most OUTPUT_LIMIT bytes of it, then a note of what was cut
    stderr: str
    timed_out: bool
    duration_ms: float
    failed: bool  # fails its phase: a pre_run command with fail_on_error that did not succeed
    ok: bool = True  # exited 0 within its timeout
    fail_on_error: bool = False  # as configured (always False for post_run)


async def run_commands(commands: Sequence[Any], sandbox, phase: str) -> list[CommandOutcome]:
    """Run `commands` in order in the workspace. pre_run stops at the first failing
    command whose fail_on_error is true (its outcome is the last, with failed=True);
    post_run runs them all and never marks one failed. What a command leaves running
    (`server &`) lives until the trial's sandbox is torn down."""
    if phase not in ("pre_run", "post_run"):
        raise ValueError(f"phase must be pre_run or post_run, not {phase!r}")
    outcomes: list[CommandOutcome] = []
    for cmd in commands:
        timeout = capped_timeout(sandbox, min(300, max(1, int(cmd.timeout))))
        fail_on_error = phase == "pre_run" and bool(getattr(cmd, "fail_on_error", True))
        started = time.monotonic()
        try:
            res = await sandbox.exec(cmd.command, timeout=timeout, max_output=OUTPUT_LIMIT,
                                     view=GRADER)
        except SandboxError as exc:
            res = ExecResult(-1, "", f"could not start the command: {exc}", False,
                             (time.monotonic() - started) * 1000)
        ok = res.exit_code == 0 and not res.timed_out
        failed = fail_on_error and not ok
        outcomes.append(CommandOutcome(cmd.command, res.exit_code, res.stdout, res.stderr,
                                       res.timed_out, res.duration_ms, failed, ok,
                                       fail_on_error))
        if failed:
            break
    return outcomes
