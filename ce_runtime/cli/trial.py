"""`ce trial`: one archived trial. `ce trial files`: its workspace snapshot, listed or
restored."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from typing import Any

import click

from ce_runtime.safe_text import one_line


@click.group("trial")
def trial_cmd():
    """One archived trial of a run (a directory with task.json, e.g.
    runs/latest/default/hello_world/00).

    \b
    Examples:
      ce trial files runs/latest/default/hello_world/00
      ce trial files runs/latest/default/hello_world/00 --extract /tmp/ws
    """


@trial_cmd.command("files")
@click.argument("trial_dir", metavar="TRIAL_DIR")
@click.option("--trial", "trial_id", metavar="ID",
              help="When TRIAL_DIR is a run (or a directory of runs: its latest), the trial: "
                   "its id or a unique prefix (default/hello).")
@click.option("--extract", "extract", metavar="DIR", type=click.Path(file_okay=False),
              help="Restore the files into DIR (it must not exist, or be empty).")
@click.option("-f", "--format", "fmt", type=click.Choice(("text", "json")), default="text",
              show_default=True, help="Listing format.")
def files_cmd(trial_dir, trial_id, extract, fmt):
    """List the files of TRIAL_DIR's workspace as the trial left it, or restore them.

    TRIAL_DIR is a trial directory, or a run with --trial ID (a run of one trial needs
    none), or a directory of runs (its latest run is used, and said).

    The snapshot is the trial's workspace.json (path -> sha256, mode, size) and the
    run's content-addressed objects/. The listing shows each path, its size and the
    first 12 hex digits of its sha256 (links: their target). Directories the snapshot
    skips (.venv, node_modules, .git, __pycache__) are not in it.

    --extract DIR restores the files with the restore `ce rescore` and `ce explain`
    use: every object must match its digest, and a name that is absolute, has a `..`
    component or goes through a link, or a link that points out of DIR, is refused.
    The files are written to a temporary directory beside DIR and moved into place
    only when all of them were restored: a refused snapshot leaves nothing behind.

    Before anything, task.json's recorded digest of workspace.json is checked.

    \b
    Exit status: 0 done; 1 a damaged archive (one line: the file and why);
    2 TRIAL_DIR is not a trial directory, or DIR is not empty.

    \b
    Examples:
      ce trial files runs/latest/default/hello_world/00
      ce trial files runs/latest/default/hello_world/00 -f json
      ce trial files runs/latest/default/hello_world/00 --extract /tmp/ws
      ce trial files runs --trial default/hello
    """
    from ce_runtime.cli.pick import trial_of_run
    from ce_runtime.store.archive import DamagedArchive, find_run_root, verified_trial
    from ce_runtime.store.workspace_snapshot import OutwardLink

    if not os.path.isfile(os.path.join(trial_dir, "task.json")) and os.path.isdir(trial_dir):
        trial_dir = trial_of_run(trial_dir, trial_id, "trial files", "TRIAL_DIR")
    elif trial_id:
        raise click.UsageError("--trial picks a trial of a run; TRIAL_DIR is a trial already")
    if not os.path.isfile(os.path.join(trial_dir, "task.json")):
        _fail(2, f"{trial_dir}: not a trial directory (no task.json; a trial directory is "
                 "<run>/<variant>/<task>/<repeat>, e.g. runs/latest/default/hello_world/00)")
    root = find_run_root(trial_dir)
    if root is None:
        _fail(2, f"{trial_dir}: not inside a run directory (no plans/ and objects/ above it)")
    objects = os.path.join(root, "objects")
    try:
        _task, manifest, _trace = verified_trial(trial_dir)
        entries = _entries(manifest, trial_dir, objects)
        if extract:
            _extract(manifest, objects, extract)
    except OutwardLink as exc:  # the agent's own link, refused for a person's copy
        _fail(1, f"not extracted: {exc.why.replace('a link', 'a link the agent made', 1)}; "
                 "--extract restores no link pointing outside DIR (the listing shows it: "
                 f"ce trial files {trial_dir})")
    except DamagedArchive as exc:
        _fail(1, _where(exc, trial_dir))
    if extract:
        click.echo(f"{len(entries)} file(s) restored into {extract}", err=True)
        return
    if fmt == "json":
        click.echo(json.dumps(entries, indent=2))
        return
    width = max((len(str(e["size"] or "")) for e in entries), default=1)
    for e in entries:
        if e["link"] is not None:
            click.echo(f"{'link':>{width}}  {'':12}  {one_line(e['path'])} -> "
                       f"{one_line(e['link'])}")
        else:
            digest = e["sha256"][:12] if e["sha256"] else "(not kept)"
            # the agent named its files: one line each, no escape sequence reaches the terminal
            click.echo(f"{e['size']:>{width}}  {digest:12}  {one_line(e['path'])}")
    total = sum(e["size"] or 0 for e in entries)
    click.echo(f"{len(entries)} file(s), {total} bytes", err=True)


def _fail(code: int, message: str):
    click.echo(f"ce trial files: {message}", err=True)
    sys.exit(code)


def _where(exc: Exception, trial_dir: str) -> str:
    """DamagedArchive names workspace.json bare: say which trial's."""
    text = str(exc)
    bare = "damaged archive: workspace.json:"
    if text.startswith(bare):
        text = ("damaged archive: " + os.path.join(trial_dir, "workspace.json") + ":"
                + text[len(bare):])
    return text


