"""A plan's hash survives an upgrade of ce: a field added to the schema with default None
(as `agent.pricing` was) renames no plan, while every null that means something, and
every change a user makes, still makes another plan (ce_lang/plan_identity.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import msgspec

from ce_lang.compiler import CompileOptions, compile_paths
from ce_lang.plan import legacy_plan_json_hash, plan_hash, plan_json_hash
from ce_runtime.execute.suite import plan_file_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = CompileOptions(host_limits=lambda: {"tempdir": {}})
TASK = """\
task_id: t
description: a task
initial_prompt: do it
agent: {allowed_tools: [Read]}
success_criteria:
  - type: json_check
    description: the report
    path: report.json
    assertions:
      - {expression: status, operator: equals, expected: EXPECTED}
  - type: agent_judge
    description: judged
    prompt: is it good?
    agent: {model: judge-model}
    enabled: false
"""


def compiled(tmp_path, text: str = TASK, name: str = "t.yaml"):
    (tmp_path / name).write_text(text)
    result = compile_paths([str(tmp_path / name)], OPTIONS)
    assert result.errors == 0, [(d.code, d.message) for d in result.diagnostics]
    (trial,) = result.trials
    return trial


def written(trial) -> dict:
    """The plan as plans/<hash>.json holds it, read back."""
    return json.loads(plan_file_bytes(trial.plan_hash, trial.plan))["plan"]


def full_json_hash(plan_json) -> str:
    """How ce named a plan before the hashed form: sha256 of its whole canonical JSON."""
    return hashlib.sha256(msgspec.json.Encoder(order="sorted").encode(plan_json)).hexdigest()


def test_every_bundled_plan_as_written_hashes_to_its_name():
    result = compile_paths([os.path.join(ROOT, "tasks"),
                            os.path.join(ROOT, "tests", "corpus", "valid")], OPTIONS)
    assert len(result.trials) >= 16
    for trial in result.trials:
        stored = written(trial)
        assert trial.plan_hash == plan_hash(trial.plan) == plan_json_hash(stored)
        assert legacy_plan_json_hash(stored) == full_json_hash(stored)


def test_the_hashed_form_sees_into_every_schema_object():
    """No null is left in a bundled plan's hashed form but the kept ones: a schema object
    it did not see into (a type its walk does not know) would keep its nulls, and a field
    added there later would rename every plan again."""
    from ce_lang.plan_identity import hashed_form

    result = compile_paths([os.path.join(ROOT, "tasks"),
                            os.path.join(ROOT, "tests", "corpus", "valid")], OPTIONS)
    nulls: set[str] = set()

    def walk(value, path: str) -> None:
        if value is None:
            nulls.add(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for item in value:
                walk(item, f"{path}[]")

    for trial in result.trials:
        walk(hashed_form(written(trial)), "")
    # sandbox.python: null is not its default; a step's arguments are free-form values
    assert nulls == {".sandbox.python", ".steps[].args[]"}


def test_a_field_added_with_default_none_renames_no_plan(tmp_path):
    """The plan an older ce wrote, without `agent.pricing` (in the task's agent and in its
    agent judge's), hashes as today's plan: a resume after the upgrade finds it."""
    trial = compiled(tmp_path, TASK.replace("EXPECTED", "ok"))
    older = written(trial)
    del older["agent"]["pricing"]
    (judge,) = [c for c in older["criteria"] if c["type"] == "agent_judge"]
    del judge["args"]["agent"]["pricing"]
    assert plan_json_hash(older) == trial.plan_hash
    assert full_json_hash(older) != full_json_hash(written(trial))  # the defect's cause


def test_a_changed_plan_is_another_plan(tmp_path):
    base = compiled(tmp_path, TASK.replace("EXPECTED", "ok")).plan_hash
    edited = compiled(tmp_path, TASK.replace("EXPECTED", "done")).plan_hash
    assert edited != base


def test_nulls_inside_a_json_argument_are_the_users(tmp_path):
    """json_check's expected value {a: null} is not {}: a free-form value keeps its nulls."""
    with_null = compiled(tmp_path, TASK.replace("EXPECTED", "{a: null}"))
    empty = compiled(tmp_path, TASK.replace("EXPECTED", "{}"))
    assert with_null.plan_hash != empty.plan_hash
    stored = written(with_null)
    assert stored["criteria"][0]["args"]["assertions"][0]["expected"] == {"a": None}
    assert plan_json_hash(stored) == with_null.plan_hash


def test_a_null_that_is_not_the_default_is_kept(tmp_path):
    """`sandbox.python: null` skips the venv; an older plan without `python` (were it
    added later) would have the default venv: the two never share a name."""
    trial = compiled(tmp_path, TASK.replace("EXPECTED", "ok").replace(
        "agent: {allowed", "sandbox: {python: null}\nagent: {allowed"))
    stored = written(trial)
    assert stored["sandbox"]["python"] is None
    without = copy.deepcopy(stored)
    del without["sandbox"]["python"]
    assert plan_json_hash(without) != trial.plan_hash == plan_json_hash(stored)


def test_an_empty_list_is_not_an_absent_one(tmp_path):
    """`allowed_tools: []` approves no tool; null leaves the agent's default."""
    none = compiled(tmp_path, TASK.replace("EXPECTED", "ok").replace(
        "agent: {allowed_tools: [Read]}", "agent: {allowed_tools: []}"))
    default = compiled(tmp_path, TASK.replace("EXPECTED", "ok").replace(
        "agent: {allowed_tools: [Read]}\n", ""))
    assert written(none)["agent"]["allowed_tools"] == []
    assert written(default)["agent"]["allowed_tools"] is None
    assert none.plan_hash != default.plan_hash


def test_free_form_mappings_keep_their_nulls(tmp_path):
    """A user criterion's arguments and sdk_options are not schema fields: {x: null} is
    not {} there (the definition's default, the SDK's, may not be null)."""
    trial = compiled(tmp_path, TASK.replace("EXPECTED", "ok"))
    stored = written(trial)
    for edit in (lambda p: p["agent"]["sdk_options"].update(effort=None),
                 lambda p: p["criteria"][0].update(type="my_check", args={"x": None})):
        plain, with_null = copy.deepcopy(stored), copy.deepcopy(stored)
        edit(with_null)
        if with_null["criteria"][0]["type"] == "my_check":
            plain["criteria"][0].update(type="my_check", args={})
        assert plan_json_hash(with_null) != plan_json_hash(plain)


def test_the_hashed_form_leaves_the_plan_as_it_was(tmp_path):
    trial = compiled(tmp_path, TASK.replace("EXPECTED", "ok"))
    stored = written(trial)
    before = copy.deepcopy(stored)
    plan_json_hash(stored)
    assert stored == before


def test_a_malformed_plan_file_hashes_without_a_traceback(tmp_path):
    """A damaged plans/<hash>.json (a tag that is not a string) gets a hash, which does
    not match its name (`damaged archive`), never a TypeError out of `ce run --resume`."""
    stored = written(compiled(tmp_path, TASK.replace("EXPECTED", "ok")))
    stored["criteria"][0]["type"] = ["json_check"]
    stored["sandbox"]["template_sources"] = [{"type": {"repo": 1}, "commit": None}]
    assert len(plan_json_hash(stored)) == 64
