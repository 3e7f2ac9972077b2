"""`ce run` end to end, through the real CLI in a subprocess: the example tasks solved by
the oracle, script agents exercising trace criteria, early stop, every limit status,
exit codes, JUnit XML, and a run killed (SIGKILL) or interrupted (SIGINT) then resumed.

Each test starts `ce` as a user would (`.venv/bin/ce` next to this interpreter); tasks
are written to tmp_path, except the example tasks in tasks/.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from ce_runtime.trace import events as T

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = os.path.join(ROOT, "tasks")
CE = os.path.join(os.path.dirname(sys.executable), "ce")
ENV = {**os.environ, "CE_PLAIN": "1"}
for _var in ("CE_JUDGE_URL", "CE_JUDGE_API_KEY", "ANTHROPIC_API_KEY"):
    ENV.pop(_var, None)  # no real judge, ever


def env_for(cwd: str) -> dict[str, str]:
    """ENV with TMPDIR under the test's directory: the run's scratch space (workspaces)
    lands there, so a test can check that none is left behind."""
    tmp = os.path.join(cwd, "tmp")
    os.makedirs(tmp, exist_ok=True)
    return {**ENV, "TMPDIR": tmp}


def scratch_left(cwd: str) -> list[str]:
    return os.listdir(os.path.join(cwd, "tmp"))


def ce(*args: str, cwd: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([CE, *args], cwd=cwd, env=env_for(cwd), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_dir_in(root: str) -> str:
    """The one run directory under a --run-dir root (`latest` is a symlink to it)."""
    dirs = [d for d in glob.glob(os.path.join(root, "*"))
            if os.path.isdir(d) and not os.path.islink(d)]
    assert len(dirs) == 1, dirs
    return dirs[0]


def task_jsons(run_dir: str) -> dict[str, dict]:
    """trial_id -> task.json of every finished trial."""
    out = {}
    for path in glob.glob(os.path.join(run_dir, "**", "task.json"), recursive=True):
        with open(path, encoding="utf-8") as fh:
            record = json.load(fh)
        assert record["trial_id"] not in out, f"trial {record['trial_id']} recorded twice"
        out[record["trial_id"]] = record
    return out


def trial_dir(run_dir: str, record: dict) -> str:
    return os.path.join(run_dir, record["variant_id"], *record["task_id"].split("/"),
                        f"{record['repeat']:02d}")


def events_of(run_dir: str, record: dict) -> list:
    """The trial's trace, decoded whole (no truncated or corrupt tail)."""
    result = T.read_trace(os.path.join(trial_dir(run_dir, record), "trace.msgpack"))
    assert not result.truncated and result.corrupt_at is None, record["trial_id"]
    events = result.events
    assert isinstance(events[0], T.RunHeader) and events[0].trial_id == record["trial_id"]
    assert isinstance(events[-1], T.RunEnd) and events[-1].status == record["status"]
    return events


def snapshot_text(run_dir: str, record: dict, rel: str) -> str | None:
    """A file of the trial's workspace snapshot (workspace.json + the objects store)."""
    with open(os.path.join(trial_dir(run_dir, record), "workspace.json"),
              encoding="utf-8") as fh:
        entry = json.load(fh)["files"].get(rel)
    if entry is None:
        return None
    digest = entry["sha256"]
    with open(os.path.join(run_dir, "objects", digest[:2], digest[2:]), encoding="utf-8") as fh:
        return fh.read()


def load_run_json(run_dir: str) -> dict:
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
        return json.load(fh)


def by_task(records: dict[str, dict]) -> dict[str, dict]:
    return {r["task_id"]: r for r in records.values()}


def criteria_of(record: dict) -> dict[str, dict]:
    return {c["id"]: c for c in record["criteria"]}


