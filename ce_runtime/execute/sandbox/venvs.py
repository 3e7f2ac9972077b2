"""Trial venvs cloned from one built per run: `uv venv` (and `uv pip install`) once per
interpreter and package list in this process, then a private copy per trial.

Building a venv costs a `uv` process per trial (16-40 ms for an empty one, seconds with
packages); copying a built one costs about a millisecond per twenty files. The template
is made `--relocatable` (activation scripts and entry points find the venv from their
own path, not an absolute one written at build time), so a copy works wherever a
workspace lives, inside a bwrap mount included. The copy is a real copy, never links:
an agent editing its venv in place edits its own trial's files only.

Templates live as long as the run's scratch root (`ce run` passes it: the run's end, or
the sweep of a dead worker's scratch, removes them; without one, a directory of this
process under the system temp dir, removed at exit): every trial of a run sees the same
resolved packages, and nothing is reused from an earlier run whose package index may
have moved on.
"""

from __future__ import annotations

import atexit
import os
import shutil
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
               root: str | None = None) -> list[str]:
    """Copy the template venv for `key` to `dest` (which must not exist), building it
    first with `build(path, log)` if this process has none yet; the build's log lines.
    A failed build raises (whatever `build` raises) and leaves no template behind, so the
    next trial tries again. `root`: the directory to keep the template in."""
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


def forget_templates() -> None:
    """Drop every template (tests; a long-lived process that wants fresh resolution)."""
    with _LOCK:
        for path, _ in _BUILT.values():
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        _BUILT.clear()
