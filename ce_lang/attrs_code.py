"""A per-machine cache of the methods attrs generates for ce's classes.

attrs writes each class's `__init__`, `__eq__`, `__hash__`, `__repr__` ... as Python
source and compiles it when the class is defined: ~140 classes and 60 ms of every `ce`
start that loads the compiler or the runtime (a third of `ce run`'s imports). The code
objects depend only on that source, so they are kept, marshalled, beside the other
caches and reused by the next process. attrs still builds every class itself (its
linecache entry too, for tracebacks); only `compile` is skipped.

The one part of a generated script that changes between processes is the salt attrs
puts in `__hash__` (`hash()` of a string, randomised per process): it is keyed as a
placeholder and the cached code keeps the salt of the process that compiled it, which
is as good a per-class constant as any (instance hashes never outlive a process).

The file holds code, so it is read only when it is a regular file this user owns that
nobody else may write, in a directory of the same kind (caches.read_private): the trust
Python gives its own `__pycache__`. `install()` hooks attrs when it is imported (so `ce --help` still imports no attrs);
anything unexpected (another attrs, an unreadable or foreign cache file) means plain
compiling. CE_NO_ATTRS_CACHE=1 turns it off.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Any

from ce_lang.caches import ce_cache, read_private, write_private

FORMAT = 1
MAX_ENTRIES = 600  # ~3 KB each, loaded whole at start: beyond this a write keeps only
# what this process used (ce uses ~200 classes; edits of ce's classes add entries)
STALE_AFTER_S = 30 * 86400
_FILENAME = re.compile(r"<attrs generated \w+ (.+?)(?:-\d+)?>\Z")


class _Cache:
    def __init__(self, path: str) -> None:
        self.path = path
        self.stored: dict[str, Any] = _load(path)
        self.used: dict[str, Any] = {}
        self.hits = 0
        self.misses = 0

    def compile_and_eval(self, script: str, globs, locs=None, filename: str = "") -> None:
        key = _key(script, filename)
        code = self.stored.get(key)
        if code is None:
            code = compile(script, filename, "exec")
            self.misses += 1
        else:
            self.hits += 1
        self.used[key] = code
        eval(code, globs, locs)

    def save(self) -> None:
        """Write the cache when this process compiled something (at exit)."""
        if not self.misses:
            return
        merged = {**_load(self.path), **self.used}
        if len(merged) > MAX_ENTRIES:
            merged = dict(self.used)
        if write_private(self.path, _encode(merged)):
            prune(os.path.dirname(self.path), keep=os.path.basename(self.path))


_ACTIVE: _Cache | None = None


def _key(script: str, filename: str) -> str:
    import hashlib

    match = _FILENAME.match(filename)
    if match is not None:  # the __hash__ salt, hash("<attrs generated hash mod.Class>")
        salt = str(hash(f"<attrs generated hash {match[1]}>"))
        script = script.replace(salt, "<salt>")
    return hashlib.sha1(f"{filename}\0{script}".encode()).hexdigest()


def _encode(entries: dict[str, Any]) -> bytes:
    import marshal

    return marshal.dumps((FORMAT, entries))


def _load(path: str) -> dict[str, Any]:
    import marshal

    data = read_private(path)
    if data is None:
        return {}
    try:
        fmt, entries = marshal.loads(data)
    except Exception:  # a corrupt or foreign file: compile
        return {}
    return entries if fmt == FORMAT and isinstance(entries, dict) else {}


def prune(directory: str, keep: str, max_age_s: float = STALE_AFTER_S) -> None:
    """Remove the files of other Pythons and attrs not written for `max_age_s` (a venv
    since deleted, an attrs since upgraded: each left one file, nothing else would
    ever remove it). A file still in use is written again when it misses."""
    import time

    now = time.time()
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            if entry.name != keep and entry.name.endswith(".marshal") and \
                    now - entry.stat(follow_symlinks=False).st_mtime > max_age_s:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def cache_path(make_module) -> str:
    """The cache file for this Python and this attrs (its _make.py by path, size, mtime)."""
    import hashlib

    st = os.stat(make_module.__file__)
    stamp = f"{sys.version}\0{make_module.__file__}\0{st.st_size}\0{st.st_mtime_ns}"
    digest = hashlib.sha1(stamp.encode()).hexdigest()[:16]
    return ce_cache("attrs-code", f"{sys.implementation.cache_tag}-{digest}.marshal")


def _hook(make_module) -> None:
    global _ACTIVE
    if _ACTIVE is not None or not callable(getattr(make_module, "_compile_and_eval", None)):
        return  # an attrs that compiles some other way: it compiles as it always did
    try:
        cache = _Cache(cache_path(make_module))
    except OSError:
        return
    make_module._compile_and_eval = cache.compile_and_eval
    _ACTIVE = cache
    import atexit

    atexit.register(cache.save)


class _Finder:
    """Hooks `attr._make` right after it is executed, wherever attrs is imported from."""

    def find_spec(self, name: str, path, target=None):
        if name != "attr._make":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module) -> None:
            run(module)
            _hook(module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    if os.environ.get("CE_NO_ATTRS_CACHE") or _ACTIVE is not None:
        return
    make_module = sys.modules.get("attr._make")
    if make_module is not None:
        _hook(make_module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def stats() -> dict[str, int] | None:
    """Hits and misses of this process (None: not active)."""
    if _ACTIVE is None:
        return None
    return {"hits": _ACTIVE.hits, "misses": _ACTIVE.misses, "entries": len(_ACTIVE.stored)}
