"""A run written by an older ce (its plans lack fields added to the schema since, and are
named by the hash of their whole JSON, as ce named plans before the hashed form of
ce_lang/plan_identity.py) is re-scored and explained as it was graded, not refused as
damaged (the plan file is checked against its name as written, either form), and
`ce run --resume` of it runs again only the trials whose plan really changed."""

import glob
import hashlib
import json
import os
import subprocess
import sys

import msgspec

from ce_runtime.store.archive import record_digest
from tests.test_rescore_jobs import TASK

CE = [sys.executable, "-m", "ce_runtime.cli"]


def ce(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def full_json_hash(plan_json) -> str:
    """How ce named a plan before the hashed form: sha256 of its whole canonical JSON."""
    return hashlib.sha256(msgspec.json.Encoder(order="sorted").encode(plan_json)).hexdigest()


def records(run: str) -> dict[str, dict]:
    out = {}
    for path in glob.glob(os.path.join(run, "default", "**", "task.json"), recursive=True):
        with open(path, encoding="utf-8") as fh:
            out[path] = json.load(fh)
    return out


def as_an_older_ce_wrote_it(run: str) -> dict[str, str]:
    """`run` as a ce before `agent.pricing` and the hashed form wrote it: every plan file
    without `pricing`, named by the hash of its whole JSON, and every trial's task.json
    (signed again, as ce signs it) naming that. Returns today's name -> the older one."""
    names = {}
    for path in glob.glob(os.path.join(run, "plans", "*.json")):
        with open(path, encoding="utf-8") as fh:
            written = json.load(fh)
        del written["plan"]["agent"]["pricing"]
        older = full_json_hash(written["plan"])
        assert older != written["hash"]
        names[written["hash"]] = older
        os.unlink(path)
        with open(os.path.join(run, "plans", f"{older}.json"), "w", encoding="utf-8") as fh:
            json.dump({**written, "hash": older}, fh)
    for path, record in records(run).items():
        record["plan_hash"] = names[record["plan_hash"]]
        record.pop("record_sha256", None)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({**record, "record_sha256": record_digest(record)}, fh, indent=1)
    return names


def finished_run(tmp_path, task: str = TASK, *args: str) -> str:
    (tmp_path / "files.yaml").write_text(task)
    proc = ce("run", "files.yaml", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return os.path.realpath(tmp_path / "runs" / "latest")


def test_a_plan_written_before_a_field_was_added_rescores_unchanged(tmp_path):
    run = finished_run(tmp_path)
    (older,) = as_an_older_ce_wrote_it(run).values()
    proc = ce("rescore", run, "--out", str(tmp_path / "again"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 trial(s) re-scored, 0 changed" in proc.stdout and "damaged" not in proc.stderr
    with open(tmp_path / "again" / "default" / "files" / "00" / "task.json") as fh:
        again = json.load(fh)
    assert again["plan_hash"] == older and again["status"] == "SUCCESS"


def test_a_trial_of_an_older_ce_is_explained_with_its_plan(tmp_path):
    run = finished_run(tmp_path)
    as_an_older_ce_wrote_it(run)
    proc = ce("explain", os.path.join(run, "default", "files", "00"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "damaged" not in proc.stdout + proc.stderr
    assert "json_check" in proc.stdout


def test_a_resume_after_the_upgrade_runs_only_the_unfinished_trials(tmp_path):
    run = finished_run(tmp_path, TASK, "--repeats", "3")
    names = as_an_older_ce_wrote_it(run)
    (today, older), = names.items()
    before = records(run)
    unfinished = os.path.join(run, "default", "files", "02", "task.json")
    os.unlink(unfinished)
    proc = ce("run", "--resume", run, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 trial(s), 2 already done" in proc.stderr, proc.stderr
    assert "another plan" not in proc.stderr and "damaged" not in proc.stderr
    after = records(run)
    for path, record in before.items():
        if path != unfinished:  # kept as they were: not run again
            assert after[path] == record and record["plan_hash"] == older
    assert after[unfinished]["plan_hash"] == today
    assert sorted(os.listdir(os.path.join(run, "plans"))) == sorted(
        [f"{today}.json", f"{older}.json"])
    with open(os.path.join(run, "run.json"), encoding="utf-8") as fh:
        meta = json.load(fh)
    assert (meta["status"], meta["trials"]) == ("complete", 3)


def test_a_resume_after_the_upgrade_runs_a_really_changed_plan_again(tmp_path):
    run = finished_run(tmp_path, TASK, "--repeats", "2")
    (today, older), = as_an_older_ce_wrote_it(run).items()
    (tmp_path / "files.yaml").write_text(TASK.replace("description: listed",
                                                      "description: listed the files"))
    proc = ce("run", "--resume", run, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "2 trial(s), 0 already done" in proc.stderr, proc.stderr
    assert "2 finished trial(s) ran with another plan" in proc.stderr
    again = records(run).values()
    assert len(again) == 2 and all(r["plan_hash"] not in (today, older) for r in again)
