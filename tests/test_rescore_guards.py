"""What `ce rescore`, `ce compare` and `ce run --resume` say when a run is not what it
should be, through the real CLI on small offline tasks:

- a rescore that would have to ask a judge, with none configured, is refused before
  anything is graded (as `ce run` refuses it), naming the criterion; an unchanged
  judge request re-uses the recorded verdict and needs no judge; a grading that fails
  anyway never shows the recorded scores as its own;
- a trial directory deleted from a run is named and counted, never dropped silently;
- a rescore of some TASKS lists the suite gates of the suites it re-graded only;
- a resume runs again a trial whose task.json is there but whose other files are not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from ce_runtime.store.archive import missing_trial_file
from ce_runtime.store.record import read_record
from tests.test_rescore_changes import DATASET_TASK
from tests.test_run_resume_options import AGENTLESS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = os.path.join(ROOT, "tasks")
JUDGE_VARS = ("CE_JUDGE_URL", "CE_JUDGE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
              "AWS_BEARER_TOKEN_BEDROCK", "API_BACKEND")
ENV = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS} | {"CE_PLAIN": "1"}


def ce(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args], cwd=cwd,
                          env=ENV, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def _judged_run(tmp_path):
    """tasks/judged.yaml solved by the oracle, its judge answered by the scripted
    verdicts: one trial, every criterion passed, its verdict recorded."""
    for name in ("judged.yaml", "judged.replies.yaml"):
        shutil.copy(os.path.join(TASKS, name), tmp_path / name)
    shutil.copytree(os.path.join(TASKS, "reference"), tmp_path / "reference")
    res = ce("run", "judged.yaml", "--agent", "oracle", "--judge-replies",
             "judged.replies.yaml", "--run-dir", "run", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    return (tmp_path / "judged.yaml").read_text()


# -- judges ----------------------------------------------------------------------------------
def test_a_changed_judge_request_without_a_judge_is_refused_before_grading(tmp_path):
    task = _judged_run(tmp_path)
    (tmp_path / "changed.yaml").write_text(task.replace("You are reviewing text_utils.py",
                                                        "You now review text_utils.py"))
    res = ce("rescore", "run", "changed.yaml", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert ("ce rescore: criterion c1 llm_judge of default/judged ('The implementation is "
            "correct, readable and idiomatic') asks its judge what the run did not") \
        in res.stderr, res.stderr
    assert "no judge is configured (1 trial(s): default/judged/00)" in res.stderr
    assert "--judge-replies FILE" in res.stderr and "--offline" in res.stderr
    assert res.stdout == ""  # nothing graded, no stale score shown
    assert not (tmp_path / "run" / "rescored").exists()  # nothing written

    refresh = ce("rescore", "run", "--refresh-judges", cwd=tmp_path)
    assert refresh.returncode == 2, refresh.stdout + refresh.stderr
    assert "criterion c1 llm_judge of default/judged" in refresh.stderr
    assert "is asked again (--refresh-judges)" in refresh.stderr
    assert not (tmp_path / "run" / "rescored").exists()

    # --offline: the changed request is the criterion's error, as before
    offline = ce("rescore", "run", "changed.yaml", "--offline", "--out", "off", cwd=tmp_path)
    assert offline.returncode == 1, offline.stderr
    assert "no recorded verdict for this request, and judges are offline" in offline.stdout


def test_an_unchanged_judge_request_needs_no_judge(tmp_path):
    """A new threshold of the judge, and a criterion added before it (its id moves): the
    request is the run's, its verdict re-used, no judge asked."""
    task = _judged_run(tmp_path)
    (tmp_path / "stricter.yaml").write_text(
        task.replace("pass_threshold: 0.7", "pass_threshold: 0.9").replace(
            "success_criteria:\n", "success_criteria:\n  - type: file_exists\n"
            "    path: text_utils.py\n    description: it is there\n", 1))
    res = ce("rescore", "run", "stricter.yaml", "--out", "strict", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 recorded verdict(s) reused, 0 asked" in res.stdout
    rec = json.loads((tmp_path / "strict" / "default" / "judged" / "00" / "task.json")
                     .read_text())
    judge = next(c for c in rec["criteria"] if c["type"] == "llm_judge")
    assert (judge["id"], judge["score"], judge["pass_threshold"]) == ("c2", 1.0, 0.9)


def test_a_grading_that_fails_shows_no_recorded_score_as_its_own(tmp_path):
    """A request the pre-flight cannot tell changed (here: the run's verdict lost) and no
    judge: the trial is ERROR with the reason, no criterion result and no score; the
    recorded verdict is only `previous`."""
    _judged_run(tmp_path)
    shutil.rmtree(tmp_path / "run" / "judges")
    res = ce("rescore", "run", "--out", "out", cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["*", "default/judged/00", "SUCCESS", "->", "ERROR", "1.000",
                                "->", "-"], res.stdout
    assert lines[1].strip() == ("error: grading failed: c1 llm_judge: no judge transport is "
                                "configured (set an API key or a judge endpoint)")
    rec = json.loads((tmp_path / "out" / "default" / "judged" / "00" / "task.json")
                     .read_text())
    assert (rec["status"], rec["weighted_score"], rec["criteria"], rec["success"]) == \
        ("ERROR", None, [], False)
    assert rec["previous"]["weighted_score"] == 1.0 and "judge_usage" not in rec


# -- a trial deleted from a run ---------------------------------------------------------------
def test_a_deleted_trial_is_named_and_counted_by_rescore_and_compare(tmp_path):
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    run = ce("run", "agentless.yaml", "--repeats", "3", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    shutil.rmtree(tmp_path / "run" / "default" / "agentless" / "01")
    res = ce("rescore", "run", "--out", "out", cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert ("ce rescore: 1 trial(s) of the run are missing (their directory or its "
            "task.json is gone; run.json and trials.parquet count them), not re-scored: "
            "default/agentless/01") in res.stderr, res.stderr
    assert "2 trial(s) re-scored, 0 changed; 1 trial(s) missing from the run;" in res.stdout
    # the results say they are not the whole run (run.json said "complete"), and the
    # advice names the run the trials ran in, the one to resume (not the re-score's)
    out = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (out["status"], out["trials_planned"], out["trials"]) == ("incomplete", 3, 2)
    source = os.path.realpath(tmp_path / "run")
    reason = (f"1 trial(s) of the run are missing, not re-scored (`ce run --resume {source}` "
              "runs them again): 2 of 3 planned trial(s) re-scored")
    assert out["exit_reasons"][0] == reason and f"not passed: {reason}" in res.stdout
    report = ce("report", "out", cwd=tmp_path)  # made again from run.json: the same words
    assert "**INCOMPLETE**" in report.stdout and f"- {reason}" in report.stdout, report.stdout

    cmp = ce("compare", "run", "out", cwd=tmp_path)
    assert cmp.returncode == 1, cmp.stderr  # B lacks a trial of A: no pass of the gate
    assert ("ce compare: 1 trial(s) of A have no match in B (a task both ran; not "
            "compared): default/agentless/01") in cmp.stderr, cmp.stderr
    assert cmp.stderr.splitlines()[-1] == (
        "ce compare: INCOMPLETE: B (the candidate) did not finish: incomplete, 2 of 3 "
        "planned trial(s) ran; 1 trial(s) of A have no match in B (a task both ran: not "
        "compared)")
    as_json = json.loads(ce("compare", "run", "out", "-f", "json", cwd=tmp_path).stdout)
    assert (as_json["unmatched_a"], as_json["unmatched_b"]) == (["default/agentless/01"], [])

    # one trial re-scored on purpose is no missing trial
    one = ce("rescore", "run", "--trial", "default/agentless/00", "--out", "one", cwd=tmp_path)
    assert one.returncode == 0 and "missing" not in one.stdout + one.stderr, one.stderr

    # a run whose `ce run` was killed (run.json still says running) did not lose the
    # trials it lacks: it never finished them, which is what the re-score says
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    (tmp_path / "run" / "run.json").write_text(json.dumps({**doc, "status": "running"}))
    killed = ce("rescore", "run", "--out", "killed", cwd=tmp_path)
    assert ("ce rescore: 1 trial(s) of the run never finished (its `ce run` was killed "
            "before them; run.json counts them), not re-scored: default/agentless/01") \
        in killed.stderr, killed.stderr


def test_a_damaged_run_json_is_said_not_passed_over(tmp_path):
    """run.json holds the run's --min-pass-rate, status and suite gates, and how many
    trials it counts: a re-score without it says so (it re-scores the trials it finds),
    where it said nothing and a deleted trial went unnoticed."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    run = ce("run", "agentless.yaml", "--repeats", "2", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    healthy = ce("rescore", "run", "--out", "healthy", cwd=tmp_path)
    assert healthy.returncode == 0 and "run.json" not in healthy.stderr, healthy.stderr
    (tmp_path / "run" / "run.json").write_text("{cut")
    res = ce("rescore", "run", "--out", "out", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("ce rescore: run/run.json: damaged archive: not valid JSON (Expecting property "
            "name enclosed in double quotes: line 1 column 2 (char 1)); the run's "
            "--min-pass-rate, status and suite gates are unknown") in res.stderr, res.stderr
    assert "2 trial(s) re-scored, 0 changed" in res.stdout
    (tmp_path / "run" / "run.json").write_text("[]")
    res = ce("rescore", "run", "--trial", "default/agentless/00", "--out", "one",
             cwd=tmp_path)  # one trial: the run's summary is not needed
    assert res.returncode == 0 and "run.json" not in res.stderr, res.stderr
    res = ce("rescore", "run", "--out", "listed", cwd=tmp_path)
    assert "run/run.json: damaged archive: not a JSON object" in res.stderr, res.stderr


def test_a_rescore_of_a_rescore_names_the_run_its_trials_ran_in(tmp_path):
    """Re-scoring the results of a re-score of a run cut short said `ce run --resume
    RUN/rescored/<time>`, which fails (a re-score is no `ce run` directory): the advice
    names the run the trials ran in (run.json's rescored_from, followed back), and a
    trial missing from the re-score is re-scored from that run, not resumed."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    assert ce("run", "agentless.yaml", "--repeats", "2", "--run-dir", "run",
              cwd=tmp_path).returncode == 0
    doc = json.loads((tmp_path / "run" / "run.json").read_text())  # 2 of 5 ran
    (tmp_path / "run" / "run.json").write_text(
        json.dumps({**doc, "status": "interrupted", "trials_planned": 5}))
    source = os.path.realpath(tmp_path / "run")
    resume = (f"the run was interrupted: 2 of 5 planned trial(s) re-scored; `ce run "
              f"--resume {source}` runs the other 3")
    first = ce("rescore", "run", "-q", cwd=tmp_path)
    assert f"not passed: {resume}" in first.stdout, first.stdout + first.stderr
    [inside] = (tmp_path / "run" / "rescored").iterdir()
    for again, of in (("again", inside), ("third", tmp_path / "again")):
        res = ce("rescore", str(of), "-q", "--out", again, cwd=tmp_path)
        assert res.returncode == 1 and f"not passed: {resume}" in res.stdout, \
            res.stdout + res.stderr
        report = ce("report", again, cwd=tmp_path)  # made again from run.json: the same
        assert f"- {resume}" in report.stdout, report.stdout
    shutil.rmtree(tmp_path / "again" / "default" / "agentless" / "01")
    res = ce("rescore", "again", "-q", "--out", "fourth", cwd=tmp_path)
    assert (f"not passed: 1 trial(s) of the run are missing, not re-scored (`ce rescore "
            f"{source}` re-scores them from the run they ran in): 1 of 5 planned trial(s) "
            "re-scored") in res.stdout, res.stdout + res.stderr


def test_results_written_elsewhere_outlive_the_run_being_moved(tmp_path):
    """`--out` outside the run linked the results' objects/ into the run (../run/objects):
    the run moved or deleted, `ce explain` of a re-scored trial said it was no trial of a
    run, and a re-score of the results called every trial damaged. They have objects of
    their own now; inside the run (RUN/rescored/<time>) the link moves with the run."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    assert ce("run", "agentless.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    assert ce("rescore", "run", "-q", "--out", "out", cwd=tmp_path).returncode == 0
    assert ce("rescore", "run", "-q", cwd=tmp_path).returncode == 0
    [inside] = (tmp_path / "run" / "rescored").iterdir()
    assert os.readlink(inside / "objects") == os.path.join("..", "..", "objects")
    (tmp_path / "run").rename(tmp_path / "moved")
    trial = os.path.join("out", "default", "agentless", "00")
    explained = ce("explain", trial, cwd=tmp_path)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    assert "c0 file_exists: a.txt is there" in explained.stdout
    files = ce("trial", "files", trial, cwd=tmp_path)
    assert files.returncode == 0 and "a.txt" in files.stdout, files.stderr
    again = ce("rescore", "out", "-q", "--out", "again", cwd=tmp_path)
    assert again.returncode == 0 and "damaged" not in again.stderr, again.stderr
    inside = tmp_path / "moved" / "rescored" / inside.name
    assert ce("explain", str(inside / "default" / "agentless" / "00"),
              cwd=tmp_path).returncode == 0


# -- suite gates of a partial rescore ---------------------------------------------------------
def test_a_rescore_of_some_tasks_lists_only_the_gates_it_regraded(tmp_path):
    (tmp_path / "words.yaml").write_text(DATASET_TASK.replace("THIRD", "alpha"))
    (tmp_path / "other.yaml").write_text(DATASET_TASK.replace("THIRD", "alpha")
                                         .replace("task_id: words", "task_id: other"))
    run = ce("run", "words.yaml", "other.yaml", "-q", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 1, run.stderr  # rows fail; both gates (2 of 4) pass
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "words.yaml").write_text(DATASET_TASK.replace("THIRD", "beta"))
    res = ce("rescore", "run", "tasks", "-q", "--out", "out", cwd=tmp_path)
    gates = [line for line in res.stdout.splitlines() if line[2:].startswith("suite gate")]
    assert gates == ["* suite gate default/words/c0: passed -> failed (pass_rate 0.500 -> "
                     "0.250, mean_score 0.500 -> 0.250)"], res.stdout
    assert "; 1 suite gate(s) changed verdict;" in res.stdout
    assert "default/other" not in res.stdout


def test_a_row_of_tasks_the_run_has_no_trial_of_is_named(tmp_path):
    """A row added to the dataset since the run: the re-score grades the run's trials,
    and says the new row has none (its gate counts the rows the run has); it was not
    said, as if the gate covered the dataset TASKS hold."""
    (tmp_path / "words.yaml").write_text(DATASET_TASK.replace("THIRD", "alpha"))
    run = ce("run", "words.yaml", "-q", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    (tmp_path / "words.yaml").write_text(DATASET_TASK.replace("THIRD", "alpha").replace(
        "    - {id: r4, word: gamma}\n", "    - {id: r4, word: gamma}\n    - {id: r5, word: "
        "alpha}\n"))
    res = ce("rescore", "run", "words.yaml", "-q", "--out", "out", cwd=tmp_path)
    assert "ce rescore: 1 dataset row(s) of TASKS have no trial in the run, not graded " \
        "(suite gates leave them out): default/words/r5" in res.stderr, res.stderr
    assert "4 trial(s) re-scored, 0 changed; 1 row(s) of TASKS not in the run;" in res.stdout
    same = ce("rescore", "run", "-q", "--out", "out2", cwd=tmp_path)  # the run's own plans
    assert "not in the run" not in same.stdout + same.stderr
    other = tmp_path / "other.yaml"  # a task the run never ran: not one of its suites
    other.write_text(DATASET_TASK.replace("task_id: words", "task_id: other"))
    more = ce("rescore", "run", "words.yaml", "other.yaml", "-q", "--out", "out3",
              cwd=tmp_path)
    assert "default/other" not in more.stderr and "1 row(s) of TASKS" in more.stdout
    sampled = ce("run", "words.yaml", "-q", "--sample", "2", "--run-dir", "s", cwd=tmp_path)
    assert sampled.returncode in (0, 1), sampled.stderr
    res = ce("rescore", "s", "words.yaml", "-q", "--out", "out4", cwd=tmp_path)
    assert "not in the run" not in res.stdout + res.stderr  # the rows it did not sample


def test_trials_of_a_variant_tasks_do_not_define_are_said_to_be_so(tmp_path):
    """A rescore under an experiment whose variant was renamed since the run: its trials
    were counted as having 'no task in TASKS', of a task TASKS plainly have."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    exp = "experiment_id: ab\nvariants:\n  - variant_id: {a}\n  - variant_id: b\n"
    (tmp_path / "ab.yaml").write_text(exp.format(a="a"))
    run = ce("run", "agentless.yaml", "-e", "ab.yaml", "-q", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (tmp_path / "renamed.yaml").write_text(exp.format(a="base"))
    res = ce("rescore", "run", "agentless.yaml", "-e", "renamed.yaml", "-q", "--out", "out",
             cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 trial(s) re-scored, 0 changed; 1 trial(s) have no task in TASKS (1 of them of " \
        "a task TASKS have, under variant(s) TASKS do not define: a);" in res.stdout, res.stdout
    (tmp_path / "other.yaml").write_text(AGENTLESS.replace("task_id: agentless",
                                                           "task_id: other"))
    gone = ce("rescore", "run", "other.yaml", "-e", "ab.yaml", "-q", "--out", "out2",
              cwd=tmp_path)  # another task altogether: no task, nothing more to say
    assert "; 2 trial(s) have no task in TASKS; results" in gone.stdout, gone.stdout


# -- resume -----------------------------------------------------------------------------------
def test_a_resume_runs_again_a_trial_with_task_json_but_not_its_other_files(tmp_path):
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    run = ce("run", "agentless.yaml", "--repeats", "4", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    trials = tmp_path / "run" / "default" / "agentless"
    lost = {"01": "trace.msgpack", "02": "workspace.json", "03": "evidence.json"}
    for n, name in lost.items():
        os.unlink(trials / n / name)
    res = ce("run", "--resume", "run", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for n, name in lost.items():
        assert (f"ce run: damaged archive: run/default/agentless/{n}/{name}: missing"
                in res.stderr), res.stderr
        assert (trials / n / name).is_file()  # run again, every file written
    assert "4 trial(s), 1 already done" in res.stderr, res.stderr
    again = ce("run", "--resume", "run", cwd=tmp_path)
    assert "4 already done" in again.stderr and "damaged" not in again.stderr, again.stderr


def test_the_files_a_finished_trial_needs(tmp_path):
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    assert ce("run", "agentless.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    tdir = str(tmp_path / "run" / "default" / "agentless" / "00")
    record = read_record(tdir)
    assert missing_trial_file(tdir, record) is None
    for name in ("trace.msgpack", "workspace.json", "evidence.json"):
        os.rename(os.path.join(tdir, name), os.path.join(tdir, name + ".away"))
        missing = missing_trial_file(tdir, record)
        assert missing is not None and missing.path == os.path.join(tdir, name)
        os.rename(os.path.join(tdir, name + ".away"), os.path.join(tdir, name))
    # a trial that recorded no trace (no trace_sha256) and no criteria needs neither
    import msgspec

    bare = msgspec.structs.replace(record, trace_sha256=None, criteria=[])
    os.unlink(os.path.join(tdir, "trace.msgpack"))
    os.unlink(os.path.join(tdir, "evidence.json"))
    assert missing_trial_file(tdir, bare) is None
    # a record of a ce before the digests: its trace is needed
    old = msgspec.structs.replace(bare, workspace_sha256=None)
    assert missing_trial_file(tdir, old).path == os.path.join(tdir, "trace.msgpack")


def test_a_trial_run_again_leaves_no_evidence_of_its_earlier_grading(tmp_path):
    """A trial run again (its trace lost) that now ends before grading kept the first
    run's evidence.json beside its new task.json: explain and rescore read a grading
    that never happened to it."""
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    assert ce("run", "agentless.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    tdir = tmp_path / "run" / "default" / "agentless" / "00"
    assert (tdir / "evidence.json").is_file()
    os.unlink(tdir / "trace.msgpack")
    # its pre_run fails when it runs again: no grading
    (tmp_path / "agentless.yaml").write_text(AGENTLESS.replace(
        "success_criteria:", "pre_run: [{command: 'exit 3'}]\nsuccess_criteria:"))
    res = ce("run", "--resume", "run", cwd=tmp_path)
    record = read_record(str(tdir))
    assert record.status == "ERROR" and not record.criteria, res.stderr
    assert not (tdir / "evidence.json").exists()


TASK_DIR_TASK = """\
task_id: td
description: reads a file of its task's directory
agent: {type: none}
sandbox: {driver: tempdir, python: null}
pre_run:
  - command: echo hi > out.txt
success_criteria:
  - type: run_command
    command: diff out.txt $TASK_DIR/expected.txt
    description: out.txt is what the task expects
"""


def test_a_rescore_with_tasks_reads_their_own_directory(tmp_path):
    """`ce rescore RUN TASKS` graded the recompiled task against the run's recorded task
    directory: an edited copy's hidden file (here its expected output) was not what
    the criteria read."""
    for name, expected in (("a", "hi"), ("b", "bye")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "t.yaml").write_text(TASK_DIR_TASK)
        (tmp_path / name / "expected.txt").write_text(expected + "\n")
    assert ce("run", "a/t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    same = ce("rescore", "run", "a/t.yaml", "--out", "re_a", cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    other = ce("rescore", "run", "b/t.yaml", "--out", "re_b", cwd=tmp_path)
    assert other.returncode == 1 and "SUCCESS -> FAILURE" in other.stdout, other.stdout
    record = read_record(str(tmp_path / "re_b" / "default" / "td" / "00"))
    assert record.status == "FAILURE" and record.criteria[0].score == 0.0
    assert record.task_dir == str(tmp_path / "b")
