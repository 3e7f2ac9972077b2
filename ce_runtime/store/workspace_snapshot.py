"""Workspace snapshots: a trial's files stored content-addressed in the run's `objects/`
store (a file's bytes once under its sha256, however many trials wrote it), the manifest
(path -> digest and mode) that names them, and the verified restore of a manifest into a
directory (every object checked against its digest, nothing written outside the target).
The trial directory's other files and their digests are `archive`'s."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from typing import Any

from ce_runtime.store.archive import (
    HEX64,
    MAX_FILE_BYTES,
    MAX_SNAPSHOT_BYTES,
    SNAPSHOT_VERSION,
    DamagedArchive,
    read_bytes,
)
from ce_runtime.store.atomic import write_bytes_atomic


def _store(objects: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    path = os.path.join(objects, digest[:2], digest[2:])
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_bytes_atomic(path, data)
    return digest


# directories a workspace snapshot leaves out: environments and caches, not the work
SNAPSHOT_SKIPPED_DIRS = (".venv", "node_modules", ".git", "__pycache__")


def snapshot_workspace(workspace: str, objects: str,
                       skip_dirs: tuple[str, ...] = SNAPSHOT_SKIPPED_DIRS,
                       keep: Iterable[str] = ()) -> dict[str, Any]:
    """Store every file (symlinks as links) and return the manifest; a file over the
    limits is recorded without its bytes (`{"too_large": true, "size", "mode"}`).

    `keep`: workspace paths the grading found (a criterion's literal path or its glob's
    matches): one inside a skipped directory is kept all the same (`node_modules/x/
    package.json` a criterion read), and one that is a directory with nothing kept
    beneath it is recorded as `{"dir": true}` (`file_exists: out` of an empty `out/`),
    so a re-grade of the archive answers as the grading did."""
    files: dict[str, dict[str, Any]] = {}
    kept = [0]
    for root, dirs, names in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
        # a link to a directory is listed with the directories (and not walked into):
        # it is a link of the workspace like any other
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        if links:
            dirs[:] = [d for d in dirs if d not in links]
        for name in sorted([*names, *links]):
            full = os.path.join(root, name)
            _snapshot_entry(full, os.path.relpath(full, workspace).replace(os.sep, "/"),
                            objects, files, kept)
    if keep:
        _keep_found(workspace, objects, skip_dirs, sorted(set(keep)), files, kept)
    return {"version": SNAPSHOT_VERSION, "skipped_dirs": list(skip_dirs), "files": files}


def keep_found(workspace: str, objects: str, manifest: dict[str, Any],
               keep: Iterable[str]) -> dict[str, Any]:
    """`manifest` (a snapshot taken before the grading) with what the grading then found
    where a snapshot skips (`keep`, as `snapshot_workspace` keeps it): a new manifest."""
    files = dict(manifest["files"])
    kept = [sum(e.get("size", 0) for e in files.values() if "sha256" in e)]
    _keep_found(workspace, objects, tuple(manifest["skipped_dirs"]), sorted(set(keep)),
                files, kept)
    return {**manifest, "files": files}


def _snapshot_entry(full: str, rel: str, objects: str, files: dict[str, dict[str, Any]],
                    kept: list[int]) -> None:
    """One file or link into the manifest (anything else is left out)."""
    try:
        st = os.lstat(full)
    except OSError:
        return
    if stat.S_ISLNK(st.st_mode):
        files[rel] = {"link": os.readlink(full)}
        return
    if not stat.S_ISREG(st.st_mode):
        return
    try:  # never through a link swapped in since the lstat
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_FILE_BYTES or kept[0] + size > MAX_SNAPSHOT_BYTES:
            files[rel] = {"too_large": True, "mode": stat.S_IMODE(st.st_mode), "size": size}
            return
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:  # grown since the fstat
        files[rel] = {"too_large": True, "mode": stat.S_IMODE(st.st_mode),
                      "size": len(data)}
        return
    kept[0] += len(data)
    files[rel] = {"sha256": _store(objects, data), "mode": stat.S_IMODE(st.st_mode),
                  "size": len(data)}


def _keep_found(workspace: str, objects: str, skip_dirs: tuple[str, ...], keep: list[str],
                files: dict[str, dict[str, Any]], kept: list[int]) -> None:
    root = os.path.realpath(workspace)
    dirs = []
    for rel in keep:
        parts = rel.split("/")
        if os.path.isabs(rel) or any(p in ("", ".", "..") for p in parts) or rel in files:
            continue
        parent, through_link = root, False
        for part in parts[:-1]:  # never through a link: the walk does not follow them
            parent = os.path.join(parent, part)
            if os.path.islink(parent) or not os.path.isdir(parent):
                through_link = True
                break
        if through_link:
            continue
        full = os.path.join(parent, parts[-1])
        if os.path.isdir(full) and not os.path.islink(full):
            dirs.append(rel)
        elif any(p in skip_dirs for p in parts[:-1]):
            _snapshot_entry(full, rel, objects, files, kept)
    for rel in dirs:
        if not any(name.startswith(rel + "/") for name in files):
            files[rel] = {"dir": True}


# Objects whose bytes were checked against their digest in this process, with the
# identity of the file checked (a replaced object is checked again).
_VERIFIED: dict[str, tuple[int, int, int]] = {}


def _verified_object(obj: str, digest: str, rel: str) -> bytes | None:
    """Check an object once per process; its bytes when they were read for it."""
    try:
        st = os.stat(obj)
    except OSError as exc:
        raise DamagedArchive(obj, f"the object of {rel!r} is missing or unreadable "
                                  f"({exc.strerror})") from None
    identity = (st.st_ino, st.st_size, st.st_mtime_ns)
    if _VERIFIED.get(obj) == identity:
        return None
    try:
        with open(obj, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise DamagedArchive(obj, f"the object of {rel!r} is missing or unreadable "
                                  f"({exc.strerror})") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise DamagedArchive(obj, f"the object of {rel!r} does not match its digest")
    if len(_VERIFIED) > 100_000:
        _VERIFIED.clear()
    _VERIFIED[obj] = identity
    return data


_OBJECT_BYTES: dict[str, tuple[tuple[int, int, int], bytes]] = {}
_OBJECT_BYTES_HELD = [0]
OBJECT_CACHE_BYTES = 64 << 20  # at most this much; objects over 1 MiB are not kept


def object_bytes(obj: str) -> bytes:
    """An object's bytes. One checked against its digest in this process and still the
    file that was checked (`_verified_object`: same inode, size and mtime) is read once
    and then kept: re-grading reads the same objects trial after trial (a task's files,
    the files every trial writes alike)."""
    identity = _VERIFIED.get(obj)
    hit = _OBJECT_BYTES.get(obj)
    if hit is not None and identity is not None and hit[0] == identity:
        return hit[1]
    data = read_bytes(obj)
    if identity is not None and len(data) <= 1 << 20:
        if _OBJECT_BYTES_HELD[0] + len(data) > OBJECT_CACHE_BYTES:
            _OBJECT_BYTES.clear()
            _OBJECT_BYTES_HELD[0] = 0
        _OBJECT_BYTES[obj] = (identity, data)
        _OBJECT_BYTES_HELD[0] += len(data)
    return data


class OutwardLink(DamagedArchive):
    """A link out of the workspace, where a restore allows none: the agent's own link
    (`ln -s /etc/hosts h`), not damage to the archive."""


def restore_workspace(manifest: dict[str, Any], objects: str, dest: str,
                      link_objects: bool = False, outward_links: bool = False) -> None:
    """Rebuild a snapshot in `dest`. Every object must match its digest; names must be
    relative and stay inside `dest` (no absolute name, no `..`, no path through a link);
    a link must point inside `dest`, unless `outward_links`. Raises DamagedArchive
    (what was written stays).

    `outward_links`: a link out of the workspace is restored as the agent made it
    (`ln -s /usr/bin/env env` is ordinary agent output, not damage). For re-grading
    only: the grader never reads through a path that resolves outside the workspace, as
    in the trial itself; extracting for a person (`ce trial files --extract`) refuses.

    `link_objects`: files are hard links to the objects (no bytes copied; re-grading
    thousands of trials reads the store in place). Only for readers: anything that may
    write to the workspace (a command) must first call `unshare_objects`."""
    where = "workspace.json"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise DamagedArchive(where, "no `files` mapping")
    os.makedirs(dest, exist_ok=True)
    root = os.path.realpath(dest)
    for rel, entry in files.items():
        parts = _safe_parts(rel, where)
        if not isinstance(entry, dict):
            raise DamagedArchive(where, f"{rel!r}: not an entry")
        parent = root
        for part in parts[:-1]:  # real directories only, never through a link
            parent = os.path.join(parent, part)
            try:
                os.mkdir(parent)
            except FileExistsError:
                if os.path.islink(parent) or not os.path.isdir(parent):
                    raise DamagedArchive(where, f"{rel!r}: goes through a link or a file "
                                                "(outside the workspace)") from None
        target = os.path.join(parent, parts[-1])
        if entry.get("dir") is True:  # a directory the grading found, with nothing kept in it
            if os.path.islink(target) or (os.path.lexists(target) and
                                          not os.path.isdir(target)):
                raise DamagedArchive(where, f"{rel!r}: named twice")
            os.makedirs(target, exist_ok=True)
            continue
        if os.path.lexists(target):
            raise DamagedArchive(where, f"{rel!r}: named twice")
        if "link" in entry:
            link = entry["link"]
            if not isinstance(link, str) or not link or "\0" in link:
                raise DamagedArchive(where, f"{rel!r}: a link without a target")
            resolved = os.path.normpath(os.path.join(parent, link))
            if not outward_links and (os.path.isabs(link) or not (
                    resolved == root or resolved.startswith(root + os.sep))):
                raise OutwardLink(where, f"{rel!r}: a link pointing out of the "
                                         f"workspace ({link!r})")
            os.symlink(link, target)
            continue
        if too_large(entry):  # recorded, not kept: not restored
            continue
        digest = entry.get("sha256")
        if not isinstance(digest, str) or not HEX64.fullmatch(digest):
            raise DamagedArchive(where, f"{rel!r}: no valid sha256")
        obj = os.path.join(objects, digest[:2], digest[2:])
        data = _verified_object(obj, digest, rel)
        mode = entry.get("mode", 0o644)
        if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:
            raise DamagedArchive(where, f"{rel!r}: bad mode {mode!r}")
        if link_objects:
            try:
                os.link(obj, target)
                continue
            except OSError:
                pass  # another file system, or links not allowed: copy
        if data is None:
            with open(obj, "rb") as fh:
                data = fh.read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise DamagedArchive(obj, f"the object of {rel!r} does not match its digest")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), mode & 0o777)
    if not outward_links:
        _links_stay_inside(files, root, where)


def _links_stay_inside(files: dict[str, Any], root: str, where: str) -> None:
    """Each restored link, resolved by the disk: its target's text can stay inside
    while the links it goes through lead out (`sub/l1 -> ..`, `sub/c -> l1/..` is the
    root's parent), and a link made later can redirect one made before."""
    for rel, entry in files.items():
        if "link" not in entry:
            continue
        real = os.path.realpath(os.path.join(root, *rel.split("/")))
        if not (real == root or real.startswith(root + os.sep)):
            raise OutwardLink(where, f"{rel!r}: a link pointing out of the workspace "
                                     f"(through another link: {entry['link']!r})")


def unshare_objects(manifest: dict[str, Any], dest: str) -> None:
    """Turn the hard links `restore_workspace(link_objects=True)` made into private
    copies with their recorded modes, so a command writing to the workspace cannot touch
    the run's object store."""
    for rel, entry in manifest["files"].items():
        if "link" in entry or too_large(entry):
            continue
        path = os.path.join(dest, *rel.split("/"))
        st = os.lstat(path)
        if st.st_nlink < 2 or not stat.S_ISREG(st.st_mode):
            continue
        with open(path, "rb") as fh:
            data = fh.read()
        tmp = path + ".ce-unshare"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            os.fchmod(out.fileno(), entry.get("mode", 0o644) & 0o777)
        os.replace(tmp, path)


def too_large(entry: dict[str, Any]) -> bool:
    """A manifest entry of a file recorded without its bytes (over the limits)."""
    return entry.get("too_large") is True and "sha256" not in entry


def _safe_parts(rel: Any, where: str) -> list[str]:
    if not isinstance(rel, str) or not rel or "\0" in rel or "\\" in rel:
        raise DamagedArchive(where, f"bad file name {rel!r}")
    if rel.startswith("/") or os.path.isabs(rel):
        raise DamagedArchive(where, f"{rel!r}: an absolute name")
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise DamagedArchive(where, f"{rel!r}: an empty, `.` or `..` component")
    return parts
