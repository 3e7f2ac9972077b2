"""Regular expressions from tasks run on text the agent wrote: each search has a time
budget, and running out is a criterion error, never a hang (issue 9)."""

from __future__ import annotations

import json

import pytest

from ce_lang.lang.builtins import REGEX_BUDGET_S, CriterionError, regex_search
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
    res = ce("run", "redos.yaml", "--run-dir", "runs", cwd=str(tmp_path), timeout=120)
    assert res.returncode == 1, res.stderr
    record = next(iter(task_jsons(run_dir_in(str(tmp_path / "runs"))).values()))
    errors = [c["error"] for c in record["criteria"]]
    assert all(e and "budget" in e for e in errors), json.dumps(record["criteria"], indent=1)
    assert record["status"] == "FAILURE"
