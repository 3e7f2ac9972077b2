"""Choosing by name on the command line: a trial by its id or a unique prefix of it, a
criterion by id, index or type, a run from a directory of runs. An unknown or ambiguous
name is a usage error (exit 2) with a did-you-mean, never a silent default."""

from __future__ import annotations

import os
from collections.abc import Sequence

import click


def by_prefix(wanted: str, ids: Sequence[str], what: str, hint: str) -> str:
    """`wanted` itself when it is one of `ids`, else the one id it is a prefix of (a path
    prefix `default/hello` or any leading text)."""
    if wanted in ids:
        return wanted
    trimmed = wanted.strip("/")
    matches = [i for i in ids if i.startswith(trimmed)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(matches[:5]) + (f" and {len(matches) - 5} more"
                                          if len(matches) > 5 else "")
        raise click.BadParameter(f"{wanted!r} is the prefix of {len(matches)} {what}s "
                                 f"({shown}); give more of the id", param_hint=hint)
    from ce_lang.api import did_you_mean

    close = did_you_mean(wanted, ids)
    listed = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
    raise click.BadParameter(f"no {what} {wanted!r}; " + (close or f"{what}s: {listed}"),
                             param_hint=hint)


def criterion(wanted: str | None, criteria: Sequence[tuple[str, str]]) -> None:
    """`--criterion` names a criterion of the plan: its id (c0), index (0) or type; else
    a usage error listing them. `criteria` is (id, type) in order."""
    if wanted is None:
        return
    names = [c for pair in criteria for c in pair] + [str(i) for i in range(len(criteria))]
    if wanted in names:
        return
    from ce_lang.api import did_you_mean

    listed = ", ".join(f"{cid} ({ctype})" for cid, ctype in criteria)
    close = did_you_mean(wanted, names)
    raise click.BadParameter(f"no criterion {wanted!r} in this trial"
                             + (f"; {close}" if close else "") + f" (criteria: {listed})",
                             param_hint="--criterion")


def latest_run(path: str, command: str, hint: str = "RUN_DIR") -> str:
    """A run directory from PATH: PATH itself when it is one (or a trial directory, or
    anything under a run), else the newest run in the directory of runs PATH, said on
    stderr. A path that is neither is a usage error."""
    from ce_runtime.report.rundir import RunDirError, resolve_run_dir

    if os.path.isfile(os.path.join(path, "run.json")) or \
            os.path.isfile(os.path.join(path, "task.json")) or \
            os.path.isdir(os.path.join(path, "plans")):
        return path
    try:
        run = resolve_run_dir(path)
    except RunDirError:
        raise click.BadParameter(f"{path} is not a run directory (no run.json) nor a "
                                 "directory of runs", param_hint=hint) from None
    click.echo(f"ce {command}: {path} is a directory of runs; using the latest, {run}",
               err=True)
    return run


def trial_of_run(path: str, trial_id: str | None, command: str, hint: str) -> str:
    """The trial directory PATH names: PATH itself (a trial directory), or the trial
    --trial names in the run PATH is (or the latest run of the directory of runs PATH);
    a run of one trial needs no --trial."""
    from ce_runtime.grade.rescore import trial_dirs

    if os.path.isfile(os.path.join(path, "task.json")):
        if trial_id:
            raise click.UsageError(f"--trial picks a trial of a run; {hint} is a trial "
                                   "already")
        return path
    inside = _run_above(path)
    if inside is not None:  # VARIANT/TASK/ROW of a run: its trials, not a run
        prefix = os.path.relpath(os.path.realpath(path), inside) + os.sep
        under = [i for i in (os.path.relpath(d, inside) for d in trial_dirs(inside))
                 if i.startswith(prefix)]
        if len(under) == 1 and trial_id is None:
            return os.path.join(inside, under[0])
        if under and trial_id:
            rel = [i[len(prefix):] for i in under]
            return os.path.join(inside, prefix + by_prefix(trial_id, rel, "trial", "--trial"))
        if under:
            rel = [i[len(prefix):] for i in under]
            shown = ", ".join(rel[:8]) + (f" and {len(rel) - 8} more" if len(rel) > 8 else "")
            raise click.UsageError(f"{path} holds {len(rel)} trials of the run {inside}: "
                                   f"name one with --trial (a unique prefix): {shown}")
    run = latest_run(path, command, hint)
    ids = [os.path.relpath(d, run) for d in trial_dirs(run)]
    if not ids:
        raise click.BadParameter(f"{run} holds no trial (no task.json)", param_hint=hint)
    if trial_id is None:
        if len(ids) == 1:
            return os.path.join(run, ids[0])
        shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
        raise click.UsageError(f"{run} is a run of {len(ids)} trials: name one with --trial "
                               f"(its id or a unique prefix): {shown}")
    return os.path.join(run, by_prefix(trial_id, ids, "trial", "--trial"))


def _run_above(path: str) -> str | None:
    """The run directory `path` lies inside (below it, not the run itself), or None."""
    here = os.path.realpath(path)
    while (parent := os.path.dirname(here)) != here:
        here = parent
        if os.path.isfile(os.path.join(here, "run.json")):
            return here
    return None


def say_if_latest(path: str, command: str) -> None:
    """When PATH is a directory of runs (its `latest` stands for it), say which run the
    command reads; a path that is neither a run nor a directory of runs is left to the
    command's own error."""
    from ce_runtime.report.rundir import RunDirError, resolve_run_dir

    try:
        run = resolve_run_dir(path)
    except RunDirError:
        return
    if run != os.path.realpath(path):
        click.echo(f"ce {command}: {path} is a directory of runs; using the latest, {run}",
                   err=True)


def missing_path(path: str, hint: str) -> click.BadParameter:
    """The error for a PATH that does not exist, with what is there: under a run (a trial
    directory `RUN/default/task/01` when only `00` exists) the trials below the part of
    PATH that exists, the closest first; elsewhere the closest name in its directory.
    Click's own said `Path '...' does not exist` and nothing of what does."""
    from ce_lang.api import did_you_mean

    above = path
    while above and not os.path.exists(above):
        above = os.path.dirname(above.rstrip(os.sep))
    here = above or "."
    run = here if os.path.isfile(os.path.join(here, "run.json")) else _run_above(here)
    if run is not None:
        from ce_runtime.grade.rescore import trial_dirs

        real = os.path.realpath(here)
        trials = [os.path.join(above, os.path.relpath(d, real)) if above
                  else os.path.relpath(d, real) for d in trial_dirs(run)
                  if os.path.realpath(d).startswith(real + os.sep)]
        if trials:
            close = did_you_mean(path.rstrip(os.sep), trials)
            shown = ", ".join(trials[:8]) + (f" and {len(trials) - 8} more"
                                             if len(trials) > 8 else "")
            return click.BadParameter(
                f"{path} does not exist; " + (f"{close} " if close else "")
                + f"({here} holds {len(trials)} trial{'s' if len(trials) > 1 else ''}: "
                f"{shown})", param_hint=hint)
    names = sorted(os.listdir(here)) if os.path.isdir(here) and \
        os.path.dirname(path.rstrip(os.sep)) == above else []
    close = did_you_mean(os.path.basename(path.rstrip(os.sep)), names)
    if close:
        close = close.replace("`", f"`{os.path.join(above, '')}", 1) if above else close
    return click.BadParameter(f"{path} does not exist" + (f"; {close}" if close else ""),
                              param_hint=hint)
