"""`ce run` streams its trials to the report worker (a Begin, a Done per finished trial,
then the end with references to the records the worker read): the reports it writes
are those `ce run` writes itself from the records it read, whatever the worker was told
or missed. See ce_runtime/cli/report_worker.py and ce_runtime/report/job.py."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ce_runtime.cli.report_worker import ReportWorker
from ce_runtime.report.run_end import write_run_reports
from ce_runtime.store.record import read_record
from ce_runtime.store.report_job import Begin, RunReports
from ce_runtime.store.run_json import RUN_JSON
from tests.test_report_worker import ENV, TASK  # the same small tasks

REPORTS = ("run.json", "report.md", "report.html", "junit.xml", "trials.parquet",
           "results.parquet")


def _tasks(base: Path) -> None:
    (base / "tasks").mkdir()
    for name, word in (("a_passes", "hi"), ("b_fails", "bye"), ("c_passes", "hi")):
        (base / "tasks" / f"{name}.yaml").write_text(TASK.format(name=name, word=word))


@pytest.fixture(scope="module")
def archived_run(tmp_path_factory):
    """A real run of three trials (one fails), its reports written in-process."""
    base = tmp_path_factory.mktemp("stream")
    _tasks(base)
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "tasks",
                          "--run-dir", "run", "-q"], cwd=base, capture_output=True,
                         text=True, timeout=300, env={**ENV, "CE_REPORT_WORKER": "0"})
    assert res.returncode == 1, res.stderr
    return base / "run"


def _fresh_copy(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest)
    for name in REPORTS:
        (dest / name).unlink(missing_ok=True)
    return dest


def _trial_dirs(run: Path) -> list[str]:
    return sorted(os.path.dirname(p) for p in glob.glob(f"{run}/*/*/*/task.json"))


def _in_process(run: Path, **kw) -> dict:
    """The reports as `ce run` writes them without a worker; run.json's summary."""
    records = [read_record(d) for d in _trial_dirs(run)]
    fields = dict(run_id="r1", config={"paths": ["tasks"]}, total=len(records),
                  interrupted=False, junit_xml=str(run / "junit.xml"), lost=[])
    fields.update(kw)
    return write_run_reports(str(run), records=records, **fields)


def _streamed(run: Path, earlier=(), done=None, end=None, **kw):
    """The reports by a worker told of the trials at `earlier` in its Begin and of
    those at `done` (default: every other) one by one; (the summary, the end's records
    as sent). `end(worker, records)` may replace what the end sends."""
    dirs = _trial_dirs(run)
    records = [read_record(d) for d in dirs]
    fields = dict(run_id="r1", config={"paths": ["tasks"]}, total=len(records),
                  interrupted=False, junit_xml=str(run / "junit.xml"), lost=[])
    fields.update(kw)
    worker = ReportWorker.start()
    assert worker is not None
    worker.begin(Begin(str(run), fields["run_id"], fields["config"], len(dirs),
                       fields["junit_xml"], dirs, list(earlier)),
                 [r.trial_id for r in records])
    for i in (range(len(dirs)) if done is None else done):
        if i not in earlier:
            worker.trial_done(records[i].trial_id)
    sent = [worker.reference(r) for r in records] if end is None else end(worker, records)
    summary = worker.write_reports(RunReports(str(run), records=sent, **fields))
    worker.close()
    return summary, sent


def _same_files(a: Path, b: Path) -> None:
    """The same bytes in both run directories (their own paths aside)."""

    def read(path: Path) -> bytes:
        return path.read_bytes().replace(str(a).encode(), b"RUN").replace(
            str(b).encode(), b"RUN")

    for name in REPORTS:
        mine, theirs = (a / name), (b / name)
        assert mine.exists() == theirs.exists(), name
        if mine.exists():
            assert read(mine) == read(theirs), name


