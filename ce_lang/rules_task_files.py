"""A workspace path that names a file beside the task file instead: `json_schema:
schemas/out.json` or a judge's `files: [rubric.md]` are read in the workspace (the
task format's rule), so a schema or rubric shipped next to the task, and put in the
workspace by no template source, is not found when the trial is graded: the json_check
is an ERROR, the judge is shown `<file not found>`. `$TASK_DIR/...` reads the host file."""

from __future__ import annotations

import os
import posixpath
from typing import TYPE_CHECKING

from ce_lang import hostfs
from ce_lang.rules_paths import emit_for_rows
from ce_lang.schema.blocks import StarterFilesSource, TemplateDirSource
from ce_lang.spans import Path

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext


def task_file_as_workspace_path(value: str, at: Path, ctx: RuleContext) -> None:
    """CE0230 when `value` (workspace-relative) is a file beside the task file that no
    template source writes and the agent is not asked for; said only when the
    workspace's set-up is known (no `repo` source, no pre_run command that might make it)."""
    if value.startswith("$") or "${row." in value or any(ch in value for ch in "*?["):
        return
    rel = posixpath.normpath(value.replace("\\", "/"))
    if rel.startswith(("../", "/")) or rel in (".", ".."):
        return  # outside the workspace: its own error
    task_dir = os.path.dirname(os.path.abspath(ctx.at(at).file))
    if not hostfs.isfile(os.path.join(task_dir, rel)):
        return
    if ctx.task.pre_run or _may_be_in_workspace(rel, ctx) or _agent_output(rel, ctx):
        return
    emit_for_rows(ctx, "CE0230", f"`{ctx.name(at)}` is read in the workspace, where no "
                  f"template source puts {value!r}; the file beside the task is not copied",
                  at, f"did you mean `$TASK_DIR/{rel}`?")


def _agent_output(rel: str, ctx: RuleContext) -> bool:
    """The agent is to write `rel`: a criterion checks it (`path`, `agent_file`), or the
    prompt names it (a judge grading the agent's main.py beside a reference main.py)."""
    for c in ctx.task.success_criteria:
        for field in ("path", "agent_file"):
            value = getattr(c, field, None)
            if isinstance(value, str) and posixpath.normpath(value.replace("\\", "/")) == rel:
                return True
    return posixpath.basename(rel) in (ctx.task.initial_prompt or "")


def _may_be_in_workspace(rel: str, ctx: RuleContext) -> bool:
    """A template source writes `rel` into the workspace, or may (a `repo` clone, a
    template directory whose path is not resolved here)."""
    for src in ctx.task.sandbox.template_sources:
        if isinstance(src, StarterFilesSource):
            if any(posixpath.normpath(f.path.replace("\\", "/")) == rel for f in src.files):
                return True
        elif isinstance(src, TemplateDirSource):
            mount = posixpath.normpath(src.mount_point.replace("\\", "/"))
            if mount == ".":
                inside = rel
            elif rel.startswith(mount + "/"):
                inside = rel[len(mount) + 1:]
            else:
                continue
            if not os.path.isabs(src.path) or hostfs.exists(os.path.join(src.path, inside)):
                return True
        else:
            return True
    return False
