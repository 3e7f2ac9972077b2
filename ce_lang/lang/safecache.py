"""ce's per-user cache (`~/.cache/ce`): data only, checked before use.

Every command loads the compiled grammar and the checked standard library from here, so a
replaced file must never run code. Files are pickles read by an unpickler that resolves
no global but the classes a caller allows (the grammar: none at all, pure data; the
stdlib: ce_lang's own classes, never a function), and only from a file this user owns
and nobody else may write. Anything else is a miss: the caller rebuilds and rewrites it.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import stat
from collections.abc import Callable
from typing import Any


def cache_dir() -> str:
    from ce_lang.caches import ce_cache

    return ce_cache()


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, allow: Callable[[str, str], bool]):
        super().__init__(io.BytesIO(data))
        self.allow = allow

    def find_class(self, module: str, name: str) -> Any:
        if not self.allow(module, name):
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in ce's cache")
        return super().find_class(module, name)


def no_globals(module: str, name: str) -> bool:
    return False


def ce_lang_classes(module: str, name: str) -> bool:
    """A class defined in ce_lang (constructing one runs no code of the file's choosing);
    never a function, nor a name a ce_lang module merely imported."""
    if not module.startswith("ce_lang.") or "." in name:
        return False
    import importlib

    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(obj, type) and obj.__module__ == module


def _trusted(path: str) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() \
        and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def load(name: str, allow: Callable[[str, str], bool]) -> Any | None:
    """The cached object, or None (missing, not ours, writable by others, not data)."""
    path = os.path.join(cache_dir(), name)
    if not _trusted(path):
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        value = _Unpickler(data, allow).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError,
            IndexError, AttributeError, ImportError, RecursionError, MemoryError):
        return None
    touch(name)
    return value


KEEP = 8  # entries of one kind (`stdlib-*.pickle`, ...) kept: the most recently used


def store(name: str, obj: Any) -> None:
    """Write atomically, readable by this user only; a read-only home is fine (no cache).
    Older entries of the same kind (the name up to its last `-`) beyond the KEEP most
    recently used are removed: every edit of the standard criteria or of ce makes a new
    key, and nothing else would ever delete the old ones."""
    directory = cache_dir()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        import tempfile  # only when storing: start-up stays without it

        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, os.path.join(directory, name))
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return
    _prune(directory, name)


def _prune(directory: str, name: str) -> None:
    kind, sep, _ = name.rpartition("-")
    if not sep:
        return
    suffix = os.path.splitext(name)[1]
    aged = []
    try:
        for entry in os.scandir(directory):
            if entry.name.startswith(kind + "-") and entry.name.endswith(suffix) \
                    and entry.name[len(kind) + 1:].count("-") == 0 \
                    and entry.is_file(follow_symlinks=False):
                aged.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
    except OSError:
        return
    for _, old in sorted(aged, reverse=True)[KEEP:]:
        if old != name:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, old))


def touch(name: str) -> None:
    """Mark an entry used (pruning keeps the most recently used ones)."""
    with contextlib.suppress(OSError):
        os.utime(os.path.join(cache_dir(), name))
