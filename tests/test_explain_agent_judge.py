"""`ce explain` of agent_judge (and llm_judge) verdicts, pinned: real `ce run`s graded by
scripted judges (`--judge-replies`; the agent_judge is the real Claude Code CLI against
the loopback server), then `ce explain` of the archived trial: the verdict and where it
came from, tokens and cost, the rationale, the judge's session (how it ended, each tool
call it made) and, when it gave no verdict, its last words; a score clamped into [0, 1]
or not a number said so. The same explanation after `ce rescore`.

It said `judge: score None (recorded verdict a9c28dd301a8); 10+10 tokens` for a judge
that answered prose, nothing of what it answered; `the judge's verdict holds no JSON
object` for one that ran out of max_turns; and for one that hit turn_timeout, explaining
the archived trial said `agent_judge: no recorded verdict for this request, and judges
are offline` under `NOTE: this re-grade differs from the recorded grade (recorded
FAILURE 0.5, now FAILURE 0.5): c1 agent_judge: recorded 0 error, now 0 error (...)`: the
timeout was not said anywhere.

Regenerate with `CE_UPDATE_GOLDENS=1 pytest tests/test_explain_agent_judge.py`, then
read the diff.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from tests.goldens import match_golden

GOLDEN = Path(__file__).parent / "golden" / "explain_judges"
CE = [sys.executable, "-m", "ce_runtime.cli"]
NO_JUDGE = {k: v for k, v in os.environ.items()
            if k not in ("CE_JUDGE_URL", "CE_JUDGE_API_KEY", "ANTHROPIC_API_KEY",
                         "OPENAI_API_KEY", "AWS_BEARER_TOKEN_BEDROCK", "API_BACKEND")}

TASK = """\
task_id: judge_qa
description: agent_judge explained
initial_prompt: write answer.txt
agent:
  type: script
  script:
    - run: "echo 'the answer is 41' > answer.txt"
sandbox:
  driver: tempdir
  python: null
success_criteria:
  - type: agent_judge
    prompt: Check that answer.txt says 42. Score 1.0 if it does, 0.5 if a number close to it, 0.
    files: [answer.txt]
    max_turns: MAX_TURNS
    turn_timeout: TURN_TIMEOUT
    description: the judge agrees the answer is 42
"""

REPLIES = {
    "fail": """\
agent_judge:
  - tool: Bash
    input: {command: "cat answer.txt", description: read}
  - text: '{"score": 0.5, "rationale": "answer.txt says 41, not 42: close but wrong"}'
""",
    "prose": """\
agent_judge:
  - tool: Read
    input: {file_path: "{workspace}/answer.txt"}
  - text: "looks fine to me, I would give it a solid B"
""",
    "max_turns": """\
agent_judge:
  - tool: Bash
    input: {command: "ls", description: list}
  - tool: Bash
    input: {command: "cat answer.txt", description: read}
  - tool: Bash
    input: {command: "wc answer.txt", description: count}
  - text: '{"score": 1.0, "rationale": "never reached"}'
""",
    "timeout": """\
agent_judge:
  - tool: Bash
    input: {command: "python3 -c 'import time; time.sleep(120)'", description: wait}
  - text: '{"score": 1.0, "rationale": "never reached"}'
