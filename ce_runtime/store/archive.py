"""Archived trials: content-addressed workspace snapshots and trial directories.

A run directory holds `plans/<hash>.json` and an `objects/` store shared by all its
trials (a file's bytes stored once under its sha256, however many trials wrote it). A
trial directory holds `task.json`, `trace.msgpack` and `workspace.json` (the snapshot
manifest: path -> digest and mode). From these a trial can be explained and re-scored
offline, without the agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from typing import Any

from ce_runtime.store.atomic import write_bytes_atomic, write_json_atomic

SNAPSHOT_VERSION = 1


def _store(objects: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(objects, digest[:2], digest[2:])
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_bytes_atomic(path, data)
    return digest


def snapshot_workspace(workspace: str, objects: str, skip_dirs: tuple[str, ...] = (
        ".venv", "node_modules", ".git", "__pycache__")) -> dict[str, Any]:
    """Store every file (symlinks as links) and return the manifest."""
    files: dict[str, dict[str, Any]] = {}
    for root, dirs, names in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
        for name in sorted(names):
            full = os.path.join(root, name)
            rel = os.path.relpath(full, workspace).replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                files[rel] = {"link": os.readlink(full)}
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            try:  # never through a link swapped in since the lstat
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fh:
                digest = _store(objects, fh.read())
            files[rel] = {"sha256": digest, "mode": stat.S_IMODE(st.st_mode),
                          "size": st.st_size}
    return {"version": SNAPSHOT_VERSION, "skipped_dirs": list(skip_dirs), "files": files}


def restore_workspace(manifest: dict[str, Any], objects: str, dest: str) -> None:
    os.makedirs(dest, exist_ok=True)
    for rel, entry in manifest["files"].items():
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if "link" in entry:
            os.symlink(entry["link"], target)
            continue
        digest = entry["sha256"]
        shutil.copyfile(os.path.join(objects, digest[:2], digest[2:]), target)
        os.chmod(target, entry.get("mode", 0o644))


def find_run_root(trial_dir: str) -> str | None:
    """The run directory above a trial directory (it has plans/ and objects/)."""
    d = os.path.abspath(trial_dir)
    for _ in range(6):
        if os.path.isdir(os.path.join(d, "plans")) and os.path.isdir(os.path.join(d, "objects")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return None


def write_trial_files(trial_dir: str, task: dict[str, Any], manifest: dict[str, Any],
                      evidence: dict[str, Any] | None = None) -> None:
    """task.json last: a trial directory with a task.json is complete. `evidence`: what
    grading ran and asked, per criterion (evidence.json): the scores in task.json are
    reproducible bit for bit, the commands' own output (timings, say) need not be."""
    os.makedirs(trial_dir, exist_ok=True)
    write_json_atomic(os.path.join(trial_dir, "workspace.json"), manifest)
    if evidence is not None:
        write_json_atomic(os.path.join(trial_dir, "evidence.json"), evidence)
    write_json_atomic(os.path.join(trial_dir, "task.json"), task)


def load_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_definitions(run_dir: str, digest: str, texts: dict[str, str]) -> None:
    """The standard criteria a run's plans were compiled against, kept with the run:
    `definitions/stdlib-<digest>/<file>.ce` (content-addressed, written once)."""
    base = os.path.join(run_dir, "definitions", f"stdlib-{digest}")
    if os.path.isdir(base):
        return
    os.makedirs(base + ".partial", exist_ok=True)
    for name, text in texts.items():
        write_bytes_atomic(os.path.join(base + ".partial", name), text.encode())
    os.replace(base + ".partial", base)


def load_definitions(run_dir: str, digest: str) -> dict[str, str] | None:
    base = os.path.join(run_dir, "definitions", f"stdlib-{digest}")
    if not os.path.isdir(base):
        return None
    out = {}
    for name in sorted(os.listdir(base)):
        with open(os.path.join(base, name), encoding="utf-8") as fh:
            out[name] = fh.read()
    return out
