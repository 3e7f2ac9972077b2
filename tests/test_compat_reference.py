"""Forms of real coder_eval 0.12.16 task and experiment files that ce supports: experiment
`prompt_mutations`, a glob's literally named ignored directory as an opt-in, skill paths
written with backslashes, and CE0113 for the vendor-only forms."""

from __future__ import annotations

import json

import pytest
import yaml

from ce_lang.compiler import CompileOptions, compile_paths
from ce_lang.lang.stdlib import registry_for_sources
from ce_runtime.grade.grading import host_for
from ce_runtime.grade.interpreter import Grader
from ce_runtime.trace import events as T
from ce_runtime.trace.view import build_view

TASK = {"task_id": "t", "description": "d", "initial_prompt": "Write {lang} code for app.py.",
        "success_criteria": [{"type": "file_exists", "path": "app.py",
                              "description": "written"}]}


def compile_with(tmp_path, experiment: dict, task: dict = TASK):
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(task))
    (tmp_path / "e.yaml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    return compile_paths([str(tmp_path / "t.yaml")],
                         CompileOptions(experiment=str(tmp_path / "e.yaml")))


def prompts(result) -> dict[str, str]:
    return {t.variant_id: t.plan.prompt for t in result.trials}


# -- prompt_mutations ----------------------------------------------------------------------
def test_every_mutation_type_in_order_defaults_first(tmp_path):
    result = compile_with(tmp_path, {
        "experiment_id": "pm",
        "defaults": {"prompt_mutations": [{"type": "template",
                                           "variables": {"lang": "Python"}}]},
        "variants": [
            {"variant_id": "plain"},
            {"variant_id": "wrapped", "prompt_mutations": [
                {"type": "prefix", "content": "Be brief."},
                {"type": "suffix", "content": "Add tests.", "separator": " "},
                {"type": "replace", "pattern": "app.py", "replacement": "main.py"}]},
            {"variant_id": "regex", "prompt_mutations": [
                {"type": "replace", "pattern": r"(\w+) code", "replacement": r"idiomatic \1",
                 "regex": True},
                {"type": "template", "variables": {"unknown": "x"}}]},
        ]})
    assert not result.errors, [d.message for d in result.diagnostics]
    assert prompts(result) == {
        "plain": "Write Python code for app.py.",
        "wrapped": "Be brief.\n\nWrite Python code for main.py. Add tests.",
        "regex": "Write idiomatic Python for app.py.",
    }
    plans = {t.variant_id: t.plan_hash for t in result.trials}
    assert len(set(plans.values())) == 3  # the prompt is part of the plan


def test_a_replace_after_a_suffix_rewrites_it_too(tmp_path):
    result = compile_with(tmp_path, {"experiment_id": "pm", "variants": [
        {"variant_id": "v", "prompt_mutations": [
            {"type": "suffix", "content": "Use {lang}."},
            {"type": "template", "variables": {"lang": "Go"}}]}]})
    assert prompts(result) == {"v": "Write Go code for app.py.\n\nUse Go."}


@pytest.mark.parametrize("mutations, key, code, message", [
    ([{"type": "suffix", "text": "x"}], None, "CE0101", "unknown field `text`"),
    ([{"type": "suffix"}], None, "CE0102", "missing required field `content`"),
    ([{"type": "shout"}], None, "CE0108", "unknown prompt mutation type `shout`"),
    ([{"type": "replace", "pattern": "(", "replacement": "", "regex": True}], None,
     "CE0111", "invalid regex"),
    ([{"type": "prefix", "content": "x"}], "initial_prompt", "CE0109",
     "`prompt_mutations` and `initial_prompt` exclude each other"),
])
def test_bad_mutations_are_diagnostics(tmp_path, mutations, key, code, message):
    variant = {"variant_id": "v", "prompt_mutations": mutations}
    if key:
        variant[key] = "another prompt"
    result = compile_with(tmp_path, {"experiment_id": "pm", "variants": [variant]})
    found = [(d.code, d.message) for d in result.diagnostics if d.severity == "error"]
    assert any(c == code and message in m for c, m in found), found
    assert all(d.span is not None and d.span.line > 0 for d in result.diagnostics)


