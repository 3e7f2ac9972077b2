"""`sandbox.record_cli` and `cli_called` (coder_eval 0.12.16) end to end: real `ce run`
with the `script` agent calling a recorded CLI, per driver; the shim on its own; the
reference project's example task compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.engines import PYTHON_IMAGE, bwrap_missing, docker_missing, need, python_image

CE = [sys.executable, "-m", "ce_runtime.cli"]
REFERENCE_TASK = Path("/tmp/ce_ref/coder_eval-0.12.16/tasks/record_cli_responses.yaml")

# The agent calls `uip` three times: two subcommands with their own rules, one that no
# rule claims (the entry's fallback: exit 1, stderr). Hand-computed verdicts below.
TASK = """\
task_id: recorded
description: a recorded CLI answering two subcommands differently
initial_prompt: call uip
agent:
  type: script
  script:
    - run: "uip ixp dummy1 > one.txt; uip ixp dummy2 --output json > two.txt; uip ixp nope 2> nope.txt; echo $? > nope.code; command -v uip > where.txt"
sandbox:
  driver: DRIVER
  python: null
  record_cli:
    - tool: uip
      exit_code: 1
      stderr: "uip: unknown command\\n"
      responses:
        - when: {verb: "ixp dummy1"}
          stdout: "RESPONSE_ONE\\n"
        - when: {verb: "ixp dummy2", flags: {output: json}}
          stdout: "RESPONSE_TWO\\n"
    - tool: curl
success_criteria:
  - type: file_contains
    path: one.txt
    includes: ["RESPONSE_ONE"]
    excludes: ["RESPONSE_TWO"]
    description: the first subcommand got its own response
  - type: file_contains
    path: two.txt
    includes: ["RESPONSE_TWO"]
    description: the second subcommand got its own response
  - type: file_contains
    path: nope.txt
    includes: ["uip: unknown command"]
    description: an unclaimed call gets the entry fallback on stderr
  - type: file_contains
    path: nope.code
    includes: ["1"]
    description: and exits with the entry's exit code
  - type: cli_called
    tool: uip
    verb: ixp dummy1
    description: PASS - dummy1 was called
  - type: cli_called
    verb_any_of: ["ixp dummy2", "ixp other"]
    max_count: 1
    description: PASS - dummy2 once (its --output json is ignored by default)
  - type: cli_called
    verb: ixp
    min_count: 3
    max_count: 3
    description: PASS - three ixp calls in all
  - type: cli_called
    tool: curl
    min_count: 0
    max_count: 0
    description: PASS - curl never called
  - type: cli_called
    verb: ixp nope
    min_count: 0
    max_count: 0
    description: FAIL - must not call nope, but it did
  - type: cli_called
    verb: ixp dummy1
    flags: {force: {present: true}}
    description: FAIL - dummy1 was never called with --force
  - type: run_command
    command: "! command -v uip"
    description: PASS - the grader sees the real PATH, without the shims
"""

EXPECTED = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]


def _run(tmp_path: Path, text: str) -> tuple[subprocess.CompletedProcess, dict, Path]:
    (tmp_path / "t.yaml").write_text(text)
    res = subprocess.run([*CE, "run", "t.yaml", "--runs-root", "runs"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    trial = tmp_path / "runs" / "latest" / "default" / "recorded" / "00"
    rec = json.loads((trial / "task.json").read_text())
    return res, rec, trial


def _explain(trial: Path) -> str:
    """`ce explain` of the archived trial (its workspace snapshot, offline)."""
    res = subprocess.run([*CE, "explain", str(trial)], capture_output=True, text=True,
                         timeout=120)
    return res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "bwrap", "docker"])
def test_two_subcommands_two_responses_and_cli_called_as_hand_computed(tmp_path, driver):
    text = TASK.replace("DRIVER", driver)
    if driver == "bwrap":
        need(bwrap_missing())
    if driver == "docker":
        need(docker_missing() or python_image())
        text = text.replace("  python: null\n", f"  python: null\n  docker: {{image: "
                                                 f"{PYTHON_IMAGE}}}\n")
    res, rec, trial = _run(tmp_path, text)
    assert rec.get("error") is None, (rec.get("error"), res.stderr[-2000:])
    scores = [c["score"] for c in rec["criteria"]]
    assert scores == EXPECTED, [(c["description"], c["score"], c.get("error"))
                                for c in rec["criteria"]]
    assert rec["status"] == "FAILURE"  # the two FAIL criteria gate it, as intended
    explained = _explain(trial)
    # each recorded call, with the agent's tool call that ran it (one Bash: all three)
    assert "matched: 1 of 3 calls match verb 'ixp nope' (max_count 0: 1 too many): " \
        "`uip ixp nope` (line 3, exit 1; by call#0 Bash, turn 1, event 3)" in explained, \
        explained
    assert "`uip ixp dummy1` (line 1, exit 0, rule 0; by call#0 Bash" in explained, explained
    assert "`uip ixp dummy2 --output json` (line 2, exit 0, rule 1; by call#0 Bash" \
        in explained, explained


def test_the_shim_records_and_answers_on_its_own(tmp_path):
    """The generated script, run directly: one JSON record per call (argv as a list, the
    rule that answered), the rule's output and exit code, the fallback otherwise."""
    from ce_lang.schema.cli import CliMatch, CliResponse, RecordedCli
    from ce_runtime.execute.sandbox.record_cli import shim_text

    entry = RecordedCli(tool="uip", exit_code=3, stderr="nope\n", responses=[
        CliResponse(when=CliMatch(verb="get", positional=["p 1"]), stdout="got\n"),
        CliResponse(when=CliMatch(flags={"yes": "no"}), exit_code=7)])
    shim = tmp_path / "uip"
    shim.write_text(shim_text(entry, os.path.realpath(sys.executable) + " -I"))
    shim.chmod(0o755)
    (tmp_path / "calls.jsonl").write_text("")

    def call(*argv):
        return subprocess.run([str(shim), *argv], capture_output=True, text=True,
                              stdin=subprocess.PIPE, timeout=30)  # stdin open: never read

    got = call("get", "p 1", "--output", "json")
    assert (got.returncode, got.stdout, got.stderr) == (0, "got\n", "")
    assert call("x", "--yes", "no").returncode == 7
    fallback = call("other")
    assert (fallback.returncode, fallback.stdout, fallback.stderr) == (3, "", "nope\n")
    records = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text()
               .splitlines()]
    assert [(r["tool"], r["argv"], r["exit"], r.get("rule")) for r in records] == [
        ("uip", ["get", "p 1", "--output", "json"], 0, 0),
        ("uip", ["x", "--yes", "no"], 7, 1),
        ("uip", ["other"], 3, None)]


