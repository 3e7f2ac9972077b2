"""rescore's grader (`compiled_grader`) grades a disabled judge as the interpreter's
Grader does: not run, out of the score and the gate (the archived-run differential test
has none)."""

from __future__ import annotations

import attrs

from ce_lang.api import CompileOptions, compile_paths, program_for
from ce_runtime.grade.compiled import compiled_grader
from ce_runtime.grade.grading import host_for
from ce_runtime.grade.interpreter import Grader

TASK = """task_id: disabled
description: a disabled judge next to a file check
initial_prompt: hi
agent: {type: script, script: [{say: hi}]}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: a.txt, description: passes}
  - {type: llm_judge, prompt: grade it, enabled: false, weight: 5, description: disabled}
  - {type: file_exists, path: b.txt, description: fails, weight: 2}
"""


def test_a_disabled_judge_is_graded_alike(tmp_path):
    (tmp_path / "task.yaml").write_text(TASK)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("x")
    result = compile_paths([str(tmp_path / "task.yaml")], CompileOptions())
    assert not result.errors
    plan = result.trials[0].plan
    program = program_for(plan)
    graded = [g.grade(host_for(plan, str(ws), str(tmp_path)), stopped_early=stop,
                      armed=armed)
              for stop, armed in ((False, ()), (True, ("c0",)))
              for g in (Grader(plan, program=program), compiled_grader(plan, program))]
    for tree, compiled in (graded[:2], graded[2:]):
        assert tree.criteria[1].disabled and compiled.criteria[1].disabled
        assert (tree.weighted_score, tree.success) == \
            (compiled.weighted_score, compiled.success)
        for a, b in zip(tree.criteria, compiled.criteria, strict=True):
            assert attrs.evolve(a, duration_ms=0) == attrs.evolve(b, duration_ms=0)
    assert graded[0].success is False and graded[2].success is True  # gated on c0 only
