"""`sandbox.mock_path_dirs` (coder_eval's): workspace directories of mock executables,
made executable after the template sources and first on the agent's PATH (the grader
sees the real tools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.engines import bwrap_missing, need

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: mocks
description: a mock executable placed by the task, called by name
initial_prompt: run say_hello into out.txt
agent:
  type: script
  script:
    - run: say_hello a b > out.txt; command -v say_hello > where.txt
sandbox:
  driver: DRIVER
  python: null
  mock_path_dirs: [mocks, missing-dir]
  template_sources:
    - type: starter_files
      files:
        - path: mocks/say_hello
          content: |
            #!/bin/sh
            echo "MOCK_PATH_OK args=$*"
success_criteria:
  - type: file_contains
    path: out.txt
    includes: ["MOCK_PATH_OK args=a b"]
    description: the agent ran the mock
  - type: run_command
    command: "! command -v say_hello"
    description: criteria see the real PATH, without the mocks
"""


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "bwrap"])
def test_the_agent_runs_the_mock_by_name(tmp_path, driver):
    if driver == "bwrap":
        need(bwrap_missing())
    (tmp_path / "t.yaml").write_text(TASK.replace("DRIVER", driver))
    res = subprocess.run([*CE, "run", "t.yaml", "--runs-root", "runs"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    rec = json.loads((tmp_path / "runs" / "latest" / "default" / "mocks" / "00" /
                      "task.json").read_text())
    assert res.returncode == 0, (res.stderr, rec.get("error"), rec.get("criteria"))
    assert rec["status"] == "SUCCESS"
    assert "mock_path_dirs: missing-dir: no such directory in the workspace after set-up " \
        "(skipped: nothing of it is on the agent's PATH)" in rec["setup"], rec["setup"]


def test_mock_path_dirs_must_stay_in_the_workspace(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK.replace("DRIVER", "tempdir")
                                     .replace("[mocks, missing-dir]", "[../mocks]"))
    res = subprocess.run([*CE, "compile", "t.yaml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1
    assert "t.yaml:11:20: error[CE0206]: `sandbox.mock_path_dirs[0]` '../mocks' escapes " \
        "the workspace" in res.stderr, res.stderr


def test_the_mocks_are_first_on_the_agents_path_only():
    from ce_runtime.execute.sandbox.base import AGENT, GRADER, SandboxSpec, agent_path

    spec = SandboxSpec("t", "/s", "/task", mock_path_dirs=("mocks", "bin/tools"))
    assert agent_path(spec, "/ws", "/usr/bin", AGENT) == "/ws/mocks:/ws/bin/tools:/usr/bin"
    assert agent_path(spec, "/ws", "/usr/bin", GRADER) == "/usr/bin"
    assert os.pathsep == ":"


def test_a_mock_dir_missing_or_outside_the_workspace_is_said_in_the_setup_log(tmp_path):
    """Skipped as in coder_eval, never silently: a misspelt name would leave the agent
    running the real tool."""
    from types import SimpleNamespace

    from ce_runtime.execute.sandbox.workspace import _mark_mocks_executable

    (tmp_path / "ws" / "mocks").mkdir(parents=True)
    (tmp_path / "ws" / "mocks" / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "ws" / "away").symlink_to(tmp_path / "outside")
    plan = SimpleNamespace(sandbox=SimpleNamespace(mock_path_dirs=("mocks", "mokcs", "away")))
    log: list[str] = []
    _mark_mocks_executable(plan, str(tmp_path / "ws"), log)
    assert log == ["mock_path_dirs: mocks: 1 executable(s)",
                   "mock_path_dirs: mokcs: no such directory in the workspace after set-up "
                   "(skipped: nothing of it is on the agent's PATH)",
                   "mock_path_dirs: away: resolves outside the workspace (skipped)"]
    assert os.stat(tmp_path / "ws" / "mocks" / "tool").st_mode & 0o111
