"""The report worker writes a run's reports exactly as `ce run` writes them itself, and
never costs the run anything when it fails: see ce_runtime/cli/report_worker.py."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ce_runtime.cli.report_worker import ReportWorker
from ce_runtime.report.run_end import write_run_reports
from ce_runtime.store.record import read_record
from ce_runtime.store.report_job import RescoreReports, RunReports

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ("run.json", "report.md", "report.html", "junit.xml")
TASK = """task_id: {name}
description: worker test
agent: {{type: none}}
sandbox: {{python: null}}
pre_run:
  - command: "printf hi > out.txt"
success_criteria:
  - {{type: file_exists, path: out.txt, description: written}}
  - {{type: file_contains, path: out.txt, includes: [{word}], description: says it}}
"""
ENV = {**os.environ, "CE_PLAIN": "1", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def archived_run(tmp_path_factory):
    """A real run (one pass, one fail), its reports written in-process."""
    base = tmp_path_factory.mktemp("worker")
    (base / "tasks").mkdir()
    for name, word in (("passes", "hi"), ("fails", "bye")):
        (base / "tasks" / f"{name}.yaml").write_text(TASK.format(name=name, word=word))
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "tasks",
                          "--run-dir", "run", "-q"], cwd=base, capture_output=True,
                         text=True, timeout=300, env={**ENV, "CE_REPORT_WORKER": "0"})
    assert res.returncode == 1, res.stderr
    return base / "run"


def _job(archive: Path, **kw) -> RunReports:
    records = [read_record(p) for p in sorted(glob.glob(f"{archive}/*/*/*/task.json"))]
    fields = dict(run_dir=str(archive), run_id="r1", config={"paths": ["tasks"]},
                  records=records, total=len(records) + 1, interrupted=False,
                  junit_xml=str(archive / "junit.xml"), lost=[
                      {"trial_id": "default/gone/00", "error": "its directory vanished"}])
    fields.update(kw)
    return RunReports(**fields)


def _fresh_copy(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest)
    for name in (*REPORTS, "trials.parquet", "results.parquet"):
        (dest / name).unlink(missing_ok=True)
    return dest


def test_the_worker_writes_the_same_files_as_ce_run_itself(archived_run, tmp_path):
    here, there = _fresh_copy(archived_run, tmp_path / "a"), _fresh_copy(archived_run,
                                                                         tmp_path / "b")
    a, b = _job(here), _job(there)
    in_process = write_run_reports(a.run_dir, a.run_id, a.config, a.records, a.total,
                                   a.interrupted, a.junit_xml, a.lost)
    worker = ReportWorker.start()
    assert worker is not None
    by_worker = worker.write_reports(b)
    assert worker.proc.wait(timeout=60) == 0  # it replied first: its exit is not waited for
    assert by_worker == in_process and by_worker["status"] == "incomplete"
    assert by_worker["lost_trials"] == [{"trial_id": "default/gone/00",
                                         "error": "its directory vanished"}]
    for name in REPORTS:
        mine, theirs = (here / name).read_text(), (there / name).read_text()
        assert mine.replace(str(here), "RUN") == theirs.replace(str(there), "RUN"), name
    for name in ("trials.parquet", "results.parquet"):
        assert pl.read_parquet(here / name).equals(pl.read_parquet(there / name)), name


def test_a_rescores_reports_are_the_same_by_the_worker(archived_run, tmp_path):
    from ce_runtime.report.run_end import write_rescore_reports

    here, there = tmp_path / "a", tmp_path / "b"
    here.mkdir()
    there.mkdir()
    job = RescoreReports(str(there), "r1", str(archived_run), _job(archived_run).records)
    in_process = write_rescore_reports(str(here), job.records, job.run_id, str(archived_run))
    by_worker = ReportWorker.start().write_reports(job)
    assert by_worker == in_process and by_worker["exit_code"] == 1
    for name in ("run.json", "report.md", "report.html", "trials.parquet",
                 "results.parquet"):  # report.html too, as a run's end writes it
        assert (here / name).read_bytes() == (there / name).read_bytes(), name


def test_a_failed_write_comes_back_as_the_same_oserror(archived_run, tmp_path):
    job = _job(archived_run, run_dir=str(tmp_path / "no" / "such" / "dir"))
    worker = ReportWorker.start()
    with pytest.raises(OSError) as raised:
        worker.write_reports(job)
    with pytest.raises(OSError) as in_process:
        write_run_reports(job.run_dir, job.run_id, job.config, job.records, job.total,
                          job.interrupted, job.junit_xml, job.lost)
    assert type(raised.value) is type(in_process.value) is FileNotFoundError
    assert raised.value.errno == in_process.value.errno
    assert os.path.dirname(raised.value.filename) == os.path.dirname(in_process.value.filename)


def test_a_dead_worker_means_the_run_writes_its_reports_itself(archived_run, tmp_path):
    worker = ReportWorker.start()
    worker.proc.kill()
    worker.proc.wait()
    assert worker.write_reports(_job(_fresh_copy(archived_run, tmp_path / "c"))) is None
    assert not (tmp_path / "c" / "report.md").exists()  # nothing written: the caller does it


def test_a_worker_without_a_job_ends_on_end_of_input():
    worker = ReportWorker.start()
    worker.close()
    assert worker.proc.returncode == 0


def test_ce_run_writes_its_reports_without_importing_polars(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK.format(name="t", word="hi"))
    code = ("import sys\n"
            "from ce_runtime.cli import main\n"
            "try:\n"
            "    main(['run', 't.yaml', '--run-dir', 'run', '-q'])\n"
            "except SystemExit as done:\n"
            "    print('exit', done.code, 'polars' in sys.modules)\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env=ENV)
    assert res.stdout.splitlines()[-1] == "exit 0 False", res.stderr
    assert (tmp_path / "run" / "report.html").is_file()
    assert (tmp_path / "run" / "trials.parquet").is_file()
    off = subprocess.run([sys.executable, "-c", code.replace("'run', '-q'", "'run0', '-q'")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**ENV, "CE_REPORT_WORKER": "0"})
    assert off.stdout.splitlines()[-1] == "exit 0 True", off.stderr


def test_warm_up_writes_nothing(tmp_path, monkeypatch):
    """The worker's warm-up (a made-up trial's report, before the job arrives) stays in
    memory: no file anywhere it could write (its run directory is "")."""
    from ce_runtime.report.run_end import warm_up

    monkeypatch.chdir(tmp_path)
    warm_up()
    assert list(tmp_path.iterdir()) == []


def test_the_worker_loads_neither_click_nor_attrs():
    """Its imports are the longest path of a short run (Polars, ~0.2 s of CPU): nothing
    it does not use. click and attrs took ~25 ms of it when the worker's module sat in the
    cli package and the report held its values in attrs classes."""
    code = ("import sys\n"
            "from ce_runtime.report import job\n"
            "job.load()\n"
            "from ce_runtime.report.run_end import warm_up\n"
            "warm_up()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('click', 'attr', 'attrs', 'cattrs')), 'polars' in sys.modules)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=ENV)
    assert res.stdout.strip() == "[] True", res.stderr


@pytest.mark.parametrize(("argv", "command", "wanted"), [
    (["run", "tasks/"], "run", True),
    (["rescore", "runs/latest"], "rescore", True),
    (["run", "tasks/", "--help"], "run", False),
    (["run", "-h"], "run", False),
    (["--help", "run"], None, False),
    (["--version"], None, False),
    (["compile", "tasks/"], "compile", False),
    ([], None, False),
])
def test_which_commands_start_their_worker_first(argv, command, wanted):
    from ce_runtime.boot import command_of, wants_report_worker

    assert command_of(argv) == command
    assert wants_report_worker(argv) is wanted


_SCRIPT = """import atexit, sys
from ce_runtime import boot, worker_process
spawned = []
def spy():
    proc = real()
    spawned.append((proc.pid, 'click' in sys.modules))
    return proc