def test_a_streamed_run_writes_what_ce_run_writes_itself(archived_run, tmp_path):
    here, there = _fresh_copy(archived_run, tmp_path / "a"), _fresh_copy(archived_run,
                                                                         tmp_path / "b")
    in_process = _in_process(here)
    by_worker, sent = _streamed(there)
    assert all(isinstance(r, tuple) for r in sent)  # it had read every record itself
    assert by_worker == in_process and by_worker["status"] == "complete"
    _same_files(here, there)


def test_a_resume_streams_the_trials_of_the_earlier_invocation(archived_run, tmp_path):
    """A resume's Begin names the trials finished before it; the worker reads them too."""
    here, there = _fresh_copy(archived_run, tmp_path / "a"), _fresh_copy(archived_run,
                                                                         tmp_path / "b")
    in_process = _in_process(here)
    by_worker, sent = _streamed(there, earlier=[0, 2])
    assert all(isinstance(r, tuple) for r in sent)
    assert by_worker == in_process
    _same_files(here, there)


def test_an_end_that_is_not_the_run_made_ahead_is_made_from_the_end(archived_run, tmp_path):
    """Every trial was streamed (the worker made a complete run's reports ahead), then
    the end says otherwise: a lost trial, one more planned. The files are the end's."""
    here, there = _fresh_copy(archived_run, tmp_path / "a"), _fresh_copy(archived_run,
                                                                         tmp_path / "b")
    lost = [{"trial_id": "default/gone/00", "error": "its directory vanished"}]
    in_process = _in_process(here, total=4, lost=lost)
    by_worker, _ = _streamed(there, total=4, lost=lost)
    assert by_worker == in_process and by_worker["status"] == "incomplete"
    _same_files(here, there)


def test_unstreamed_trials_go_whole_and_mix_with_references(archived_run, tmp_path):
    """A worker told of some trials only (it started late, or they were not run by
    this invocation): the others' records go whole in the end."""
    here, there = _fresh_copy(archived_run, tmp_path / "a"), _fresh_copy(archived_run,
                                                                         tmp_path / "b")
    in_process = _in_process(here)
    by_worker, sent = _streamed(there, done=[1])
    assert [isinstance(r, tuple) for r in sent] == [False, True, False]
    assert by_worker == in_process
    _same_files(here, there)


def test_a_reference_the_worker_cannot_match_leaves_the_reports_to_ce_run(archived_run,
                                                                          tmp_path):
    """A record `ce run` read whose digest is not the one the worker reads: the worker
    writes nothing and says so (None): `ce run` writes them itself, from its records."""
    there = _fresh_copy(archived_run, tmp_path / "b")

    def wrong_digest(worker, records):
        return [(i, "0" * 64) for i in range(len(records))]

    by_worker, _ = _streamed(there, end=wrong_digest)
    assert by_worker is None
    assert not (there / "report.md").exists() and not (there / RUN_JSON).exists()


def test_a_worker_that_dies_mid_stream_costs_the_run_nothing(archived_run, tmp_path):
    here, there = _fresh_copy(archived_run, tmp_path / "a"), _fresh_copy(archived_run,
                                                                         tmp_path / "b")
    in_process = _in_process(here)

    def killed_after_one(worker, records):
        worker.proc.kill()
        worker.proc.wait()
        worker.trial_done(records[2].trial_id)  # sent to no one: no error
        return [worker.reference(r) for r in records]

    by_worker, _ = _streamed(there, done=[0, 1], end=killed_after_one)
    assert by_worker is None  # the caller writes them
    assert _in_process(there) == in_process
    _same_files(here, there)


KILLER = """\
import sys
from ce_runtime.cli import report_worker

real = report_worker.ReportWorker.trial_done
told = []

def trial_done(self, trial_id):
    real(self, trial_id)
    told.append(trial_id)
    if len(told) == {after}:
        self.proc.kill()
        self.proc.wait()

report_worker.ReportWorker.trial_done = trial_done
sys.argv = ["ce", *sys.argv[1:]]
from ce_runtime.cli import entry
entry()
"""


