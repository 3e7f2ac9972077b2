"""`ce compare -f json`'s `started_at` of a run is when the run began (run.json's
created_at, as `ce runs` lists it), through the real CLI: a run resumed with every trial
run again began at its first `ce run`, not at the resume's first trial, which the earliest
trial's start said. A run.json without created_at (a re-score's) falls back to the
earliest trial."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time

from tests.test_compare import ce

TASK = """\
task_id: {task_id}
description: started_at fixture
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "echo 1 > value.txt"
success_criteria:
  - type: file_exists
    path: value.txt
    description: value.txt exists
"""


def test_compare_json_started_at_is_the_runs_created_at_after_a_resume(tmp_path):
    (tmp_path / "suite").mkdir()
    for task_id in ("one", "two"):
        (tmp_path / "suite" / f"{task_id}.yaml").write_text(TASK.format(task_id=task_id))
    made = ce("run", "suite", "-q", "--run-dir", "run", cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    created = json.loads((tmp_path / "run" / "run.json").read_text())["created_at"]
    began = dt.datetime.fromisoformat(created)
    # trial times are to the second: the resumed trials start in a later one
    while dt.datetime.now(dt.UTC) < began + dt.timedelta(seconds=1.05):
        time.sleep(0.05)
    shutil.rmtree(tmp_path / "run" / "default")  # every trial runs again on --resume
    resumed = ce("run", "--resume", "run", "-q", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    doc = json.loads((tmp_path / "run" / "run.json").read_text())
    assert doc["created_at"] == created and doc["trials"] == 2
    trials = [json.loads(p.read_text())["started_at"]
              for p in sorted((tmp_path / "run" / "default").glob("*/00/task.json"))]
    first = min(dt.datetime.fromisoformat(t) for t in trials)
    assert first > began, (created, trials)  # the case: the trials began after the run

    rescored = ce("rescore", "run", "--out", "rescored", cwd=tmp_path)
    assert rescored.returncode == 0, rescored.stdout + rescored.stderr
    assert "created_at" not in json.loads((tmp_path / "rescored" / "run.json").read_text())
    res = ce("compare", "run", "rescored", "-f", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    sides = json.loads(res.stdout)
    assert dt.datetime.fromisoformat(sides["a"]["started_at"]) == began, sides["a"]
    # a run.json without created_at: the earliest trial's start
    assert dt.datetime.fromisoformat(sides["b"]["started_at"]) == first, sides["b"]
