"""Foreign transcripts -> trace events (`ce_runtime.trace.importers`) and `ce trace dump/import`.

The fixtures under tests/fixtures/transcripts are small but shaped like the real thing:
Claude Code stream-json and session records as the CLI writes them, and a coder_eval
task.json whose every object carries exactly the fields of coder_eval 0.12.16's
EvaluationResult / TurnRecord / CommandTelemetry / AssistantMessage / TokenUsage.
"""

from __future__ import annotations

import json
import os

import msgspec
import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from ce_runtime.trace import events as T
from ce_runtime.trace.importers import (
    detect_format,
    import_claude_session,
    import_claude_stream,
    import_coder_eval,
    import_file,
    normalize_tool,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "transcripts")
STREAM = os.path.join(FIXTURES, "stream_basic.jsonl")
SESSION = os.path.join(FIXTURES, "session_basic.jsonl")
CODER_EVAL = os.path.join(FIXTURES, "coder_eval_run", "task.json")
MODEL = "claude-sonnet-4-5-20250929"


def _usage_sum(events):
    out = [0, 0, 0, 0, 0.0]
    for e in events:
        if isinstance(e, T.Usage):
            for i, v in enumerate((e.input_tokens, e.output_tokens, e.cache_read_tokens,
                                   e.cache_creation_tokens, e.cost_usd)):
                out[i] += v
    return out


def _lines(*records) -> bytes:
    return b"\n".join(r if isinstance(r, bytes) else json.dumps(r).encode() for r in records)


def _assistant(msg_id, *blocks, parent=None, usage=None, stop=None):
    return {"type": "assistant", "parent_tool_use_id": parent,
            "message": {"id": msg_id, "role": "assistant", "model": MODEL, "content": list(blocks),
                        "stop_reason": stop, "usage": usage or {"input_tokens": 1,
                                                                "output_tokens": 1}}}


def _tool_use(call_id, name, **params):
    return {"type": "tool_use", "id": call_id, "name": name, "input": params}


def _tool_result(call_id, content, is_error=False):
    return {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id, "content": content,
         "is_error": is_error}]}}


# ---------------------------------------------------------------- Claude Code stream-json

def test_stream_json_exact_events():
    res = import_file(STREAM)
    assert res.format == "claude-stream" and res.warnings == []
    assert res.events == [
        T.RunHeader(0.0, schema_version=T.SCHEMA_VERSION, trial_id="stream_basic",
                    task_id="stream_basic", plan_hash="", agent="claude-code", model=MODEL),
        T.AgentStart(0.0, agent="claude-code", model=MODEL),
        T.TurnStart(0.0, turn=1),
        T.Message(0.0, role="assistant", text="I'll look at the project first."),
        # the same message id repeats on every block: its usage is counted once
        T.Usage(0.0, input_tokens=120, output_tokens=45, cache_creation_tokens=2000),
        T.ToolCall(0.0, call_id="toolu_01Ls", tool="Bash", raw_tool="Bash",
                   params={"command": "ls", "description": "List files"}),
        T.ToolResult(0.0, call_id="toolu_01Ls", status="ok", output="README.md\nmain.py"),
        T.TurnEnd(0.0, turn=1),
        T.TurnStart(0.0, turn=2),
        T.ToolCall(0.0, call_id="toolu_02Rd", tool="Read", raw_tool="Read",
                   params={"file_path": "/tmp/ws/missing.py"}),
        T.Usage(0.0, input_tokens=8, output_tokens=30, cache_read_tokens=2000,
                cache_creation_tokens=150),
        T.ToolResult(0.0, call_id="toolu_02Rd", status="error",
                     output="<tool_use_error>File does not exist.</tool_use_error>"),
        T.TurnEnd(0.0, turn=2),
        T.TurnStart(0.0, turn=3),
        T.Message(0.0, role="assistant",
                  text="The project has README.md and main.py; missing.py does not exist."),
        T.Usage(0.0, input_tokens=6, output_tokens=20, cache_read_tokens=2150,
                cache_creation_tokens=90),
        T.TurnEnd(5.234, turn=3),
        # the result's totals top up what the messages under-reported, plus the cost
        T.Usage(5.234, output_tokens=45, cost_usd=0.0213),
        T.AgentEnd(5.234, reason="finished"),
    ]
    assert _usage_sum(res.events) == [134, 140, 4150, 2240, 0.0213]  # == the result's usage
    assert res.tool_calls == 2 and res.unresolved == 0