def _entries(manifest: dict[str, Any], trial_dir: str, objects: str) -> list[dict[str, Any]]:
    """The manifest's files, sorted, with their names checked as the restore checks them."""
    from ce_runtime.store.archive import HEX64, DamagedArchive
    from ce_runtime.store.workspace_snapshot import _safe_parts, too_large

    where = os.path.join(trial_dir, "workspace.json")
    out = []
    for rel, entry in sorted(manifest["files"].items()):
        _safe_parts(rel, "workspace.json")
        if not isinstance(entry, dict):
            raise DamagedArchive(where, f"{rel!r}: not an entry")
        if entry.get("dir") is True:  # an empty directory (restored as one): no file
            continue
        if "link" in entry:
            out.append({"path": rel, "size": None, "sha256": None, "mode": None,
                        "link": str(entry["link"])})
            continue
        if too_large(entry):  # recorded without its bytes
            out.append({"path": rel, "size": entry.get("size"), "sha256": None,
                        "mode": entry.get("mode"), "link": None})
            continue
        digest = entry.get("sha256")
        if not isinstance(digest, str) or not HEX64.fullmatch(digest):
            raise DamagedArchive(where, f"{rel!r}: no valid sha256")
        size = entry.get("size")
        if not isinstance(size, int) or isinstance(size, bool):
            try:
                size = os.path.getsize(os.path.join(objects, digest[:2], digest[2:]))
            except OSError:
                size = None
        out.append({"path": rel, "size": size, "sha256": digest, "mode": entry.get("mode"),
                    "link": None})
    return out


def _extract(manifest: dict[str, Any], objects: str, dest: str) -> None:
    """Restore into a fresh directory beside `dest`, then move it into place."""
    from ce_runtime.store.workspace_snapshot import restore_workspace

    if os.path.lexists(dest):
        if os.path.islink(dest) or not os.path.isdir(dest):
            _fail(2, f"{dest}: exists and is not a directory")
        if os.listdir(dest):
            _fail(2, f"{dest}: not empty (--extract needs a new or empty directory)")
    parent = os.path.dirname(os.path.abspath(dest))
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(dest))}.",
                               dir=parent)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 is for the temporary name only
    except OSError as exc:
        _fail(1, f"cannot write {dest}: {exc.strerror or exc}")  # as given: not its parent
    try:
        restore_workspace(manifest, objects, tmp)
        if os.path.isdir(dest):
            os.rmdir(dest)  # empty, checked above
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
