"""The bundled examples compile cleanly, alone and under the example experiment."""

import os

from ce_lang.compiler import CompileOptions, compile_paths

TASKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tasks")


def test_every_example_compiles_without_a_diagnostic():
    result = compile_paths([TASKS])
    assert result.diagnostics == [], result.diagnostics
    assert result.task_files >= 8
    types = {c.type for t in result.trials for c in t.plan.criteria}
    assert {"file_exists", "run_command", "skill_triggered", "command_executed",
            "llm_judge", "expr"} <= types


def test_examples_under_the_experiment():
    exp = os.path.join(TASKS, "experiments", "model_ab.yaml")
    result = compile_paths([os.path.join(TASKS, "hello_world.yaml")],
                           CompileOptions(experiment=exp))
    assert result.errors == 0
    assert {t.variant_id for t in result.trials} >= {"baseline"}
    assert len({t.plan_hash for t in result.trials}) == 2  # two variants, two plans
