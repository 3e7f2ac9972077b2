"""A criterion the schema drops (a missing or invalid field) still gets the rules that
read only its other fields: one compile reports the schema error and the rule error of
the same entry, each at its own span, in every output format. More cases (what must
*not* be reported) are in tests/corpus/schema/dropped_criterion_*.yaml and
tests/corpus/lang/dropped_criterion_user.yaml."""

import json
import os

from click.testing import CliRunner

from ce_lang.compiler import CompileOptions, compile_paths
from ce_runtime.cli import main

HEAD = """\
task_id: t
description: x
agent: {type: none}
sandbox: {driver: tempdir}
success_criteria:
"""

NO_DESCRIPTION = HEAD + """\
  - type: file_matches_regex
    path: a.txt
    pattern: "(unclosed"
"""


def compile_cli(tmp_path, text, *args):
    (tmp_path / "t.yaml").write_text(text)
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(main, ["compile", "t.yaml", "--no-cache", *args])
    finally:
        os.chdir(old)


def found(result):
    return [(d.code, d.span.line, d.span.col) for d in result.diagnostics]


def test_missing_description_and_bad_regex_in_one_compile(tmp_path):
    res = compile_cli(tmp_path, NO_DESCRIPTION)
    assert res.exit_code == 1
    assert "t.yaml:6:5: error[CE0102]: missing required field `description`" in res.output
    assert "t.yaml:8:14: error[CE0111]: invalid regular expression" in res.output
    assert "1 task file, 0 trials (0 distinct plans), 2 errors, 0 warnings" in res.output


def test_json_and_sarif_carry_both(tmp_path):
    res = compile_cli(tmp_path, NO_DESCRIPTION, "--format", "json")
    assert res.exit_code == 1
    out = json.loads(res.output)
    assert [(d["code"], d["line"], d["col"]) for d in out["diagnostics"]] == [
        ("CE0102", 6, 5), ("CE0111", 8, 14)]
    assert out["summary"]["errors"] == 2
    res = compile_cli(tmp_path, NO_DESCRIPTION, "--format", "sarif")
    results = json.loads(res.output)["runs"][0]["results"]
    assert sorted(r["ruleId"] for r in results) == ["CE0102", "CE0111"]


def test_missing_path_does_not_hide_the_regex_nor_add_a_blank_path_error(write):
    task = write("t.yaml", HEAD + """\
  - type: file_matches_regex
    description: no path
    pattern: "[bad"
""")
    result = compile_paths([task])
    assert found(result) == [("CE0102", 6, 5), ("CE0111", 8, 14)]
    assert "`path`" in result.diagnostics[0].message


def test_wrong_weight_type_and_bad_assertion(write):
    task = write("t.yaml", HEAD + """\
  - type: json_check
    description: weighted with a word
    path: out.json
    weight: heavy
    assertions:
      - {expression: "ok", operator: equals, expected: true}
      - {expression: "items[", operator: equals, expected: 1}
""")
    result = compile_paths([task])
    assert found(result) == [("CE0103", 9, 13), ("CE0111", 12, 22)]
    assert result.diagnostics[1].message.startswith("invalid JMESPath expression 'items['")


def test_an_assertion_dropped_inside_a_dropped_criterion_keeps_the_spans(write):
    task = write("t.yaml", HEAD + """\
  - type: json_check
    path: out.json
    assertions:
      - {operator: equals, expected: 1}
      - {expression: "a[", operator: equals, expected: 1}
""")
    result = compile_paths([task])
    # the first assertion is dropped (no expression): the second keeps its own line
    assert found(result) == [("CE0102", 6, 5), ("CE0102", 9, 9), ("CE0111", 10, 22)]


def test_checked_once_per_file_whatever_the_variants(write):
    task = write("t.yaml", NO_DESCRIPTION)
    exp = write("ab.exp.yaml", "experiment_id: ab\nvariants:\n  - variant_id: a\n"
                "  - variant_id: b\n")
    result = compile_paths([task], CompileOptions(experiment=exp))
    assert found(result) == [("CE0102", 6, 5), ("CE0111", 8, 14)]


def test_a_fixed_entry_compiles(write):
    task = write("t.yaml", NO_DESCRIPTION.replace("    path: a.txt\n",
                                                  "    path: a.txt\n    description: d\n")
                 .replace("(unclosed", "(closed)"))
    result = compile_paths([task])
    assert result.errors == 0 and len(result.trials) == 1
