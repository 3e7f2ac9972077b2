"""`ce run --resume` runs with the options the run was started with, through the real CLI
on a small agentless task: -j (unless given again: a given -j wins and is what run.json
records from then on), and the JUnit XML and SARIF files it was asked to write.

Each run finishes; deleting trials' task.json makes them unfinished, as an interrupted
run leaves them, so no test waits for a moment to stop a run.
"""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET

import pytest

from tests.test_run_e2e import ce, load_run_json, run_dir_in, task_jsons

pytestmark = pytest.mark.slow

AGENTLESS = """\
task_id: agentless
description: no agent; the file the template provides is there
agent: {type: none}
sandbox:
  driver: tempdir
  python: null
  template_sources:
    - {type: starter_files, files: [{path: a.txt, content: hi}]}
success_criteria:
  - type: file_exists
    description: a.txt is there
    path: a.txt
"""
REPEATS = 3


def start(tmp_path, *args: str) -> str:
    """A finished run of REPEATS trials started with `args`; its run directory."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    res = ce("run", "agentless.yaml", "--repeats", str(REPEATS), "--runs-root", "runs",
             *args, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    return run_dir_in(str(tmp_path / "runs"))


def unfinish(run_dir: str, *repeats: int) -> None:
    """Trials as an interrupted run leaves them: no task.json."""
    for n in repeats:
        os.unlink(os.path.join(run_dir, "default", "agentless", f"{n:02d}", "task.json"))


def resume(tmp_path, run_dir: str, *args: str):
    """`ce run --resume RUN_DIR ARGS` from another directory; it finishes every trial."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    res = ce("run", "--resume", run_dir, *args, cwd=str(elsewhere))
    assert res.returncode == 0, res.stderr
    records = task_jsons(run_dir)
    assert sorted(r["repeat"] for r in records.values()) == list(range(REPEATS))
    assert all(r["status"] == "SUCCESS" for r in records.values())
    assert load_run_json(run_dir)["status"] == "complete"
    return res


def test_a_resume_runs_with_the_runs_jobs(tmp_path):
    run_dir = start(tmp_path, "-j", "2")
    assert load_run_json(run_dir)["args"]["jobs"] == 2
    unfinish(run_dir, 0, 2)
    res = resume(tmp_path, run_dir)  # no -j
    assert f"run {run_dir}: {REPEATS} trial(s), 1 already done, -j 2 (the run's)" \
        in res.stderr
    assert load_run_json(run_dir)["args"]["jobs"] == 2


def test_a_given_jobs_wins_and_is_recorded_for_the_next_resume(tmp_path):
    run_dir = start(tmp_path, "-j", "2")
    unfinish(run_dir, 1)
    res = resume(tmp_path, run_dir, "-j", "3")
    assert f"run {run_dir}: {REPEATS} trial(s), 2 already done, -j 3\n" in res.stderr
    assert load_run_json(run_dir)["args"]["jobs"] == 3
    unfinish(run_dir, 0)
    res = resume(tmp_path, run_dir)
    assert "2 already done, -j 3 (the run's)" in res.stderr


def test_a_run_that_recorded_no_jobs_resumes_with_the_default_and_says_so(tmp_path):
    run_dir = start(tmp_path, "-j", "2")
    path = os.path.join(run_dir, "run.json")
    with open(path, encoding="utf-8") as fh:
        meta = json.load(fh)
    del meta["args"]["jobs"]  # as a run of a ce that did not record it
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(meta, fh)
    unfinish(run_dir, 2)
    res = resume(tmp_path, run_dir)
    assert "2 already done, -j 1 (the default: run.json records no -j)" in res.stderr
    assert load_run_json(run_dir)["args"]["jobs"] == 1


