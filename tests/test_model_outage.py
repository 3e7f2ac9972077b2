"""A failing model API: each CLI's retries of a failed model call are `model_error` events
in the trace, and a timeout that comes while the API is still failing (the CLI retrying,
nothing answered since) is an ERROR, the API's, which `--retry-errors` runs again; not a
TIMEOUT, a verdict on the agent. Claude Code retried a 529 for minutes (10 retries,
backoff to 32 s): a nightly run during an outage read as agents timing out, with nothing
in their traces to say why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from xml.etree import ElementTree

import pytest

from ce_runtime.report.html_trial import TemplateCache, trial_detail
from ce_runtime.store.record import read_record
from ce_runtime.trace import events as T
from tests.engines import need
from tests.test_agent_fidelity import ce_run, missing, of, shell, task, trial
from tests.test_agent_turn_limits import Sink

AGENTS = ["claude-code", "codex", "opencode", "pi", "openai"]


def _fields(events: list[T.Event]) -> list[tuple]:
    return [(e.error, e.status, e.attempt, e.retries) for e in events
            if isinstance(e, T.ModelError)]


def test_each_cli_says_a_failed_model_call_as_a_model_error():
    from ce_agents.cli_agent import Events
    from ce_agents.codex import CodexAgent, Session
    from ce_agents.opencode import OpenCodeAgent
    from ce_agents.pi import PiAgent

    why = "unexpected status 529 <unknown status code>: overloaded, url: http://h/v1/responses"
    sink = Sink()
    events = Events(sink)
    events.codex = Session("/nonexistent", None)
    for line in ({"type": "error", "message": f"Reconnecting... 2/5 ({why})"},
                 {"type": "error", "message": "something else"}):
        CodexAgent().on_line(line, events)
    assert _fields(sink.events) == [(why, 529, 2, 5)]
    assert [e.text for e in of(sink.events, "Message")] == ["codex: something else"]

    # Pi: a failed call is said with the retry Pi's auto_retry_start names (it comes after
    # the call's turn_end and agent_end), the last one (no more retries) without
    failed = {"type": "message_end", "message": {
        "role": "assistant", "content": [], "stopReason": "error",
        "errorMessage": "500 Internal Server Error", "usage": {}}}
    sink = Sink()
    events, pi = Events(sink), PiAgent()
    for attempt in (1, 2):
        for line in ({"type": "turn_start"}, failed, {"type": "turn_end"},
                     {"type": "agent_end"}, {"type": "auto_retry_start", "attempt": attempt,
                                             "maxAttempts": 2, "delayMs": 10}):
            pi.on_line(line, events)
    for line in ({"type": "turn_start"}, failed, {"type": "turn_end"}, {"type": "agent_end"}):
        pi.on_line(line, events)
    assert _fields(sink.events) == [("500 Internal Server Error", 500, 1, 2),
                                    ("500 Internal Server Error", 500, 2, 2)]
    pi.on_line({"type": "auto_retry_end", "success": False, "attempt": 2,
                "finalError": "500 Internal Server Error"}, events)
    assert _fields(sink.events)[2:] == [("500 Internal Server Error", 500, None, None)]
    assert events.error == "500 Internal Server Error"
    # no retry at all (retries off): said when the CLI has ended
    sink = Sink()
    events = Events(sink)
    for line in ({"type": "turn_start"}, failed, {"type": "turn_end"}, {"type": "agent_end"}):
        pi.on_line(line, events)
    assert _fields(sink.events) == []
    pi.ended(events)
    assert _fields(sink.events) == [("500 Internal Server Error", 500, None, None)]

    sink = Sink()
    events = Events(sink)
    agent = OpenCodeAgent()
    agent.on_line({"type": "ce_model_call"}, events)
    agent.on_line({"type": "ce_model_retry", "attempt": 3,
                   "message": "Provider is overloaded (529)"}, events)
    assert _fields(sink.events) == [("Provider is overloaded (529)", 529, 3, None)]
    assert T.ModelError(0.0, "Provider is overloaded (529)", 529, 3).summary() == \
        "Provider is overloaded (529) (attempt 3)"
    assert T.ModelError(0.0, "overloaded", 529, 6, 10).summary() == \
        "529 overloaded (attempt 6 of 10)"


def test_an_imported_claude_stream_keeps_its_api_retries(tmp_path):
    from ce_runtime.trace.import_claude import import_claude_stream

    lines = [{"type": "system", "subtype": "init", "session_id": "s", "model": "m"},
             {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
              "retry_delay_ms": 500, "error_status": 529, "error": "overloaded"},
             {"type": "assistant", "message": {"id": "a", "role": "assistant",
                                               "content": [{"type": "text", "text": "hi"}]}},
             {"type": "result", "subtype": "success", "is_error": False, "result": "hi"}]
    lines.insert(2, {"type": "system", "subtype": "api_retry", "attempt": 2,
                     "error": {"type": "overloaded_error", "message": "Overloaded"}})
    result = import_claude_stream("\n".join(map(json.dumps, lines)).encode(), task_id="t")
    assert _fields(result.events) == [("overloaded", 529, 1, 10), ("Overloaded", None, 2, None)]


@pytest.mark.slow
@pytest.mark.parametrize("agent", AGENTS)
def test_a_timeout_while_the_model_api_fails_is_an_error_not_the_agents(agent, tmp_path):
    """Every call fails (529): the trial is an ERROR with the CLI's retries in its trace.
    Claude Code and OpenCode were still retrying at the timeout (which said so); Codex,
    pi and ce's openai loop give up by themselves (which is the API's failure too). A call that failed twice, then
    answered with a command that outlives the timeout: the API recovered, so that
    timeout is the agent's."""
    need(missing(agent))
    task(tmp_path, "down", agent, [{**shell(agent, "echo never"), "fail": 529}],
         "{task_timeout: 45}", tools=None)
    if agent == "claude-code":  # (a CLI that leaves no command running in the background)
        sleep = "python3 -c 'import time; time.sleep(120)'"  # (`sleep 120` it refuses)
        task(tmp_path, "recovers", agent,
             [{**shell(agent, sleep), "fail": {"status": 529, "times": 2}}],
             "{task_timeout: 30}")
    if agent == "pi":  # (Pi retries a 503, not a 529; each of its attempts is 3 requests:
        # its OpenAI client retries a 5xx twice by itself, unseen)
        task(tmp_path, "retried", agent, [{**shell(agent, "echo first"),
                                           "fail": {"status": 503, "times": 8}},
                                          {"text": "done"}], "{task_timeout: 45}", tools=None)
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr
    record, events, _ = trial(tmp_path, "down")
    assert record["status"] == "ERROR", (record["agent_outcome"], res.stderr[-2000:])
    assert not record.get("integrity"), record
    failed = of(events, "ModelError")
    assert failed and all(e.status in (529, None) for e in failed), failed
    detail = record["agent_outcome"]["detail"]
    when = "task_timeout (45s) was reached" if agent in ("claude-code", "opencode") else \
        "the agent gave up"  # (after its own retries)
    assert detail.startswith(f"the model API was failing when {when}: "
                             f"{failed[-1].summary()}"), detail
    # the run's last words say it is the API's, not the agent's
    said = res.stdout + res.stderr
    assert f"(default/down/00): {detail[:80]}" in said, said[-2000:]  # (cut when long)
    # report.html's timeline of the trial shows each failed call
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest")
    shown = json.loads(trial_detail(str(run_dir), read_record(
        str(run_dir / "default" / "down" / "00")), 200_000, TemplateCache(str(run_dir))))
    assert [e["text"] for e in shown["timeline"] if e["k"] == "model_error"] == [
        e.summary() for e in failed]
    if agent == "pi":  # each failure says the retry Pi makes of it, of its most
        record, events, _ = trial(tmp_path, "retried")
        assert record["status"] == "SUCCESS", (record["agent_outcome"], res.stderr[-2000:])
        retried = [(e.status, e.attempt, e.retries) for e in of(events, "ModelError")]
        assert [r[:2] for r in retried] == [(503, 1), (503, 2)], retried
        assert retried[0][2] == retried[1][2] and retried[0][2] >= 2, retried
    if agent == "claude-code":
        record, events, _ = trial(tmp_path, "recovers")
        assert record["status"] == "TIMEOUT", (record["agent_outcome"], res.stderr[-2000:])
        assert len(of(events, "ModelError")) >= 1 and of(events, "ToolCall")


