"""The staged run's files are json's bytes, however they are made.

task.json and evidence.json are written byte for byte as `write_trial_files` writes them
(`json.dumps`, sorted keys, indented). ce makes them with msgspec where msgspec's bytes
are provably json's (`sorted_json`), and with json elsewhere: these tests hold both
paths to json's output, and show that the fast path is the one ordinary records take.
"""

from __future__ import annotations

import errno
import json
import math
import os
import random
import struct
import sys

import pytest

from ce_runtime.store import archive as A
from ce_runtime.store.staged_run import StagedRun, json_bytes, signed_record


def _json(value, ascii_only=False) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=ascii_only).encode()


def _floats():
    rng = random.Random(14)
    for e in range(-323, 308):
        for _ in range(4):
            yield rng.random() * 10.0 ** e
            yield -float(rng.randint(0, 10 ** rng.randint(0, 17))) * 10.0 ** e
    for _ in range(5_000):  # scores, durations, costs
        yield round(rng.uniform(-1000, 1000), rng.randint(0, 12))
    for _ in range(20_000):
        v = struct.unpack("d", rng.randbytes(8))[0]
        if math.isfinite(v):
            yield v
    for k in range(1075):
        yield 2.0 ** -k
        if k < 1024:
            yield 2.0 ** k
    yield from (0.0, -0.0, 1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 9999999999999998.0, 0.1)


def test_every_float_msgspec_writes_is_written_as_json_writes_it():
    """What `sorted_json` accepts is json's spelling; what it refuses goes to json.
    Both happen: most floats are fast, exponents and tiny ones are not."""
    fast = slow = 0
    for v in _floats():
        got = A.sorted_json({"x": [v]})
        if got is None:
            slow += 1
        else:
            fast += 1
            assert got == _json({"x": [v]}), v
    assert fast > 5_000 and slow > 10_000


@pytest.mark.parametrize("value", [
    {"a": float("nan")}, {"a": [float("inf")]}, {"a": -float("inf")},  # msgspec: null
    {"a": (1, 2)}, {1: "int key"}, {"a": b"bytes"}, {"a": {1, 2}},  # not JSON values
    {"a": 1e-05}, {"a": 1e16}, {"a": 1.5e300},  # floats spelled otherwise
])
def test_what_msgspec_would_write_otherwise_is_left_to_json(value):
    assert A.sorted_json(value) is None
    assert A.ascii_sorted_json(value) is None


