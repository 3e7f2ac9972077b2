"""codex, opencode, pi (real CLIs from npm, installed by ce) and ce's own `openai` tool
loop, end to end through `ce run --scripted-model`: hello world passes, command_executed
sees each agent's shell commands, usage is recorded, and early stop and a turn timeout
end each CLI and everything it started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from ce_runtime.trace.events import read_trace
from tests.engines import PYTHON_IMAGE, need, python_image
from tests.processes import new_mark, processes_marked

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"
AGENTS = ["codex", "opencode", "pi", "openai"]
# the model each runs when the task names none (ce_agents.*.DEFAULT_MODEL)
DEFAULT_MODELS = {"codex": "gpt-5.5", "opencode": "scripted", "pi": "scripted",
                  "openai": "gpt-4.1"}
pytestmark = pytest.mark.slow


def shell_step(agent: str, command: str, **extra) -> dict:
    """A step that runs `command` with the agent's own shell tool."""
    tool, args = {"codex": ("exec_command", {"cmd": command}),
                  "opencode": ("bash", {"command": command, "description": "run"}),
                  "pi": ("bash", {"command": command}),
                  "openai": ("shell", {"command": command})}[agent]
    return {"tool": tool, "input": args, **extra}


def ce(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args], cwd=cwd,
                          env={**os.environ, "CE_PLAIN": "1"}, capture_output=True,
                          text=True, timeout=timeout)


def trial(tmp: Path, task: str) -> tuple[dict, list]:
    run_dir = next(p for p in (tmp / "runs").iterdir() if p.name != "latest")
    d = run_dir / "default" / task / "00"
    return json.loads((d / "task.json").read_text()), read_trace(str(d / "trace.msgpack")).events


@pytest.mark.parametrize("agent", AGENTS)
def test_hello_world_with_each_agent(agent, tmp_path):
    for suffix in (".yaml", f".{agent}.model.yaml"):
        shutil.copy(TASKS / f"hello_world{suffix}", tmp_path / f"hello_world{suffix}")
    text = (tmp_path / "hello_world.yaml").read_text() + (
        "  - type: command_executed\n    tool_name: Bash\n    command_pattern: hello\\.py\n"
        "    description: ran the script through its shell tool\n")
    (tmp_path / "hello_world.yaml").write_text(text)
    res = ce("run", "hello_world.yaml", "--agent", agent, "--scripted-model", "--runs-root",
             "runs", cwd=tmp_path)
    record, events = trial(tmp_path, "hello_world")
    assert res.returncode == 0, (record["agent_outcome"], res.stderr)
    assert record["status"] == "SUCCESS" and record["agent"] == agent
    assert record["criteria"][-1]["score"] == 1.0  # command_executed saw `python hello.py`
    bash = [e for e in events if type(e).__name__ == "ToolCall" and e.tool == "Bash"]
    assert [b.params["command"] for b in bash] == ["python hello.py"]
    script = yaml.safe_load((tmp_path / f"hello_world.{agent}.model.yaml").read_text())
    assert record["usage"]["input_tokens"] == sum(s["usage"]["input_tokens"]
                                                  for s in script["steps"])
    assert record["usage"]["output_tokens"] == sum(s["usage"]["output_tokens"]
                                                   for s in script["steps"])
    # the task names no model: the agent's default is recorded (task.json said null),
    # the one every call to the scripted server asked for, and the reports show it
    assert record["model"] == DEFAULT_MODELS[agent]
    assert record["model_server"]["models"] == [record["model"]]
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest")
    assert pl.read_parquet(run_dir / "trials.parquet")["model"].to_list() == [record["model"]]
    assert f"Agent `{agent}`, model `{record['model']}`" in (run_dir / "report.md").read_text()


