"""A trial's files read by the caller first (`read_trial_files`: rescore reads task.json
once, for the TASKS filter and the checks) are checked and refused exactly as files read
by `verified_trial_data` itself: the same values, the same damaged-archive messages, the
same errors."""

from __future__ import annotations

import os

import pytest

from ce_runtime.store import archive as A


def _trial(path, digests: bool = True):
    task = {"schema_version": 1, "trial_id": "v/t/00", "status": "SUCCESS",
            "plan_hash": "ab" * 32, "task_dir": "", "criteria": []}
    (path).mkdir(parents=True)
    (path / "trace.msgpack").write_bytes(b"\x91\x01" * 2000)
    A.write_trial_files(str(path), task, {"version": 1, "files": {}})
    if not digests:  # as an older ce wrote it: no digests at all
        (path / "task.json").write_text(
            '{"schema_version": 1, "trial_id": "v/t/00", "status": "SUCCESS", '
            f'"plan_hash": "{"ab" * 32}", "criteria": []}}')


def _damage(path, how: str) -> None:
    if how == "no trace":
        os.unlink(path / "trace.msgpack")
    elif how == "trace is a directory":
        os.unlink(path / "trace.msgpack")
        (path / "trace.msgpack").mkdir()
    elif how == "trace changed":
        (path / "trace.msgpack").write_bytes(b"\x91\x02")
    elif how == "no manifest":
        os.unlink(path / "workspace.json")
    elif how == "manifest is a directory":
        os.unlink(path / "workspace.json")
        (path / "workspace.json").mkdir()
    elif how == "manifest not json":
        (path / "workspace.json").write_bytes(b"{")
    elif how == "no task.json":
        os.unlink(path / "task.json")
    elif how == "task.json not json":
        (path / "task.json").write_bytes(b"[1")


def _outcome(fn):
    try:
        return "ok", fn()
    except (A.DamagedArchive, OSError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("digests", [True, False])
@pytest.mark.parametrize("how", [
    "intact", "no trace", "trace is a directory", "trace changed", "no manifest",
    "manifest is a directory", "manifest not json", "no task.json", "task.json not json"])
def test_files_read_first_are_checked_as_read_in_place(tmp_path, how, digests):
    d = tmp_path / "t"
    _trial(d, digests)
    _damage(d, how)
    here = _outcome(lambda: A.verified_trial_data(str(d)))
    ahead = _outcome(lambda: A.verified_trial_data(str(d), A.read_trial_files(str(d))))
    assert here == ahead
    if how == "intact":
        assert here[0] == "ok"
    if how in ("trace changed", "no manifest") and digests:
        assert here[0] == "DamagedArchive"
