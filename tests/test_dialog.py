"""Simulated dialogs end to end: the real Claude Code CLI (and ce's openai loop) talking
with a scripted simulated user through `ce run --scripted-model`; the dialog in the
trace; a judge with include_dialog that sees it; the ways a dialog ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ce_runtime.trace.events import read_trace

pytestmark = pytest.mark.slow

TASK = """\
task_id: sim
description: a dialog with a simulated user
initial_prompt: I need a greeting script.
agent: {{type: {agent}, allowed_tools: [Write, Bash]}}
sandbox: {{python: null}}
simulation:
  enabled: true
  persona: A busy product manager.
  goal: Get hello.py that prints "Hello, Ada!".
{extra}
success_criteria:
  - type: file_contains
    path: hello.py
    includes: ["Hello, Ada!"]
    description: the greeting names Ada
  - type: llm_judge
    prompt: Did the assistant do what the user asked in the dialog?
    include_dialog: true
    description: the judge reads the dialog
"""
WRITES = {"claude-code": {"tool": "Write", "input": {"file_path": "{workspace}/hello.py",
                                                     "content": "print('Hello, Ada!')\n"}},
          "openai": {"tool": "write", "input": {"path": "hello.py",
                                                "content": "print('Hello, Ada!')\n"}}}
JUDGE = """\
judge:
  - match: "It should greet Ada by name"
    score: 1.0
    rationale: the user asked for Ada in the dialog, and got it
  - score: 0.0
    rationale: the judge never saw the dialog
"""


def run(tmp: Path, agent: str, extra: str = "  max_turns: 5") -> tuple[dict, list]:
    (tmp / "sim.yaml").write_text(TASK.format(agent=agent, extra=extra))
    script = {"steps": [{"text": "What should it print?"}, WRITES[agent],
                        {"text": "hello.py prints Hello, Ada!"}, {"text": "Anything else?"},
                        {"text": "Bye."}],
              "user_turns": ["It should greet Ada by name.", "Good. Anything else from me?",
                             "Thanks, that's all. <<<END>>>"]}
    (tmp / f"sim.{agent}.model.yaml").write_text(json.dumps(script))
    (tmp / "judge.yaml").write_text(JUDGE)
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "sim.yaml",
                          "--scripted-model", "--judge-replies", "judge.yaml", "--runs-root",
                          "runs"], cwd=tmp, env={**os.environ, "CE_PLAIN": "1"},
                         capture_output=True, text=True, timeout=300)
    d = next((tmp / "runs").glob("*/default/sim/00"))
    record = json.loads((d / "task.json").read_text())
    assert res.returncode in (0, 1), res.stderr
    return record, read_trace(str(d / "trace.msgpack")).events


@pytest.mark.parametrize("agent", ["claude-code", "openai"])
def test_a_dialog_runs_three_user_turns_and_ends_on_the_stop_token(agent, tmp_path):
    record, events = run(tmp_path, agent)
    assert record["status"] == "SUCCESS", (record["agent_outcome"], record["error"])
    assert record["dialog"]["ended_by"] == "stop_token"
    users = [e.text for e in events if type(e).__name__ == "Message" and e.role == "user"]
    assert users == ["I need a greeting script.", "It should greet Ada by name.",
                     "Good. Anything else from me?", "Thanks, that's all."]
    assert record["dialog"]["turns"] == 3
    judge = record["criteria"][1]
    assert judge["score"] == 1.0  # its scripted verdict needs the dialog's second turn


def test_stop_on_criteria_pass_ends_the_dialog_after_the_turn_that_passes(tmp_path):
    record, _ = run(tmp_path, "claude-code",
                    "  max_turns: 5\n  check_criteria: every_turn\n"
                    "  stop_on_criteria_pass: true")
    assert record["status"] == "SUCCESS"
    assert record["dialog"]["ended_by"] == "criteria_pass"
    assert [c["passed"] for c in record["dialog"]["checks"]] == [False, True]


def test_max_turns_ends_a_dialog_that_never_stops(tmp_path):
    record, _ = run(tmp_path, "openai", "  max_turns: 2")
    assert record["dialog"]["ended_by"] == "max_turns" and record["dialog"]["turns"] == 2
