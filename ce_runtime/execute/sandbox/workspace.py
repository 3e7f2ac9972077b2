"""The trial's workspace: template sources, the Python venv and node packages, and the
pre_run / post_run commands.

`prepare_workspace` is synchronous (the orchestrator runs it in a thread) and never
raises: a failure is a `SetupResult` with `ok=False` and an error naming the source or
the command that failed, with an excerpt of its output.

Template sources apply in order, last writer wins (a later file replaces an earlier file,
directory or symlink at the same path, and a later directory replaces a file or symlink):

- `repo`: `git clone <url> repo` inside the workspace, then `git checkout <commit>` when
  one is given. As in coder_eval the clone lands in the `repo/` subdirectory (criteria of
  coder_eval tasks name `repo/...` paths) and keeps its `.git`, so commands can run `git
  diff` against the starting commit; the default ignore patterns keep `.git` out of reads
  and snapshots. (The clone also holds the repository's other commits: a task whose fix is
  in the history must not rely on the agent not looking.) A relative local path is
  resolved against the task directory; git never prompts for credentials.
- `template_dir`: the directory (relative to the task directory) copied into
  `mount_point`, file modes and symlinks preserved, special files skipped. A path is
  skipped when any of its components matches one of the plan's effective ignore patterns
  (fnmatch), unless it is re-included: `include_patterns`, as in coder_eval, re-include
  paths the ignore patterns would drop (fnmatch against the template-relative path with
  `/` separators, where `*` also crosses `/`; a pattern matching a directory re-includes
  everything under it). Files not ignored are always copied.
- `starter_files`: each file written as UTF-8 (newlines as given), parents created.

Nothing is ever written through a symlink: a directory the copy needs that exists as a
symlink (or a file) is replaced by a real directory, so no source can write outside the
workspace.

Then, unless `sandbox.python` is null, `.venv` is created with `uv venv --python <this
interpreter>` (no pip inside, as coder_eval's uv venvs) and `env_packages` installed with
`uv pip install` (a shared cache via UV_CACHE_DIR when `uv_cache` is given), once per
run and package list, each trial getting a copy (venvs.py); with
`node.env_packages`, `npm install --prefix <workspace> <packages>`.

This is the trusted part of a trial (the task author's sources and package lists), run
on the host before the sandbox's confinement matters: the tempdir and bwrap drivers call
it as is (the host's view is what their commands see), docker builds the venv inside its
container instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

import attrs

from ce_lang.api import (
    Plan,
    RepoSource,
    StarterFilesSource,
    TemplateDirSource,
    commit_problem,
    is_local_repo,
    repo_url_problem,
)
from ce_runtime.execute.sandbox.base import read_capped
from ce_runtime.execute.sandbox.record_cli import RecorderError, write_recorders
from ce_runtime.store.task_files import template_entries

REPO_DIR = "repo"  # where a `repo` source is cloned, inside the workspace
EXCERPT_CHARS = 2000  # of a failed set-up command's output, in the error
# seconds per set-up command (generous: a big clone or install is slow, not broken)
GIT_CLONE_TIMEOUT = 900
GIT_CHECKOUT_TIMEOUT = 300
VENV_TIMEOUT = 120
INSTALL_TIMEOUT = 900


@attrs.frozen
class SetupResult:
    ok: bool
    error: str | None
    log: list[str]  # what was done, one line per step
    duration_ms: float


class SetupError(Exception):
    pass


# -- set-up ------------------------------------------------------------------------------
def prepare_workspace(plan: Plan, task_dir: str, workspace: str,
                      uv_cache: str | None = None,
                      cancel: threading.Event | None = None,
                      sources: bool = True, venv_templates: str | None = None
                      ) -> SetupResult:
    """Apply the plan's template sources, then build the Python venv and node packages.

    `cancel`, set from another thread (the trial was interrupted while this runs in a
    worker thread), kills the set-up command running then and fails the set-up at once,
    instead of letting a clone or an install run on to its timeout. `sources=False`
    builds the environments only (re-grading: the files come from the snapshot).
    `venv_templates`: where the run keeps its built venvs (its scratch root, removed with
    it; default: a directory of this process under the system's temp dir)."""
    token = _CANCEL.set(cancel)
    try:
        return _prepare(plan, task_dir, workspace, uv_cache, sources, venv_templates)
    finally:
        _CANCEL.reset(token)


# the `cancel` event of the prepare_workspace call running in this thread
_CANCEL: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "ce_setup_cancel", default=None)
CANCEL_POLL_S = 0.1