@pytest.mark.parametrize("after", [0, 1, 3])
def test_ce_run_whose_worker_is_killed_after_some_trials_writes_every_report(tmp_path,
                                                                              after,
                                                                              monkeypatch):
    """The worker killed after the first trial, or after the last (while it makes the
    reports ahead): `ce run` writes them all itself, as it would without a worker; and
    the worker left alone (0) writes them so too."""
    _tasks(tmp_path)
    (tmp_path / "killer.py").write_text(KILLER.format(after=after))
    res = subprocess.run([sys.executable, "killer.py", "run", "tasks", "--run-dir", "run",
                          "--junit-xml", "run/junit.xml"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=ENV)
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr and "warning" not in res.stderr, res.stderr
    assert "3/3 trial(s): 2 SUCCESS, 1 FAILURE" in res.stdout, res.stdout
    run = tmp_path / "run"
    again = _fresh_copy(run, tmp_path / "again")
    meta = json.loads((run / RUN_JSON).read_text())
    (again / RUN_JSON).write_text(json.dumps({"created_at": meta["created_at"]}))
    monkeypatch.chdir(tmp_path)  # where `ce run` ran: the JUnit's `file` is relative to it
    _in_process(again, run_id=meta["run_id"], config=meta["args"],
                junit_xml=str(again / "junit.xml"))
    _same_files(run, again)


def test_report_html_is_the_same_from_files_read_ahead_or_at_the_end(archived_run):
    """The worker reads each trial's files as it finishes (TrialReads), up to a byte
    budget: the page is the same whichever trials were read ahead."""
    from ce_runtime.report.html_trial import TrialReads
    from ce_runtime.report.run_end import prepare_run_reports

    dirs = _trial_dirs(archived_run)
    records = [read_record(d) for d in dirs]

    def page(reads):
        return prepare_run_reports(str(archived_run), "r1", {}, records, len(records),
                                   False, None, [], None, reads).html

    every, none, first = (TrialReads(os.path.realpath(archived_run)) for _ in range(3))
    for rec in records:
        every.read_ahead(rec)
    none.BUDGET = 0
    for rec in records:
        none.read_ahead(rec)
    first.BUDGET = 1  # the first trial's files fill it
    for rec in records:
        first.read_ahead(rec)
    assert [every.get(r) is not None for r in records] == [True] * 3
    assert [none.get(r) is not None for r in records] == [False] * 3
    assert [first.get(r) is not None for r in records] == [True, False, False]
    assert isinstance(page(None), bytes)
    assert page(every) == page(none) == page(first) == page(None)


def test_the_callers_own_work_runs_while_the_worker_writes(archived_run, tmp_path):
    """`meanwhile` (ce run: what its summary table imports) runs once the end is sent:
    the worker writes the reports meanwhile, not after it."""
    import time

    there = _fresh_copy(archived_run, tmp_path / "b")
    seen = []

    def meanwhile():
        deadline = time.monotonic() + 120
        while not (there / "report.md").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append((there / "report.md").exists())

    records = [read_record(d) for d in _trial_dirs(there)]
    worker = ReportWorker.start()
    summary = worker.write_reports(RunReports(str(there), "r1", {}, records, len(records),
                                              False, None, []), meanwhile=meanwhile)
    assert seen == [True] and summary is not None and summary["trials"] == 3


def test_a_bug_making_a_report_still_leaves_run_json_and_what_came_before(
        archived_run, tmp_path, monkeypatch):
    # the end makes every file before it writes one; a bug in report.md's rendering
    # (here: injected) must not cost the run its run.json and parquet files, which a
    # run's end that wrote each file as it made it had written before failing
    from ce_runtime import report

    def broken(*_a, **_k):
        raise RuntimeError("a bug in report.md")

    run = _fresh_copy(archived_run, tmp_path / "run")
    monkeypatch.setattr(report, "render_markdown", broken)
    with pytest.raises(RuntimeError, match=r"a bug in report\.md"):
        _in_process(run)
    assert json.loads((run / "run.json").read_text())["status"] == "complete"
    assert (run / "trials.parquet").exists() and (run / "results.parquet").exists()
    assert not (run / "report.md").exists() and not (run / "report.html").exists()
