"""`ce trace import` of a Codex session log (rollout-*.jsonl): the trace a ce run of the
session would have had (ce's codex agent reads the same log live), so a Codex session
recorded elsewhere is scored as one ce ran. Before, the log was "not a Claude Code
stream-json, session transcript or coder_eval task.json"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ce_runtime.trace import events as T
from ce_runtime.trace.events import read_trace
from ce_runtime.trace.importers import detect_format, import_codex_session, import_file

ROLLOUT = Path(__file__).resolve().parent / "fixtures" / "codex" / "rollout.jsonl"
CE = [sys.executable, "-m", "ce_runtime.cli"]


def _live(lines: list[bytes]) -> list:
    """The events ce's codex agent makes of these log lines during a run."""
    from ce_agents.cli_agent import Events
    from ce_agents.codex import DEFAULT_MODEL, CodexAgent, Session
    from ce_runtime.pricing import agent_rates
    from tests.test_codex_session_log import ListSink

    sink = ListSink()
    events = Events(sink)
    events.codex = Session("/home/.codex", agent_rates({}, DEFAULT_MODEL)[1])
    agent = CodexAgent()
    for line in lines:
        agent.on_log(line, events)
    events.turn_end()
    return sink.events


def _shape(events: list) -> list:
    """What scoring reads, without times: turns, messages, calls, results, usage."""
    out = []
    for e in events:
        if isinstance(e, T.TurnStart):
            out.append(("turn", e.turn))
        elif isinstance(e, T.Message) and e.role == "assistant":
            out.append(("message", e.text))
        elif isinstance(e, T.ToolCall):
            out.append(("call", e.call_id, e.tool, e.raw_tool, e.params))
        elif isinstance(e, T.ToolResult):
            out.append(("result", e.call_id, e.status, e.output))
        elif isinstance(e, T.Usage):
            out.append(("usage", e.input_tokens, e.output_tokens, e.cache_read_tokens,
                        e.cache_creation_tokens, round(e.cost_usd, 9)))
    return out


@pytest.mark.parametrize("usage_records", [True, False])
def test_a_codex_log_imports_as_ce_s_codex_agent_maps_it_live(usage_records):
    lines = ROLLOUT.read_bytes().splitlines()
    if not usage_records:  # an older log: usage from token_count's running totals
        lines = [raw for raw in lines if b'"type": "token_usage_record"' not in raw]
    data = b"\n".join(lines) + b"\n"
    assert detect_format(data) == "codex-session"
    res = import_codex_session(data, name=str(ROLLOUT))
    assert res.warnings == [] and res.format == "codex-session"
    assert _shape(res.events) == _shape(_live(lines))
    assert [e.turn for e in res.events if isinstance(e, T.TurnStart)] == [1, 2, 3, 4, 5]
    header, start, end = res.events[0], res.events[1], res.events[-1]
    assert (header.agent, header.model, header.trial_id) == ("codex", "gpt-5.5", "rollout")
    assert isinstance(start, T.AgentStart)
    assert (type(end), end.reason, end.detail) == (T.AgentEnd, "finished", "done")
    # the user's prompt is kept, the harness's environment context is not
    assert [e.text for e in res.events if isinstance(e, T.Message) and e.role == "user"] \
        == ["go"]
    times = [e.t for e in res.events]
    assert times == sorted(times) and times[-1] > 2  # from the log's timestamps


def test_a_damaged_codex_log_imports_what_it_can_with_warnings_by_line():
    lines = ROLLOUT.read_bytes().splitlines()
    lines[9] = lines[9][: len(lines[9]) // 2]  # the second command's call, cut short
    lines.insert(3, b'{"timestamp": "x", "type": "response_item", "payload": 3}')
    res = import_file_bytes(b"\n".join(lines))
    assert res.warnings == [
        (4, "unreadable timestamp 'x'", 0),
        (4, "response_item record without a payload object; skipped", 0),
        (11, "not JSON: Input data was truncated", len(lines[10].decode()) + 1),
        (16, "output of an unknown tool call call_0001_1; skipped", 0)]
    calls = [e.call_id for e in res.events if isinstance(e, T.ToolCall)]
    assert calls == ["call_0001_0", "call_0002_0", "call_0003_0", "call_0004_0"]


def import_file_bytes(data: bytes):
    return import_codex_session(data, name="rollout-x.jsonl")


def test_ce_trace_import_reads_a_codex_log_and_the_trace_is_scored(tmp_path):
    out = tmp_path / "t.msgpack"
    res = subprocess.run([*CE, "trace", "import", str(ROLLOUT), "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"{out}: 31 events, 5 tool calls, 0 warnings [codex-session]"
    assert import_file(str(ROLLOUT)).format == "codex-session"
    assert read_trace(str(out)).events[0].agent == "codex"
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "hello.py").write_text('print("hi")\n')
    (tmp_path / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: go\nagent: {type: codex}\n"
        "success_criteria:\n"
        "  - {type: command_executed, command_pattern: 'exit 3', description: failed one}\n"
        "  - {type: command_executed, tool_name: Edit, min_count: 2, description: patched}\n")
    explained = subprocess.run([*CE, "explain", str(tmp_path / "t.yaml"), "--workspace",
                                str(tmp_path / "ws"), "--trace", str(out)],
                               capture_output=True, text=True, timeout=120)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    assert "call#2 Bash 'echo third; exit 3'" in explained.stdout
    assert "2 of 5 calls match" in explained.stdout