def test_stream_json_max_turns_leaves_the_last_call_unresolved():
    data = _lines(
        {"type": "system", "subtype": "init", "model": MODEL, "session_id": "s"},
        _assistant("m1", _tool_use("t1", "Bash", command="make")),
        _tool_result("t1", "ok"),
        _assistant("m2", _tool_use("t2", "Bash", command="make test")),
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 2,
         "duration_ms": 1000, "total_cost_usd": 0.5, "usage": {}},
    )
    res = import_claude_stream(data, trial_id="tr", task_id="ta")
    kinds = [type(e).__name__ for e in res.events]
    assert kinds == ["RunHeader", "AgentStart", "TurnStart", "ToolCall", "Usage", "ToolResult",
                     "TurnEnd", "TurnStart", "ToolCall", "Usage", "TurnEnd", "Usage", "AgentEnd"]
    assert res.events[-1] == T.AgentEnd(1.0, reason="max_turns", detail="num_turns=2")
    assert res.events[-2] == T.Usage(1.0, cost_usd=0.5)
    # t2 has no result: no ToolResult is invented, the interpreter sees it unresolved
    assert not any(isinstance(e, T.ToolResult) and e.call_id == "t2" for e in res.events)
    assert res.unresolved == 1
    assert (res.events[0].trial_id, res.events[0].task_id) == ("tr", "ta")


@pytest.mark.parametrize("subtype,is_error,reason", [
    ("success", False, "finished"), ("success", True, "error"),
    ("error_max_turns", True, "max_turns"), ("error_max_budget_usd", True, "budget"),
    ("error_during_execution", True, "error")])
def test_stream_json_result_reasons(subtype, is_error, reason):
    res = import_claude_stream(_lines(_assistant("m", {"type": "text", "text": "x"}),
                                      {"type": "result", "subtype": subtype,
                                       "is_error": is_error, "result": "boom"}))
    assert res.events[-1].reason == reason