def _prepare(plan: Plan, task_dir: str, workspace: str, uv_cache: str | None,
             sources: bool = True, venv_templates: str | None = None) -> SetupResult:
    started = time.monotonic()
    log: list[str] = []

    def result(error: str | None) -> SetupResult:
        return SetupResult(error is None, error, log, (time.monotonic() - started) * 1000)

    try:
        error = apply_sources(plan, task_dir, workspace, log) if sources else None
        if error is not None:
            return result(error)
        os.makedirs(workspace, exist_ok=True)
        root = os.path.realpath(workspace)
        python = plan.sandbox.python
        if python is not None:
            try:
                _python_env(root, list(python.env_packages), uv_cache, log, venv_templates)
            except (SetupError, OSError) as exc:
                return result(f"sandbox.python: {_why(exc)}")
        node = plan.sandbox.node
        if node is not None and node.env_packages:
            try:
                _node_packages(root, list(node.env_packages), log)
            except (SetupError, OSError) as exc:
                return result(f"sandbox.node: {_why(exc)}")
    except Exception as exc:  # never raise: the trial records an ERROR instead
        return result(f"sandbox set-up: unexpected {type(exc).__name__}: {exc}")
    return result(None)


def apply_sources(plan: Plan, task_dir: str, workspace: str, log: list[str],
                  interpreter: str | None = None) -> str | None:
    """The template sources, in order, into `workspace`, then the `record_cli` shims (run
    by `interpreter`, as the sandbox sees it: by default this interpreter's real path);
    the error naming the source that failed, or None."""
    os.makedirs(workspace, exist_ok=True)
    root = os.path.realpath(workspace)
    ignore = list(plan.ignore_patterns)
    for i, src in enumerate(plan.sandbox.template_sources):
        label = f"template_sources[{i}] ({src.type})"
        try:
            if isinstance(src, RepoSource):
                _apply_repo(src, task_dir, root, log)
            elif isinstance(src, TemplateDirSource):
                _apply_template_dir(src, task_dir, root, ignore, log)
            elif isinstance(src, StarterFilesSource):
                _apply_starter_files(src, root, log)
            else:
                raise SetupError(f"unknown template source type {src.type!r}")
        except (SetupError, OSError, shutil.Error) as exc:
            return f"{label}: {_why(exc)}"
    _mark_mocks_executable(plan, root, log)
    try:
        write_recorders(plan, root, interpreter or os.path.realpath(sys.executable) + " -I",
                        log)
    except (RecorderError, OSError) as exc:
        return f"sandbox.record_cli: {_why(exc)}"
    return None


def _mark_mocks_executable(plan: Plan, root: str, log: list[str]) -> None:
    """`sandbox.mock_path_dirs`: the plain files right under each directory get +x (a
    template copy or starter file may not carry it). A directory that does not exist is
    skipped, as in coder_eval, but said in the set-up log (a misspelt name otherwise left
    the agent running the real tool with nothing to show why); one that resolves outside
    the workspace is never touched."""
    for rel in plan.sandbox.mock_path_dirs:
        path = os.path.realpath(os.path.join(root, rel))
        if not (path == root or path.startswith(root + os.sep)):
            log.append(f"mock_path_dirs: {rel}: resolves outside the workspace (skipped)")
            continue
        if not os.path.isdir(path):
            log.append(f"mock_path_dirs: {rel}: no such directory in the workspace after "
                       "set-up (skipped: nothing of it is on the agent's PATH)")
            continue
        marked = 0
        for entry in os.scandir(path):
            if entry.is_file(follow_symlinks=False):
                mode = entry.stat(follow_symlinks=False).st_mode
                os.chmod(entry.path, mode | 0o111)
                marked += 1
        log.append(f"mock_path_dirs: {rel}: {marked} executable(s)")


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc)


def _apply_repo(src: RepoSource, task_dir: str, root: str, log: list[str]) -> None:
    shown = _redact(src.url)
    # the compiler refuses these (CE0218); checked again because git must never see an
    # option or a command transport, whatever plan reaches this point
    why = repo_url_problem(src.url)
    if why is None and src.commit is not None:
        why = commit_problem(src.commit)
    if why is not None:
        raise SetupError(f"refused repo source {shown}: {why}")
    url = src.url
    local = is_local_repo(url)
    if local and not os.path.isabs(url):
        url = os.path.normpath(os.path.join(task_dir, url))
    dest = os.path.join(root, REPO_DIR)
    if os.path.lexists(dest):
        _remove(dest)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true",
           "GCM_INTERACTIVE": "never", "GIT_PROTOCOL_FROM_USER": "0"}
    # no remote helper runs a command (ext::), and the file transport serves only the
    # local path the task named (never a file:// URL, nor a submodule's)
    transports = ["-c", "protocol.ext.allow=never",
                  "-c", f"protocol.file.allow={'always' if local else 'never'}"]
    _run(["git", *transports, "clone", "--quiet", "--", url, dest], cwd=root, env=env,
         timeout=GIT_CLONE_TIMEOUT, what=f"git clone {shown}")
    if src.commit:
        # `COMMIT --`: the commit (checked above: never starting with `-`) is read as a
        # revision, never a path (git 2.39's checkout mishandles --end-of-options)
        _run(["git", *transports, "-c", "advice.detachedHead=false", "checkout", "--quiet",
              src.commit, "--"], cwd=dest, env=env,
             timeout=GIT_CHECKOUT_TIMEOUT,
             what=f"git checkout {src.commit} (in the clone of {shown})")
    head = _run(["git", "rev-parse", "HEAD"], cwd=dest, env=env, timeout=60,
                what="git rev-parse HEAD").strip()
    log.append(f"repo: cloned {shown} into {REPO_DIR}/ at {head[:12]}")


