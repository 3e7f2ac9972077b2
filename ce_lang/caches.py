"""Where ce's per-machine caches live, and how their files are read and written. Not a
compile input: the compiler's looks at the host go through hostfs; this only touches
ce's own directory."""

from __future__ import annotations

import contextlib
import os
import stat


def ce_cache(*parts: str) -> str:
    """ce's per-machine cache (`$XDG_CACHE_HOME/ce`, else `~/.cache/ce`), or a path in it:
    where every cache of ce lives (compiles, the standard criteria, venv templates, the
    agent CLIs, uv's downloads), and the one directory no agent may see."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ce", *parts)


def _private(st: os.stat_result, kind: int) -> bool:
    return (stat.S_IFMT(st.st_mode) == kind and st.st_uid == os.getuid()
            and not st.st_mode & 0o022)


def read_private(path: str) -> bytes | None:
    """The file's bytes when it is a regular file this user owns that no one else may
    write, in a directory of the same kind; else None (a cache that someone else could
    have written is no cache)."""
    try:
        dst = os.stat(os.path.dirname(path), follow_symlinks=False)
        if not _private(dst, stat.S_IFDIR):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0) | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not _private(os.fstat(fd), stat.S_IFREG):
            return None
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            return fh.read()
    except OSError:
        return None
    finally:
        if fd != -1:
            os.close(fd)


def write_private(path: str, data: bytes) -> bool:
    """Write `path` atomically, readable by this user only (its directory made 0700);
    False when it could not be (a read-only home: no cache, no error)."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".tmp-{os.getpid()}-{name}")  # a killed writer's: .tmp-*
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True