@pytest.mark.parametrize("agent", ["codex", "opencode", "pi"])
def test_native_clis_run_in_a_docker_container(agent, tmp_path):
    """Codex (its native program, not the npm launcher: the image has no node),
    opencode, and pi (a node script: run by the host's node, exposed in /run/ce/bin) run
    in the trial's container, reach their model through ce's forwarder, and
    leave nothing running: Codex's session-log follower is killed in the container when
    ce stops it, not counted as left behind by the agent."""
    need(python_image())
    for suffix in (".yaml", f".{agent}.model.yaml"):
        shutil.copy(TASKS / f"hello_world{suffix}", tmp_path / f"hello_world{suffix}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ce_runtime.cli", "run", "hello_world.yaml", "--agent", agent,
         "--scripted-model", "--driver", "docker", "-D",
         f"sandbox.docker.image={PYTHON_IMAGE}", "--runs-root", "runs"], cwd=tmp_path,
        env={**os.environ, "CE_PLAIN": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    _, err = proc.communicate(timeout=300)
    record, _ = trial(tmp_path, "hello_world")
    assert proc.returncode == 0, (record["agent_outcome"], err)
    assert record["status"] == "SUCCESS" and record["sandbox"]["driver"] == "docker"
    assert record["sandbox"]["network"].startswith("model endpoint only")
    assert not record.get("agent_left_running") and record["teardown_killed"] == []
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=ce.pid={proc.pid}"],
                          capture_output=True, text=True, timeout=60)
    assert left.returncode == 0 and left.stdout.strip() == ""


@pytest.mark.parametrize("agent", AGENTS)
def test_early_stop_and_turn_timeout_end_each_cli(agent, tmp_path):
    mark = new_mark("5")
    sleep = f"python3 -c 'import time; time.sleep({mark})'"
    (tmp_path / "stops.yaml").write_text(
        "task_id: stops\ndescription: early stop\ninitial_prompt: go\n"
        f"agent: {{type: {agent}}}\nrun_limits: {{stop_early: true}}\n"
        "sandbox: {python: null, env: {CE_TEST_MARK: 'M'}}\n".replace("M", mark)
        + "success_criteria:\n  - type: command_executed\n    tool_name: Bash\n"
        "    command_pattern: decided\n    stop_when: pass\n    description: d\n")
    (tmp_path / "stops.model.yaml").write_text(yaml.safe_dump({"steps": [
        shell_step(agent, "echo decided"),
        shell_step(agent, f"echo never; {sleep}", delay=2.0), {"text": "never"}]}))
    (tmp_path / "hangs.yaml").write_text(
        "task_id: hangs\ndescription: a hung command\ninitial_prompt: go\n"
        f"agent: {{type: {agent}}}\nrun_limits: {{turn_timeout: 5}}\n"
        "sandbox: {python: null, env: {CE_TEST_MARK: 'M'}}\n".replace("M", mark)
        + "success_criteria:\n  - {type: file_exists, path: x, description: d}\n")
    (tmp_path / "hangs.model.yaml").write_text(yaml.safe_dump({"steps": [
        shell_step(agent, f"{sleep} & {sleep}"), {"text": "never"}]}))
    for name in ("stops", "hangs"):
        text = (tmp_path / f"{name}.yaml").read_text()
        (tmp_path / f"{name}.yaml").write_text(text.replace(
            f"agent: {{type: {agent}}}", f"agent: {{type: {agent}, model_script: "
                                         f"{name}.model.yaml}}"))
    started = time.monotonic()
    res = ce("run", ".", "--scripted-model", "-j", "2", "--runs-root", "runs", cwd=tmp_path)
    assert time.monotonic() - started < 120, res.stderr
    stops, stop_events = trial(tmp_path, "stops")
    assert stops["status"] == "SUCCESS" and stops["stopped_early"], stops["agent_outcome"]
    assert stops["agent_outcome"]["reason"] == "stopped"
    calls = [e.params.get("command") for e in stop_events if type(e).__name__ == "ToolCall"]
    assert calls[0] == "echo decided" and len(calls) <= 2
    hangs, _ = trial(tmp_path, "hangs")
    assert hangs["status"] == "TIMEOUT", hangs["agent_outcome"]
    assert processes_marked(mark) == {}  # every process of both trials, the CLIs included, is gone


