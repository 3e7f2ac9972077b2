"""The claude-code agent, end to end: the real Claude Code CLI that claude-agent-sdk
bundles, run by `ce run --scripted-model` against ce's scripted model server, inside the
trial's sandbox. No key, no network: the tool calls are the CLI's own, the files and
command outputs real."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from ce_runtime.trace.events import read_trace
from tests.engines import PYTHON_IMAGE, bwrap_missing, need, python_image
from tests.processes import new_mark, processes_marked

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"
SONNET = (3.0, 15.0)  # list price per million input / output tokens: the CLI's own costing

slow = pytest.mark.slow


def ce(*args: str, cwd: Path, env: dict[str, str] | None = None,
       timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args], cwd=cwd,
                          env={**os.environ, "CE_PLAIN": "1", **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def copy_example(tmp: Path, name: str) -> Path:
    for suffix in (".yaml", ".claude-code.model.yaml"):
        shutil.copy(TASKS / f"{name}{suffix}", tmp / f"{name}{suffix}")
    return tmp / f"{name}.yaml"


def trial(tmp: Path, task: str, row: str | None = None) -> tuple[dict, list]:
    runs = tmp / "runs"
    run_dir = next(p for p in runs.iterdir() if p.name != "latest")
    d = run_dir / "default" / task / (row or "") / "00"
    return json.loads((d / "task.json").read_text()), read_trace(str(d / "trace.msgpack")).events


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


@slow
def test_hello_world_passes_and_tokens_and_cost_are_the_scripts(tmp_path):
    task = copy_example(tmp_path, "hello_world")
    res = ce("run", str(task), "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    record, events = trial(tmp_path, "hello_world")
    assert record["status"] == "SUCCESS" and record["agent"] == "claude-code"
    script = yaml.safe_load((tmp_path / "hello_world.claude-code.model.yaml").read_text())
    tokens_in = sum(s["usage"]["input_tokens"] for s in script["steps"])
    tokens_out = sum(s["usage"]["output_tokens"] for s in script["steps"])
    usage = record["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (tokens_in, tokens_out)
    assert usage["cost_usd"] == pytest.approx((tokens_in * SONNET[0] + tokens_out * SONNET[1])
                                              / 1e6)
    calls = [e for e in events if type(e).__name__ == "ToolCall"]
    assert [(c.tool, c.call_id.startswith("toolu_")) for c in calls] == [
        ("Write", True), ("Bash", True)]
    assert calls[0].params["file_path"].endswith("/hello.py")
    results = [e for e in events if type(e).__name__ == "ToolResult"]
    assert [r.status for r in results] == ["ok", "ok"] and results[1].output == "Hello, World!"
    assert record["agent_outcome"]["reason"] == "finished"
    assert "session" in record["agent_outcome"]["detail"]
    assert record["model_server"]["calls"] == 3
    # no model in the task: the CLI's default as ce runs it (task.json said null), the
    # one every call to the scripted server asked for
    assert record["model"] == "claude-sonnet-4-6"
    assert record["model_server"]["models"] == ["claude-sonnet-4-6"]
    dump = ce("trace", "dump", str(next((tmp_path / "runs").glob("*/default/hello_world/00"))
                                   / "trace.msgpack"), cwd=tmp_path)
    assert '"tool":"Write"' in dump.stdout.replace(" ", "") and "toolu_" in dump.stdout


@slow
def test_hello_world_under_bwrap_reaches_only_its_model(tmp_path):
    need(bwrap_missing())
    task = copy_example(tmp_path, "hello_world")
    res = ce("run", str(task), "--scripted-model", "--driver", "bwrap", "--runs-root", "runs",
             cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    record, _ = trial(tmp_path, "hello_world")
    assert record["status"] == "SUCCESS"
    assert record["sandbox"]["driver"] == "bwrap"
    assert record["sandbox"]["network"].startswith("model endpoint only")
    assert record["model_server"]["calls"] == 3


@slow
def test_hello_world_under_docker_runs_the_cli_in_the_container(tmp_path):
    """The CLI the SDK bundles runs in the trial's container (its tools see /workspace),
    reaching its model through ce's forwarder only; the forwarder is not counted as a
    process the agent left running, and no container is left behind."""
    need(python_image())
    task = copy_example(tmp_path, "hello_world")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ce_runtime.cli", "run", str(task), "--scripted-model",
         "--driver", "docker", "-D", f"sandbox.docker.image={PYTHON_IMAGE}",
         "--runs-root", "runs"], cwd=tmp_path, env={**os.environ, "CE_PLAIN": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    record, events = trial(tmp_path, "hello_world")
    assert record["status"] == "SUCCESS" and record["sandbox"]["driver"] == "docker"
    assert record["sandbox"]["network"].startswith("model endpoint only")
    assert record["model_server"]["calls"] == 3
    calls = [e for e in events if type(e).__name__ == "ToolCall"]
    assert calls[0].params["file_path"] == "/workspace/hello.py"  # not the host's path
    assert "agent_left_running" not in record or not record["agent_left_running"]
    assert record["teardown_killed"] == []
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ce.pid={proc.pid}"],
                          capture_output=True, text=True, timeout=60)
    assert left.returncode == 0 and left.stdout.strip() == ""


SKILL_TASK = """\
task_id: skills
description: does the agent fire date-teller only for date questions?
dataset:
  rows:
    - {id: positive, question: "What day is it?", expected_skill: date-teller}
    - {id: negative, question: "What is 2 + 2?", expected_skill: ""}
