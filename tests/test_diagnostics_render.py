"""Rendering of diagnostics: human (golden), JSON and SARIF; the code table is complete."""

import json
import pathlib
import re

from click.testing import CliRunner

from ce_lang.codes import CODES
from ce_runtime.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
GOLDEN = pathlib.Path(__file__).with_name("golden")

BAD = """\
task_id: demo
description: rendering demo
initial_prompt: |
  Write hello.py
tags: [Smoke]
success_criteria:
  - type: file_contains
    path: hello.py
    includs: [Hello]
    description: greets
  - type: run_command
    command: python hello.py
    timeout: -5
    description: runs
"""


def run(args, cwd):
    import os

    (cwd / "bad.yaml").write_text(BAD)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, args)
    finally:
        os.chdir(old)


def test_human_rendering_golden(tmp_path):
    res = run(["compile", "bad.yaml"], tmp_path)
    assert res.exit_code == 1
    expected = (GOLDEN / "render_human.txt").read_text()
    assert res.output == expected


def test_json_rendering(tmp_path):
    res = run(["compile", "bad.yaml", "--format", "json"], tmp_path)
    assert res.exit_code == 1
    out = json.loads(res.output)
    assert out["summary"] == {"tasks": 1, "trials": 0, "plans": 0, "errors": 3, "warnings": 0}
    first = out["diagnostics"][0]
    assert (first["code"], first["line"], first["col"], first["end_col"]) == ("CE0203", 5, 8, 13)
    unknown = out["diagnostics"][1]
    assert unknown["help"] == "did you mean `includes`?"


def test_sarif_rendering(tmp_path):
    res = run(["compile", "bad.yaml", "--format", "sarif"], tmp_path)
    assert res.exit_code == 1
    sarif = json.loads(res.output)
    assert sarif["version"] == "2.1.0"
    (run_,) = sarif["runs"]
    rules = {r["id"] for r in run_["tool"]["driver"]["rules"]}
    assert rules == {"CE0101", "CE0104", "CE0203"}
    results = run_["results"]
    assert len(results) == 3
    loc = results[1]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "bad.yaml"
    assert loc["region"] == {"startLine": 9, "startColumn": 5, "endLine": 9, "endColumn": 12}
    for r in results:
        assert run_["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        assert r["level"] == "error"


def test_sarif_uri_of_a_path_with_a_space_or_hash_is_percent_encoded(tmp_path):
    # a URI reference has no spaces, and `#` starts a fragment: `my tasks/b#1.yaml`
    # written as is names another file (`my tasks/b`) to a SARIF consumer
    (tmp_path / "my tasks").mkdir()
    (tmp_path / "my tasks" / "b#1.yaml").write_text(BAD)
    res = run(["compile", "my tasks/b#1.yaml", "--format", "sarif"], tmp_path)
    assert res.exit_code == 1
    [run_] = json.loads(res.output)["runs"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in run_["results"]}
    assert uris == {"my%20tasks/b%231.yaml"}


def test_explain_prints_the_code_table_entry():
    res = CliRunner().invoke(main, ["compile", "--explain", "CE0101"])
    assert res.exit_code == 0
    assert res.output.startswith("CE0101 (error): unknown field")
    bad = CliRunner().invoke(main, ["compile", "--explain", "CE9999"])
    assert bad.exit_code == 2


def test_every_emitted_code_is_in_the_table_and_every_entry_is_used():
    source = "\n".join(p.read_text() for p in (ROOT / "ce_lang").rglob("*.py")
                       if p.name != "codes.py")
    used = set(re.findall(r'"(CE\d{4})"', source))
    assert used - set(CODES) == set()
    assert set(CODES) - used == set()
    for code in CODES.values():
        assert code.severity in ("error", "warning")
        assert code.title and code.explanation.endswith(".")


def test_usage_errors_exit_2(tmp_path):
    runner = CliRunner()
    assert runner.invoke(main, ["compile", str(tmp_path / "nope.yaml")]).exit_code == 2
    assert runner.invoke(main, ["compile"]).exit_code == 2
    res = run(["compile", "bad.yaml", "-D", "agent.model"], tmp_path)
    assert res.exit_code == 2 and "CE0501" in res.output
