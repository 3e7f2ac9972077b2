"""A cancelled run ends only after every trial has cleaned up.

`asyncio.gather` gives up at the first child that is cancelled while its siblings still
run; the run then ended and the event loop's shutdown cancelled the siblings a second
time, cutting their (shielded) teardown short: their inits outlived the loop ("Loop ...
that handles pid N is closed" and a traceback on ce's stderr, once in twenty CI runs).
Here the run is cancelled in-process while several trials are mid-command, and the
moment `execute` returns none of its tasks may still run and no process of ours may be
left, not even an unreaped one.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from ce_lang.api import CompileOptions, compile_paths
from ce_runtime.execute import suite as R
from tests.processes import children_of
from tests.test_run_e2e import SLOWISH


@pytest.mark.parametrize("jobs", [3, 4])
def test_cancelling_a_run_waits_for_every_trials_teardown(tmp_path, monkeypatch, jobs):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    task = tmp_path / "slowish.yaml"
    task.write_text(SLOWISH)
    result = compile_paths([str(task)], CompileOptions(repeats=2 * jobs))
    assert result.errors == 0
    run_dir = R.new_run_dir(str(tmp_path / "runs"))
    R.write_plans(run_dir, result.trials)

    async def main() -> tuple[list[str], int]:
        done: list[str] = []
        first_done = asyncio.Event()

        def on_done(trial, _record) -> None:
            done.append(trial.trial_id)
            first_done.set()

        run = asyncio.ensure_future(R.execute(list(result.trials), run_dir,
                                              R.RunOptions(jobs=jobs), None, on_done))
        await asyncio.wait_for(first_done.wait(), 60)
        run.cancel()  # the others are mid-`sleep` in their sandboxes
        with pytest.raises(asyncio.CancelledError):
            await run
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return children_of(os.getpid()), pending, len(done)

    left, pending, finished = asyncio.run(main())
    assert pending == [], f"tasks still running after the run ended: {pending}"
    assert left == [], f"processes outlived the cancelled run: {left}"
    assert 1 <= finished < 2 * jobs
    assert os.listdir(tmp_path / "tmp") == []  # every trial's scratch removed


def test_a_teardown_finishes_however_often_its_trial_is_cancelled():
    """A second (third) cancel while a trial tears down must not cut the teardown short:
    it finishes, then the cancellation goes on."""
    from ce_runtime.execute.trial import finish_despite_cancels

    async def main() -> tuple[list[str], bool]:
        steps: list[str] = []

        async def teardown() -> None:
            steps.append("start")
            await asyncio.sleep(0.2)
            steps.append("end")

        task = asyncio.ensure_future(finish_despite_cancels(teardown()))
        for _ in range(3):
            await asyncio.sleep(0.02)
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return steps, True
        return steps, False

    steps, cancelled = asyncio.run(main())
    assert steps == ["start", "end"] and cancelled
