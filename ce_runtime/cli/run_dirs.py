"""Where `ce run` writes: `--run-dir DIR` is the run directory itself (as in coder_eval);
`--runs-root DIR` (default `runs`) is a directory of runs, each a new timestamped
directory, with `DIR/latest` pointing at the newest.

Backward compatibility: before issue 15 `--run-dir` named the directory of runs. A
`--run-dir` that already is one (it has a `latest` link, or runs in it) is still taken
that way, and ce says so on stderr."""

from __future__ import annotations

import os

import click


def is_runs_root(path: str) -> bool:
    """A directory of runs: a `latest` link, or a subdirectory holding a run.json."""
    if os.path.islink(os.path.join(path, "latest")):
        return True
    try:
        entries = os.listdir(path)
    except OSError:
        return False
    return any(os.path.isfile(os.path.join(path, e, "run.json")) for e in entries)


def choose(run_dir: str | None, runs_root: str) -> str:
    """Create the run directory (with plans/ and objects/) and return its path."""
    try:
        return _choose(run_dir, runs_root)
    except OSError as exc:  # nothing of the run exists yet: a path that cannot be
        where = exc.filename or run_dir or runs_root  # made is bad input, said once
        raise click.BadParameter(f"cannot create {where}: {exc.strerror or exc}; nothing "
                                 "was run", param_hint="--run-dir" if run_dir is not None
                                 else "--runs-root") from None


def dangling(path: str, hint: str) -> None:
    """A symlink that resolves to nothing is said as such: making a directory through it
    fails with 'No such file or directory' (or 'File exists') of some other path."""
    if not os.path.islink(path) or os.path.exists(path):
        return
    target = os.path.realpath(path)
    if os.path.islink(target):  # realpath stops inside a loop
        why = "a symlink loop"
    else:
        why = f"a symlink to a missing directory ({target})"
    raise click.BadParameter(f"{path} is {why}: create the directory it names, or name "
                             "another; nothing was run", param_hint=hint)


def _choose(run_dir: str | None, runs_root: str) -> str:
    from ce_runtime.execute import suite as R

    dangling(run_dir if run_dir is not None else runs_root,
             "--run-dir" if run_dir is not None else "--runs-root")
    if run_dir is None:
        os.makedirs(runs_root, exist_ok=True)
        return R.new_run_dir(runs_root)
    if os.path.isfile(os.path.join(run_dir, "run.json")):
        raise click.BadParameter(f"{run_dir} already holds a run: `ce run --resume {run_dir}` "
                                 "finishes it; name a new directory to start another",
                                 param_hint="--run-dir")
    if os.path.isdir(run_dir) and is_runs_root(run_dir):
        click.echo(f"ce run: {run_dir} is a directory of runs: a new run is made in it, as "
                   f"--runs-root {run_dir} does (--run-dir names the run directory itself)",
                   err=True)
        return R.new_run_dir(run_dir)
    if os.path.exists(run_dir) and (not os.path.isdir(run_dir) or os.listdir(run_dir)):
        raise click.BadParameter(f"{run_dir} exists and is not an empty directory; nothing "
                                 "was written (a run directory starts empty)",
                                 param_hint="--run-dir")
    os.makedirs(os.path.join(run_dir, "plans"), exist_ok=True)
    os.makedirs(os.path.join(run_dir, "objects"), exist_ok=True)
    return run_dir


def run_id(run_dir: str, recorded: str | None = None) -> str:
    """The run's id: the one run.json recorded (a resume keeps it), else the name of the
    directory with links resolved (`runs/latest` is not an id)."""
    if recorded and recorded != "latest":
        return recorded
    return os.path.basename(os.path.realpath(run_dir))
