"""What the agents that report tokens but no price cost (the real Codex, OpenCode and Pi
CLIs and ce's `openai` loop against ce's scripted model server, through `ce run
--scripted-model`; OpenCode and Pi priced every call at $0, from the configuration ce
writes them, which names no price):
each answer's usage is priced from ce's rate card or the task's `agent.pricing`, so a
small `max_usd` ends the trial COST_BUDGET_EXCEEDED after the first call (it never could:
their cost was 0), a large one lets it finish with the exact cost in task.json and
run.json, and a model with no rate is a cost said to be unknown (the trial runs; with
`max_usd` the run is refused before anything starts: tests/test_pricing.py).

The expected dollars are computed here from the list prices, not from ce's card: a
wrong rate on the card fails these tests. The scripted server reports a step's
`input_tokens` as OpenAI does (cached part included; `cache_read_input_tokens` is that
part), which ce splits into new input and cache reads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.engines import need
from tests.processes import new_mark, processes_marked
from tests.test_agent_fidelity import ce_run, missing, shell, task, trial

pytestmark = pytest.mark.slow

# USD per million tokens (input, cache read, output) of the model each agent runs, from
# OpenAI's price list: codex runs gpt-5.5, the openai agent gpt-4.1 (their defaults);
# OpenCode and Pi have no default model but the scripted one: told gpt-4.1
LIST_PRICE = {"codex": (5.00, 0.50, 30.00), "openai": (2.00, 0.50, 8.00),
              "opencode": (2.00, 0.50, 8.00), "pi": (2.00, 0.50, 8.00)}
MODEL = {"opencode": "model: gpt-4.1, ", "pi": "model: gpt-4.1, "}
HOUSE = "{model: house-model, pricing: {house-model: {input: 1.0, output: 3.0, " \
        "cache_read: 0.25}}}"
ONE_FILE = "  - {type: file_exists, path: first.txt, description: d}\n"


def usage(total_in: int, cached: int, out: int) -> dict:
    return {"input_tokens": total_in, "cache_read_input_tokens": cached,
            "output_tokens": out}


# (prompt tokens, of them cached, output) per call: 6,000 + 4,000 + 1,000 new input
STEPS = [(10_000, 4_000, 200), (12_000, 8_000, 100), (13_000, 12_000, 50)]


def dollars(rates: tuple[float, float, float], calls=STEPS) -> float:
    rate_in, rate_cached, rate_out = rates
    return sum((total - cached) * rate_in + cached * rate_cached + out * rate_out
               for total, cached, out in calls) / 1e6


def session(agent: str, tail: str = "", second_tail: str = "") -> list:
    return [{**shell(agent, "echo first > first.txt" + tail), "usage": usage(*STEPS[0])},
            {**shell(agent, "echo second" + second_tail), "usage": usage(*STEPS[1])},
            {"text": "done", "usage": usage(*STEPS[2])}]


@pytest.mark.parametrize("agent", ["codex", "openai", "opencode", "pi"])
def test_max_usd_stops_the_agents_ce_prices_and_their_cost_is_recorded(agent, tmp_path):
    need(missing(agent))
    mark = new_mark("125")
    sleep = f"python3 -c 'import time; time.sleep({mark})'"
    tiny = 0.01  # the first answer alone costs more: codex $0.038, the others $0.0156
    model = MODEL.get(agent, "")
    # OpenCode reports a call's usage when its step ends, after the step's tools, and
    # makes its next call at once: the budget stops it before that call or in its
    # command (on a loaded machine ce read the usage after OpenCode's last call had
    # been answered, and with no sleep in the second command the run had ended)
    tails = (f"; {sleep}", "") if agent != "opencode" else ("", f"; {sleep}")
    task(tmp_path, "tiny", agent, session(agent, *tails),
         f"{{max_usd: {tiny}, task_timeout: 120}}", mark, ONE_FILE, tools=None,
         agent_extra=model)
    task(tmp_path, "big", agent, session(agent), "{max_usd: 100}", mark, ONE_FILE, tools=None,
         agent_extra=model)
    task(tmp_path, "house", agent, session(agent), "{max_usd: 100}", mark, ONE_FILE,
         tools=None, agent_extra=HOUSE[1:-1] + ", ")
    task(tmp_path, "unpriced", agent, session(agent), "{}", mark, ONE_FILE, tools=None,
         agent_extra="model: house-model, ")
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    assert "cost unknown (1 trial(s): default/unpriced/00): agent `" + agent + \
        "`: model 'house-model' has no rate" in res.stderr, res.stderr

    rates = LIST_PRICE[agent]
    first = dollars(rates, STEPS[:1])
    assert first > tiny
    record, events, _ = trial(tmp_path, "tiny")
    assert record["status"] == "COST_BUDGET_EXCEEDED", (record["agent_outcome"],
                                                        res.stderr[-2000:])
    # stopped in the first call's command (OpenCode: after it, or in the second's). Once
    # the budget is spent the scripted server refuses the agent's steps (a 400, logged
    # `refused`, not a call): the grace period buys no step.
    calls = record["model_server"]["calls"]
    assert calls == 1 or (agent == "opencode" and calls == 2), record["model_server"]
    # every call the agent reported is spent and recorded. OpenCode's second call, when
    # answered, is stopped in its command, before OpenCode reports its usage: ce knows a
    # call's cost from the agent alone, as with a real provider.
    reported = [u for u in events if type(u).__name__ == "Usage"]
    assert 1 <= len(reported) <= calls and (agent == "opencode" or len(reported) == calls), \
        (len(reported), record["model_server"])
    made = STEPS[:len(reported)]
    assert record["usage"]["cost_usd"] == pytest.approx(dollars(rates, made), rel=1e-9)
    # new input only: the cached tokens apart (6,000 of the first call's 10,000)
    assert record["usage"]["input_tokens"] == sum(t - c for t, c, _ in made)
    assert [(u.input_tokens, u.cache_read_tokens, u.output_tokens) for u in events
            if type(u).__name__ == "Usage"] == [(t - c, c, o) for t, c, o in made]

    record, _, _ = trial(tmp_path, "big")
    assert record["status"] == "SUCCESS", (record["agent_outcome"], res.stderr[-2000:])
    assert record["model_server"]["calls"] == 3
    assert record["usage"]["cost_usd"] == pytest.approx(dollars(rates), rel=1e-9)
    assert (record["usage"]["input_tokens"], record["usage"]["output_tokens"]) == (11_000, 350)
    assert "cost_unknown" not in record

    house, _, _ = trial(tmp_path, "house")  # the task's own rate for a model off the card
    assert house["status"] == "SUCCESS", house["agent_outcome"]
    assert house["usage"]["cost_usd"] == pytest.approx(dollars((1.0, 0.25, 3.0)), rel=1e-9)

    unpriced, _, _ = trial(tmp_path, "unpriced")
    assert unpriced["status"] == "SUCCESS", unpriced["agent_outcome"]
    assert unpriced["usage"]["cost_usd"] == 0.0 and unpriced["usage"]["input_tokens"] == 11_000
    assert "'house-model' has no rate" in unpriced["cost_unknown"]

    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest")
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["cost_usd"] == pytest.approx(
        first + dollars(rates) + dollars((1.0, 0.25, 3.0)), rel=1e-9)
    assert summary["cost_unknown"]["trials"] == 1
    assert summary["cost_unknown"]["why"] == [unpriced["cost_unknown"]]
    report = (run_dir / "report.md").read_text()
    assert "; 1 unpriced: model 'house-model' has no rate" in report
    assert processes_marked(mark) == {}


def test_the_prompt_caches_tokens_reach_task_json_run_json_and_the_reports(tmp_path):
    """The real Claude Code CLI: a session's input is mostly cache reads. They were in the
    trace and priced in the cost, but task.json, trials.parquet, run.json and report.md
    counted new input and output only ("Tokens | 2,100 in / 50 out" for 2,100 + 4,500
    input tokens)."""
    import polars as pl

    need(missing("claude-code"))
    steps = [{**shell("claude-code", "echo first > first.txt"),
              "usage": {"input_tokens": 1_000, "cache_read_input_tokens": 4_000,
                        "cache_creation_input_tokens": 300, "output_tokens": 40}},
             {"text": "done", "usage": {"input_tokens": 1_100, "output_tokens": 10,
                                        "cache_read_input_tokens": 500}}]
    task(tmp_path, "cached", "claude-code", steps, criteria=ONE_FILE)
    res = ce_run(tmp_path)
    record, events, _ = trial(tmp_path, "cached")
    assert record["status"] == "SUCCESS", (record["agent_outcome"], res.stderr[-2000:])
    assert sum(u.cache_read_tokens for u in events if type(u).__name__ == "Usage") == 4_500
    usage = record["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"],
            usage["cache_write_tokens"]) == (2_100, 50, 4_500, 300)
    # Claude Code's own price of them (claude-sonnet-4-6: $3 in, $15 out, $0.30 cache
    # read, $3.75 cache write per million)
    assert usage["cost_usd"] == pytest.approx(
        (2_100 * 3 + 50 * 15 + 4_500 * 0.3 + 300 * 3.75) / 1e6, rel=1e-6)

    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest")
    row = pl.read_parquet(run_dir / "trials.parquet").row(0, named=True)
    assert (row["cache_read_tokens"], row["cache_write_tokens"]) == (4_500, 300)
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["tokens"] == {"input": 2_100, "output": 50, "total": 2_150,
                                 "cache_read": 4_500, "cache_write": 300}
    assert summary["variants"]["default"]["tokens"] == summary["tokens"]
    line = "| Tokens | 2,100 in / 50 out / 4,500 cache read / 300 cache write |"
    assert line in (run_dir / "report.md").read_text()
    again = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "report", str(run_dir)],
                           capture_output=True, text=True)
    assert line in again.stdout  # regenerated from the parquet files


def test_a_timed_out_claude_code_trial_keeps_its_tool_call_tokens_and_cost(tmp_path):
    """At task_timeout the agent was cancelled at once: Claude Code's cost comes in its
    last message, so every timed-out trial said $0, and the tool call and usage the CLI
    had sent but ce not yet read were lost (under load, one trial in three said 0 tokens
    and no tool call while its command ran). Now a timeout stops the agent as a budget
    does: it ends its CLI and records what the CLI said, then the grace ends it."""
    need(missing("claude-code"))
    mark = new_mark("25")
    steps = [{**shell("claude-code", f"python3 -c 'import time; time.sleep({mark})'"),
              "usage": {"input_tokens": 1_000, "output_tokens": 40}},
             {"text": "done", "usage": {"input_tokens": 1_100, "output_tokens": 10}}]
    task(tmp_path, "slow", "claude-code", steps, "{task_timeout: 30}", mark, ONE_FILE)
    res = ce_run(tmp_path)
    record, events, _ = trial(tmp_path, "slow")
    assert record["status"] == "TIMEOUT", (record["agent_outcome"], res.stderr[-2000:])
    assert record["model_server"]["calls"] == 1
    assert [e.tool for e in events if type(e).__name__ == "ToolCall"] == ["Bash"]
    usage = record["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["tool_calls"]) == \
        (1_000, 40, 1)
    # Claude Code's own price of the one call (claude-sonnet-4-6: $3 in, $15 out)
    assert usage["cost_usd"] == pytest.approx((1_000 * 3 + 40 * 15) / 1e6, rel=1e-6)
    assert processes_marked(mark) == {}


def test_max_usd_stops_claude_code_in_the_call_that_spends_it(tmp_path):
    """Claude Code says what its session cost only in its last message, so `max_usd`
    never stopped it mid-run: with a budget the first call alone spent, all of the
    session's calls and commands ran and the trial ended COST_BUDGET_EXCEEDED only
    afterwards. Now each call is priced as its usage streams in (ce's rate card, the
    CLI's own list prices), so the budget stops it in that call's command, as it stops
    the agents ce prices."""
    need(missing("claude-code"))
    mark = new_mark("375")
    sleep = f"python3 -c 'import time; time.sleep({mark})'"
    steps = [{**shell("claude-code", f"echo first > first.txt; {sleep}"),
              "usage": {"input_tokens": 1_000, "cache_read_input_tokens": 2_000,
                        "output_tokens": 40}},
             {**shell("claude-code", "echo second > second.txt"),
              "usage": {"input_tokens": 1_100, "output_tokens": 20}},
             {"text": "done", "usage": {"input_tokens": 1_200, "output_tokens": 10}}]
    # claude-sonnet-4-6: $3 in, $15 out, $0.30 cache read per million
    first = (1_000 * 3 + 40 * 15 + 2_000 * 0.3) / 1e6
    task(tmp_path, "tiny", "claude-code", steps, "{max_usd: 0.003, task_timeout: 120}",
         mark, ONE_FILE)
    res = ce_run(tmp_path)
    record, events, _ = trial(tmp_path, "tiny")
    assert record["status"] == "COST_BUDGET_EXCEEDED", (record["agent_outcome"],
                                                        res.stderr[-2000:])
    assert record["model_server"]["calls"] == 1, record["model_server"]
    assert [e.tool for e in events if type(e).__name__ == "ToolCall"] == ["Bash"]
    assert record["usage"]["cost_usd"] == pytest.approx(first, rel=1e-6)
    assert processes_marked(mark) == {}


@pytest.mark.parametrize("agent", ["codex", "pi", "openai"])
def test_the_tool_calls_of_the_answer_that_spent_the_budget_are_counted(agent, tmp_path):
    """The answer that spends `max_usd` asks for two commands; the budget stops the agent
    before they run. Codex and Pi recorded both calls (unresolved, in usage.tool_calls);
    ce's own `openai` loop dropped them (0 tool calls for the same answer), so the agents'
    tool-call counts meant different things. Now every agent records them, unresolved."""
    need(missing(agent))
    steps = [{"text": "two at once", "usage": usage(*STEPS[0]),
              "tools": [shell(agent, "echo one > one.txt"),
                        shell(agent, "echo two > two.txt")]},
             {"text": "done", "usage": usage(*STEPS[2])}]
    task(tmp_path, "tiny", agent, steps, "{max_usd: 0.001, task_timeout: 120}",
         criteria=ONE_FILE, tools=None, agent_extra=MODEL.get(agent, ""))
    res = ce_run(tmp_path)
    record, events, _ = trial(tmp_path, "tiny")
    assert record["status"] == "COST_BUDGET_EXCEEDED", (record["agent_outcome"],
                                                        res.stderr[-2000:])
    assert [(e.tool, e.params.get("command") or e.params.get("cmd")) for e in events
            if type(e).__name__ == "ToolCall"] == [("Bash", "echo one > one.txt"),
                                                   ("Bash", "echo two > two.txt")]
    assert [e for e in events if type(e).__name__ == "ToolResult"] == []
    assert (record["usage"]["turns"], record["usage"]["tool_calls"]) == (1, 2)