# -- the example tasks ---------------------------------------------------------------------
def test_every_example_task_succeeds_with_the_oracle(tmp_path):
    junit = tmp_path / "junit.xml"
    res = ce("run", TASKS, "--agent", "oracle", "-j", "4", "--runs-root", str(tmp_path / "runs"),
             "--judge-replies", os.path.join(TASKS, "judged.replies.yaml"),
             "--junit-xml", str(junit), cwd=str(tmp_path), timeout=170)
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    records = task_jsons(run_dir)
    meta = load_run_json(run_dir)
    assert meta["status"] == "complete"
    assert meta["trials_planned"] == len(records)

    # every task file is there (a dataset task once per row)
    import yaml

    for path in glob.glob(os.path.join(TASKS, "*.yaml")):
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        if "task_id" not in doc:
            continue  # judged.replies.yaml
        rows = (doc.get("dataset") or {}).get("rows")
        want = {f"{doc['task_id']}/{r['id']}" for r in rows} if rows else {doc["task_id"]}
        assert want <= {r["task_id"] for r in records.values()}, path

    failed = {t: (r["status"], r["error"], r["agent_outcome"]) for t, r in records.items()
              if r["status"] != "SUCCESS"}
    assert not failed
    assert scratch_left(str(tmp_path)) == []  # every workspace was removed
    for record in records.values():
        events = events_of(run_dir, record)
        starts = [e for e in events if isinstance(e, T.AgentStart)]
        if record["task_id"] == "agentless_smoke_test":
            assert record["agent"] == "none"  # --agent oracle does not replace `none`
        else:
            assert record["agent"] == "oracle"
            assert [s.agent for s in starts] == ["oracle"]
        assert isinstance(events[-2], T.AgentEnd)

    tasks = by_task(records)
    early = tasks["early_stop"]
    assert early["stopped_early"] is True
    assert criteria_of(early)["c1"]["advisory"] is True  # version.txt: never written
    judge = next(c for c in tasks["judged"]["criteria"] if c["type"] == "llm_judge")
    assert judge["score"] == 1.0 and judge["passed"]
    rows = [r for r in records.values() if r["task_id"].startswith("dataset_classification/")]
    assert len(rows) == 8

    report = (tmp_path / "runs" / os.path.basename(run_dir) / "report.md").read_text()
    assert "PASSED" in report
    suite = ET.parse(junit).getroot()
    names = {c.get("name") for c in suite.iter("testcase")}
    assert set(records) <= names  # one testcase per trial (and one per suite gate)
    assert suite.get("failures") == "0" and suite.get("errors") == "0"


# -- script agents: trace criteria and early stop ------------------------------------------
TRACE_CRITERIA = """
task_id: trace_criteria
description: a script agent whose trace satisfies every trace criterion
initial_prompt: Tell me the date, write out.txt and show it.
agent:
  type: script
  script:
    - tool: Skill
      params: {skill: date-teller}
      output: "2026-11-30 Monday"
    - write: out.txt
      content: hello
    - run: cat out.txt
    - say: done
sandbox: {python: null}
success_criteria:
  - type: command_executed            # c0: must run
    description: command executed
    tool_name: Bash
    command_pattern: "cat out\\\\.txt"
    require_success: true
    min_count: 1
  - type: command_executed            # c1: must NOT run
    description: command executed
    tool_name: Bash
    command_pattern: "\\\\brm\\\\s+-rf\\\\b"
    min_count: 0
    max_count: 0
  - type: skill_triggered             # c2: positive
    description: skill triggered
    skill_name: date-teller
    expected_skill: date-teller
  - type: skill_triggered             # c3: negative, and it did not fire
    description: skill triggered
    skill_name: other-skill
    expected_skill: ""
  - type: expr                        # c4: inline expression over the trace
    description: expr
    expr: 'count(trace.tool_calls, c -> c.tool == "Write") == 1 and len(trace.tool_calls) == 3'
  - type: file_contains               # c5: the workspace
    description: file contains
    path: out.txt
    includes: [hello]
"""

GUARD = """
task_id: guard
description: the must-not-run guard catches rm -rf
initial_prompt: Clean up.
agent:
  type: script
  script:
    - run: mkdir -p junk && rm -rf junk
sandbox: {python: null}
success_criteria:
  - type: command_executed
    description: command executed
    tool_name: Bash
    command_pattern: "\\\\brm\\\\s+-rf\\\\b"
    min_count: 0
    max_count: 0
"""

