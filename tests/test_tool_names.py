"""Tool names in the trace are Claude Code's, whichever agent made the call: each agent's
own name for a tool (as its CLI emits it: OpenCode 1.18, Pi 0.73, Codex 0.171, ce's
`openai` loop, coder_eval records) becomes the canonical one through the one
`normalize_tool` live adapters and `ce trace import` share, `raw_tool` keeping the
agent's; so `tool_name: Write` / `Read` / `Edit` and skill_triggered grade every agent
alike (a `max_count: 0` guard on Write or Edit never passes vacuously for a non-Claude
agent). Fast: the adapters' event mappings are fed the CLIs' event shapes directly."""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path

import pytest

from ce_agents.cli_agent import Events
from ce_agents.codex import CodexAgent, Session
from ce_agents.openai_loop import OpenAIAgent
from ce_agents.opencode import OpenCodeAgent
from ce_agents.pi import PiAgent
from ce_lang.compiler import compile_paths
from ce_runtime.grade.host import Host
from ce_runtime.grade.interpreter import Grader
from ce_runtime.trace import events as T
from ce_runtime.trace.import_builder import Builder
from ce_runtime.trace.importers import import_coder_eval
from ce_runtime.trace.view import build_view


class Sink:
    def __init__(self):
        self.events: list[T.Event] = []

    def clock(self) -> float:
        return float(len(self.events))

    def emit(self, event: T.Event) -> None:
        self.events.append(event)


def calls(events) -> list[tuple[str, str, dict]]:
    return [(e.tool, e.raw_tool, e.params) for e in events if isinstance(e, T.ToolCall)]


# -- the table: each agent's own names ---------------------------------------------------
@pytest.mark.parametrize("raw,params,expected", [
    # OpenCode (its tool ids; read/write/edit take `filePath`, skill `name`)
    ("bash", {"command": "ls", "description": "list"},
     ("Bash", {"command": "ls", "description": "list"})),
    ("read", {"filePath": "/w/a.py"}, ("Read", {"filePath": "/w/a.py"})),
    ("write", {"filePath": "/w/a.py", "content": "x"},
     ("Write", {"filePath": "/w/a.py", "content": "x"})),
    ("edit", {"filePath": "/w/a.py", "oldString": "a", "newString": "b"},
     ("Edit", {"filePath": "/w/a.py", "oldString": "a", "newString": "b"})),
    ("glob", {"pattern": "**/*.py"}, ("Glob", {"pattern": "**/*.py"})),
    ("grep", {"pattern": "TODO"}, ("Grep", {"pattern": "TODO"})),
    ("skill", {"name": "pdf"}, ("Skill", {"skill": "pdf"})),
    ("webfetch", {"url": "https://x"}, ("WebFetch", {"url": "https://x"})),
    ("websearch", {"query": "q"}, ("WebSearch", {"query": "q"})),
    ("todowrite", {"todos": []}, ("TodoWrite", {"todos": []})),
    ("task", {"prompt": "p"}, ("Task", {"prompt": "p"})),
    ("apply_patch", {"patchText": "*** Begin Patch"}, ("Edit", {"patchText": "*** Begin Patch"})),
    # Pi (`path`; find is its glob, ls its directory listing)
    ("find", {"pattern": "*.ts"}, ("Glob", {"pattern": "*.ts"})),
    ("ls", {"path": "."}, ("LS", {"path": "."})),
    ("edit", {"path": "a.py", "edits": [{"oldText": "a", "newText": "b"}]},
     ("Edit", {"path": "a.py", "edits": [{"oldText": "a", "newText": "b"}]})),
    # Codex
    ("exec_command", {"cmd": "ls"}, ("Bash", {"command": "ls"})),
    ("local_shell", {"command": ["bash", "-lc", "ls"]}, ("Bash", {"command": "bash -lc ls"})),
    ("apply_patch", {"patch": "*** Begin Patch"}, ("Edit", {"patch": "*** Begin Patch"})),
    ("update_plan", {"plan": []}, ("TodoWrite", {"plan": []})),
    ("write_stdin", {"chars": "y"}, ("write_stdin", {"chars": "y"})),  # no counterpart
    # ce's openai loop
    ("shell", {"command": "ls", "timeout": 5}, ("Bash", {"command": "ls", "timeout": 5})),
    # Claude Code's own names are fixed points, its params untouched
    *[(name, {"x": 1}, (name, {"x": 1})) for name in (
        "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "WebFetch", "WebSearch",
        "TodoWrite", "Task", "NotebookEdit", "mcp__db__query")],
    ("Skill", {"skill": "pdf", "name": "n"}, ("Skill", {"skill": "pdf", "name": "n"})),
    ("Bash", {"command": "ls", "description": "d"}, ("Bash", {"command": "ls", "description": "d"})),
])
def test_each_agents_tool_names_normalize_to_claude_codes(raw, params, expected):
    assert T.normalize_tool(raw, params) == expected


