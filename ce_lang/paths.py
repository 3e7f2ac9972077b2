"""Which host files a task may make ce read, and reading them without hanging.

A task names host paths (prompt files, template and reference directories, datasets,
criteria files, `$TASK_DIR/...` files). They are resolved (symlinks included) and must
lie inside a suite root, so a task cannot put `/proc/self/environ` into a plan; and only
regular files and directories are read, so a FIFO or `/dev/zero` is a diagnostic, never
a hang. `repo` sources are checked here too: git must only ever see a repository URL
or a commit, never an option or a command transport.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Sequence
from urllib.parse import urlsplit

import attrs

from ce_lang import hostfs

# never a suite root, nor inside one unless `--allow-path` names them: kernel interfaces
SYSTEM_DIRS = ("/proc", "/sys", "/dev")
DIR_SCAN_LIMIT = 3  # problems reported per named directory


@attrs.frozen
class SuiteRoots:
    """The directories a task's paths may resolve into (see CE0216's explanation)."""

    suite_dirs: tuple[str, ...] = ()  # directories named on the command line
    allowed: tuple[str, ...] = ()  # --allow-path
    cwd: str = attrs.field(factory=hostfs.getcwd)  # where -D values are relative to
    _scans: dict = attrs.field(factory=dict, eq=False, repr=False, alias="_scans")

    @classmethod
    def from_cli(cls, paths: list[str], allowed: tuple[str, ...] = ()) -> SuiteRoots:
        dirs = []
        for p in paths:
            if not hostfs.isdir(p) and any(c in p for c in "*?["):
                p = _glob_prefix(p)  # `tasks/**/*.yaml`: the suite is `tasks`
            if hostfs.isdir(p):
                dirs.append(_real(p))
        return cls(tuple(d for d in dirs if not _is_system_root(d)),
                   tuple(_real(a) for a in allowed))

    def roots_for(self, source_file: str) -> list[str]:
        """The suite roots for a path written in `source_file`."""
        if source_file.startswith("<"):  # -D, --model ...: relative to the working dir
            own = _real(self.cwd)
        else:
            task_dir = _real(os.path.dirname(os.path.abspath(source_file)))
            parent = os.path.dirname(task_dir)  # `$TASK_DIR/../shared/...`
            own = task_dir if _too_wide(parent) else parent
        roots = [] if _too_wide(own) else [own]
        return [*roots, *self.suite_dirs]

    def outside(self, resolved: str, source_file: str) -> str | None:
        """None when `resolved` (after symlinks) is inside a root; else a reason."""
        real = _real(resolved)
        if any(_within(real, a) for a in self.allowed):
            return None
        roots = self.roots_for(source_file)
        if not _within_any(real, SYSTEM_DIRS) and any(_within(real, r) for r in roots):
            return None
        shown = f" (it resolves to {real})" if real != os.path.normpath(resolved) else ""
        return f"is outside the suite root{shown}"

    def scan_dir(self, directory: str, source_file: str) -> list[tuple[str, str, str]]:
        """(code, entry, why) for special files and links leaving the roots under a
        directory ce will copy or hash; cached, a directory is walked once."""
        key = (directory, source_file)
        if key not in self._scans:
            self._scans[key] = _scan(directory, lambda p: self.outside(p, source_file))
        return self._scans[key]


def host_path_problem(value: str, resolved: str, source_file: str, roots: SuiteRoots,
                      ) -> tuple[str, str, str | None] | None:
    """(code, message, help) when the host path `value` (resolved against its file) may
    not be read: outside the suite roots, a special file, or a directory holding one."""
    kind = special_kind(resolved)  # first: /dev/zero is a device wherever it is allowed
    if kind is not None:
        return "CE0217", f"{value!r} is {kind}", "ce reads only regular files and directories"
    why = roots.outside(resolved, source_file)
    if why is not None:
        return ("CE0216", f"{value!r} {why}",
                "move it under the suite, or allow its directory with --allow-path DIR")
    if hostfs.isdir(resolved):
        found = roots.scan_dir(resolved, source_file)
        if found:
            code, rel, why = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            help_ = ("remove it, or allow its target with --allow-path DIR" if code == "CE0216"
                     else "remove it: ce copies only regular files, directories and links")
            return code, f"{value!r}: the entry {rel!r} {why}{more}", help_
    return None


def _scan(directory: str, outside) -> list[tuple[str, str, str]]:
    problems: list[tuple[str, str, str]] = []
    for dirpath, dirnames, filenames in hostfs.walk(directory):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames
                                          if hostfs.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, directory)
            mode = hostfs.mode(full, follow=False)
            if mode == -1:
                continue
            if mode == stat.S_IFLNK:
                why = outside(full)
                if special_kind(full):
                    problems.append(("CE0217", rel, f"links to {special_kind(full)}"))
                elif why is not None and hostfs.exists(full):
                    problems.append(("CE0216", rel, "links " + why.removeprefix("is ")))
            elif mode not in (stat.S_IFREG, stat.S_IFDIR):
                problems.append(("CE0217", rel, f"is {hostfs.kind_name(mode)}"))
            if len(problems) >= DIR_SCAN_LIMIT:
                return problems
    return problems


special_kind = hostfs.special_kind
NotRegularFile = hostfs.NotRegularFile
read_regular = hostfs.read_regular


def no_task_file(p: str) -> tuple[str, str, str | None]:
    """(code, message, help) for a task path `p` that names no task file: a FIFO or
    device is never read (CE0217), a symlink that resolves to nothing (a loop, a missing
    target) is said as such, not as a glob that matched nothing (CE0006)."""
    kind = hostfs.special_kind(p)
    if kind is not None:
        return ("CE0217", f"{p!r} is {kind}, not a task file",
                "ce reads only regular files and directories")
    if hostfs.islink(p) and not hostfs.exists(p):
        target = hostfs.realpath(p)
        if hostfs.islink(target):  # realpath stops inside a loop
            return "CE0006", f"{p!r} is a symlink loop: it cannot be resolved", None
        return "CE0006", f"{p!r} is a symlink to {target!r}, which does not exist", None
    return "CE0006", f"{p!r} matches no file", None


def read_regular_text(path: str) -> str:
    """UTF-8 text of a regular file (UnicodeDecodeError, OSError as `open` raises them)."""
    return read_regular(path).decode("utf-8")


# -- ignore patterns ------------------------------------------------------------------------
def ignored_by(rel: str, patterns: Sequence[str]) -> bool:
    """A template-relative path an ignore pattern drops: any of its segments matches one
    (fnmatch), as `.venv`, `node_modules`, `dist` drop a directory wherever it is."""
    return any(fnmatch.fnmatch(part, p) for part in rel.split("/") for p in patterns)


def included_by(rel: str, patterns: Sequence[str]) -> bool:
    """The path, or a directory it is in, matches an include pattern (a template_dir's
    `include_patterns`: copied even where an ignore pattern would drop it)."""
    if not patterns:
        return False
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatch(p, pat) for p in prefixes for pat in patterns)


# -- repo sources ---------------------------------------------------------------------------
_SCHEMES = ("https", "http", "ssh", "git")
# git@host:owner/repo.git, host:path (git reads a colon before any slash as ssh)
_SCP = re.compile(r"([A-Za-z0-9_][A-Za-z0-9._~+-]*@)?[A-Za-z0-9][A-Za-z0-9.-]*:(?![:/])\S+")
_HEX = re.compile(r"[0-9a-fA-F]{7,40}")
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/+-]*")


def is_local_repo(url: str) -> bool:
    """A path, not a URL: no colon before the first slash (git's own rule)."""
    return ":" not in url.split("/", 1)[0]


def repo_url_problem(url: str) -> str | None:
    """Why git must not be given `url`; None for a repository URL or a local path."""
    if not url or url != url.strip() or any(ord(c) < 32 or c == "\x7f" for c in url):
        return "holds whitespace or control characters"
    if url.startswith("-"):
        return "starts with `-` (git would read it as an option)"
    if "::" in url.split("/", 1)[0] or re.match(r"[A-Za-z][A-Za-z0-9+.-]*::", url):
        return "uses a git remote helper (`transport::`), which runs a command"
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme.lower() not in _SCHEMES:
            return (f"uses the `{parts.scheme}://` transport; use https://, http://, "
                    "ssh:// or git://" + (" (or a local path)" if parts.scheme == "file"
                                           else ""))
        host = parts.netloc.rpartition("@")[2]
        if not host or host.startswith("-"):
            return "has no valid host"
        return None
    if _SCP.fullmatch(url) or is_local_repo(url):
        return None
    return "is not a repository URL"


def commit_problem(commit: str) -> str | None:
    """Why `commit` is not a commit id or a ref name git can only read as one."""
    if _HEX.fullmatch(commit):
        return None
    if commit.startswith("-"):
        return "starts with `-` (git would read it as an option)"
    if (not _REF.fullmatch(commit) or ".." in commit or "//" in commit
            or commit.endswith(("/", ".", ".lock")) or "@{" in commit):
        return "is neither a commit id (7 to 40 hex digits) nor a branch or tag name"
    return None


# -- helpers ------------------------------------------------------------------------------
def _real(path: str) -> str:
    return hostfs.realpath(os.path.abspath(path))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _within_any(path: str, roots: tuple[str, ...]) -> bool:
    return any(_within(path, r) for r in roots)


def _too_wide(path: str) -> bool:
    """A directory never taken as a root implicitly: `/`, a top-level directory (/tmp,
    /home ...), the home directory (a task saved in ~/Downloads must not reach ~/.ssh
    through `$TASK_DIR/..`), a kernel interface. Naming it on the command line (a
    directory argument, --allow-path) still makes it one."""
    home = _real(hostfs.expanduser("~"))
    return _is_system_root(path) or os.path.dirname(path) == os.sep or path == home


def _is_system_root(path: str) -> bool:
    """`/`, or a kernel interface: too wide (or too dangerous) to be a suite root."""
    return path == os.sep or os.path.dirname(path) == path or _within_any(path, SYSTEM_DIRS)


def _glob_prefix(pattern: str) -> str:
    head = []
    for part in pattern.split(os.sep):
        if any(c in part for c in "*?["):
            break
        head.append(part)
    return os.sep.join(head) or "."
