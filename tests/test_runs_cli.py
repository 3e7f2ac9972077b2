"""`ce runs` and `ce trial files` through the real CLI, on runs made by `ce run` (an
`agent: {type: none}` task whose pre_run writes the workspace the tests then read back)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ce_runtime.store.archive import write_trial_files

CE = [sys.executable, "-m", "ce_runtime.cli"]

pytestmark = pytest.mark.slow

TASK = """\
task_id: files
description: writes a few files
agent: {type: none}
sandbox: {driver: tempdir, python: null}
pre_run:
  - command: >-
      mkdir -p src/pkg && printf 'print(1)\\n' > src/pkg/main.py &&
      printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod 755 run.sh &&
      head -c 5000 /dev/zero > blob.bin && ln -s src/pkg/main.py main-link.py
success_criteria:
  - type: file_exists
    path: run.sh
    description: run.sh exists
  - type: file_exists
    path: missing.txt
    description: never there (the trial fails)
"""

EXPECTED = {"src/pkg/main.py": b"print(1)\n", "run.sh": b"#!/bin/sh\necho hi\n",
            "blob.bin": bytes(5000)}


def ce(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    (root / "files.yaml").write_text(TASK)
    res = ce("run", "files.yaml", "--repeats", "2", cwd=root)
    assert res.returncode == 1, res.stderr  # one criterion never passes
    run = (root / "runs" / "latest").resolve()
    return root, run, run / "default" / "files" / "00"


def test_runs_lists_newest_first(made, tmp_path):
    _, run, _ = made
    runs = tmp_path / "runs"
    runs.mkdir()
    new = runs / run.name
    shutil.copytree(run, new, symlinks=True)
    old = runs / "20250101-000000-aaaa"
    shutil.copytree(run, old, symlinks=True)
    doc = json.loads((old / "run.json").read_text())
    doc.update(run_id=old.name, status="complete", trials=1, graded=1, passed=1,
               pass_rate=1.0, created_at="2025-01-01T00:00:00+00:00", exit_code=0)
    (old / "run.json").write_text(json.dumps(doc))
    os.symlink(new.name, runs / "latest")
    (runs / "not-a-run").mkdir()

    res = ce("runs", str(runs), "--format", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    assert [r["run_id"] for r in rows] == [run.name, old.name]  # `latest` is not a run
    first = rows[0]
    assert (first["tasks"], first["trials"], first["graded"], first["passed"]) == (1, 2, 2, 0)
    assert first["pass_rate"] == 0.0 and first["status"] == "complete"
    assert first["time"].endswith("+00:00")
    assert rows[1]["time"] == "2025-01-01T00:00:00+00:00"
    # the copy's run.json says when the run began (the summary that replaced the first
    # run.json kept no time: the file's, when the run ended, was listed)
    assert first["time"] == json.loads((new / "run.json").read_text())["created_at"]

    # `latest` named on its own is its run (it said "no run under runs/latest")
    one = ce("runs", str(runs / "latest"), "--format", "json", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert [r["run_id"] for r in json.loads(one.stdout)] == [run.name]

    text = ce("runs", cwd=tmp_path)  # default: ./runs
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STARTED", "TASKS", "TRIALS", "PASS", "RATE", "STATUS",
                                "VERDICT"]
    assert lines[1].startswith(run.name) and "0.0% (0/2)" in lines[1]
    assert lines[1].split()[-3:] == ["complete", "fail", "(1)"]  # what `ce run` exited
    assert lines[2].startswith(old.name) and lines[2].split()[-2:] == ["complete", "pass"]
    assert first["exit_code"] == 1

    # a copy under another name (an archive) is listed by its directory, with its run id
    shutil.copytree(run, runs / "archived", symlinks=True)
    text = ce("runs", cwd=tmp_path)
    names = [line.split("  ")[0] for line in text.stdout.splitlines()[1:]]
    assert sorted(names) == sorted([f"archived (run {run.name})", run.name, old.name])


SLOW_TASK = """\
task_id: slow
description: a pre_run that outlasts the test
agent: {type: none}
sandbox: {driver: tempdir, python: null}
pre_run:
  - {command: "sleep 60", timeout: 120}
