"""The task directory's files a plan grades with, kept with the run.

Criteria read files of the task's directory, not only of the workspace: the reference
solution (reference_comparison, judges, `$REFERENCE_DIR` of commands) and the
`$TASK_DIR/...` paths their arguments name (a JSON Schema, a judge's rubric, hidden tests
a command runs). They are part of what was graded. So the run keeps them
(`task_files/<plan hash>.json`: for each task directory, a manifest like
workspace.json, the bytes in `objects/`), and a re-grade of the archived plan (`ce
rescore RUN`, `ce explain TRIAL_DIR`) reads those, not what the directory holds today:
a reference edited since, a task directory moved or deleted, another machine.

When the directory still holds the same bytes, it is used as it is (nothing restored;
a command still sees the rest of the directory). Otherwise the kept files are restored
into a private directory laid out as the task's (`$TASK_DIR/../shared/rubric.md` keeps
its place) and the re-grade says so. Files a command reads without naming them in its
criterion (`pytest` collecting a whole `$TASK_DIR`) are kept only when the directory
holding them is named.

The workspace template's directories (`template_dir` sources: what their copy takes, its
ignore and include patterns applied) are kept the same way, apart
(`templates/<plan hash>.json`): not graded, but what every trial started from. A
report made later (`ce report`, report.html's file diffs) rebuilds the template from
them when the task directory no longer holds those bytes, and says so.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from ce_runtime.store.archive import (
    MAX_FILE_BYTES,
    MAX_SNAPSHOT_BYTES,
    DamagedArchive,
    load_archived_json,
)
from ce_runtime.store.atomic import write_bytes_atomic
from ce_runtime.store.workspace_snapshot import _store, restore_workspace

FORMAT = 1
SKIP_DIRS = (".git", "__pycache__", "node_modules", ".venv")


def graded_paths(plan: Any) -> list[str]:
    """Task-relative paths (normalised; they may start with `..`) the plan's grading reads
    from the task directory: the reference, and every `$TASK_DIR/...` its criteria name."""
    from ce_lang.api import task_dir_names

    found: list[str] = []
    ref = plan.reference
    if ref is not None:
        found += [os.path.normpath(p) for p in (ref.file, ref.directory) if p]
    return task_dir_names([c.args for c in plan.criteria], found)


def snapshot(task_dir: str, rels: list[str], objects: str, links: bool = False
             ) -> dict[str, Any]:
    """The manifest of `rels` under `task_dir` (a directory: every file in it). A path
    that does not exist is listed in `missing`: graded as missing then, so again.
    `links`: a symbolic link inside a directory is kept as the link (as a template copy
    makes it), not read through (as the grader reads it)."""
    files: dict[str, dict[str, Any]] = {}
    missing: list[str] = []
    kept = [0]
    for rel in rels:
        full = os.path.join(task_dir, rel)
        if os.path.isdir(full):
            for root, dirs, names in os.walk(full):
                linked = [d for d in dirs if os.path.islink(os.path.join(root, d))]
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and d not in linked)
                for name in sorted(names + linked if links else names):
                    path = os.path.join(root, name)
                    name_rel = os.path.normpath(os.path.relpath(path, task_dir))
                    if links and os.path.islink(path):
                        files[name_rel] = {"link": os.readlink(path)}
                    else:
                        _keep(path, name_rel, objects, files, kept)
        elif links and os.path.islink(full):
            files[rel] = {"link": os.readlink(full)}
        elif not _keep(full, rel, objects, files, kept):
            missing.append(rel)
    return {"version": FORMAT, "files": files, "missing": sorted(missing)}


def _keep(path: str, rel: str, objects: str, files: dict, kept: list[int]) -> bool:
    """Store one regular file (read through links, as the grader reads it)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                return False
            if st.st_size > MAX_FILE_BYTES or kept[0] + st.st_size > MAX_SNAPSHOT_BYTES:
                files[rel] = {"too_large": True, "mode": stat.S_IMODE(st.st_mode),
                              "size": st.st_size}
                return True
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return False
    kept[0] += len(data)
    files[rel] = {"sha256": _store(objects, data), "mode": stat.S_IMODE(st.st_mode),
                  "size": len(data)}
    return True


