"""A json_check's `json_schema` is read in the workspace (the task format's rule): a
schema shipped beside the task file and named by its plain path is not found when the
trial is graded. CE0230 says so at compile time, and the path it suggests grades."""

from __future__ import annotations

import json

from ce_lang.compiler import compile_paths
from ce_runtime.grade.host import Host
from ce_runtime.grade.interpreter import Grader

TASK = """task_id: t
description: d
initial_prompt: Write out.json.
success_criteria:
  - type: json_check
    path: out.json
    json_schema: {schema}
    description: conforms
"""


def _grade(tmp_path, schema: str):
    task_dir, workspace = tmp_path / "suite" / "tasks", tmp_path / "ws"
    (task_dir / "schemas").mkdir(parents=True, exist_ok=True)
    (task_dir / "schemas" / "status.json").write_text(
        json.dumps({"type": "object", "required": ["status"]}))
    (task_dir / "t.yaml").write_text(TASK.format(schema=schema))
    workspace.mkdir(exist_ok=True)
    (workspace / "out.json").write_text('{"status": "ok"}')
    result = compile_paths([str(task_dir / "t.yaml")])
    graded = Grader(result.trials[0].plan).grade(
        Host(workspace=str(workspace), task_dir=str(task_dir)))
    return result.diagnostics, graded.criteria[0]


def test_a_schema_beside_the_task_named_as_a_workspace_path_is_warned(tmp_path):
    diags, crit = _grade(tmp_path, "schemas/status.json")
    assert [(d.code, d.span.line, d.help) for d in diags] == \
        [("CE0230", 7, "did you mean `$TASK_DIR/schemas/status.json`?")]
    assert crit.score == 0.0 and "not found" in crit.error


def test_the_suggested_path_grades(tmp_path):
    diags, crit = _grade(tmp_path, "$TASK_DIR/schemas/status.json")
    assert diags == [] and crit.score == 1.0 and crit.error is None
