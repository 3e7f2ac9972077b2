"""Rules on the host paths and repositories a resolved task names (issue 9: a task must
not make ce read outside its suite, block on a FIFO, or hand git a command).

The schema walker already checks each path field as written; these rules check the
resolved task again, so values that only exist after a dataset row's `${row.key}` was
substituted, or that come from another layer, are held to the same rule.
"""

from __future__ import annotations

import functools
import os
import re
import typing
from collections.abc import Iterator
from typing import Any

import attrs

from ce_lang import hostfs
from ce_lang.diagnostics import did_you_mean
from ce_lang.paths import (
    commit_problem,
    host_path_problem,
    is_local_repo,
    repo_url_problem,
    special_kind,
)
from ce_lang.rule_context import RowProblem
from ce_lang.schema import criteria as C
from ce_lang.schema.task import RepoSource
from ce_lang.spans import Path

TASK_DIR = "$TASK_DIR/"


def host_path_rules(ctx: Any) -> None:
    if ctx.roots is None:
        return
    for path, value in _task_paths(ctx.task, ()):
        if not ctx.intact(ctx.source_path(path)):
            continue  # dropped for a schema error: a default stands in for it
        if "${row." in value:
            continue  # the row's substituted value is what counts (checked per row)
        span = ctx.at(path)
        problem = host_path_problem(value, value, span.file, ctx.roots)
        if problem is not None:
            code, message, help_ = problem
            emit_for_rows(ctx, code, f"`{ctx.name(path)}`: {message}", path, help_)
    if ctx.intact(("agent", "plugins")):
        _plugin_paths(ctx)
    for i, c in enumerate(ctx.task.success_criteria):
        criterion_host_paths(ctx, i, c)


def criterion_host_paths(ctx: Any, i: int, c: Any, skip: frozenset[str] = frozenset()
                         ) -> None:
    """The `$TASK_DIR/...` files criterion `i` reads (its fields in `skip` left out)."""
    for j, f in _task_dir_files(c):
        if j[0] in skip:
            continue
        at = ("success_criteria", i, *j)
        span = ctx.at(at)
        resolved = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(
            span.file)), f[len(TASK_DIR):]))
        problem = host_path_problem(f, resolved, span.file, ctx.roots)
        if problem is not None:
            code, message, help_ = problem
            emit_for_rows(ctx, code, f"`{ctx.name(at)}`: {message}", at, help_)


def reference_file_rule(ctx: Any, at: Path, value: str, directory: str) -> None:
    """A reference_comparison's `reference_file` names a regular file in the reference
    directory (`directory`: resolved by the schema walker), or grading would fail on
    it with a host path. A path escaping the directory is CE0206 (`criterion_rules`), a
    directory that is missing or refused has its own error."""
    if "${row." in value or "${row." in directory or not hostfs.isdir(directory):
        return
    if not value.strip() or value.startswith(("/", "~")) or ".." in re.split(r"[\\/]", value):
        return  # blank, absolute or climbing: reported as such, where it is checked
    resolved = os.path.join(directory, value)  # as the grader joins them
    if hostfs.isfile(resolved):
        return
    span = ctx.at(at)
    shown = os.path.relpath(directory, os.path.dirname(os.path.abspath(span.file)))
    what = "is not a file" if hostfs.exists(resolved) else "not found"
    files = _files_in(directory)
    emit_for_rows(ctx, "CE0207", f"`{ctx.name(at)}`: {value!r} {what} in the reference directory "
          f"{shown!r}", at, did_you_mean(value, files) or (
              "it holds " + ", ".join(files[:5]) + (", ..." if len(files) > 5 else "")
              if files else "the reference directory is empty"))


def _files_in(directory: str, limit: int = 1000) -> list[str]:
    """The regular files under `directory`, relative and sorted (at most `limit`)."""
    out: list[str] = []
    for root, dirs, names in hostfs.walk(directory):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(root, name)
            if hostfs.isfile(full):
                out.append(os.path.relpath(full, directory).replace(os.sep, "/"))
            if len(out) >= limit:
                return sorted(out)
    return sorted(out)


def _plugin_paths(ctx: Any) -> None:
    """`agent.plugins[].path`: a host directory the agent's sandbox is given (resolved
    as the runtime does: ~ and $VARS expanded, relative to the task's directory)."""
    task_file = ctx.at(("task_id",)).file
    task_dir = os.path.dirname(os.path.abspath(task_file))
    for i, plugin in enumerate(ctx.task.agent.plugins or ()):
        raw = plugin.get("path") if isinstance(plugin, dict) else None
        if not isinstance(raw, str) or not raw.strip() or "${row." in raw:
            continue
        at: Path = ("agent", "plugins", i, "path")
        resolved = os.path.join(task_dir, hostfs.expandvars(hostfs.expanduser(raw)))
        resolved = os.path.normpath(resolved)
        problem = host_path_problem(raw, resolved, task_file, ctx.roots)
        if problem is not None:
            code, message, help_ = problem
            emit_for_rows(ctx, code, f"`{ctx.name(at)}`: {message}", at, help_)
        elif not hostfs.isdir(resolved):  # else every trial would end ERROR at set-up
            emit_for_rows(ctx, "CE0207", f"`{ctx.name(at)}`: directory {raw!r} "
                          + ("is not a directory" if hostfs.exists(resolved) else "not found")
                          + f" (resolved against the task's directory: {resolved})", at,
                          "a Claude Code plugin directory, relative to the task file")


