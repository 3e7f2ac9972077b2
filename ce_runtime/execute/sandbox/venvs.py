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
            shutil.copytree(shared[0], dest, symlinks=True)
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
    shutil.copytree(built[0], dest, symlinks=True)
    return list(built[1])


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
        for path, _ in _BUILT.values():
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        _BUILT.clear()
