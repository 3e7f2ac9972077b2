"""ce's scripted model server, spoken to as the clients speak: raw Anthropic Messages
requests (streamed and not), and the openai package for Chat Completions and Responses."""

from __future__ import annotations

import json
import urllib.request

import pytest

from ce_runtime.model_server import ModelServer, Script, ScriptError

SCRIPT = {"steps": [
    {"text": "writing", "tool": "Write", "input": {"file_path": "{workspace}/a.py"},
     "usage": {"input_tokens": 100, "output_tokens": 7}},
    {"tool": "Bash", "input": {"command": "ls"}},
    {"text": "done"}]}
TOOLS = [{"name": "Write", "input_schema": {"type": "object"}}]


def post(server, path, body):
    req = urllib.request.Request(server.url + path, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.read().decode()


def sse(text):
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")
            and line != "data: [DONE]"]


def anthropic(server, assistant_turns, stream=False, tools=TOOLS, system="", **extra):
    messages = [{"role": "user", "content": "go"}]
    for _ in range(assistant_turns):
        messages += [{"role": "assistant", "content": [{"type": "text", "text": "x"}]},
                     {"role": "user", "content": "next"}]
    body = {"model": "claude-sonnet-4-6", "messages": messages, "stream": stream,
            "system": system, **extra}
    if tools:
        body["tools"] = tools
    return post(server, "/v1/messages", body)


def test_steps_follow_the_conversation_not_a_counter():
    with ModelServer(SCRIPT) as server:
        again = [json.loads(anthropic(server, 0, system="Primary working directory: /ws"))
                 for _ in range(2)]  # a retry gets the same step
        second = json.loads(anthropic(server, 1))
        past = json.loads(anthropic(server, 5))
    assert [b["type"] for b in again[0]["content"]] == ["text", "tool_use"]
    assert again[0]["content"][1]["name"] == again[1]["content"][1]["name"] == "Write"
    assert again[0]["content"][1]["input"] == {"file_path": "/ws/a.py"}
    assert again[0]["stop_reason"] == "tool_use" and again[0]["usage"]["input_tokens"] == 100
    assert second["content"][0]["name"] == "Bash"
    assert past["content"] == [{"type": "text", "text": "The scripted session has no more steps."}]
    assert past["stop_reason"] == "end_turn"


def test_side_requests_consume_no_step_and_are_logged(tmp_path):
    log = tmp_path / "requests.jsonl"
    with ModelServer(SCRIPT, log_path=str(log)) as server:
        side = json.loads(anthropic(server, 0, tools=None))
        first = json.loads(anthropic(server, 0))
    assert side["content"] == [{"type": "text", "text": "ok"}]
    assert first["content"][0]["text"] == "writing"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["step"] for e in entries] == [None, 0]
    assert entries[1]["reply"] == {"text": "writing", "calls": ["Write"]}


def test_the_stream_is_messages_api_sse_with_the_scripts_usage():
    with ModelServer(SCRIPT, ) as server:
        events = sse(anthropic(server, 0, stream=True))
    kinds = [e["type"] for e in events]
    assert kinds == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_stop", "content_block_start", "content_block_delta",
                     "content_block_stop", "message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] == 100
    assert events[7]["usage"] == {"output_tokens": 7}
    assert json.loads(events[5]["delta"]["partial_json"])["file_path"].endswith("/a.py")


def test_rows_workspace_and_the_judge():
    script = Script.from_data({"rows": {"yes": [{"text": "row yes"}], "no": ["row no"]},
                               "judge": [{"match": "rubric A", "score": 0.9, "rationale": "a"},
                                         {"score": 0.1}]}, row="no", workspace="/w")
    with ModelServer(script) as server:
        row = json.loads(anthropic(server, 0))
    with ModelServer(script, judge=True) as server:
        verdict = json.loads(anthropic(server, 0, tools=None, system="rubric A"))
        judge_session = json.loads(anthropic(server, 0))
    assert row["content"][0]["text"] == "row no"
    assert json.loads(verdict["content"][0]["text"]) == {"score": 0.9, "rationale": "a"}
    # a judge's streamed session plays `agent_judge` (none here: it says so and ends)
    assert judge_session["content"][0]["text"].startswith("The scripted session has no")


