"""`ce explain`'s evidence lines say where and what: the file a read missed, the file
whose JSON did not parse, a failed command's error (the end of its output, with its
lines apart), and each `uipath eval` metric against its threshold."""

from __future__ import annotations

import json
import subprocess
import sys

from ce_runtime.trace import events as T
from tests.test_explain_cli import explain


def _task(tmp_path, criteria: str):
    (tmp_path / "t.yaml").write_text(
        "task_id: ev\ndescription: evidence\nagent: {type: none}\n"
        "sandbox: {driver: tempdir, python: null}\nsuccess_criteria:\n" + criteria)
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def _evidence(res) -> list[str]:
    return [line.strip() for line in res.stdout.splitlines()
            if line.strip().startswith("evidence: ")]


def test_a_missing_file_and_an_unparsable_json_are_named(tmp_path):
    """`evidence: no such file` and `invalid JSON at line 1 column 14` named no file,
    while `out.json: valid JSON` and `nope.json not found` did."""
    ws = _task(tmp_path,
               "  - {type: file_contains, path: nope.txt, includes: [a], description: m}\n"
               "  - {type: json_check, path: out.json, description: j}\n")
    (ws / "out.json").write_text('{"status": 1,')
    res = explain("t.yaml", "--workspace", ws, cwd=tmp_path)
    assert _evidence(res) == [
        "evidence: nope.txt: no such file",
        "evidence: out.json: invalid JSON at line 1 column 14: Expecting property name "
        "enclosed in double quotes"], res.stdout
    assert res.returncode == 1


def test_a_commands_output_keeps_its_lines_and_its_end(tmp_path):
    """stdout `Hello\\nextra` was shown `'Hello extra'` (against expected_stdout `Hello`,
    exact: it read as one line), and a Python error as the first 60 characters of its
    traceback, which never reach the error itself."""
    ws = _task(tmp_path,
               "  - {type: run_command, command: \"printf 'Hello\\\\nextra\\\\n'\", "
               "expected_stdout: Hello, description: exact}\n"
               "  - {type: run_command, command: \"python3 -c 'import garbage_mod_x'\", "
               "description: imports}\n")
    res = explain("t.yaml", "--workspace", ws, cwd=tmp_path)
    first, second = _evidence(res)
    assert first == r"""evidence: $ printf 'Hello\nextra\n': exit 0; stdout: 'Hello\nextra'"""
    assert second.startswith("evidence: $ python3 -c 'import garbage_mod_x': exit 1; "
                             "stderr: \"Traceback (most recent"), second
    assert second.endswith("\\nModuleNotFoundError: No module named 'garbage_mod_x'\""), second
    data = json.loads(explain("t.yaml", "--workspace", ws, "-f", "json", cwd=tmp_path).stdout)
    assert [c["evidence"] for c in data["criteria"]] == \
        [[first.removeprefix("evidence: ")], [second.removeprefix("evidence: ")]]


UIPATH = """\
#!/bin/sh
# `uipath eval AGENT SET --no-report --output-file F`, as the UiPath CLI writes F
while [ $# -gt 0 ]; do [ "$1" = --output-file ] && out="$2"; shift; done
echo '{"accuracy": 0.9, "f1": 0.5, "recall": 0.7}' > "$out"
"""


def test_uipath_eval_says_each_metric_against_its_threshold(tmp_path):
    """`uipath_eval(...) = 0.5` and nothing else: which metric missed its threshold, or
    was not in the output at all, was nowhere."""
    ws = _task(tmp_path, "  - type: uipath_eval\n    agent_name: my-agent\n"
                         "    eval_set: regression-v1\n"
                         "    thresholds: {accuracy: 0.8, f1: 0.75, recall: 0.6, precision: 0.5}\n"
                         "    description: meets its thresholds\n")
    (ws / ".venv" / "bin").mkdir(parents=True)
    cli = ws / ".venv" / "bin" / "uipath"
    cli.write_text(UIPATH)
    cli.chmod(0o755)
    res = explain("t.yaml", "--workspace", ws, cwd=tmp_path)
    assert "score 0.5 (fraction)" in res.stdout, res.stdout
    assert _evidence(res) == [
        "evidence: uipath eval my-agent regression-v1: 2/4 thresholds met: accuracy 0.9 >= "
        "0.8: yes; f1 0.5 < 0.75: no; recall 0.7 >= 0.6: yes; precision not in the output: "
        "no"], res.stdout


