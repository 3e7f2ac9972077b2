"""Every look the compiler takes at the host: files, directories, globs, environment.

The compile cache (`compile_cache`) may only replay an output if nothing the compiler
consulted has changed, so the set of consulted inputs is recorded here, never guessed:
each primitive below is an *observation*, a deterministic function of the host's state
(`mode`, `realpath`, `listdir`, `glob`, `read` (as a digest), `readlink`, `env`,
`entry_points`, a caller's probe). While a `Recorder` is active each observation is
logged as (op, args, value); a cache hit re-runs the logged observations and requires
the same values. No compiler module touches the file system any other way (a test scans
them).

`own_*` functions read ce's own shipped files (grammar, standard criteria): those are
covered by the code digest of the cache key, so they are not logged.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

NAME_MAX = 255  # a file name's limit: an identifier or row id names a trial's directory
_CHUNK = 1 << 20


def sha256(data: bytes = b"") -> Any:
    """hashlib's sha256 once something has imported hashlib (OpenSSL: fast on big files);
    before that (a compile cache hit) the built-in one, which loads in no time."""
    hashlib = sys.modules.get("hashlib")
    if hashlib is not None:
        return hashlib.sha256(data)
    try:
        from _sha2 import sha256 as builtin  # Python >= 3.12
    except ImportError:
        try:
            from _sha256 import sha256 as builtin  # Python 3.11
        except ImportError:
            from hashlib import sha256 as builtin
    return builtin(data)


_active: Recorder | None = None
# caller-supplied observations (e.g. the runtime's host limit probe): name -> function
PROBES: dict[str, Callable[[], Any]] = {}


class Recorder:
    """The observations of one compile, in first-seen order, each (op, args) once."""

    def __init__(self) -> None:
        self.seen: dict[tuple, Any] = {}
        self.consistent = True  # False: one input changed while it was being compiled

    def add(self, op: str, args: tuple, value: Any) -> None:
        key = (op, args)
        if key in self.seen:
            if self.seen[key] != value:
                self.consistent = False
            return
        self.seen[key] = value

    def log(self) -> list[tuple[str, tuple, Any]]:
        return [(op, args, value) for (op, args), value in self.seen.items()]

    def __enter__(self) -> Recorder:
        global _active
        self._outer = _active
        _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = self._outer


def _log(op: str, args: tuple, value: Any) -> None:
    if _active is not None:
        _active.add(op, args, value)


def _observed(op: str, args: tuple, fn: Callable[..., Any]) -> Any:
    """fn(*args), logged; an exception is logged as its type and text, then re-raised."""
    try:
        value = fn(*args)
    except Exception as exc:
        _log(op, args, ("!", type(exc).__name__, str(exc)))
        raise
    _log(op, args, value)
    return value


# -- primitive observations (each replayable by `replay`) ---------------------------------
def _mode(path: str, follow: bool) -> int:
    """The file type bits (stat.S_IFMT), -1 when there is nothing (or no access)."""
    try:
        return stat.S_IFMT(os.stat(path, follow_symlinks=follow).st_mode)
    except (OSError, ValueError):
        return -1


def _listdir(path: str) -> tuple | None:
    """(name, is a directory (links followed), is a link) per entry, sorted; None when the
    directory cannot be listed (os.walk skips it then)."""
    try:
        with os.scandir(path) as it:
            out = []
            for entry in it:
                try:
                    is_dir = entry.is_dir()
                except OSError:
                    is_dir = False
                try:
                    is_link = entry.is_symlink()
                except OSError:
                    is_link = False
                out.append((entry.name, is_dir, is_link))
    except OSError:
        return None
    return tuple(sorted(out))


def _glob(pattern: str) -> tuple[str, ...]:
    import glob

    return tuple(sorted(glob.glob(pattern, recursive=True)))


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except (OSError, ValueError):
        return None


def _env(name: str) -> str | None:
    return os.environ.get(name)


_ENTRY_POINTS: dict[str, tuple[str, ...]] = {}


def _entry_points(group: str) -> tuple[str, ...]:
    if group not in _ENTRY_POINTS:
        from importlib.metadata import entry_points as eps

        _ENTRY_POINTS[group] = tuple(ep.name for ep in eps(group=group))
    return _ENTRY_POINTS[group]


_PROBED: dict[tuple[str, Any], Any] = {}


def _probe(name: str) -> Any:
    """A caller's probe, called once per process and function."""
    key = (name, PROBES[name])
    if key not in _PROBED:
        _PROBED[key] = _freeze(PROBES[name]())
    return _PROBED[key]


