"""Trial venvs cloned from one built per run: `uv venv` (and `uv pip install`) once per
interpreter and package list in this process, then a private copy per trial.

Building a venv costs a `uv` process per trial (16-40 ms for an empty one, seconds with
packages); copying a built one costs about a millisecond per twenty files. The template
is made `--relocatable` (activation scripts and entry points find the venv from their
own path, not an absolute one written at build time), so a copy works wherever a
workspace lives, inside a bwrap mount included. The copy is a real copy, never links:
an agent editing its venv in place edits its own trial's files only.

Templates with packages live as long as the run's scratch root (`ce run` passes it: the
run's end, or the sweep of a dead worker's scratch, removes them; without one, a
directory of this process under the system temp dir, removed at exit): every trial of a
run sees the same resolved packages, and nothing is reused from an earlier run whose
package index may have moved on. An empty venv resolves nothing, so its template is kept
per machine (`$XDG_CACHE_HOME/ce/venvs`, keyed on the interpreter and uv, each
identified by path, size and mtime): the `uv venv` of a run's first trial (~0.1-0.2 s)
is paid once per machine, not once per run.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable

_LOCK = threading.Lock()
_KEY_LOCKS: dict[tuple, threading.Lock] = {}
_BUILT: dict[tuple, tuple[str, tuple[str, ...]]] = {}  # key -> (template dir, its log)
_ROOT: list[str] = []


def _root() -> str:
    with _LOCK:
        if not _ROOT:
            _ROOT.append(tempfile.mkdtemp(prefix="ce-venvs-"))
            atexit.register(shutil.rmtree, _ROOT[0], True)
        return _ROOT[0]


def clone_venv(key: tuple, dest: str, build: Callable[[str, list[str]], None],
               root: str | None = None, machine: tuple[str, ...] = ()) -> list[str]:
    """Copy the template venv for `key` to `dest` (which must not exist), building it
    first with `build(path, log)` if this process has none yet; the build's log lines.
    A failed build raises (whatever `build` raises) and leaves no template behind, so the
    next trial tries again. `root`: the directory to keep the template in. `machine`:
    the executables the venv is made from (the interpreter, uv) when it installs
    nothing, so the template can be the machine's (see the module's docstring)."""
    if machine:
        shared = _machine_template(key, machine, build)
        if shared is not None:
            copy_tree(shared[0], dest)
            return list(shared[1])
    key = (*key, root)
    with _LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:  # trials set up in threads: one builds, the others wait for it
        built = _BUILT.get(key)
        if built is None or not os.path.isdir(built[0]):
            staging = tempfile.mkdtemp(prefix="ce-venv-", dir=root or _root())
            path = os.path.join(staging, "venv")
            log: list[str] = []
            try:
                build(path, log)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            built = _BUILT[key] = (path, tuple(log))
    copy_tree(built[0], dest)
    return list(built[1])


# -- copies ------------------------------------------------------------------------------
SMALL_TEMPLATE = 4 << 20  # bytes of file contents a template may have to be kept in memory
_SNAPSHOTS: dict[str, _Snapshot | None] = {}


class _Snapshot:
    """A small template read once: its entries (in the order copytree makes them), their
    contents and metadata, and what identifies each on disk (inode, ctime, size), so a
    template changed since is read again."""

    def __init__(self, src: str):
        self.entries: list[tuple] = []  # (kind, rel, mode, atime_ns, mtime_ns, data)
        self.dirs: list[tuple] = []  # (rel, mode, atime_ns, mtime_ns), children first
        self.ident: list[tuple[str, tuple[int, int, int]]] = []
        self.size = 0
        self._read(src, "")

    def _read(self, src: str, rel: str) -> None:
        path = os.path.join(src, rel) if rel else src
        if os.listxattr(path, follow_symlinks=False):
            raise _NotSimple(path)
        with os.scandir(path) as it:
            children = sorted(it, key=lambda e: e.name)
        for entry in children:
            sub = f"{rel}/{entry.name}" if rel else entry.name
            full = os.path.join(src, sub)
            if entry.is_symlink():
                if os.listxattr(full, follow_symlinks=False):
                    raise _NotSimple(full)
                target = os.readlink(full)
                st = os.lstat(full)
                self.entries.append(("l", sub, 0, st.st_atime_ns, st.st_mtime_ns, target))
            elif entry.is_dir(follow_symlinks=False):
                self.entries.append(("d", sub, 0, 0, 0, None))
                self._read(src, sub)
                continue
            elif entry.is_file(follow_symlinks=False):
                if os.listxattr(full, follow_symlinks=False):
                    raise _NotSimple(full)
                before = os.lstat(full)
                self.size += before.st_size
                if self.size > SMALL_TEMPLATE:
                    raise _NotSimple(full)
                with open(full, "rb") as fh:
                    data = fh.read()
                st = os.lstat(full)
                if _ident(st) != _ident(before) or len(data) != st.st_size:
                    raise _NotSimple(full)  # changing while read
                self.entries.append(("f", sub, stat.S_IMODE(st.st_mode), st.st_atime_ns,
                                     st.st_mtime_ns, data))
            else:  # a fifo, a socket, a device: copytree's business
                raise _NotSimple(full)
            self.ident.append((full, _ident(st)))
        st = os.lstat(path)
        self.dirs.append((rel, stat.S_IMODE(st.st_mode), st.st_atime_ns, st.st_mtime_ns))
        self.ident.append((path, _ident(st)))

    def current(self) -> bool:
        try:
            return all(_ident(os.lstat(path)) == ident for path, ident in self.ident)
        except OSError:
            return False

    def write(self, dest: str) -> None:
        """What `shutil.copytree(src, dest, symlinks=True)` makes: the same entries,
        contents, modes and times (a directory's last, after its entries)."""
        os.makedirs(dest)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        for kind, rel, mode, atime, mtime, data in self.entries:
            path = os.path.join(dest, rel)
            if kind == "d":
                os.mkdir(path)
            elif kind == "l":
                os.symlink(data, path)
                os.utime(path, ns=(atime, mtime), follow_symlinks=False)
            else:
                fd = os.open(path, flags, 0o600)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fchmod(fd, mode)
                    os.utime(fd, ns=(atime, mtime))
                finally:
                    os.close(fd)
        for rel, mode, atime, mtime in self.dirs:  # children before their parents
            path = os.path.join(dest, rel) if rel else dest
            os.chmod(path, mode)
            os.utime(path, ns=(atime, mtime))


class _NotSimple(Exception):
    pass


def _ident(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_ctime_ns, st.st_size


def copy_tree(src: str, dest: str) -> None:
    """`shutil.copytree(src, dest, symlinks=True)`, from memory for a small template
    (no extended attributes, no special files): its files read once per process, not
    copied one by one with a stat, a copy and the attribute calls each (~2 ms per
    trial for an empty venv). Checked against the disk on every copy (an lstat per
    entry): a template changed since it was read is read again."""
    with _LOCK:
        known = src in _SNAPSHOTS
        snap = _SNAPSHOTS.get(src)
    if not known or (snap is not None and not snap.current()):
        try:
            snap = _Snapshot(src)
        except (_NotSimple, OSError):
            snap = None  # copytree's, from now on
        with _LOCK:
            _SNAPSHOTS[src] = snap
    if snap is None:
        shutil.copytree(src, dest, symlinks=True)
    else:
        snap.write(dest)


_MARKER = ".ce-template.json"


def machine_cache_dir() -> str:
    from ce_lang.api import ce_cache

    return ce_cache("venvs")


def _machine_template(key: tuple, machine: tuple[str, ...],
                      build: Callable[[str, list[str]], None]
                      ) -> tuple[str, tuple[str, ...]] | None:
    """The machine's template for `key` (built, then renamed into place, on first use);
    None when there is no usable cache directory (the caller builds per run instead)."""
    facts: list[object] = [repr(key), sys.version]
    try:
        for exe in machine:
            st = os.stat(exe)
            facts.append((os.path.realpath(exe), st.st_size, st.st_mtime_ns))
    except OSError:
        return None
    digest = hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:32]
    final = os.path.join(machine_cache_dir(), digest)
    with _LOCK:
        lock = _KEY_LOCKS.setdefault(("machine", digest), threading.Lock())
    with lock:
        if os.path.lexists(final):  # built before; None if it is not one we can trust
            return _read_template(final)
        try:
            os.makedirs(machine_cache_dir(), mode=0o700, exist_ok=True)
            _sweep_abandoned(machine_cache_dir())
            staging = tempfile.mkdtemp(prefix=".building-", dir=machine_cache_dir())
        except OSError:
            return None
        try:
            log: list[str] = []
            build(os.path.join(staging, "venv"), log)
            with open(os.path.join(staging, _MARKER), "w", encoding="utf-8") as fh:
                json.dump({"key": repr(key), "facts": facts, "log": log}, fh)
            try:
                os.rename(staging, final)
            except OSError:  # another process put its own in place first: use that
                shutil.rmtree(staging, ignore_errors=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return _read_template(final)


def _sweep_abandoned(directory: str, older_than: float = 3600.0) -> None:
    """Builds a killed process left (`.building-*` untouched for an hour)."""
    import time

    now = time.time()
    with os.scandir(directory) as it:
        for entry in it:
            try:
                if entry.name.startswith(".building-") and \
                        now - entry.stat(follow_symlinks=False).st_mtime > older_than:
                    shutil.rmtree(entry.path, ignore_errors=True)
            except OSError:
                continue


def _read_template(final: str) -> tuple[str, tuple[str, ...]] | None:
    """A finished template of this user's (not group- or world-writable), else None."""
    try:
        st = os.lstat(final)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return None
        with open(os.path.join(final, _MARKER), encoding="utf-8") as fh:
            log = json.load(fh)["log"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    venv = os.path.join(final, "venv")
    return (venv, tuple(str(line) for line in log)) if os.path.isdir(venv) else None


def forget_templates() -> None:
    """Drop every template (tests; a long-lived process that wants fresh resolution)."""
    with _LOCK:
        _SNAPSHOTS.clear()
        for path, _ in _BUILT.values():
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        _BUILT.clear()