def test_a_call_left_out_for_one_reason_only_is_named_with_it(tmp_path):
    """`require_success: true` and the agent's curl failed: the evidence said `none of 3
    calls match`, and the reader was left to find the curl call and why it did not count.
    So is a Read its pattern matched (`tool_name: Read` on Codex, whose reads are Bash, the
    other way round). A call the pattern does not match (`ls`) is no near miss: it would
    list every call."""
    ws = _task(tmp_path, "  - {type: command_executed, tool_name: Bash, command_pattern: curl,"
                         " require_success: true, description: fetched with curl}\n")
    (tmp_path / "t.yaml").write_text((tmp_path / "t.yaml").read_text().replace(
        "agent: {type: none}\n", "initial_prompt: go\n"))
    events: list[T.Event] = [T.RunHeader(0.0, 1, "t", "ev", "h", "script")]
    calls = [("Bash", {"command": "ls"}, "ok"), ("Bash", {"command": "curl -sf x"}, "error"),
             ("Read", {"file_path": "curl.txt"}, "ok")]
    for i, (tool, params, status) in enumerate(calls):
        events += [T.TurnStart(float(i), i + 1), T.ToolCall(float(i), f"k{i}", tool, tool, params),
                   T.ToolResult(float(i), f"k{i}", status), T.TurnEnd(float(i), i + 1)]
    T.write_trace(str(tmp_path / "run.trace"), events)
    res = explain("t.yaml", "--workspace", ws, "--trace", "run.trace", cwd=tmp_path)
    assert _evidence(res) == [
        "evidence: none of 3 calls match; not counted: call#1 Bash 'curl -sf x' (turn 2, "
        "event 6, error): (not require_success or c.ok) is false; call#2 Read "
        "file_path='curl.txt' (turn 3, event 10, ok): (tool_name == null or c.tool == "
        "tool_name) is false"], res.stdout


def test_report_md_and_junit_tell_a_failed_score_from_its_threshold(tmp_path):
    """2/3 against a 0.6667 threshold: `ce explain` said `0.66667 < 0.6667`, report.md
    and the JUnit failure `score 0.67 < 0.67`, which read as a passing criterion marked
    failed."""
    (tmp_path / "t.yaml").write_text(
        "task_id: thr\ndescription: a score just under its threshold\ninitial_prompt: go\n"
        "agent: {type: script, script: [{write: a.txt, content: \"a b\\n\"}]}\n"
        "sandbox: {driver: tempdir, python: null}\nsuccess_criteria:\n"
        "  - {type: file_contains, path: a.txt, includes: [a, b, c], pass_threshold: 0.6667,"
        " description: two of three}\n")
    made = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                           "--run-dir", "run", "--junit-xml", "junit.xml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 1, made.stdout + made.stderr
    assert "- `c0` file_contains — two of three: score 0.66667 < 0.6667" in \
        (tmp_path / "run" / "report.md").read_text()
    assert "c0 file_contains: score 0.66667 &lt; 0.6667" in \
        (tmp_path / "junit.xml").read_text()
    said = explain("run/default/thr/00", cwd=tmp_path).stdout
    assert "c0 0.66667 < 0.6667 -> FAILURE" in said, said
    # report.html: its arithmetic said `c0 0.667 < 0.667` (.3g), its panel `score 0.667
    # vs pass threshold 0.67`; both as report.md now (trial.js shows `below`)
    from tests.outputs_run import html_data

    detail = html_data((tmp_path / "run" / "report.html").read_text(), "ce-d0")
    assert detail["arithmetic"][-1] == \
        "gate (every enabled criterion with weight > 0): c0 0.66667 < 0.6667 -> FAILURE"
    assert detail["criteria"][0]["below"] == ["0.66667", "0.6667"]
    assert detail["arithmetic"][0] == "weighted score = (c0 0.66667×1) / 1 = 0.6667"


