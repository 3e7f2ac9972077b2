"""Scores that reproduce: re-scoring an archived run changes nothing and is bit-identical,
in the trial's own environment, with the definitions and judge verdicts the run kept;
where a re-grade does differ, rescore and explain say so with both results."""

from __future__ import annotations

import filecmp
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = os.path.join(ROOT, "tasks")
CE = os.path.join(os.path.dirname(sys.executable), "ce")
ENV = {**os.environ, "CE_PLAIN": "1"}
for _var in ("CE_JUDGE_URL", "CE_JUDGE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
    ENV.pop(_var, None)  # no judge is reachable: recorded verdicts must do


def ce(*args: str, cwd, env=None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([CE, *args], cwd=cwd, env=env or ENV, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def records(run_dir) -> dict[str, dict]:
    out = {}
    for root, _, files in os.walk(run_dir):
        if "task.json" in files:
            with open(os.path.join(root, "task.json"), encoding="utf-8") as fh:
                rec = json.load(fh)
            out[rec["trial_id"]] = rec
    return out


def same_tree(a: str, b: str, ignore=()) -> list[str]:
    """Files that differ (or exist on one side only) between two directory trees."""
    cmp = filecmp.dircmp(a, b, ignore=list(ignore))
    out = [os.path.join(a, f) for f in cmp.left_only + cmp.right_only + cmp.funny_files]
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    out += [os.path.join(a, f) for f in mismatch + errors]
    for sub in cmp.common_dirs:
        out += same_tree(os.path.join(a, sub), os.path.join(b, sub), ignore)
    return out


def evidence_of(run_dir, trial_id: str) -> dict[str, list[dict]]:
    with open(os.path.join(run_dir, trial_id, "evidence.json"), encoding="utf-8") as fh:
        return json.load(fh)["criteria"]


def outcome(evidence: dict[str, list[dict]]) -> dict[str, list[tuple]]:
    """What decides a score in the evidence: each command's exit, each judge's verdict
    (a command's own output may differ run to run: pytest prints its timing)."""
    return {cid: [(e["kind"], e.get("command"), e.get("exit_code"), e.get("request"),
                   e.get("score"), e.get("rationale")) for e in items]
            for cid, items in evidence.items()}


def readme_main_command() -> list[str]:
    """The `ce run ...` of the README's first command, as a new user runs it."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        first = re.search(r"```bash\n(.*?)\n```", fh.read(), re.S).group(1)
    run = first.split("&&")[-1].strip()
    argv = shlex.split(run)
    assert argv[0].endswith("/ce") and argv[1] == "run", run
    return argv[1:]


@pytest.mark.slow
def test_rescore_after_the_readme_main_command_changes_nothing_and_is_bit_identical(
        tmp_path):
    shutil.copytree(TASKS, tmp_path / "tasks")
    res = ce(*readme_main_command(), cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    recorded = records(tmp_path / "runs" / "latest")
    assert len(recorded) >= 10
    assert os.listdir(tmp_path / "runs" / "latest" / "judges")  # the judge's verdict kept

    first = ce("rescore", "runs/latest", "--out", "a", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"{len(recorded)} trial(s) re-scored, 0 changed" in first.stdout
    assert "0 asked" in first.stdout  # no judge is reachable: its verdict was reused
    for trial_id, rec in records(tmp_path / "a").items():
        before = recorded[trial_id]
        assert (rec["status"], rec["weighted_score"]) == \
            (before["status"], before["weighted_score"]), trial_id
        assert rec["criteria"] == before["criteria"], trial_id
        assert outcome(evidence_of(tmp_path / "a", trial_id)) == \
            outcome(evidence_of(tmp_path / "runs" / "latest", trial_id)), trial_id
        assert rec["plan_hash"] == before["plan_hash"]

    second = ce("rescore", "runs/latest", "--out", "b", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    # bit-identical: every trial record, the parquet tables, the plans, definitions and
    # verdicts; run.json, report.md and report.html differ only in the run's name (the
    # directory), evidence.json only in what the commands printed
    assert same_tree(str(tmp_path / "a"), str(tmp_path / "b"),
                     ignore=["run.json", "report.md", "report.html", "evidence.json"]) == []
    html_a, html_b = ((tmp_path / d / "report.html").read_text() for d in "ab")
    # each trial's details too (the page was made while the trials were still being
    # written: 'the trial directory is missing', at random)
    assert '"notes":["the trial directory is missing' not in html_a + html_b
    assert html_a.count('"dir":"default/') == html_b.count('"dir":"default/') == len(recorded)
    for trial_id in recorded:
        assert outcome(evidence_of(tmp_path / "a", trial_id)) == \
            outcome(evidence_of(tmp_path / "b", trial_id))
    a, b = (json.loads((tmp_path / d / "run.json").read_text()) for d in "ab")
    assert {**a, "run_id": None} == {**b, "run_id": None}

    # a rescored trial explains on its own, with the recorded verdict, no judge asked
    exp = ce("explain", "a/default/judged/00", cwd=tmp_path)
    assert exp.returncode == 0, exp.stderr
    assert "recorded verdict" in exp.stdout and "rationale: " in exp.stdout
    assert "differs" not in exp.stdout


@pytest.mark.slow
def test_judge_verdicts_are_reused_refreshed_or_offline(tmp_path):
    shutil.copy(os.path.join(TASKS, "judged.yaml"), tmp_path)
    shutil.copytree(os.path.join(TASKS, "reference"), tmp_path / "reference")
    replies = os.path.join(TASKS, "judged.replies.yaml")
    res = ce("run", "judged.yaml", "--agent", "oracle", "--judge-replies", replies,
             "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    evidence = evidence_of(tmp_path / "runs" / "latest", "default/judged/00")
    [ev] = [e for items in evidence.values() for e in items if e["kind"] == "judge"]
    assert ev["score"] == 1.0 and ev["rationale"] and ev["recorded"] is False
    verdict_files = os.listdir(tmp_path / "runs" / "latest" / "judges")
    assert verdict_files == [f"{ev['request']}.json"]
    [cmd] = [e for items in evidence.values() for e in items if e["kind"] == "command"]
    assert cmd["exit_code"] == 0 and "slugify" in cmd["command"]

    # the trial directory alone; no judge reachable: the recorded verdict is used
    one = ce("rescore", "runs/latest/default/judged/00", "--out", "one", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert "1 trial(s) re-scored, 0 changed; judges: 1 recorded verdict(s) reused, 0 asked" \
        in one.stdout
    [ev2] = [e for items in evidence_of(tmp_path / "one", "default/judged/00").values()
             for e in items if e["kind"] == "judge"]
    assert ev2["recorded"] is True and ev2["request"] == ev["request"]

    # --refresh-judges asks again: with no judge configured it is refused before
    # anything is graded (as `ce run` refuses it), naming the criterion; nothing written
    fresh = ce("rescore", "runs/latest", "--refresh-judges", "--out", "fresh", cwd=tmp_path)
    assert fresh.returncode == 2, fresh.stdout + fresh.stderr
    assert "criterion c1 llm_judge of default/judged" in fresh.stderr
    assert "no judge is configured" in fresh.stderr and not (tmp_path / "fresh").exists()
    # ... and with the scripted judge it asks it (and the verdict is the same)
    fresh = ce("rescore", "runs/latest", "--refresh-judges", "--judge-replies", replies,
               "--out", "fresh2", cwd=tmp_path)
    assert fresh.returncode == 0 and "0 recorded verdict(s) reused, 1 asked" in fresh.stdout

    # a changed rubric is a new request: offline, it is the criterion's error
    (tmp_path / "judged2.yaml").write_text((tmp_path / "judged.yaml").read_text().replace(
        "with a docstring and type hints\n", "with a docstring\n"))
    off = ce("rescore", "runs/latest", "judged2.yaml", "--offline", "--out", "off",
             cwd=tmp_path)
    assert off.returncode == 1, off.stderr
    changed = next(iter(records(tmp_path / "off").values()))
    judge = next(c for c in changed["criteria"] if c["type"] == "llm_judge")
    assert "no recorded verdict" in judge["error"] and judge["score"] == 0.0
    assert "llm_judge: recorded 1 pass, now 0 error" in off.stdout

    # explain never needs the judge to explain a recorded verdict
    exp = ce("explain", "runs/latest/default/judged/00", cwd=tmp_path)
    assert exp.returncode == 0, exp.stderr
    assert f"recorded verdict judges/{ev['request']}.json" in exp.stdout


HERMETIC = """\
task_id: hermetic
description: criteria that only pass in the trial's own environment
initial_prompt: write hello.py
agent:
  type: script
  script:
    - write: hello.py
      content: print("hi")
sandbox:
  python: {env_packages: [pytest]}
  env: {CE_MARK: from-the-task}
success_criteria:
  - type: run_command
    command: >-
      python -c "import os, sys, pytest;
      assert os.path.realpath(sys.prefix) == os.path.realpath('.venv'), sys.prefix"
    description: the workspace venv's python, with its packages
  - type: run_command
    command: test "$CE_MARK" = from-the-task
    description: the task's environment variables
  - type: run_command
    command: test ! -e MARKER
    description: a criterion the test makes flip after the run
"""


@pytest.mark.slow
def test_regrading_runs_commands_in_the_trials_own_environment(tmp_path):
    (tmp_path / "t.yaml").write_text(HERMETIC.replace("MARKER", str(tmp_path / "marker")))
    res = ce("run", "t.yaml", "--runs-root", "runs", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    same = ce("rescore", "runs/latest", "--out", "same", cwd=tmp_path)
    assert same.returncode == 0 and "1 trial(s) re-scored, 0 changed" in same.stdout
    exp = ce("explain", "runs/latest/default/hermetic/00", cwd=tmp_path)
    assert exp.returncode == 0 and "differs" not in exp.stdout, exp.stdout + exp.stderr

    # the world changed since the run: both commands say so, with both results
    (tmp_path / "marker").write_text("")
    moved = ce("rescore", "runs/latest", "--out", "moved", cwd=tmp_path)
    assert moved.returncode == 1
    assert "* default/hermetic/00" in moved.stdout
    assert "c2 run_command: recorded 1 pass, now 0 fail" in moved.stdout
    exp = ce("explain", "runs/latest/default/hermetic/00", cwd=tmp_path)
    assert exp.returncode == 1
    assert "NOTE: this re-grade differs from the recorded grade (recorded SUCCESS 1, now " \
           "FAILURE 0.6667)" in exp.stdout
    assert "c2 run_command: recorded 1 pass, now 0 fail" in exp.stdout


def _source_copy(dest) -> str:
    """A checkout of ce whose standard criteria can be edited (PYTHONPATH puts it first)."""
    for name in ("ce_lang", "ce_runtime", "ce_agents", "grammar", "stdlib_criteria"):
        shutil.copytree(os.path.join(ROOT, name), dest / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    return str(dest)


@pytest.mark.slow
def test_an_edited_standard_criterion_is_a_new_plan_and_old_runs_keep_theirs(tmp_path):
    task = ("task_id: t\ndescription: d\ninitial_prompt: p\nagent:\n  type: script\n"
            "  script:\n    - write: a.txt\n      content: x\nsandbox: {python: null}\n"
            "success_criteria:\n  - {type: file_exists, path: a.txt, description: d}\n")
    (tmp_path / "t.yaml").write_text(task)
    src = _source_copy(tmp_path / "src")
    edited = {**ENV, "PYTHONPATH": src}

    def plan_hash(env) -> str:
        shutil.rmtree(tmp_path / "emit", ignore_errors=True)
        res = ce("compile", "t.yaml", "--emit", "emit", cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
        trials = json.loads((tmp_path / "emit" / "trials.json").read_text())["trials"]
        return trials[0]["plan_hash"]

    assert plan_hash(edited) == plan_hash(ENV)  # the copy is the same ce
    files_ce = tmp_path / "src" / "stdlib_criteria" / "files.ce"
    text = files_ce.read_text()
    files_ce.write_text(text.replace("score = if path_exists(path) then 1.0 else 0.0",
                                     "score = if path_exists(path) then 0.0 else 1.0", 1))
    assert files_ce.read_text() != text
    assert plan_hash(edited) != plan_hash(ENV)

    # a run made before the edit is re-scored with the definitions it ran with ...
    assert ce("run", "t.yaml", "--runs-root", "runs", cwd=tmp_path).returncode == 0
    own = ce("rescore", "runs/latest", "--out", "own", cwd=tmp_path, env=edited)
    assert own.returncode == 0 and "0 changed" in own.stdout, own.stderr
    # ... unless asked for today's, a plan of its own
    today = ce("rescore", "runs/latest", "--today", "--out", "today", cwd=tmp_path,
               env=edited)
    assert today.returncode == 1 and "1 changed" in today.stdout, today.stderr
    rec = next(iter(records(tmp_path / "today").values()))
    assert rec["plan_hash"] != rec["previous"]["plan_hash"]
    assert os.path.isfile(tmp_path / "today" / "plans" / f"{rec['plan_hash']}.json")
    exp = ce("explain", "today/default/t/00", cwd=tmp_path, env=edited)
    assert exp.returncode == 1 and "FAIL" in exp.stdout
