"""The skills a task ships, read as the agents read them (CE0231): a `SKILL.md` in a
skill directory of the workspace (`.claude/skills/NAME/`, which Claude Code and OpenCode
load; `.agents/skills/NAME/`, which Codex, OpenCode and Pi load; `.codex/skills`,
`.opencode/skill(s)`, `.pi/skills`), written by a template source, or in an
`agent.plugins` directory (`skills/NAME/`). Without its front matter (`---`, `name:`,
`description:`, `---`) Codex, OpenCode and Pi skip the skill without a word, OpenCode
also one without a `name`, and of two skills of one name in one directory the agents
load one: a skill_triggered check or a skill A/B then measures a skill the agent never
had. Said where the SKILL.md is written: its file (line 1, or the front matter's line),
or a starter file's `content`."""

from __future__ import annotations

import os
import posixpath
import re
from typing import TYPE_CHECKING, Any

import attrs
import yaml

from ce_lang import hostfs
from ce_lang.rule_context import RowProblem
from ce_lang.schema.blocks import StarterFilesSource, TemplateDirSource
from ce_lang.spans import Span

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext

# the workspace directories an agent loads skills from (one directory per skill)
SKILL_ROOTS = (".claude/skills", ".agents/skills", ".codex/skills", ".opencode/skill",
               ".opencode/skills", ".pi/skills")
_STARTER = re.compile(r"^(?P<root>.+)/(?P<name>[^/]+)/SKILL\.md$")
_FENCE = re.compile(r"^---[ \t]*$")


@attrs.frozen
class _Skill:
    root: str  # its skills directory: workspace-relative, or a plugin's (as written)
    name: str  # its directory's name
    text: str
    span: Span  # where its text is written
    line_base: int  # the SKILL.md's line 1 is span line + line_base (its own file: 0)


def skill_rules(ctx: RuleContext) -> None:
    skills: dict[tuple[str, str], _Skill] = {}  # (root, name) -> the last writer's
    if ctx.intact(("sandbox", "template_sources")):
        for skill in _template_skills(ctx):
            skills[(skill.root, skill.name)] = skill
    if ctx.intact(("agent", "plugins")):
        for skill in _plugin_skills(ctx):
            skills[(skill.root, skill.name)] = skill
    named: dict[tuple[str, str], _Skill] = {}
    for skill in skills.values():
        name = _check(ctx, skill)
        first = named.setdefault((skill.root, name), skill)
        if first is not skill:
            _emit(ctx, f"two skills named {name!r} in {skill.root}/: {first.name}/ and "
                  f"{skill.name}/ (the agents load one of them)", skill.span,
                  "give each skill a name of its own", notes=(f"the other: {first.span}",))


def _check(ctx: RuleContext, skill: _Skill) -> str:
    """The skill's name (its front matter's, else its directory's); a problem with its
    front matter emitted."""
    where = f"{skill.root}/{skill.name}/SKILL.md"
    lines = skill.text.lstrip("\ufeff").split("\n")
    end = next((i for i, line in enumerate(lines[1:], 1) if _FENCE.match(line.rstrip("\r"))),
               None) if lines and _FENCE.match(lines[0].rstrip("\r")) else None
    if end is None:
        _emit(ctx, f"{where} has no front matter (a `---` line, `name:` and "
              "`description:`, a `---` line): Codex, OpenCode and Pi skip such a skill "
              "(Claude Code names it by its directory)", skill.span,
              f"start it with the lines `---`, `name: {skill.name}`, `description: "
              "WHAT IT DOES AND WHEN TO USE IT`, `---`")
        return skill.name
    try:
        meta: Any = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + (mark.line if mark is not None else 0)
        _emit(ctx, f"{where}: its front matter is not valid YAML "
              f"({getattr(exc, 'problem', None) or exc}): the agents skip such a skill",
              _line(skill, line), None)
        return skill.name
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name.strip():
        _emit(ctx, f"{where}: its front matter has no `name`: OpenCode skips such a "
              "skill (the other agents name it by its directory)", _line(skill, 1),
              f"add `name: {skill.name}`")
        return skill.name
    return name.strip()


