"""`ce explain` output, pinned: per criterion type, a whole trial, and a plan.

The fixture (a task, its final workspace and a trace) is written under tmp_path and the
CLI runs there, so every path in the output is relative. Regenerate the goldens with
`CE_UPDATE_GOLDENS=1 pytest tests/test_explain_golden.py`, then read the diff: these
files are what a user sees when asking why a trial scored as it did.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from ce_runtime.trace import events as T
from tests.goldens import match_golden

GOLDEN = Path(__file__).parent / "golden" / "explain"

TASK = """\
task_id: explain_demo
description: A small task whose criteria partly pass, to show how ce explains a score.
initial_prompt: Write app.py and report.json, then fetch the weather with curl.
agent: {type: claude-code}
success_criteria:
  - type: file_exists
    path: app.py
    description: app.py was created
  - type: file_contains
    path: app.py
    includes: ["def main", "argparse", "logging"]
    excludes: ["TODO", "print("]
    description: app.py has the required structure
  - type: json_check
    path: report.json
    assertions:
      - {expression: status, expected: success}
      - {expression: "length(results)", operator: gte, expected: 3}
      - {expression: owner, operator: exists}
    description: report.json has the expected fields
    weight: 2
  - type: command_executed
    tool_name: Bash
    command_pattern: "^curl .*wttr\\\\.in"
    min_count: 3
    description: the agent fetched the weather for three cities
  - type: run_command
    command: python app.py --check
    expected_stdout: "ok: 3 items"
    description: app.py --check reports three items
    weight: 2
  - type: command_not_executed
    tool_name: Bash
    command_pattern: "rm -rf"
    description: never ran rm -rf
  - type: expr
    kind: continuous
    expr: 'min(1.0, 4.0 / max(len(trace.tool_calls), 1))'
    description: economy (full marks up to 4 tool calls)
    weight: 0
  - type: llm_judge
    prompt: Grade the code style.
    files: [app.py]
    enabled: false
    description: style review (disabled)
"""

APP = """\
import argparse
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    # TODO: count the items
    print("ok: 2 items")


if __name__ == "__main__":
    main()
"""

CALLS = [
    ("Write", {"file_path": "app.py", "content": APP}, "ok"),
    ("Bash", {"command": "bash -lc 'curl -s wttr.in/Paris'"}, "ok"),
    ("Bash", {"command": "curl wttr.in/Oslo"}, "error"),
    ("Bash", {"command": "python app.py --check"}, "ok"),
    ("Write", {"file_path": "report.json", "content": "{}"}, "ok"),
]


@pytest.fixture
def trial_dir(tmp_path, monkeypatch) -> Path:
    (tmp_path / "task.yaml").write_text(TASK)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "app.py").write_text(APP)
    (ws / "report.json").write_text('{"status": "success", "results": [1, 2], "owner": null}\n')
    # a sandbox venv: `python` on the command's PATH, whatever runs the tests
    (ws / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, ws / ".venv" / "bin" / "python")
    events: list[T.Event] = [T.RunHeader(0.0, 1, "t", "explain_demo", "h", "claude-code")]
    for i, (tool, params, status) in enumerate(CALLS):  # one call a turn
        events.append(T.TurnStart(float(i), i + 1))
        events.append(T.ToolCall(float(i), f"k{i}", tool, tool, params))
        events.append(T.ToolResult(float(i), f"k{i}", status))
        events.append(T.TurnEnd(float(i), i + 1))
    T.write_trace(str(tmp_path / "run.trace"), events)
    monkeypatch.chdir(tmp_path)
    return tmp_path


TRIAL = ["task.yaml", "--workspace", "ws", "--trace", "run.trace"]
CASES = {
    "plan": (["task.yaml"], 0),
    "trial": (TRIAL, 1),
    "file_contains": ([*TRIAL, "--criterion", "c1"], 1),
    "json_check": ([*TRIAL, "--criterion", "c2"], 1),
    "command_executed": ([*TRIAL, "--criterion", "c3"], 1),
    "run_command": ([*TRIAL, "--criterion", "c4"], 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_explain_golden(trial_dir, name):
    args, exit_code = CASES[name]
    result = CliRunner().invoke(main, ["explain", *args])
    assert result.exit_code == exit_code, result.output
    out = result.stdout
    assert str(trial_dir) not in out and os.path.realpath(trial_dir) not in out
    match_golden(GOLDEN / f"{name}.txt", out)


def test_json_output_agrees_with_the_text(trial_dir):
    import json

    result = CliRunner().invoke(main, ["explain", *TRIAL, "--json"])
    data = json.loads(result.stdout)
    scores = {c["id"]: c["score"] for c in data["criteria"]}
    assert scores["c2"] == pytest.approx(1 / 3)
    assert data["success"] is False
    disabled = [c["id"] for c in data["criteria"] if c["disabled"]]
    assert disabled == ["c7"]
    # c0 1×1, c1 1/3×1, c2 1/3×2, c3 2/3×1, c4 0×2, c5 1×1; c6 weight 0, c7 disabled
    assert data["weighted_score"] == pytest.approx((1 + 1 / 3 + 2 / 3 + 2 / 3 + 0 + 1) / 8)


def test_goldens_have_no_orphans():
    expected = {f"{name}.txt" for name in CASES}
    present = {p.name for p in GOLDEN.glob("*.txt")} if GOLDEN.exists() else expected
    assert present <= expected, f"unused goldens: {sorted(present - expected)}"



def test_a_regex_search_says_where_it_matched_or_that_nothing_did(tmp_path, monkeypatch):
    (tmp_path / "task.yaml").write_text("""\