def repo_rules(ctx: Any) -> None:
    for i, src in enumerate(ctx.task.sandbox.template_sources):
        if not isinstance(src, RepoSource) or not src.url.strip():
            continue  # a blank url is reported by the schema
        at: Path = ("sandbox", "template_sources", i)
        why = repo_url_problem(src.url)
        if why is not None:
            emit_for_rows(ctx, "CE0218", f"repo url {src.url!r} {why}", (*at, "url"),
                  "a repository URL (https://host/owner/repo.git, git@host:owner/repo.git) "
                  "or a local path under the suite")
        elif is_local_repo(src.url) and ctx.roots is not None:
            # as the run clones it: relative to the task's directory, also when an
            # experiment sets it (as agent.plugins[].path)
            task_file = ctx.at(("task_id",)).file
            resolved = os.path.normpath(os.path.join(
                os.path.dirname(os.path.abspath(task_file)), src.url))
            outside = ctx.roots.outside(resolved, task_file)
            if outside is not None:  # git reads the repository, not a copy: no scan
                emit_for_rows(ctx, "CE0216", f"repo url {src.url!r} {outside}", (*at, "url"),
                      "move it under the suite, or allow its directory with --allow-path DIR")
            elif (kind := special_kind(resolved)) is not None:
                emit_for_rows(ctx, "CE0217", f"repo url {src.url!r} is {kind}", (*at, "url"), None)
        if src.commit is not None and (why := commit_problem(src.commit)) is not None:
            emit_for_rows(ctx, "CE0218", f"repo commit {src.commit!r} {why}", (*at, "commit"), None)


def emit_for_rows(ctx: Any, code: str, message: str, path: Path,
                  help_: str | None = None) -> None:
    """A problem with a value of the resolved task: on a dataset task, once for every row
    it occurs on, naming them (the value may come from `${row.KEY}`)."""
    if ctx.has_dataset:  # once, naming the rows whose values break it
        ctx.row_problems.append(RowProblem(code, message, ctx.at(path), help_, ctx.row_id))
    else:
        ctx.diags.emit(code, message, ctx.at(path), help=help_)


def _task_paths(obj: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """(path, value) of every host path field (`path="task"` or `"task_dir"`) in `obj`."""
    if not attrs.has(type(obj)):
        return
    for name, tp, rule in _searched_fields(type(obj)):
        value = getattr(obj, name)
        if value is None:
            continue
        if rule.path in ("task", "task_dir"):
            if isinstance(value, str):
                yield (*path, name), value
            elif isinstance(value, list):
                yield from (((*path, name, i), v) for i, v in enumerate(value)
                            if isinstance(v, str))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from _task_paths(v, (*path, name, i))
        elif attrs.has(type(value)) and typing.get_origin(tp) is not dict:
            yield from _task_paths(value, (*path, name))


@functools.cache
def _searched_fields(cls: type) -> tuple[tuple[str, Any, Any], ...]:
    """The fields of `cls` `_task_paths` looks in: a host path field, or one whose type
    may hold a record (a field of strings and numbers holds no path field)."""
    from ce_lang.validate import fields_of

    return tuple((name, tp, rule) for name, tp, rule, _ in fields_of(cls)
                 if rule.path in ("task", "task_dir") or _may_hold_record(tp))


def _may_hold_record(tp: Any) -> bool:
    if tp in (str, int, float, bool, type(None)) or typing.get_origin(tp) is typing.Literal:
        return False
    if isinstance(tp, type) and typing.get_origin(tp) is None and not attrs.has(tp) \
            and tp.__module__ == "builtins":
        return False
    args = typing.get_args(tp)
    if typing.get_origin(tp) is not None and args:
        return any(_may_hold_record(a) for a in args if a is not Ellipsis)
    return True  # a record, a tagged union, Any or an unknown type: looked in


def _task_dir_files(c: Any) -> Iterator[tuple[Path, str]]:
    """`$TASK_DIR/...` host files a criterion reads at grading time."""
    if isinstance(c, C.JsonCheck) and isinstance(c.json_schema, str) \
            and c.json_schema.startswith(TASK_DIR):
        yield ("json_schema",), c.json_schema
    if isinstance(c, C.LlmJudge | C.AgentJudge):
        for j, f in enumerate(c.files):
            if f.startswith(TASK_DIR) and "${row." not in f:
                yield ("files", j), f