def template_entries(source: str, ignore: Sequence[str], include: Sequence[str]
                     ) -> Iterator[tuple[str, bool]]:
    """What a `template_dir` copy of `source` takes, in copy order: (template-relative
    path, is a directory to make). A link, to a directory too, is an entry (copied as the
    link, never followed); directories an ignore pattern drops are not walked unless an
    include pattern may re-include something beneath. The copy (the sandbox's workspace)
    and the run's archive of its templates (`template_files`) both walk it."""
    from ce_lang.api import ignored_by, included_by

    for dirpath, dirnames, filenames in os.walk(source):
        rel_dir = os.path.relpath(dirpath, source)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/")
        kept: list[str] = []
        links: list[str] = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if os.path.islink(os.path.join(dirpath, d)):
                links.append(d)
            elif not ignored_by(rel, ignore) or include:  # re-includes may lie beneath
                kept.append(d)
        dirnames[:] = kept
        for d in kept:
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if not ignored_by(rel, ignore) or included_by(rel, include):
                yield rel, True
        for name in sorted(filenames) + links:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not ignored_by(rel, ignore) or included_by(rel, include):
                yield rel, False


def template_files(plan: Any, task_dir: str) -> list[str]:
    """Task-relative paths of what the plan's `template_dir` sources copy from
    `task_dir` into a workspace (its ignore and include patterns applied, as the copy
    applies them): the files and links, not the directories."""
    ignore = list(plan.ignore_patterns)
    found: set[str] = set()
    for src in plan.sandbox.template_sources:
        if getattr(src, "type", None) != "template_dir":
            continue
        base = os.path.normpath(src.path)
        include = [p.replace("\\", "/").removeprefix("./").rstrip("/")
                   for p in src.include_patterns if p.strip()]
        source = os.path.join(task_dir, base)
        if os.path.isdir(source):
            found.update(os.path.normpath(os.path.join(base, rel))
                         for rel, is_dir in template_entries(source, ignore, include)
                         if not is_dir)
    return sorted(found)


def manifest_path(run_dir: str, plan_hash: str) -> str:
    return os.path.join(run_dir, "task_files", f"{plan_hash}.json")


def template_manifest_path(run_dir: str, plan_hash: str) -> str:
    return os.path.join(run_dir, "templates", f"{plan_hash}.json")


def archive(run_dir: str, trials: list[Any]) -> None:
    """task_files/<hash>.json for every plan whose grading reads task files, and
    templates/<hash>.json for every plan whose template copies task directories (none
    for most plans: nothing is written then). A file already there (a resumed run) is
    kept: the trials it finished were graded with, and started from, those bytes."""
    _archive(run_dir, trials, lambda plan, _: graded_paths(plan), manifest_path, False)
    _archive(run_dir, trials, template_files, template_manifest_path, True)


def _archive(run_dir: str, trials: list[Any], paths_of: Any, path_of: Any,
             links: bool) -> None:
    """`paths_of(plan, task_dir)`: the task-relative paths to keep, once per plan and
    task directory."""
    import json

    paths: dict[tuple[str, str], list[str]] = {}
    by_plan: dict[str, dict[str, Any]] = {}
    kept_before: dict[str, bool] = {}  # a resumed run's: the trials it ran started so
    for t in trials:
        if t.plan_hash not in kept_before:
            kept_before[t.plan_hash] = os.path.exists(path_of(run_dir, t.plan_hash))
        if not t.task_dir or kept_before[t.plan_hash]:
            continue
        task_dir = os.path.abspath(t.task_dir)
        rels = paths.get((t.plan_hash, task_dir))
        if rels is None:
            rels = paths[t.plan_hash, task_dir] = paths_of(t.plan, task_dir)
        if rels:
            by_plan.setdefault(t.plan_hash, {})[task_dir] = rels
    objects = os.path.join(run_dir, "objects")
    for plan_hash, dirs in by_plan.items():
        path = path_of(run_dir, plan_hash)
        doc = {"version": FORMAT, "task_dirs": {
            d: snapshot(d, rels, objects, links) for d, rels in sorted(dirs.items())}}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_bytes_atomic(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


_RESOLVED: dict[tuple[str, str, str], tuple[str, list[str]]] = {}
_MADE: list[str] = []  # directories restored by this process, removed at its exit


def task_dir_for(run_dir: str, plan_hash: str, task_dir: str) -> tuple[str, list[str]]:
    """The directory a re-grade of the archived plan reads as the task's, and what to
    say about it: `task_dir` itself while it holds the kept bytes (or the run kept
    none: an older ce), else the kept files restored. Resolved once per process."""
    key = (os.path.abspath(run_dir), plan_hash, task_dir)
    hit = _RESOLVED.get(key)
    if hit is None:
        hit = _RESOLVED[key] = _resolve(manifest_path(run_dir, plan_hash), run_dir,
                                        task_dir, "graded with", False)
    return hit


def template_dir_for(run_dir: str, plan_hash: str, task_dir: str) -> tuple[str, list[str]]:
    """The directory the plan's template is rebuilt from, as the run's trials started
    from it: `task_dir` while its template directories hold the bytes the run kept (or
    the run kept none: an older ce), else the kept copies restored, and what to say.
    Raises DamagedArchive."""
    key = (os.path.abspath(run_dir), plan_hash + "\0template", task_dir)
    hit = _RESOLVED.get(key)
    if hit is None:
        hit = _RESOLVED[key] = _resolve(template_manifest_path(run_dir, plan_hash), run_dir,
                                        task_dir, "the template rebuilt from", True)
    return hit


def _resolve(path: str, run_dir: str, task_dir: str, used: str, outward_links: bool
             ) -> tuple[str, list[str]]:
    if not os.path.exists(path):
        return task_dir, []
    doc = load_archived_json(path)
    dirs = doc.get("task_dirs")
    entry = dirs.get(os.path.abspath(task_dir)) if isinstance(dirs, dict) and task_dir \
        else None
    if entry is None and isinstance(dirs, dict) and len(dirs) == 1:
        entry = next(iter(dirs.values()))  # a record without its directory
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
        raise DamagedArchive(path, f"no kept files for the task directory {task_dir!r}")
    _check_entry(entry, path)
    changed = _changed(task_dir, entry)
    if not changed:
        return task_dir, []
    restored = _restore(entry, os.path.join(run_dir, "objects"), path, outward_links)
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3
                                      else "")
    return restored, [f"the task's files changed since the run ({shown}): {used} "
                      "the copies the run kept"]