def test_a_resume_writes_the_runs_junit_and_sarif_again(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    run_dir = start(tmp_path, "--junit-xml", "out/junit.xml", "--sarif", "out/ce.sarif")
    args = load_run_json(run_dir)["args"]
    assert args["junit_xml"] == str(out / "junit.xml")
    assert args["sarif"] == str(out / "ce.sarif")
    unfinish(run_dir, 1, 2)
    os.unlink(out / "junit.xml")
    os.unlink(out / "ce.sarif")
    resume(tmp_path, run_dir)  # from elsewhere, neither option given
    cases = list(ET.parse(out / "junit.xml").getroot().iter("testcase"))
    assert len(cases) == REPEATS
    sarif = json.loads((out / "ce.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"] == []


def test_the_junit_path_is_printed_as_the_sarif_path_is(tmp_path):
    """`--sarif` named its file at the end of the run, `--junit-xml` said nothing: both
    are said (stderr), the run's and the resume's (its recorded path)."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    res = ce("run", "agentless.yaml", "--repeats", str(REPEATS), "--runs-root", "runs",
             "--junit-xml", "out/junit.xml", "--sarif", "out/ce.sarif", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert f"JUnit XML: out/junit.xml ({REPEATS} test(s))\n" in res.stderr
    assert "SARIF: out/ce.sarif (0 result(s))\n" in res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    unfinish(run_dir, 0)
    resumed = resume(tmp_path, run_dir)
    assert f"JUnit XML: {tmp_path / 'out' / 'junit.xml'} ({REPEATS} test(s))\n" \
        in resumed.stderr


def test_quiet_says_neither_path(tmp_path):
    """-q: no progress on stderr; the JUnit line was still said (the SARIF one was not)."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    res = ce("run", "agentless.yaml", "-q", "--runs-root", "runs", "--junit-xml",
             "out/junit.xml", "--sarif", "out/ce.sarif", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "JUnit XML:" not in res.stderr and "SARIF:" not in res.stderr, res.stderr
    assert (tmp_path / "out" / "junit.xml").is_file() and (tmp_path / "out" / "ce.sarif")\
        .is_file()


def test_a_given_junit_path_wins(tmp_path):
    run_dir = start(tmp_path, "--junit-xml", "first.xml")
    unfinish(run_dir, 0)
    os.unlink(tmp_path / "first.xml")
    resume(tmp_path, run_dir, "--junit-xml", str(tmp_path / "second.xml"))
    assert not (tmp_path / "first.xml").exists()
    assert len(list(ET.parse(tmp_path / "second.xml").getroot().iter("testcase"))) == REPEATS
    assert load_run_json(run_dir)["args"]["junit_xml"] == str(tmp_path / "second.xml")


def test_executor_ray_again_keeps_the_runs_cluster(tmp_path):
    """`--resume RUN --executor ray` for a run made on a cluster joins that cluster (the
    recorded address), not a new local Ray. The address here answers nothing, so the
    resume says which one it tried."""
    from ce_runtime.execute.executor import ray_missing

    if ray_missing():
        pytest.skip(ray_missing())
    run_dir = start(tmp_path)
    path = os.path.join(run_dir, "run.json")
    with open(path) as fh:
        doc = json.load(fh)
    doc["args"].update(executor="ray", ray_address="127.0.0.1:9")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    unfinish(run_dir, 1)
    res = ce("run", "--resume", run_dir, "--executor", "ray", cwd=str(tmp_path))
    assert res.returncode == 1
    assert "cannot join the Ray cluster at 127.0.0.1:9" in res.stderr, res.stderr


# -- the scripted model: the run's, like --model ------------------------------------------
def test_the_scripted_model_is_the_runs_and_a_resume_cannot_turn_it_off(tmp_path):
    """Where the agents' model answers from is part of what the run measured: a run begun
    with --scripted-model is finished with it, and a resume asked to drop it refuses
    (exit 2, nothing changed) instead of mixing real replies into scripted results."""
    run_dir = start(tmp_path, "--scripted-model")
    assert load_run_json(run_dir)["args"]["scripted_model"] is True
    unfinish(run_dir, 1)
    run_json = os.path.join(run_dir, "run.json")
    with open(run_json, "rb") as fh:
        before = fh.read()
    res = ce("run", "--resume", run_dir, "--no-scripted-model", cwd=str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert ("the run was started with --scripted-model; --no-scripted-model would mix real "
            "model replies into it") in " ".join(res.stderr.split()), res.stderr
    assert "start a new run" in res.stderr
    with open(run_json, "rb") as fh:
        assert fh.read() == before
    assert len(task_jsons(run_dir)) == REPEATS - 1  # nothing ran

    resume(tmp_path, run_dir, "--scripted-model")  # the same: accepted
    assert load_run_json(run_dir)["args"]["scripted_model"] is True
    unfinish(run_dir, 0)
    resume(tmp_path, run_dir)  # not given: the run's
    assert load_run_json(run_dir)["args"]["scripted_model"] is True


def test_a_resume_cannot_turn_the_scripted_model_on(tmp_path):
    run_dir = start(tmp_path)
    assert load_run_json(run_dir)["args"]["scripted_model"] is False
    unfinish(run_dir, 2)
    res = ce("run", "--resume", run_dir, "--scripted-model", cwd=str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert ("the run was started without --scripted-model; --scripted-model would mix "
            "scripted replies into it") in " ".join(res.stderr.split()), res.stderr
    assert load_run_json(run_dir)["args"]["scripted_model"] is False
    resume(tmp_path, run_dir, "--no-scripted-model")  # the same: accepted


def test_run_help_says_which_settings_a_resume_keeps():
    res = ce("run", "--help", cwd=os.getcwd())
    text = " ".join(res.stdout.split())
    assert "--scripted-model / --no-scripted-model" in text
    assert ("A resume keeps what makes the run (PATHS, -e, -D, --agent, --model, --driver, "
            "--repeats, --sample, the tags and --scripted-model: giving another is a usage "
            "error)") in text, text


def test_a_resumed_claude_code_trial_talks_to_the_runs_scripted_model(tmp_path):
    """The real Claude Code CLI: a run begun with --scripted-model, resumed from elsewhere
    without the flag, runs its unfinished trial against the scripted server again (no key
    anywhere), and the resume refuses to drop it."""
    from tests.engines import need
    from tests.test_agent_fidelity import missing

    need(missing("claude-code"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for suffix in (".yaml", ".claude-code.model.yaml"):
        shutil.copy(os.path.join(root, "tasks", f"hello_world{suffix}"), tmp_path)
    res = ce("run", "hello_world.yaml", "--scripted-model", "--repeats", "2", "--runs-root",
             "runs", cwd=str(tmp_path), timeout=300)
    assert res.returncode == 0, res.stderr
    run_dir = run_dir_in(str(tmp_path / "runs"))
    os.unlink(os.path.join(run_dir, "default", "hello_world", "01", "task.json"))
    refused = ce("run", "--resume", run_dir, "--no-scripted-model", cwd=str(tmp_path))
    assert refused.returncode == 2 and "--no-scripted-model would mix" in refused.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = ce("run", "--resume", run_dir, cwd=str(elsewhere), timeout=300)
    assert res.returncode == 0, res.stderr
    assert "1 already done" in res.stderr
    records = task_jsons(run_dir)
    assert sorted(r["repeat"] for r in records.values()) == [0, 1]
    for record in records.values():
        assert record["status"] == "SUCCESS" and record["agent"] == "claude-code"
        assert record["model_server"]["calls"] == 3  # every reply the script's
    assert load_run_json(run_dir)["status"] == "complete"
