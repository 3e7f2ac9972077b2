"""A judge in report.html's trial panel says what `ce explain` says of it: the verdict
with its model, the score it gave ('clamped to 1', 'not a number'), where the verdict
came from, its tokens and cost, its rationale, and for an agent_judge its session (the
limits it ran under, how it ended, its turns and tool calls: listed when a few, folded
when more) and its last words when it gave no verdict.

The panel said only `judge MODEL: score X` and the rationale (or, with no verdict, the
criterion's error a second time, as 'rationale').

A real `ce run` graded by scripted judges (`--judge-replies`; the agent_judges are the
real Claude Code CLI against the loopback server, as tests/test_explain_agent_judge.py):
the page's embedded detail (the JSON the panel is built from) against `ce explain`'s
lines for the same trial, then the panel itself in Chromium at 1280 and 390 px.

The panel's header said the agent's tokens and cost only, and nothing of the judges':
it says theirs on a line of its own under it now (task.json's `judge_usage`, the sums of
each judge's usage in evidence.json), apart, as report.md's Judge tokens and Judge cost
rows say the run's.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from tests.engines import need
from tests.report_run import CE
from tests.test_report_html import _missing, browser  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

TASK = """\
task_id: judged_panel
description: judges in the trial panel
initial_prompt: write answer.txt
agent:
  type: script
  script:
    - run: "echo 'the answer is 41' > answer.txt"
sandbox: {driver: tempdir, python: null}
success_criteria:
  - type: agent_judge
    prompt: Check that answer.txt says 42. Score 1.0 if it does, 0.5 if a number close to it, 0.
    files: [answer.txt]
    max_turns: 6
    turn_timeout: 240
    description: the judge agrees the answer is 42
  - type: agent_judge
    prompt: SHORT check that answer.txt says 42.
    files: [answer.txt]
    max_turns: 2
    description: a judge out of turns
  - {type: llm_judge, prompt: CLAMP the answer, files: [answer.txt], description: above 1}
  - {type: llm_judge, prompt: WORDS the answer, description: a score in words}
  - {type: llm_judge, prompt: NOSCORE the answer, description: no score}
"""
# every agent_judge session follows the same script: four tool calls, then its verdict
# (the one with max_turns 2 stops after two of them)
REPLIES = """\
judge:
  - {match: CLAMP, score: 1.5, rationale: better than perfect}
  - {match: WORDS, score: "high", rationale: mostly right}
agent_judge:
  - tool: Bash
    input: {command: "ls", description: list}
  - tool: Bash
    input: {command: "cat answer.txt", description: read}
  - tool: Read
    input: {file_path: "{workspace}/answer.txt"}
  - tool: Bash
    input: {command: "wc answer.txt", description: count}
  - text: '{"score": 0.5, "rationale": "answer.txt says 41, not 42: close but wrong"}'
"""
TRIAL = "default/judged_panel/00"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report-judges")
    (root / "t.yaml").write_text(TASK)
    (root / "replies.yaml").write_text(REPLIES)
    res = subprocess.run([*CE, "run", "t.yaml", "--judge-replies", "replies.yaml",
                          "--run-dir", "run", "-q"], cwd=root, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr  # c0 is under its threshold
    return root / "run"


def _detail(run: Path) -> dict:
    html = (run / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'<script type="application/json" id="ce-d0">(.*?)</script>', html)
    return json.loads(blob.group(1))


def _judges(detail: dict) -> dict[str, dict]:
    out = {}
    for c in detail["criteria"]:
        [judge] = [ev for ev in c["evidence"] if ev["kind"] == "judge"]
        out[c["id"]] = judge
    return out


def _lines(said: dict) -> list[str]:
    """The panel's judge lines as text, one a line, calls a step in."""
    return [said["head"]] + [x for p in said["parts"]
                             for x in [p["text"], *(f"  {i}" for i in p["items"])]]