task_id: regex_evidence
description: where a pattern matched
initial_prompt: write app.py
success_criteria:
  - {type: file_matches_regex, path: app.py, pattern: 'def \\w+', description: a def}
  - {type: file_matches_regex, path: app.py, pattern: '^class ', flags: 8,
     description: a class}
  - {type: file_matches_regex, path: notes.txt, pattern: 'x', description: one line}
  - {type: file_check, path: app.py, patterns: [{pattern: '^v\\d+ "q"'}], description: v}
  - {type: command_executed, tool_name: Bash, command_pattern: 'curl\\s+"x', description: c}
  - {type: run_command, command: 'true', expected_stdout: 'ok.*', stdout_match: regex,
     description: r}
""")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "app.py").write_text(APP)
    (tmp_path / "ws" / "notes.txt").write_text("y\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["explain", "task.yaml", "--workspace", "ws"])
    out = result.stdout
    # a regex is spelled as the criteria language writes it, everywhere: the search's
    # evidence said '^v\\\\d+' (a Python repr), a file_check pattern re"^v\\d+"
    assert 'evidence: re"def \\w+" matches \'def main\' at app.py:5:1' in out, out
    assert 'evidence: re"^class " matches nothing in app.py' in out, out
    assert "evidence: notes.txt: 1 line\n" in out, out
    assert "patterns 0/1: re\"^v\\d+ \\\"q\\\"\" must match: no" in out, out
    plan = CliRunner().invoke(main, ["explain", "task.yaml"]).stdout
    assert "arguments: path='app.py', pattern=re\"def \\w+\"\n" in plan, plan
    assert "arguments: tool_name='Bash', command_pattern=re\"curl\\s+\\\"x\"\n" in plan, plan
    # a str the definition also compares is no regex (run_command's expected_stdout)
    assert "expected_stdout='ok.*'" in plan, plan


def test_a_failed_json_schema_says_why(tmp_path, monkeypatch):
    """schema_valid false: the evidence names the schema's first error and where in the
    document (the tree alone said only `= false`); a valid document says nothing more."""
    (tmp_path / "s.json").write_text('{"type": "object", "required": ["name"], '
                                     '"properties": {"items": {"type": "array", '
                                     '"items": {"type": "integer"}}}}')
    (tmp_path / "task.yaml").write_text("""\
