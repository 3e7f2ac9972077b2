"""stop_when arming: the reference decidability rules for the built-in criteria."""

import pytest

from ce_lang.compiler import compile_paths

BASE = """\
task_id: t
description: d
initial_prompt: p
run_limits: {{stop_early: {master}}}
success_criteria:
  - type: {type}
    description: armed
    stop_when: {polarity}
{fields}
"""


def compile_one(write, type_, polarity, fields="", master="true"):
    text = BASE.format(type=type_, polarity=polarity, master=master,
                       fields="".join(f"    {line}\n" for line in fields.splitlines()))
    result = compile_paths([write("t.yaml", text)])
    return [(d.code, d.message) for d in result.diagnostics]


CMD = "command_executed"


@pytest.mark.parametrize("fields, polarity, allowed", [
    ("min_count: 1", "pass", True),
    ("min_count: 1", "fail", False),
    ("min_count: 1", "decided", True),
    ("min_count: 1\nmax_count: 3", "pass", False),
    ("min_count: 1\nmax_count: 3", "fail", True),
    ("min_count: 0\nmax_count: 0", "fail", True),
    ("min_count: 0\nmax_count: 0", "pass", False),
    ("min_count: 0", "pass", False),
    ("min_count: 0", "fail", False),
    ("min_count: 0", "decided", False),
])
def test_command_executed_decidability(write, fields, polarity, allowed):
    diags = compile_one(write, CMD, polarity, fields)
    assert (diags == []) == allowed, diags
    if not allowed:
        assert diags[0][0] == "CE0211"


def test_error_names_polarity_and_reason(write):
    (d,) = compile_one(write, CMD, "pass", "max_count: 2")
    assert d[1] == ("`stop_when: pass` can never trigger: command_executed can only decide fail "
                    "here (`max_count == null` is false)")


@pytest.mark.parametrize("expected, polarity, allowed", [
    ("s", "pass", True), ("s", "fail", False), ("", "pass", False), ("", "fail", True),
    ("", "decided", True), ("s", "decided", True),
])
def test_skill_triggered_decidability(write, expected, polarity, allowed):
    diags = compile_one(write, "skill_triggered", polarity,
                        f'skill_name: s\nexpected_skill: "{expected}"')
    assert (diags == []) == allowed, diags


@pytest.mark.parametrize("type_, fields", [
    ("file_exists", "path: a"), ("run_command", "command: ls"),
    ("llm_judge", "prompt: grade"), ("commands_efficiency", "expected_commands: 3"),
])
def test_post_hoc_criteria_cannot_be_armed(write, type_, fields):
    (d,) = compile_one(write, type_, "decided", fields)
    assert d[0] == "CE0211" and type_ in d[1]


def test_without_master_switch_it_is_a_warning(write):
    assert compile_one(write, CMD, "pass", "min_count: 1", master="false") == [
        ("CE0210", "`stop_when` is inert: `run_limits.stop_early` is not true")]


def test_none_agent_and_simulation_cannot_arm(write):
    text = BASE.format(type=CMD, polarity="pass", master="true", fields="").replace(
        "initial_prompt: p\n", "agent: {type: none}\n")
    codes = [d.code for d in compile_paths([write("n.yaml", text)]).diagnostics]
    assert "CE0211" in codes and "CE0204" in codes


def test_legacy_stop_early_block_is_lowered(write):
    text = BASE.format(type=CMD, polarity="x", master="true", fields="    min_count: 1").replace(
        "    stop_when: x\n", "    stop_early: {on_pass: stop, decide_within: 5}\n").replace(
        "run_limits: {stop_early: true}\n", "")
    result = compile_paths([write("l.yaml", text)])
    assert result.errors == 0
    plan = result.trials[0].plan
    assert plan.early_stop.enabled and plan.early_stop.armed == ("c0",)
    arming = plan.criteria[0].arming
    assert (arming.polarity, arming.source, arming.decide_within) == ("decided", "stop_early", 5)


EXPR = """\
task_id: t
description: d
initial_prompt: p
run_limits: {{stop_early: true}}
success_criteria:
  - type: expr
    expr: '{expr}'
    description: user expression
    stop_when: {polarity}
"""


def compile_expr(write, expr, polarity):
    result = compile_paths([write("e.yaml", EXPR.format(expr=expr, polarity=polarity))])
    return [(d.code, d.message) for d in result.diagnostics], result


@pytest.mark.parametrize("expr, polarity, allowed", [
    ('count(trace.tool_calls, c -> c.tool == "Bash") >= 3', "pass", True),
    ('count(trace.tool_calls, c -> c.tool == "Bash") >= 3', "fail", False),
    ('count(trace.tool_calls, c -> c.tool == "Bash") <= 2', "fail", True),
    ('count(trace.tool_calls, c -> c.tool == "Bash") <= 2', "pass", False),
    ('exists(trace.tool_calls, c -> c.ok) and len(trace.tool_calls) <= 10', "fail", True),
    ('exists(trace.tool_calls, c -> c.ok) and len(trace.tool_calls) <= 10', "pass", False),
    ('all(trace.tool_calls, c -> c.tool != "Write")', "fail", True),
    ('not exists(trace.tool_calls, c -> c.matches(re"rm -rf"))', "fail", True),
    ('count(trace.tool_calls, c -> not c.ok) >= 1', "decided", False),
])
def test_user_expression_decidability(write, expr, polarity, allowed):
    diags, result = compile_expr(write, expr, polarity)
    assert (diags == []) == allowed, diags
    if allowed:
        call = result.trials[0].plan.criteria[0]
        assert call.definition == "expr" and call.effects == ["trace"]
        assert call.arming.polarity == polarity


def test_workspace_read_cannot_be_armed(write):
    diags, _ = compile_expr(write, 'read_text("notes.md") != null', "pass")
    assert diags == [("CE0211", "`stop_when: pass` can never trigger: expr reads the workspace, "
                                "so it is only graded after the run")]


def test_constant_expression_cannot_be_armed(write):
    diags, _ = compile_expr(write, "1 + 1 == 2", "pass")
    codes = dict(diags)
    assert "does not depend on the trace" in codes["CE0211"]
    assert codes["CE0214"] == ("this expression is always true: it does not depend on the "
                               "agent's work")