@pytest.mark.parametrize("bad, message", [
    ({"steps": [{"tool": "Write", "input": "x"}]}, "the input of Write must be a mapping"),
    ({"steps": [{"txt": "x"}]}, "unknown key(s) txt"),
    ({"steps": [{"text": "x", "usage": {"input_tokens": -1}}]}, "`usage` takes"),
    ({"rows": {"a": []}}, "no steps for row 'b'"),
    ({"step": []}, "unknown key(s) step"),
])
def test_malformed_scripts_are_named(bad, message):
    with pytest.raises(ScriptError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Script.from_data(bad, row="b")


@pytest.mark.parametrize("text, where", [
    ("steps:\n  - text: hi\n    tol: Write\n", "s.yaml:3:5: step 1: unknown key(s) tol"),
    ("steps: 3\n", "s.yaml:1:8: the steps must be a list"),
    ("steps:\n  - text: a\n  - text: b\n    delay: soon\n",
     "s.yaml:4:12: step 2: `delay` is a number of seconds"),
    ("rows:\n  a: [{text: x}]\n  b:\n    - text: y\n      usage: {in: 3}\n",
     "s.yaml:5:14: row b step 1: `usage` takes"),
    ("judge:\n  - {score: 1}\n  - rationale: no score\n", "s.yaml:3:5: `judge` is a list"),
    ("agent_judge:\n  - text: x\n    fail: 200\n", "s.yaml:3:11: agent_judge step 1: `fail`"),
    ("stepz: []\n", "s.yaml:1:1: unknown key(s) stepz"),
    ("steps:\n  - text: [x\n", "s.yaml:3:1: not valid YAML"),
])
def test_a_script_files_error_has_its_line_and_column(tmp_path, monkeypatch, text, where):
    """A scripted session, --judge-replies or --script file's problem is said at its
    line:col, whichever command reads it (a row's steps are checked too, not only those
    a trial plays), as one line, never a traceback."""
    from click.testing import CliRunner

    from ce_runtime.cli import main
    from ce_runtime.model_server.script import load_script_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(ScriptError) as exc:
        load_script_file("s.yaml")
    assert str(exc.value).startswith(where)
    res = CliRunner().invoke(main, ["model-server", "--script", "s.yaml"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"ce model-server: {exc.value}"]


def test_openai_chat_completions_streamed_and_not():
    from openai import OpenAI

    tools = [{"type": "function", "function": {"name": "Write", "parameters": {}}}]
    with ModelServer(SCRIPT) as server:
        client = OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        plain = client.chat.completions.create(model="m", tools=tools, messages=[
            {"role": "user", "content": "Working directory: /ws"}])
        stream = client.chat.completions.create(
            model="m", tools=tools, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "go"},
                      {"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}])
        chunks = list(stream)
    call = plain.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "Write", {"file_path": "/ws/a.py"})
    assert plain.usage.prompt_tokens == 100
    names = [tc.function.name for c in chunks if c.choices for tc in
             (c.choices[0].delta.tool_calls or [])]
    assert names == ["Bash"] and chunks[-1].usage.total_tokens == 20


def test_openai_responses_streamed_and_not():
    from openai import OpenAI

    tools = [{"type": "function", "name": "Write", "parameters": {}}]
    with ModelServer(SCRIPT) as server:
        client = OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        first = client.responses.create(model="m", tools=tools, input="go")
        events = list(client.responses.create(
            model="m", tools=tools, stream=True,
            input=[{"role": "user", "content": "go"},
                   {"type": "function_call_output", "call_id": "c1", "output": "ok"}]))
    kinds = [o.type for o in first.output]
    assert kinds == ["message", "function_call"] and first.output[1].name == "Write"
    assert events[-1].type == "response.completed"
    assert [o.name for o in events[-1].response.output] == ["Bash"]


def test_a_spent_budget_refuses_the_next_steps_but_not_side_requests():
    """Once the trial's budget is spent (`spent` says why), a step is answered with a 400
    in the API's error shape, logged as refused; a side request (no tools) still gets
    its answer, and nothing before the budget was spent changes."""
    import urllib.error

    budget: list[str] = []
    with ModelServer(SCRIPT) as server:
        server.spent = lambda: budget[0] if budget else None
        first = json.loads(anthropic(server, 0))
        budget.append("ce: this trial's budget is spent (COST_BUDGET_EXCEEDED)")
        with pytest.raises(urllib.error.HTTPError) as refused:
            anthropic(server, 1)
        error = json.loads(refused.value.read().decode())
        side = json.loads(anthropic(server, 1, tools=None))
        with pytest.raises(urllib.error.HTTPError) as chat_refused:
            post(server, "/v1/chat/completions", {
                "model": "m", "messages": [{"role": "user", "content": "go"}],
                "tools": [{"type": "function", "function": {"name": "Write"}}]})
    assert first["content"][1]["name"] == "Write"
    assert refused.value.code == 400 and chat_refused.value.code == 400
    assert error == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "ce: this trial's budget is spent (COST_BUDGET_EXCEEDED)"}}
    assert side["content"][0]["type"] == "text"
    assert [(e["step"], e.get("failed"), "refused" in e) for e in server.log] == [
        (0, None, False), (1, 400, True), (None, None, False), (0, 400, True)]


def test_a_refusal_does_not_wait_the_steps_delay():
    """A refused step is answered at once, not after its scripted `delay` (a slow model's:
    600 s here, which the test's timeout would never see the end of)."""
    import urllib.error

    slow = {"steps": [{"tool": "Write", "input": {"file_path": "a.txt"}, "delay": 600},
                      {"text": "done"}]}
    with ModelServer(slow) as server:
        server.spent = lambda: "ce: this trial's budget is spent (TOKEN_BUDGET_EXCEEDED)"
        with pytest.raises(urllib.error.HTTPError) as refused:
            anthropic(server, 0)
    assert refused.value.code == 400
    assert [(e["step"], e.get("failed")) for e in server.log] == [(0, 400)]