EARLY = """
task_id: early
description: stops as soon as the armed criterion passes
initial_prompt: Run the check, then wait.
agent:
  type: script
  script:
    - run: echo go
    - sleep: 30
    - write: late.txt
      content: never
run_limits: {stop_early: true}
sandbox: {python: null}
success_criteria:
  - type: command_executed
    description: command executed
    tool_name: Bash
    command_pattern: "echo go"
    min_count: 1
    stop_when: pass
  - type: file_exists
    description: file exists
    path: late.txt
"""


def test_script_agents_exercise_trace_criteria_and_early_stop(tmp_path):
    for name, text in (("trace_criteria", TRACE_CRITERIA), ("guard", GUARD),
                       ("early", EARLY)):
        (tmp_path / f"{name}.yaml").write_text(text)
    junit = tmp_path / "out" / "junit.xml"
    res = ce("run", str(tmp_path / "trace_criteria.yaml"), str(tmp_path / "guard.yaml"),
             str(tmp_path / "early.yaml"), "-j", "3", "--runs-root", str(tmp_path / "runs"),
             "--junit-xml", str(junit), cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr  # guard fails
    run_dir = run_dir_in(str(tmp_path / "runs"))
    tasks = by_task(task_jsons(run_dir))

    ok = tasks["trace_criteria"]
    assert ok["status"] == "SUCCESS", ok
    assert {c["id"]: c["score"] for c in ok["criteria"]} == {f"c{i}": 1.0 for i in range(6)}
    assert ok["usage"]["tool_calls"] == 3 and ok["usage"]["turns"] == 4
    events = events_of(run_dir, ok)
    calls = [e for e in events if isinstance(e, T.ToolCall)]
    assert [c.tool for c in calls] == ["Skill", "Write", "Bash"]
    assert calls[1].params["file_path"].endswith("/out.txt")
    results = [e for e in events if isinstance(e, T.ToolResult)]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert results[2].output == "hello"

    guard = tasks["guard"]
    assert guard["status"] == "FAILURE"
    assert criteria_of(guard)["c0"]["score"] == 0.0

    early = tasks["early"]
    assert early["status"] == "SUCCESS"
    assert early["stopped_early"] is True and early["early_stop_reason"]
    crit = criteria_of(early)
    assert crit["c0"]["passed"] and not crit["c0"]["advisory"]
    assert crit["c1"]["advisory"] and not crit["c1"]["passed"]
    assert early["duration_s"] < 30  # the 30 s sleep was cut short (behaviour, not speed)
    events = events_of(run_dir, early)
    decisions = [e for e in events if isinstance(e, T.Decision)]
    assert [(d.criterion, d.verdict) for d in decisions] == [("c0", "pass")]
    assert not any(isinstance(e, T.ToolCall) and e.tool == "Write" for e in events)
    assert snapshot_text(run_dir, early, "late.txt") is None

    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases["default/guard/00"].find("failure") is not None
    assert cases["default/early/00"].find("failure") is None


# -- limits: every status, each keeping its trace -----------------------------------------
def _task(task_id: str, script: str, limits: str = "", extra: str = "",
          criterion: str = "  - type: file_exists\n    description: d\n    path: never.txt\n") -> str:
    return (f"task_id: {task_id}\ndescription: {task_id}\ninitial_prompt: go\n"
            f"agent:\n  type: script\n  script:\n{script}"
            f"{f'run_limits: {limits}' + chr(10) if limits else ''}"
            f"sandbox: {{python: null}}\n{extra}success_criteria:\n{criterion}")


LIMIT_TASKS = {
    "pre_run_fails": _task("pre_run_fails", "    - write: never.txt\n      content: x\n",
                           extra="pre_run:\n  - command: 'echo set-up; exit 3'\n"),
    "sleeps": _task("sleeps", "    - sleep: 30\n", "{task_timeout: 2}"),
    "sleeps_in_shell": _task(
        "sleeps_in_shell", "    - run: 'sleep 30 & echo $! > pid; wait'\n",
        "{task_timeout: 2}"),
    "tokens": _task("tokens", "    - usage: {input_tokens: 600, output_tokens: 500}\n"
                    "    - write: never.txt\n      content: x\n", "{max_total_tokens: 1000}"),
    "cost": _task("cost", "    - usage: {input_tokens: 10, cost_usd: 0.25}\n"
                  "    - write: never.txt\n      content: x\n", "{max_usd: 0.1}"),
    "turns": _task("turns", "    - say: one\n    - say: two\n    - write: never.txt\n"
                   "      content: x\n", "{max_turns: 2}"),
}


def _alive(pid: int) -> bool:
    """A process that still runs (a zombie waiting for its reaper counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_limits_give_their_status_and_keep_the_trace(tmp_path):
    for name, text in LIMIT_TASKS.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    junit = tmp_path / "junit.xml"
    res = ce("run", str(tmp_path), "-j", str(len(LIMIT_TASKS)), "--runs-root",
             str(tmp_path / "runs"), "--junit-xml", str(junit), cwd=str(tmp_path))
    assert res.returncode == 1, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    tasks = by_task(task_jsons(run_dir))
    assert {t: r["status"] for t, r in tasks.items()} == {
        "pre_run_fails": "ERROR", "sleeps": "TIMEOUT", "sleeps_in_shell": "TIMEOUT",
        "tokens": "TOKEN_BUDGET_EXCEEDED", "cost": "COST_BUDGET_EXCEEDED",
        "turns": "MAX_TURNS_EXHAUSTED"}
    events = {t: events_of(run_dir, r) for t, r in tasks.items()}

    # a failing pre_run: the agent never started, nothing was graded
    pre = tasks["pre_run_fails"]
    assert "pre_run" in pre["error"] and "exit 3" in pre["error"]
    assert pre["pre_run"][0]["exit_code"] == 3 and pre["pre_run"][0]["failed"]
    assert pre["criteria"] == [] and pre["agent_outcome"] is None
    assert not any(isinstance(e, T.AgentStart | T.TurnStart) for e in events["pre_run_fails"])

    # timeouts: the agent was stopped at task_timeout (the script agent ends at a stop,
    # between actions; one that does not end in the grace is killed), and nothing it
    # started survives
    for name in ("sleeps", "sleeps_in_shell"):
        r = tasks[name]
        assert r["agent_outcome"]["reason"] in ("stopped", "killed")
        # not before its 2 s task_timeout, and long before its 30 s sleep would end (a
        # bound on behaviour, not on speed: the slowest machine cannot make a kill late
        # by 28 s)
        assert 1.5 < r["duration_s"] < 30
        ends = [e for e in events[name] if isinstance(e, T.AgentEnd)]
        assert [e.reason for e in ends] == [r["agent_outcome"]["reason"]]
    pid = int(snapshot_text(run_dir, tasks["sleeps_in_shell"], "pid"))
    assert not _alive(pid), f"sleep {pid} outlived its trial"
    assert scratch_left(str(tmp_path)) == []
    shell = events["sleeps_in_shell"]
    assert [e.tool for e in shell if isinstance(e, T.ToolCall)] == ["Bash"]

    # budgets: the breach is in the trace, and the agent did nothing after it
    for name, field in (("tokens", "input_tokens"), ("cost", "cost_usd")):
        usage = [e for e in events[name] if isinstance(e, T.Usage)]
        assert len(usage) == 1 and getattr(usage[0], field) > 0
        assert not any(isinstance(e, T.ToolCall) for e in events[name])
        assert snapshot_text(run_dir, tasks[name], "never.txt") is None
    assert tasks["tokens"]["usage"]["input_tokens"] == 600
    assert tasks["cost"]["usage"]["cost_usd"] == pytest.approx(0.25)

    # max_turns: two turns, then the replay ended
    turns = [e.turn for e in events["turns"] if isinstance(e, T.TurnStart)]
    assert turns == [1, 2]
    assert tasks["turns"]["agent_outcome"]["reason"] == "max_turns"

    root = ET.parse(junit).getroot()
    assert root.get("tests") == "6" and root.get("errors") == "1"
    assert root.get("failures") == "5"


# -- exit codes ----------------------------------------------------------------------------
def test_a_compile_error_exits_2_and_runs_nothing(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "task_id: bad\ndescription: x\ninitial_prompt: go\n"
        "success_criteria:\n  - type: no_such_criterion\n")
    res = ce("run", str(tmp_path / "bad.yaml"), "--runs-root", str(tmp_path / "runs"),
             cwd=str(tmp_path))
    assert res.returncode == 2
    assert "nothing was run" in res.stderr
    assert not (tmp_path / "runs").exists()
    res = ce("run", cwd=str(tmp_path))  # no PATHS
    assert res.returncode == 2


def test_an_unsolved_task_exits_1(tmp_path):
    (tmp_path / "t.yaml").write_text(_task("t", "    - say: nothing to do\n"))
    res = ce("run", str(tmp_path / "t.yaml"), "--runs-root", str(tmp_path / "runs"),
             cwd=str(tmp_path))
    assert res.returncode == 1
    run_dir = run_dir_in(str(tmp_path / "runs"))
    (record,) = task_jsons(run_dir).values()
    assert record["status"] == "FAILURE"
    assert load_run_json(run_dir)["status"] == "complete"


# -- kill / interrupt, then resume ---------------------------------------------------------
SLOWISH = _task("slowish", "    - sleep: 0.4\n    - write: done.txt\n      content: ok\n",
                criterion="  - type: file_exists\n    description: d\n    path: done.txt\n")
REPEATS = 12


def _start_and_stop(tmp_path, sig: int, sigint_ignored: bool = False, extra=()
                    ) -> tuple[subprocess.Popen, str, str, str]:
    """Start 12 trials at -j 2, send `sig` once a few have finished; (proc, run dir, err,
    out).
    `sigint_ignored`: ce starts with SIGINT ignored, as a script's background job does.
    `extra`: more arguments of `ce run`."""
    (tmp_path / "slowish.yaml").write_text(SLOWISH)
    runs = tmp_path / "runs"
    proc = subprocess.Popen(  # a relative task path: --resume runs from elsewhere
        [CE, "run", "slowish.yaml", "--repeats", str(REPEATS), "-j", "2",
         "--runs-root", str(runs), *extra], cwd=str(tmp_path), env=env_for(str(tmp_path)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        if sigint_ignored else None)
    try:
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and proc.poll() is None:
            dirs = [d for d in runs.glob("*") if d.is_dir() and not d.is_symlink()]
            if dirs:
                done = len(list(dirs[0].glob("default/slowish/*/task.json")))
                if done >= 3:
                    break
            time.sleep(0.02)
        assert proc.poll() is None and done >= 3, "the run ended before it could be stopped"
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)  # as Ctrl-C: the whole foreground group
        else:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, run_dir_in(str(runs)), err, out


def _resume_and_check(tmp_path, run_dir: str, done_before: dict[str, dict]) -> None:
    began = load_run_json(run_dir)["created_at"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    time.sleep(1.1)  # a resume that took its own start time would say another second
    res = ce("run", "--resume", run_dir, cwd=str(elsewhere))
    assert res.returncode == 0, res.stderr
    assert f"{len(done_before)} already done" in res.stderr
    records = task_jsons(run_dir)  # asserts no trial id appears twice
    assert len(records) == REPEATS
    assert len(glob.glob(os.path.join(run_dir, "default", "slowish", "*", "task.json"))) \
        == REPEATS
    assert sorted(r["repeat"] for r in records.values()) == list(range(REPEATS))
    assert all(r["status"] == "SUCCESS" for r in records.values())
    for trial_id, before in done_before.items():  # finished trials were not run again
        assert records[trial_id]["started_at"] == before["started_at"]
        assert records[trial_id]["duration_s"] == before["duration_s"]
    for record in records.values():
        events_of(run_dir, record)
    meta = load_run_json(run_dir)
    assert meta["status"] == "complete" and meta["trials_planned"] == REPEATS
    assert meta["created_at"] == began  # the run began then, not at its resume


def test_a_killed_run_resumes_with_every_trial_exactly_once(tmp_path):
    proc, run_dir, _, _ = _start_and_stop(tmp_path, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    done_before = task_jsons(run_dir)
    assert 3 <= len(done_before) < REPEATS
    assert load_run_json(run_dir)["status"] == "running"  # nobody finished it
    _resume_and_check(tmp_path, run_dir, done_before)


def test_ctrl_c_stops_with_exit_1_and_resume_finishes(tmp_path):
    proc, run_dir, err, out = _start_and_stop(tmp_path, signal.SIGINT)
    check_interrupted_then_resumed(tmp_path, proc, run_dir, err, out)


def check_interrupted_then_resumed(tmp_path, proc, run_dir: str, err: str, out: str
                                   ) -> None:
    """An interrupted run: exit 1 with the resume command, some trials done, run.json
    "interrupted", report.md written, no scratch left; the resume finishes the rest."""
    assert proc.returncode == 1, err
    assert f"ce run --resume {run_dir}" in err
    # why it is no pass names the run too (run.json and report.md say RUN: it may move)
    assert f"`ce run --resume {run_dir}` runs the other" in out, out
    done_before = task_jsons(run_dir)
    assert 3 <= len(done_before) < REPEATS
    meta = load_run_json(run_dir)
    assert meta["status"] == "interrupted"
    assert meta["trials_planned"] == REPEATS
    assert meta["exit_code"] == 1  # as the process: the trials not run are no pass
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        assert "**INTERRUPTED**" in fh.read()
    assert scratch_left(str(tmp_path)) == []  # the running trials' workspaces were removed
    # re-scored as it is, the run is still one a Ctrl-C cut short: no pass either
    out = os.path.join(str(tmp_path), "rescored-interrupted")
    rescored = ce("rescore", run_dir, "--out", out, cwd=str(tmp_path))
    assert rescored.returncode == 1, rescored.stdout + rescored.stderr
    meta = load_run_json(out)
    assert (meta["status"], meta["trials_planned"], meta["exit_code"]) == \
        ("interrupted", REPEATS, 1)
    with open(os.path.join(out, "report.md"), encoding="utf-8") as fh:
        assert "**INTERRUPTED**" in fh.read()
    _resume_and_check(tmp_path, run_dir, done_before)


def test_a_stopped_runs_junit_has_each_trial_not_run_as_skipped(tmp_path):
    """SIGTERM (a CI job cancelled) after a few of 12 trials, `--junit-xml`: the file had
    the trials that ran and one run-level error, so a CI dashboard counted 4 tests where
    12 were planned. Each trial that did not run is now a skipped testcase of its
    variant's testsuite (the run-level error stays: the run is no pass); run.json keeps
    their ids, so `ce report -f junit` writes the same file; the resume's has none."""
    junit, sarif = tmp_path / "junit.xml", tmp_path / "ce.sarif"
    proc, run_dir, err, _ = _start_and_stop(tmp_path, signal.SIGTERM,
                                            extra=("--junit-xml", str(junit),
                                                   "--sarif", str(sarif)))
    assert proc.returncode == 1, err
    # the SARIF has the results of the trials that ran: it says the run did not finish
    # (SARIF 2.1.0's invocation; a consumer must not take them for the whole run's)
    [invocation] = json.loads(sarif.read_text())["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    [note] = invocation["toolExecutionNotifications"]
    assert note["level"] == "error" and note["message"]["text"].startswith(
        f"the run was interrupted: {len(task_jsons(run_dir))} of {REPEATS} planned trial(s) "
        "ran; `ce run --resume RUN` runs the other"), note
    ran = set(task_jsons(run_dir))
    planned = [f"default/slowish/{i:02d}" for i in range(REPEATS)]
    root = ET.parse(junit).getroot()
    suite = root.find("testsuite[@name='default']")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert sorted(cases) == planned  # every planned trial, run or not
    skipped = [n for n in planned if cases[n].find("skipped") is not None]
    assert skipped == [n for n in planned if n not in ran] and skipped
    # every testcase names the task file, run or not (the unrun ones had none)
    assert {c.get("file") for c in cases.values()} == {"slowish.yaml"}
    for name in skipped:
        assert cases[name].get("classname") == "slowish"
        assert cases[name].find("skipped").get("message") == (
            "not run: the run was interrupted (`ce run --resume RUN` runs it)")
    assert (suite.get("tests"), suite.get("skipped")) == (str(REPEATS), str(len(skipped)))
    assert (root.get("tests"), root.get("skipped"), root.get("errors")) == (
        str(REPEATS + 1), str(len(skipped)), "1")  # + the run-level error
    assert f"JUnit XML: {junit} ({REPEATS + 1} test(s), 1 error(s), {len(skipped)} " \
        "skipped)" in err
    assert load_run_json(run_dir)["unrun_trials"] == skipped
    assert load_run_json(run_dir)["unrun_task_files"] == {
        "default/slowish": os.path.abspath(tmp_path / "slowish.yaml")}
    again = ce("report", run_dir, "-f", "junit", cwd=str(tmp_path))
    assert again.returncode == 0 and again.stdout == junit.read_text(encoding="utf-8")
    resumed = ce("run", "--resume", run_dir, cwd=str(tmp_path))  # writes the run's JUnit
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(sarif.read_text())["runs"][0]["invocations"] == [
        {"executionSuccessful": True}]
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("skipped"), root.get("errors")) == (
        str(REPEATS), "0", "0")
    assert "unrun_trials" not in load_run_json(run_dir)
    assert "unrun_task_files" not in load_run_json(run_dir)


def test_ctrl_c_during_grading_does_not_wait_for_a_slow_criterion(tmp_path):
    pid_file = tmp_path / "grader.pid"
    (tmp_path / "slow_grading.yaml").write_text(_task(
        "slow_grading", "    - say: nothing to do\n",
        criterion=f"  - type: run_command\n    description: d\n    command: 'echo $$ > {pid_file}; exec sleep 30'\n"
                  "    timeout: 60\n"))
    proc = subprocess.Popen(
        [CE, "run", str(tmp_path / "slow_grading.yaml"), "--runs-root", str(tmp_path / "runs")],
        cwd=str(tmp_path), env=env_for(str(tmp_path)), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None, "grading never began"
            time.sleep(0.02)
        pid = int(pid_file.read_text())
        interrupted = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        waited = time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    assert waited < 10, f"ce took {waited:.1f} s to stop"  # not the criterion's 30 s
    assert not _alive(pid), "the criterion's command outlived the run"
    run_dir = run_dir_in(str(tmp_path / "runs"))
    assert load_run_json(run_dir)["status"] == "interrupted"
    assert task_jsons(run_dir) == {}
    assert scratch_left(str(tmp_path)) == []


JUDGED = """
task_id: judged_small
description: an llm_judge graded by scripted verdicts
initial_prompt: Write answer.txt.
agent:
  type: script
  script:
    - write: answer.txt
      content: "42"
sandbox: {python: null}
success_criteria:
  - type: llm_judge
    description: the answer is right
    prompt: Is answer.txt the answer to everything?
    files: [answer.txt]
"""
REPLIES = """
judge:
  - match: "answer to everything"
    score: 0.9
    rationale: it is 42
  - score: 0.0
"""


def test_resume_from_elsewhere_remembers_the_paths_and_the_judge_replies(tmp_path):
    (tmp_path / "judged_small.yaml").write_text(JUDGED)
    (tmp_path / "replies.yaml").write_text(REPLIES)
    res = ce("run", "judged_small.yaml", "--repeats", "2", "--judge-replies", "replies.yaml",
             "--runs-root", "runs", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    records = task_jsons(run_dir)
    assert [c["score"] for r in records.values() for c in r["criteria"]] == [0.9, 0.9]
    os.unlink(os.path.join(run_dir, "default", "judged_small", "01", "task.json"))

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = ce("run", "--resume", run_dir, cwd=str(elsewhere))  # no --judge-replies
    assert res.returncode == 0, res.stderr
    assert "1 already done" in res.stderr
    records = task_jsons(run_dir)
    assert sorted(r["repeat"] for r in records.values()) == [0, 1]
    assert all(r["status"] == "SUCCESS" and r["criteria"][0]["score"] == 0.9
               for r in records.values())
    assert load_run_json(run_dir)["status"] == "complete"
