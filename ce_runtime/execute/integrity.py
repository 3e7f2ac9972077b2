"""Files the grader trusts, checked before grading.

After set-up and pre_run, ce records the state of: the workspace's venv (every file,
and the interpreter it runs), the paths the task lists in `sandbox.protected`, and the
task directory (where hidden tests and grader scripts live). Before grading it looks
again; a file the agent changed, removed or replaced, or an import hook it planted in
the venv (a new `*.pth`, `sitecustomize.py`, `usercustomize.py`), makes the trial ERROR
with the file named. New files elsewhere in the venv (an agent's `pip install`) are
allowed: they cannot change what existing code does at import. What ce writes in the
task directory is not the agent's: the run's own directories, this process's stdout and
stderr redirected there, and a directory holding another ce run made meanwhile (unless
it held watched files at the baseline).

A file's state is its lstat signature (type, mode, size, inode, mtime and ctime): ctime
cannot be set back by a process, so an edit that restores size and mtime is still seen,
and nothing is read, so a venv of thousands of files costs milliseconds.
"""

from __future__ import annotations

import os
import stat

import attrs

IMPORT_HOOKS = ("sitecustomize.py", "usercustomize.py")
SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", ".pytest_cache"})
MAX_FILES = 50_000  # per tree; beyond it the rest is not watched (said in the report)

Signature = tuple[int, int, int, int, int, int]


def _sig(path: str) -> Signature | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (stat.S_IFMT(st.st_mode) | stat.S_IMODE(st.st_mode), st.st_size, st.st_ino,
            st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)


def _walk(root: str, skip: frozenset[str] = frozenset(),
          skip_paths: frozenset[str] = frozenset(),
          keep: frozenset[str] | None = None) -> dict[str, Signature]:
    """Signatures of the files under `root`. `keep` set (the task directory): a
    directory holding a ce run (another run's `--run-dir`, written while this trial runs)
    is skipped, unless it is in `keep` (it held watched files at the baseline: a
    `run.json` the agent drops beside hidden tests hides nothing)."""
    out: dict[str, Signature] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip
                       and os.path.join(dirpath, d) not in skip_paths
                       and not os.path.islink(os.path.join(dirpath, d))
                       and (keep is None or os.path.join(dirpath, d) in keep
                            or not _holds_a_run(os.path.join(dirpath, d)))]
        for name in filenames + [d for d in os.listdir(dirpath)
                                 if os.path.islink(os.path.join(dirpath, d))
                                 and d not in filenames]:
            full = os.path.join(dirpath, name)
            if full in skip_paths:
                continue
            sig = _sig(full)
            if sig is not None:
                out[full] = sig
            if len(out) >= MAX_FILES:
                return out
    return out


def _holds_a_run(path: str) -> bool:
    """A ce run directory, finished or being written (its lock, or the plans/ and
    objects/ it starts with)."""
    return (os.path.exists(os.path.join(path, "run.lock"))
            or os.path.exists(os.path.join(path, "run.json"))
            or (os.path.isdir(os.path.join(path, "plans"))
                and os.path.isdir(os.path.join(path, "objects"))))


def _own_outputs(task_dir: str) -> frozenset[str]:
    """This process's stdout and stderr when they are files in the task directory
    (`ce run task.yaml > ci.log 2>&1` from the task's folder): ce writes them, not the
    agent. Named as the walk names them (under `task_dir` as given)."""
    real_task = os.path.realpath(task_dir)
    out = set()
    for fd in (1, 2):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(real_task.rstrip("/") + "/") and os.path.isfile(target):
            out.add(os.path.join(task_dir, os.path.relpath(target, real_task)))
    return frozenset(out)


def _watched_dirs(task_dir: str, files) -> frozenset[str]:
    """Every directory between `task_dir` and a watched file."""
    out: set[str] = set()
    for path in files:
        parent = os.path.dirname(path)
        while parent not in out and len(parent) > len(task_dir):
            out.add(parent)
            parent = os.path.dirname(parent)
    return frozenset(out)


