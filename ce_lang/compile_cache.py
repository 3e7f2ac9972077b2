"""`ce compile`'s cache: what a compile printed and wrote, replayed while its inputs hold.

An entry is found by a key over everything that is not a file the compile reads: ce's
own code (a stat digest of `ce_lang`, `grammar/`, `stdlib_criteria/` and the command's
modules), the Python and its installed packages, the working directory and the
command's options (with the terminal facts its output depends on). It holds the
compile's observation log (`hostfs`: every mode, listing, glob, read digest, env and
probe value the compiler saw) and its output actions. A hit re-runs every observation
and requires the same values, then replays the actions; anything else (missing,
corrupt, foreign, stale) is a miss, never an error. This module imports nothing heavy:
a hit never loads the compiler.

Entries live in `$XDG_CACHE_HOME/ce/compile` (or `~/.cache/ce/compile`), are written
atomically, are read only when this user owns them and nobody else may write them, and
are pruned to the newest `MAX_ENTRIES` / `MAX_BYTES`.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import stat
import sys
import time

from ce_lang import __version__, hostfs
from ce_lang.caches import ce_cache, read_private, write_private

FORMAT = 1
MAX_ENTRIES = 200
MAX_BYTES = 64 << 20
_HERE = os.path.dirname(os.path.abspath(__file__))
# ce's own code and data whose stat digest is in every key (tests may add a file)
CODE_ROOTS: list[str] = [_HERE] + [p for p in (os.path.join(os.path.dirname(_HERE), d)
                                              for d in ("grammar", "stdlib_criteria"))
                                   if os.path.isdir(p)]
_CODE_SUFFIXES = (".py", ".lark", ".ce", ".json", ".yaml")


def disabled_by_env() -> bool:
    return os.environ.get("CE_NO_COMPILE_CACHE", "") not in ("", "0")


def cache_dir() -> str:
    return ce_cache("compile")


# -- the key --------------------------------------------------------------------------------
def _stat_tree(root: str, out: list) -> None:
    """(path, size, mtime_ns, inode) of every code file under root (no __pycache__)."""
    try:
        st = os.stat(root)
    except OSError:
        out.append((root, None))
        return
    if not stat.S_ISDIR(st.st_mode):
        out.append((root, st.st_size, st.st_mtime_ns, st.st_ino))
        return
    with os.scandir(root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        if entry.name == "__pycache__" or entry.name.startswith("."):
            continue
        if entry.is_dir():
            _stat_tree(entry.path, out)
        elif entry.name.endswith(_CODE_SUFFIXES):
            st = entry.stat()
            out.append((entry.path, st.st_size, st.st_mtime_ns, st.st_ino))


def code_stamp(extra: tuple[str, ...] = ()) -> str:
    """A digest of the stats of ce's code: any edit, added or removed file changes it."""
    found: list = []
    for root in (*CODE_ROOTS, *extra):
        _stat_tree(root, found)
    return hostfs.sha256(repr(found).encode()).hexdigest()


def _packages_stamp() -> tuple:
    """The installed packages (yaml, cattrs, lark ...) as their directories' mtimes: an
    install, upgrade or removal changes the site-packages directory."""
    out = []
    for p in sys.path:
        if p.endswith(("site-packages", "dist-packages")):
            with contextlib.suppress(OSError):
                out.append((p, os.stat(p).st_mtime_ns))
    return tuple(out)


def make_key(request: tuple, extra_code: tuple[str, ...] = ()) -> str:
    """The entry name for a command `request` (its options and output facts) run here."""
    material = (FORMAT, __version__, sys.version, sys.prefix,
                _packages_stamp(), code_stamp(extra_code), os.getcwd(), request)
    return hostfs.sha256(repr(material).encode()).hexdigest()


# -- entries --------------------------------------------------------------------------------
def _entry_path(key: str) -> str:
    return os.path.join(cache_dir(), key + ".entry")


def lookup(key: str, probes: dict | None = None) -> tuple[list, int] | None:
    """(actions, exit code) of the entry for `key` when every observation it logged still
    holds; None (a miss) otherwise."""
    hostfs.PROBES.update(probes or {})
    path = _entry_path(key)
    data = read_private(path)
    if data is None:
        return None
    try:
        fmt, stored_key, log, actions, code = marshal.loads(data)
        if fmt != FORMAT or stored_key != key or not isinstance(code, int) \
                or not isinstance(actions, list):
            return None
        for op, args, value in log:
            if hostfs.replay(op, args) != value:
                return None
    except Exception:  # a corrupt or foreign entry (or an op this ce does not know)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # pruning keeps the recently used
    return actions, code


def recording() -> hostfs.Recorder:
    """A context that logs the compile's observations (`with recording() as rec`)."""
    return hostfs.Recorder()


def store(key: str, recorder: hostfs.Recorder, actions: list, code: int) -> bool:
    """Write the entry (atomically); False when it is not cacheable or not written."""
    if not recorder.consistent:
        return False  # an input changed under the compile: its output matches no state
    try:
        data = marshal.dumps((FORMAT, key, recorder.log(), actions, code))
    except ValueError:  # an unmarshallable value: never cached
        return False
    directory = cache_dir()
    if not write_private(_entry_path(key), data):
        return False
    prune(directory)
    return True


def prune(directory: str, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
    """Drop the least recently used entries beyond the bounds (and stale temp files)."""
    try:
        with os.scandir(directory) as it:
            found = []
            for e in it:
                if e.name.endswith(".entry") or e.name.startswith(".tmp-"):
                    st = e.stat(follow_symlinks=False)
                    found.append((st.st_mtime, st.st_size, e.path, e.name))
    except OSError:
        return
    found.sort(reverse=True)
    total, now = 0, time.time()
    for n, (mtime, size, path, name) in enumerate(found):
        total += size
        stale_tmp = name.startswith(".tmp-") and now - mtime > 3600  # a killed writer's
        if n >= max_entries or total > max_bytes or stale_tmp:
            with contextlib.suppress(OSError):
                os.unlink(path)


def entry_files() -> list[str]:
    """The entries now stored (for tests and `--no-cache` diagnostics)."""
    try:
        return sorted(os.path.join(cache_dir(), n) for n in os.listdir(cache_dir())
                      if n.endswith(".entry"))
    except OSError:
        return []

