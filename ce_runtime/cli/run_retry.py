"""`ce run --retry-errors N`: the trials that ended in an ERROR run again, up to N more
times, after the others (ce_runtime/execute/attempts.py says what is retried and where
the earlier attempts are kept).

A retry pass starts once a pass has ended with nothing stopping the run (a Ctrl-C, an
executor that did not start): it names its trials and their attempt, sets each trial's
directory aside, and runs them as the first pass did (the same executor, -j, progress
and report worker). A resume given --retry-errors (or resuming a run that had it) also
runs again the run's finished ERROR trials that have attempts left.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


class Retries:
    """The trials of the current pass that ended in a retryable ERROR, seen as each
    finishes (wrap the run's on_done with `on_done`)."""

    def __init__(self, run_dir: str, retries: int, quiet: bool) -> None:
        self.run_dir, self.retries, self.quiet = run_dir, retries, quiet
        self._errored: dict[str, Any] = {}  # trial id -> trial, this pass
        self.retried: dict[str, Any] = {}  # trial id -> trial, every trial run again
        self.final: dict[str, str] = {}  # trial id -> its latest attempt's status
        self._held: str | None = None  # a resume's retry line, said after its start line

    def on_done(self, inner: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        from ce_runtime.execute import attempts
        from ce_runtime.store.record import as_record

        def done(trial, record) -> None:
            rec = as_record(record)
            self.final[trial.trial_id] = rec.status
            if attempts.due(self.run_dir, trial, rec, self.retries):
                self._errored[trial.trial_id] = trial
            inner(trial, record)
        return done

    def already_errored(self, trials: list[Any], done: set[str]) -> list[Any]:
        """A resume's finished trials that are due another attempt: set aside, and out of
        `done` (they run again). An unfinished trial with earlier attempts (a run stopped
        during its retry) runs again after an ERROR too: the summary counts it."""
        from ce_runtime.execute import attempts
        from ce_runtime.execute.trial import trial_dir_of
        from ce_runtime.store.archive import DamagedArchive
        from ce_runtime.store.record import read_record

        self.retried.update((t.trial_id, t) for t in trials if t.trial_id not in done
                            and attempts.earlier(self.run_dir, t))
        if self.retries <= 0:
            return []
        for t in trials:
            if t.trial_id not in done:
                continue
            try:
                rec = read_record(trial_dir_of(self.run_dir, t))
            except (DamagedArchive, OSError):
                continue
            if attempts.due(self.run_dir, t, rec, self.retries):
                self._errored[t.trial_id] = t
        again = self.next_pass(first=True)
        done.difference_update(t.trial_id for t in again)
        return again

    def next_pass(self, first: bool = False) -> list[Any]:
        """The trials to run again now, each set aside (said on stderr); [] when none."""
        from ce_runtime.execute import attempts

        again = list(self._errored.values())
        self._errored = {}
        if not again:
            return []
        numbers = []
        for t in again:
            attempts.set_aside(self.run_dir, t)
            self.retried[t.trial_id] = t
            self.final.pop(t.trial_id, None)  # its latest attempt is yet to end
            numbers.append(len(attempts.earlier(self.run_dir, t)) + 1)
        if not self.quiet:
            shown = ", ".join(f"{t.trial_id} (attempt {n})" for t, n in
                              list(zip(again, numbers, strict=True))[:5])
            more = f" and {len(again) - 5} more" if len(again) > 5 else ""
            when = "finished in an ERROR" if first else "ended in an ERROR"
            line = (f"ce run: {len(again)} trial(s) {when}; running them again "
                    f"(--retry-errors {self.retries}; earlier attempts kept in "
                    f"{attempts.ATTEMPTS}/): {shown}{more}")
            if first:  # a resume's: said after its start line (`say_held`)
                self._held = line
            else:
                click.echo(line, err=True)
        return again

    def say_held(self) -> None:
        """What a resume's first pass runs again, once the run's start line is out."""
        if self._held:
            click.echo(self._held, err=True)
            self._held = None

    def summary(self) -> str | None:
        """The line the run ends with when it retried: how the retried trials ended."""
        if not self.retried:
            return None
        counts: dict[str, int] = {}
        for trial_id in self.retried:
            status = self.final.get(trial_id, "unfinished (a resume runs it)")
            counts[status] = counts.get(status, 0) + 1
        ended = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        return (f"ce run: {len(self.retried)} trial(s) ran again after an ERROR, now {ended} "
                f"(earlier attempts: `ce runs RUN`, report.html)")
