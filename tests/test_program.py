"""One checked program per plan (`ce_lang.lang.program`): built once per plan per process,
shared by the live monitor, the grader, explanations and re-scoring; its link table
resolves every call and method once, and evaluating with it is evaluating by name."""

from __future__ import annotations

import json
import os
import tempfile

import attrs
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ce_lang.api import BUILTINS, ToolCallView
from ce_lang.compiler import compile_paths
from ce_lang.lang import ast as A
from ce_lang.lang.instances import instances_from_plan
from ce_lang.lang.program import (
    Program,
    clear_programs,
    link_nodes,
    program_builds,
    program_for,
    stdlib_key,
)
from ce_lang.lang.stdlib import registry_for_sources, stdlib_registry, stdlib_texts
from ce_runtime.grade.host import Host
from ce_runtime.grade.interpreter import Grader
from ce_runtime.grade.monitor import LiveMonitor
from ce_runtime.trace import events as T
from ce_runtime.trace.view import build_view
from tests.test_live_monitor_property import (
    SETTINGS,
    compile_task,
    entries,
    polarities,
    traces,
)


def _plan(tmp_path, criteria: str, extra: str = ""):
    (tmp_path / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: p\n" + extra
        + "success_criteria:\n" + criteria)
    result = compile_paths([str(tmp_path / "t.yaml")])
    assert not [d for d in result.diagnostics if d.severity == "error"], result.diagnostics
    return result.trials[0]


ARMED = """\
  - type: command_executed
    description: ran curl
    tool_name: Bash
    command_pattern: curl
    min_count: 1
    stop_when: pass
  - type: expr
    description: methods
    expr: 'exists(trace.tool_calls, c -> c.matches("curl") and c.mentions("x"))'
    stop_when: pass
  - type: file_exists
    description: a file
    path: out.txt
"""


def _roots(defn: A.CriterionDef) -> list[A.Node]:
    return [defn.score, *(let.expr for let in defn.lets), *(o.expr for o in defn.outputs)]


def test_links_cover_every_call_and_method_of_every_stdlib_criterion():
    registry = stdlib_registry()
    calls = methods = 0
    for name, checked in registry.criteria.items():
        links = link_nodes(_roots(checked.defn), checked.tables, name)
        for root in _roots(checked.defn):
            for node in A.walk(root):
                if isinstance(node, A.Call):
                    calls += 1
                    link = links[node.id]
                    assert link.name == node.func
                    assert link.overload is checked.tables.overloads[node.id], (name, node.func)
                    assert link.impl is BUILTINS[node.func].impl
                elif isinstance(node, A.Method):
                    methods += 1
                    link = links[node.id]
                    assert link.receiver is ToolCallView, (name, node.name)
                    assert link.impl is getattr(ToolCallView, node.name)
        assert set(links) == {n.id for r in _roots(checked.defn) for n in A.walk(r)
                              if isinstance(n, A.Call | A.Method)}
    assert calls > 20 and methods >= 1  # the stdlib does use both


def test_a_plan_is_checked_once_and_shared(tmp_path):
    trial = _plan(tmp_path, ARMED, "run_limits: {stop_early: true}\n")
    plan = trial.plan
    clear_programs()
    before = program_builds()
    program = program_for(plan, plan_hash=trial.plan_hash)
    assert program_for(plan) is program  # the hash computed is the trial's
    assert program_builds() == before + 1
    assert [c.instance.index for c in program.criteria] == [0, 1, 2]

    monitor = LiveMonitor(plan, program)
    assert [a.call_id for a in monitor.armed] == ["c0", "c1"]
    for a, compiled in zip(monitor.armed, program.criteria, strict=False):
        assert a.analyzer is compiled.analysis and a.links is compiled.links
        assert a.inst is compiled.instance
    grader = Grader(plan)
    assert grader.program is program and grader.instances[0] is program.criteria[0].instance
    assert program_builds() == before + 1

    # an archived stdlib is another program; the same texts, the same one
    archived = program_for(plan, dict(stdlib_texts()))
    assert archived is not program
    assert program_for(plan, dict(stdlib_texts())) is archived
    assert stdlib_key(None) != stdlib_key(dict(stdlib_texts()))
    assert program_builds() == before + 2

    # immutable: the analysis tables are read-only views
    facts = program.criteria[0].analysis.facts
    try:
        facts[0] = None  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("a program's facts can be written")