def _redact(url: str) -> str:
    return re.sub(r"(://)[^/@]+@", r"\1***@", url)


def _apply_template_dir(src: TemplateDirSource, task_dir: str, root: str, ignore: list[str],
                        log: list[str]) -> None:
    source = os.path.normpath(os.path.join(task_dir, src.path))
    if not os.path.isdir(source):
        raise SetupError(f"template directory {src.path!r} not found ({source})")
    mount = _mount_rel(src.mount_point)
    dest_root = _replace_with_dir_parent(root, mount, include_self=True)
    include = [p.replace("\\", "/").removeprefix("./").rstrip("/")
               for p in src.include_patterns if p.strip()]
    copied = replaced = skipped = 0
    for rel, is_dir in template_entries(source, ignore, include):
        if is_dir:
            _replace_with_dir_parent(dest_root, rel, include_self=True)
            continue
        full = os.path.join(source, rel)
        mode = os.lstat(full).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            skipped += 1  # fifos, sockets, devices
            continue
        parent = _replace_with_dir_parent(dest_root, rel)
        dest = os.path.join(parent, os.path.basename(rel))
        if os.path.lexists(dest):
            _remove(dest)
            replaced += 1
        if stat.S_ISLNK(mode):
            os.symlink(os.readlink(full), dest)
        else:
            shutil.copy2(full, dest, follow_symlinks=False)
        copied += 1
    note = f", {replaced} replaced" if replaced else ""
    note += f", {skipped} special files skipped" if skipped else ""
    log.append(f"template_dir: {src.path} -> {mount or '.'}/: {copied} entries{note}")


def _mount_rel(mount_point: str) -> str:
    rel = os.path.normpath(mount_point.replace("\\", "/"))
    if os.path.isabs(rel) or rel == ".." or rel.startswith("../"):
        raise SetupError(f"mount_point {mount_point!r} leaves the workspace")
    return "" if rel == "." else rel


def _apply_starter_files(src: StarterFilesSource, root: str, log: list[str]) -> None:
    replaced = 0
    for f in src.files:
        rel = os.path.normpath(f.path.replace("\\", "/"))
        if os.path.isabs(rel) or rel in (".", "..") or rel.startswith("../"):
            raise SetupError(f"starter file path {f.path!r} leaves the workspace")
        parent = _replace_with_dir_parent(root, rel)
        dest = os.path.join(parent, os.path.basename(rel))
        if os.path.lexists(dest):
            _remove(dest)
            replaced += 1
        with open(dest, "w", encoding="utf-8", newline="") as fh:
            fh.write(f.content)
    note = f" ({replaced} replaced)" if replaced else ""
    log.append(f"starter_files: {len(src.files)} files{note}")


def _replace_with_dir_parent(base: str, rel: str, include_self: bool = False) -> str:
    """The real directory holding `rel` under `base` (or `rel` itself with include_self),
    created as needed; a file or symlink in the way is replaced by a directory."""
    parts = [p for p in rel.replace(os.sep, "/").split("/") if p]
    if not include_self:
        parts = parts[:-1]
    path = base
    for part in parts:
        path = os.path.join(path, part)
        st = _lstat(path)
        if st is not None and not stat.S_ISDIR(st.st_mode):
            os.unlink(path)  # a file or a symlink (even to a directory): last writer wins
            st = None
        if st is None:
            os.mkdir(path)
    return path


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _python_env(root: str, packages: list[str], uv_cache: str | None,
                log: list[str], templates: str | None = None) -> None:
    """`.venv`: a copy of the run's template for this interpreter and package list (see
    venvs.py), built with `uv venv --relocatable` and `uv pip install` on first use."""
    from ce_runtime.execute.sandbox.venvs import clone_venv

    venv = os.path.join(root, ".venv")
    if os.path.lexists(venv):
        _remove(venv)  # a template's .venv: the sandbox builds its own
        log.append("python: replaced an existing .venv")
    key = (_uv_bin(), os.path.realpath(sys.executable), tuple(packages), uv_cache)
    machine = () if packages else (_uv_bin(), sys.executable)  # installs nothing
    log.extend(clone_venv(key, venv, lambda path, out: _build_venv(path, packages,
                                                                    uv_cache, root, out),
                          templates, machine))


