"""An agentless task (`agent: {type: none}`) that sets agent limits: each is a CE0214
warning at its key (tests/corpus/rules/agentless_limits.yaml), and its trials are left
out of the within-expected-turns metric. They counted as within any budget with their 0
turns: a suite of agentless checks read "100% within expected turns"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

TASK = """\
task_id: {id}
description: d
{agent}
run_limits: {{expected_turns: 2}}
sandbox: {{python: null}}
success_criteria:
  - {{type: file_exists, path: made.txt, description: made}}
"""


def test_an_agentless_trial_is_not_counted_within_expected_turns(tmp_path):
    (tmp_path / "none.yaml").write_text(TASK.format(
        id="none", agent="agent: {type: none}\npre_run: [{command: touch made.txt}]"))
    (tmp_path / "script.yaml").write_text(TASK.format(
        id="script", agent="initial_prompt: go\nagent: {type: script, script: "
                           "[{write: made.txt, content: x}]}"))
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", ".", "--run-dir",
                          "R"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CE_PLAIN": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "none.yaml:5:14: warning[CE0214]: `run_limits.expected_turns` has no effect" \
        in res.stderr, res.stderr
    run = json.loads((tmp_path / "R" / "run.json").read_text())
    assert run["within_expected_turns"] == {"budgeted": 1, "share": 1.0, "within": 1}
    none = json.loads((tmp_path / "R" / "default" / "none" / "00" / "task.json").read_text())
    assert none["status"] == "SUCCESS" and none.get("expected_turns") is None
