"""An agent_judge's session as the trial keeps it, through `ce run --judge-replies` (the
judge is the real Claude Code CLI against ce's loopback server): `capture_transcript` and
`max_transcript_chars` were accepted and inert (the whole transcript was kept), a file
reference was not at `_reference/` for the judge (only a directory one was), and the
reference's text the judge read was kept in the transcript."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

TASK = """\
task_id: aj
description: an agent judge that lists its workspace and reads the reference
initial_prompt: write add
agent:
  type: script
  script:
    - {{write: add.py, content: "def add(a, b):\\n    return a + b\\n"}}
reference: {{file: sol.py}}
sandbox: {{python: null}}
success_criteria:
  - type: agent_judge
    prompt: "check add.py"
    include_reference: true
    max_turns: 5
{settings}
    description: agent judge
"""
REPLIES = """\
agent_judge:
  - text: "Listing"
    tool: Bash
    input: {command: "ls _reference; cat _reference/sol.py"}
  - text: '{"score": 0.75, "rationale": "looked fine"}'
"""
SOLUTION = 'def add(a, b):\n    """A_REFERENCE_LINE_SECRET"""\n    return a + b\n'


def _session(tmp_path, settings: str) -> dict:
    (tmp_path / "t.yaml").write_text(TASK.format(settings=settings))
    (tmp_path / "replies.yaml").write_text(REPLIES)
    (tmp_path / "sol.py").write_text(SOLUTION)
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                          "--judge-replies", "replies.yaml", "--run-dir", "run"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CE_PLAIN": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    trial = tmp_path / "run" / "default" / "aj" / "00"
    for name in ("task.json", "evidence.json"):
        assert "A_REFERENCE_LINE_SECRET" not in (trial / name).read_text()
    [session] = json.loads((trial / "task.json").read_text())["judge_sessions"]
    return session


def test_the_transcript_is_kept_scrubbed_and_the_file_reference_is_mounted(tmp_path):
    session = _session(tmp_path, "")
    [listed] = [e["output"] for e in session["transcript"] if e["type"] == "tool_result"]
    assert listed.startswith("sol.py\n")  # _reference/ holds the reference file
    assert "[reference scrubbed]" in listed


def test_capture_transcript_false_keeps_none(tmp_path):
    session = _session(tmp_path, "    capture_transcript: false")
    assert session["transcript"] == [] and session["transcript_kept"] is False
    assert session["usage"]  # what the judge spent is still counted


def test_max_transcript_chars_cuts_the_transcript(tmp_path):
    session = _session(tmp_path, "    max_transcript_chars: 300")
    assert len(json.dumps(session["transcript"], ensure_ascii=False)) <= 300
    assert "not kept (max_transcript_chars 300)" in session["transcript_cut"]