@pytest.mark.parametrize("value", [
    {"b": 1, "a": [True, False, None, 0.5, -3, 2 ** 70, ""]},
    {"quote": 'say "hi"\\n', "ctl": "\x00\x1f\t\n\r\x08\x0c", "slash": "a/b"},
    {"é": "ü", "\uffff": "\U00010000", "\ue000": 1, "z": "\u2028\x7f"},  # non-ASCII keys
    {"nested": {"z": {"y": [{"b": 1.25, "a": None}]}, "a": {}}, "list": []},
])
def test_plain_json_values_are_json_bytes(value):
    assert A.sorted_json(value) == _json(value)
    ascii_form = A.ascii_sorted_json(value)
    if ascii_form is not None:
        assert ascii_form == _json(value, ascii_only=True)
    assert json_bytes(value) == (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def _record(**extra):
    rec = {"schema_version": 1, "trial_id": "default/t/00", "task_id": "t", "status":
           "SUCCESS", "weighted_score": 0.9, "duration_s": 1.207, "error": None,
           "plan_hash": "cd" * 32,
           "usage": {"input_tokens": 10, "output_tokens": 3, "cost_usd": 0.0},
           "criteria": [{"id": "c1", "type": "file_exists", "score": 1.0, "weight": 1.0,
                         "outputs": {"observed": "yes"}, "passed": True}],
           "previous": {"status": "SUCCESS", "weighted_score": 0.9, "plan_hash": "ab" * 32}}
    rec.update(extra)
    return rec


@pytest.mark.parametrize("extra", [
    {}, {"description": "naïve — ünïcode"}, {"duration_s": 1e-07},
    {"weighted_score": float("nan")}, {"notes": ["escaped \\u0041 and \"quotes\""]},
    {"tags": ("a", "b")}, {"error": "\x7f"},
])
def test_task_json_is_the_archives_bytes(tmp_path, extra):
    """`signed_record` (msgspec where it can, json elsewhere) writes what
    `write_trial_files` writes, digests included; the archive reads it back verified."""
    task = _record(**extra)
    ref = tmp_path / "ref"
    A.write_trial_files(str(ref), task, {"version": 1, "files": {}})
    ws_digest = A.file_sha256(str(ref / "workspace.json"))
    assert signed_record(task, None, ws_digest) == (ref / "task.json").read_bytes()
    # the digest the reader checks, on the fast path and off it
    loaded = A.load_task_record(str(ref))
    assert loaded["record_sha256"] == A.record_digest(loaded)


def test_the_fast_paths_are_the_ones_ordinary_records_take():
    """Not a speed test: the msgspec path is taken (a regression to json everywhere
    would pass every byte test above)."""
    body = _record()
    assert A.sorted_json(body) is not None
    assert A.ascii_sorted_json(body) is not None



@pytest.mark.parametrize(("extra", "plain"), [
    ({}, True), ({"duration_s": 1e-05}, False), ({"usage": {"cost_usd": 2.5e16}}, False),
    ({"weighted_score": float("nan")}, False), ({"big": 10 ** 30}, True)])
def test_a_record_read_back_is_known_plain_or_not(tmp_path, extra, plain):
    """Reading task.json tells whether msgspec may encode the record again unchecked
    (its digest): not when a float would be spelled otherwise, nor for NaN."""
    A.write_trial_files(str(tmp_path), _record(**extra), {"version": 1, "files": {}})
    value, got = A._archived_json(str(tmp_path / "task.json"))
    assert got is plain
    assert value["record_sha256"] == A._decoded_record_digest(value, got) \
        == A.record_digest(value)


def test_a_staged_trial_is_signed_as_written(tmp_path):
    """StagedRun.trial: task.json as write_trial_files lays it out, evidence.json as json
    writes it, the trace and manifest linked."""
    src = tmp_path / "src"
    task = _record()
    evidence = {"schema_version": 1, "criteria": {"c1": [{"ran": "cat x", "exit": 0}]}}
    A.write_trial_files(str(src), task, {"version": 1, "files": {}}, evidence)
    staged = StagedRun(str(tmp_path / "out"))
    with staged:
        staged.trial("default/t/00", str(src), task, evidence, False, None, None)
        staged.commit()
    out = tmp_path / "out" / "default" / "t" / "00"
    for name in ("task.json", "evidence.json", "workspace.json"):
        assert (out / name).read_bytes() == (src / name).read_bytes(), name
    assert os.stat(out / "workspace.json").st_ino == os.stat(src / "workspace.json").st_ino


def test_many_trials_are_all_written_by_commit(tmp_path):
    """The writer process writes every trial sent before the directory is put in place."""
    src = tmp_path / "src"
    A.write_trial_files(str(src), _record(), {"version": 1, "files": {}},
                        {"schema_version": 1, "criteria": {}})
    staged = StagedRun(str(tmp_path / "out"))
    with staged:
        for i in range(300):
            staged.trial(f"v/t/{i:03d}", str(src), {**_record(), "repeat": i},
                         {"schema_version": 1, "criteria": {}}, False, None, None)
        staged.commit()
    for i in range(300):
        out = tmp_path / "out" / "v" / "t" / f"{i:03d}"
        assert json.loads((out / "task.json").read_bytes())["repeat"] == i
        assert (out / "evidence.json").read_bytes() == (src / "evidence.json").read_bytes()
    assert not [n for n in os.listdir(tmp_path) if ".partial" in n]


def test_a_failed_write_is_raised_and_nothing_is_left(tmp_path):
    """A write that fails in the writer process (here: a file where a trial's directory
    goes) is raised in ce, with its errno and file name, by the next trial or by commit;
    the staged directory is removed, as when the write failed in ce's own process."""
    src = tmp_path / "src"
    A.write_trial_files(str(src), _record(), {"version": 1, "files": {}})
    for then_trial in (False, True):
        out = tmp_path / f"out{then_trial}"
        with pytest.raises(OSError) as raised, StagedRun(str(out)) as staged:
            staged.write("v", b"not a directory")
            staged.trial("v/t/00", str(src), _record(), None, False, None, None)
            if then_trial:
                staged._writer.wait(timeout=60)  # the writer has failed by now
                staged.trial("v/t/01", str(src), _record(), None, False, None, None)
            staged.commit()
        assert raised.value.errno == errno.EEXIST  # as os.makedirs says it
        assert raised.value.filename == os.path.join(staged.path, "v")
        assert not out.exists()
        assert not [n for n in os.listdir(tmp_path) if ".partial" in n]


def test_a_digest_made_in_pieces_is_the_digest():
    import hashlib

    for n in (0, 1, 2046, 2047, 2048, 4094, 4095, 10_000, 65_537):
        data = bytes(range(256)) * (n // 256) + bytes(n % 256)
        assert A.held_sha256(data) == hashlib.sha256(data).hexdigest(), n


def test_a_writer_that_dies_is_an_error_not_a_lost_trial(tmp_path):
    """Killed mid-run (not a failed write: no reason said), the writer is still an
    OSError in ce, and nothing is put in place."""
    src = tmp_path / "src"
    A.write_trial_files(str(src), _record(), {"version": 1, "files": {}})
    out = tmp_path / "out"
    with pytest.raises(OSError, match="trial writer"), StagedRun(str(out)) as staged:
        staged.trial("v/t/00", str(src), _record(), None, False, None, None)
        staged._writer.kill()
        staged._writer.wait(timeout=60)
        staged.trial("v/t/01", str(src), _record(), None, False, None, None)
        staged.commit()
    assert not out.exists() and not [n for n in os.listdir(tmp_path) if ".partial" in n]


def test_without_a_writer_process_the_files_are_the_same(tmp_path, monkeypatch):
    """When the writer cannot start, ce writes the trials itself: the same bytes, the
    same links."""
    import subprocess

    src = tmp_path / "src"
    evidence = {"schema_version": 1, "criteria": {}}
    A.write_trial_files(str(src), _record(), {"version": 1, "files": {}}, evidence)
    trees = []
    for name, start in (("process", True), ("inline", False)):
        if not start:
            def refuse(*a, **k):
                raise OSError(errno.EAGAIN, "no process for you")
            monkeypatch.setattr(subprocess, "Popen", refuse)
        with StagedRun(str(tmp_path / name)) as staged:
            for i in range(3):
                staged.trial(f"v/t/{i:02d}", str(src), {**_record(), "repeat": i}, evidence,
                             False, None, None)
            assert (staged._writer is not None) is start
            staged.commit()
        root = tmp_path / name
        files = [p for p in sorted(root.rglob("*")) if p.is_file()]
        inodes = [p.stat().st_ino for p in files]
        archived = {p.stat().st_ino for p in src.iterdir()}
        # a file's bytes, whether it links the archive's, how many files share its inode
        trees.append({str(p.relative_to(root)): (p.read_bytes(), ino in archived,
                                                 inodes.count(ino))
                      for p, ino in zip(files, inodes, strict=True)})
    assert trees[0] == trees[1] and len(trees[0]) == 9
    assert trees[0]["v/t/01/workspace.json"][1:] == (True, 3)
    assert trees[0]["v/t/01/evidence.json"][1:] == (False, 3)  # written once, linked


def test_the_writer_is_the_standard_library_only():
    """It runs as `python -I -S trial_writer.py`: nothing of ce or of site-packages."""
    import subprocess

    from ce_runtime.store import atomic, trial_writer

    assert trial_writer.FILE_MODE == atomic.FILE_MODE
    res = subprocess.run([sys.executable, "-I", "-S", trial_writer.__file__], text=True,
                         capture_output=True, timeout=60)
    assert res.returncode == 2 and "usage: trial_writer.py ROOT" in res.stderr
