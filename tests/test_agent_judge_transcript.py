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


LLM_TASK = """\
task_id: lj
description: llm judges that do and do not keep their answer
agent: {{type: none}}
sandbox: {{python: null}}
reference: {{file: sol.py}}
success_criteria:
  - {{type: llm_judge, prompt: KEEP, include_reference: true, description: kept{cap}}}
  - {{type: llm_judge, prompt: DROP, capture_transcript: false, description: not kept}}
"""
LLM_REPLIES = """\
judge:
  - {match: KEEP, score: 0.9, rationale: "quotes x = 'THE_REFERENCE_LINE_1234' at length"}
  - {match: DROP, score: 0.8, rationale: "fine"}
"""


@pytest.mark.parametrize("cap", [None, 40])
def test_llm_judge_keeps_its_answer_as_capture_transcript_says(tmp_path, cap):
    """capture_transcript (default true: "keep the judge's exchange") kept nothing of an
    llm_judge's answer: it is now in evidence.json, capped, scrubbed, or left out."""
    (tmp_path / "t.yaml").write_text(LLM_TASK.format(
        cap="" if cap is None else f", max_transcript_chars: {cap}"))
    (tmp_path / "replies.yaml").write_text(LLM_REPLIES)
    (tmp_path / "sol.py").write_text("x = 'THE_REFERENCE_LINE_1234'\n")
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                          "--judge-replies", "replies.yaml", "--run-dir", "run"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "CE_PLAIN": "1"})
    assert res.returncode == 0, res.stdout + res.stderr
    evidence = json.loads((tmp_path / "run/default/lj/00/evidence.json").read_text())
    kept, dropped = ([r for r in evidence["criteria"][c] if r["kind"] == "judge"]
                     for c in ("c0", "c1"))
    assert "answer" not in dropped[0]
    answer = kept[0]["answer"]
    assert '"score": 0.9' in answer or cap is not None
    assert "THE_REFERENCE_LINE_1234" not in answer
    if cap is not None:
        assert len(answer) <= cap


def test_a_request_no_scripted_verdict_matches_says_so(tmp_path):
    """It said only "the judge's verdict has no `score`"."""
    (tmp_path / "t.yaml").write_text(
        "task_id: nm\ndescription: a judge request no reply matches\nagent: {type: none}\n"
        "sandbox: {python: null}\nsuccess_criteria:\n"
        "  - {type: llm_judge, prompt: zzz, description: no matching entry}\n")
    (tmp_path / "replies.yaml").write_text("judge:\n  - {match: NOTHING, score: 1}\n")
    subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                    "--judge-replies", "replies.yaml", "--run-dir", "run"], cwd=tmp_path,
                   capture_output=True, text=True, timeout=300)
    [c] = json.loads((tmp_path / "run/default/nm/00/task.json").read_text())["criteria"]
    assert c["score"] == 0.0
    assert c["error"] == ("the judge's verdict has no `score` (its rationale: no scripted "
                          "verdict matches this request)")
