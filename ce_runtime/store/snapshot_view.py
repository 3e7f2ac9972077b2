"""An archived workspace read in place: the manifest as a directory tree, the object store
as its file contents, answering what the restored directory would answer.

Re-scoring used to restore every trial's snapshot (a temp dir, a hard link per file,
then its removal) only to read a few files. `SnapshotView` answers the questions the
grading host asks a workspace (does this path exist, does it stay inside, which files
match this glob, is it a directory, its bytes) from the manifest, with the restored
directory's exact semantics: POSIX lookup (links followed where the kernel follows
them), `os.path.realpath`'s resolution for "inside the workspace", `pathlib.Path.glob`'s
selectors (3.11's, with 3.13's files for a trailing `**` when ce runs on 3.13). The manifest is checked as `restore_workspace` checks
it, in the same order, with the same `DamagedArchive` messages, objects included.

What it cannot answer exactly (a path that leaves the workspace through `..` or a link,
where the answer depends on the disk outside; a link loop met while resolving a path,
whose error names the temp dir; the error of reading a directory, which names it too)
raises `NeedsWorkspace`: the caller restores the snapshot and asks the disk.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from ce_runtime.store.archive import HEX64, MAX_FILE_BYTES, DamagedArchive, FileTooLarge
from ce_runtime.store.workspace_snapshot import (
    _safe_parts,
    _verified_object,
    object_bytes,
    too_large,
)

_ROOT = "/\0"  # where the view's root "is" for textual checks; no link target holds \0
_MAX_LINKS = 40  # the kernel's MAXSYMLINKS: one more followed is ELOOP


class NeedsWorkspace(Exception):
    """This question needs the restored workspace on disk."""


class _Missing(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class _Link:
    __slots__ = ("target",)

    def __init__(self, target: str):
        self.target = target


class _TooLarge:
    """A file the snapshot recorded without its bytes (archive.MAX_FILE_BYTES)."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size


# A directory is a dict (name -> node), a file the path of its object, a link a _Link.
Node = Any