@pytest.mark.slow
def test_an_outage_reads_as_the_apis_in_explain_junit_and_report_html(tmp_path):
    """Claude Code still retrying a 529 when task_timeout comes: every place that says why
    the trial is an ERROR says the model API's failure, not the agent's. `ce explain`
    ended 'trial -> ERROR (kept: the agent ended in an error)'."""
    from ce_runtime.report.html import COLUMNS, rows

    need(missing("claude-code"))
    task(tmp_path, "down", "claude-code", [{**shell("claude-code", "echo never"), "fail": 529}],
         "{task_timeout: 12}", tools=None)
    env = {**os.environ, "CE_PLAIN": "1"}
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", ".", "--scripted-model",
                          "--runs-root", "runs", "--junit-xml", "junit.xml"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert "Traceback" not in res.stderr, res.stderr
    record, _, _ = trial(tmp_path, "down")
    detail = record["agent_outcome"]["detail"]
    assert record["status"] == "ERROR", (detail, res.stderr[-2000:])
    assert detail.startswith("the model API was failing when task_timeout (12s) was reached: "
                             "529 overloaded (attempt "), detail
    trial_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest") \
        / "default" / "down" / "00"
    explained = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "explain",
                                str(trial_dir)], env=env, capture_output=True, text=True,
                               timeout=300)
    assert explained.returncode == 1 and "Traceback" not in explained.stderr, explained.stderr
    assert f"NOTE: {detail}: the trial stays ERROR" in explained.stdout, explained.stdout
    assert explained.stdout.rstrip().endswith(
        "trial -> ERROR (kept: the model API was failing)"), explained.stdout
    assert "the agent ended in an error" not in explained.stdout
    # JUnit's error (what a CI dashboard shows) says it as is: not "agent error: ..."
    [error] = ElementTree.parse(tmp_path / "junit.xml").getroot().iter("error")
    assert error.get("message") == detail, error.attrib
    # report.html's trials table: the error next to the failed criterion (it showed `c0`
    # alone; the reason was in the run-limit note, which the page shows only when no
    # criterion failed)
    [row] = rows([read_record(str(trial_dir))])
    assert dict(zip(COLUMNS, row, strict=True))["error"] == detail, row
