"""Regular expressions from tasks run on text the agent wrote: each search has a time
budget, and running out is a criterion error, never a hang (issue 9)."""

from __future__ import annotations

import json

import pytest

from ce_lang.lang.builtins import REGEX_BUDGET_S, CriterionError, regex_search
from ce_runtime.grade.monitor import MONITOR_REGEX_BUDGET_S
from tests.test_run_e2e import ce, run_dir_in, task_jsons

EVIL = "^(a|aa)+$"  # exponential backtracking on a run of a's that does not end the line
TEXT = "a" * 40 + "!"


def test_a_catastrophic_search_is_a_criterion_error_within_the_budget():
    with pytest.raises(CriterionError, match=rf"ran out of its {REGEX_BUDGET_S:g} s budget "
                       "on 41 characters"):
        regex_search(EVIL, 0, TEXT)
    assert regex_search(EVIL, 0, "a" * 40) is True  # the same pattern, a text it matches
    assert regex_search("A+", 2, "xaax") is True  # re's flag values (IGNORECASE) still mean it


def test_redos_in_a_task_ends_in_errors_not_a_hang(tmp_path):
    """A file criterion and an armed trace criterion, both with the evil pattern, under a
    short task_timeout: the run ends, each criterion is an error naming the budget."""
    (tmp_path / "redos.yaml").write_text(f"""
task_id: redos
description: catastrophic patterns on the agent's text
initial_prompt: Write it.
agent:
  type: script
  script:
    - write: out.txt
      content: "{TEXT}"
    - run: echo {TEXT}
run_limits: {{task_timeout: 20, stop_early: true}}
sandbox: {{python: null}}
success_criteria:
  - type: file_matches_regex
    description: the evil pattern over the file
    path: out.txt
    pattern: "{EVIL}"
  - type: command_executed
    description: the evil pattern over the commands, armed
    command_pattern: "(a|aa)+!?$x"
    stop_when: pass
""")
    # without the budget this runs for minutes: the subprocess timeout is the hang check
    res = ce("run", "redos.yaml", "--runs-root", "runs", cwd=str(tmp_path), timeout=120)
    assert res.returncode == 1, res.stderr
    record = next(iter(task_jsons(run_dir_in(str(tmp_path / "runs"))).values()))
    errors = [c["error"] for c in record["criteria"]]
    assert all(e and "budget" in e for e in errors), json.dumps(record["criteria"], indent=1)
    assert record["status"] == "FAILURE"
    # the live monitor, on the loop that enforces the timeout, searched on its own small
    # budget and gave the armed criterion up (it decided nothing) instead of blocking
    [armed_id] = record["monitor_gave_up"]
    assert f"{MONITOR_REGEX_BUDGET_S:g} s budget" in record["monitor_gave_up"][armed_id]
    assert not record["stopped_early"]
    assert f"{REGEX_BUDGET_S:g} s budget" in record["criteria"][1]["error"]  # the grader's


def test_the_monitor_gives_an_armed_criterion_up_once_and_keeps_following_the_others(
        tmp_path):
    """Events feed the monitor directly: the evil criterion is searched once (its first
    command) then skipped; a sane armed criterion beside it still decides."""
    from ce_lang.api import CompileOptions, compile_paths, program_for
    from ce_runtime.grade.monitor import LiveMonitor
    from ce_runtime.trace import events as T

    (tmp_path / "two_armed.yaml").write_text("""
task_id: two_armed
description: d
initial_prompt: go
agent: {type: claude-code}
run_limits: {stop_early: true}
success_criteria:
  - type: command_executed
    description: evil
    command_pattern: "(a|aa)+!?$x"
    stop_when: pass
  - type: command_executed
    description: sane
    command_pattern: "^make test$"
    stop_when: pass
""")
    result = compile_paths([str(tmp_path / "two_armed.yaml")], CompileOptions())
    assert result.errors == 0, result.diagnostics
    trial = result.trials[0]
    monitor = LiveMonitor(trial.plan, program_for(trial.plan, plan_hash=trial.plan_hash))
    evil_id, sane_id = (c.id for c in trial.plan.criteria)
    searched = []
    for i, cmd in enumerate([TEXT] * 5 + ["make test"]):
        monitor.on_event(T.ToolCall(float(i), f"c{i}", "Bash", "Bash", {"command": cmd}))
        monitor.on_event(T.ToolResult(float(i), f"c{i}", "ok", False))
        searched.append(evil_id in monitor.gave_up)
    assert searched == [True] * 6  # given up at the first command, never searched again
    assert [d.criterion for d in monitor.decisions] == [sane_id]