def test_the_panels_judges_are_explains(run):
    judges = _judges(_detail(run))
    said = {c: _lines(j["said"]) for c, j in judges.items()}
    c0, c1, c2, c3, c4 = (said[f"c{i}"] for i in range(5))
    assert re.fullmatch(r"judge \(agent_judge, claude-sonnet-4-6\): score 0\.5; asked "
                        r"\(request [0-9a-f]{12}\); 50 in \+ 50 out tokens, \$0\.0009", c0[0]), c0
    assert c0[1:] == [
        "rationale: answer.txt says 41, not 42: close but wrong",
        "session (max_turns 6, turn_timeout 240 s): finished after 5 turns, 4 tool calls:",
        "  Bash 'ls' (turn 1, ok)", "  Bash 'cat answer.txt' (turn 2, ok)",
        "  Read 'answer.txt' (turn 3, ok)",  # its workspace copy's path left out
        "  Bash 'wc answer.txt' (turn 4, ok)"]
    # the verdict's fields beside them; the session's gist only in `said`
    assert judges["c0"]["score"] == 0.5 and judges["c0"]["recorded"] is False
    assert "session" not in judges["c0"] and "request" not in judges["c0"]
    assert c1[0].startswith("judge (agent_judge, claude-sonnet-4-6): no verdict; asked")
    assert c1[1:] == [
        "session (max_turns 2, turn_timeout 300 s): stopped at max_turns after 2 turns, 2 "
        "tool calls:", "  Bash 'ls' (turn 1, ok)", "  Bash 'cat answer.txt' (turn 2, ok)",
        "its last words: none (it said nothing after its tool calls)"]
    assert judges["c1"]["error"].startswith("agent_judge: the judge stopped at max_turns (2)")
    assert c2 == [c2[0], "rationale: better than perfect"]
    assert c2[0].startswith("judge (llm_judge, anthropic.claude-sonnet-4-6): score 1.5, "
                            "clamped to 1; asked (request ")
    assert c2[0].endswith("; 10 in + 10 out tokens")
    assert "score 'high', not a number; asked" in c3[0] and c3[1:] == ["rationale: mostly right"]
    assert "): no verdict; asked" in c4[0]
    assert c4[1:] == ["its last words: '{\"rationale\": \"no scripted verdict matches this "
                      "request\"}'"]
    # `ce explain`'s lines for the same trial: the panel's, word for word (explain's
    # verdicts are the recorded ones now; the panel's were asked in the run)
    out = CliRunner().invoke(main, ["explain", str(run / TRIAL)]).stdout
    for lines in said.values():
        for line in lines[1:]:
            assert line.strip() in out, line
        head = re.sub(r"asked \(request [0-9a-f]{12}\)", "recorded", lines[0])
        assert re.sub(r"recorded (verdict|answer) judges/[0-9a-f]{64}\.json", "recorded",
                      out).count(head) == 1, head


def _judge_usage(run: Path) -> dict:
    """The trial's judges' usage summed from evidence.json, each judge's own."""
    evidence = json.loads((run / TRIAL / "evidence.json").read_text(encoding="utf-8"))
    usages = [ev["usage"] for evs in evidence["criteria"].values() for ev in evs
              if ev["kind"] == "judge"]
    return {k: sum(u[k] for u in usages) for k in ("input_tokens", "output_tokens")}


def test_the_panel_carries_the_judges_usage(run):
    detail = _detail(run)
    task = json.loads((run / TRIAL / "task.json").read_text(encoding="utf-8"))
    assert detail["judge_usage"] == task["judge_usage"]
    used = detail["judge_usage"]
    # two agent_judge sessions (50 and 20 tokens each way) and three llm_judge calls (10)
    assert _judge_usage(run) == {"input_tokens": 100, "output_tokens": 100}
    assert {k: used[k] for k in ("input_tokens", "output_tokens")} == _judge_usage(run)
    assert (used["calls"], used["agent_sessions"], used["recorded"]) == (5, 2, 0)
    run_json = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert used["cost_usd"] == run_json["judges"]["cost_usd"] == 0.0018


@pytest.mark.parametrize("width", (1280, 390))
def test_the_panel_shows_them(browser, run, width):  # noqa: F811 (browser: the fixture)
    need(_missing())
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(f"file://{run / 'report.html'}")
        page.wait_for_selector("body[data-ready='1']", state="attached")
        page.locator("#trial-table tbody tr", has_text=TRIAL).click()
        detail = page.locator("#detail")
        # the header: the agent's usage (a script: no token, no cost), then the judges'
        # on their own line, labelled, with what report.md says of the run's
        head = detail.locator("p").first.inner_text()
        assert " · tokens unknown · cost unknown · " in head and "judge" not in head
        assert detail.locator("p").nth(1).inner_text() == (
            "judges: 100 in / 100 out tokens, $0.0018 (3 llm_judge verdict(s), 2 "
            "agent_judge session(s), 0 reused from the cache) — not in the agent's tokens "
            "and cost above")
        md = (run / "report.md").read_text(encoding="utf-8")
        assert "| Judge tokens | 100 in / 100 out / 0 cache read / 0 cache write (3 " \
               "llm_judge verdict(s), 2 agent_judge session(s), 0 reused from the cache) |" in md
        assert "| Judge cost | $0.0018 (not in the agent's cost) |" in md
        c0 = detail.locator(".crit[data-criterion='c0'] .judge")
        assert "judge (agent_judge, claude-sonnet-4-6): score 0.5; asked" in c0.inner_text()
        # four calls: folded under the session's line, which says how many
        session = c0.locator("details.said")
        assert not session.evaluate("d => d.open")
        assert session.locator("summary").inner_text().endswith(
            "finished after 5 turns, 4 tool calls:")
        assert not session.locator("li").first.is_visible()
        session.locator("summary").click()
        assert session.locator("li").nth(3).inner_text() == "Bash 'wc answer.txt' (turn 4, ok)"
        # two: listed
        c1 = detail.locator(".crit[data-criterion='c1']")
        assert c1.locator(".judge details.said li").nth(1).is_visible()
        text = c1.inner_text()
        assert "its last words: none (it said nothing after its tool calls)" in text
        # the error once (it was shown again as the judge's 'rationale')
        assert text.count("the judge stopped at max_turns (2)") == 1
        assert "score 1.5, clamped to 1" in detail.locator(
            ".crit[data-criterion='c2']").inner_text()
        assert detail.evaluate("d => d.scrollWidth - d.clientWidth") <= 0
        assert errors == []
    finally:
        page.close()