def _trace(path, calls) -> None:
    """A trace of one tool call a turn: (tool, params, status)."""
    events: list[T.Event] = [T.RunHeader(0.0, 1, "t", "ev", "h", "claude-code")]
    for i, (tool, params, status) in enumerate(calls):
        events += [T.TurnStart(float(i), i + 1), T.ToolCall(float(i), f"k{i}", tool, tool, params),
                   T.ToolResult(float(i), f"k{i}", status), T.TurnEnd(float(i), i + 1)]
    T.write_trace(str(path), events)


def test_commands_efficiency_says_which_calls_counted_against_its_budget(tmp_path):
    """The tree said `len(trace.tool_calls) = 7` and nothing of which calls they were or
    how far over `expected_commands` (the other trace criteria name their calls)."""
    ws = _task(tmp_path, "  - {type: commands_efficiency, expected_commands: 2, "
                         "description: economy}\n")
    (tmp_path / "t.yaml").write_text((tmp_path / "t.yaml").read_text().replace(
        "agent: {type: none}\n", "initial_prompt: go\n"))
    _trace(tmp_path / "run.trace",
           [("Bash", {"command": f"ls d{i}"}, "ok") for i in range(5)]
           + [("Read", {"file_path": "a.txt"}, "ok"), ("Edit", {"file_path": "a.txt"}, "error")])
    res = explain("t.yaml", "--workspace", ws, "--trace", "run.trace", cwd=tmp_path)
    assert "score 0.286 (continuous)" in res.stdout, res.stdout
    assert _evidence(res) == [
        "evidence: 7 tool calls against expected_commands 2 (5 over): Bash 5, Edit 1, Read 1; "
        "call#0 Bash 'ls d0' (turn 1, event 2, ok); call#1 Bash 'ls d1' (turn 2, event 6, ok);"
        " call#2 Bash 'ls d2' (turn 3, event 10, ok); call#3 Bash 'ls d3' (turn 4, event 14, "
        "ok); call#4 Bash 'ls d4' (turn 5, event 18, ok) and 2 more"], res.stdout
    _trace(tmp_path / "none.trace", [])
    none = explain("t.yaml", "--workspace", ws, "--trace", "none.trace", cwd=tmp_path)
    assert _evidence(none) == ["evidence: 0 tool calls against expected_commands 2"], \
        none.stdout


def test_a_skill_call_that_named_another_skill_is_shown_when_skill_triggered_fails(tmp_path):
    """The agent called the Skill tool with the wrong skill: `none of 3 calls match` and
    nothing more, while command_executed names a call one part of its test left out.
    A call that is neither a Skill call nor reads the skill's files is no near miss."""
    ws = _task(tmp_path, "  - {type: skill_triggered, skill_name: date-teller, "
                         "expected_skill: date-teller, description: uses the skill}\n")
    (tmp_path / "t.yaml").write_text((tmp_path / "t.yaml").read_text().replace(
        "agent: {type: none}\n", "initial_prompt: go\n"))
    _trace(tmp_path / "run.trace", [("Bash", {"command": "date"}, "ok"),
                                    ("Skill", {"skill": "weather-teller"}, "ok"),
                                    ("Read", {"file_path": "skills/other/SKILL.md"}, "ok")])
    res = explain("t.yaml", "--workspace", ws, "--trace", "run.trace", cwd=tmp_path)
    assert res.returncode == 1
    assert _evidence(res) == [
        "evidence: none of 3 calls match; not counted: call#1 Skill skill='weather-teller' "
        "(turn 2, event 6, ok): skill_base(str(c.param(\"skill\"))) == skill_name is false"], \
        res.stdout
    # found: the call that counted, and no near miss
    _trace(tmp_path / "ok.trace", [("Skill", {"skill": "weather-teller"}, "ok"),
                                   ("Skill", {"skill": "date-teller"}, "ok")])
    ok = explain("t.yaml", "--workspace", ws, "--trace", "ok.trace", cwd=tmp_path)
    assert ok.returncode == 0
    assert _evidence(ok) == ["evidence: 1 of 2 calls match: call#1 Skill skill='date-teller' "
                             "(turn 2, event 6, ok)"], ok.stdout
