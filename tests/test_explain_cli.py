"""`ce explain` of a run's trials: `--criterion` selects in every mode and format, `-f
json` carries the evidence and the evaluation tree the text shows and the trial's status,
and an ERROR trial says why (its recorded error, or how the agent ended)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from ce_runtime.grade.explain import tree_lines

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: {task_id}
description: a scripted agent writes a.txt, then {how}
initial_prompt: write a.txt
agent:
  type: script
  script:
    - {{write: a.txt, content: "hi\\n"}}
    - {last}
sandbox: {{driver: tempdir, python: null}}
{extra}
success_criteria:
  - {{type: file_exists, path: a.txt, description: wrote a.txt}}
  - {{type: file_contains, path: a.txt, includes: [hi, bye], description: says hi and bye}}
  - {{type: run_command, command: cat a.txt, expected_stdout: hi, description: cat says hi}}
"""

TASKS = {
    "fine": dict(how="says so", last="{say: done}", extra=""),
    "crashed": dict(how="crashes", last="{fail: the model API went away}", extra=""),
    "unseeded": dict(how="never runs", last="{say: done}",
                     extra="pre_run:\n  - {command: 'echo no seed >&2; exit 3'}"),
}
TRIAL = "run/default/{}/00"


def ce(*args, cwd):
    """`ce run` in its own process (it installs signal handlers, forks sandboxes)."""
    env = {**os.environ, "CE_PLAIN": "1"}
    return subprocess.run([*CE, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def explain(*args, cwd):
    """`ce explain ARGS` in this process, from `cwd`: .returncode, .stdout, .stderr."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        res = CliRunner().invoke(main, ["explain", *map(str, args)])
    finally:
        os.chdir(old)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return SimpleNamespace(returncode=res.exit_code, stdout=res.stdout, stderr=res.stderr)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("explain-run")
    for task_id, parts in TASKS.items():
        (root / f"{task_id}.yaml").write_text(TASK.format(task_id=task_id, **parts))
    made = ce("run", *(f"{t}.yaml" for t in TASKS), "--run-dir", "run", cwd=root)
    assert made.returncode == 1, made.stdout + made.stderr
    records = {t: json.loads((root / TRIAL.format(t) / "task.json").read_text())
               for t in TASKS}
    assert {t: r["status"] for t, r in records.items()} == \
        {"fine": "FAILURE", "crashed": "ERROR", "unseeded": "ERROR"}
    assert records["crashed"]["error"] is None and records["crashed"]["criteria"]
    return root


def _modes(root):
    """(name, ce explain arguments) for each way of naming a trial or a task."""
    ws = root / "ws"
    if not ws.exists():
        ws.mkdir()
        (ws / "a.txt").write_text("hi\n")
    return [("trial directory", [TRIAL.format("fine")]),
            ("run", ["run", "--trial", "default/fine"]),
            ("plan", ["fine.yaml"]),
            ("workspace", ["fine.yaml", "--workspace", ws])]


def test_a_directory_of_a_runs_trials_names_them(run):
    """VARIANT/TASK (or a dataset's VARIANT/TASK/ROW) is where a run's trials sit: one
    trial is explained, several are named with --trial picking among them; it said "not
    a run directory (no run.json) nor a directory of runs"."""
    one = explain("run/default/fine", cwd=run)
    assert one.returncode == 1 and "trial default/fine/00" in one.stdout, one.stderr
    many = explain("run/default", cwd=run)
    assert many.returncode == 2
    assert "run/default holds 3 trials of the run " in many.stderr
    assert "name one with --trial (a unique prefix): crashed/00, fine/00, unseeded/00" \
        in many.stderr, many.stderr
    picked = explain("run/default", "--trial", "fi", cwd=run)
    assert "trial default/fine/00" in picked.stdout, picked.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_criterion_selects_one_in_every_mode(run, fmt):
    for mode, args in _modes(run):
        res = explain(*args, "--criterion", "c1", "-f", fmt, cwd=run)
        assert res.returncode in (0, 1), (mode, res.stderr)
        if fmt == "json":
            ids = [c["id"] for c in json.loads(res.stdout)["criteria"]]
            assert ids == ["c1"], (mode, ids)
        else:
            shown = [line.split()[0] for line in res.stdout.splitlines()
                     if line[:1] == "c" and line.split()[0][1:].isdigit()]
            assert shown == ["c1"], (mode, res.stdout)
            assert "weighted score =" not in res.stdout and "score: " not in res.stdout
        # by type and by index too
        by_type = explain(*args, "--criterion", "run_command", "-f", fmt, cwd=run)
        assert "c2" in by_type.stdout and "c1 " not in by_type.stdout, (mode, by_type.stdout)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_unknown_criterion_is_an_error_in_every_mode(run, fmt):
    for mode, args in _modes(run):
        res = explain(*args, "--criterion", "c7", "-f", fmt, cwd=run)
        assert res.returncode == 2, (mode, res.stdout, res.stderr)
        assert res.stdout == "", mode
        assert "no criterion 'c7'" in res.stderr, (mode, res.stderr)
        assert "c0 (file_exists), c1 (file_contains), c2 (run_command)" in res.stderr, mode


def test_json_has_the_text_evidence_and_tree_and_the_status(run):
    where = TRIAL.format("fine")
    data = json.loads(explain(where, "-f", "json", cwd=run).stdout)
    assert (data["status"], data["error"], data["success"]) == ("FAILURE", None, False)
    assert data["weighted_score"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert data["recorded"]["status"] == "FAILURE" and not data["recorded"]["status_kept"]
    for c in data["criteria"]:
        text = explain(where, "--criterion", c["id"], cwd=run).stdout.splitlines()
        body = text[text.index(next(x for x in text if x.startswith(c["id"] + " "))) + 2:]
        evidence = [x.removeprefix("    evidence: ") for x in body
                    if x.startswith("    evidence: ")]
        assert c["evidence"] == evidence and evidence, c["id"]
        assert tree_lines(c["tree"], 1) == body[len(evidence):], c["id"]
        assert c["judges"] == []
    c1 = data["criteria"][1]
    assert "includes 1/2: 'hi' found at a.txt:1:1; 'bye' not found" in c1["evidence"]


def test_an_agent_error_says_why_and_stays_error(run):
    """The agent ended in an error after writing a.txt: the run graded its criteria (all
    but one pass), but the trial is ERROR, and explain said neither why nor ERROR: it
    printed '-> FAILURE' (exit 1 by luck of a failing criterion) with no reason."""
    where = TRIAL.format("crashed")
    res = explain(where, cwd=run)
    assert res.returncode == 1, res.stderr
    reason = "the agent ended in an error: the model API went away"
    assert f"NOTE: {reason}: the trial stays ERROR" in res.stdout, res.stdout
    assert res.stdout.rstrip().splitlines()[-1] == \
        "trial -> ERROR (kept: the agent ended in an error)"
    data = json.loads(explain(where, "-f", "json", cwd=run).stdout)
    assert (data["status"], data["error"]) == ("ERROR", reason)
    assert data["recorded"]["status_kept"] is True and data["recorded"]["differences"] == []
    assert [c["passed"] for c in data["criteria"]] == [True, False, True]


def test_an_error_before_grading_says_why(run):
    where = TRIAL.format("unseeded")
    reason = "pre_run command failed: 'echo no seed >&2; exit 3' (exit 3)"
    res = explain(where, cwd=run)
    assert res.returncode == 1 and f"never reached grading ({reason})" in res.stdout
    data = json.loads(explain(where, "-f", "json", "--criterion", "c0", cwd=run).stdout)
    assert (data["status"], data["error"]) == ("ERROR", reason)
    assert data["recorded"]["status_kept"] is True
    assert [c["id"] for c in data["criteria"]] == ["c0"]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_trial_that_cannot_be_graded_again_says_what_was_recorded(run, monkeypatch, fmt):
    """A trial whose environment cannot be rebuilt here (its set-up failed in the run, a
    package that is not on this machine): explain ended in 'internal error
    (InfrastructureError ...); this is a bug in ce', saying nothing of the trial."""
    from ce_runtime.grade import grading
    from ce_runtime.grade.host import InfrastructureError

    def cannot(*args, **kwargs):
        raise InfrastructureError("rebuilding the trial's environment: no such package")

    monkeypatch.setattr(grading, "grade_files", cannot)
    res = explain(TRIAL.format("unseeded"), "-f", fmt, cwd=run)
    assert res.returncode == 1
    assert "cannot grade the archived trial again here: rebuilding the trial's " \
           "environment: no such package" in res.stderr, res.stderr
    reason = "pre_run command failed: 'echo no seed >&2; exit 3' (exit 3)"
    if fmt == "text":
        assert res.stdout == ("trial default/unseeded/00 (recorded status ERROR, weighted "
                              f"score -); not re-graded\nerror: {reason}\n")
    else:
        data = json.loads(res.stdout)
        assert (data["status"], data["error"], data["criteria"]) == ("ERROR", reason, [])
        assert data["regrade_error"].startswith("rebuilding the trial's environment")


def test_a_differing_regrade_of_an_agent_error_says_it_stays_error(tmp_path):
    """Where the re-grade differs from the record, the NOTE named the grade's verdict as
    the trial's ('now SUCCESS') though the trial stays ERROR."""
    flag = tmp_path / "flag"
    flag.write_text("up\n")
    (tmp_path / "t.yaml").write_text(TASK.format(
        task_id="flaky", how="crashes", last="{fail: gone}", extra="").replace(
        "cat a.txt, expected_stdout: hi", f"cat {flag}, expected_stdout: up"))
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 1
    flag.unlink()
    res = explain(TRIAL.format("flaky"), cwd=tmp_path)
    assert "differs from the recorded grade (recorded ERROR 0.8333, now ERROR 0.5)" \
        in res.stdout, res.stdout
    assert res.returncode == 1


def test_a_differing_regrade_shows_the_command_result_the_run_recorded(tmp_path):
    """A criterion's command that answers otherwise today: the NOTE said `recorded 1
    pass, now 0 fail` and the evidence showed only today's result; what the command gave
    in the run (evidence.json) was nowhere, and with it why the scores differ."""
    flag = tmp_path / "flag"
    flag.write_text("up\n")
    (tmp_path / "t.yaml").write_text(TASK.format(
        task_id="flaky", how="says so", last="{say: done}", extra="").replace(
        "cat a.txt, expected_stdout: hi", f"cat {flag}, expected_stdout: up"))
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 1
    flag.unlink()
    res = explain(TRIAL.format("flaky"), cwd=tmp_path)
    lines = res.stdout.splitlines()
    note = lines.index("  c2 run_command: recorded 1 pass, now 0 fail")
    assert lines[note + 1].startswith(f"  c2 $ cat {flag}: the run's exit 0; stdout: 'up'; "
                                      f"now exit 1; stderr: 'cat: ")  # (its first 60)
    flag.write_text("up\n")  # the same result again: no difference, nothing said
    same = explain(TRIAL.format("flaky"), cwd=tmp_path)
    assert "NOTE" not in same.stdout and "the run's" not in same.stdout, same.stdout


def test_rescore_keeps_an_agent_error_as_explain_does(run, tmp_path):
    """The run ranks the agent's own error above the grade (ERROR, its criteria graded
    what it left); rescore turned it into FAILURE (or SUCCESS): it stays ERROR, with its
    criteria re-graded, as explain says."""
    out = tmp_path / "re"
    res = ce("rescore", "run", "--out", out, cwd=run)
    assert res.returncode == 1, res.stdout + res.stderr
    # and says why, as `ce run` does (it said only `N of M trial(s) did not succeed`)
    assert "ERROR in 1 trial(s) (default/crashed/00): the agent ended in an error: the " \
        "model API went away" in res.stdout.splitlines(), res.stdout
    rescored = json.loads((out / "default" / "crashed" / "00" / "task.json").read_text())
    assert rescored["status"] == "ERROR" and rescored["criteria"]
    assert rescored["weighted_score"] is not None
    said = explain(TRIAL.format("crashed"), "-f", "json", cwd=run)
    assert json.loads(said.stdout)["status"] == rescored["status"]
    unseeded = json.loads((out / "default" / "unseeded" / "00" / "task.json").read_text())
    assert unseeded["status"] == "ERROR" and unseeded["criteria"] == []
    fine = json.loads((out / "default" / "fine" / "00" / "task.json").read_text())
    assert fine["status"] == "FAILURE"


def test_explain_with_a_workspace_never_changes_it(tmp_path):
    """`ce explain TASK --workspace WS` ran the criteria's commands in WS itself: a
    command that writes or deletes (a build, a clean-up) changed the user's files."""
    (tmp_path / "t.yaml").write_text(
        "task_id: w\ndescription: a command that rewrites the workspace\n"
        "initial_prompt: go\nsuccess_criteria:\n"
        "  - {type: run_command, command: 'rm a.txt && echo made > new.txt', description: w}\n"
        "  - {type: file_exists, path: new.txt, description: the command's file}\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hi\n")
    res = explain("t.yaml", "--workspace", ws, "-f", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert [c["score"] for c in json.loads(res.stdout)["criteria"]] == [1.0, 1.0]
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]
    assert (ws / "a.txt").read_text() == "hi\n"


def test_a_failed_threshold_is_printed_with_the_digits_that_tell_it_apart(tmp_path):
    """2/3 against a 0.6667 threshold printed `0.667 < 0.667`: a correct FAIL that read as
    a bug. As many digits as tell them apart are printed."""
    (tmp_path / "t.yaml").write_text(
        "task_id: thr\ndescription: a score just under its threshold\ninitial_prompt: go\n"
        "success_criteria:\n"
        "  - {type: file_contains, path: a.txt, includes: [a, b, c], pass_threshold: 0.6667,"
        " description: two of three}\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a b\n")
    res = explain("t.yaml", "--workspace", ws, cwd=tmp_path)
    assert "score 0.66667 (fraction) vs pass threshold 0.6667 -> FAIL" in res.stdout
    assert "c0 0.66667 < 0.6667 -> FAILURE" in res.stdout, res.stdout


def test_every_assertion_that_failed_is_in_the_evidence(tmp_path):
    """The evidence listed the first 8 of a criterion's items, then `and N more`: with 12
    json assertions, the two that failed (the last ones) were never shown."""
    asserts = "".join(f"      - {{expression: n, operator: gte, expected: {k}}}\n"
                      for k in range(10))
    asserts += "      - {expression: n, operator: lt, expected: 3}\n"
    asserts += "      - {expression: missing, operator: exists}\n"
    (tmp_path / "t.yaml").write_text(
        "task_id: many\ndescription: many assertions\ninitial_prompt: go\n"
        "success_criteria:\n  - type: json_check\n    path: d.json\n"
        "    description: a dozen\n    assertions:\n" + asserts)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "d.json").write_text('{"n": 30}')
    res = explain("t.yaml", "--workspace", ws, "-f", "json", cwd=tmp_path)
    [line] = [e for e in json.loads(res.stdout)["criteria"][0]["evidence"]
              if e.startswith("assertions")]
    assert line.startswith("assertions 10/12: ")
    assert "n lt 3 (got 30): no" in line and "missing exists" in line
    assert line.endswith("; and 4 more, all yes")


@pytest.mark.parametrize("method, shown", [
    ("ast", "AST node types: agent "),
    ("token", "token types: agent "),
    ("complexity", "complexity (cyclomatic, lines, blocks): agent 1, 2, 1; reference 2, 4, 1:"),
])
def test_reference_comparison_says_how_its_similarity_came_about(tmp_path, method, shown):
    """Explain showed `similarity(...) = 0.58` and nothing of the counts behind it."""
    (tmp_path / "t.yaml").write_text(
        "task_id: rc\ndescription: compared with the reference\ninitial_prompt: go\n"
        "reference: {file: ref.py}\nsuccess_criteria:\n"
        f"  - {{type: reference_comparison, agent_file: a.py, comparison_method: {method},"
        " description: close}\n")
    (tmp_path / "ref.py").write_text("def f(x):\n    if x:\n        return 1\n    return 2\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def f(x):\n    return 1\n")
    res = explain("t.yaml", "--workspace", ws, "-f", "json", cwd=tmp_path)
    [criterion] = json.loads(res.stdout)["criteria"]
    [line] = [e for e in criterion["evidence"] if e.startswith(shown.split(":")[0])]
    assert line.startswith(shown), line
    assert line.endswith(f"= {criterion['score']:.4g}")


def test_a_score_at_its_threshold_up_to_float_rounding_passes_and_says_so(tmp_path):
    """file_check's (1 + 1 + 2/5) / 3 is 0.7999999999999999: exactly 0.8, it meets
    `pass_threshold: 0.8` (SEMANTICS_VERSION 5; it failed as '0.80 < 0.80'), and explain
    says why a score printed below the threshold passes."""
    (tmp_path / "t.yaml").write_text(
        "task_id: thr\ndescription: a score at its threshold\ninitial_prompt: x\n"
        "agent: {type: script, script: [{run: \"printf 'def main():\\\\n    return 0\\\\n'"
        " > main.py\"}]}\nsandbox: {driver: tempdir, python: null}\nsuccess_criteria:\n"
        "  - type: file_check\n    path: main.py\n    includes: ['def main']\n"
        "    excludes: [TODO]\n    patterns: [{pattern: 'def main'}, {pattern: 'return 0'},"
        " {pattern: N1}, {pattern: N2}, {pattern: N3}]\n    pass_threshold: 0.8\n"
        "    description: exactly 0.8\n")
    res = ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = explain("run/default/thr/00", cwd=tmp_path)
    assert "score 0.7999999999999999 (fraction) vs pass threshold 0.8 -> PASS; weight 1; " \
        "meets the threshold within 1e-9 (float rounding of an exact score)" in out.stdout, \
        out.stdout


def test_a_dataset_rows_compared_arguments_are_shown_with_their_values(tmp_path):
    """skill_triggered's `positive = expected_skill == skill_name = false` said nothing of
    why: a row's expected_skill (here a typo) is what explain is opened to find."""
    (tmp_path / "t.yaml").write_text("""\
task_id: trig
description: does the skill fire
dataset:
  rows:
    - {id: typo, expected_skill: date_teller}
initial_prompt: what day is it
agent:
  type: script
  script: [{tool: Skill, params: {skill: date-teller}}]
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: skill_triggered, skill_name: date-teller, expected_skill: "${row.expected_skill}",
     description: fires on date questions}
""")
    made = ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path)
    assert made.returncode == 1, made.stdout + made.stderr
    res = explain("run/default/trig/typo/00", cwd=tmp_path)
    lines = res.stdout.splitlines()
    at = lines.index("        positive = expected_skill == skill_name")
    assert lines[at + 1:at + 4] == ["            = false",
                                    "                expected_skill = 'date_teller'",
                                    "                skill_name = 'date-teller'"], res.stdout
