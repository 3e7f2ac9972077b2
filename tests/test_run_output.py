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


def test_plain_output_says_what_is_running_after_a_silence(capsys, monkeypatch):
    """A CI log (no terminal) printed a line only when a trial ended: minutes of silence
    for an agent's trial, which looks hung (and some CI services end such a job)."""
    import time

    monkeypatch.setenv("CE_PROGRESS_EVERY", "0.1")
    progress = Progress(3, 1)
    try:
        assert progress.live is None
        progress.start(SimpleNamespace(trial_id="v/slow/00"))
        progress.start(SimpleNamespace(trial_id="v/other/00"))

        def wait_for(text: str) -> str:
            err, deadline = "", time.monotonic() + 10
            while text not in err and time.monotonic() < deadline:
                time.sleep(0.05)
                err += capsys.readouterr().err
            return err

        err = wait_for("running")
        progress.done(SimpleNamespace(trial_id="v/slow/00"),
                      {"trial_id": "v/slow/00", "status": "SUCCESS", "weighted_score": 1.0})
        after = wait_for("running   v/other/00")
        progress.done(SimpleNamespace(trial_id="v/other/00"),
                      {"trial_id": "v/other/00", "status": "SUCCESS", "weighted_score": 1.0})
        time.sleep(0.3)  # nothing running: no more `running` lines
        after += capsys.readouterr().err
    finally:
        progress.close()
    assert "[1/3] running   v/slow/00 0s, v/other/00 0s" in err, err
    lines = after.splitlines()
    assert lines[0].startswith("[2/3] SUCCESS   v/slow/00"), after
    assert lines[1].startswith("[2/3] running   v/other/00"), after
    assert lines[-1].startswith("[3/3] SUCCESS   v/other/00"), after


def test_the_progress_interval_is_read_leniently(monkeypatch):
    from ce_runtime.cli.run_output import HEARTBEAT_S, _clock, _heartbeat_s

    for raw, want in (("", HEARTBEAT_S), ("30", 30.0), ("0", 0.0), ("-5", 0.0),
                      ("nan", 0.0), ("inf", 0.0), ("soon", HEARTBEAT_S)):
        monkeypatch.setenv("CE_PROGRESS_EVERY", raw)
        assert _heartbeat_s() == want, raw
    assert [_clock(s) for s in (0.4, 59.9, 60, 185, 3725)] == \
        ["0s", "59s", "1m00s", "3m05s", "1h02m"]


def test_a_run_logs_its_running_trial_while_it_runs(tmp_path):
    """End to end: `ce run` into a log (stderr not a terminal) with a trial that takes a
    while says it is running before it ends."""
    import os
    import subprocess

    (tmp_path / "t.yaml").write_text(
        "task_id: slow\ndescription: a trial that takes a while\ninitial_prompt: wait\n"
        "agent: {type: script, script: [{run: sleep 1.5}]}\n"
        "sandbox: {driver: tempdir, python: null}\n"
        "success_criteria:\n  - {type: command_executed, command_pattern: sleep, "
        "description: it waited}\n")
    env = {**os.environ, "CE_PROGRESS_EVERY": "0.4"}
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                          "--runs-root", "runs"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    running = [n for n, line in enumerate(lines) if line.startswith("[0/1] running   "
                                                                     "default/slow/00 ")]
    ended = [n for n, line in enumerate(lines) if line.startswith("[1/1] SUCCESS")]
    assert running and ended and running[-1] < ended[0], res.stderr


def test_the_end_of_a_run_says_why_its_trials_errored():
    """Grouped by reason, most frequent first: with -q the run said `8 ERROR` and nothing
    of why."""
    from ce_runtime.cli.run_output import error_lines

    def rec(n: int, status: str, error: str | None = None, **extra) -> dict:
        return {"trial_id": f"default/t{n}/00", "task_id": f"t{n}", "status": status,
                "error": error, **extra}

    records = [rec(1, "ERROR", "sandbox set-up failed: disk\n  full"),
               rec(2, "SUCCESS"), rec(3, "FAILURE"),
               rec(4, "ERROR", "sandbox set-up failed: disk full"),
               rec(5, "ERROR", None, agent_outcome={"reason": "error", "detail": "exit 7"}),
               rec(6, "ERROR")]
    assert error_lines(records) == [
        "ERROR in 2 trial(s) (default/t1/00, ...): sandbox set-up failed: disk full",
        "ERROR in 1 trial(s) (default/t5/00): the agent ended in an error: exit 7",
        "ERROR in 1 trial(s) (default/t6/00): no reason recorded"]
    assert error_lines(records, most=1)[-1] == \
        "ERROR in 2 more trial(s), 2 other reason(s): see the report"
    assert error_lines([rec(2, "SUCCESS")]) == []
