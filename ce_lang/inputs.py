"""Content digests of the files a plan reads from the task's side (templates, references).

They are part of the plan, hence of its hash: editing a reference solution or a template
changes the plan's identity, so an archived run is never silently compared with a plan
that reads different files.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import stat
from typing import TYPE_CHECKING, Any

from ce_lang import hostfs
from ce_lang.schema.blocks import TemplateDirSource

if TYPE_CHECKING:
    from ce_lang.schema.task import TaskSpec


def digest_path(path: str, ignore: list[str], cache: dict[str, str]) -> str:
    key = path + "\0" + "\0".join(ignore)
    if key in cache:
        return cache[key]
    h = hashlib.sha256()
    if hostfs.isfile(path):
        _feed_file(h, path)
    elif hostfs.isdir(path):
        for root, dirs, files in hostfs.walk(path):
            links = [d for d in dirs if hostfs.islink(os.path.join(root, d))]
            dirs[:] = sorted(d for d in dirs if not _ignored(d, ignore) and d not in links)
            for name in sorted(files + links):
                if _ignored(name, ignore):
                    continue
                full = os.path.join(root, name)
                h.update(os.path.relpath(full, path).encode() + b"\0")
                _feed_entry(h, full)
    else:
        h.update(b"<missing>")
    cache[key] = digest = "sha256:" + h.hexdigest()
    return digest


def _feed_entry(h: Any, path: str) -> None:
    """A directory entry as the sandbox copy sees it: a link is its target's name (the
    copy keeps links, never follows them), a FIFO or device only its kind (never opened:
    it would block or never end)."""
    mode = hostfs.mode(path, follow=False)
    if mode == -1:
        h.update(b"<unreadable>\0")
        return
    if mode == stat.S_IFLNK:
        target = hostfs.readlink(path)
        if target is None:
            raise FileNotFoundError(0, "the link vanished while it was read", path)
        h.update(b"<link>" + os.fsencode(target) + b"\0")
    elif mode == stat.S_IFREG:
        _feed_file(h, path)
    else:
        h.update(b"<special>\0")


def _feed_file(h: Any, path: str) -> None:
    if not hostfs.feed(path, h):
        h.update(b"<unreadable>")
    h.update(b"\0")


def _ignored(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


# `$TASK_DIR/x`, `${TASK_DIR}/x` in a criterion's arguments (a JSON Schema, a judge's
# rubric, hidden tests a command runs): the path runs to a blank, quote or shell operator
_NAMED = re.compile(r"\$(?:TASK_DIR\b|\{TASK_DIR\})/([^\s'\"`;|&<>()$]+)")


def task_dir_names(value: Any, out: list[str] | None = None) -> list[str]:
    """The task-relative paths (normalised, first-seen order; they may climb with `..`)
    that `$TASK_DIR/...` names in a criterion's arguments (strings, lists, mappings)."""
    out = [] if out is None else out
    if isinstance(value, str):
        if "TASK_DIR" in value:
            for m in _NAMED.findall(value):
                rel = os.path.normpath(m.rstrip("/.,:"))
                if rel and rel != "." and not os.path.isabs(rel) and rel not in out:
                    out.append(rel)
    elif isinstance(value, dict):
        for v in value.values():
            task_dir_names(v, out)
    elif isinstance(value, list | tuple):
        for v in value:
            task_dir_names(v, out)
    return out


def named_digests(args: list[Any], task_dir: str, ignore: list[str], cache: dict[str, str]
                  ) -> dict[str, str]:
    """Relative path -> content digest of what the criteria's `$TASK_DIR/...` name."""
    return {rel: digest_path(os.path.join(task_dir, rel), ignore, cache)
            for rel in task_dir_names(args)}


def input_digests(task: TaskSpec, task_dir: str, ignore: list[str], cache: dict[str, str]
                  ) -> dict[str, str]:
    """Relative path (from the task's directory) -> content digest."""
    paths: list[str] = []
    for src in task.sandbox.template_sources:
        if isinstance(src, TemplateDirSource):
            paths.append(src.path)
    if task.reference is not None:
        paths += [p for p in (task.reference.file, task.reference.directory) if p]
    if task.agent.system_prompt_file:
        paths.append(task.agent.system_prompt_file)
    return {os.path.relpath(p, task_dir): digest_path(p, ignore, cache) for p in paths}