def test_stream_json_permission_denials_mark_results_denied():
    data = _lines(
        _assistant("m1", _tool_use("t1", "Bash", command="rm -rf /"),
                   _tool_use("t2", "Write", file_path="/etc/x", content="")),
        _tool_result("t1", "Claude requested permissions to use Bash, but you haven't "
                           "granted it yet.", is_error=True),
        {"type": "result", "subtype": "success", "is_error": False,
         "permission_denials": [{"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {}},
                                {"tool_name": "Write", "tool_use_id": "t2", "tool_input": {}}]},
    )
    res = import_claude_stream(data)
    statuses = {e.call_id: e.status for e in res.events if isinstance(e, T.ToolResult)}
    assert statuses == {"t1": "denied", "t2": "denied"}


def test_stream_json_malformed_and_unknown_lines_are_warnings():
    data = _lines(
        {"type": "system", "subtype": "init", "model": MODEL},
        b'{"type": "assistant", "message": {',
        b"[1, 2]",
        {"type": "stream_event", "event": {"type": "message_start"}},
        {"type": "system", "subtype": "hook_response"},
        b"",
        _assistant("m1", {"type": "text", "text": "hi"}, {"type": "thinking", "thinking": "t"},
                   {"type": "future_block"}),
        _tool_result("nope", "orphan"),
    )
    res = import_claude_stream(data)
    lines = [w.line for w in res.warnings]
    assert lines == [2, 3, 8, 8]
    # a line cut short is said at its end, the others' at no column
    assert [w.col for w in res.warnings] == [len(b'{"type": "assistant", "message": {') + 1,
                                             0, 0, 0]
    assert "not JSON" in res.warnings[0][1] and "JSON object" in res.warnings[1][1]
    assert "unknown tool call nope" in res.warnings[2][1]
    assert "no result record" in res.warnings[3][1]
    # the turn stays open: the transcript stopped without an end, like a crashed run
    assert [type(e).__name__ for e in res.events] == [
        "RunHeader", "AgentStart", "TurnStart", "Message", "Usage", "ToolResult"]


def test_stream_json_sub_agent_records_add_no_turns():
    data = _lines(
        _assistant("m1", _tool_use("task1", "Task", prompt="look around")),
        _assistant("sub1", _tool_use("t1", "Bash", command="ls"), parent="task1"),
        _tool_result("t1", "a.txt"),
        _assistant("sub2", {"type": "text", "text": "found a.txt"}, parent="task1"),
        _tool_result("task1", [{"type": "text", "text": "found a.txt"}]),
        _assistant("m2", {"type": "text", "text": "done"}),
        {"type": "result", "subtype": "success", "is_error": False},
    )
    res = import_claude_stream(data)
    assert [e.turn for e in res.events if isinstance(e, T.TurnStart)] == [1, 2]
    assert [e.call_id for e in res.events if isinstance(e, T.ToolCall)] == ["task1", "t1"]


def test_tool_result_content_list_keeps_text_and_names_other_blocks():
    data = _lines(_assistant("m", _tool_use("t", "Read", file_path="/x.png")),
                  _tool_result("t", [{"type": "text", "text": "a"}, {"type": "image"},
                                     {"type": "text", "text": "b"}]))
    [result] = [e for e in import_claude_stream(data).events if isinstance(e, T.ToolResult)]
    assert result.output == "a\n[image]\nb"


# ---------------------------------------------------------------- Claude Code session file

def test_session_jsonl_exact_events():
    res = import_file(SESSION)
    assert res.format == "claude-session" and res.warnings == []
    assert res.events == [
        T.RunHeader(0.0, schema_version=T.SCHEMA_VERSION, trial_id="session_basic",
                    task_id="session_basic", plan_hash="", agent="claude-code", model=MODEL,
                    started_at=1748772000.0),  # 2025-06-01T10:00:00Z, the first entry
        T.AgentStart(0.2, agent="claude-code", model=MODEL),
        # the isMeta entry is not the user's; summary, snapshot and system entries are skipped
        T.Message(0.2, role="user", text="List the files and read main.py"),
        T.TurnStart(2.0, turn=1),
        T.Usage(2.0, input_tokens=40, output_tokens=25, cache_creation_tokens=1800),
        T.ToolCall(2.5, call_id="toolu_S1", tool="Bash", raw_tool="Bash",
                   params={"command": "ls", "description": "List files"}),
        T.ToolResult(3.25, call_id="toolu_S1", status="ok", output="main.py",
                     duration_ms=750.0),
        T.TurnEnd(3.25, turn=1),
        T.TurnStart(5.0, turn=2),
        T.ToolCall(5.0, call_id="toolu_S2", tool="Read", raw_tool="Read",
                   params={"file_path": "/tmp/ws/main.py"}),
        T.Usage(5.0, input_tokens=6, output_tokens=40, cache_read_tokens=1800,
                cache_creation_tokens=120),
        # the repeated entry (same uuid, as after a resume) is skipped
        T.ToolResult(5.04, call_id="toolu_S2", status="ok", output="     1\tprint('hi')\n",
                     duration_ms=40.0),
        T.TurnEnd(5.04, turn=2),
        T.TurnStart(7.0, turn=3),
        T.Message(7.0, role="assistant", text="main.py prints hi."),
        T.Usage(7.0, input_tokens=5, output_tokens=12, cache_read_tokens=1920,
                cache_creation_tokens=60),
        T.TurnEnd(7.0, turn=3),
        T.AgentEnd(7.0, reason="finished",
                   detail="inferred: the last message stopped with end_turn"),
    ]


def test_session_without_end_turn_has_no_agent_end():
    entry = {"type": "assistant", "uuid": "u1", "timestamp": "2025-06-01T10:00:00Z",
             "sessionId": "s", "parentUuid": None,
             "message": {"id": "m", "role": "assistant", "model": MODEL, "stop_reason": "tool_use",
                         "content": [_tool_use("t", "Bash", command="sleep 100")]}}
    res = import_claude_session(_lines(entry, {**entry, "uuid": "u2", "timestamp": "junk"}))
    assert not any(isinstance(e, T.AgentEnd) for e in res.events)
    assert res.unresolved == 1
    assert res.warnings == [(2, "unreadable timestamp 'junk'", 0),
                            (2, "tool call t repeated; the repeat is skipped", 0)]


def test_session_cost_comes_from_its_cost_state_record():
    """A session's messages carry tokens, never a cost; Claude Code 2.1 writes the
    session's total (`cost-state`, `totalCostUSD`) into the transcript. The imported
    trace cost $0 (a criterion on trace.cost_usd passed on nothing); now it tops the
    usage up to that total once, after the last turn, as stream-json's result does."""
    entry = {"type": "assistant", "uuid": "u1", "timestamp": "2025-06-01T10:00:00Z",
             "sessionId": "s", "parentUuid": None,
             "message": {"id": "m", "role": "assistant", "model": MODEL,
                         "stop_reason": "end_turn", "content": [{"type": "text", "text": "hi"}],
                         "usage": {"input_tokens": 1000, "output_tokens": 20}}}
    state = {"type": "cost-state", "sessionId": "s", "totalCostUSD": 0.0033,
             "modelUsage": {MODEL: {"inputTokens": 1000, "outputTokens": 20,
                                    "costUSD": 0.0033}}}
    res = import_claude_session(_lines(entry, state))
    assert res.warnings == []
    assert _usage_sum(res.events) == [1000, 20, 0, 0, pytest.approx(0.0033)]
    kinds = [type(e).__name__ for e in res.events]
    assert kinds[-3:] == ["TurnEnd", "Usage", "AgentEnd"]
    assert res.events[-2] == T.Usage(0.0, cost_usd=pytest.approx(0.0033))
    # no cost-state (older CLIs): no cost is made up
    assert _usage_sum(import_claude_session(_lines(entry)).events)[4] == 0.0


# ---------------------------------------------------------------- coder_eval task.json

def test_coder_eval_task_json_exact_events():
    res = import_file(CODER_EVAL)
    assert res.format == "coder-eval" and res.warnings == []
    call = T.ToolCall
    assert res.events == [
        T.RunHeader(0.0, schema_version=T.SCHEMA_VERSION, trial_id="coder_eval_run",
                    task_id="hello_world", plan_hash="", agent="claude-code", model=MODEL,
                    started_at=1748779200.0),  # started_at 2025-06-01T12:00:00 (naive: UTC)
        T.AgentStart(0.0, agent="claude-code", model=MODEL),
        T.Message(0.0, role="user", text="Create hello.py that prints Hello"),
        T.TurnStart(1.0, turn=1),  # the AssistantMessage's started_at
        T.Message(4.0, role="assistant", text="I'll create hello.py."),
        call(4.0, call_id="toolu_W1", tool="Write", raw_tool="Write",
             params={"file_path": "/tmp/ws/hello.py", "content": "print('Hello')\n"}),
        T.Usage(4.0, input_tokens=10, output_tokens=120, cache_creation_tokens=3000),
        T.ToolResult(4.012, call_id="toolu_W1", status="ok",
                     output="File created successfully at: /tmp/ws/hello.py", duration_ms=12.0),
        T.TurnEnd(4.012, turn=1),
        T.TurnStart(5.0, turn=2),
        call(8.0, call_id="toolu_B1", tool="Bash", raw_tool="Bash",
             params={"command": "python hello.py", "description": "Run it"}),
        T.Usage(8.0, input_tokens=8, output_tokens=60, cache_read_tokens=3000),
        T.ToolResult(8.08, call_id="toolu_B1", status="error",
                     output="Exit code 127\n/bin/sh: python: not found", duration_ms=80.0),
        T.TurnEnd(8.08, turn=2),
        T.TurnStart(9.0, turn=3),
        call(12.0, call_id="toolu_B2", tool="Bash", raw_tool="Bash",
             params={"command": "python3 hello.py", "description": "Run it with python3"}),
        T.Usage(12.0, input_tokens=6, output_tokens=70, cache_read_tokens=3000),
        T.ToolResult(12.05, call_id="toolu_B2", status="ok", output="Hello", duration_ms=50.0),
        T.TurnEnd(12.05, turn=3),
        T.TurnStart(13.0, turn=4),
        T.Message(17.0, role="assistant", text="Created hello.py; it prints Hello."),
        T.Usage(17.0, input_tokens=6, output_tokens=130, cache_read_tokens=3000),
        T.Usage(17.0, output_tokens=20),  # the ReconciliationMessage
        T.TurnEnd(17.0, turn=4),
        T.Usage(17.0, cost_usd=0.0456),  # the turn's token_usage: tokens agree, adds the cost
        T.AgentEnd(18.0, reason="finished", detail="coder_eval final_status=SUCCESS"),
    ]
    assert _usage_sum(res.events) == [30, 400, 9000, 3000, 0.0456]  # == total_token_usage


def _ce_doc(iterations, **top):
    return {"task_id": "t1", "agent_type": "codex", "started_at": "2025-06-01T12:00:00",
            "final_status": "FAILURE", "iterations": iterations, **top}


def test_coder_eval_documented_minimal_shape_and_codex_normalization():
    doc = _ce_doc([{"user_input": "run the tests", "turns": [
        {"assistant_text": "Running them.", "commands": [
            {"tool_name": "exec_command", "parameters": {"cmd": ["bash", "-lc", "pytest -q"]},
             "status": "error", "output": "1 failed", "duration_ms": 900},
            {"tool_name": "shell", "parameters": {"command": "ls", "workdir": "/w"},
             "status": "success", "output": "a"}]},
        {"commands": [{"tool_name": "command_execution", "parameters": {"command": "make"},
                       "status": "unknown"}]}]}])
    res = import_coder_eval(json.dumps(doc).encode(), name="/runs/x/task.json")
    body = res.events[1:]
    assert res.events[0].trial_id == "x" and res.events[0].task_id == "t1"
    assert res.events[0].agent == "codex"
    assert body == [
        T.AgentStart(0.0, agent="codex"),
        T.Message(0.0, role="user", text="run the tests"),
        T.TurnStart(0.0, turn=1),
        T.Message(0.0, role="assistant", text="Running them."),
        T.ToolCall(0.0, call_id="imported-1", tool="Bash", raw_tool="exec_command",
                   params={"command": "bash -lc 'pytest -q'"}),
        T.ToolCall(0.0, call_id="imported-2", tool="Bash", raw_tool="shell",
                   params={"command": "ls", "workdir": "/w"}),
        T.ToolResult(0.0, call_id="imported-1", status="error", output="1 failed",
                     duration_ms=900.0),
        T.ToolResult(0.0, call_id="imported-2", status="ok", output="a"),
        T.TurnEnd(0.0, turn=1),
        T.TurnStart(0.0, turn=2),
        T.ToolCall(0.0, call_id="imported-3", tool="Bash", raw_tool="command_execution",
                   params={"command": "make"}),  # status unknown: left unresolved
        T.TurnEnd(0.0, turn=2),
        T.AgentEnd(0.0, reason="finished", detail="coder_eval final_status=FAILURE"),
    ]


def test_coder_eval_commands_without_messages_group_by_assistant_turn_index():
    cmd = {"tool_name": "Bash", "result_status": "success", "result_summary": "ok"}
    doc = _ce_doc([{
        "iteration": 1, "user_input": "p", "agent_output": "all done", "messages": [],
        "commands": [{**cmd, "tool_id": "a", "assistant_turn_index": 0, "sequence_number": 0,
                      "parameters": {"command": "one"}},
                     {**cmd, "tool_id": "b", "assistant_turn_index": 0, "sequence_number": 1,
                      "parameters": {"command": "two"}},
                     {**cmd, "tool_id": "c", "assistant_turn_index": 1, "sequence_number": 2,
                      "parameters": {"command": "three"}, "result_status": None}],
        "crashed": True, "crash_reason": "CLI exited 1"}], final_status="ERROR")
    res = import_coder_eval(doc)
    assert [(type(e).__name__, getattr(e, "call_id", getattr(e, "turn", None)))
            for e in res.events[2:]] == [
        ("Message", None), ("TurnStart", 1), ("ToolCall", "a"), ("ToolCall", "b"),
        ("ToolResult", "a"), ("ToolResult", "b"), ("TurnEnd", 1), ("TurnStart", 2),
        ("ToolCall", "c"), ("Message", None), ("TurnEnd", 2), ("AgentEnd", None)]
    assert res.events[-1] == T.AgentEnd(0.0, reason="error",
                                        detail="coder_eval final_status=ERROR: CLI exited 1")
    assert res.unresolved == 1


@pytest.mark.parametrize("top,reason", [
    ({"final_status": "TIMEOUT"}, "timeout"),
    ({"final_status": "COST_BUDGET_EXCEEDED"}, "budget"),
    ({"final_status": "MAX_TURNS_EXHAUSTED"}, "max_turns"),
    ({"final_status": "SUCCESS", "early_stop": {"reason": "decided_pass"}}, "stopped_early")])
def test_coder_eval_final_status_decides_the_last_agent_end(top, reason):
    res = import_coder_eval(_ce_doc([{"user_input": "p", "agent_output": "x"}], **top))
    assert res.events[-1].reason == reason


def test_coder_eval_legacy_turns_alias_and_legacy_input_tokens():
    doc = {"task_id": "t", "turns": [{"user_input": "p", "agent_output": "x",
                                      "token_usage": {"input_tokens": 70, "output_tokens": 5}}]}
    res = import_coder_eval(doc)
    assert _usage_sum(res.events) == [70, 5, 0, 0, 0.0]


def test_coder_eval_unreadable_file_is_a_warning():
    res = import_coder_eval(b"{not json", name="task.json")
    assert len(res.events) == 1 and isinstance(res.events[0], T.RunHeader)
    assert res.warnings and "not JSON" in res.warnings[0][1]


# ---------------------------------------------------------------- shared pieces

@pytest.mark.parametrize("raw,params,expected", [
    ("exec_command", {"cmd": "ls -la"}, ("Bash", {"command": "ls -la"})),
    ("exec_command", {"cmd": ["bash", "-lc", "ls -la"], "workdir": "/w"},
     ("Bash", {"command": "bash -lc 'ls -la'", "workdir": "/w"})),
    ("shell", {"command": ["ls", "a b"]}, ("Bash", {"command": "ls 'a b'"})),
    ("command_execution", {"command": "make"}, ("Bash", {"command": "make"})),
    ("Bash", {"command": "ls"}, ("Bash", {"command": "ls"})),
    ("Read", {"file_path": "x"}, ("Read", {"file_path": "x"})),
    ("apply_patch", None, ("Edit", {})),
    ("write", {"filePath": "/w/a.py", "content": "x"},
     ("Write", {"filePath": "/w/a.py", "content": "x"})),
    ("skill", {"name": "pdf"}, ("Skill", {"skill": "pdf"})),
    ("mcp__db__query", {"sql": "x"}, ("mcp__db__query", {"sql": "x"})),
])
def test_normalize_tool(raw, params, expected):
    assert normalize_tool(raw, params) == expected


def test_detect_format():
    for path, fmt in ((STREAM, "claude-stream"), (SESSION, "claude-session"),
                      (CODER_EVAL, "coder-eval")):
        with open(path, "rb") as fh:
            assert detect_format(fh.read()) == fmt
    assert detect_format(b"") is None
    assert detect_format(b"hello\nworld\n") is None
    assert detect_format(b'{"a": 1}\n') is None


# ---------------------------------------------------------------- the `ce trace` commands

def _run(*args):
    return CliRunner().invoke(main, ["trace", *args])


@pytest.mark.parametrize("path,fmt,events,calls", [
    (STREAM, "claude-stream", 19, 2), (SESSION, "claude-session", 18, 2),
    (CODER_EVAL, "coder-eval", 26, 3)])
def test_cli_import_writes_the_trace_and_a_summary(tmp_path, path, fmt, events, calls):
    out = str(tmp_path / "t.msgpack")
    res = _run("import", path, "-o", out)
    assert res.exit_code == 0, res.output
    assert res.stdout == f"{out}: {events} events, {calls} tool calls, 0 warnings [{fmt}]\n"
    assert T.read_trace(out).events == import_file(path).events


def test_cli_import_options_and_warnings(tmp_path):
    src = tmp_path / "run.jsonl"
    src.write_bytes(_lines(_assistant("m", _tool_use("t", "Bash", command="ls")), b"oops"))
    out = str(tmp_path / "t.msgpack")
    res = _run("import", str(src), "-o", out, "--format", "claude-stream", "--task-id", "hello",
               "--trial-id", "r1", "--plan-hash", "abc")
    assert res.exit_code == 0, res.output
    assert res.stdout == f"{out}: 5 events, 1 tool call (1 unresolved), 2 warnings [claude-stream]\n"
    # at its line and column, as diagnostics are (FILE:LINE:COL), not '(byte 0)'
    assert f"{src}:2:1: warning: not JSON: JSON is malformed: invalid character\n" \
        in res.stderr, res.stderr
    header = T.read_trace(out).events[0]
    assert (header.task_id, header.trial_id, header.plan_hash) == ("hello", "r1", "abc")


def test_a_malformed_line_is_said_at_its_column_not_its_byte_offset(tmp_path):
    """`bad.jsonl:2: warning: ... (byte 4)`: the offset counted bytes from 0 in the line
    with its indentation stripped. Now `bad.jsonl:2:COL:`, COL in characters from 1,
    as every diagnostic of ce's says a place."""
    src = tmp_path / "bad.jsonl"
    src.write_bytes(_lines({"type": "system", "subtype": "init", "model": MODEL},
                           '  {"é": é}'.encode(), b'{"a" 1}'))
    res = _run("import", str(src), "-o", str(tmp_path / "t.msgpack"), "--format",
               "claude-stream")
    assert res.stderr.splitlines()[:2] == [
        f"{src}:2:9: warning: not JSON: JSON is malformed: invalid character",
        f"{src}:3:6: warning: not JSON: JSON is malformed: expected ':'"], res.stderr
    assert "byte" not in res.stderr


def test_cli_import_of_which_nothing_could_be_read_fails_and_writes_nothing(tmp_path):
    """A coder_eval task.json cut short (a copy interrupted), forced with --format: a
    warning, then a trace of its header alone written, exit 0, as if the trial had done
    nothing; a script importing a folder of them could not tell."""
    src = tmp_path / "task.json"
    with open(CODER_EVAL, "rb") as fh:
        src.write_bytes(fh.read()[:700])
    kept = src.read_text().rstrip().split("\n")  # said where the input ends
    out = tmp_path / "t.msgpack"
    res = _run("import", str(src), "-o", str(out), "--format", "coder-eval")
    assert res.exit_code == 1, res.output
    assert res.stderr.splitlines() == [
        f"{src}:{len(kept)}:{len(kept[-1]) + 1}: warning: not JSON: Input data was "
        "truncated",
        f"ce trace import: {src}: nothing could be imported (the warnings above); {out} "
        "not written"]
    assert not out.exists() and res.stdout == ""


def test_cli_import_to_a_place_it_cannot_write_says_so(tmp_path):
    """-o under a file (or a read-only or missing directory): it was an internal error."""
    (tmp_path / "afile").write_text("x")
    out = str(tmp_path / "afile" / "t.msgpack")
    res = _run("import", STREAM, "-o", out)
    assert res.exit_code == 2, res.output
    assert f"ce trace import: cannot write {out}: Not a directory" in res.stderr


def test_cli_import_unknown_format_exits_1(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_text("just text\n")
    res = _run("import", str(src), "-o", str(tmp_path / "t.msgpack"))
    assert res.exit_code == 1
    assert "pass --format" in res.stderr
    assert not (tmp_path / "t.msgpack").exists()


def test_cli_import_of_a_ce_runs_own_files_is_refused_with_where_the_trace_is(
        tmp_path, monkeypatch):
    """ce's run.json has a `turns` count: auto-detection took it for a coder_eval
    task.json (whose legacy `turns` is a list) and wrote an empty trace, exit 0."""
    from tests.test_report_worker import TASK

    (tmp_path / "t.yaml").write_text(TASK.format(name="t", word="hi"))
    run = tmp_path / "run"
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(main, ["run", "t.yaml", "--run-dir", "run"]).exit_code == 0
    assert isinstance(json.loads((run / "run.json").read_text())["turns"], int)
    trial = next(run.rglob("task.json")).parent
    for source, where in ((run / "run.json", "each trial's trace.msgpack"),
                          (trial / "task.json", str(trial / "trace.msgpack"))):
        res = _run("import", str(source), "-o", str(tmp_path / "t.msgpack"))
        assert res.exit_code == 1, res.output
        assert "not a Claude Code stream-json" in res.stderr and where in res.stderr
        assert not (tmp_path / "t.msgpack").exists()
    assert detect_format(b'{"turns": 3, "task_id": "t"}') is None
    assert detect_format(b'{"turns": [], "task_id": "t"}') == "coder-eval"



def test_cli_dump_prints_json_lines(tmp_path):
    out = str(tmp_path / "t.msgpack")
    events = import_file(STREAM).events
    T.write_trace(out, events)
    res = _run("dump", out)
    assert res.exit_code == 0 and res.stderr == ""
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert rows == [json.loads(msgspec.json.encode(T.event_to_dict(e))) for e in events]
    assert rows[0]["type"] == "run" and rows[5] == {
        "type": "tool_call", "t": 0.0, "call_id": "toolu_01Ls", "tool": "Bash",
        "raw_tool": "Bash", "params": {"command": "ls", "description": "List files"}}


def test_cli_dump_truncated_trace_reports_and_prints_the_prefix(tmp_path):
    events = import_file(SESSION).events
    good = b"".join(T.encode_frame(e) for e in events[:5])
    path = tmp_path / "crashed.msgpack"
    path.write_bytes(good + T.encode_frame(events[5])[:-3])  # a crash mid-write
    res = _run("dump", str(path))
    assert res.exit_code == 0
    assert len(res.stdout.splitlines()) == 5
    assert f"truncated at byte {len(good)}" in res.stderr and "5 events read" in res.stderr


def test_cli_dump_corrupt_frame_and_nothing_readable(tmp_path):
    events = import_file(STREAM).events
    good = b"".join(T.encode_frame(e) for e in events[:2])
    path = tmp_path / "corrupt.msgpack"
    path.write_bytes(good + b"\x03\x00\x00\x00\xc1\xc1\xc1")  # a frame of invalid msgpack
    res = _run("dump", str(path))
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 2
    assert f"undecodable event at byte {len(good)}" in res.stderr

    path.write_bytes(b"\x10\x00")
    res = _run("dump", str(path))
    assert res.exit_code == 1 and res.stdout == ""
    assert "no event could be read (truncated at byte 0)" in res.stderr


def test_cli_dump_of_a_file_that_is_no_trace_says_so(tmp_path):
    """A task file or a transcript given to dump by mistake: not 'a crash while writing'."""
    path = tmp_path / "session.jsonl"
    path.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n')
    res = _run("dump", str(path))
    assert res.exit_code == 1 and res.stdout == ""
    assert "not a ce trace" in res.stderr and "ce trace import" in res.stderr
    assert "crash" not in res.stderr


def test_cli_trace_help_teaches():
    res = _run("--help")
    assert res.exit_code == 0
    for text in ("dump", "import", "ce trace dump", "ce trace import", "task.json",
                 "stream-json"):
        assert text in res.output
    res = _run("import", "--help")
    assert "claude-session" in res.output and "coder-eval" in res.output


def test_explain_refuses_a_transcript_given_as_the_trace(tmp_path):
    """`ce explain TASK --workspace WS --trace session.jsonl` graded the trace criteria
    on no events at all (only a warning, 'truncated at byte 0') and printed their
    scores as if the agent had made no tool call; `ce trace dump` said what was wrong."""
    (tmp_path / "ws").mkdir()
    task = tmp_path / "t.yaml"
    task.write_text("task_id: t\ndescription: d\ninitial_prompt: p\nsuccess_criteria:\n"
                    "  - {type: command_executed, command_pattern: pytest, "
                    "description: ran the tests}\n", encoding="utf-8")
    session = tmp_path / "session.jsonl"
    session.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n')
    res = CliRunner().invoke(main, ["explain", str(task), "--workspace", str(tmp_path / "ws"),
                                    "--trace", str(session)])
    assert res.exit_code == 2, res.output
    assert "Invalid value for --trace" in res.output
    assert "not a ce trace" in res.output and "ce trace import" in res.output
    assert "c0 command_executed" not in res.output


def test_cli_dump_takes_a_trial_directory(tmp_path):
    """A trial's directory was refused ('is a directory'); it stands for its trace.msgpack."""
    trial = tmp_path / "00"
    trial.mkdir()
    T.write_trace(str(trial / "trace.msgpack"), import_file(STREAM).events)
    res = _run("dump", str(trial))
    assert res.exit_code == 0 and res.stderr == ""
    assert res.stdout == _run("dump", str(trial / "trace.msgpack")).stdout != ""
    res = _run("dump", str(tmp_path))
    assert res.exit_code == 2 and res.stdout == ""
    assert f"{tmp_path} is a directory without a trace.msgpack" in res.stderr
    assert "trial's directory" in _run("dump", "--help").output
    res = _run("dump", "/dev/null")
    assert res.exit_code == 2 and "/dev/null is not a regular file" in res.stderr
