"""A run archived by an older ce (its plans lack fields added to the schema since) is
re-scored as it was graded, not refused as damaged: the plan file is checked against
its name as written (ce_lang.plan.plan_json_hash), and graded under that name."""

import json
import os
import subprocess
import sys

from ce_lang.api import plan_json_hash
from ce_runtime.store.archive import record_digest
from tests.test_rescore_jobs import TASK

CE = [sys.executable, "-m", "ce_runtime.cli"]


def test_a_plan_written_before_a_field_was_added_rescores_unchanged(tmp_path):
    (tmp_path / "files.yaml").write_text(TASK)
    proc = subprocess.run([*CE, "run", "files.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = os.path.realpath(tmp_path / "runs" / "latest")
    trial = os.path.join(run, "default", "files", "00")
    with open(os.path.join(trial, "task.json"), encoding="utf-8") as fh:
        record = json.load(fh)
    old_path = os.path.join(run, "plans", f"{record['plan_hash']}.json")
    with open(old_path, encoding="utf-8") as fh:
        written = json.load(fh)
    # the plan as an older ce wrote it: without `agent.pricing` (added in this version)
    del written["plan"]["agent"]["pricing"]
    older = plan_json_hash(written["plan"])
    os.unlink(old_path)
    with open(os.path.join(run, "plans", f"{older}.json"), "w", encoding="utf-8") as fh:
        json.dump({**written, "hash": older}, fh)
    record["plan_hash"] = older
    with open(os.path.join(trial, "task.json"), "w", encoding="utf-8") as fh:
        json.dump({**record, "record_sha256": record_digest(record)}, fh, indent=1)
    proc = subprocess.run([*CE, "rescore", run, "--out", str(tmp_path / "again")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 trial(s) re-scored, 0 changed" in proc.stdout and "damaged" not in proc.stderr
    with open(tmp_path / "again" / "default" / "files" / "00" / "task.json") as fh:
        again = json.load(fh)
    assert again["plan_hash"] == older and again["status"] == "SUCCESS"
