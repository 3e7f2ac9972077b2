"""Earlier attempts of a trial that a run ran again after an ERROR (`ce run
--retry-errors N`).

An ERROR is a failure of ce or of what the trial stands on, not a verdict on the agent: a
sandbox that did not start, a pre_run command that failed, the agent's CLI crashing or its
model API giving up. A nightly suite of thousands of trials meets a few, and one ERROR
fails the run's gate. `--retry-errors N` runs such a trial again, up to N more times,
once the run's other trials are done (an outage of a minute has passed by then).

Nothing is thrown away: before a trial runs again, its directory moves whole to
RUN/attempts/<variant>/<task>/<repeat>/<n>/ (n from 1), where `ce runs RUN` and
report.html find it; the trial's own directory then holds its latest attempt, the one
the run's results count. Its workspace objects stay in RUN/objects, shared.

Not retried: an ERROR that is a verdict on the agent (it changed files the grader
trusts: `integrity`), which another try would only give another chance.
"""

from __future__ import annotations

import os
from typing import Any

ATTEMPTS = "attempts"  # the run directory's own (ce_lang.experiment.RUN_LEVEL_DIRS)


def retryable(record: Any) -> bool:
    """Whether `record` (a TrialRecord) ended in an ERROR another attempt may not meet."""
    from ce_runtime.store.record import Status

    return record.status == Status.ERROR and not record.integrity


def attempts_dir(run_dir: str, trial: Any) -> str:
    """Where `trial`'s earlier attempts are kept."""
    from ce_runtime.execute.trial import trial_dir_of

    return os.path.join(run_dir, ATTEMPTS, os.path.relpath(trial_dir_of(run_dir, trial),
                                                           run_dir))


def earlier(run_dir: str, trial: Any) -> list[str]:
    """`trial`'s earlier attempts' directories, oldest first: those of its plan (a
    resume runs a trial whose plan changed anew, and the attempts of its old plan are
    not its own: they neither use up its retries nor make it a retried trial)."""
    from ce_runtime.execute.trial import trial_dir_of

    return [os.path.join(run_dir, where) for _, where, _ in
            attempt_records(run_dir, trial_dir_of(run_dir, trial), trial.plan_hash)]


def due(run_dir: str, trial: Any, record: Any, retries: int) -> bool:
    """Whether `trial`, which ended as `record`, runs again under --retry-errors
    `retries`: a retryable ERROR with fewer than `retries` attempts before this one."""
    return retries > 0 and retryable(record) and len(earlier(run_dir, trial)) < retries


def set_aside(run_dir: str, trial: Any) -> str:
    """Move `trial`'s directory to its next attempt's place; that place. One rename:
    a run stopped here has either the trial (finished) or its attempt kept and the trial
    to run again (unfinished: a resume runs it)."""
    from ce_runtime.execute.trial import trial_dir_of

    base = attempts_dir(run_dir, trial)
    os.makedirs(base, exist_ok=True)
    n = len(earlier(run_dir, trial)) + 1
    while os.path.exists(os.path.join(base, str(n))):
        n += 1
    dest = os.path.join(base, str(n))
    os.rename(trial_dir_of(run_dir, trial), dest)
    return dest


def attempt_records(run_dir: str, trial_dir: str, plan_hash: str | None = None
                    ) -> list[Any]:
    """The earlier attempts of the trial at `trial_dir` (a trial's directory in
    `run_dir`), as (attempt number, relative directory, TrialRecord or None when
    unreadable), oldest first: what report.html and JUnit show of them. With
    `plan_hash` (the trial's latest record's), only those of that plan (`earlier`)."""
    from ce_runtime.store.archive import DamagedArchive
    from ce_runtime.store.record import read_record

    base = os.path.join(run_dir, ATTEMPTS, os.path.relpath(trial_dir, run_dir))
    try:
        names = sorted((n for n in os.listdir(base) if n.isdigit()), key=int)
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(base, name)
        try:
            rec = read_record(path)
        except (DamagedArchive, OSError):
            rec = None
        if rec is None or plan_hash is None or rec.plan_hash == plan_hash:
            out.append((int(name), os.path.relpath(path, run_dir), rec))
    return out


def retried(run_dir: str, records: Any) -> dict[str, Any] | None:
    """run.json's `retried` (None: no trial of `records` ran again): how many trials ran
    again after an ERROR, their earlier attempts, and each one's (`by_trial`: attempt
    number, status, error, directory), which JUnit and `ce report` render without the
    run directory at hand."""
    from ce_runtime.store.record import as_records

    if not os.path.isdir(os.path.join(run_dir, ATTEMPTS)):  # no listing per trial
        return None
    by_trial: dict[str, list[dict[str, Any]]] = {}
    for rec in as_records(records):
        trial_id = rec.trial_id
        if not trial_id or ".." in str(trial_id).split("/"):
            continue
        kept = attempt_records(run_dir, os.path.join(run_dir, *str(trial_id).split("/")),
                               rec.plan_hash)
        if kept:
            by_trial[trial_id] = [
                {"n": n, "status": a.status if a is not None else None,
                 "error": (a.error_reason or "")[:_ERROR_CHARS] or None if a is not None
                 else "record unreadable", "dir": where} for n, where, a in kept]
    if not by_trial:
        return None
    return {"trials": len(by_trial), "earlier_attempts": sum(map(len, by_trial.values())),
            "by_trial": by_trial}


_ERROR_CHARS = 1000  # an attempt's error as run.json keeps it (the attempt keeps it whole)
