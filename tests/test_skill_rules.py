"""CE0231: the skills a task ships are read at compile time as the agents read them. A
SKILL.md without front matter (Codex, OpenCode and Pi skip it), without a `name`
(OpenCode skips it) and two skills of one name in one skills directory (one is loaded)
are said at the SKILL.md's file:line:col, or at a starter file's `content`; never a
traceback, and a well-formed skill (the same one in .claude/ and .agents/) says nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ce_lang.compiler import compile_paths

GOOD = "---\nname: {name}\ndescription: Tells the date.\n---\nRun `date`.\n"


def skill(root: Path, rel: str, text: str) -> Path:
    path = root / rel / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def task(tmp: Path, extra: str = "", agent: str = "claude-code") -> Path:
    path = tmp / "t.yaml"
    path.write_text(
        f"task_id: t\ndescription: d\ninitial_prompt: hi\nagent:\n  type: {agent}\n{extra}"
        "success_criteria:\n  - {type: skill_triggered, skill_name: date-teller, "
        "expected_skill: date-teller, description: d}\n")
    return path


def warnings(path: Path) -> list[tuple[str, int, int, str]]:
    result = compile_paths([str(path)])
    assert not [d for d in result.diagnostics if d.is_error], result.diagnostics
    return sorted((os.path.relpath(d.span.file, path.parent), d.span.line, d.span.col,
                   d.message) for d in result.diagnostics if d.code == "CE0231")


def test_a_template_dir_s_skills_are_checked_where_each_agent_loads_them(tmp_path):
    tpl = tmp_path / "tpl"
    skill(tpl, ".claude/skills/date-teller", GOOD.format(name="date-teller"))
    skill(tpl, ".agents/skills/date-teller", GOOD.format(name="date-teller"))
    skill(tpl, ".agents/skills/nofm", "# Tells the date\nRun `date`.\n")
    skill(tpl, ".agents/skills/nameless", "---\ndescription: no name\n---\nbody\n")
    skill(tpl, ".agents/skills/bad", "---\nname: [oops\ndescription: x\n---\n")
    skill(tpl, ".pi/skills/one", GOOD.format(name="same"))
    skill(tpl, ".pi/skills/two", GOOD.format(name="same"))
    skill(tpl, "docs/skills/elsewhere", "not a skill any agent loads\n")
    found = warnings(task(tmp_path, "sandbox:\n  template_sources:\n    - {type: "
                               "template_dir, path: tpl, mount_point: '.'}\n"))
    assert [(f, line, col) for f, line, col, _ in found] == [
        ("tpl/.agents/skills/bad/SKILL.md", 3, 1),  # where YAML found the error
        ("tpl/.agents/skills/nameless/SKILL.md", 1, 1),
        ("tpl/.agents/skills/nofm/SKILL.md", 1, 1),
        ("tpl/.pi/skills/two/SKILL.md", 1, 1)], found
    bad, nameless, nofm, dup = (m for *_, m in found)
    assert "not valid YAML" in bad
    assert "has no `name`: OpenCode skips such a skill" in nameless
    assert nofm.startswith(".agents/skills/nofm/SKILL.md has no front matter")
    assert "Codex, OpenCode and Pi skip such a skill" in nofm
    assert dup == "two skills named 'same' in .pi/skills/: one/ and two/ (the agents " \
        "load one of them)"


def test_starter_files_and_plugins_are_checked_too(tmp_path):
    plugin = tmp_path / "plug"
    skill(plugin, "skills/moon", "no front matter\n")
    skill(plugin, "skills/sun", GOOD.format(name="sun"))
    other = tmp_path / "other"
    skill(other, "skills/sun", GOOD.format(name="sun"))  # another plugin: its own namespace
    path = task(tmp_path, "  plugins: [{path: plug}, {path: other}]\nsandbox:\n"
                "  template_sources:\n    - type: starter_files\n      files:\n"
                "        - path: .claude/skills/date-teller/SKILL.md\n"
                "          content: \"Tells the date.\\n\"\n"
                "        - path: notes/SKILL.md\n          content: \"free text\\n\"\n")
    found = warnings(path)
    assert [(f, line, col) for f, line, col, _ in found] == [
        ("plug/skills/moon/SKILL.md", 1, 1), ("t.yaml", 12, 20)], found
    assert found[0][3].startswith("plug/skills/moon/SKILL.md has no front matter")
    assert found[1][3].startswith(".claude/skills/date-teller/SKILL.md has no front matter")


def test_ce_compile_says_it_at_file_line_col_without_a_traceback(tmp_path):
    skill(tmp_path / "tpl", ".agents/skills/date-teller", "---\nname date-teller\n")
    path = task(tmp_path, "sandbox:\n  template_sources:\n    - {type: template_dir, "
                          "path: tpl}\n", agent="codex")
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile", str(path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NO_COLOR": "1", "CE_NO_COMPILE_CACHE": "1"})
    assert res.returncode == 0, res.stdout + res.stderr  # a warning
    assert "Traceback" not in res.stdout + res.stderr
    assert f"{tmp_path}/tpl/.agents/skills/date-teller/SKILL.md:1:1: warning[CE0231]: " \
        ".agents/skills/date-teller/SKILL.md has no front matter" in res.stdout + res.stderr