def _build_venv(venv: str, packages: list[str], uv_cache: str | None, cwd: str,
                log: list[str]) -> None:
    uv = _uv_bin()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    # private copies, never hard links into uv's cache: an agent editing its venv in place
    # would otherwise edit the cache, and through it every other trial's venv
    env["UV_LINK_MODE"] = "copy"
    if uv_cache:
        os.makedirs(uv_cache, exist_ok=True)
        env["UV_CACHE_DIR"] = uv_cache
    _run([uv, "venv", "--quiet", "--relocatable", "--python", sys.executable, venv],
         cwd=cwd, env=env, timeout=VENV_TIMEOUT, what="uv venv")
    version = ".".join(map(str, sys.version_info[:3]))
    log.append(f"python: created .venv (Python {version})")
    if not packages:
        return
    python = os.path.join(venv, "bin", "python")
    out = _run([uv, "pip", "install", "--python", python, *packages], cwd=cwd, env=env,
               timeout=INSTALL_TIMEOUT, what=f"uv pip install {' '.join(packages)}")
    added = [ln.strip()[2:] for ln in out.splitlines() if ln.strip().startswith("+ ")]
    shown = ", ".join(added[:40]) + (" ..." if len(added) > 40 else "")
    log.append(f"python: installed {' '.join(packages)}" + (f" ({shown})" if shown else ""))


_UV_LOCK = threading.Lock()
_UV_BIN: list[str] = []


def _uv_bin() -> str:
    """Found once, under a lock: `find_uv_bin` reads sysconfig, whose lazy set-up is not
    thread-safe (concurrent trials set up in threads saw half-initialized paths)."""
    with _UV_LOCK:
        if not _UV_BIN:
            _UV_BIN.append(_find_uv_bin())
        return _UV_BIN[0]


def _find_uv_bin() -> str:
    # where `uv.find_uv_bin` looks first (the scripts directory of this Python, which is
    # {sys.prefix}/bin on POSIX), without its import and sysconfig's set-up (~5 ms)
    first = os.path.join(sys.prefix, "bin", "uv")
    if os.name == "posix" and os.path.isfile(first) and os.access(first, os.X_OK):
        return first
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise SetupError("uv is not installed (it builds the sandbox's venv)") from None
        return found


def _node_packages(root: str, packages: list[str], log: list[str]) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError("npm is not on PATH (sandbox.node.env_packages needs it)")
    _run([npm, "install", "--prefix", root, "--no-audit", "--no-fund", *packages], cwd=root,
         env={**os.environ, "NODE_PATH": ""}, timeout=INSTALL_TIMEOUT,
         what=f"npm install {' '.join(packages)}")
    log.append(f"node: installed {' '.join(packages)}")


def _run(argv: list[str], *, cwd: str, env: dict[str, str], timeout: float,
         what: str) -> str:
    """A set-up command in its own process group; its combined output, or SetupError."""
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        except OSError as exc:
            raise SetupError(f"{what}: cannot start {argv[0]}: {_why(exc)}") from None
        cancel = _CANCEL.get()
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    code = proc.wait(max(0.0, min(left, CANCEL_POLL_S) if cancel else left))
                    break
                except subprocess.TimeoutExpired:
                    if cancel is not None and cancel.is_set():
                        _kill_group(proc.pid)
                        proc.wait()
                        raise SetupError(f"{what}: cancelled (the trial was interrupted)")\
                            from None
                    if time.monotonic() >= deadline:
                        _kill_group(proc.pid)
                        proc.wait()
                        text = read_capped(out, None)
                        raise SetupError(f"{what}: timed out after {timeout:g} s"
                                         f"{_excerpt(text)}") from None
        except SetupError:
            raise
        except BaseException:  # interrupted: nothing it started survives
            _kill_group(proc.pid)
            proc.wait()
            raise
        text = read_capped(out, None)
    if code != 0:
        raise SetupError(f"{what}: failed (exit {code}){_excerpt(text)}")
    return text


def _excerpt(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    if len(text) > EXCERPT_CHARS:
        text = "..." + text[-EXCERPT_CHARS:]
    return "\n" + text


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
