"""`ce run`'s live progress on a terminal (ce_runtime/cli/run_output.py)."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

from rich.console import Console

from ce_runtime.cli.run_output import Progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_running_trials_clock_moves_between_events(monkeypatch):
    """The live display rendered a table made at the last start/done: on a terminal the
    running trial's clock stayed at 0.0s for the whole trial. Each refresh renders anew."""
    monkeypatch.setattr(sys, "stderr", _Terminal())
    monkeypatch.delenv("CE_PLAIN", raising=False)
    now = [100.0]
    progress = Progress(2, 0)
    assert progress.live is not None
    try:
        progress._time = lambda: now[0]
        progress.start(SimpleNamespace(trial_id="v/t/00"))
        shown = []
        for elapsed in (0.0, 2.5, 61.0):
            now[0] = 100.0 + elapsed
            out = Console(file=io.StringIO(), width=100)
            out.print(progress.live.renderable)
            shown.append(out.file.getvalue())
    finally:
        progress.close()
    assert "v/t/00" in shown[0] and "0.0s" in shown[0]
    assert "2.5s" in shown[1] and "61.0s" in shown[2]
    assert "0/2" in shown[2]


def test_an_agent_crash_says_why_on_its_progress_line(capsys, monkeypatch):
    """An ERROR from the agent's own end has no `error` in its record (that is for the
    harness's failures): the line showed no reason; it shows the agent's."""
    from ce_runtime.store.record import AgentOutcome, Status, TrialRecord

    monkeypatch.setenv("CE_PLAIN", "1")
    progress = Progress(2, 0)
    trial = SimpleNamespace(trial_id="v/t/00")
    crashed = TrialRecord(trial_id="v/t/00", status=Status.ERROR, weighted_score=1.0,
                          agent_outcome=AgentOutcome(reason="error", detail="exit 3"))
    progress.done(trial, crashed)
    harness = TrialRecord(trial_id="v/t/01", status=Status.ERROR, error="pre_run failed")
    progress.done(SimpleNamespace(trial_id="v/t/01"), harness)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[1/2] ERROR     v/t/00")
    assert lines[0].endswith("- the agent ended in an error: exit 3")
    assert lines[1].endswith("- pre_run failed")
    assert crashed.error_reason == "the agent ended in an error: exit 3"
    assert TrialRecord(trial_id="x", status=Status.FAILURE, error="e").error_reason is None