@attrs.frozen
class Baseline:
    workspace: str
    venv: dict[str, Signature]
    interpreter: tuple[str, Signature | None] | None
    protected: dict[str, Signature]
    protected_patterns: tuple[str, ...]
    task_dir: str
    task_files: dict[str, Signature]
    ce_writes: frozenset[str] = frozenset()  # and this process's own output files
    task_dirs: frozenset[str] = frozenset()  # the directories holding task_files


def baseline(workspace: str, protected: tuple[str, ...] | list[str], task_dir: str = "",
             ce_writes: tuple[str, ...] = ()) -> Baseline:
    """`ce_writes`: directories ce itself writes during the run (the run directory, the
    directory of runs, the temp directory that ce and its engines share: Ray, uv and
    other runs come and go there, whatever the agent does), skipped when they lie in the
    task directory."""
    venv_dir = os.path.join(workspace, ".venv")
    venv = _walk(venv_dir) if os.path.isdir(venv_dir) else {}
    interpreter = None
    python = os.path.join(venv_dir, "bin", "python")
    if os.path.lexists(python):
        real = os.path.realpath(python)
        interpreter = (real, _sig(real))
    skip = frozenset(os.path.abspath(p) for p in ce_writes
                     if os.path.abspath(p) != os.path.abspath(task_dir or "/"))
    task_files: dict[str, Signature] = {}
    if task_dir and os.path.isdir(task_dir):
        skip |= _own_outputs(task_dir)
        task_files = _walk(task_dir, SKIP_DIRS, skip, keep=frozenset())
        task_files = {p: s for p, s in task_files.items() if os.path.basename(p) != "latest"}
    return Baseline(workspace, venv, interpreter, _protected(workspace, protected),
                    tuple(protected), task_dir, task_files, skip,
                    _watched_dirs(task_dir, task_files))


def _protected(workspace: str, patterns) -> dict[str, Signature]:
    out: dict[str, Signature] = {}
    if not patterns:  # most tasks protect nothing: their runs load no glob module
        return out
    import glob

    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(workspace, pattern), recursive=True)):
            if os.path.isdir(path) and not os.path.islink(path):
                out.update(_walk(path))
            elif (sig := _sig(path)) is not None:
                out[path] = sig
    return out


def check(base: Baseline) -> list[str]:
    """What changed, one line per file (workspace-relative where it can be)."""
    problems: list[str] = []

    def show(path: str) -> str:
        for root in (base.workspace, base.task_dir):
            if root and path.startswith(root.rstrip("/") + "/"):
                rel = os.path.relpath(path, root)
                return rel if root == base.workspace else f"$TASK_DIR/{rel}"
        return path

    def compare(before: dict[str, Signature], after: dict[str, Signature], what: str,
                new_ok: bool) -> None:
        for path, sig in before.items():
            now = after.get(path)
            if now is None:
                problems.append(f"{show(path)} ({what}) was removed")
            elif now != sig:
                problems.append(f"{show(path)} ({what}) was changed")
        for path in after.keys() - before.keys():
            name = os.path.basename(path)
            if not new_ok or name.endswith(".pth") or name in IMPORT_HOOKS:
                problems.append(f"{show(path)} ({what}) was added")

    if base.venv:
        venv_dir = os.path.join(base.workspace, ".venv")
        compare(base.venv, _walk(venv_dir) if os.path.isdir(venv_dir) else {},
                "the sandbox's venv", new_ok=True)
    if base.interpreter is not None:
        real, sig = base.interpreter
        if _sig(real) != sig:
            problems.append(f"{real} (the venv's interpreter) was changed")
    if base.protected_patterns:
        compare(base.protected, _protected(base.workspace, base.protected_patterns),
                "protected", new_ok=False)
    if base.task_files:
        now = _walk(base.task_dir, SKIP_DIRS, base.ce_writes, keep=base.task_dirs)
        compare(base.task_files, {p: s for p, s in now.items()
                                  if os.path.basename(p) != "latest"},
                "the task directory", new_ok=False)
    return sorted(set(problems))