""",
}


def _run(root: Path, name: str, max_turns: int = 6, turn_timeout: int = 240) -> Path:
    here = root / name
    here.mkdir()
    (here / "t.yaml").write_text(TASK.replace("MAX_TURNS", str(max_turns))
                                 .replace("TURN_TIMEOUT", str(turn_timeout)))
    (here / "replies.yaml").write_text(REPLIES[name])
    res = subprocess.run([*CE, "run", "t.yaml", "--judge-replies", "replies.yaml",
                          "--run-dir", "run", "-q"], cwd=here, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr  # every case fails its judge
    return here / "run"


def _explain(trial: Path) -> str:
    result = CliRunner().invoke(main, ["explain", str(trial), "--criterion", "c0"])
    assert result.exit_code == 1, result.output
    return result.stdout


def _golden(name: str, out: str) -> None:
    match_golden(GOLDEN / f"{name}.txt", out)


@pytest.mark.slow
def test_a_verdict_under_the_threshold_and_after_a_rescore(tmp_path):
    run = _run(tmp_path, "fail")
    out = _explain(run / "default" / "judge_qa" / "00")
    assert "score 0.5 (continuous) vs pass threshold 0.7 -> FAIL" in out
    assert "judge (agent_judge, claude-sonnet-4-6): score 0.5; recorded verdict judges/" in out
    assert "rationale: answer.txt says 41, not 42: close but wrong" in out
    assert "session (max_turns 6, turn_timeout 240 s): finished after 2 turns, 1 tool " \
           "call:\n        Bash 'cat answer.txt' (turn 1, ok)" in out
    assert "its last words" not in out  # a verdict: its rationale says it
    _golden("agent_judge_fail", out)
    # the same after a re-score, which re-uses the recorded verdict (no judge asked)
    res = subprocess.run([*CE, "rescore", str(run)], capture_output=True, text=True,
                         timeout=300, env=NO_JUDGE)
    assert "1 recorded verdict(s) reused, 0 asked" in res.stdout, res.stdout + res.stderr
    [rescored] = (run / "rescored").iterdir()
    again = _explain(rescored / "default" / "judge_qa" / "00")
    assert again.splitlines()[1:] == out.splitlines()[1:]


@pytest.mark.slow
def test_a_judge_that_answers_prose_is_quoted(tmp_path):
    out = _explain(_run(tmp_path, "prose") / "default" / "judge_qa" / "00")
    assert "error: the judge's verdict holds no JSON object" in out
    assert "judge (agent_judge, claude-sonnet-4-6): no verdict; recorded answer judges/" in out
    assert "Read 'answer.txt' (turn 1, ok)" in out  # its copy's path left out
    assert "its last words: 'looks fine to me, I would give it a solid B'" in out
    assert "None" not in out
    _golden("agent_judge_prose", out)


@pytest.mark.slow
def test_a_judge_out_of_turns_says_so(tmp_path):
    out = _explain(_run(tmp_path, "max_turns", max_turns=2) / "default" / "judge_qa" / "00")
    assert "error: agent_judge: the judge stopped at max_turns (2) before its verdict (the " \
           "judge's verdict holds no JSON object)" in out
    assert "session (max_turns 2, turn_timeout 240 s): stopped at max_turns after 2 " \
           "turns, 2 tool calls:" in out
    assert "its last words: none (it said nothing after its tool calls)" in out
    _golden("agent_judge_max_turns", out)


@pytest.mark.slow
def test_a_judge_that_timed_out_is_said_from_the_run(tmp_path):
    """Not recorded in judges/ (a re-score asks it again), so explaining the archived
    trial, which asks no judge, says the run's outcome for the same request. Timing
    decides how far the judge got: the facts only, no golden."""
    run = _run(tmp_path, "timeout", turn_timeout=20)
    trial = run / "default" / "judge_qa" / "00"
    out = _explain(trial)
    assert "error: agent_judge: the judge exceeded turn_timeout (20 s)" in out
    assert "no recorded verdict" not in out and "differs from the recorded grade" not in out
    assert "judge (agent_judge, claude-sonnet-4-6): no verdict; the run's session: a judge " \
           "that ended without a verdict is not recorded, and explain asks no judge " \
           "(`ce rescore` asks it again)" in out
    assert "session (max_turns 6, turn_timeout 20 s): stopped at turn_timeout (past 20 s)" \
        in out
    assert "its last words: none (stopped before it answered)" in out
    evidence = json.loads((trial / "evidence.json").read_text())
    [judge] = evidence["criteria"]["c0"]
    assert judge["session"]["end"] == "timeout" and judge["model"] == "claude-sonnet-4-6"
    # a re-score would ask it again: with no judge to ask, refused before grading (it
    # went on, and the trial ended ERROR: 'grading failed: ... no judge transport')
    res = subprocess.run([*CE, "rescore", str(run)], capture_output=True, text=True,
                         timeout=300, env=NO_JUDGE)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "ce rescore: criterion c0 agent_judge of default/judge_qa ('the judge agrees " \
           "the answer is 42') asks its judge again (the run's ended without a verdict, " \
           "none was recorded: agent_judge: the judge exceeded turn_timeout (20 s)), and no " \
           "judge is configured (1 trial(s): default/judge_qa/00)" in res.stderr, res.stderr
    assert res.stdout == "" and not (run / "rescored").exists()
    # one that asks no judge says both reasons
    res = subprocess.run([*CE, "rescore", str(run), "--offline"], capture_output=True,
                         text=True, timeout=300, env=NO_JUDGE)
    assert "c0 agent_judge: recorded 0 error (agent_judge: the judge exceeded turn_timeout " \
           "(20 s)), now 0 error (agent_judge: no recorded verdict for this request, and " \
           "judges are offline)" in res.stdout, res.stdout + res.stderr


@pytest.mark.slow
def test_the_judges_last_words_never_keep_the_reference(tmp_path):
    """The transcript was scrubbed of the reference, its last words (task.json's
    judge_sessions text, judges/*.json) were not; explain quotes them now."""
    (tmp_path / "t.yaml").write_text(TASK.replace("MAX_TURNS", "4").replace(
        "TURN_TIMEOUT", "240").replace("    files: [answer.txt]\n",
                                       "    files: [answer.txt]\n    include_reference: true\n")
        .replace("sandbox:", "reference: {file: sol.py}\nsandbox:"))
    (tmp_path / "sol.py").write_text('SECRET = "A_REFERENCE_LINE_SECRET_1234"\n')
    (tmp_path / "replies.yaml").write_text(
        "agent_judge:\n  - text: 'I compared it with SECRET = \"A_REFERENCE_LINE_SECRET_1234\" "
        "and cannot decide'\n")
    res = subprocess.run([*CE, "run", "t.yaml", "--judge-replies", "replies.yaml",
                          "--run-dir", "run", "-q"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    trial = tmp_path / "run" / "default" / "judge_qa" / "00"
    stored = [trial / "task.json", trial / "evidence.json",
              *(tmp_path / "run" / "judges").iterdir()]
    for path in stored:
        assert "A_REFERENCE_LINE_SECRET" not in path.read_text(), path
    out = _explain(trial)
    assert "its last words: 'I compared it with [reference scrubbed] and cannot decide'" \
        in out
    assert "A_REFERENCE_LINE_SECRET" not in out


LLM_TASK = """\
task_id: lj
description: llm judges explained
agent: {type: none}
sandbox:
  python: null
  template_sources:
    - type: starter_files
      files:
        - {path: answer.txt, content: "41\\n"}
success_criteria:
  - {type: llm_judge, prompt: CLAMP the answer, files: [answer.txt], description: above 1}
  - {type: llm_judge, prompt: NOSCORE the answer, description: a verdict without a score}
  - {type: llm_judge, prompt: WORDS the answer, description: a score in words}
  - {type: llm_judge, prompt: NEAR the answer, description: just under the threshold}
"""
LLM_REPLIES = """\
judge:
  - {match: CLAMP, score: 1.5, rationale: better than perfect}
  - {match: WORDS, score: "high", rationale: mostly right}
  - {match: NEAR, score: 0.6999, rationale: just under}
"""


@pytest.mark.slow
def test_llm_judge_verdicts_say_what_became_of_their_score(tmp_path):
    (tmp_path / "t.yaml").write_text(LLM_TASK)
    (tmp_path / "replies.yaml").write_text(LLM_REPLIES)
    res = subprocess.run([*CE, "run", "t.yaml", "--judge-replies", "replies.yaml",
                          "--run-dir", "run", "-q"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    result = CliRunner().invoke(main, ["explain", str(tmp_path / "run" / "default" / "lj" /
                                                      "00")])
    out = result.stdout
    assert "judge (llm_judge, anthropic.claude-sonnet-4-6): score 1.5, clamped to 1; " \
           "recorded verdict judges/" in out
    assert "its last words: '{\"rationale\": \"no scripted verdict matches this " \
           "request\"}'" in out
    assert "score 'high', not a number" in out
    assert "score 0.6999 (continuous) vs pass threshold 0.7 -> FAIL" in out
    assert "judge (llm_judge, anthropic.claude-sonnet-4-6): score 0.6999; recorded" in out
    assert "None" not in out
    _golden("llm_judge", out)
