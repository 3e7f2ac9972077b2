"""`ce criteria` documents every standard criterion; the .ce signatures match the schema."""

import typing

import attrs
import pytest
from click.testing import CliRunner

from ce_lang.lang.evaluate import Evaluator
from ce_lang.lang.stdlib import stdlib_registry
from ce_lang.schema.criteria import COMMON_FIELDS, GENERATED, Criterion
from ce_runtime.cli import main

STDLIB = sorted(stdlib_registry().criteria)


def test_every_schema_type_has_a_definition_and_back():
    schema_types = set(Criterion.MEMBERS) - {"expr"}
    assert schema_types == set(STDLIB)


@pytest.mark.parametrize("name", STDLIB)
def test_show_prints_docs_signature_effects(name):
    res = CliRunner().invoke(main, ["criteria", "show", name])
    assert res.exit_code == 0, res.output
    checked = stdlib_registry().criteria[name]
    assert checked.defn.doc and checked.defn.doc.splitlines()[0] in res.output
    for p in checked.defn.params:
        assert f"  {p.name}: " in res.output
        assert p.doc, f"{name}.{p.name} has no documentation"
    assert "Effects: " in res.output and "Early stop: " in res.output
    assert f"criterion {name}(" in res.output  # the definition itself


def test_show_says_in_words_why_a_criterion_cannot_be_armed():
    res = CliRunner().invoke(main, ["criteria", "show", "run_command"])
    assert ("Early stop: cannot be armed (it runs a command, so it is graded after the "
            "run).") in res.output
    res = CliRunner().invoke(main, ["criteria", "show", "file_contains"])
    assert ("Early stop: cannot be armed (it reads the workspace, so it is graded after "
            "the run).") in res.output


@pytest.mark.parametrize("name", STDLIB)
def test_definition_signature_matches_the_task_schema(name):
    """Field names and defaults agree between the YAML schema and the .ce definition."""
    cls = Criterion.MEMBERS[name]
    schema = {f.name: f for f in attrs.fields(cls) if f.name not in COMMON_FIELDS}
    checked = stdlib_registry().criteria[name]
    assert set(schema) == set(checked.params)
    hints = typing.get_type_hints(cls)
    for pname, t in checked.params.items():
        field = schema[pname]
        optional = type(None) in typing.get_args(hints[pname])
        if pname in checked.defaults:
            default = Evaluator().eval(checked.defaults[pname], {})
            expected = field.default.factory() if isinstance(field.default, attrs.Factory) \
                else field.default
            assert default == expected, (name, pname)
        else:
            assert field.default is attrs.NOTHING or (optional and field.default is None), \
                (name, pname)
        assert t.optional == optional or pname == "agent", (name, pname)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_schema_class_is_the_definition(name):
    """A generated class carries the .ce signature: docs, path rules and result kind."""
    cls = Criterion.MEMBERS[name]
    checked = stdlib_registry().criteria[name]
    assert cls.__name__ == GENERATED[name] and checked.defn.result == cls.RESULT
    fields = {f.name: f for f in attrs.fields(cls)}
    for p in checked.defn.params:
        rule = fields[p.name].metadata["rule"]
        assert rule.doc == p.doc
        assert (rule.path == "workspace") == (checked.params[p.name].name == "path")


def test_list_and_unknown_name():
    res = CliRunner().invoke(main, ["criteria", "list"])
    assert res.exit_code == 0
    assert len(res.output.strip().splitlines()) == len(STDLIB)
    bad = CliRunner().invoke(main, ["criteria", "show", "file_exist"])
    assert bad.exit_code == 2 and "did you mean `file_exists`" in bad.output


def test_builtins_lists_effects():
    res = CliRunner().invoke(main, ["criteria", "builtins"])
    assert res.exit_code == 0
    assert "read_text(path) -> str?   [workspace]" in res.output
    assert "count(list[T], T -> bool) -> int   [pure]" in res.output


def test_user_file(tmp_path):
    f = tmp_path / "mine.ce"
    f.write_text('criterion used_bash(n: int = 1 "calls") -> binary\n"""Bash was used."""\n'
                 '  score = count(trace.tool_calls, c -> c.tool == "Bash") >= n\nend\n')
    res = CliRunner().invoke(main, ["criteria", "show", "used_bash", "-f", str(f)])
    assert res.exit_code == 0, res.output
    assert "Bash was used." in res.output and "Effects: trace" in res.output


@pytest.mark.parametrize("args", [["list", "-f", "json"], ["show", "file_exists", "-f", "md"],
                                  ["types", "--file", "text"]])