success_criteria:
  - {type: file_exists, path: x, description: never reached}
"""


def _killed_run(tmp_path, while_running):
    """A `ce run` of SLOW_TASK killed with SIGKILL once its run.json and lock are there,
    `while_running(run)` called before; its run directory."""
    import signal
    import time

    (tmp_path / "slow.yaml").write_text(SLOW_TASK)
    run = tmp_path / "r"
    proc = subprocess.Popen([*CE, "run", "slow.yaml", "--run-dir", str(run)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (run / "run.lock").exists() or not (run / "run.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        while_running(run)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return run


def test_runs_tells_a_killed_run_from_a_running_one(tmp_path):
    """A `ce run` killed with SIGKILL leaves run.json saying `running` forever; `ce runs`
    listed it as running. The run's flock, which the kernel drops with its holder, tells
    the two apart. `ce runs RUN` (a run, not a directory of runs) lists that run."""
    def live(run):
        listed = json.loads(ce("runs", str(run), "-f", "json", cwd=tmp_path).stdout)
        assert [r["status"] for r in listed] == ["running"]

    run = _killed_run(tmp_path, live)
    dead = ce("runs", str(run), cwd=tmp_path)
    assert dead.returncode == 0, dead.stderr
    row = dead.stdout.splitlines()[1].split()
    assert row[0] == "r" and row[-2:] == ["killed", "-"]
    assert dead.stderr.strip() == (f"{run}: killed before it ended; `ce run --resume {run}` "
                                   "runs the trials it lacks")
    listed = json.loads(ce("runs", str(tmp_path), "-f", "json", cwd=tmp_path).stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [("r", "killed")]


def test_report_of_a_killed_run_says_it_did_not_finish_and_how_to_continue_it(tmp_path):
    """`ce report` of a run whose `ce run` was killed said 'trials.parquet: missing (the
    run wrote no results yet?)'. It says the run did not finish and that `ce run
    --resume RUN` continues it, told by the run's lock as `ce runs` tells it; a run
    still going is said to be one."""
    def live(run):
        going = ce("report", str(run), cwd=tmp_path)
        assert going.returncode == 1 and going.stderr.strip() == (
            f"ce report: {run}: the run has not finished (run.json says running): its "
            "results are written at its end"), going.stderr

    run = _killed_run(tmp_path, live)
    res = ce("report", str(run), cwd=tmp_path)
    assert res.returncode == 1 and res.stdout == "", res.stdout
    assert res.stderr.strip() == (
        f"ce report: {run}: the run did not finish: its `ce run` was killed before its end "
        "(run.json says running, no process holds its lock), so it wrote no results; "
        f"`ce run --resume {run}` continues it"), res.stderr


def test_new_run_ids_sort_as_they_were_made():
    """The id's suffix was random: runs of the same second listed (and picked as the
    latest) in a random order. It is now the milliseconds and one random digit."""
    import datetime as dt

    from ce_runtime.store.runs_root import new_run_id

    second = dt.datetime(2026, 12, 3, 4, 5, 6)
    ids = [new_run_id(second.replace(microsecond=ms * 1000)) for ms in (0, 7, 80, 999)]
    assert sorted(ids) == ids
    assert ids[0].startswith("20261203-040506-000") and len(ids[0]) == 20


def test_a_directory_of_runs_without_latest_means_the_same_run_to_every_command(
        made, tmp_path):
    """Without a `latest` link, rescore and explain took the greatest name, report and
    compare refused the directory, and `ce runs` put same-second runs in the order of
    their random suffixes. All now take the run `ce runs` lists first."""
    _, run, _ = made
    runs = tmp_path / "runs"
    runs.mkdir()
    doc = json.loads((run / "run.json").read_text())
    # the same second: the later-made one has the smaller random-looking name part
    for name in ("20261203-040506-7771", "20261203-040506-0009", "20250101-000000-ffff"):
        shutil.copytree(run, runs / name, symlinks=True)
        created = "2025-01-01T00:00:00+00:00" if name.startswith("2025") else \
            "2026-12-03T04:05:06+00:00"
        (runs / name / "run.json").write_text(json.dumps({**doc, "run_id": name,
                                                          "created_at": created}))
    newest = "20261203-040506-7771"
    listed = json.loads(ce("runs", str(runs), "-f", "json", cwd=tmp_path).stdout)
    assert [r["run_id"] for r in listed] == [newest, "20261203-040506-0009",
                                            "20250101-000000-ffff"]
    for args in (("report", "runs", "-o", "r.md"), ("compare", "runs", "runs", "-o", "c.md"),
                 ("explain", "runs", "--trial", "default/files/00"),
                 ("rescore", "runs", "--out", str(tmp_path / "re"))):
        res = ce(*args, cwd=tmp_path)
        assert res.returncode in (0, 1), (args, res.stderr)
        assert f"is a directory of runs; using the latest, {runs / newest}" in res.stderr, \
            (args, res.stderr)


def test_runs_usage(tmp_path):
    missing = ce("runs", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"ce runs: {tmp_path / 'nope'}: no such directory"
    (tmp_path / "empty").mkdir()
    empty = ce("runs", "empty", cwd=tmp_path)
    assert empty.returncode == 0 and empty.stdout == ""
    assert json.loads(ce("runs", "empty", "-f", "json", cwd=tmp_path).stdout) == []


def test_trial_files_lists_the_snapshot(made):
    root, _, trial = made
    manifest = json.loads((trial / "workspace.json").read_text())["files"]
    res = ce("trial", "files", str(trial), cwd=root)
    assert res.returncode == 0, res.stderr
    listed = {}
    for line in res.stdout.splitlines():
        size, rest = line.split(maxsplit=1)
        if size == "link":
            name, target = rest.split(" -> ")
            listed[name] = target
        else:
            digest, name = rest.split(maxsplit=1)
            listed[name] = (int(size), digest)
    for name, data in EXPECTED.items():
        assert listed[name] == (len(data), hashlib.sha256(data).hexdigest()[:12])
        assert manifest[name]["sha256"].startswith(listed[name][1])
    assert listed["main-link.py"] == "src/pkg/main.py"
    assert sorted(listed) == sorted(manifest)
    assert "file(s)" in res.stderr

    js = json.loads(ce("trial", "files", str(trial), "-f", "json", cwd=root).stdout)
    assert [e["path"] for e in js] == sorted(manifest)
    assert {e["path"]: e["sha256"] for e in js if e["sha256"]} == {
        k: v["sha256"] for k, v in manifest.items() if "sha256" in v}


def test_trial_files_extract_restores_the_same_bytes(made, tmp_path):
    root, run, trial = made
    manifest = json.loads((trial / "workspace.json").read_text())["files"]
    dest = tmp_path / "ws"
    res = ce("trial", "files", str(trial), "--extract", str(dest), cwd=root)
    assert res.returncode == 0, res.stderr
    for name, entry in manifest.items():
        path = dest / name
        if "link" in entry:
            assert path.is_symlink() and os.readlink(path) == entry["link"]
            continue
        data = path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert (path.stat().st_mode & 0o777) == entry["mode"]
        # the object store holds the very same bytes
        assert data == (run / "objects" / entry["sha256"][:2] / entry["sha256"][2:]) \
            .read_bytes()
    for name, data in EXPECTED.items():
        assert (dest / name).read_bytes() == data
    assert os.access(dest / "run.sh", os.X_OK)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")
                  if p.is_file() or p.is_symlink()) == sorted(manifest)

    # into an empty directory: fine; into a non-empty one: refused, untouched
    empty = tmp_path / "empty"
    empty.mkdir()
    assert ce("trial", "files", str(trial), "--extract", str(empty), cwd=root).returncode == 0
    again = ce("trial", "files", str(trial), "--extract", str(dest), cwd=root)
    assert again.returncode == 2
    assert again.stderr.strip() == (f"ce trial files: {dest}: not empty (--extract needs a "
                                    "new or empty directory)")


def test_trial_files_extract_that_cannot_be_written_names_the_path_given(made):
    """--extract /proc/x said "cannot write /proc: ...", naming a path not given."""
    root, _run, trial = made
    res = ce("trial", "files", str(trial), "--extract", "/proc/x", cwd=root)
    assert res.returncode == 1
    assert res.stderr.startswith("ce trial files: cannot write /proc/x: "), res.stderr
    assert not os.path.lexists("/proc/x")


def forge(run: Path, tmp_path: Path, name: str, entry: dict | None = None) -> Path:
    """A copy of `run` whose trial 00 has an extra workspace.json entry, its digest
    re-recorded in task.json as a forger would."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    trial = copy / "default" / "files" / "00"
    manifest = json.loads((trial / "workspace.json").read_text())
    manifest["files"][name] = entry or dict(manifest["files"]["run.sh"])
    task = json.loads((trial / "task.json").read_text())
    for f in ("workspace.json", "task.json"):  # hard links may share them with `run`
        (trial / f).unlink()
    write_trial_files(str(trial), task, manifest)
    return trial


def test_trial_files_refuses_a_crafted_dotdot_name(made, tmp_path):
    """A `../x` entry: listing and restoring refuse it, and nothing is written."""
    trial = forge(made[1], tmp_path, "../x")
    (tmp_path / "out").mkdir()
    dest = tmp_path / "out" / "ws"
    res = ce("trial", "files", str(trial), "--extract", str(dest), cwd=tmp_path)
    assert res.returncode == 1
    assert res.stderr.strip() == (f"ce trial files: damaged archive: {trial}/workspace.json: "
                                  "'../x': an empty, `.` or `..` component")
    assert not (tmp_path / "out" / "x").exists() and not dest.exists()
    assert os.listdir(tmp_path / "out") == []  # the temporary directory is gone too
    listing = ce("trial", "files", str(trial), cwd=tmp_path)
    assert listing.returncode == 1 and "'../x': an empty, `.` or `..` component" in \
        listing.stderr
    assert listing.stdout == ""


def test_trial_files_usage(made, tmp_path):
    root, run, trial = made
    res = ce("trial", "files", str(run), cwd=root)  # a run of two trials: which one?
    assert res.returncode == 2 and "name one with --trial" in res.stderr
    assert "default/files/00" in res.stderr and "Traceback" not in res.stderr
    direct = ce("trial", "files", str(trial), cwd=root).stdout
    assert ce("trial", "files", str(run), "--trial", "default/files/00",
              cwd=root).stdout == direct
    latest = ce("trial", "files", "runs", "--trial", "default/files/00", cwd=root)
    assert latest.stdout == direct and "using the latest" in latest.stderr
    twice = ce("trial", "files", str(trial), "--trial", "x", cwd=root)
    assert twice.returncode == 2 and "is a trial already" in twice.stderr
    (tmp_path / "empty").mkdir()
    res = ce("trial", "files", str(tmp_path / "empty"), cwd=root)
    assert res.returncode == 2 and "not a run directory" in res.stderr
    assert "Traceback" not in res.stderr


def test_trial_files_extract_refuses_a_link_out_and_leaves_nothing(made, tmp_path):
    """A link pointing out of the workspace passes the listing (it is shown with its
    target) but the restore refuses it: the half-restored temporary directory is gone."""
    trial = forge(made[1], tmp_path, "zz-escape", {"link": "../../../etc"})
    listing = ce("trial", "files", str(trial), cwd=tmp_path)
    assert listing.returncode == 0 and "zz-escape -> ../../../etc" in listing.stdout
    (tmp_path / "out").mkdir()
    res = ce("trial", "files", str(trial), "--extract", str(tmp_path / "out" / "ws"),
             cwd=tmp_path)
    assert res.returncode == 1
    # the agent's own link, not a damaged archive (it said "damaged archive")
    assert res.stderr.strip() == ("ce trial files: not extracted: 'zz-escape': a link the "
                                  "agent made pointing out of the workspace ('../../../etc'); "
                                  "--extract restores no link pointing outside DIR (the "
                                  f"listing shows it: ce trial files {trial})")
    assert os.listdir(tmp_path / "out") == []
