"""A tempdir trial sets up its workspace while its sandbox's init starts. When the init
does not start, the trial is what it always was: an error naming the sandbox, no set-up
log, and an empty workspace (what the set-up wrote meanwhile is gone)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from ce_lang.api import CompileOptions, compile_paths
from ce_runtime.execute import suite as R
from ce_runtime.execute.sandbox.base import SandboxError
from ce_runtime.execute.sandbox.tempdir import TempdirSandbox
from tests.processes import children_of

TASK = """\
task_id: overlap
description: set-up while the init starts
agent:
  type: none
sandbox:
  driver: tempdir
  template_sources:
    - type: starter_files
      files:
        - path: seed.txt
          content: "seeded\\n"
pre_run:
  - command: "cat seed.txt > copy.txt"
success_criteria:
  - type: file_contains
    path: copy.txt
    includes: [seeded]
    description: pre_run saw the set-up's file
"""


def run(tmp_path, repeats: int = 1) -> list[dict]:
    task = tmp_path / "overlap.yaml"
    task.write_text(TASK)
    result = compile_paths([str(task)], CompileOptions(repeats=repeats))
    assert result.errors == 0
    run_dir = R.new_run_dir(str(tmp_path / "runs"))
    R.write_plans(run_dir, result.trials)
    asyncio.run(R.execute(list(result.trials), run_dir, R.RunOptions(jobs=1), None, None))
    assert children_of(os.getpid()) == []  # an init asked for early is gone too
    found = sorted(Path(run_dir).rglob("task.json"))
    assert len(found) == repeats
    records = []
    for path in found:
        record = json.loads(path.read_text())
        record["_workspace"] = json.loads((path.parent / "workspace.json").read_text())
        records.append(record)
    return records


def test_the_set_up_is_there_before_the_first_command(tmp_path):
    for record in run(tmp_path, repeats=3):
        assert record["status"] == "SUCCESS", record["error"]
        assert any("starter_files" in line for line in record["setup"])
        assert record["sandbox"]["driver"] == "tempdir"


def test_a_sandbox_that_does_not_start_leaves_an_empty_workspace(tmp_path, monkeypatch):
    async def fails(self):
        await asyncio.sleep(0.3)  # the set-up is done by now
        raise SandboxError("no init for you")

    monkeypatch.setattr(TempdirSandbox, "start", fails)
    asked = []
    begin = TempdirSandbox.begin_start
    monkeypatch.setattr(TempdirSandbox, "begin_start",
                        lambda self: (begin(self), asked.append(self._requested)))
    records = run(tmp_path, repeats=3)
    assert any(asked)  # the zygote was up: an init was asked for, then never taken
    for record in records:
        assert record["status"] == "ERROR"
        assert record["error"] == "sandbox: no init for you"
        assert record["setup"] == [] and record["sandbox"] is None
        assert record["_workspace"]["files"] == {}  # seed.txt and .venv gone