class SnapshotView:
    """One trial's workspace snapshot, checked, as a read-only tree."""

    __slots__ = ("_root",)

    def __init__(self, manifest: Any, objects: str, outward_links: bool = False):
        """`outward_links`: as `restore_workspace`'s (a path through such a link is
        NeedsWorkspace: the answer depends on the disk outside)."""
        self._root = _build(manifest, objects, outward_links)

    # -- what the host asks ------------------------------------------------------------------
    def lexists(self, rel: str) -> bool:
        """`os.path.lexists(root / rel)`."""
        try:
            self._walk(_parts(rel), follow_last=False)
        except _Missing:
            return False
        return True

    def inside(self, rel: str) -> bool:
        """`(root / rel).resolve()` is under the root (NeedsWorkspace when it is not: the
        answer then depends on what lies outside)."""
        _realpath(self._root, [], "/".join(_parts(rel)), {}, 0)
        return True

    def is_dir(self, rel: str) -> bool:
        return isinstance(self._node(rel), dict)

    def is_file(self, rel: str) -> bool:
        return isinstance(self._node(rel), str | _TooLarge)

    def read(self, rel: str) -> bytes:
        """The bytes of the regular file `rel` names (links followed); OSError with the
        errno the disk would give (no file name: the caller words it)."""
        try:
            node = self._walk(_parts(rel), follow_last=True)[1]
        except _Missing as exc:
            raise OSError(exc.code, os.strerror(exc.code)) from None
        if isinstance(node, _TooLarge):
            raise FileTooLarge(node.size)
        if not isinstance(node, str):
            raise NeedsWorkspace(rel)  # a directory: read_regular's error names the path
        return object_bytes(node)

    def glob(self, pattern: str) -> list[str]:
        """`[str(p.relative_to(root)) for p in root.glob(pattern) if p.is_file() and
        inside(p)]`, unsorted; ValueError for a pattern pathlib refuses."""
        if not pattern:
            raise ValueError(f"Unacceptable pattern: {pattern!r}")
        parts = [p for p in pattern.split("/") if p and p != "."]
        if pattern.endswith("/"):
            parts.append("")
        for part in parts:  # 3.13 reads `a**b` as `a*b`; 3.11 and 3.12 refuse it
            if part != "**" and "**" in part and not TRAILING_STARSTAR_MATCHES_FILES:
                raise ValueError("Invalid pattern: '**' can only be an entire path component")
        out = []
        for path in self._select(tuple(parts), ()):
            rel = "/".join(path)
            if self.is_file(rel) and self.inside(rel):
                out.append(rel)
        return out

    # -- lookup ------------------------------------------------------------------------------
    def _node(self, rel: str) -> Node:
        try:
            return self._walk(_parts(rel), follow_last=True)[1]
        except _Missing:
            return None

    def _walk(self, parts: list[str], follow_last: bool) -> tuple[list[dict], Node]:
        return _walk([self._root], parts, follow_last, [0])

    def _entries(self, path: tuple[str, ...]) -> list[str]:
        node = self._node("/".join(path))
        return list(node) if isinstance(node, dict) else []

    # -- pathlib 3.11 glob selectors ---------------------------------------------------------
    def _select(self, parts: tuple[str, ...], parent: tuple[str, ...]) -> Iterator[tuple]:
        if not self.is_dir("/".join(parent)):
            return iter(())
        return self._selector(parts, parent)

    def _selector(self, parts: tuple[str, ...], parent: tuple[str, ...]) -> Iterator[tuple]:
        if not parts or not parts[0]:  # _TerminatingSelector
            yield parent
            return
        pat, rest = parts[0], parts[1:]
        dironly = bool(rest)
        if pat == "**":
            yielded = set()
            for start in self._directories(parent):
                for p in self._selector(rest, start):
                    if p not in yielded:
                        yielded.add(p)
                        yield p
                if not rest and TRAILING_STARSTAR_MATCHES_FILES:
                    node = self._node("/".join(start))  # what is not a directory, too
                    for name, child in list(node.items()) if isinstance(node, dict) else ():
                        if not isinstance(child, dict):
                            yield (*start, name)
        elif "*" in pat or "?" in pat or "[" in pat:
            match = _compiled(pat)
            for name in self._entries(parent):
                path = (*parent, name)
                if dironly and not self.is_dir("/".join(path)):
                    continue
                if match(name):
                    yield from self._selector(rest, path)
        else:
            path = (*parent, pat)
            rel = "/".join(path)
            if self.is_dir(rel) if dironly else self._node(rel) is not None:
                yield from self._selector(rest, path)

    def _directories(self, parent: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        """`_iterate_directories`: the parent, then its real subdirectories (links not
        followed), depth first."""
        yield parent
        node = self._node("/".join(parent))
        if not isinstance(node, dict):
            return
        for name, child in list(node.items()):
            if isinstance(child, dict):
                yield from self._directories((*parent, name))


# Python 3.13's pathlib: a pattern ending in `**` matches files as well as directories
# (3.11 and 3.12: directories only), and `**` inside a component is `*` (an error
# before). The grader globs with the running interpreter's pathlib, so the view does as
# that interpreter does.
TRAILING_STARSTAR_MATCHES_FILES = sys.version_info >= (3, 13)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    return re.compile(fnmatch.translate(pattern)).fullmatch


def _parts(rel: str) -> list[str]:
    """pathlib's parse of a relative path: empty and `.` components dropped."""
    return [p for p in rel.split("/") if p and p != "."]


def _walk(stack: list[dict], parts: list[str], follow_last: bool,
          hops: list[int]) -> tuple[list[dict], Node]:
    """The kernel's lookup of `parts` from the directory on top of `stack` (the chain of
    directories down from the root, for `..`): links followed, except a last component
    when `follow_last` is false. Returns the chain (ending at the node when it is a
    directory, else at its directory) and the node; _Missing(errno) where the disk
    would fail."""
    stack = list(stack)
    node: Node = stack[-1]
    last = len(parts) - 1
    for i, name in enumerate(parts):
        if not isinstance(node, dict):
            raise _Missing(errno.ENOTDIR)
        if name == "..":
            if len(stack) == 1:
                raise NeedsWorkspace("..")  # above the workspace: the disk decides
            stack.pop()
            node = stack[-1]
            continue
        child = node.get(name)
        if child is None:
            raise _Missing(errno.ENOENT)
        if isinstance(child, _Link) and (i < last or follow_last):
            hops[0] += 1
            if hops[0] > _MAX_LINKS:
                raise _Missing(errno.ELOOP)  # a loop, or too long a chain
            target = child.target
            if target.startswith("/"):
                raise NeedsWorkspace(target)  # out of the workspace: the disk decides
            stack, child = _walk(stack, _parts(target), True, hops)
            if target.endswith("/") and not isinstance(child, dict):
                raise _Missing(errno.ENOTDIR)
        elif isinstance(child, dict):
            stack.append(child)
        node = child
    return stack, node


def _lookup_plain(root: dict, path: list[str]) -> Node:
    """`os.lstat` of a path whose components are all resolved (no link in them)."""
    node: Node = root
    for name in path:
        if not isinstance(node, dict):
            return None
        node = node.get(name)
        if node is None:
            return None
    return node


def _realpath(root: dict, path: list[str], rest: str, seen: dict, depth: int) -> list[str]:
    """posixpath._joinrealpath (non-strict), from the root: textual `..` on the resolved
    prefix, links resolved, missing components kept as written."""
    if depth > 100:  # the disk's recursion, not ours
        raise NeedsWorkspace(rest)
    for name in rest.split("/"):
        if not name or name == ".":
            continue
        if name == "..":
            if not path:
                raise NeedsWorkspace(rest)  # above the workspace
            path = path[:-1]
            continue
        newpath = [*path, name]
        node = _lookup_plain(root, newpath)
        if not isinstance(node, _Link):
            path = newpath
            continue
        key = tuple(newpath)
        if key in seen:
            if seen[key] is None:
                raise NeedsWorkspace(rest)  # a loop: resolve() names the temp dir
            path = seen[key]
            continue
        if node.target.startswith("/"):
            raise NeedsWorkspace(rest)  # out of the workspace: the disk decides
        seen[key] = None
        path = _realpath(root, path, node.target, seen, depth + 1)
        seen[key] = path
    return path


def _build(manifest: Any, objects: str, outward_links: bool = False) -> dict:
    """The tree, checked exactly as `restore_workspace` checks (same order, same
    messages): names, entries, parents, duplicates, links, digests, objects, modes."""
    where = "workspace.json"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise DamagedArchive(where, "no `files` mapping")
    root: dict = {}
    for rel, entry in files.items():
        parts = _safe_parts(rel, where)
        if not isinstance(entry, dict):
            raise DamagedArchive(where, f"{rel!r}: not an entry")
        parent = root
        for part in parts[:-1]:
            node = parent.get(part)
            if node is None:
                node = parent[part] = {}
            elif not isinstance(node, dict):
                raise DamagedArchive(where, f"{rel!r}: goes through a link or a file "
                                            "(outside the workspace)")
            parent = node
        name = parts[-1]
        if entry.get("dir") is True:  # as restore_workspace: a directory, kept empty
            if not isinstance(parent.setdefault(name, {}), dict):
                raise DamagedArchive(where, f"{rel!r}: named twice")
            continue
        if name in parent:
            raise DamagedArchive(where, f"{rel!r}: named twice")
        if "link" in entry:
            link = entry["link"]
            if not isinstance(link, str) or not link or "\0" in link:
                raise DamagedArchive(where, f"{rel!r}: a link without a target")
            base = "/".join([_ROOT, *parts[:-1]])
            resolved = os.path.normpath(os.path.join(base, link))
            if not outward_links and (os.path.isabs(link) or not (
                    resolved == _ROOT or resolved.startswith(_ROOT + "/"))):
                raise DamagedArchive(where, f"{rel!r}: a link pointing out of the "
                                            f"workspace ({link!r})")
            parent[name] = _Link(link)
            continue
        if too_large(entry):
            size = entry.get("size")
            parent[name] = _TooLarge(size if isinstance(size, int) else MAX_FILE_BYTES + 1)
            continue
        digest = entry.get("sha256")
        if not isinstance(digest, str) or not HEX64.fullmatch(digest):
            raise DamagedArchive(where, f"{rel!r}: no valid sha256")
        obj = os.path.join(objects, digest[:2], digest[2:])
        _verified_object(obj, digest, rel)
        mode = entry.get("mode", 0o644)
        if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o7777:
            raise DamagedArchive(where, f"{rel!r}: bad mode {mode!r}")
        parent[name] = obj
    return root