real, worker_process.spawn = worker_process.spawn, spy
atexit.register(lambda: print('spawned', spawned, 'polars' in sys.modules))
sys.argv = ['ce', *sys.argv[1:]]
boot.entry()
"""


def _script(tmp_path, *argv: str, **env: str) -> tuple[subprocess.CompletedProcess, list]:
    res = subprocess.run([sys.executable, "-c", _SCRIPT, *argv], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env={**ENV, **env})
    last = res.stdout.splitlines()[-1].split(" ", 1)[1]
    spawned, polars_loaded = last.rsplit(" ", 1)
    return res, [eval(spawned), polars_loaded == "True"]


def test_the_ce_script_starts_the_worker_before_loading_the_command(tmp_path):
    """`ce run` (the installed script: ce_runtime/boot.py) starts one worker, before
    click is loaded, and the run's reports are the worker's (no Polars in `ce`)."""
    (tmp_path / "t.yaml").write_text(TASK.format(name="t", word="hi"))
    res, (spawned, polars_loaded) = _script(tmp_path, "run", "t.yaml", "--run-dir", "run")
    assert res.returncode == 0, res.stderr
    assert [loaded for _, loaded in spawned] == [False]  # one worker, click not loaded
    assert not polars_loaded
    assert (tmp_path / "run" / "report.html").is_file()
    res, (spawned, polars_loaded) = _script(tmp_path, "run", "t.yaml", "--run-dir", "r0",
                                            CE_REPORT_WORKER="0")
    assert res.returncode == 0 and spawned == [] and polars_loaded, res.stderr


def test_a_worker_the_command_never_claims_is_ended_with_it(tmp_path):
    """A usage error ends `ce run` before it claims its worker: the worker (still
    importing Polars) is killed and waited for, not left to finish on its own."""
    res, (spawned, _) = _script(tmp_path, "run", "--no-such-option")
    assert res.returncode == 2, res.stderr
    assert len(spawned) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(spawned[0][0], 0)
    res, (spawned, _) = _script(tmp_path, "run", "--help")
    assert res.returncode == 0 and spawned == []