initial_prompt: "${row.question}"
agent:
  type: claude-code
  allowed_tools: [Skill, Bash]
sandbox:
  python: null
  template_sources:
    - type: starter_files
      files:
        - path: .claude/skills/date-teller/SKILL.md
          content: |
            ---
            name: date-teller
            description: Tells the current date.
            ---
            Run `date -u` with the Bash tool and answer from its output.
success_criteria:
  - type: skill_triggered
    skill_name: date-teller
    expected_skill: "${row.expected_skill}"
    description: date-teller fires on date questions only
"""


@slow
def test_skill_triggered_scores_the_positive_and_the_negative_row(tmp_path):
    (tmp_path / "skills.yaml").write_text(SKILL_TASK)
    fires = [{"tool": "Skill", "input": {"skill": "date-teller"}}, {"text": "answered"}]
    (tmp_path / "skills.claude-code.model.yaml").write_text(yaml.safe_dump(
        {"rows": {"positive": fires, "negative": fires}}))  # it fires on both: wrong once
    res = ce("run", "skills.yaml", "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    scores = {}
    for row in ("positive", "negative"):
        record, events = trial(tmp_path, "skills", row)
        scores[row] = record["criteria"][0]["score"]
        results = [e for e in events if type(e).__name__ == "ToolResult"]
        assert results[0].output == "Launching skill: date-teller"  # the CLI loaded it
    assert scores == {"positive": 1.0, "negative": 0.0}


@slow
def test_early_stop_ends_the_cli_at_the_deciding_tool_call(tmp_path):
    task = copy_example(tmp_path, "early_stop")
    script_file = tmp_path / "early_stop.claude-code.model.yaml"
    script = yaml.safe_load(script_file.read_text())
    script["steps"][1]["delay"] = 2.0  # a loaded machine still stops before step 2 lands
    script_file.write_text(yaml.safe_dump(script))
    res = ce("run", str(task), "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    record, events = trial(tmp_path, "early_stop")
    assert record["stopped_early"] and record["agent_outcome"]["reason"] == "stopped"
    decision = next(e for e in events if type(e).__name__ == "Decision")
    deciding = events[decision.event_index]
    assert type(deciding).__name__ == "ToolCall" and deciding.params["command"] == \
        "python --version"
    after = events[events.index(decision):]
    assert not [e for e in after if type(e).__name__ == "ToolCall"]  # nothing more ran
    assert record["model_server"]["calls"] <= 2  # never past step 2 (asked for, not heard)
    # a turn is a model call that answered: the one cut short by the stop is not one
    assert record["usage"]["turns"] == 1, record["usage"]
    assert not (Path(record["task_dir"]) / "version.txt").exists()


@slow
def test_early_stop_records_the_turn_it_was_decided_in(tmp_path):
    # with no delay the CLI often makes a model call or two before its interrupt lands:
    # task.json said turn_index 3 (the last turn) for a stop decided in turn 1
    task = copy_example(tmp_path, "early_stop")
    res = ce("run", str(task), "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    record, _ = trial(tmp_path, "early_stop")
    stop = record["early_stop"]
    assert (stop["tool_call_index"], stop["turn_index"], stop["turns_remaining_at_stop"]) \
        == (1, 1, 29)
    assert record["usage"]["turns"] >= 1


@slow
def test_a_turn_timeout_kills_the_cli_and_its_children(tmp_path):
    mark = new_mark("25")
    (tmp_path / "hang.yaml").write_text(textwrap.dedent("""\
        task_id: hang
        description: the agent's command hangs past turn_timeout
        initial_prompt: wait
        agent: {type: claude-code, allowed_tools: [Bash]}
        run_limits: {turn_timeout: 4}
        sandbox: {python: null, env: {CE_TEST_MARK: "MARK"}}
        success_criteria:
          - {type: file_exists, path: never.txt, description: never written}
        """).replace("MARK", mark))
    (tmp_path / "hang.claude-code.model.yaml").write_text(yaml.safe_dump({"steps": [
        {"tool": "Bash", "input": {
            "command": f"python3 -c 'import time; time.sleep({mark})' & "
                       f"python3 -c 'import time; time.sleep({mark})'", "timeout": 600000}},
        {"text": "never reached"}]}))
    started = time.monotonic()
    res = ce("run", "hang.yaml", "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    took = time.monotonic() - started
    record, events = trial(tmp_path, "hang")
    assert record["status"] == "TIMEOUT", (record["error"], res.stderr)
    assert took < 60
    # the command, its child and the CLI (every process of the trial has the mark in its
    # environment) are gone
    assert processes_marked(mark) == {}
    assert "AgentEnd" in kinds(events)


def test_a_missing_session_or_key_is_said_before_any_trial(tmp_path):
    task = tmp_path / "t.yaml"
    shutil.copy(TASKS / "hello_world.yaml", task)
    res = ce("run", str(task), "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 2
    assert "no scripted session t.claude-code.model.yaml" in res.stderr
    env = {k: "" for k in ("ANTHROPIC_API_KEY", "API_BACKEND")}
    res = ce("run", str(task), "--runs-root", "runs", cwd=tmp_path, env=env)
    assert res.returncode == 2 and "ANTHROPIC_API_KEY is not set" in res.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("task.json"))


@pytest.mark.parametrize(("content", "says"), [
    (b"steps: [\n", "t.claude-code.model.yaml:2:1: not valid YAML"),
    (b"steps:\n  - \xff\n", "t.claude-code.model.yaml: not a UTF-8 text file"),
    (b"", "t.claude-code.model.yaml has no step to answer the agent with"),
    (b"steps: 3\n", "t.claude-code.model.yaml"),
])
def test_a_broken_session_is_said_before_any_trial(tmp_path, content, says):
    """A session file that cannot be played is refused as a missing one is (exit 2,
    nothing run): it was each trial's ERROR after its sandbox, and an empty one let the
    real CLI run against a server with nothing to say."""
    task = tmp_path / "t.yaml"
    shutil.copy(TASKS / "hello_world.yaml", task)
    (tmp_path / "t.claude-code.model.yaml").write_bytes(content)
    res = ce("run", str(task), "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("task.json"))


LIMITS = {
    "turns": ("run_limits: {max_turns: 2}", None),
    "tokens": ("run_limits: {max_total_tokens: 3000}", None),
    "denied": ("run_limits: {max_turns: 5}", "permission_mode: default\n  allowed_tools: [Read]"),
}


@slow
def test_max_turns_budgets_and_denied_permissions(tmp_path):
    # each model call takes a second: the budget's stop lands before the script runs out
    steps = [{"tool": "Bash", "input": {"command": f"echo step{i}"}, "delay": 1.0,
              "usage": {"input_tokens": 2000, "output_tokens": 50}} for i in range(4)]
    for name, (limits, agent_extra) in LIMITS.items():
        agent = "agent:\n  type: claude-code\n  " + (agent_extra or "allowed_tools: [Bash, Write]")
        script = steps if name != "denied" else [
            {"tool": "Write", "input": {"file_path": "{workspace}/x.txt", "content": "x"}},
            {"text": "could not write"}]
        (tmp_path / f"{name}.yaml").write_text(
            f"task_id: {name}\ndescription: limits\ninitial_prompt: go\n{agent}\n{limits}\n"
            "sandbox: {python: null}\nsuccess_criteria:\n"
            "  - {type: file_exists, path: x.txt, description: d}\n")
        (tmp_path / f"{name}.claude-code.model.yaml").write_text(
            yaml.safe_dump({"steps": script}))
    res = ce("run", ".", "--scripted-model", "-j", "3", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    turns, turn_events = trial(tmp_path, "turns")
    assert turns["status"] == "MAX_TURNS_EXHAUSTED", turns["agent_outcome"]
    assert len([e for e in turn_events if type(e).__name__ == "ToolCall"]) <= 2
    # one turn per model call: the CLI's own max_turns ended it after two, no third opened
    assert turns["usage"]["turns"] == turns["model_server"]["calls"] == 2, turns["usage"]
    assert kinds(turn_events).count("TurnStart") == 2
    tokens, _ = trial(tmp_path, "tokens")
    assert tokens["status"] == "TOKEN_BUDGET_EXCEEDED"
    assert tokens["model_server"]["calls"] < 4  # the CLI was stopped, not run out
    assert tokens["usage"]["turns"] <= tokens["model_server"]["calls"], tokens["usage"]
    _, denied_events = trial(tmp_path, "denied")
    [result] = [e for e in denied_events if type(e).__name__ == "ToolResult"]
    assert result.status == "denied", result.output
    assert not any(p.name == "x.txt" for p in (tmp_path / "runs").rglob("x.txt"))


def _sleeping_task(tmp: Path, mark: str, seconds: float) -> None:
    """A Claude Code trial whose one command sleeps `seconds` (its processes carry
    `mark`), then writes done.txt."""
    (tmp / "nap.yaml").write_text(textwrap.dedent("""\
        task_id: nap
        description: the agent's command takes a while
        initial_prompt: nap
        agent: {type: claude-code, allowed_tools: [Bash]}
        sandbox: {python: null, env: {CE_TEST_MARK: "@MARK@"}}
        success_criteria:
          - {type: file_exists, path: done.txt, description: written after the nap}
        """).replace("@MARK@", mark))
    (tmp / "nap.claude-code.model.yaml").write_text(yaml.safe_dump({"steps": [
        {"tool": "Bash", "input": {  # (Claude Code refuses a long `sleep` of its own)
            "command": f"python3 -c 'import time; time.sleep({seconds})' && echo ok > done.txt"}},
        {"text": "done"}]}))


DRIVER_ARGS = {"tempdir": [], "bwrap": ["--driver", "bwrap"],
               "docker": ["--driver", "docker", "-D", f"sandbox.docker.image={PYTHON_IMAGE}"]}


def _start_ce_and_wait_for(tmp: Path, mark: str, sigint_ignored: bool,
                           driver: str = "tempdir") -> subprocess.Popen:
    """`ce run nap.yaml` as the leader of a process group of its own (a terminal's
    foreground job, or a script's background job when `sigint_ignored`), once the
    agent's command runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ce_runtime.cli", "run", "nap.yaml", "--scripted-model",
         *DRIVER_ARGS[driver], "--runs-root", "runs"], cwd=tmp,
        env={**os.environ, "CE_PLAIN": "1"},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if sigint_ignored else None)
    deadline = time.monotonic() + 120
    while not any("time.sleep" in cmd for cmd in processes_marked(mark).values()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc


@slow
@pytest.mark.parametrize("driver", DRIVER_ARGS)
def test_sigint_to_a_background_runs_group_does_not_stop_its_agent(tmp_path, driver):
    """`ce run &` in a script ignores SIGINT, and so must its trial: a SIGINT to its
    process group reached the host-side launcher of the Claude Code CLI (in ce's group,
    with a SIGINT handler of its own), which killed the CLI behind ce's back (the trial
    ended in ERROR; under docker the docker client of the CLI took it). Now only ce
    decides when a trial's processes stop."""
    need(bwrap_missing() if driver == "bwrap" else
         python_image() if driver == "docker" else None)
    mark = new_mark("5")
    _sleeping_task(tmp_path, mark, 3.5)
    proc = _start_ce_and_wait_for(tmp_path, mark, sigint_ignored=True, driver=driver)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    record, _ = trial(tmp_path, "nap")
    assert record["status"] == "SUCCESS", (record["agent_outcome"], err[-2000:])
    assert proc.returncode == 0, err
    assert processes_marked(mark) == {}


@slow
def test_ctrl_c_stops_a_claude_code_trial_and_leaves_nothing_running(tmp_path):
    """Ctrl-C (SIGINT to the foreground group) while the agent's command runs: ce stops
    the trial itself (INTERRUPTED, exit 1, what it had recorded kept), and nothing of the
    trial is left running."""
    mark = new_mark("75")
    _sleeping_task(tmp_path, mark, 60)
    proc = _start_ce_and_wait_for(tmp_path, mark, sigint_ignored=False)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "interrupted", meta
    assert f"resume with `ce run --resume {run_dir.relative_to(tmp_path)}`" in err, err
    assert "**INTERRUPTED**" in (run_dir / "report.md").read_text()
    assert processes_marked(mark) == {}
