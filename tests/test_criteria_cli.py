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
