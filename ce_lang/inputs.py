"""Content digests of the files a plan reads from the task's side (templates, references).

They are part of the plan, hence of its hash: editing a reference solution or a template
changes the plan's identity, so an archived run is never silently compared with a plan
that reads different files.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from typing import Any

from ce_lang.schema.task import TaskSpec, TemplateDirSource

_CHUNK = 1 << 20


def digest_path(path: str, ignore: list[str], cache: dict[str, str]) -> str:
    key = path + "\0" + "\0".join(ignore)
    if key in cache:
        return cache[key]
    h = hashlib.sha256()
    if os.path.isfile(path):
        _feed_file(h, path)
    elif os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not _ignored(d, ignore))
            for name in sorted(files):
                if _ignored(name, ignore):
                    continue
                full = os.path.join(root, name)
                h.update(os.path.relpath(full, path).encode() + b"\0")
                _feed_file(h, full)
    else:
        h.update(b"<missing>")
    cache[key] = digest = "sha256:" + h.hexdigest()
    return digest


def _feed_file(h: Any, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    except OSError:
        h.update(b"<unreadable>")
    h.update(b"\0")


def _ignored(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


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