def _line(skill: _Skill, line: int) -> Span:
    """The span of the SKILL.md's `line` (1-based), where it is written."""
    if skill.line_base < 0:
        return skill.span  # a starter file's content: its lines are not the file's
    at = skill.span.line + skill.line_base + line - 1
    return Span(skill.span.file, at, 1, at, 1)


def _emit(ctx: RuleContext, message: str, span: Span, help_: str | None,
          notes: tuple[str, ...] = ()) -> None:
    if ctx.has_dataset:  # reported once, naming the rows
        ctx.row_problems.append(RowProblem("CE0231", message, span, help_, ctx.row_id))
    else:
        ctx.diags.emit("CE0231", message, span, help=help_, notes=notes)


def _template_skills(ctx: RuleContext) -> list[_Skill]:
    """The SKILL.md files the template sources write, in their order (the last writer
    of a path wins)."""
    out: list[_Skill] = []
    for i, src in enumerate(ctx.task.sandbox.template_sources):
        at = ("sandbox", "template_sources", i)
        if isinstance(src, StarterFilesSource):
            for j, f in enumerate(src.files):
                rel = posixpath.normpath(f.path.replace("\\", "/"))
                m = _STARTER.match(rel)
                if m and m["root"] in SKILL_ROOTS and "${row." not in f.path + f.content:
                    out.append(_Skill(m["root"], m["name"], f.content,
                                      ctx.at((*at, "files", j, "content")), -1))
        elif isinstance(src, TemplateDirSource) and "${row." not in src.path:
            directory = src.path
            if not os.path.isabs(directory):
                directory = os.path.join(os.path.dirname(os.path.abspath(
                    ctx.at((*at, "path")).file)), directory)
            mount = posixpath.normpath(src.mount_point.replace("\\", "/"))
            for root in SKILL_ROOTS:
                if mount == ".":
                    inside = root
                elif root.startswith(mount + "/"):
                    inside = root[len(mount) + 1:]
                else:
                    continue
                out.extend(_skills_in(ctx, os.path.join(directory, inside), root,
                                      ctx.at((*at, "path")).file))
    return out


def _plugin_skills(ctx: RuleContext) -> list[_Skill]:
    """The skills of `agent.plugins` directories (`skills/NAME/SKILL.md`), resolved as
    the runtime does (`rules_paths._plugin_paths` says when one is missing)."""
    task_file = ctx.at(("task_id",)).file
    out: list[_Skill] = []
    for plugin in ctx.task.agent.plugins or ():
        raw = plugin.get("path") if isinstance(plugin, dict) else None
        if not isinstance(raw, str) or not raw.strip() or "${row." in raw:
            continue
        directory = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(
            task_file)), hostfs.expandvars(hostfs.expanduser(raw))))
        out.extend(_skills_in(ctx, os.path.join(directory, "skills"),
                              posixpath.join(raw.rstrip("/"), "skills"), task_file))
    return out


def _skills_in(ctx: RuleContext, directory: str, root: str, source: str) -> list[_Skill]:
    if not hostfs.isdir(directory) or (
            ctx.roots is not None and ctx.roots.outside(directory, source) is not None):
        return []  # not there, or outside the suite (said by the path rules)
    out = []
    for path in sorted(hostfs.glob(os.path.join(glob_escape(directory), "*", "SKILL.md"))):
        if not hostfs.isfile(path):
            continue
        try:
            text = hostfs.read_text(path)
        except (OSError, UnicodeDecodeError):
            continue  # unreadable: the copy into the sandbox says so
        out.append(_Skill(root, os.path.basename(os.path.dirname(path)), text,
                          Span(path, 1, 1, 1, 1), 0))
    return out


def glob_escape(path: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", path)
