"""`run_limits.max_turns`, a call cut off, and a retried model call, for every agent ce
runs as a CLI (the real CLIs against ce's scripted model server, `ce run
--scripted-model`), and the same mapping fed their events directly:

- max_turns holds: the calls within the cap are run and resolved, a call past it never
  completes and is in the trace unresolved if the agent made it, the trial is
  MAX_TURNS_EXHAUSTED with the outcome `max_turns` (Claude Code's CLI holds the call past
  the cap itself, OpenCode, Pi and Codex through ce's plugin, extension and hook: no call
  past it is made; OpenCode ran a tool past the cap, missing from the trace, and Codex
  and Pi ended as `stopped`);
- a tool still running when the trial times out is in the trace, unresolved (OpenCode
  printed a tool call only once it completed);
- the retries of one failing model call are one turn (Pi counted each retry a turn:
  MAX_TURNS_EXHAUSTED for a run within its cap, and an ERROR after a retry succeeded).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ce_runtime.trace import events as T
from ce_runtime.trace.view import build_view
from tests.engines import PYTHON_IMAGE, need, python_image
from tests.processes import new_mark, processes_marked
from tests.test_agent_fidelity import ce_run, missing, of, shell, task, trial

AGENTS = ["claude-code", "codex", "opencode", "pi"]
# the agents whose CLI holds the model call past max_turns (OpenCode, Pi and Codex by ce's
# plugin, extension and hook; an agent without one is stopped by ce once the turn past the
# cap has begun: that call is made, its tools never complete)
HOLD_THE_CAP = {"claude-code", "codex", "opencode", "pi"}


def files(tmp, name: str) -> list[str]:
    run_dir = next(p for p in (tmp / "runs").iterdir() if p.name != "latest")
    snap = run_dir / "default" / name / "00" / "workspace.json"
    return sorted(json.loads(snap.read_text())["files"])


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_max_turns_ends_each_cli_at_the_cap(agent, tmp_path):
    need(missing(agent))
    steps = [shell(agent, "echo 1 > s1.txt"), shell(agent, "echo 2 > s2.txt"),
             shell(agent, "sleep 1; echo 3 > s3.txt"), shell(agent, "echo 4 > s4.txt"),
             {"text": "done"}]
    task(tmp_path, "cap", agent, steps, "{max_turns: 2}",
         criteria="  - {type: file_exists, path: s1.txt, description: d}\n")
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    record, events, _ = trial(tmp_path, "cap")
    assert record["status"] == "MAX_TURNS_EXHAUSTED", (record["agent_outcome"], res.stderr[-2000:])
    assert record["agent_outcome"]["reason"] == "max_turns", record["agent_outcome"]
    calls = build_view(events).tool_calls
    assert [(c.params["command"], c.status) for c in calls[:2]] == [
        ("echo 1 > s1.txt", "ok"), ("echo 2 > s2.txt", "ok")]
    assert all(c.status == "unresolved" for c in calls[2:]), calls
    assert files(tmp_path, "cap") == ["s1.txt", "s2.txt"]  # nothing past the cap completed
    if agent in HOLD_THE_CAP:  # no model call past the cap
        assert record["model_server"]["calls"] == record["usage"]["turns"] == 2, record
        assert len(calls) == 2 and [e.turn for e in of(events, "TurnStart")] == [1, 2]
        # and the hold ended with the CLI (Codex's hook, in a process group of its own,
        # was left running, killed by ce's sweep)
        assert not [e.text for e in of(events, "Message") if "left processes" in e.text]
    else:  # stopped once its third turn began: any call of it is recorded, unresolved
        assert record["usage"]["turns"] == 3, record["usage"]
        assert [c.params["command"] for c in calls[2:]] in ([], ["sleep 1; echo 3 > s3.txt"])


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["codex", "opencode", "pi"])
def test_the_cap_holds_in_a_container(agent, tmp_path):
    """The holds of ce's hook (Codex: /proc and a pipe as Codex's stdout), plugin and
    extension inside a docker sandbox, as on the host's: exactly max_turns model calls,
    the trial MAX_TURNS_EXHAUSTED, said held (not stopped by ce past the cap)."""
    need(missing(agent))
    need(python_image())
    steps = [shell(agent, "echo 1 > s1.txt"), shell(agent, "echo 2 > s2.txt"),
             shell(agent, "echo 3 > s3.txt"), {"text": "done"}]
    task(tmp_path, "cap", agent, steps, "{max_turns: 2}",
         criteria="  - {type: file_exists, path: s1.txt, description: d}\n")
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", ".",
                          "--scripted-model", "--runs-root", "runs", "--driver", "docker",
                          "-D", f"sandbox.docker.image={PYTHON_IMAGE}"], cwd=tmp_path,
                         env={**os.environ, "CE_PLAIN": "1"}, capture_output=True,
                         text=True, timeout=600)
    assert "Traceback" not in res.stderr, res.stderr
    record, _, _ = trial(tmp_path, "cap")
    assert record["status"] == "MAX_TURNS_EXHAUSTED", (record["agent_outcome"], res.stderr[-2000:])
    assert record["model_server"]["calls"] == record["usage"]["turns"] == 2, record
    assert f"{agent} held its next model call at max_turns 2" in \
        record["agent_outcome"]["detail"], record["agent_outcome"]
    assert files(tmp_path, "cap") == ["s1.txt", "s2.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_a_tool_running_at_the_timeout_is_in_the_trace_unresolved(agent, tmp_path):
    need(missing(agent))
    mark = new_mark("125")
    sleep = f"python3 -c 'import time; time.sleep({mark})'"
    task(tmp_path, "hangs", agent, [shell(agent, "echo first"), shell(agent, sleep),
                                    {"text": "never"}], "{turn_timeout: 5}", mark=mark)
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    record, events, _ = trial(tmp_path, "hangs")
    assert record["status"] == "TIMEOUT", (record["agent_outcome"], res.stderr[-2000:])
    calls = build_view(events).tool_calls
    assert [(c.params["command"], c.status) for c in calls] == [
        ("echo first", "ok"), (sleep, "unresolved")], calls
    assert processes_marked(mark) == {}


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_the_retries_of_a_failing_model_call_are_one_turn(agent, tmp_path):
    """The second call fails four times (500: past the clients' own quick retries, so Pi
    and OpenCode retry it themselves), then answers: three turns, max_turns 3 holds, and
    the run succeeds. Pi: a call that keeps failing is an ERROR after its retries, in the
    one turn."""
    need(missing(agent))
    steps = [shell(agent, "echo first"),
             {**shell(agent, "echo second"), "fail": {"status": 500, "times": 4}},
             {"text": "done"}]
    task(tmp_path, "retried", agent, steps, "{max_turns: 3}")
    if agent == "pi":
        task(tmp_path, "fails", agent, [shell(agent, "echo first"),
                                        {**shell(agent, "echo second"), "fail": 500}],
             "{max_turns: 3}")
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    record, events, _ = trial(tmp_path, "retried")
    assert record["status"] == "SUCCESS", (record["agent_outcome"], res.stderr[-2000:])
    assert record["agent_outcome"]["reason"] == "finished", record["agent_outcome"]
    assert record["usage"]["turns"] == 3 and [e.turn for e in of(events, "TurnStart")] == [
        1, 2, 3]
    assert [(c.params["command"], c.status) for c in build_view(events).tool_calls] == [
        ("echo first", "ok"), ("echo second", "ok")]
    assert record["model_server"]["calls"] >= 7  # the failures did reach the server
    # the CLI's own retries are in the trace (tests/test_model_outage.py); Codex retries a
    # request that failed (up to 4 times) without a word, and says only a stream's retries
    assert bool(of(events, "ModelError")) == (agent != "codex"), \
        [type(e).__name__ for e in events]
    if agent == "pi":
        fails, events, _ = trial(tmp_path, "fails")
        assert fails["status"] == "ERROR", fails["agent_outcome"]
        assert fails["agent_outcome"] == {"reason": "error", "detail": (
            "the model API was failing when the agent gave up: 500 scripted failure")}
        assert fails["usage"]["turns"] == 2 and len(of(events, "ToolCall")) == 1


# -- the mapping, fed each CLI's events --------------------------------------------------
class Sink:
    def __init__(self) -> None:
        self.events: list[T.Event] = []

    def clock(self) -> float:
        return 0.0

    def emit(self, event: T.Event) -> None:
        self.events.append(event)


def shapes(events: list[T.Event]) -> list[tuple]:
    out: list[tuple] = []
    for e in events:
        if isinstance(e, T.TurnStart | T.TurnEnd):
            out.append((type(e).__name__, e.turn))
        elif isinstance(e, T.ToolCall):
            out.append(("call", e.call_id))
        elif isinstance(e, T.ToolResult):
            out.append(("result", e.call_id, e.status))
        elif isinstance(e, T.Usage):
            out.append(("usage", e.input_tokens))
    return out


def pi_assistant(content: list, stop: str = "toolUse", tokens: int = 10) -> dict:
    message = {"role": "assistant", "content": content, "stopReason": stop,
               "usage": {"input": tokens, "output": tokens, "totalTokens": 2 * tokens}}
    if stop == "error":
        message["errorMessage"] = "500 scripted failure"
    return {"type": "message_end", "message": message}


def test_pi_counts_a_retried_model_call_once_and_its_failure_only_if_unanswered():
    from ce_agents.cli_agent import Events
    from ce_agents.pi import PiAgent

    def run(lines: list[dict]) -> tuple[Events, list[T.Event]]:
        sink = Sink()
        events, agent = Events(sink), PiAgent()
        for line in lines:
            agent.on_line(line, events)
        events.turn_end()  # (as CliAgent.run does at the end)
        return events, sink.events

    failed = [{"type": "turn_start"},
              pi_assistant([{"type": "toolCall", "id": "x", "name": "bash",
                             "arguments": {"command": "never run"}}], "error", 0),
              {"type": "turn_end"}, {"type": "agent_end"}]
    retried = [*failed, {"type": "auto_retry_start", "attempt": 1}, {"type": "agent_start"}]
    answered = [{"type": "turn_start"},
                pi_assistant([{"type": "toolCall", "id": "c1", "name": "bash",
                               "arguments": {"command": "ls"}}]),
                {"type": "auto_retry_end", "success": True},
                {"type": "tool_execution_end", "toolCallId": "c1", "result": {}},
                {"type": "turn_end"}]
    events, trace = run(retried + retried + answered)
    assert events.error is None and events.turn == 1
    assert shapes(trace) == [("TurnStart", 1), ("call", "c1"), ("usage", 10),
                             ("result", "c1", "ok"), ("TurnEnd", 1)]
    # retries exhausted: the failure is the error, its turn ends with it
    events, trace = run(retried + failed + [{"type": "auto_retry_end", "success": False,
                                             "finalError": "500 scripted failure"}]
                        + [{"type": "turn_start"}])
    assert events.error == "500 scripted failure"
    assert shapes(trace) == [("TurnStart", 1), ("TurnEnd", 1), ("TurnStart", 2),
                             ("TurnEnd", 2)]
    # no retry at all (retries off, an error Pi does not retry): the run's error
    events, trace = run(failed)
    assert events.error == "500 scripted failure"
    assert shapes(trace) == [("TurnStart", 1), ("TurnEnd", 1)]


def test_pi_with_ces_extension_opens_a_turn_at_its_model_call_and_ends_at_the_held_cap():
    """With ce's extension loaded, a turn opens when its model call is made (Pi's
    turn_start comes before the request), a retry stays in the failed call's turn, and
    the call held past the cap ends the run max_turns once the last turn is in."""
    from ce_agents.cli_agent import Events
    from ce_agents.pi import PiAgent

    sink, agent = Sink(), PiAgent()
    events = Events(sink)
    events.max_turns = 2
    call = {"type": "ce_model_call"}
    answered = pi_assistant([{"type": "toolCall", "id": "c1", "name": "bash",
                              "arguments": {"command": "ls"}}])
    failed = pi_assistant([], "error", 0)
    lines = [{"type": "ce_extension"}, {"type": "turn_start"}, call, failed,
             {"type": "turn_end"}, {"type": "agent_end"},
             {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3},
             {"type": "agent_start"}, {"type": "turn_start"}, call, answered,
             {"type": "tool_execution_end", "toolCallId": "c1", "result": {}},
             {"type": "turn_end"}, {"type": "turn_start"}, call,
             pi_assistant([{"type": "text", "text": "again"}], "stop"), {"type": "turn_end"},
             {"type": "turn_start"}]
    for line in lines:
        agent.on_line(line, events)
    assert events.turn == 2 and not events.aborted  # Pi's third turn_start opened nothing
    agent.on_line({"type": "ce_max_turns", "turns": 2}, events)
    assert events.aborted and events.error is None
    assert shapes(sink.events) == [("TurnStart", 1), ("call", "c1"), ("usage", 10),
                                   ("result", "c1", "ok"), ("TurnEnd", 1), ("TurnStart", 2),
                                   ("usage", 10), ("TurnEnd", 2)]
    assert not [e for e in sink.events if isinstance(e, T.Message) and e.role == "system"]
    outcome = agent.finish(events, -15, False, "")
    assert outcome.reason == "max_turns" and "pi held its next model call at max_turns 2" \
        in outcome.detail


def test_opencode_records_a_started_call_in_its_turn_and_ends_at_the_held_cap():
    from ce_agents.cli_agent import Events
    from ce_agents.opencode import OpenCodeAgent

    sink = Sink()
    events, agent = Events(sink), OpenCodeAgent()
    events.max_turns = 2

    def start(call_id: str, step: str | None) -> dict:
        return {"type": "ce_tool_start", "callID": call_id, "messageID": step,
                "tool": "bash", "args": {"command": call_id}}

    def step(kind: str, message: str) -> dict:
        return {"type": kind, "sessionID": "s1", "part": {
            "messageID": message, "reason": "tool-calls", "tokens": {"input": 5}}}

    def tool_use(call_id: str) -> dict:
        return {"type": "tool_use", "sessionID": "s1", "part": {
            "callID": call_id, "tool": "bash", "state": {
                "status": "completed", "input": {"command": call_id}, "output": "a"}}}

    lines = [{"type": "ce_plugin"},
             # the plugin's lines come before OpenCode's step_start ...
             start("a1", "m1"), start("a2", "m1"), step("step_start", "m1"),
             tool_use("a1"), tool_use("a2"),
             # ... and the next step's tool may start before the last step_finish shows
             start("b1", "m2"), step("step_finish", "m1"), step("step_start", "m2"),
             tool_use("b1"),
             # the next model call is held: the CLI is ended once the turn's events are in
             {"type": "ce_max_turns", "turns": 2}]
    for line in lines:
        agent.on_line(line, events)
    assert not events.aborted
    agent.on_line(step("step_finish", "m2"), events)
    assert events.aborted and events.error is None
    assert shapes(sink.events) == [
        ("TurnStart", 1), ("call", "a1"), ("call", "a2"), ("result", "a1", "ok"),
        ("result", "a2", "ok"), ("usage", 5), ("TurnEnd", 1),
        ("TurnStart", 2), ("call", "b1"), ("result", "b1", "ok"), ("usage", 5), ("TurnEnd", 2)]
    outcome = agent.finish(events, -15, False, "")
    assert outcome.reason == "max_turns" and "max_turns 2" in outcome.detail

    # cut off (a timeout): in the trace, unresolved, in their turn; a call whose step
    # never showed opens the turn of its own
    sink = Sink()
    events = Events(sink)
    for line in ({"type": "ce_plugin"}, start("a1", "m1"), start("a2", None),
                 step("step_start", "m1"), start("b1", "m1")):
        agent.on_line(line, events)
    assert shapes(sink.events) == [("TurnStart", 1), ("call", "a1"), ("call", "b1")]
    agent.ended(events)
    agent.on_line(start("c1", "m2"), events)
    events.turn_end()
    agent.ended(events)
    events.turn_end()
    assert shapes(sink.events)[3:] == [("call", "a2"), ("TurnEnd", 1), ("TurnStart", 2),
                                       ("call", "c1"), ("TurnEnd", 2)]
    assert [c.status for c in build_view(sink.events).tool_calls] == ["unresolved"] * 4

    # without the plugin (it did not load): calls still come with their results, once
    sink = Sink()
    events = Events(sink)
    for line in (step("step_start", "m1"), tool_use("a1")):
        agent.on_line(line, events)
    assert shapes(sink.events) == [("TurnStart", 1), ("call", "a1"), ("result", "a1", "ok")]
    assert "did not load ce's plugin" in sink.events[0].text


def test_opencode_takes_a_result_from_the_plugin_before_its_own_line():
    """The plugin's ce_tool_end says a tool returned as it returns: a run ended before
    OpenCode printed the completed call (a turn_timeout's stop) has its result, and
    OpenCode's own line, when it comes, adds no second one."""
    from ce_agents.cli_agent import Events
    from ce_agents.opencode import OpenCodeAgent

    def start(call_id: str, step: str | None) -> dict:
        return {"type": "ce_tool_start", "callID": call_id, "messageID": step,
                "tool": "bash", "args": {"command": call_id}}

    def end(call_id: str, exit: int | None, tool: str = "bash") -> dict:
        return {"type": "ce_tool_end", "callID": call_id, "tool": tool, "exit": exit,
                "output": f"out of {call_id}"}

    step = {"type": "step_start", "sessionID": "s1", "part": {"messageID": "m1"}}
    tool_use = {"type": "tool_use", "sessionID": "s1", "part": {
        "callID": "a1", "tool": "bash", "state": {
            "status": "completed", "input": {"command": "a1"}, "output": "out of a1",
            "metadata": {"exit": 0}}}}
    sink, agent = Sink(), OpenCodeAgent()
    events = Events(sink)
    # a1 returns after its step showed, a2 before (its result waits for its call), a3
    # fails with exit 2, `invalid` answers a call it could not make; b1 never returns
    for line in ({"type": "ce_plugin"}, start("a1", "m1"), step, end("a1", 0),
                 start("a2", None), end("a2", None), start("a3", "m1"), end("a3", 2),
                 start("a4", "m1"), end("a4", None, tool="invalid"), start("b1", "m1"),
                 tool_use):
        agent.on_line(line, events)
    agent.ended(events)
    events.turn_end()
    assert shapes(sink.events) == [
        ("TurnStart", 1), ("call", "a1"), ("result", "a1", "ok"), ("call", "a3"),
        ("result", "a3", "error"), ("call", "a4"), ("result", "a4", "error"),
        ("call", "b1"), ("call", "a2"), ("result", "a2", "ok"), ("TurnEnd", 1)]
    view = build_view(sink.events)
    assert {c.call_id: c.status for c in view.tool_calls} == {
        "a1": "ok", "a2": "ok", "a3": "error", "a4": "error", "b1": "unresolved"}
    assert [r.output for r in sink.events if isinstance(r, T.ToolResult)][:1] == \
        ["out of a1"]


def test_a_cli_stopped_past_max_turns_ends_as_max_turns():
    """ce's stop when a turn past the cap began (Codex, Pi): the outcome is max_turns,
    as Claude Code's own cap; a stop within the cap stays a stop."""
    from ce_agents.cli_agent import CliAgent, Events

    events = Events(Sink())
    events.max_turns, events.session = 2, "thread t"
    for _ in range(3):
        events.turn_start()
        events.turn_end()
    outcome = CliAgent().finish(events, -15, True, "")
    assert outcome.reason == "max_turns" and "past max_turns 2" in outcome.detail
    events.max_turns = 3
    assert CliAgent().finish(events, -15, True, "").reason == "stopped"


@pytest.mark.slow
@pytest.mark.parametrize("agent", [*AGENTS, "openai"])
def test_a_model_call_slower_than_turn_timeout_times_out(agent, tmp_path):
    """The model takes 60 s to answer, the first call or a later one: turn_timeout (5 s)
    ends the trial TIMEOUT, for every agent. OpenCode prints a step only once its tools
    start, so its turns began after the model had answered: a model that never answered
    was in no turn, and OpenCode ran into task_timeout (or finished) instead."""
    need(missing(agent))
    slow = {"text": "late", "delay": 60}
    model = "model: gpt-4.1, " if agent in ("opencode", "pi") else ""
    task(tmp_path, "first", agent, [{**shell(agent, "echo first"), **slow},
                                    {"text": "done"}],
         "{turn_timeout: 5, task_timeout: 50}", agent_extra=model)
    task(tmp_path, "later", agent, [shell(agent, "echo first"),
                                    {**shell(agent, "echo second"), **slow},
                                    {"text": "done"}],
         "{turn_timeout: 5, task_timeout: 50}", agent_extra=model)
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    for name, done in (("first", []), ("later", [("echo first", "ok")])):
        record, events, _ = trial(tmp_path, name)
        assert record["status"] == "TIMEOUT", (name, record["agent_outcome"])
        assert record["agent_outcome"]["reason"] == "stopped", (name, record["agent_outcome"])
        assert "turn_timeout (5s" in record["agent_outcome"]["detail"] or any(
            "turn_timeout (5s" in e.text for e in of(events, "Message")), (name, record)
        assert record["duration_s"] < 40, (name, record["duration_s"])
        calls = build_view(events).tool_calls
        assert [(c.params["command"], c.status) for c in calls] == done, (name, calls)


@pytest.mark.slow
@pytest.mark.parametrize("agent", [*AGENTS, "openai"])
def test_every_agent_stops_at_a_timeout_without_being_killed(agent, tmp_path):
    """A command runs past task_timeout. The CLI agents end when told to stop (outcome
    `stopped`); ce's own `openai` loop waited for the command, so every one of its timed
    out trials was killed after the grace period (outcome `killed`, 2 s more time)."""
    need(missing(agent))
    mark = new_mark("625")
    sleep = f"python3 -c 'import time; time.sleep({mark})'"
    model = "model: gpt-4.1, " if agent in ("opencode", "pi") else ""
    # the command must have started when the timeout fires: OpenCode spends ~5 s of CPU
    # before its first model call (alone as under ce): 10-20 s on a loaded 2-CPU CI
    # machine (8 s fired before its first call there)
    timeout = 40 if agent == "opencode" else 8
    task(tmp_path, "slow", agent, [shell(agent, sleep), {"text": "never"}],
         f"{{task_timeout: {timeout}}}", mark=mark, agent_extra=model)
    res = ce_run(tmp_path)
    record, events, _ = trial(tmp_path, "slow")
    assert record["status"] == "TIMEOUT", (record["agent_outcome"], res.stderr[-2000:])
    assert record["agent_outcome"]["reason"] == "stopped", record["agent_outcome"]
    assert [(c.params["command"], c.status) for c in build_view(events).tool_calls] == [
        (sleep, "unresolved")]
    assert processes_marked(mark) == {}


def test_a_held_cap_of_one_turn_says_one_turn():
    from ce_agents.cli_agent import CliAgent, Events

    events = Events(Sink())
    events.max_turns, events.session = 1, "session s"
    events.turn_start()
    events.turn_end()
    events.held_after(1, "pi")
    outcome = CliAgent().finish(events, -15, False, "")
    assert outcome.detail == "session s, 1 turn: pi held its next model call at max_turns 1"
