"""The typed trial record (ce_runtime/store/record.py): task.json decodes into it, encodes
back to the very same JSON, older and partial records still decode, what is no record is
a clear error, and the statuses are spelled out in one place only."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ce_runtime.store.archive import DamagedArchive
from ce_runtime.store.record import (
    RUN_LIMIT_STATUSES,
    STATUSES,
    InvalidRecord,
    Status,
    TrialRecord,
    as_record,
    decode_record,
    encode_record,
    read_record,
    record_dict,
)

ROOT = Path(__file__).resolve().parent.parent

# the keys `_record` in execute/trial.py wrote while task.json was a plain dict
OLD_WRITER_KEYS = {
    "schema_version", "trial_id", "variant_id", "experiment_id", "task_id", "suite_id",
    "row_id", "repeat", "tags", "task_file", "task_dir", "plan_hash", "agent", "model",
    "status", "stopped_early", "early_stop_reason", "early_stop", "monitor_gave_up",
    "weighted_score", "success", "started_at", "duration_s", "agent_outcome", "usage",
    "expected_turns", "criteria", "error", "pre_run", "post_run", "sandbox", "setup",
    "agent_left_running", "teardown_killed", "oom_killed", "integrity", "model_server",
    "judge_sessions", "dialog"}
DIGESTS = {"trace_sha256", "workspace_sha256", "record_sha256"}

TASK = """\
task_id: hello
description: writes a file, runs a command before and after
initial_prompt: hi
agent: {type: claude-code}
reference:
  solve:
    - {write: done.txt, content: ok}
    - {say: done}
sandbox:
  python: null
pre_run:
  - command: echo before
post_run:
  - command: echo after
success_criteria:
  - {type: file_exists, path: done.txt, description: the file is there}
  - {type: file_exists, path: missing.txt, description: never written, weight: 0}
"""


@pytest.fixture(scope="module")
def trial_dir(tmp_path_factory) -> Path:
    """One real trial (`ce run --agent oracle`), written by today's writer."""
    root = tmp_path_factory.mktemp("record")
    (root / "hello.yaml").write_text(TASK)
    proc = subprocess.run(
        [sys.executable, "-m", "ce_runtime.cli", "run", "hello.yaml", "--agent", "oracle",
         "--runs-root", "runs"], cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "CE_PLAIN": "1"})
    assert proc.returncode in (0, 1), proc.stderr
    [task] = (root / "runs" / "latest").glob("default/hello/*/task.json")
    return task.parent


def old_writer_dict(**over) -> dict:
    """A record as the dict writer built it (before the archive added its digests)."""
    rec = {
        "schema_version": 1, "trial_id": "v/t/00", "variant_id": "v", "experiment_id": None,
        "task_id": "t", "suite_id": None, "row_id": None, "repeat": 0, "tags": ["x"],
        "task_file": "tasks/t.yaml", "task_dir": "tasks", "plan_hash": "a" * 64,
        "agent": "claude-code", "model": "m", "status": "SUCCESS", "stopped_early": True,
        "early_stop_reason": "c0 passed",
        "early_stop": {"reason": "criterion_passed", "deciding_criterion": "c0",
                       "deciding_criterion_type": "file_exists",
                       "deciding_criterion_description": "d", "armed_criteria": ["c0"],
                       "tool_call_index": 2, "turn_index": 1, "turns_remaining_at_stop": None,
                       "gate_threshold": 1.0, "rule": "polarity"},
        "monitor_gave_up": {}, "weighted_score": 0.75, "success": True,
        "started_at": "2026-05-01T12:00:00+00:00", "duration_s": 1.5,
        "agent_outcome": {"reason": "stopped_early", "detail": ""},
        "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.01, "turns": 1,
                  "tool_calls": 2},
        "expected_turns": 3,
        "criteria": [{"id": "c0", "type": "file_exists", "description": "d", "kind": "binary",
                      "score": 1.0, "pass_threshold": 0.9, "passed": True, "weight": 1.0,
                      "gating": True, "advisory": False, "disabled": False, "error": None,
                      "outputs": {"observed": "yes", "expected": True},
                      "suite_thresholds": {"recall.yes": 0.5}}],
        "error": None,
        "pre_run": [{"command": "echo hi", "exit_code": 0, "stdout": "hi\n", "stderr": "",
                     "timed_out": False, "duration_ms": 3.0, "failed": False, "ok": True,
                     "fail_on_error": True}],
        "post_run": [],
        "sandbox": {"driver": "tempdir", "isolation": "none", "network": "full",
                    "limits": {"memory_mb": 512}, "not_enforced": ["network"]},
        "setup": ["copied 2 files"], "agent_left_running": [], "teardown_killed": [],
        "oom_killed": False, "integrity": [], "model_server": None, "judge_sessions": [],
        "dialog": {"turns": 2, "ended_by": "stop_token", "checks": [{"turn": 1,
                                                                     "passed": False}],
                   "user_messages": 1},
    }
    rec.update(over)
    return rec


# -- a current task.json ------------------------------------------------------------------

def test_a_current_task_json_decodes_and_encodes_to_the_same_bytes(trial_dir):
    raw = (trial_dir / "task.json").read_bytes()
    rec = read_record(str(trial_dir))
    assert isinstance(rec, TrialRecord) and rec.status in STATUSES
    assert rec.criteria[0].id == "c0" and rec.criteria[0].passed
    assert rec.pre_run[0].command == "echo before" and rec.post_run[0].stdout == "after\n"
    assert rec.sandbox is not None and rec.sandbox.driver
    assert rec.usage.turns >= 1 and rec.agent_outcome.reason == "finished"
    assert encode_record(rec) == raw  # the archive's layout, byte for byte
    assert set(json.loads(raw)) == OLD_WRITER_KEYS | DIGESTS  # no key added or lost
    assert read_record(str(trial_dir / "task.json")) == rec  # the file's path works too
    assert decode_record(raw) == rec