TRUST = """\
task_id: trust
description: logs cli_called cannot trust
initial_prompt: x
agent: {type: script, script: []}
sandbox: {python: null}
success_criteria:
  - {type: cli_called, verb: a, min_count: 0, max_count: 0, description: guard}
"""


@pytest.mark.parametrize("log, why", [
    (None, "does not exist"),
    ('{"tool": "uip", "argv": ["b"]}\nnot json\n', "1 unusable record(s) (line 2)"),
    ('{"tool": "uip", "argv": "a b"}\n', "unusable record"),
    ('{"tool": "uip", "argv": ["b"], "rule_error": "boom"}\n', "rule fault: boom"),
])
def test_a_guard_never_passes_on_a_log_it_cannot_trust(tmp_path, log, why):
    ws = tmp_path / "ws"
    (ws / "cli_mocks").mkdir(parents=True)
    if log is not None:
        (ws / "cli_mocks" / "calls.jsonl").write_text(log)
    (tmp_path / "t.yaml").write_text(TRUST)
    res = subprocess.run([*CE, "explain", "t.yaml", "--workspace", str(ws)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert "score 0 (binary)" in res.stdout, res.stdout + res.stderr
    assert why in res.stdout, res.stdout


def test_a_failed_log_write_fails_the_criterion(tmp_path):
    ws = tmp_path / "ws"
    (ws / "cli_mocks").mkdir(parents=True)
    (ws / "cli_mocks" / "calls.jsonl").write_text("")
    (ws / "cli_mocks" / "calls.jsonl.error").write_text("OSError ['a']\n")
    (tmp_path / "t.yaml").write_text(TRUST)
    res = subprocess.run([*CE, "explain", "t.yaml", "--workspace", str(ws)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert "score 0 (binary)" in res.stdout
    assert "could not write 1 record(s)" in res.stdout, res.stdout


@pytest.mark.slow
def test_a_mock_path_dirs_executable_of_the_same_name_is_a_setup_error(tmp_path):
    text = TASK.replace("DRIVER", "tempdir").replace("  python: null\n", """\
  python: null
  mock_path_dirs: [mocks]
  template_sources:
    - type: starter_files
      files: [{path: mocks/uip, content: "#!/bin/sh\\n"}]
""")
    _, rec, _ = _run(tmp_path, text)
    assert rec["status"] == "ERROR"
    assert "record_cli tool 'uip' is also provided by mock_path_dirs entry 'mocks'" in \
        rec["error"], rec["error"]


def _need_reference() -> None:
    need(None if REFERENCE_TASK.exists() else
         "coder_eval 0.12.16's source is not unpacked at /tmp/ce_ref (.ci/run fetches it)")


def test_the_reference_example_task_compiles():
    _need_reference()
    res = subprocess.run([*CE, "compile", REFERENCE_TASK.name], cwd=REFERENCE_TASK.parent,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "0 errors, 0 warnings" in res.stderr + res.stdout


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "docker"])
def test_the_reference_example_task_passes_with_a_scripted_agent(tmp_path, driver):
    """coder_eval's own probe, its claude-code agent swapped for a script that runs the
    three commands its prompt asks for: every criterion, including the regexes that tie
    each logged argv to the rule index that answered it, passes."""
    _need_reference()
    overrides = ["-D", "agent.type=script", "-D",
                 'agent.script=[{run: "for c in dummy1 dummy2 nope; do echo \\"## uip ixp '
                 '$c\\"; uip ixp $c 2>&1; done > captured.txt"}]']
    if driver == "docker":
        need(docker_missing() or python_image())
        overrides += ["-D", f"sandbox.docker.image={PYTHON_IMAGE}",
                      "-D", "sandbox.docker.network=none"]
    else:
        overrides += ["-D", "sandbox.driver=tempdir"]
    res = subprocess.run([*CE, "run", REFERENCE_TASK.name, "--runs-root", str(tmp_path / "runs"),
                          *overrides], cwd=REFERENCE_TASK.parent, capture_output=True,
                         text=True, timeout=300)
    trial = tmp_path / "runs" / "latest" / "default" / "record_cli_responses" / "00"
    rec = json.loads((trial / "task.json").read_text())
    assert rec["status"] == "SUCCESS", (res.stderr[-2000:], rec.get("error"),
                                        [(c["description"], c["score"])
                                         for c in rec["criteria"]])
    assert [c["score"] for c in rec["criteria"]] == [1.0] * 6
