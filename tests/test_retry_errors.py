"""`ce run --retry-errors N` (ce_runtime/execute/attempts.py, cli/run_retry.py): a trial
that ended in an ERROR runs again after the others, its earlier attempts kept whole under
RUN/attempts/; an integrity violation (a verdict on the agent) is not retried; a resume
keeps the run's N and runs again the finished ERROR trials that have attempts left."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CE = [sys.executable, "-m", "ce_runtime.cli"]
ENV = {**os.environ, "CE_PLAIN": "1", "NO_COLOR": "1"}

# fails while FLAG is absent, making it: an outage that passes once
FLAKY = """\
task_id: flaky
description: pre_run fails the first time only
agent: {{type: none}}
sandbox: {{python: null}}
pre_run:
  - command: "test -f {flag} || {{ touch {flag}; echo model API down >&2; exit 1; }}"
success_criteria:
  - {{type: file_exists, path: made.txt, description: never made, weight: 0}}
  - {{type: run_command, command: "true", description: runs}}
"""
BROKEN = """\
task_id: broken
description: pre_run always fails
agent: {type: none}
sandbox: {python: null}
pre_run:
  - command: "exit 3"
success_criteria:
  - {type: run_command, command: "true", description: runs}
"""
OK = """\
task_id: ok
description: fine
agent: {type: none}
sandbox: {python: null}
pre_run:
  - command: "touch made.txt"
success_criteria:
  - {type: file_exists, path: made.txt, description: made}
"""
# the agent writes into its task's directory: ERROR by integrity, a verdict on it
TAMPERS = """\
task_id: tampers
description: the agent changes a file the grader trusts
initial_prompt: go
agent:
  type: script
  script:
    - run: "echo mine > {task_dir}/stray.txt"
sandbox: {{python: null}}
success_criteria:
  - {{type: run_command, command: "true", description: runs}}