def test_an_experiment_with_a_variant_per_agent_compares_them(tmp_path):
    shutil.copy(TASKS / "hello_world.yaml", tmp_path)
    for agent in ["claude-code", *AGENTS]:
        shutil.copy(TASKS / f"hello_world.{agent}.model.yaml", tmp_path)
    shutil.copy(TASKS / "experiments" / "agents.yaml", tmp_path / "agents.yaml")
    res = ce("run", "hello_world.yaml", "-e", "agents.yaml", "--scripted-model", "-j", "3",
             "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    report = next((tmp_path / "runs").glob("*/report.md")).read_text()
    comparison = report.split("## Variant comparison")[1]
    for agent in ["claude-code", *AGENTS]:
        assert f"| `{agent}` | 1 | 100.0% |" in comparison


def opencode_task(tmp: Path, steps: list, rest: str, agent: str = "opencode") -> None:
    """t.yaml: an OpenCode (or `agent`) task against the scripted `steps`, `rest` its
    last keys."""
    (tmp / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: go\n"
        f"agent: {{type: {agent}, model_script: t.model.yaml}}\nsandbox: {{python: null}}\n"
        + rest)
    (tmp / "t.model.yaml").write_text(yaml.safe_dump({"steps": steps}))


def test_opencode_starts_without_running_npm_s_installer(tmp_path):
    """OpenCode installs its plugin helper package into its config directory at start,
    and waits for that before loading ce's plugin: npm's installer loaded (offline, it
    only failed) on every trial's path to its first model call. ce seeds the directory as
    installed: OpenCode's own log, read by its shell tool in the trial, says it started
    and never tried the install."""
    command = ('cat "$XDG_DATA_HOME"/opencode/log/*.log | grep -e "creating instance" '
               '-e "dependency install" | grep -v "grep -e" | cut -c1-400')
    # (OpenCode logs the permission it evaluated for this very command: not a line of it)
    opencode_task(tmp_path, [shell_step("opencode", command), {"text": "done"}],
                  "success_criteria:\n  - {type: command_executed, tool_name: Bash, "
                  "command_pattern: opencode/log, description: d}\n")
    res = ce("run", "t.yaml", "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    record, events = trial(tmp_path, "t")
    assert res.returncode == 0, (record["agent_outcome"], res.stderr)
    [result] = [e for e in events if type(e).__name__ == "ToolResult"]
    lines = result.output.splitlines()  # (was: ... "dependency install failed")
    assert [("creating instance" in x, "dependency install" in x) for x in lines] == [
        (True, False)], result.output  # (CI once saw a second instance install: where?)


@pytest.mark.parametrize("driver", ["default", "docker"])
def test_opencode_s_glob_and_grep_search_the_workspace(driver, tmp_path):
    """OpenCode's glob and grep tools run ripgrep, which it downloads at its first search
    when neither PATH nor its cache has one: in the sandbox (the model's network only)
    every such call answered "ripgrep execution failed" on a machine without `rg`. ce
    installs a pinned one with OpenCode and puts a launcher of it in OpenCode's cache:
    both find the file, on the host's sandbox and in a container."""
    extra = []
    if driver == "docker":
        need(python_image())
        extra = ["--driver", "docker", "-D", f"sandbox.docker.image={PYTHON_IMAGE}"]
    opencode_task(tmp_path, [{"tool": "glob", "input": {"pattern": "**/*.txt"}},
                             {"tool": "grep", "input": {"pattern": "needle"}},
                             {"text": "done"}],
                  "pre_run:\n  - command: mkdir -p src && echo 'a needle here' > "
                  "src/found.txt\nsuccess_criteria:\n  - {type: file_exists, "
                  "path: src/found.txt, description: d}\n")
    res = ce("run", "t.yaml", "--scripted-model", "--runs-root", "runs", *extra, cwd=tmp_path)
    record, events = trial(tmp_path, "t")
    assert res.returncode == 0, (record["agent_outcome"], res.stderr)
    calls = {e.call_id: e.tool for e in events if type(e).__name__ == "ToolCall"}
    results = {calls[e.call_id]: e for e in events if type(e).__name__ == "ToolResult"}
    assert set(results) == {"Glob", "Grep"}, results
    assert results["Glob"].status == "ok" and \
        results["Glob"].output.endswith("src/found.txt"), results["Glob"]
    assert results["Grep"].status == "ok" and "a needle here" in results["Grep"].output, \
        results["Grep"]


@pytest.mark.parametrize("driver", ["default", "docker"])
def test_pi_s_grep_find_and_ls_search_the_workspace(driver, tmp_path):
    """Pi offers only read, bash, edit and write unless told (`--tools`): ce enables its
    grep, find and ls too, which the trace names Grep, Glob and LS. Its grep runs rg and
    its find fd, which it downloads when it has neither (offline: never, the call fails
    "fd is not available and could not be downloaded"): ce gives Pi its pinned rg and an
    fd on it. All three find the file, the ignored one left out by find as fd leaves it,
    on the host's sandbox and in a container; criteria on the search tools pass."""
    extra = []
    if driver == "docker":
        need(python_image())
        extra = ["--driver", "docker", "-D", f"sandbox.docker.image={PYTHON_IMAGE}"]
    opencode_task(tmp_path, [{"tool": "grep", "input": {"pattern": "needle", "path": "src"}},
                             {"tool": "find", "input": {"pattern": "*.txt"}},
                             {"tool": "ls", "input": {"path": "src"}},
                             {"text": "done"}],
                  "pre_run:\n  - command: mkdir -p src node_modules/m && echo 'a needle "
                  "here' > src/found.txt && echo x > node_modules/m/ignored.txt && echo "
                  "node_modules > .gitignore\nsuccess_criteria:\n" + "".join(
                      f"  - {{type: command_executed, tool_name: {tool}, require_success: "
                      f"true, description: searched with {tool}}}\n"
                      for tool in ("Grep", "Glob", "LS")), agent="pi")
    res = ce("run", "t.yaml", "--scripted-model", "--runs-root", "runs", *extra, cwd=tmp_path)
    record, events = trial(tmp_path, "t")
    assert res.returncode == 0, (record["agent_outcome"], res.stderr)
    assert [c["score"] for c in record["criteria"]] == [1.0, 1.0, 1.0], record["criteria"]
    calls = {e.call_id: (e.tool, e.raw_tool) for e in events if type(e).__name__ == "ToolCall"}
    results = {calls[e.call_id]: e for e in events if type(e).__name__ == "ToolResult"}
    assert set(results) == {("Grep", "grep"), ("Glob", "find"), ("LS", "ls")}, results
    assert [(r.status, r.output) for r in results.values()] == [
        ("ok", "found.txt:1: a needle here"), ("ok", "src/found.txt"), ("ok", "found.txt")]


def test_codex_runs_ce_s_max_turns_hook_trusted_and_no_hook_the_workspace_carries(tmp_path):
    """ce's PreModelRequest hook holds Codex at max_turns: Codex runs it as trusted by its
    hash in ce's CODEX_HOME config (no --dangerously-bypass-hook-trust, which would run
    any enabled hook untrusted). Hooks a task's workspace carries in .codex/ (config.toml
    and hooks.json: at the session's start, the prompt, each model call) never run: the
    project is untrusted, so Codex disables its layer. Two model calls at max_turns 2, no
    marker written, nothing said of hooks in the trace."""
    hooks = {"PreModelRequest": "pmr", "SessionStart": "ss", "UserPromptSubmit": "ups"}
    toml = "".join(f'[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = "command"\n'
                   f'command = "touch $W/marker-toml-{name}"\n' for event, name in hooks.items())
    json_hooks = json.dumps({"hooks": {event: [{"hooks": [
        {"type": "command", "command": f"touch $W/marker-json-{name}"}]}]
        for event, name in hooks.items()}})
    (tmp_path / "carry.sh").write_text(
        f"W=$(pwd)\nmkdir -p .codex\ncat > .codex/config.toml <<T\n{toml}T\n"
        f"cat > .codex/hooks.json <<J\n{json_hooks}\nJ\n")
    (tmp_path / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: go\n"
        "agent: {type: codex, model_script: t.model.yaml}\nrun_limits: {max_turns: 2}\n"
        f"sandbox: {{python: null}}\npre_run:\n  - command: sh {tmp_path / 'carry.sh'}\n"
        "success_criteria:\n  - {type: file_exists, path: s1.txt, description: d}\n")
    (tmp_path / "t.model.yaml").write_text(yaml.safe_dump({"steps": [
        shell_step("codex", "echo 1 > s1.txt; ls .codex"), shell_step("codex", "echo 2 > s2.txt"),
        shell_step("codex", "echo 3 > s3.txt"), {"text": "done"}]}))
    res = ce("run", "t.yaml", "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    record, events = trial(tmp_path, "t")
    assert record["status"] == "MAX_TURNS_EXHAUSTED", (record["agent_outcome"], res.stderr)
    assert record["agent_outcome"]["detail"].endswith(
        "codex held its next model call at max_turns 2"), record["agent_outcome"]
    assert record["model_server"]["calls"] == record["usage"]["turns"] == 2, record
    [first, _] = [e for e in events if type(e).__name__ == "ToolResult"]
    assert first.output.split() == ["config.toml", "hooks.json"]  # the hooks were there
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name != "latest")
    snapshot = json.loads((run_dir / "default" / "t" / "00" / "workspace.json").read_text())
    assert sorted(snapshot["files"]) == [".codex/config.toml", ".codex/hooks.json",
                                         "s1.txt", "s2.txt"]  # and no marker-*
    assert [e.text for e in events if type(e).__name__ == "Message" and e.role == "system"] \
        == []  # (a hook ce's ran not, a flag's warning, a project layer's)