task_id: schema_evidence
description: why a document fails its schema
initial_prompt: write the documents
success_criteria:
  - {type: json_check, path: bad.json, json_schema: $TASK_DIR/s.json, description: bad}
  - {type: json_check, path: items.json, json_schema: $TASK_DIR/s.json, description: item}
  - {type: json_check, path: good.json, json_schema: $TASK_DIR/s.json, description: good}
""")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "bad.json").write_text('{"n": 1}')
    (tmp_path / "ws" / "items.json").write_text('{"name": "x", "items": [1, "two"]}')
    (tmp_path / "ws" / "good.json").write_text('{"name": "x"}')
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["explain", "task.yaml", "--workspace", "ws"]).stdout
    assert "evidence: fails the JSON Schema $TASK_DIR/s.json: 'name' is a required " \
           "property\n" in out, out
    assert "'two' is not of type 'integer' (at $.items[1])" in out, out
    assert out.count("evidence: fails the JSON Schema") == 2, out


def test_json_carries_each_criterions_evidence_and_tree_as_the_text_shows_them(trial_dir):
    """-f json had the scores only: the evidence lines and the evaluation tree (with its
    lets, `(above)` references and if/else chains) were text-only, and no status."""
    import json

    from ce_runtime.grade.explain import tree_lines

    data = json.loads(CliRunner().invoke(main, ["explain", *TRIAL, "-f", "json"]).stdout)
    assert (data["status"], data["error"]) == ("FAILURE", None)
    kinds = set()
    for c in data["criteria"]:
        text = CliRunner().invoke(main, ["explain", *TRIAL, "--criterion", c["id"]]).stdout
        if c["disabled"]:
            assert (c["evidence"], c["tree"]) == ([], [])
            continue
        body = text.split("\n\n")[1].splitlines()[2:]
        evidence = [x.removeprefix("    evidence: ") for x in body
                    if x.startswith("    evidence: ")]
        assert c["evidence"] == evidence, c["id"]
        assert tree_lines(c["tree"], 1) == body[len(evidence):], c["id"]

        def walk(nodes):
            for n in nodes:
                kinds.add(n["kind"])
                walk(n.get("children", ()))
        walk(c["tree"])
    assert kinds == {"value", "let", "ref", "if", "else if", "then", "else"}
    assert data["criteria"][3]["evidence"][0].startswith("2 of 5 calls match: call#1 Bash")


def test_a_matched_call_that_is_no_command_is_named_by_its_file(tmp_path, monkeypatch):
    """An Edit's evidence was its parameters' first 50 characters, `{'replace_all':
    False, 'file_path': '/tmp/ce-run-1`: no file. It names the file now, by its end."""
    (tmp_path / "task.yaml").write_text("""\
task_id: call_evidence
description: which calls matched
initial_prompt: edit greet.py
success_criteria:
  - {type: command_executed, tool_name: Edit, description: edited}
  - {type: command_executed, tool_name: Skill, description: used a skill}
""")
    (tmp_path / "ws").mkdir()
    long = "/tmp/ce-run-16811-7rf9dk5w/ce-trial-n207arl4/ws/src/pkg/greet.py"
    events: list[T.Event] = [T.RunHeader(0.0, 1, "t", "call_evidence", "h", "claude-code"),
                             T.ToolCall(1.0, "k0", "Edit", "Edit", {
                                 "replace_all": False, "file_path": long, "old_string": "a",
                                 "new_string": "b"}),
                             T.ToolCall(2.0, "k1", "Skill", "Skill", {"skill": "date-teller"})]
    T.write_trace(str(tmp_path / "run.trace"), events)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["explain", "task.yaml", "--workspace", "ws", "--trace",
                                    "run.trace"]).stdout
    assert "evidence: 1 of 2 calls match: call#0 Edit file_path='..." + long[-47:] + \
        "' (event 1, unresolved)" in out, out
    assert "call#1 Skill skill='date-teller' (event 2, unresolved)" in out, out