def _freeze(value: Any) -> Any:
    """A comparable, marshal-able copy (dicts as sorted item tuples)."""
    if isinstance(value, dict):
        return ("{}", tuple(sorted((k, _freeze(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "{}":
        return {k: _thaw(v) for k, v in value[1]}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _read_digest(path: str, regular: bool) -> tuple:
    """What a read of `path` saw: ("ok", sha256 of the bytes) or ("!", error, text).
    Replayed always as a regular-file read: a file swapped for a FIFO is a changed input
    (a miss), never a hang."""
    h = sha256()
    try:
        with _open_regular(path) as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    except Exception as exc:
        return _error(exc)
    return ("ok", h.hexdigest())


def _error(exc: BaseException) -> tuple:
    return ("!", type(exc).__name__, getattr(exc, "errno", None), str(exc))


_OPS: dict[str, Callable[..., Any]] = {
    "mode": _mode, "realpath": lambda p: os.path.realpath(p), "listdir": _listdir,
    "glob": _glob, "readlink": _readlink, "env": _env, "entry_points": _entry_points,
    "probe": _probe, "read": _read_digest,
    "expanduser": lambda p: os.path.expanduser(p), "expandvars": lambda p: os.path.expandvars(p),
}


def replay(op: str, args: tuple) -> Any:
    """The value observation (op, args) has now, as `Recorder.add` logged it."""
    fn = _OPS[op]
    try:
        return fn(*args)
    except Exception as exc:
        return ("!", type(exc).__name__, str(exc))


# -- the compiler's API ---------------------------------------------------------------------
def mode(path: str, follow: bool = True) -> int:
    return _observed("mode", (path, follow), _mode)


def isfile(path: str) -> bool:
    return mode(path) == stat.S_IFREG


def isdir(path: str) -> bool:
    return mode(path) == stat.S_IFDIR


def exists(path: str) -> bool:
    return mode(path) != -1


def islink(path: str) -> bool:
    return mode(path, follow=False) == stat.S_IFLNK


def realpath(path: str) -> str:
    return _observed("realpath", (path,), _OPS["realpath"])


def expanduser(path: str) -> str:
    return _observed("expanduser", (path,), _OPS["expanduser"])


def expandvars(path: str) -> str:
    return _observed("expandvars", (path,), _OPS["expandvars"])


def getenv(name: str) -> str | None:
    return _observed("env", (name,), _env)


def getcwd() -> str:
    """The working directory: part of every compile cache key, so not logged."""
    return os.getcwd()


def readlink(path: str) -> str | None:
    return _observed("readlink", (path,), _readlink)


def glob(pattern: str) -> list[str]:
    """`glob.glob(pattern, recursive=True)`, sorted."""
    return list(_observed("glob", (pattern,), _glob))


def entry_points(group: str) -> tuple[str, ...]:
    """Names of the installed entry points of `group` (looked up once per process)."""
    return _observed("entry_points", (group,), _entry_points)


def probe(name: str) -> Any:
    """The value of a caller's probe (`PROBES[name]`), computed when first asked for."""
    return _thaw(_observed("probe", (name,), _probe))


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk(top) (top-down, links not followed, unreadable directories skipped), from
    logged listings; entries sorted. Prune by assigning to `dirs[:]` as with os.walk."""
    entries = _observed("listdir", (top,), _listdir)
    if entries is None:
        return
    dirs = [name for name, is_dir, _ in entries if is_dir]
    files = [name for name, is_dir, _ in entries if not is_dir]
    links = {name for name, is_dir, is_link in entries if is_dir and is_link}
    yield top, dirs, files
    for name in dirs:
        if name not in links:
            yield from walk(os.path.join(top, name))


class NotRegularFile(OSError):
    """Raised by `read_regular` for a FIFO, device or socket (never opened blocking)."""


def special_kind(path: str) -> str | None:
    """'a FIFO', 'a character device' ... when `path` (links followed) exists and is
    neither a regular file nor a directory; None otherwise."""
    m = mode(path)
    if m in (-1, stat.S_IFREG, stat.S_IFDIR):
        return None
    return kind_name(m)


def kind_name(m: int) -> str:
    if m == stat.S_IFIFO:
        return "a FIFO"
    if m == stat.S_IFSOCK:
        return "a socket"
    if m == stat.S_IFCHR:
        return "a character device"
    if m == stat.S_IFBLK:
        return "a block device"
    return "not a regular file"


def _open_regular(path: str) -> BinaryIO:
    """A regular file opened for reading; a FIFO, socket or device raises NotRegularFile
    before any blocking call (opened non-blocking, checked with fstat: no race)."""
    try:
        m = stat.S_IFMT(os.stat(path).st_mode)
    except (OSError, ValueError):
        m = -1
    if m not in (-1, stat.S_IFREG, stat.S_IFDIR):
        raise NotRegularFile(0, f"is {kind_name(m)}", path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        m = stat.S_IFMT(os.fstat(fd).st_mode)
        if m != stat.S_IFREG:
            raise NotRegularFile(0, "is a directory" if m == stat.S_IFDIR
                                 else f"is {kind_name(m)}", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read(path: str, regular: bool) -> bytes:
    try:
        with (_open_regular(path) if regular else open(path, "rb")) as fh:
            data = fh.read()
    except Exception as exc:
        _log("read", (path, regular), _error(exc))
        raise
    if _active is not None:
        _active.add("read", (path, regular), ("ok", sha256(data).hexdigest()))
    return data


def read_regular(path: str) -> bytes:
    """The bytes of a regular file (see `_open_regular`)."""
    return _read(path, True)


def read_text(path: str) -> str:
    """What `open(path, encoding="utf-8").read()` returns (universal newlines), logged."""
    return io.TextIOWrapper(io.BytesIO(_read(path, False)), encoding="utf-8").read()


def feed(path: str, h: Any) -> bool:
    """Stream a regular file's bytes into hash `h`; False (after a partial feed, maybe)
    when it cannot be read."""
    mine = sha256() if _active is not None else None
    try:
        with _open_regular(path) as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
                if mine is not None:
                    mine.update(chunk)
    except OSError as exc:
        _log("read", (path, True), _error(exc))
        return False
    if mine is not None:
        _log("read", (path, True), ("ok", mine.hexdigest()))
    return True


# -- ce's own files (covered by the compile cache's code digest: not logged) -----------
def own_isdir(path: str) -> bool:
    return os.path.isdir(path)


def own_listdir(path: str) -> list[str]:
    return os.listdir(path)


def own_read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def own_read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