def test_live_adapters_and_imports_share_one_normalization():
    import ce_agents.cli_agent as cli_agent
    import ce_runtime.trace.import_builder as import_builder
    import ce_runtime.trace.importers as importers

    assert import_builder.normalize_tool is T.normalize_tool
    assert importers.normalize_tool is T.normalize_tool
    assert not hasattr(cli_agent, "normalize") and not hasattr(cli_agent, "SHELL_TOOLS")
    events = Events(Sink())
    events.call("c1", "write", {"path": "a.py", "content": "x"})
    b = Builder("pi", timed=False)
    b.call(0, "c1", "write", {"path": "a.py", "content": "x"})
    live = [e for e in events.sink.events if isinstance(e, T.ToolCall)]
    imported = [e for e in b.body if isinstance(e, T.ToolCall)]
    assert [(e.tool, e.raw_tool, e.params) for e in live] == \
        [(e.tool, e.raw_tool, e.params) for e in imported] == \
        [("Write", "write", {"path": "a.py", "content": "x"})]


# -- each adapter, fed its CLI's events -----------------------------------------------------
def opencode_trace() -> list[T.Event]:
    """`opencode run --format json` tool_use parts: its write, read, skill and edit tools."""
    sink = Sink()
    events, agent = Events(sink), OpenCodeAgent()

    def tool_use(call_id: str, tool: str, inp: dict, output: str = "") -> dict:
        return {"type": "tool_use", "sessionID": "s1", "part": {
            "callID": call_id, "tool": tool,
            "state": {"status": "completed", "input": inp, "output": output}}}

    agent.on_line({"type": "step_start", "part": {}}, events)
    for line in (tool_use("w1", "skill", {"name": "pdf"}, "loaded"),
                 tool_use("w2", "read", {"filePath": "/w/notes.md"}, "text"),
                 tool_use("w3", "write", {"filePath": "/w/a.py", "content": "x"}),
                 tool_use("w4", "edit", {"filePath": "/w/a.py", "oldString": "x",
                                         "newString": "y"})):
        agent.on_line(line, events)
    events.turn_end()
    return sink.events


def pi_trace() -> list[T.Event]:
    """`pi --mode json` assistant message_end tool calls and their results."""
    sink = Sink()
    events, agent = Events(sink), PiAgent()
    agent.on_line({"type": "turn_start"}, events)
    agent.on_line({"type": "message_end", "message": {
        "role": "assistant", "usage": {"input": 10, "output": 5},
        "content": [{"type": "toolCall", "id": "p1", "name": "read",
                     "arguments": {"path": "notes.md"}},
                    {"type": "toolCall", "id": "p2", "name": "write",
                     "arguments": {"path": "a.py", "content": "x"}},
                    {"type": "toolCall", "id": "p3", "name": "edit",
                     "arguments": {"path": "a.py", "edits": [{"oldText": "x",
                                                              "newText": "y"}]}}]}}, events)
    for call_id in ("p1", "p2", "p3"):
        agent.on_line({"type": "tool_execution_end", "toolCallId": call_id,
                       "result": {"content": [{"type": "text", "text": "done"}]}}, events)
    agent.on_line({"type": "turn_end"}, events)
    return sink.events