"""


def _ce(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True, env=ENV,
                          timeout=300)


def _status(trial_dir) -> str:
    return json.loads((trial_dir / "task.json").read_text())["status"]


def _attempts(run, task) -> list[str]:
    base = run / "attempts" / "default" / task / "00"
    return sorted(os.listdir(base)) if base.is_dir() else []


def test_an_error_that_passes_is_retried_and_its_first_attempt_kept(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "flaky.yaml").write_text(FLAKY.format(flag=tmp_path / "flag"))
    (tmp_path / "tasks" / "ok.yaml").write_text(OK)
    res = _ce("run", "tasks", "--run-dir", "R", "--retry-errors", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    run = tmp_path / "R"
    assert _status(run / "default" / "flaky" / "00") == "SUCCESS"
    assert _attempts(run, "flaky") == ["1"]  # one retry was enough
    first = json.loads((run / "attempts/default/flaky/00/1/task.json").read_text())
    assert first["status"] == "ERROR" and "pre_run command failed" in first["error"]
    assert first["pre_run"][0]["stderr"].strip() == "model API down"
    assert (run / "attempts/default/flaky/00/1/trace.msgpack").is_file()
    assert _attempts(run, "ok") == []  # a trial that did not ERROR ran once
    assert "running them again (--retry-errors 2" in res.stderr
    assert "default/flaky/00 (attempt 2)" in res.stderr
    assert "1 trial(s) ran again after an ERROR, now 1 SUCCESS" in res.stderr
    meta = json.loads((run / "run.json").read_text())
    assert meta["args"]["retry_errors"] == 2 and meta["passed"] == 2
    # `ce runs` says so, in both formats
    listed = _ce("runs", "R", "-f", "json", cwd=tmp_path)
    row = json.loads(listed.stdout)[0]
    assert (row["retried_trials"], row["earlier_attempts"]) == (1, 1)
    text = _ce("runs", "R", cwd=tmp_path).stdout
    assert "1 trial(s) ran again after an ERROR" in text and "1 earlier attempt(s)" in text


def test_report_html_shows_the_earlier_attempts(tmp_path):
    from ce_runtime.report.html_trial import TemplateCache, trial_detail
    from ce_runtime.store.record import read_record

    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "flaky.yaml").write_text(FLAKY.format(flag=tmp_path / "flag"))
    assert _ce("run", "tasks", "--run-dir", "R", "--retry-errors", "1",
               cwd=tmp_path).returncode == 0
    run = str(tmp_path / "R")
    rec = read_record(os.path.join(run, "default", "flaky", "00"))
    detail = json.loads(trial_detail(run, rec, 200_000, TemplateCache(run)))
    assert detail["status"] == "SUCCESS"
    [earlier] = detail["attempts"]
    assert earlier["n"] == 1 and earlier["status"] == "ERROR"
    assert earlier["dir"] == os.path.join("attempts", "default", "flaky", "00", "1")
    assert "exit 1" in earlier["error"]


def test_a_lasting_error_is_tried_n_more_times_then_a_resume_honours_n(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "broken.yaml").write_text(BROKEN)
    res = _ce("run", "tasks", "--run-dir", "R", "--retry-errors", "2", cwd=tmp_path)
    assert res.returncode == 1
    run = tmp_path / "R"
    assert _attempts(run, "broken") == ["1", "2"] and _status(run / "default/broken/00") \
        == "ERROR"
    assert "1 trial(s) ran again after an ERROR, now 1 ERROR" in res.stderr
    # a resume takes the run's --retry-errors 2: no attempt is left
    res = _ce("run", "--resume", "R", cwd=tmp_path)
    assert res.returncode == 1 and "running them again" not in res.stderr
    assert _attempts(run, "broken") == ["1", "2"]
    # given a higher N, it runs the finished ERROR trial once more
    res = _ce("run", "--resume", "R", "--retry-errors", "3", cwd=tmp_path)
    assert "1 trial(s) finished in an ERROR; running them again" in res.stderr, res.stderr
    # said after the resume's start line, which counts the trial as not done
    start = res.stderr.index("run R: 1 trial(s), 0 already done")
    assert start < res.stderr.index("finished in an ERROR; running them again")
    assert "default/broken/00 (attempt 4)" in res.stderr
    assert _attempts(run, "broken") == ["1", "2", "3"]
    assert json.loads((run / "run.json").read_text())["args"]["retry_errors"] == 3


def test_a_run_stopped_during_a_retry_keeps_the_attempt_and_resumes_the_trial(tmp_path):
    import signal
    import time

    (tmp_path / "tasks").mkdir()
    flag = tmp_path / "flag"
    # slow until FLAG.fast exists: the resume runs the same plan, quickly
    (tmp_path / "tasks" / "slow.yaml").write_text(FLAKY.format(flag=flag).replace(
        "exit 1; }", f"exit 1; }}; test -f {flag}.fast || sleep 30"))
    with open(tmp_path / "err.txt", "w") as err:
        proc = subprocess.Popen([*CE, "run", "tasks", "--run-dir", "R", "--retry-errors",
                                 "1"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err,
                                env=ENV)
        deadline = time.monotonic() + 120
        while "running them again" not in (tmp_path / "err.txt").read_text():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        time.sleep(1)  # the retry's sleep is running
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 1
    said = (tmp_path / "err.txt").read_text()
    assert "now 1 unfinished (a resume runs it)" in said, said
    assert "resume with `ce run --resume R`" in said
    run = tmp_path / "R"
    assert _attempts(run, "flaky") == ["1"]
    assert not (run / "default/flaky/00/task.json").exists()
    # the resume runs it as unfinished: its own attempt, not another retry
    (tmp_path / "flag.fast").touch()
    res = _ce("run", "--resume", "R", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _status(run / "default/flaky/00") == "SUCCESS"
    assert _attempts(run, "flaky") == ["1"]
    # and its summary counts it: it said nothing of the retry it finished
    assert "1 trial(s) ran again after an ERROR, now 1 SUCCESS" in res.stderr, res.stderr


def test_without_the_option_an_error_stays_and_nothing_is_set_aside(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "flaky.yaml").write_text(FLAKY.format(flag=tmp_path / "flag"))
    res = _ce("run", "tasks", "--run-dir", "R", cwd=tmp_path)
    assert res.returncode == 1
    assert _status(tmp_path / "R/default/flaky/00") == "ERROR"
    assert not (tmp_path / "R" / "attempts").exists()
    # and a resume without it finishes nothing more: the trial is finished
    res = _ce("run", "--resume", "R", cwd=tmp_path)
    assert _status(tmp_path / "R/default/flaky/00") == "ERROR" and res.returncode == 1


def test_an_integrity_violation_is_not_retried(tmp_path):
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    (task_dir / "tampers.yaml").write_text(TAMPERS.format(task_dir=task_dir))
    res = _ce("run", "task/tampers.yaml", "--run-dir", "R", "--retry-errors", "3",
              cwd=tmp_path)
    assert res.returncode == 1
    record = json.loads((tmp_path / "R/default/tampers/00/task.json").read_text())
    assert record["status"] == "ERROR" and record["integrity"], record
    assert not (tmp_path / "R" / "attempts").exists()
    assert "running them again" not in res.stderr


def test_a_variant_named_attempts_is_refused(tmp_path):
    (tmp_path / "ok.yaml").write_text(OK)
    (tmp_path / "exp.yaml").write_text(
        "experiment_id: e\nvariants:\n  - variant_id: attempts\n")
    res = _ce("compile", "ok.yaml", "-e", "exp.yaml", cwd=tmp_path)
    assert res.returncode == 1 and "CE0224" in res.stderr and "attempts" in res.stderr


ROWS = FLAKY.replace("task_id: flaky", "task_id: rows").replace(
    "sandbox:", "dataset: {{rows: [{{id: r1}}, {{id: r2}}]}}\nsandbox:")


def test_a_dataset_rows_earlier_attempt_is_explained_and_listed(tmp_path):
    """RUN/attempts/VARIANT/TASK/ROW/NN/<n> is six levels below the run: `ce explain`
    and `ce trial files` found no run above it (they looked five levels up)."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "rows.yaml").write_text(ROWS.format(flag=tmp_path / "flag"))
    res = _ce("run", "tasks", "--run-dir", "R", "--retry-errors", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    [first] = [p for p in ("R/attempts/default/rows/r1/00/1", "R/attempts/default/rows/r2/00/1")
               if (tmp_path / p / "task.json").is_file()]
    res = _ce("explain", first, cwd=tmp_path)
    assert res.returncode == 1, res.stderr  # the attempt's ERROR, explained
    assert "recorded status ERROR" in res.stdout and "never reached grading" in res.stdout
    res = _ce("trial", "files", first, cwd=tmp_path)
    assert res.returncode == 0 and "0 file(s)" in res.stdout + res.stderr, res.stderr


def test_junit_and_run_json_say_which_trials_ran_again(tmp_path):
    """A trial that ERRORed and then passed was a plain pass in JUnit XML, and run.json
    said nothing of a retry: a CI test report could not tell a flaky trial. Now each
    earlier attempt is a Surefire flakyError (latest passed) or rerunError (it did not),
    and run.json's `retried` counts them, in `ce run`'s files and `ce report`'s."""
    import xml.etree.ElementTree as ET

    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "flaky.yaml").write_text(FLAKY.format(flag=tmp_path / "flag"))
    (tmp_path / "tasks" / "broken.yaml").write_text(BROKEN)
    (tmp_path / "tasks" / "ok.yaml").write_text(OK)
    res = _ce("run", "tasks", "--run-dir", "R", "--retry-errors", "1", "--junit-xml",
              "j.xml", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    report = _ce("report", "R", "-f", "junit", cwd=tmp_path)
    for xml in ((tmp_path / "j.xml").read_text(), report.stdout):
        cases = {tc.get("name"): tc for tc in ET.fromstring(xml).iter("testcase")}
        flaky, broken, ok = (cases[f"default/{t}/00"] for t in ("flaky", "broken", "ok"))
        [again] = flaky.findall("flakyError")
        assert again.get("type") == "ERROR" and "attempt 1: pre_run command failed" in \
            again.get("message") and flaky.find("error") is None
        assert "this is attempt 2" in flaky.find("system-out").text
        assert broken.find("error") is not None
        assert [e.get("message") for e in broken.findall("rerunError")] == [
            "attempt 1: pre_run command failed: 'exit 3' (exit 3)"]
        assert list(ok) == [ok.find("system-out")]  # ran once: nothing added
    for doc in (json.loads((tmp_path / "R/run.json").read_text()),
                json.loads(_ce("report", "R", "-f", "json", cwd=tmp_path).stdout)):
        retried = doc["retried"]
        assert (retried["trials"], retried["earlier_attempts"]) == (2, 2)
        assert retried["by_trial"]["default/broken/00"] == [{
            "n": 1, "status": "ERROR", "error": "pre_run command failed: 'exit 3' (exit 3)",
            "dir": os.path.join("attempts", "default", "broken", "00", "1")}]
    # report.md, `ce run`'s and `ce report`'s, says so in its run table
    row = ("| Ran again after an ERROR | 2 trial(s) (--retry-errors; the latest attempt "
           "counts), 2 earlier attempt(s) kept in `attempts/` |")
    assert row in (tmp_path / "R/report.md").read_text()
    assert row in _ce("report", "R", cwd=tmp_path).stdout


def test_a_trial_whose_plan_changed_starts_its_attempts_anew(tmp_path):
    """A resume runs a finished trial whose task changed as a new trial: the attempts of
    its old plan were taken as its own (JUnit called its pass flaky, the resume said it
    'ran again after an ERROR', and they used up its retries)."""
    import xml.etree.ElementTree as ET

    (tmp_path / "tasks").mkdir()
    task = tmp_path / "tasks" / "broken.yaml"
    task.write_text(BROKEN)
    assert _ce("run", "tasks", "--run-dir", "R", "--retry-errors", "1",
               cwd=tmp_path).returncode == 1
    run = tmp_path / "R"
    assert _attempts(run, "broken") == ["1"]
    task.write_text(BROKEN.replace("exit 3", "exit 4"))  # another plan, failing too
    res = _ce("run", "--resume", "R", "--junit-xml", "j.xml", cwd=tmp_path)
    assert res.returncode == 1
    assert "default/broken/00 (attempt 2)" in res.stderr, res.stderr  # its retry, fresh
    assert _attempts(run, "broken") == ["1", "2"]
    [tc] = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    assert [e.get("message") for e in tc.findall("rerunError")] == [
        "attempt 2: pre_run command failed: 'exit 4' (exit 4)"]
    task.write_text(BROKEN.replace("exit 3", "true"))  # fixed: runs once, and passes
    res = _ce("run", "--resume", "R", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "ran again after an ERROR" not in res.stderr
    [tc] = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    assert list(tc) == [tc.find("system-out")] and "attempt" not in tc.find("system-out").text
    assert "retried" not in json.loads((run / "run.json").read_text())
    assert _attempts(run, "broken") == ["1", "2"]  # kept on disk all the same
