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
