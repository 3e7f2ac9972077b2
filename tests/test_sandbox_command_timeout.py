"""`sandbox.limits.timeout` caps every command ce runs in the sandbox for the task: it was
accepted and then inert (a criterion's `sleep 4` under `limits: {timeout: 2}` passed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

TASK = """\
task_id: capped
description: limits.timeout caps pre_run, the script agent's and the criteria's commands
initial_prompt: go
agent:
  type: script
  script:
    - run: "sleep 3; echo agent > agent.txt"
sandbox:
  driver: tempdir
  python: null
  limits: {timeout: 1}
pre_run:
  - {command: "sleep 3; echo pre > pre.txt", timeout: 30, fail_on_error: false}
success_criteria:
  - {type: run_command, command: "sleep 3; echo late", timeout: 10, description: capped}
  - {type: run_command, command: "echo quick", description: within the cap}
  - {type: file_exists, path: pre.txt, description: pre_run was cut off, weight: 0}
  - {type: file_exists, path: agent.txt, description: the agent's command too, weight: 0}
"""


def test_limits_timeout_caps_each_task_command(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK)
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                          "--run-dir", "run"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "CE_PLAIN": "1"})
    rec = json.loads((tmp_path / "run/default/capped/00/task.json").read_text())
    assert [c["score"] for c in rec["criteria"]] == [0.0, 1.0, 0.0, 0.0], res.stderr
    assert rec["pre_run"][0]["exit_code"] == -1  # timed out at 1 s, not 30
    assert res.returncode == 1  # c0 gates