def codex_trace() -> list[T.Event]:
    """Codex's session log: an apply_patch that adds and changes files, its answer, a
    plan update and a command."""
    sink = Sink()
    events = Events(sink)
    events.codex = Session("/home/.codex")
    agent = CodexAgent()
    patch = ("*** Begin Patch\n*** Add File: a.py\n+x\n*** Update File: notes.md\n@@\n-a\n+b\n"
             "*** End Patch\n")

    def log(kind: str, payload: dict) -> None:
        agent.on_log(json.dumps({"type": kind, "payload": payload}).encode(), events)

    log("event_msg", {"type": "task_started"})
    log("response_item", {"type": "custom_tool_call", "call_id": "x1", "name": "apply_patch",
                          "input": patch})
    log("response_item", {"type": "custom_tool_call_output", "call_id": "x1",
                          "output": "Exit code: 0\nSuccess. Updated the following files:"})
    log("response_item", {"type": "function_call", "call_id": "x2", "name": "update_plan",
                          "arguments": json.dumps({"plan": [{"step": "s",
                                                             "status": "completed"}]})})
    log("response_item", {"type": "function_call_output", "call_id": "x2",
                          "output": "Plan updated"})
    log("response_item", {"type": "function_call", "call_id": "x3", "name": "exec_command",
                          "arguments": json.dumps({"cmd": "cat notes.md"})})
    log("response_item", {"type": "function_call_output", "call_id": "x3",
                          "output": "Process exited with code 0\nb"})
    events.turn_end()
    return sink.events


class Box:
    """The sandbox the openai loop's read/write/edit tools use, in memory."""

    def __init__(self):
        self.files: dict[str, bytes] = {"/w/notes.md": b"a"}

    async def read_file(self, path: str, limit: int | None = None) -> bytes:
        return self.files[path]

    async def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data


def openai_trace() -> list[T.Event]:
    """ce's openai loop running its read, write and edit tools."""
    sink = Sink()
    events = Events(sink)
    request = types.SimpleNamespace(sandbox=Box(), workspace="/w")

    def call(call_id: str, name: str, args: dict):
        return types.SimpleNamespace(id=call_id, function=types.SimpleNamespace(
            name=name, arguments=json.dumps(args)))

    async def go() -> None:
        agent = OpenAIAgent()
        events.turn_start()
        for c in (call("o1", "read", {"path": "notes.md"}),
                  call("o2", "write", {"path": "a.py", "content": "x"}),
                  call("o3", "edit", {"path": "a.py", "old": "x", "new": "y"})):
            await agent._tool(request, events, c)
        events.turn_end()

    asyncio.run(go())
    assert request.sandbox.files["/w/a.py"] == b"y"
    return sink.events


def coder_eval_trace() -> list[T.Event]:
    """`ce trace import` of a coder_eval record of another agent's calls."""
    doc = {"task_id": "t", "agent_type": "opencode", "iterations": [{
        "user_input": "p", "turns": [{"commands": [
            {"tool_name": "read", "parameters": {"filePath": "/w/notes.md"}, "status": "ok"},
            {"tool_name": "write", "parameters": {"filePath": "/w/a.py", "content": "x"},
             "status": "ok"},
            {"tool_name": "skill", "parameters": {"name": "pdf"}, "status": "ok"},
            {"tool_name": "apply_patch", "parameters": {"patch": "*** Update File: a.py"},
             "status": "ok"}]}]}]}
    return import_coder_eval(json.dumps(doc).encode()).events