def test_linked_methods_convert_string_patterns_as_by_name(tmp_path):
    plan = _plan(tmp_path, ARMED).plan
    program = Program.build(plan, registry_for_sources(plan.criteria_sources))
    unlinked = _unlinked(program)
    events = [T.ToolCall(1.0, "a", "Bash", "bash", {"command": "bash -lc 'curl x'"}),
              T.ToolResult(1.5, "a", "ok")]
    host = Host(workspace=str(tmp_path), trace=build_view(events))
    linked_grade = Grader(plan, program=program).grade(host)
    by_name = Grader(plan, program=unlinked).grade(host)
    assert [r.score for r in linked_grade.criteria] == [1.0, 1.0, 0.0]
    assert _comparable(linked_grade) == _comparable(by_name)


def _unlinked(program: Program) -> Program:
    return Program(program.plan, program.registry,
                   tuple(attrs.evolve(c, links=None) for c in program.criteria))


def _comparable(graded) -> list:
    return [attrs.evolve(r, duration_ms=0.0) for r in graded.criteria] + [
        graded.weighted_score, graded.success]


@settings(SETTINGS, max_examples=max(1, SETTINGS.max_examples // 2))
@given(items=entries(), events=traces(), data=st.data())
def test_the_linked_program_decides_and_grades_as_dispatch_by_name(items, events, data):
    """The program's monitor (its analyses, its links) against one analyzing its
    instances itself and dispatching by name; the linked grader against the by-name one."""
    with tempfile.TemporaryDirectory() as tmp:
        result, errors = compile_task(tmp, items, [None] * len(items))
        if errors:
            return
        plan = result.trials[0].plan
        arming = [data.draw(st.sampled_from([None, *polarities(c)])) if polarities(c) else None
                  for c in plan.criteria]
        result, errors = compile_task(tmp, items, arming)
        assert not errors
        plan = result.trials[0].plan
        registry = registry_for_sources(plan.criteria_sources)
        program = Program.build(plan, registry)
        linked = LiveMonitor(plan, program)
        by_name = LiveMonitor(plan, instances_from_plan(plan.criteria, registry))
        for e in events:
            assert linked.on_event(e) == by_name.on_event(e)
        assert linked.stop_info == by_name.stop_info
        host = Host(workspace=tmp, trace=build_view(events))
        assert _comparable(Grader(plan, program=program).grade(host)) == \
            _comparable(Grader(plan, program=_unlinked(program)).grade(host))


def test_ce_run_of_repeats_builds_the_program_once(tmp_path, monkeypatch):
    """A suite of N trials of one plan (monitor armed, graded) builds one program, and
    re-scoring the run's N trials builds one more (with the archived standard criteria)."""
    from ce_runtime.cli import main

    (tmp_path / "t.yaml").write_text(
        "task_id: once\ndescription: d\ninitial_prompt: p\n"
        "agent:\n  type: script\n  script:\n    - run: echo curl x\n"
        "    - write: out.txt\n      content: hi\n"
        "run_limits: {stop_early: true}\nsandbox: {python: null}\n"
        "success_criteria:\n" + ARMED)
    monkeypatch.chdir(tmp_path)
    for var in ("CE_JUDGE_URL", "CE_JUDGE_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    clear_programs()
    before = program_builds()
    res = CliRunner().invoke(main, ["run", "t.yaml", "--repeats", "3", "-j", "3",
                                    "--runs-root", "runs"])
    assert res.exit_code in (0, 1), res.output
    assert program_builds() == before + 1
    run_dir = os.path.realpath(os.path.join("runs", "latest"))
    records = []
    for root, _dirs, files in os.walk(run_dir):
        if "task.json" in files:
            with open(os.path.join(root, "task.json")) as fh:
                records.append(json.load(fh))
    assert len(records) == 3 and all(r["status"] == "SUCCESS" for r in records), records

    res = CliRunner().invoke(main, ["rescore", run_dir, "--offline"])
    assert res.exit_code in (0, 1), res.output
    assert program_builds() == before + 2
