"""What ce reads off Codex's session log (the real CLI against ce's scripted model
server): tokens are recorded as each model answer arrives, so a timed-out or stopped
trial keeps what it spent and a token budget stops Codex live (`codex exec --json`
reports usage only when its turn completes: 0 tokens, and the budget was only seen
after the last call); and every apply_patch call is in the trace with its patch, a
failed one as an error with Codex's message (`exec --json` has no event for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import need
from tests.processes import new_mark, processes_marked
from tests.test_agent_fidelity import ce_run, missing, of, shell, task, trial

pytestmark = pytest.mark.slow


def write_task(tmp: Path, name: str, steps: list, limits: str, criteria: str,
               mark: str = "") -> None:
    task(tmp, name, "codex", steps, limits, mark, criteria, tools=None)


def usage(i: int, o: int) -> dict:
    return {"input_tokens": i, "output_tokens": o}


def test_a_timed_out_stopped_or_over_budget_codex_trial_keeps_its_tokens(tmp_path):
    need(missing("codex"))
    mark = new_mark("25")
    sleep = f"python3 -c 'import time; time.sleep({mark})'"
    file_exists = "  - {type: file_exists, path: x, description: d}\n"
    # a command that hangs past turn_timeout: TIMEOUT, with the first call's tokens
    write_task(tmp_path, "hangs", [{**shell("codex", sleep), "usage": usage(1234, 56)},
                                   {"text": "never"}], "{turn_timeout: 5}", file_exists, mark)
    # stopped early once the first command decided it: its call's tokens are kept
    write_task(tmp_path, "stops", [{**shell("codex", "echo decided"), "usage": usage(1000, 10)},
                                   {**shell("codex", "echo never"), "delay": 2.0,
                                    "usage": usage(1, 1)}, {"text": "never"}],
               "{stop_early: true}",
               "  - {type: command_executed, tool_name: Bash, command_pattern: decided, "
               "stop_when: pass, description: d}\n", mark)
    # 1010 tokens, then 2020 > max_total_tokens: stopped during the second call's
    # command, no third call (it waited for the end of Codex's turn: a third call made)
    write_task(tmp_path, "budget", [{**shell("codex", "echo first"), "usage": usage(1000, 10)},
                                    {**shell("codex", f"echo second; {sleep}"),
                                     "usage": usage(1000, 10)},
                                    {"text": "never", "usage": usage(1000, 10)}],
               "{max_total_tokens: 1500, task_timeout: 120}", file_exists, mark)
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr

    hangs, events, _ = trial(tmp_path, "hangs")
    assert hangs["status"] == "TIMEOUT", hangs["agent_outcome"]
    assert (hangs["usage"]["input_tokens"], hangs["usage"]["output_tokens"]) == (1234, 56)
    assert hangs["usage"]["turns"] == 1 and len(of(events, "ToolCall")) == 1

    stops, _, _ = trial(tmp_path, "stops")
    assert stops["status"] == "SUCCESS" and stops["stopped_early"], stops["agent_outcome"]
    assert stops["agent_outcome"]["reason"] == "stopped"
    assert stops["usage"]["input_tokens"] >= 1000 and stops["usage"]["output_tokens"] >= 10

    budget, events, _ = trial(tmp_path, "budget")
    assert budget["status"] == "TOKEN_BUDGET_EXCEEDED", budget["agent_outcome"]
    assert budget["model_server"]["calls"] == 2
    assert (budget["usage"]["input_tokens"], budget["usage"]["output_tokens"]) == (2000, 20)
    assert budget["usage"]["turns"] == 2
    assert processes_marked(mark) == {}


def test_apply_patch_calls_are_in_the_trace_a_failed_one_too(tmp_path):
    need(missing("codex"))
    bad = "*** Begin Patch\n*** Update File: nope.py\n@@\n-x\n+y\n*** End Patch\n"
    good = "*** Begin Patch\n*** Add File: hello.py\n+print('hi')\n*** End Patch\n"
    write_task(tmp_path, "patch", [{"custom_tool": "apply_patch", "input": bad},
                                   {"custom_tool": "apply_patch", "input": good},
                                   {"text": "done"}], "{max_turns: 3}",
               "  - {type: file_exists, path: hello.py, description: d}\n")
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    record, events, _ = trial(tmp_path, "patch")
    assert record["status"] == "SUCCESS", (record["agent_outcome"], res.stderr[-2000:])
    calls = of(events, "ToolCall")
    assert [(c.tool, c.raw_tool, c.params) for c in calls] == [
        ("Edit", "apply_patch", {"patch": bad}), ("Edit", "apply_patch", {"patch": good})]
    results = {r.call_id: r for r in of(events, "ToolResult")}
    failed, applied = (results[c.call_id] for c in calls)
    assert failed.status == "error" and "nope.py" in failed.output, failed
    assert applied.status == "ok" and "hello.py" in applied.output, applied
    assert record["usage"]["turns"] == 3


# -- the mapping itself, on a recorded log (fast: no Codex needed) ------------------------
ROLLOUT = Path(__file__).resolve().parent / "fixtures" / "codex" / "rollout.jsonl"


class ListSink:
    def __init__(self):
        self.events: list = []

    def clock(self) -> float:
        return 0.0

    def emit(self, event) -> None:
        self.events.append(event)


def mapped(lines: list[bytes], model: str | None = None) -> list:
    """The events of these log lines, priced as prepare() prices them (`model`: the
    task's, else Codex's default)."""
    from ce_agents.cli_agent import Events
    from ce_agents.codex import DEFAULT_MODEL, CodexAgent, Session
    from ce_runtime.pricing import agent_rates

    sink = ListSink()
    events = Events(sink)
    events.codex = Session("/home/.codex", agent_rates({"model": model}, DEFAULT_MODEL)[1])
    agent = CodexAgent()
    for line in lines:
        agent.on_log(line, events)
    events.turn_end()
    return sink.events


@pytest.mark.parametrize("usage_records", [True, False])
def test_a_recorded_session_log_maps_to_a_turn_per_model_answer(usage_records):
    """Codex 0.171's log of five answers (two parallel commands; a failing command; a
    failed and an applied patch; a message). Without `token_usage_record` (older logs)
    the usage comes from the growth of `token_count`'s totals."""
    lines = ROLLOUT.read_bytes().splitlines()
    if not usage_records:
        lines = [raw for raw in lines if b'"type": "token_usage_record"' not in raw]
    events = mapped(lines)
    assert [e.turn for e in of(events, "TurnStart")] == [1, 2, 3, 4, 5]
    usage = of(events, "Usage")
    # Codex counts 1,500 input tokens, the last answer's 500 with 50 from the cache:
    # the trace has the new input (1,450) and the cache reads apart
    assert sum(u.input_tokens for u in usage) == 1450
    assert sum(u.output_tokens for u in usage) == 45
    assert sum(u.cache_read_tokens for u in usage) == 50
    if usage_records:
        assert [u.input_tokens for u in usage] == [100, 200, 300, 400, 450]
    # priced at gpt-5.5's list price, Codex's default model
    assert sum(u.cost_usd for u in usage) == pytest.approx(
        (1450 * 5.0 + 50 * 0.5 + 45 * 30.0) / 1e6)
    calls = of(events, "ToolCall")
    assert [(c.tool, c.raw_tool) for c in calls] == [
        ("Bash", "exec_command"), ("Bash", "exec_command"), ("Bash", "exec_command"),
        ("Edit", "apply_patch"), ("Edit", "apply_patch")]
    assert [c.params.get("command") for c in calls[:3]] == [
        "echo first", "echo second", "echo third; exit 3"]
    assert "*** Update File: nope.py" in calls[3].params["patch"]
    results = {r.call_id: r for r in of(events, "ToolResult")}
    assert [results[c.call_id].status for c in calls] == ["ok", "ok", "error", "error", "ok"]
    assert results[calls[2].call_id].output == "third\n[exit code 3]"
    assert "Failed to read file" in results[calls[3].call_id].output
    turn, turn_of = 0, {}
    for e in events:
        if type(e).__name__ == "TurnStart":
            turn = e.turn
        elif type(e).__name__ in ("ToolCall", "ToolResult"):
            turn_of.setdefault(e.call_id, set()).add(turn)
    assert [sorted(t) for t in turn_of.values()] == [[1], [1], [2], [3], [4]]
    assert [m.text for m in of(events, "Message")] == ["two at once", "done"]