def test_the_round_trip_gives_the_old_writers_dict():
    old = old_writer_dict()
    rec = as_record(old)
    assert rec.early_stop.deciding_criterion == "c0" and rec.dialog.ended_by == "stop_token"
    assert rec.criteria[0].suite_thresholds == {"recall.yes": 0.5}
    assert record_dict(rec) == old and set(record_dict(rec)) == OLD_WRITER_KEYS
    assert decode_record(encode_record(rec)) == rec
    assert json.loads(encode_record(rec)) == old


def test_a_rescored_record_keeps_where_it_came_from():
    old = old_writer_dict(rescored_from="v/t/00", rescore_notes=["n"],
                          previous={"status": "FAILURE", "weighted_score": 0.5,
                                    "plan_hash": "b" * 64})
    rec = as_record(old)
    assert rec.previous.status == Status.FAILURE and rec.rescored_from == "v/t/00"
    assert record_dict(rec) == old


# -- older, partial and LOST records ---------------------------------------------------------

def test_an_older_task_json_decodes_with_defaults():
    older = old_writer_dict()
    for key in ("monitor_gave_up", "early_stop", "dialog", "judge_sessions", "model_server",
                "oom_killed", "integrity", "teardown_killed", "agent_left_running"):
        del older[key]
    older["criteria"][0].pop("kind")
    older["criteria"][0]["evidence"] = []  # a key this ce no longer writes: ignored
    older["a_future_field"] = {"x": 1}  # and one it does not know yet
    rec = decode_record(json.dumps(older).encode())
    assert rec.monitor_gave_up == {} and rec.early_stop is None and rec.dialog is None
    assert rec.criteria[0].kind is None and rec.oom_killed is False
    assert "a_future_field" not in record_dict(rec)


def test_a_partial_record_decodes():
    rec = decode_record(b'{"trial_id": "v/t/00", "status": "NOT_GRADED"}')
    assert rec.criteria == [] and rec.usage.tool_calls == 0 and rec.weighted_score is None
    assert rec.status == Status.NOT_GRADED and not rec.success


def test_the_lost_record():
    from ce_runtime.cli.run_output import Progress
    from ce_runtime.execute.executor import lost_record

    trial = SimpleNamespace(trial_id="v/t/00", variant_id="v", repeat=0,
                            plan=SimpleNamespace(task_id="t"))
    rec = lost_record(trial, "the directory vanished")
    assert rec.status == Status.LOST and rec.error == "the directory vanished"
    assert decode_record(encode_record(rec)) == rec
    assert decode_record(b'{"trial_id": "v/t/00", "status": "LOST", "error": "e"}').error == "e"
    progress = Progress(1, 0, quiet=True)
    progress.done(trial, rec)
    assert progress.lost == [{"trial_id": "v/t/00", "error": "the directory vanished"}]
    assert progress.by_status == {"LOST": 1}


# -- what is no record ---------------------------------------------------------------------

@pytest.mark.parametrize(("data", "why"), [
    (b"{not json", "not valid JSON"),
    (b"[]", "Expected `object`, got `array`"),
    (b'{"status": "SUCCESS"}', "missing required field `trial_id`"),
    (b'{"trial_id": "x", "status": "SUCCESS", "criteria": {"c0": 1}}', "$.criteria"),
    (b'{"trial_id": "x", "status": "SUCCESS", "weighted_score": "high"}',
     "$.weighted_score"),
])
def test_invalid_input_is_a_clear_error(data, why):
    with pytest.raises(InvalidRecord) as err:
        decode_record(data)
    assert why in str(err.value) and "not a valid trial record" in str(err.value)


def test_a_damaged_task_json_on_disk_is_a_damaged_archive(trial_dir, tmp_path):
    import shutil

    copy = tmp_path / "trial"
    shutil.copytree(trial_dir, copy)
    task = copy / "task.json"
    doc = json.loads(task.read_text())
    task.write_text(json.dumps({**doc, "weighted_score": 0.0}))  # its digest now lies
    with pytest.raises(DamagedArchive, match="record_sha256"):
        read_record(str(copy))
    task.write_text("{not json")
    with pytest.raises(DamagedArchive, match="not valid JSON"):
        read_record(str(copy))
    del doc["record_sha256"]  # an undigested record is only checked for its form
    task.write_text(json.dumps({**doc, "usage": {"turns": "many"}}))
    with pytest.raises(DamagedArchive, match=r"usage\.turns"):
        read_record(str(copy))


# -- the one definition of the statuses ------------------------------------------------------

# Status literals still spelled out elsewhere (at most this many per module): none
PENDING: dict[str, int] = {}


def _status_literals(path: Path) -> list[int]:
    names = {s.value for s in Status}
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names]


def test_statuses_are_spelled_out_only_in_the_record_module():
    offenders = []
    for path in sorted((ROOT / "ce_runtime").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "ce_runtime/store/record.py":
            continue
        lines = _status_literals(path)
        if len(lines) > PENDING.get(rel, 0):
            offenders.append(f"{rel}: lines {lines}")
    assert not offenders, "use ce_runtime.store.record.Status instead of a string:\n" + \
        "\n".join(offenders)


def test_the_status_groups():
    assert set(STATUSES) == set(Status) - {Status.LOST}  # LOST is never written
    assert set(RUN_LIMIT_STATUSES) < set(STATUSES)
    assert Status.SUCCESS == "SUCCESS" and f"{Status.LOST}" == "LOST"
    assert json.dumps([Status.ERROR]) == '["ERROR"]'
