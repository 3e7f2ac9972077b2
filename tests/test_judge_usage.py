"""What the llm_judge calls cost: their tokens, as the scripted model server reports them,
priced from ce's rate card, in task.json's `judge_usage` (apart from the agent's
`usage`), run.json's `judges`, report.md, and reproduced by `ce rescore` from the
recorded verdicts."""

import json
import os

import pytest

from ce_runtime.grade.judge_usage import from_anthropic, from_openai, trial_judge_usage
from tests.test_run_e2e import ce, load_run_json, run_dir_in, task_jsons

TASK = """
task_id: judged_cost
description: two llm_judges, one on ce's rate card and one not
initial_prompt: Write answer.txt.
agent:
  type: script
  script:
    - write: answer.txt
      content: "42"
sandbox: {python: null}
success_criteria:
  - type: llm_judge
    description: priced
    prompt: Is answer.txt the answer to everything?
    files: [answer.txt]
    model: anthropic.claude-sonnet-4-6
  - type: llm_judge
    description: unpriced
    prompt: Is answer.txt written in a mystery style?
    files: [answer.txt]
    model: anthropic.claude-mystery-9
"""
REPLIES = """
judge:
  - match: "answer to everything"
    score: 0.9
    rationale: it is 42
    usage: {input_tokens: 1000, output_tokens: 200, cache_read_input_tokens: 2000,
            cache_creation_input_tokens: 400}
  - match: "mystery style"
    score: 1.0
    usage: {input_tokens: 500, output_tokens: 100}
"""
# claude-sonnet-4-6: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million
PRICED = (1000 * 3 + 200 * 15 + 2000 * 0.30 + 400 * 3.75) / 1e6  # $0.0081
UNKNOWN = "judge model 'anthropic.claude-mystery-9' has no rate on ce's rate card"


def _check(run_dir: str, recorded: int) -> None:
    _check_run(run_dir, recorded)
    # `ce report` rebuilds them from the parquet files
    assert ce("report", run_dir, "-f", "md", "-o", "again.md",
              cwd=run_dir).returncode == 0
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh, \
            open(os.path.join(run_dir, "again.md"), encoding="utf-8") as again:
        assert again.read() == fh.read()
    res = ce("report", run_dir, "-f", "json", cwd=run_dir)
    assert json.loads(res.stdout)["judges"] == load_run_json(run_dir)["judges"]


def _check_run(run_dir: str, recorded: int) -> None:
    (record,) = task_jsons(run_dir).values()
    assert [c["score"] for c in record["criteria"]] == [0.9, 1.0]
    judged = record["judge_usage"]
    assert judged == {"calls": 2, "agent_sessions": 0, "recorded": recorded, "unmetered": 0,
                      "input_tokens": 1500, "output_tokens": 300, "cache_read_tokens": 2000,
                      "cache_write_tokens": 400, "cost_usd": PRICED,
                      "cost_unknown": [UNKNOWN]}
    # the agent's usage and budget are the agent's own
    assert record["usage"]["cost_usd"] == 0.0
    with open(os.path.join(run_dir, "default", "judged_cost", "00", "evidence.json"),
              encoding="utf-8") as fh:
        evidence = json.load(fh)["criteria"]
    entries = [e for es in evidence.values() for e in es if e["kind"] == "judge"]
    assert sorted((e["model"], e["usage"]["input_tokens"]) for e in entries) == [
        ("anthropic.claude-mystery-9", 500), ("anthropic.claude-sonnet-4-6", 1000)]

    run = load_run_json(run_dir)
    assert run["judges"] == {"trials": 1, "calls": 2, "agent_sessions": 0,
                             "recorded": recorded,
                             "input_tokens": 1500, "output_tokens": 300,
                             "cache_read_tokens": 2000, "cache_write_tokens": 400,
                             "total_tokens": 4200, "cost_usd": PRICED,
                             "cost_unknown": {"trials": 1, "why": [UNKNOWN]}}
    assert run["variants"]["default"]["judges"] == run["judges"]
    assert run["cost_usd"] == 0.0  # the agent's, without the judges'
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        md = fh.read()
    assert (f"| Judge tokens | 1,500 in / 300 out / 2,000 cache read / 400 cache write "
            f"(2 llm_judge verdict(s), {recorded} reused from the cache) |") in md
    assert (f"| Judge cost | $0.0081 + unknown for 1 trial(s): {UNKNOWN} (not in the "
            "agent's cost) |") in md
    assert "judges $0.0081 + unknown for 1 trial(s)." in md


