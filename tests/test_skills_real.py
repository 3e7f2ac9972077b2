"""A task's skill in `.agents/skills/` reaches Codex, OpenCode and Pi (the real CLIs,
`ce run --scripted-model`): each engages it its own way (Codex reads it with a shell
command, OpenCode calls its skill tool, Pi reads it), skill_triggered passes, a session
that does not engage it fails, and `ce explain` names the call or says none matched.
The skill's files arrive intact (its script still executable). Claude Code's skills:
tests/test_claude_code.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
SKILL = "---\nname: date-teller\ndescription: Tells the current date.\n---\nRun scripts/tell.sh.\n"
ENGAGE = {
    "codex": {"tool": "exec_command",
              "input": {"cmd": "cat .agents/skills/date-teller/SKILL.md && "
                               ".agents/skills/date-teller/scripts/tell.sh"}},
    "opencode": {"tool": "skill", "input": {"name": "date-teller"}},
    "pi": {"tool": "read", "input": {"path": ".agents/skills/date-teller/SKILL.md"}},
}
SHELL = {"codex": ("exec_command", "cmd"), "opencode": ("bash", "command"),
         "pi": ("bash", "command")}


def ce(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args], cwd=cwd,
                          env={**os.environ, "CE_PLAIN": "1", "NO_COLOR": "1"},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("agent", ["codex", "opencode", "pi"])
def test_a_workspace_skill_is_found_engaged_and_explained(agent, tmp_path):
    skill = tmp_path / "tpl" / ".agents" / "skills" / "date-teller"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL)
    (skill / "scripts" / "tell.sh").write_text("#!/bin/sh\necho TOLD-THE-DATE\n")
    (skill / "scripts" / "tell.sh").chmod(0o755)
    (tmp_path / "t.yaml").write_text(
        f"task_id: t\ndescription: d\ninitial_prompt: What day is it?\n"
        f"agent: {{type: {agent}}}\nsandbox:\n  python: null\n  template_sources:\n"
        "    - {type: template_dir, path: tpl}\nsuccess_criteria:\n"
        "  - {type: skill_triggered, skill_name: date-teller, expected_skill: date-teller,"
        " description: date-teller fires}\n")
    tool, key = SHELL[agent]
    # the skill is engaged, then its files are listed as the agent sees them (a path
    # under skills/date-teller/ is engaging it too: the other session reads no such path)
    listing = {"tool": tool, "input": {key: "ls -l .agents/skills/date-teller/scripts"}}
    other = {"tool": tool, "input": {key: "date"}}
    for engaged, steps in ((True, [ENGAGE[agent], listing, {"text": "done"}]),
                           (False, [other, {"text": "done"}])):
        script = tmp_path / f"t.{agent}.model.yaml"
        script.write_text(yaml.safe_dump({"steps": steps}))
        runs = tmp_path / ("runs-yes" if engaged else "runs-no")
        res = ce("run", "t.yaml", "--scripted-model", "--runs-root", str(runs), cwd=tmp_path)
        trial = runs / "latest" / "default" / "t" / "00"
        record = json.loads((trial / "task.json").read_text())
        assert res.returncode == (0 if engaged else 1), (record.get("error"), res.stderr)
        assert record["criteria"][0]["score"] == (1.0 if engaged else 0.0)
        trace = ce("trace", "dump", str(trial / "trace.msgpack"), cwd=tmp_path).stdout
        explained = ce("explain", str(trial), cwd=tmp_path).stdout
        if engaged:
            assert "-rwxr-xr-x" in trace and "tell.sh" in trace  # the script kept its mode
            assert "1 of 2 calls match: call#0 " in explained, explained  # exists: the first
            if agent == "codex":
                assert "TOLD-THE-DATE" in trace  # the skill's script ran
            if agent == "opencode":  # its skill tool lists the skill's files with ripgrep:
                # without ce's, the call failed ("ripgrep execution failed") and the
                # agent never got the skill's text
                assert "Run scripts/tell.sh." in trace and "ripgrep" not in trace, trace
        else:
            assert "none of 1 calls match" in explained, explained
