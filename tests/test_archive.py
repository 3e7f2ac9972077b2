"""Workspace snapshots are content-addressed and restore exactly; a trial directory can be
explained offline."""

import os
import stat

from click.testing import CliRunner

from ce_lang.compiler import compile_paths
from ce_lang.plan import plan_to_json
from ce_runtime.cli import main
from ce_runtime.store.archive import write_trial_files
from ce_runtime.store.atomic import write_json_atomic
from ce_runtime.store.workspace_snapshot import restore_workspace, snapshot_workspace
from ce_runtime.trace import events as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_snapshot_roundtrip_and_dedup(tmp_path):
    objects = tmp_path / "objects"
    ws1, ws2 = tmp_path / "a", tmp_path / "b"
    for ws in (ws1, ws2):
        (ws / "src").mkdir(parents=True)
        (ws / "src" / "same.txt").write_text("shared content\n")
        (ws / ".venv").mkdir()
        (ws / ".venv" / "big").write_text("skipped")
    (ws1 / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(ws1 / "run.sh", 0o755)
    os.symlink("src/same.txt", ws1 / "link")
    m1 = snapshot_workspace(str(ws1), str(objects))
    m2 = snapshot_workspace(str(ws2), str(objects))
    assert set(m1["files"]) == {"src/same.txt", "run.sh", "link"}
    assert m1["files"]["src/same.txt"]["sha256"] == m2["files"]["src/same.txt"]["sha256"]
    stored = [f for _, _, fs in os.walk(objects) for f in fs]
    assert len(stored) == 2  # same.txt once, run.sh once
    out = tmp_path / "restored"
    restore_workspace(m1, str(objects), str(out))
    assert (out / "src" / "same.txt").read_text() == "shared content\n"
    assert os.stat(out / "run.sh").st_mode & 0o777 == 0o755
    assert os.readlink(out / "link") == "src/same.txt"
    assert not (out / ".venv").exists()


def test_a_link_to_a_directory_is_kept_as_a_link(tmp_path):
    ws, objects = tmp_path / "ws", tmp_path / "objects"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    os.symlink("src/pkg", ws / "pkg")  # os.walk lists it among the directories
    os.symlink("src", ws / "src" / "loop")  # a link into its own parent is not walked
    manifest = snapshot_workspace(str(ws), str(objects))
    assert manifest["files"]["pkg"] == {"link": "src/pkg"}
    assert manifest["files"]["src/loop"] == {"link": "src"}
    assert set(manifest["files"]) == {"src/pkg/mod.py", "pkg", "src/loop"}
    out = tmp_path / "restored"
    restore_workspace(manifest, str(objects), str(out))
    assert (out / "pkg" / "mod.py").read_text() == "x = 1\n"  # read through the link
    assert os.readlink(out / "pkg") == "src/pkg"


def test_explain_a_trial_directory(tmp_path):
    trial = compile_paths([os.path.join(ROOT, "tasks", "hello_world.yaml")]).trials[0]
    run = tmp_path / "run"
    (run / "plans").mkdir(parents=True)
    (run / "objects").mkdir()
    write_json_atomic(str(run / "plans" / f"{trial.plan_hash}.json"),
                      {"hash": trial.plan_hash, "plan": plan_to_json(trial.plan)})
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.py").write_text('print("Hello, World!")\n')
    td = run / "default" / "hello_world" / "00"
    write_trial_files(str(td), {"trial_id": trial.trial_id, "plan_hash": trial.plan_hash,
                                "task_dir": trial.task_dir, "status": "SUCCESS"},
                      snapshot_workspace(str(ws), str(run / "objects")))
    T.write_trace(str(td / "trace.msgpack"),
                  [T.RunHeader(0, 1, trial.trial_id, "hello_world", trial.plan_hash, "script")])
    res = CliRunner().invoke(main, ["explain", str(td)])
    assert res.exit_code == 0, res.output
    assert "re-graded from the archive" in res.output
    assert "-> SUCCESS" in res.output
    (ws / "hello.py").write_text('print("bye")\n')  # the archive, not the live dir, is graded
    res = CliRunner().invoke(main, ["explain", str(td), "--criterion", "c2"])
    assert "PASS" in res.output and "stdout: 'Hello, World!'" in res.output


def test_stale_scratch_of_dead_runs_is_removed(tmp_path, monkeypatch):
    import tempfile

    from ce_runtime.execute.suite import clean_stale_scratch

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / "ce-run-999999999-abcd"  # no such pid
    alive = tmp_path / f"ce-run-{os.getpid()}-abcd"
    other = tmp_path / "unrelated"
    for d in (dead, alive, other):
        (d / "ws").mkdir(parents=True)
    clean_stale_scratch()
    assert not dead.exists() and alive.exists() and other.exists()


def test_resume_reruns_trials_whose_plan_changed(tmp_path):
    from ce_runtime.execute.suite import finished
    from ce_runtime.execute.trial import trial_dir_of

    trial = compile_paths([os.path.join(ROOT, "tasks", "hello_world.yaml")]).trials[0]
    tdir = trial_dir_of(str(tmp_path), trial)
    os.makedirs(tdir)
    record = {"plan_hash": trial.plan_hash, "trial_id": trial.trial_id, "status": "SUCCESS"}
    write_json_atomic(os.path.join(tdir, "task.json"), record)
    assert finished(str(tmp_path), trial) is None  # task.json alone: not finished
    for name in ("trace.msgpack", "workspace.json"):  # every file of a finished trial
        with open(os.path.join(tdir, name), "wb"):
            pass
    assert finished(str(tmp_path), trial) is not None
    older = {**record, "plan_hash": "0" * 64}
    write_json_atomic(os.path.join(tdir, "task.json"), older)
    assert finished(str(tmp_path), trial) is None
    # a record that is not one (no trial id, a plan_hash that names no plan) is no finished
    # trial either: the trial runs again
    write_json_atomic(os.path.join(tdir, "task.json"), {"plan_hash": trial.plan_hash})
    assert finished(str(tmp_path), trial) is None


def test_atomic_writes_get_the_mode_open_gives_not_a_temp_files_0600(tmp_path):
    """Reports and records are as readable as traces (0666 less the umask), whichever
    of them is durable."""
    from ce_runtime.store.atomic import FILE_MODE, write_bytes_atomic

    plain = tmp_path / "plain.txt"
    with open(plain, "w") as fh:
        fh.write("x")
    write_bytes_atomic(str(tmp_path / "report.md"), b"# report\n")
    write_json_atomic(str(tmp_path / "run.json"), {"a": 1}, durable=True)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"plain.txt": FILE_MODE, "report.md": FILE_MODE, "run.json": FILE_MODE}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_a_file_over_the_limit_is_recorded_not_kept(tmp_path):
    """`truncate -s 300M` costs an agent no disk: the snapshot records its size without
    reading it, keeps no object, the view answers that it exists but not its bytes, a
    restore leaves it out, and the files under the limit are kept as ever."""
    import errno

    import pytest

    from ce_runtime.store.archive import MAX_FILE_BYTES, FileTooLarge
    from ce_runtime.store.snapshot_view import SnapshotView
    from ce_runtime.store.workspace_snapshot import unshare_objects

    ws, objects = tmp_path / "ws", tmp_path / "objects"
    ws.mkdir()
    (ws / "small.txt").write_text("kept\n")
    with open(ws / "big.bin", "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    manifest = snapshot_workspace(str(ws), str(objects))
    mode = stat.S_IMODE((ws / "big.bin").stat().st_mode)
    assert manifest["files"]["big.bin"] == {"too_large": True, "mode": mode,
                                           "size": MAX_FILE_BYTES + 1}
    assert "sha256" in manifest["files"]["small.txt"]
    stored = sum(f.stat().st_size for f in objects.rglob("*") if f.is_file())
    assert stored == len("kept\n")
    view = SnapshotView(manifest, str(objects))
    assert view.is_file("big.bin") and view.lexists("big.bin")
    assert view.glob("*.bin") == ["big.bin"]
    with pytest.raises(FileTooLarge) as exc:
        view.read("big.bin")
    assert exc.value.errno == errno.EFBIG and f"{MAX_FILE_BYTES + 1:,} bytes" in str(exc.value)
    assert view.read("small.txt") == b"kept\n"
    out = tmp_path / "restored"
    restore_workspace(manifest, str(objects), str(out), link_objects=True)
    unshare_objects(manifest, str(out))
    assert sorted(os.listdir(out)) == ["small.txt"]
