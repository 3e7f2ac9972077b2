"""Archives are verified (issue 9): a plan must hash to its name, a workspace object to its
digest, a trace and workspace.json to the digests task.json recorded, task.json to its
own; a restore never writes outside its target; a damaged trace frame is an error naming
the file and offset. Any single-byte corruption or truncation of an archived trial gives
"damaged archive: PATH: why" or the same verdicts, never a silent flip."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ce_runtime.cli import main
from ce_runtime.grade.rescore import load_plan_file
from ce_runtime.store.archive import DamagedArchive, verified_trial
from ce_runtime.store.workspace_snapshot import restore_workspace, snapshot_workspace
from ce_runtime.trace import events as T

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: scripted
description: a scripted agent writes hello.py
initial_prompt: write hello.py
agent:
  type: script
  script:
    - write: hello.py
      content: |
        print("Hello, World!")
    - run: python hello.py
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: hello.py, description: wrote it}
  - type: command_executed
    command_pattern: "python hello"
    description: ran it
"""


def _bytes(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _load(path):
    return json.loads(_bytes(path))


# -- restore: names and links stay inside the target ---------------------------------------

def _objects_with(tmp_path, content: bytes = b"x\n") -> tuple[str, str]:
    ws = tmp_path / "src"
    ws.mkdir(exist_ok=True)
    (ws / "f").write_bytes(content)
    objects = str(tmp_path / "objects")
    digest = snapshot_workspace(str(ws), objects)["files"]["f"]["sha256"]
    return objects, digest


@pytest.mark.parametrize("name", ["/tmp/ce-escape-abs", "../escape", "a/../../escape",
                                  "a/./b", "a//b", ""])
def test_restore_refuses_absolute_and_dotdot_names(tmp_path, name):
    objects, digest = _objects_with(tmp_path)
    dest = tmp_path / "dest"
    with pytest.raises(DamagedArchive, match=r"damaged archive: workspace\.json: "):
        restore_workspace({"files": {name: {"sha256": digest, "mode": 0o644}}}, objects,
                          str(dest))
    assert not (tmp_path / "escape").exists()
    assert not os.path.exists("/tmp/ce-escape-abs")


@pytest.mark.parametrize("link", ["/etc", "../outside", "sub/../../outside", "..",
                                  "/tmp/ce-escape"])
def test_restore_refuses_links_pointing_out(tmp_path, link):
    objects, _ = _objects_with(tmp_path)
    with pytest.raises(DamagedArchive, match="pointing out of the workspace"):
        restore_workspace({"files": {"l": {"link": link}}}, objects, str(tmp_path / "dest"))
    assert not os.path.lexists(tmp_path / "dest" / "l")


def test_restore_never_writes_through_a_link(tmp_path):
    """A crafted manifest: a link to a directory, then a file "under" it. With a link
    inside the workspace it is still refused (a link is never a directory on restore),
    and a link that points out is refused before anything is written through it."""
    objects, digest = _objects_with(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    for link in ("../outside", "."):
        dest = tmp_path / f"dest{len(link)}"
        manifest = {"files": {"sub/keep": {"sha256": digest}, "d": {"link": link},
                              "d/pwned": {"sha256": digest, "mode": 0o755}}}
        with pytest.raises(DamagedArchive):
            restore_workspace(manifest, objects, str(dest))
        assert not (outside / "pwned").exists() and not (dest / "pwned").exists()
    assert os.listdir(outside) == []


def test_restore_keeps_inside_links_and_checks_objects(tmp_path):
    objects, digest = _objects_with(tmp_path)
    dest = tmp_path / "dest"
    restore_workspace({"files": {"a/f": {"sha256": digest, "mode": 0o600},
                                 "a/l": {"link": "f"}, "up": {"link": "a/../a/f"}}},
                      objects, str(dest))
    assert (dest / "a" / "l").read_bytes() == b"x\n" and (dest / "up").read_bytes() == b"x\n"
    obj = os.path.join(objects, digest[:2], digest[2:])
    os.chmod(obj, 0o644)
    with open(obj, "wb") as fh:
        fh.write(b"y\n")
    with pytest.raises(DamagedArchive, match="does not match its digest"):
        restore_workspace({"files": {"f": {"sha256": digest}}}, objects, str(tmp_path / "d2"))
    with pytest.raises(DamagedArchive, match="missing or unreadable"):
        restore_workspace({"files": {"f": {"sha256": "0" * 64}}}, objects,
                          str(tmp_path / "d3"))


# -- the trace reader: strict for archives, tolerant only when asked -----------------------

def test_damaged_trace_frame_is_an_error_naming_file_and_offset(tmp_path):
    path = str(tmp_path / "t.msgpack")
    events = [T.RunHeader(0.0, 1, "t", "task", "h", "script"), T.Message(1.0, "user", "hi"),
              T.RunEnd(2.0, "SUCCESS")]
    T.write_trace(path, events)
    data = _bytes(path)
    second = len(T.encode_frame(events[0]))
    assert len(T.load_trace(path).events) == 3
    with open(path, "wb") as fh:
        fh.write(data[:-3])
    with pytest.raises(T.TraceDamaged) as err:
        T.load_trace(path)
    third = second + len(T.encode_frame(events[1]))
    assert err.value.offset == third and path in str(err.value)
    assert "truncated" in str(err.value)
    tolerant = T.read_trace(path)  # the explicit tolerant reader says what it ignored
    assert len(tolerant.events) == 2 and tolerant.ignored_bytes == len(data) - 3 - third
    bad = bytearray(data)
    bad[second + 4] = 0xC1  # never valid msgpack
    with open(path, "wb") as fh:
        fh.write(bad)
    with pytest.raises(T.TraceDamaged, match=f"undecodable frame at byte {second}"):
        T.load_trace(path)


# -- an archived run, and corrupt copies of it ---------------------------------------------

@pytest.fixture(scope="module")
def archived_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("verified")
    (base / "t.yaml").write_text(TASK)
    res = subprocess.run([*CE, "run", "t.yaml", "--repeats", "2"], cwd=base,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    run = os.path.realpath(base / "runs" / "latest")
    trials = sorted(os.path.join(run, "default", "scripted", n) for n in ("00", "01"))
    for t in trials:
        rec = _load(os.path.join(t, "task.json"))
        assert rec["status"] == "SUCCESS"
        assert rec["trace_sha256"] == hashlib.sha256(
            _bytes(os.path.join(t, "trace.msgpack"))).hexdigest()
    return run


def _rescore(run: str, out: str):
    return CliRunner().invoke(main, ["rescore", run, "--out", out, "--offline"])


def _verdicts(out: str) -> dict[str, tuple]:
    got = {}
    for n in ("00", "01"):
        p = os.path.join(out, "default", "scripted", n, "task.json")
        if os.path.isfile(p):
            rec = _load(p)
            got[n] = (rec["status"], rec["weighted_score"],
                      tuple(c["passed"] for c in rec["criteria"]))
    return got


def test_intact_archive_rescores_the_same(archived_run, tmp_path):
    res = _rescore(archived_run, str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert _verdicts(str(tmp_path / "out")) == {n: ("SUCCESS", 1.0, (True, True))
                                                for n in ("00", "01")}
    # the rescored run records its own digests: it verifies in turn
    verified_trial(str(tmp_path / "out" / "default" / "scripted" / "00"))


def _plan_path(run: str) -> str:
    (name,) = os.listdir(os.path.join(run, "plans"))
    return os.path.join(run, "plans", name)


FILES = ("task.json", "trace.msgpack", "workspace.json", "plan")


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(FILES), truncate=st.booleans(),
       at=st.floats(min_value=0, max_value=1, exclude_max=True),
       xor=st.integers(min_value=1, max_value=255))
def test_any_corruption_is_reported_or_harmless(archived_run, tmp_path_factory, which,
                                                truncate, at, xor):
    work = tmp_path_factory.mktemp("c")
    run = str(work / "run")
    shutil.copytree(archived_run, run, symlinks=True,
                    ignore=shutil.ignore_patterns("rescored"))
    trial = os.path.join(run, "default", "scripted", "00")
    path = _plan_path(run) if which == "plan" else os.path.join(trial, which)
    data = bytearray(_bytes(path))
    pos = int(at * len(data))
    if truncate:
        data = data[:pos]
    else:
        data[pos] ^= xor
    os.chmod(path, 0o644)
    with open(path, "wb") as fh:
        fh.write(data)
    out = str(work / "out")
    res = _rescore(run, out)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output
    got = _verdicts(out)
    damaged = "damaged archive: " in res.output
    event(f"{which}: {'damaged' if damaged else 'same verdicts'}")
    for n in ("00", "01"):
        if n in got:  # re-scored: the same verdicts
            assert got[n] == ("SUCCESS", 1.0, (True, True)), (which, pos, res.output)
    if damaged:
        assert res.exit_code == 1
        assert "not re-scored (damaged archive)" in res.output
        if which != "plan":  # one damaged trial does not stop the other
            assert set(got) == {"01"}
    else:
        assert res.exit_code == 0 and set(got) == {"00", "01"}, res.output


def test_damaged_parts_named_by_rescore_and_explain(archived_run, tmp_path):
    run = str(tmp_path / "run")
    shutil.copytree(archived_run, run, symlinks=True)
    trial = os.path.join(run, "default", "scripted", "00")
    trace = os.path.join(trial, "trace.msgpack")
    data = _bytes(trace)
    with open(trace, "wb") as fh:  # a whole, decodable trace, but not the one recorded
        fh.write(data + T.encode_frame(T.Message(9.0, "user", "forged")))
    res = _rescore(run, str(tmp_path / "out"))
    assert res.exit_code == 1
    assert (f"damaged archive: {trace}: the trace does not match its recorded digest"
            in res.output)
    assert "1 trial(s) re-scored" in res.output
    ex = CliRunner().invoke(main, ["explain", trial])
    assert ex.exit_code == 1 and "damaged archive:" in ex.output, ex.output
    assert "does not match its recorded digest" in ex.output


def test_explain_crafted_workspace_writes_nowhere(archived_run, tmp_path):
    """The issue's case: a crafted workspace.json (digest re-recorded too, as a forger
    would) must not make `ce explain` write outside its scratch directory."""
    run = str(tmp_path / "run")
    shutil.copytree(archived_run, run, symlinks=True)
    trial = os.path.join(run, "default", "scripted", "00")
    ws_path = os.path.join(trial, "workspace.json")
    manifest = _load(ws_path)
    digest = next(iter(manifest["files"].values()))["sha256"]
    target = tmp_path / "pwned"
    manifest["files"] = {str(target): {"sha256": digest, "mode": 0o644}}
    os.unlink(ws_path)
    with open(ws_path, "w") as fh:
        json.dump(manifest, fh)
    task = _load(os.path.join(trial, "task.json"))
    task.pop("workspace_sha256")
    task.pop("record_sha256")
    # as an older ce wrote it: no digests to check
    os.unlink(os.path.join(trial, "task.json"))
    with open(os.path.join(trial, "task.json"), "w") as fh:
        json.dump(task, fh)
    ex = CliRunner().invoke(main, ["explain", trial])
    assert ex.exit_code == 1 and "an absolute name" in ex.output, ex.output
    assert not target.exists()


def test_plan_must_match_its_hash_name(archived_run, tmp_path):
    run = str(tmp_path / "run")
    shutil.copytree(archived_run, run, symlinks=True)
    path = _plan_path(run)
    name = os.path.basename(path)[:-5]
    assert load_plan_file(run, name)
    doc = _load(path)
    doc["plan"]["task_id"] = "other"
    os.unlink(path)
    with open(path, "w") as fh:
        json.dump(doc, fh)
    with pytest.raises(DamagedArchive, match="does not match its hash name"):
        load_plan_file(run, name)
    res = _rescore(run, str(tmp_path / "out"))
    assert res.exit_code == 1 and "2 trial(s) not re-scored" in res.output


def test_a_task_json_edited_after_the_trial_is_damaged_not_believed(archived_run, tmp_path):
    """task.json signs itself (record_sha256): a verdict edited by hand, or by a tool
    that does not re-sign, is a damaged archive for rescore and explain."""
    run = str(tmp_path / "run")
    shutil.copytree(archived_run, run, symlinks=True)
    trial = os.path.join(run, "default", "scripted", "00")
    path = os.path.join(trial, "task.json")
    task = _load(path)
    assert task["record_sha256"]
    task["status"] = "FAILURE" if task["status"] == "SUCCESS" else "SUCCESS"
    os.unlink(path)
    with open(path, "w") as fh:
        json.dump(task, fh)
    res = _rescore(run, str(tmp_path / "out"))
    assert res.exit_code == 1
    assert f"damaged archive: {path}: the record does not match its own recorded " \
           "digest" in res.output
    ex = CliRunner().invoke(main, ["explain", trial])
    assert ex.exit_code == 1 and "record_sha256" in ex.output, ex.output