# -- globs: a literally named ignored directory is an opt-in ---------------------------------
def grade(tmp_path, criteria: list[dict], events=(), files=None, **sandbox):
    ws = tmp_path / "ws"
    for rel, text in (files or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    ws.mkdir(exist_ok=True)
    task = {**TASK, "success_criteria": criteria}
    if sandbox:
        task["sandbox"] = sandbox
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(task))
    result = compile_paths([str(tmp_path / "t.yaml")])
    assert not result.errors, [d.message for d in result.diagnostics]
    plan = result.trials[0].plan
    host = host_for(plan, str(ws), str(tmp_path), build_view(list(events)))
    return Grader(plan, registry_for_sources(plan.criteria_sources)).grade(host)


def test_a_glob_naming_an_ignored_directory_grades_it(tmp_path):
    files = {"dist/app/main.js": "x", "dist/other.js": "x", "src/dist/deep.js": "x",
             "node_modules/m/index.js": "x", "build/out.js": "x"}
    g = grade(tmp_path, [
        {"type": "file_exists", "path": "dist/**/*.js", "description": "named: graded"},
        {"type": "file_exists", "path": "*/app/*.js", "description": "wildcard: ignored"},
        {"type": "file_contains", "path": "**/index.js", "includes": ["x"],
         "description": "node_modules found only by a wildcard: ignored"},
        {"type": "file_exists", "path": "src/dist/*.js",
         "description": "named deeper: graded"},
    ], files=files)
    assert [r.score for r in g.criteria] == [1.0, 0.0, 0.0, 1.0]


def test_un_ignoring_a_directory_lets_a_wildcard_find_it(tmp_path):
    g = grade(tmp_path, [{"type": "file_exists", "path": "*/app/*.js",
                          "description": "found once dist is un-ignored"}],
              files={"dist/app/main.js": "x"}, ignore_patterns=["!dist"])
    assert [r.score for r in g.criteria] == [1.0]


# -- skill paths with backslashes ------------------------------------------------------------
@pytest.mark.parametrize("command, engaged", [
    ("cat .agents/skills/date-teller/SKILL.md", True),
    (r"type .agents\skills\date-teller\SKILL.md", True),  # Windows
    (r"type C:\\work\\skills\\date-teller\\SKILL.md", True),  # JSON-escaped
    ("cat skills//date-teller//SKILL.md", True),
    ("cat skills/date-teller-pro/SKILL.md", False),
    ("cat skills-date-teller/SKILL.md", False),
])
def test_skill_triggered_reads_either_separator(tmp_path, command, engaged):
    events = [T.ToolCall(0.0, "a", "Bash", "shell", {"command": command}),
              T.ToolResult(0.1, "a", "ok", "")]
    g = grade(tmp_path, [{"type": "skill_triggered", "skill_name": "date-teller",
                          "expected_skill": "date-teller", "description": "engaged"}],
              events=events)
    assert g.criteria[0].outputs["observed"] == ("yes" if engaged else "no")


# -- vendor forms --------------------------------------------------------------------------
@pytest.mark.parametrize("patch, where", [
    ({"agent": {"type": "antigravity", "thinking_level": "medium"}}, "agent type"),
    ({"agent": {"type": "delegate", "enable_computer_use": False}}, "agent type"),
    ({"success_criteria": [{"type": "system_one_judge", "description": "d", "prompt": "p"}]},
     "criterion type"),
])
def test_vendor_forms_say_ce_does_not_implement_them(tmp_path, patch, where):
    (tmp_path / "t.yaml").write_text(yaml.safe_dump({**TASK, **patch}))
    result = compile_paths([str(tmp_path / "t.yaml")])
    [d] = [d for d in result.diagnostics if d.severity == "error"]  # and nothing else
    assert d.code == "CE0113" and f"is a coder_eval {where} that ce does not implement" \
        in d.message
    assert "did you mean" not in json.dumps(d.help or "")
