"""What `ce run` prints while and after it runs: progress on stderr (a live display on a
terminal, plain lines otherwise, nothing with -q), the results table on stdout."""

from __future__ import annotations

import os
import sys

import click


class Progress:
    """One line per running trial and counts by status: a live rich display on a terminal,
    plain lines otherwise (CI logs stay readable)."""

    def __init__(self, total: int, done: int, quiet: bool = False):
        import time

        self.total, self.count = total, done
        self.by_status: dict[str, int] = {}
        self.running: dict[str, float] = {}
        self.lost: list[dict] = []  # {trial_id, error} of trials whose directory vanished
        self._time = time.monotonic
        self.live = None
        self.quiet = quiet
        if not quiet and sys.stderr.isatty() and "CE_PLAIN" not in os.environ:
            from rich.console import Console
            from rich.live import Live

            # rendered afresh at each refresh (a table made once kept its running
            # trials' clocks at 0.0s until the next trial ended)
            self.live = Live(console=Console(stderr=True), get_renderable=self._render,
                             refresh_per_second=4, transient=True)
            self.live.__enter__()

    def _render(self):
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        now = self._time()
        for trial_id, started in list(self.running.items())[:12]:
            table.add_row("[cyan]running[/]", trial_id, f"{now - started:5.1f}s")
        if len(self.running) > 12:
            table.add_row("", f"... and {len(self.running) - 12} more", "")
        counts = "  ".join(f"{s} {n}" for s, n in sorted(self.by_status.items()))
        table.add_row("[bold]done[/]", f"{self.count}/{self.total}", counts)
        return table

    def start(self, trial) -> None:
        self.running[trial.trial_id] = self._time()
        if self.live is not None:
            self.live.refresh()

    def done(self, trial, record) -> None:
        from ce_runtime.store.record import Status, as_record

        rec = as_record(record)
        self.running.pop(trial.trial_id, None)
        self.count += 1
        self.by_status[rec.status] = self.by_status.get(rec.status, 0) + 1
        if rec.status == Status.LOST:
            self.lost.append({"trial_id": rec.trial_id, "error": rec.error})
            self._print(f"[{self.count}/{self.total}] LOST      {trial.trial_id}  "
                        f"- {rec.error}")
            return
        score = rec.weighted_score
        shown = f"score {score:.2f}" if score is not None else ""
        early = "  (stopped early)" if rec.stopped_early else ""
        reason = rec.error_reason  # an agent's crash too (its record has no `error`)
        why = f"  - {reason[:120]}" if reason else ""
        self._print(f"[{self.count}/{self.total}] {rec.status:<9} {trial.trial_id}  "
                    f"{rec.duration_s or 0.0:.1f}s {shown}{early}{why}")

    def _print(self, line: str) -> None:
        if self.quiet:
            return
        try:
            if self.live is not None:
                self.live.console.print(line, highlight=False)
                self.live.refresh()
            else:
                click.echo(line, err=True)
        except BrokenPipeError:  # `ce run ... 2>&1 | head`: the run goes on, unheard
            self.quiet = True
            stderr_gone()

    def close(self) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None


def stderr_gone() -> None:
    """stderr's reader left: what is still to be said goes nowhere, never as an error
    that would stop the run halfway (its trials, run.json and reports are still written;
    a stdout that left too ends ce at its last line, exit 1, as any command)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stderr.fileno())
    os.close(devnull)


def summary_table(records) -> None:
    """Per task: trials, successes, mean score: the table a person reads at the end (the
    run's result: stdout, so `ce run ... > results.txt` keeps it). The mean score is
    run.json's: over the graded trials that have one (an ERROR trial has none; it
    counted as 0 here, so a task with one ERROR in two repeats showed half its score)."""
    from ce_runtime.report.text import fmt_score
    from ce_runtime.store.record import Status, as_records

    rows: dict[str, tuple[list[int], list[float]]] = {}
    for r in as_records(records):
        counts, scores = rows.setdefault(f"{r.variant_id}/{r.task_id}", ([0, 0], []))
        counts[0] += 1
        counts[1] += r.status == Status.SUCCESS
        if r.status != Status.NOT_GRADED and r.weighted_score is not None:
            scores.append(r.weighted_score)
    if not rows:
        return
    width = max(len(k) for k in rows)
    click.echo(f"{'trial group':<{width}}  trials  success  mean score")
    for key in sorted(rows):
        (n, ok), scores = rows[key]
        mean = fmt_score(sum(scores) / len(scores) if scores else None)
        click.echo(f"{key:<{width}}  {n:>6}  {ok:>7}  {mean:>10}")
