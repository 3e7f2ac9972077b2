"""agent_judge for real: Claude Code (claude-agent-sdk) against the loopback server.

The slow tests run the bundled Claude Code CLI through `HttpJudge` with a scripted
`agent_judge:` session (see AGENT_TESTING.md); the fast ones check the loopback's
streaming Messages API with a plain HTTP client.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from ce_lang.compiler import CompileOptions, compile_paths
from ce_runtime.execute.sandbox.runner import local_runner
from ce_runtime.grade.grading import grade_files
from ce_runtime.grade.host import InfrastructureError
from ce_runtime.grade.judge import HttpJudge
from ce_runtime.grade.judge_usage import trial_judge_usage
from ce_runtime.model_server import ModelServer

VERDICT = '{"score": 0.8, "rationale": "the answer is right"}'

SESSIONS: list[dict] = []  # the judge sessions of the last _grade()
EVIDENCE: dict = {}  # and its evidence (what judge_usage counts)


def _grade(tmp_path: Path, criterion: str, judge) -> tuple:
    task_dir = tmp_path / "task"
    task_dir.mkdir(exist_ok=True)
    (task_dir / "task.yaml").write_text(textwrap.dedent("""\
        task_id: judged
        description: an agent_judge graded by a scripted Claude Code session
        initial_prompt: do the task
        success_criteria:
        """) + "  " + criterion.strip() + "\n")
    compiled = compile_paths([str(task_dir / "task.yaml")], CompileOptions())
    assert not compiled.errors
    trial = compiled.trials[0]
    with local_runner(str(tmp_path / "ws")) as runner:
        _, result, host, _ = grade_files(trial.plan, trial.task_dir, str(tmp_path / "ws"),
                                         None, judge=judge, runner=runner)
    SESSIONS[:] = host.judge_sessions
    EVIDENCE.clear()
    EVIDENCE.update(host.evidence)
    return result.criteria[0], result


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".claude").mkdir(parents=True)
    (ws / ".claude" / "settings.json").write_text('{"SECRET_SETTINGS": true}')
    (ws / ".mcp.json").write_text('{"SECRET_MCP": true}')
    (ws / "_reference").mkdir()
    (ws / "_reference" / "solution.py").write_text("SECRET_REFERENCE = 1\n")
    (ws / "answer.txt").write_text("the answer is 42\n")
    return ws


def _tool_results(body: dict) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    inner = block.get("content")
                    parts.append(inner if isinstance(inner, str) else json.dumps(inner))
    return "\n".join(parts)


def _agent_requests(server: ModelServer) -> list[dict]:
    return [r for r in server.requests if r.get("stream") and r.get("tools")]


@pytest.mark.slow
def test_agent_judge_reads_the_workspace_copy_and_returns_the_verdict(tmp_path, ws):
    script = {"agent_judge": [
        {"tool": "Read", "input": {"file_path": "$WORKSPACE/answer.txt"}},
        {"tool": "Bash", "input": {"command": "ls -a; cat .claude/settings.json .mcp.json "
                                              "_reference/solution.py", "description": "l"}},
        {"text": "Checked.\n" + VERDICT}]}
    with ModelServer(script, judge=True) as server:
        r, _ = _grade(tmp_path, "- {type: agent_judge, prompt: check answer.txt, "
                           "max_turns: 6, description: judged by an agent}",
                           HttpJudge(server.url, "loopback"))
    assert r.error is None, r.error
    assert r.score == 0.8 and r.passed
    requests = _agent_requests(server)
    assert len(requests) == 3
    assert "check answer.txt" in json.dumps(requests[0]["messages"][0])
    assert "the answer is 42" in _tool_results(requests[1])
    listing = _tool_results(requests[2])
    assert "answer.txt" in listing
    for secret in ("SECRET_SETTINGS", "SECRET_MCP", "SECRET_REFERENCE"):
        assert secret not in listing
    assert sorted(t["name"] for t in requests[0]["tools"]) == ["Bash", "Glob", "Grep", "Read"]
    # the judge worked in a throwaway copy, which is gone; the workspace is untouched
    copy = re.search(r"Primary working directory: (\S+)", json.dumps(requests[0]))
    assert copy and copy.group(1) != str(ws) and not os.path.exists(copy.group(1))
    assert (ws / ".claude" / "settings.json").exists()
    # the judge ran through the claude-code adapter: its transcript and usage are kept
    (session,) = SESSIONS
    calls = [e["tool"] for e in session["transcript"] if e["type"] == "tool_call"]
    assert calls == ["Read", "Bash"] and session["outcome"]["reason"] == "finished"
    assert session["usage"]["input_tokens"] == 30 and session["usage"]["output_tokens"] == 30


@pytest.mark.slow
def test_agent_judge_timeout_scores_0_with_an_error(tmp_path, ws):
    # (Claude Code refuses a bare long `sleep`; a python sleep is just a slow command)
    marker = f"ce-judge-timeout-{os.getpid()}"
    script = {"agent_judge": [{"tool": "Bash", "input": {
        "command": f"python3 -c 'import time; time.sleep(60)' {marker}",
        "description": "wait"}}, {"text": VERDICT}]}
    start = time.monotonic()
    with ModelServer(script, judge=True) as server:
        r, _ = _grade(tmp_path, "- {type: agent_judge, prompt: p, turn_timeout: 3, "
                           "description: never ends}", HttpJudge(server.url, "loopback"))
    assert time.monotonic() - start < 30
    assert r.score == 0.0 and not r.passed
    assert "turn_timeout" in (r.error or "")
    # what it spent before it was stopped is counted, its cost too: each call is priced
    # from ce's rate card as its usage streams in (ad7906a), not only by the CLI's last
    # message, which a stopped session never sends
    (session,) = SESSIONS
    assert session["outcome"]["reason"] == "timeout" and session["usage"]["input_tokens"]
    judged = trial_judge_usage(EVIDENCE)
    assert judged["agent_sessions"] == 1 and judged["input_tokens"] > 0
    assert judged["cost_usd"] > 0 and judged["cost_unknown"] == []
    time.sleep(1)
    assert marker not in _process_table()  # the judge's command was killed with it


def _process_table() -> str:
    rows = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                rows.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(rows)


@pytest.mark.slow
def test_agent_judge_without_json_scores_0_with_an_error(tmp_path, ws):
    with ModelServer({"agent_judge": [{"text": "looks fine to me"}]}, judge=True) as server:
        r, _ = _grade(tmp_path, "- {type: agent_judge, prompt: p, description: d}",
                      HttpJudge(server.url, "loopback"))
    assert r.score == 0.0 and "no JSON" in (r.error or "")
    # a session without a verdict was still paid for: it is in the judges' spending
    (session,) = SESSIONS
    judged = trial_judge_usage(EVIDENCE)
    assert (judged["calls"], judged["agent_sessions"]) == (1, 1)
    assert judged["input_tokens"] == session["usage"]["input_tokens"] > 0
    assert judged["cost_usd"] == session["usage"]["cost_usd"] > 0


def test_agent_judge_unreachable_endpoint_is_an_infrastructure_failure(tmp_path, ws):
    with ModelServer({}, judge=True) as server:
        url = server.url  # closed on exit: nothing listens there any more
    with pytest.raises(InfrastructureError, match="unreachable"):
        _grade(tmp_path, "- {type: agent_judge, prompt: p, description: d}",
               HttpJudge(url, "loopback"))


# -- the loopback's streaming Messages API ----------------------------------------------------

def _post(url: str, body: dict) -> tuple[str, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers.get("content-type", ""), resp.read()


def _events(raw: bytes) -> list[dict]:
    events = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        events.append(data)
    return events


def test_loopback_streams_scripted_steps_by_assistant_message_count():
    script = {"agent_judge": [{"tool": "Read", "input": {"file_path": "$WORKSPACE/a.txt"}},
                              {"text": VERDICT}]}
    tools = [{"name": "Read", "input_schema": {"type": "object"}}]
    first = {"model": "m", "stream": True, "tools": tools, "messages": [
        {"role": "user", "content": [{"type": "text",
                                      "text": " - Primary working directory: /tmp/w\n"}]}]}
    with ModelServer(script, judge=True) as server:
        ctype, raw = _post(server.url + "/v1/messages?beta=true", first)
        assert ctype.startswith("text/event-stream")
        events = _events(raw)
        assert [e["type"] for e in events] == [
            "message_start", "content_block_start", "content_block_delta",
            "content_block_stop", "message_delta", "message_stop"]
        block = events[1]["content_block"]
        assert block["type"] == "tool_use" and block["name"] == "Read"
        assert block["id"].startswith("toolu_") and block["input"] == {}
        assert events[2]["delta"] == {"type": "input_json_delta",
                                      "partial_json": '{"file_path": "/tmp/w/a.txt"}'}
        assert events[4]["delta"]["stop_reason"] == "tool_use"
        assert "output_tokens" in events[4]["usage"]

        # a side request (no tools) neither consumes nor follows the script
        _, raw = _post(server.url + "/v1/messages", {"stream": True, "messages": [
            {"role": "user", "content": "title?"}]})
        side = _events(raw)
        assert side[2]["delta"]["type"] == "text_delta" and "score" not in \
            side[2]["delta"]["text"]

        # the step is the number of assistant messages, so a retry repeats step 1
        second = {**first, "messages": [*first["messages"],
                                        {"role": "assistant", "content": [block]},
                                        {"role": "user", "content": "result"}]}
        for _ in range(2):
            _, raw = _post(server.url + "/v1/messages", second)
            events = _events(raw)
            assert events[1]["content_block"] == {"type": "text", "text": ""}
            assert events[2]["delta"] == {"type": "text_delta", "text": VERDICT}
            assert events[4]["delta"]["stop_reason"] == "end_turn"

        _, raw = _post(server.url + "/v1/messages/count_tokens", first)
        assert json.loads(raw)["input_tokens"] > 0
        with urllib.request.urlopen(server.url + "/v1/models", timeout=10) as resp:
            assert json.loads(resp.read())["data"][0]["type"] == "model"
        head = urllib.request.Request(server.url + "/", method="HEAD")
        with urllib.request.urlopen(head, timeout=10) as resp:
            assert resp.status == 200


def test_loopback_non_streaming_judge_is_unchanged():
    with ModelServer({"judge": [{"score": 0.6, "rationale": "ok"}]}, judge=True) as server:
        ctype, raw = _post(server.url + "/v1/messages", {"messages": [
            {"role": "user", "content": "grade"}]})
    assert ctype == "application/json"
    reply = json.loads(raw)
    assert json.loads(reply["content"][0]["text"]) == {"score": 0.6, "rationale": "ok"}


@pytest.mark.parametrize("model, env", [
    ("anthropic.claude-sonnet-4-6", {}),
    ("openai.gpt-4o-mini", {}),
    ("gpt-4.1", {}),
    ("anthropic.claude-sonnet-4-6", {"API_BACKEND": "bedrock", "AWS_REGION": "us-east-1",
                                     "AWS_BEARER_TOKEN_BEDROCK": "bedrock-token-123"}),
])
def test_llm_judge_is_routed_by_model_and_backend(tmp_path, ws, monkeypatch, model, env):
    """Anthropic models on the Messages API (or Bedrock's invoke with API_BACKEND=bedrock),
    OpenAI models on Chat Completions through the openai package."""
    from ce_runtime.grade.judge import judge_from_env

    with ModelServer({"judge": [{"score": 0.9, "rationale": "routed"}]}, judge=True) as server:
        for name in ("CE_JUDGE_URL", "API_BACKEND", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                     "ANTHROPIC_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        if env:  # Bedrock: its own endpoint (here the loopback), a bearer token
            for k, v in env.items():
                monkeypatch.setenv(k, v)
            monkeypatch.setenv("ANTHROPIC_BEDROCK_BASE_URL", server.url)
        elif model.startswith(("openai.", "gpt")):
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
            monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        else:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        r, _ = _grade(tmp_path, f"- {{type: llm_judge, prompt: check it, model: {model}, "
                                 "description: routed judge}", judge_from_env())
        apis = [e["api"] for e in server.log]
    assert r.error is None and r.score == 0.9
    assert apis == ["chat" if "gpt" in model else "anthropic"]
    if env:
        assert server.requests[0]["anthropic_version"] == "bedrock-2023-05-31"


@pytest.mark.slow
def test_an_archived_agent_judge_verdict_is_found_again_offline(tmp_path):
    """The verdict's key holds the digest of the workspace the judge grades: live, the
    sandbox's .venv was in it, but the archived workspace leaves .venv out, so `ce
    rescore --offline` and `ce explain` of the trial found no recorded verdict (ERROR,
    'no recorded verdict for this request') for every agent_judge of a python sandbox."""
    import subprocess
    import sys

    (tmp_path / "t.yaml").write_text(textwrap.dedent("""\
        task_id: judged
        description: an agent_judge over a workspace with a .venv
        initial_prompt: write answer.txt
        reference:
          solve:
            - {write: answer.txt, content: "42\\n"}
        success_criteria:
          - type: agent_judge
            description: the judge agrees
            prompt: Is answer.txt right?
        """), encoding="utf-8")
    (tmp_path / "replies.yaml").write_text(
        f"agent_judge:\n  - text: '{VERDICT}'\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "CE_JUDGE_URL", "CE_JUDGE_API_KEY")}

    def ce(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args], cwd=tmp_path,
                              env={**env, "CE_PLAIN": "1"}, capture_output=True, text=True,
                              timeout=600)

    run = ce("run", "t.yaml", "--agent", "oracle", "--judge-replies", "replies.yaml",
             "--runs-root", "runs")
    assert run.returncode == 0, run.stderr
    trial = tmp_path / "runs" / "latest" / "default" / "judged" / "00"
    record = json.loads((trial / "task.json").read_text(encoding="utf-8"))
    assert "python: created .venv" in " ".join(record["setup"])
    rescore = ce("rescore", "runs/latest", "--offline")
    assert rescore.returncode == 0, rescore.stdout + rescore.stderr
    assert "0 changed" in rescore.stdout and "1 recorded verdict(s) reused" in rescore.stdout
    explained = ce("explain", str(trial))
    assert "no recorded verdict" not in explained.stdout
    assert "score 0.8 (continuous)" in explained.stdout