def test_opencode_calls_are_recorded_under_claude_codes_names():
    assert calls(opencode_trace()) == [
        ("Skill", "skill", {"skill": "pdf"}),
        ("Read", "read", {"filePath": "/w/notes.md"}),
        ("Write", "write", {"filePath": "/w/a.py", "content": "x"}),
        ("Edit", "edit", {"filePath": "/w/a.py", "oldString": "x", "newString": "y"})]


def test_pi_calls_are_recorded_under_claude_codes_names():
    events = pi_trace()
    assert [(tool, raw) for tool, raw, _ in calls(events)] == [
        ("Read", "read"), ("Write", "write"), ("Edit", "edit")]
    assert [e.status for e in events if isinstance(e, T.ToolResult)] == ["ok"] * 3


def test_codex_apply_patch_is_edit_and_keeps_its_outcome():
    events = codex_trace()
    assert [(tool, raw) for tool, raw, _ in calls(events)] == [
        ("Edit", "apply_patch"), ("TodoWrite", "update_plan"), ("Bash", "exec_command")]
    assert calls(events)[0][2]["patch"].startswith("*** Begin Patch")
    assert calls(events)[2][2] == {"command": "cat notes.md"}
    # a patch's outcome is still read as a patch's (Codex's answer, not an exit code)
    assert [e.status for e in events if isinstance(e, T.ToolResult)] == ["ok", "ok", "ok"]


def test_codex_without_its_session_log_records_a_file_change_as_edit():
    sink = Sink()
    events = Events(sink)
    CodexAgent._item({"type": "file_change", "id": "f1", "status": "completed",
                      "changes": [{"kind": "add", "path": "a.py"}]}, True, events)
    assert calls(sink.events) == [("Edit", "apply_patch",
                                   {"changes": [{"kind": "add", "path": "a.py"}]})]


def test_openai_loop_calls_are_recorded_under_claude_codes_names():
    assert calls(openai_trace()) == [
        ("Read", "read", {"path": "notes.md"}),
        ("Write", "write", {"path": "a.py", "content": "x"}),
        ("Edit", "edit", {"path": "a.py", "old": "x", "new": "y"})]


def test_imported_calls_are_recorded_under_claude_codes_names():
    assert [(tool, raw) for tool, raw, _ in calls(coder_eval_trace())] == [
        ("Read", "read"), ("Write", "write"), ("Skill", "skill"), ("Edit", "apply_patch")]


# -- graded: the criteria a task writes with Claude Code's names ---------------------------
CRITERIA = """\
  - {type: command_executed, tool_name: Write, command_pattern: 'a\\.py', description: wrote a.py}
  - {type: command_executed, tool_name: Read, command_pattern: notes, description: read notes}
  - {type: command_executed, tool_name: Edit, min_count: 0, max_count: 0,
     description: never edits a file}
  - {type: expr, expr: 'exists(trace.tool_calls, c -> c.tool == "Write")',
     description: an expression over c.tool}
  - {type: skill_triggered, skill_name: pdf, expected_skill: pdf, description: the skill}
"""
TRACES = {"opencode": opencode_trace, "pi": pi_trace, "codex": codex_trace,
          "openai": openai_trace, "coder_eval": coder_eval_trace}
# per trace: wrote a.py, read notes, the no-edit guard, c.tool == "Write", the skill
EXPECTED = {
    "opencode": [1.0, 1.0, 0.0, 1.0, 1.0],
    "pi": [1.0, 1.0, 0.0, 1.0, 0.0],  # Pi has no skill tool (it reads SKILL.md)
    # Codex writes through apply_patch: an Edit (the guard fails), never a Write; it
    # reads with shell commands
    "codex": [0.0, 0.0, 0.0, 0.0, 0.0],
    "openai": [1.0, 1.0, 0.0, 1.0, 0.0],
    "coder_eval": [1.0, 1.0, 0.0, 1.0, 1.0],
}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("task")
    (tmp / "t.yaml").write_text("task_id: t\ndescription: d\ninitial_prompt: p\n"
                                "success_criteria:\n" + CRITERIA)
    result = compile_paths([str(tmp / "t.yaml")])
    assert not [d for d in result.diagnostics if d.severity == "error"], result.diagnostics
    return result.trials[0].plan