def test_f_given_a_format_name_says_it_is_file_here(tmp_path, monkeypatch, args):
    # -f is --format in report/runs/explain: `ce criteria list -f json` said only
    # "cannot read criteria file 'json'"
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["criteria", *args])
    assert res.exit_code == 2, res.output
    assert "-f is --file here" in res.output and "not --format" in res.output
    (tmp_path / args[-1]).write_text("")  # a file of that name is loaded as ever
    assert CliRunner().invoke(main, ["criteria", *args]).exit_code == 0


BOUND = """\
task_id: t
description: d
initial_prompt: p
success_criteria:
  - type: file_check
    path: main.py
    includes: [def main]
    patterns:
      - {pattern: "def main"}
      - {pattern: "class \\\\w+", must_match: false, flags: 2}
    description: fc
  - type: json_check
    path: report.json
    assertions:
      - {expression: status, expected: ok}
      - {expression: "length(items)", operator: gte, expected: 1}
      - {expression: meta, operator: exists}
    description: jc
"""


def test_generated_record_fields_bind_as_the_hand_written_classes_did(tmp_path):
    """file_check and json_check are generated from files.ce / json.ce: the list-of-record
    arguments bind to the same values (defaults filled in, declaration order) as before."""
    from ce_lang.compiler import compile_paths
    from ce_lang.schema import criteria as C

    (tmp_path / "t.yaml").write_text(BOUND)
    result = compile_paths([str(tmp_path / "t.yaml")])
    assert not result.diagnostics, [d.message for d in result.diagnostics]
    calls = result.trials[0].plan.criteria
    assert calls[0].args == {
        "path": "main.py", "includes": ["def main"], "excludes": [],
        "patterns": [{"pattern": "def main", "must_match": True, "flags": 0},
                     {"pattern": "class \\w+", "must_match": False, "flags": 2}]}
    assert calls[1].args == {
        "path": "report.json", "json_schema": None,
        "assertions": [{"expression": "status", "operator": "equals", "expected": "ok"},
                       {"expression": "length(items)", "operator": "gte", "expected": 1},
                       {"expression": "meta", "operator": "exists", "expected": None}]}
    assert [f.name for f in attrs.fields(C.RegexPattern)] == ["pattern", "must_match", "flags"]
    assert [f.name for f in attrs.fields(C.JmesAssertion)] == ["expression", "operator",
                                                               "expected"]
    for cls, record in ((C.RegexPattern, "RegexPattern"), (C.JmesAssertion, "Assertion")):
        assert cls.__ce_record__ == stdlib_registry().records[record]  # its own cache
        assert cls.__ce_record__.requires  # the constraints live in the .ce declaration


def test_show_prints_the_records_a_criterion_takes():
    res = CliRunner().invoke(main, ["criteria", "show", "file_check"])
    assert res.exit_code == 0, res.output
    assert "record RegexPattern(" in res.output
    assert 'require range: flags >= 0' in res.output
    res = CliRunner().invoke(main, ["criteria", "show", "json_check"])
    assert "record Assertion(" in res.output and "require choice: operator in" in res.output


def test_show_user_record_with_require(tmp_path):
    f = tmp_path / "mine.ce"
    f.write_text('record Span(lo: int = 0 "low", hi: int = 1 "high")\n"""A span."""\n'
                 '  require lo <= hi "lo > hi"\n'
                 'criterion spans(s: list[Span] "spans") -> binary\n"""Spans."""\n'
                 '  score = len(s) > 0\nend\n')
    res = CliRunner().invoke(main, ["criteria", "show", "spans", "-f", str(f)])
    assert res.exit_code == 0, res.output
    assert 'record Span(' in res.output and 'require lo <= hi "lo > hi"' in res.output


def test_agent_judge_agent_keeps_the_task_formats_agent_schema():
    """`agent` is `json` in judges.ce; the generated class validates it as a partial
    AgentConfig (merged over the judge's hardened defaults), as the hand-written one did."""
    from ce_lang.schema.agent import AgentConfig
    from ce_lang.schema.criteria import AgentJudge

    field = attrs.fields_dict(AgentJudge)["agent"]
    assert typing.get_type_hints(AgentJudge)["agent"] == AgentConfig | None
    assert field.default is None and field.metadata["rule"].partial
    assert AgentJudge.DEFAULT_PASS_THRESHOLD == 0.7 and AgentJudge.RESULT == "continuous"


def test_show_of_an_alias_shows_what_it_stands_for():
    """`ce criteria show command_not_executed` said there was no such criterion, though
    tasks may use it."""
    res = CliRunner().invoke(main, ["criteria", "show", "command_not_executed"])
    assert res.exit_code == 0, res.output
    first, _, rest = res.output.partition("\n")
    assert first == ("# command_not_executed is command_executed with min_count: 0, "
                     "max_count: 0 (an alias; those fields cannot be set otherwise)")
    assert rest.lstrip().startswith("command_executed")