def judged_run(tmp_path) -> str:
    """`ce run` of TASK with the scripted verdicts (REPLIES) under tmp_path: the run dir."""
    (tmp_path / "judged_cost.yaml").write_text(TASK)
    (tmp_path / "replies.yaml").write_text(REPLIES)
    res = ce("run", "judged_cost.yaml", "--judge-replies", "replies.yaml",
             "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    return run_dir_in(str(tmp_path / "runs"))


def test_judge_tokens_and_cost_in_task_run_and_report_and_rescore(tmp_path):
    run_dir = judged_run(tmp_path)
    _check(run_dir, recorded=0)
    # the verdict cache keeps the usage with the verdict
    judges = os.path.join(run_dir, "judges")
    verdicts = []
    for name in os.listdir(judges):
        with open(os.path.join(judges, name), encoding="utf-8") as fh:
            verdicts.append(json.load(fh))
    assert sorted(v["usage"]["output_tokens"] for v in verdicts) == [100, 200]

    # a rescore reuses the recorded verdicts (no judge is called) and reports their cost
    res = ce("rescore", run_dir, "--out", "again", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    _check(str(tmp_path / "again"), recorded=2)


def test_a_run_without_judges_says_nothing_of_them(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK.split("success_criteria:")[0] + """\
success_criteria:
  - type: file_exists
    path: answer.txt
    description: written
""")
    res = ce("run", "t.yaml", "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    (record,) = task_jsons(run_dir).values()
    assert "judge_usage" not in record
    assert "judges" not in load_run_json(run_dir)
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        assert "Judge" not in fh.read()


def test_usage_as_each_api_reports_it():
    assert from_anthropic({"usage": {"input_tokens": 7, "output_tokens": 3,
                                     "cache_read_input_tokens": 5,
                                     "cache_creation_input_tokens": 2}}) == {
        "input_tokens": 7, "output_tokens": 3, "cache_read_tokens": 5,
        "cache_write_tokens": 2}
    assert from_anthropic({"content": []}) is None
    # OpenAI's prompt_tokens include the cached part
    assert from_openai({"prompt_tokens": 100, "completion_tokens": 9,
                        "prompt_tokens_details": {"cached_tokens": 40}}) == {
        "input_tokens": 60, "output_tokens": 9, "cache_read_tokens": 40,
        "cache_write_tokens": 0}
    assert from_openai(None) is None


def test_a_verdict_cached_without_usage_is_unknown_never_free():
    judged = trial_judge_usage({"c1": [{"kind": "judge", "judge": "llm_judge",
                                        "model": "anthropic.claude-sonnet-4-6",
                                        "recorded": True, "usage": None}]})
    assert judged["calls"] == 1 and judged["unmetered"] == 1
    assert judged["cost_usd"] == 0.0
    assert judged["cost_unknown"] == ["1 verdict(s) recorded without their usage"]
    assert trial_judge_usage({"c1": [{"kind": "command"}]}) is None


def test_an_openai_judge_reports_its_cached_prompt_apart(tmp_path):
    """Chat Completions' prompt_tokens include the cached part: new input is the rest."""
    task = TASK.split("  - type: llm_judge\n    description: unpriced")[0].replace(
        "anthropic.claude-sonnet-4-6", "openai.gpt-4.1-mini")
    (tmp_path / "t.yaml").write_text(task)
    (tmp_path / "replies.yaml").write_text("""
judge:
  - score: 1.0
    usage: {input_tokens: 1000, output_tokens: 100, cache_read_input_tokens: 400}
""")
    res = ce("run", "t.yaml", "--judge-replies", "replies.yaml", "--runs-root", "runs",
             cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    (record,) = task_jsons(run_dir_in(str(tmp_path / "runs"))).values()
    judged = record["judge_usage"]
    assert (judged["input_tokens"], judged["cache_read_tokens"],
            judged["output_tokens"]) == (600, 400, 100)
    # gpt-4.1-mini: $0.40 in, $1.60 out, $0.10 cache read per million
    assert judged["cost_usd"] == round((600 * 0.40 + 100 * 1.60 + 400 * 0.10) / 1e6, 9)
    assert judged["cost_unknown"] == []


AGENT_JUDGED = TASK.split("  - type: llm_judge\n    description: unpriced")[0] + """\
  - type: agent_judge
    description: by an agent
    prompt: Check answer.txt.
    max_turns: 4
"""
AGENT_REPLIES = REPLIES.split("  - match: \"mystery style\"")[0] + """
agent_judge:
  - tool: Read
    input: {file_path: "{workspace}/answer.txt"}
    usage: {input_tokens: 3000, output_tokens: 100, cache_read_input_tokens: 5000,
            cache_creation_input_tokens: 700}
  - text: '{"score": 0.8, "rationale": "it says 42"}'
    usage: {input_tokens: 400, output_tokens: 50}
"""
# the session's cost as its Claude Code CLI reckons it (its default model, claude-sonnet:
# $3 in, $15 out, $0.30 cache read, $3.75 cache write per million)
SESSION = (3400 * 3 + 150 * 15 + 5000 * 0.30 + 700 * 3.75) / 1e6  # $0.016575


def _check_agent_judged(run_dir: str, recorded: int) -> None:
    (record,) = task_jsons(run_dir).values()
    assert [c["score"] for c in record["criteria"]] == [0.9, 0.8]
    assert record["judge_usage"] == {
        "calls": 2, "agent_sessions": 1, "recorded": recorded, "unmetered": 0,
        "input_tokens": 1000 + 3400, "output_tokens": 200 + 150,
        "cache_read_tokens": 2000 + 5000, "cache_write_tokens": 400 + 700,
        "cost_usd": round(PRICED + SESSION, 9), "cost_unknown": []}
    assert record["usage"]["cost_usd"] == 0.0  # the agent's own: no judge in it
    run = load_run_json(run_dir)
    assert run["judges"]["agent_sessions"] == 1 and run["judges"]["calls"] == 2
    assert run["judges"]["cost_usd"] == round(PRICED + SESSION, 9)
    assert run["variants"]["default"]["judges"] == run["judges"]
    assert run["cost_usd"] == 0.0
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        md = fh.read()
    assert ("| Judge tokens | 4,400 in / 350 out / 7,000 cache read / 1,100 cache write "
            "(1 llm_judge verdict(s), 1 agent_judge session(s), "
            f"{recorded} reused from the cache) |") in md
    assert "| Judge cost | $0.0247 (not in the agent's cost) |" in md
    # `ce report` rebuilds them from the parquet files
    res = ce("report", run_dir, "-f", "json", cwd=run_dir)
    assert json.loads(res.stdout)["judges"] == run["judges"]


def agent_judged_run(tmp_path) -> str:
    """`ce run` of AGENT_JUDGED, its agent_judge a Claude Code session against the
    scripted server (AGENT_REPLIES), under tmp_path: the run dir."""
    (tmp_path / "t.yaml").write_text(AGENT_JUDGED)
    (tmp_path / "replies.yaml").write_text(AGENT_REPLIES)
    res = ce("run", "t.yaml", "--judge-replies", "replies.yaml", "--runs-root", "runs",
             cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    return run_dir_in(str(tmp_path / "runs"))


@pytest.mark.slow
def test_agent_judge_sessions_are_in_the_judges_tokens_and_cost(tmp_path):
    """An agent_judge (the Claude Code CLI against the scripted server, run by `ce run`)
    is counted with the llm_judge calls: task.json, run.json, report.md, `ce report`,
    and `ce rescore` reproduces the figures from the recorded verdicts."""
    run_dir = agent_judged_run(tmp_path)
    _check_agent_judged(run_dir, recorded=0)
    (record,) = task_jsons(run_dir).values()
    (session,) = record["judge_sessions"]  # where its transcript stays
    assert session["usage"]["cost_usd"] == SESSION

    res = ce("rescore", run_dir, "--out", "again", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    _check_agent_judged(str(tmp_path / "again"), recorded=2)


def test_an_agent_judge_session_is_priced_at_its_clis_cost_never_free():
    """The session's own cost, whatever its model; one that ended before the CLI said
    (a timeout) is unknown, not $0."""
    finished = {"kind": "judge", "judge": "agent_judge", "model": None, "recorded": False,
                "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25}}
    timed_out = {**finished, "usage": {"input_tokens": 10, "output_tokens": 5,
                                       "cost_usd": 0.0}}
    judged = trial_judge_usage({"c1": [finished], "c2": [timed_out]})
    assert (judged["calls"], judged["agent_sessions"]) == (2, 2)
    assert (judged["input_tokens"], judged["cost_usd"]) == (20, 0.25)
    assert judged["cost_unknown"] == [
        "an agent_judge session ended before its CLI reckoned its cost"]


@pytest.mark.slow
def test_an_older_runs_parquet_gets_its_agent_judge_sessions_back(tmp_path):
    """trials.parquet as a ce before agent_judge sessions were counted wrote it: no
    judge_agent_sessions column, its judge_* figures the llm_judge call's alone. `ce
    report` showed that ($0.0081, "1 llm_judge verdict(s)"), the session left out; now
    it adds the session back from evidence.json, as the run's own ce counts it today,
    and says the cost is unknown when that file is unreadable."""
    import polars as pl

    run_dir = agent_judged_run(tmp_path)
    run = load_run_json(run_dir)
    path = os.path.join(run_dir, "trials.parquet")
    llm_only = {"judge_calls": 1, "judge_input_tokens": 1000, "judge_output_tokens": 200,
                "judge_cache_read_tokens": 2000, "judge_cache_write_tokens": 400,
                "judge_cost_usd": PRICED}
    pl.read_parquet(path).with_columns(**{k: pl.lit(v) for k, v in llm_only.items()}) \
        .drop("judge_agent_sessions").write_parquet(path)
    res = ce("report", run_dir, "-f", "json", cwd=run_dir)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["judges"] == run["judges"]
    md = ce("report", run_dir, cwd=run_dir).stdout
    assert ("| Judge tokens | 4,400 in / 350 out / 7,000 cache read / 1,100 cache write "
            "(1 llm_judge verdict(s), 1 agent_judge session(s), 0 reused from the "
            "cache) |") in md
    assert "| Judge cost | $0.0247 (not in the agent's cost) |" in md

    (evidence,) = [os.path.join(d, "evidence.json") for d, _, files in os.walk(run_dir)
                   if "evidence.json" in files]
    with open(evidence, "w", encoding="utf-8") as fh:
        fh.write("{")
    md = ce("report", run_dir, cwd=run_dir).stdout
    assert ("| Judge cost | $0.0081 + unknown for 1 trial(s): agent_judge sessions not "
            "counted (a run by an older ce, its evidence.json unreadable) (not in the "
            "agent's cost) |") in md


UNUSABLE = """
task_id: unusable
description: judges whose answers are no verdicts
initial_prompt: Write answer.txt.
agent:
  type: script
  script:
    - write: answer.txt
      content: "42"
sandbox: {python: null}
success_criteria:
  - type: llm_judge
    description: a word for a score
    prompt: Is answer.txt correct?
    files: [answer.txt]
  - type: llm_judge
    description: no score at all
    prompt: Is answer.txt well written?
    files: [answer.txt]
"""
UNUSABLE_REPLIES = """
judge:
  - match: "correct"
    score: high
"""


def test_an_answer_that_is_no_verdict_is_kept_and_rescored_the_same(tmp_path):
    """A judge that answered with no usable score (a word; no `score` at all) fails its
    criterion with the error; the answer is kept with the verdicts, so a re-score (no
    judge configured, or offline) gives the same errors, not an ERROR trial for want of
    a judge."""
    (tmp_path / "unusable.yaml").write_text(UNUSABLE)
    (tmp_path / "replies.yaml").write_text(UNUSABLE_REPLIES)
    res = ce("run", "unusable.yaml", "--judge-replies", "replies.yaml", "--run-dir", "run",
             cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr
    (record,) = task_jsons(str(tmp_path / "run")).values()
    errors = [c["error"] for c in record["criteria"]]
    assert record["status"] == "FAILURE"
    assert "no numeric score ('high')" in errors[0] and "no `score`" in errors[1], errors
    assert len(os.listdir(tmp_path / "run" / "judges")) == 2
    for extra in ((), ("--offline",)):
        again = ce("rescore", "run", *extra, cwd=str(tmp_path))
        assert again.returncode == 1 and "0 changed" in again.stdout, \
            again.stdout + again.stderr
        out = tmp_path / again.stdout.rsplit("results: ", 1)[1].split("\n", 1)[0].strip()
        with open(out / "default" / "unusable" / "00" / "task.json") as fh:
            rescored = json.load(fh)
        assert rescored["status"] == "FAILURE"
        assert [c["error"] for c in rescored["criteria"]] == errors