@pytest.mark.parametrize("agent", sorted(TRACES))
def test_criteria_naming_claude_codes_tools_grade_every_agent(agent, plan, tmp_path):
    host = Host(workspace=str(tmp_path), trace=build_view(TRACES[agent]()))
    graded = Grader(plan).grade(host)
    assert [r.score for r in graded.criteria] == EXPECTED[agent]


def test_a_tool_name_in_an_agents_own_spelling_is_warned_and_matches_nothing(tmp_path):
    """`tool_name: write` (OpenCode's own name) matches no call of a trace, which holds
    `Write` for OpenCode too: compiled silently, the criterion failed every run. CE0229
    says so at compile time, and the name it suggests is the one that matches."""
    (tmp_path / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: p\nsuccess_criteria:\n"
        "  - {type: command_executed, tool_name: write, description: as OpenCode names it}\n"
        "  - {type: command_executed, tool_name: SKILL, description: shouted}\n"
        "  - {type: command_executed, tool_name: Write, description: the trace's name}\n")
    result = compile_paths([str(tmp_path / "t.yaml")])
    warned = [(d.code, d.span.line, d.help) for d in result.diagnostics]
    assert warned == [("CE0229", 5, "did you mean `Write`?"),
                      ("CE0229", 6, "did you mean `Skill`?")]
    host = Host(workspace=str(tmp_path), trace=build_view(opencode_trace()))
    assert [r.score for r in Grader(result.trials[0].plan).grade(host).criteria] == \
        [0.0, 0.0, 1.0]


@pytest.mark.parametrize("raw", sorted(T.TOOL_NAMES))
def test_the_compiler_suggests_the_name_the_trace_records(raw):
    from ce_lang.tool_names import canonical_spelling

    tool, _ = T.normalize_tool(raw, {})
    assert canonical_spelling(raw) == tool and canonical_spelling(tool) is None


def test_a_codex_call_of_a_tool_it_lacks_fails_live_and_imported():
    """Codex answers a call of a tool it does not have "unsupported call: X": that call
    failed (as Claude Code, OpenCode, Pi and the openai loop record it), not ok."""
    from ce_runtime.trace.importers import import_codex_session

    fixture = Path(__file__).resolve().parent / "fixtures" / "codex" / "rollout.jsonl"
    head = fixture.read_bytes().splitlines()[:2]  # session_meta, task_started

    def item(payload: dict) -> bytes:
        return json.dumps({"timestamp": "2026-12-01T21:04:10.000Z", "type": "response_item",
                           "payload": payload}).encode()

    lines = [*head,
             item({"type": "function_call", "call_id": "c1", "name": "nosuchtool",
                   "arguments": "{}"}),
             item({"type": "function_call_output", "call_id": "c1",
                   "output": "unsupported call: nosuchtool"}),
             item({"type": "custom_tool_call", "call_id": "c2", "name": "nosuchcustom",
                   "input": "x"}),
             item({"type": "custom_tool_call_output", "call_id": "c2",
                   "output": "unsupported custom tool call: nosuchcustom"})]
    sink = Sink()
    events = Events(sink)
    events.codex = Session("/home/.codex")
    agent = CodexAgent()
    for line in lines:
        agent.on_log(line, events)
    imported = import_codex_session(b"\n".join(lines) + b"\n", name="rollout-x.jsonl")
    for trace in (sink.events, imported.events):
        assert [(e.call_id, e.status) for e in trace if isinstance(e, T.ToolResult)] == [
            ("c1", "error"), ("c2", "error")]