def _check_entry(entry: dict[str, Any], where: str) -> None:
    """The manifest's shape, before anything reads it (a damaged one is said, not a
    traceback); each kept file's own fields are checked by the restore."""
    missing = entry.get("missing", [])
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        raise DamagedArchive(where, "`missing` is not a list of paths")
    for rel, e in entry["files"].items():
        if not isinstance(e, dict):
            raise DamagedArchive(where, f"{rel!r}: not an entry")
        _climbs(rel, where)


def _changed(task_dir: str, entry: dict[str, Any]) -> list[str]:
    """The kept paths whose bytes the task directory no longer holds (all of them when
    it is gone), and the missing ones that now exist."""
    if not task_dir or not os.path.isdir(task_dir):
        return [*entry["files"], *entry.get("missing", [])] or ["the directory"]
    out = []
    for rel, e in entry["files"].items():
        full = os.path.join(task_dir, rel)
        try:
            if "link" in e:
                same = os.path.islink(full) and os.readlink(full) == e["link"]
            elif e.get("too_large"):
                same = os.path.getsize(full) == e.get("size")
            else:
                with open(full, "rb") as fh:
                    same = hashlib.sha256(fh.read(MAX_FILE_BYTES + 1)).hexdigest() == \
                        e.get("sha256")
        except OSError:
            same = False
        if not same:
            out.append(rel)
    out += [rel for rel in entry.get("missing", []) if os.path.exists(os.path.join(task_dir,
                                                                                 rel))]
    return out


def _restore(entry: dict[str, Any], objects: str, where: str, outward_links: bool = False
             ) -> str:
    """The kept files in a fresh directory; the task directory is nested as deep as the
    deepest `..` a path climbs, so each keeps its place relative to it. `outward_links`:
    a kept link may point anywhere (a template's, copied as a link, never followed)."""
    names = [*entry["files"], *entry.get("missing", [])]
    depth = max((_climbs(rel, where) for rel in names), default=0)
    root = tempfile.mkdtemp(prefix="ce-task-files-")
    if not _MADE:
        atexit.register(_cleanup)
    _MADE.append(root)
    task_dir = os.path.join(root, *(["task"] * (depth + 1)))
    os.makedirs(task_dir)
    lifted = {os.path.normpath(os.path.join(*(["task"] * (depth + 1)), rel)): e
              for rel, e in entry["files"].items()}
    try:
        restore_workspace({"files": lifted}, objects, root, outward_links=outward_links)
    except DamagedArchive as exc:  # named after the manifest, not workspace.json
        raise DamagedArchive(where if exc.path == "workspace.json" else exc.path,
                             exc.why) from None
    return task_dir


def _climbs(rel: str, where: str) -> int:
    parts = rel.split("/")
    n = 0
    while n < len(parts) and parts[n] == "..":
        n += 1
    if os.path.isabs(rel) or ".." in parts[n:] or n > 64:
        raise DamagedArchive(where, f"{rel!r}: not a path under the task's directory tree")
    return n


def _cleanup() -> None:
    for d in _MADE:
        shutil.rmtree(d, ignore_errors=True)
