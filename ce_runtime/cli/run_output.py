"""What `ce run` prints while and after it runs: progress on stderr (a live display on a
terminal, plain lines otherwise, nothing with -q), the results table on stdout."""

from __future__ import annotations

import os
import sys

import click

from ce_runtime.safe_text import one_line, terminal

HEARTBEAT_S = 60.0  # plain output: a `running` line after this long without a line


class Progress:
    """One line per running trial and counts by status: a live rich display on a terminal,
    plain lines otherwise (CI logs stay readable). Plain output also says which trials are
    running after HEARTBEAT_S without a line (CE_PROGRESS_EVERY=SECONDS to change it):
    an agent's trial takes minutes, and a CI log silent that long looks hung (some CI
    services end a job whose log is silent for 10 minutes)."""

    def __init__(self, total: int, done: int, quiet: bool = False):
        import threading
        import time

        self.total, self.count = total, done
        self.by_status: dict[str, int] = {}
        self.running: dict[str, float] = {}
        self.lost: list[dict] = []  # {trial_id, error} of trials whose directory vanished
        self._time = time.monotonic
        self.live = None
        self.quiet = quiet
        self._lock = threading.Lock()  # the heartbeat prints from its own thread
        self._last_line = self._time()
        self._stop = threading.Event()
        every = _heartbeat_s()
        if not quiet and every and not (sys.stderr.isatty() and "CE_PLAIN" not in os.environ):
            threading.Thread(target=self._heartbeat, args=(every,), daemon=True,
                             name="ce-progress").start()
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

    def _heartbeat(self, every: float) -> None:
        while not self._stop.wait(min(every, 5.0)):
            with self._lock:  # never after the line of a trial it names as running
                now = self._time()
                running = sorted(list(self.running.items()), key=lambda kv: kv[1])
                if not running or now - self._last_line < every:
                    continue
                shown = ", ".join(f"{t} {_clock(now - s)}" for t, s in running[:3])
                more = f" (+{len(running) - 3} more)" if len(running) > 3 else ""
                self._last_line = now
                self._print_locked(f"[{self.count}/{self.total}] running   {shown}{more}")

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
        with self._lock:
            self._last_line = self._time()
            self._print_locked(line)

    def _print_locked(self, line: str) -> None:
        if self.quiet:
            return
        try:
            # an agent's error ends the line: its text is neither rich markup (`[/x]`
            # raised MarkupError and ended the run) nor escape sequences
            line = terminal(line)
            if self.live is not None:
                from rich.text import Text  # not markup=False: the live table's is kept

                self.live.console.print(Text(line), highlight=False)
                self.live.refresh()
            else:
                click.echo(line, err=True)
        except BrokenPipeError:  # `ce run ... 2>&1 | head`: the run goes on, unheard
            self.quiet = True
            stderr_gone()

    def close(self) -> None:
        self._stop.set()
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None


def _heartbeat_s() -> float:
    """CE_PROGRESS_EVERY (seconds; 0 turns the lines off), else HEARTBEAT_S."""
    raw = os.environ.get("CE_PROGRESS_EVERY", "")
    try:
        value = float(raw) if raw.strip() else HEARTBEAT_S
    except ValueError:
        return HEARTBEAT_S
    return value if value > 0 and value != float("inf") else 0.0


def _clock(seconds: float) -> str:
    """`42s`, `3m05s`, `1h02m`: a running trial's age."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def stderr_gone() -> None:
    """stderr's reader left: what is still to be said goes nowhere, never as an error
    that would stop the run halfway (its trials, run.json and reports are still written;
    a stdout that left too ends ce at its last line, exit 1, as any command)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stderr.fileno())
    os.close(devnull)


def error_lines(records, most: int = 5) -> list[str]:
    """Why the ERROR trials are ones, a line per distinct reason with how many and the
    first trial: with -q (no progress lines) the run said `8 ERROR` and nothing of why
    unless one opened the report."""
    from ce_runtime.store.record import Status, as_records

    groups: dict[str, list[str]] = {}
    for r in as_records(records):
        reason = r.error_reason
        if reason is None and r.status == Status.ERROR:
            reason = "no reason recorded"
        if reason is not None:
            groups.setdefault(one_line(" ".join(reason.split())[:200]), []).append(r.trial_id)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    lines = [f"ERROR in {len(ids)} trial(s) ({ids[0]}{', ...' if len(ids) > 1 else ''}): "
             f"{reason}" for reason, ids in ranked[:most]]
    if len(ranked) > most:
        rest = sum(len(ids) for _, ids in ranked[most:])
        lines.append(f"ERROR in {rest} more trial(s), {len(ranked) - most} other reason(s): "
                     "see the report")
    return lines


FAILED_SHOWN = 10  # trials `failed_trial_lines` names, at most


def failed_trial_lines(records, report: str, most: int = FAILED_SHOWN) -> list[str]:
    """A line per trial that did not succeed (NOT_GRADED is no failure), in the run's
    order: its status, id, the run limit that stopped it (TIMEOUT ...) and its failed
    criteria (`c0 run_command`); the first `most`, then how many more. A CI log said
    `3 FAILURE` and which tasks' mean score fell, never which trials failed on what,
    unless one opened `report` (report.md, which has each)."""
    from ce_runtime.report.text import failed_criteria
    from ce_runtime.store.record import NOT_FAILED_STATUSES, Status, as_records

    failed = [r for r in as_records(records) if r.status not in NOT_FAILED_STATUSES]
    lines = []
    for r in failed[:most]:
        criteria = ", ".join(f"{c.id} {c.type}".rstrip() for c in failed_criteria(r))
        outcome = r.agent_outcome
        limit = (outcome.detail or outcome.reason) if outcome is not None and \
            r.status not in (Status.FAILURE, Status.ERROR) else None
        why = "; ".join([*([" ".join(limit.split())[:120]] if limit else []),
                         *([f"failed {criteria}"] if criteria else [])])
        lines.append(one_line(f"{r.status} {r.trial_id}" + (f": {why[:300]}" if why else "")))
    if len(failed) > most:
        lines.append(f"... and {len(failed) - most} more trial(s) that did not succeed: "
                     f"see {report}")
    return lines


def trial_lines(records, report: str, quiet: bool = False) -> list[str]:
    """The lines after the summary: the trials that did not succeed (not with -q:
    `failed_trial_lines`), then why the ERROR trials errored (`error_lines`)."""
    return ([] if quiet else failed_trial_lines(records, report)) + error_lines(records)


def summary_table(records) -> None:
    """Per task: trials, successes, mean score: the table a person reads at the end (the
    run's result: stdout, so `ce run ... > results.txt` keeps it). The mean score is
    run.json's: over the graded trials that have one (an ERROR trial has none; it
    counted as 0 here, so a task with one ERROR in two repeats showed half its score).
    A dataset's rows are one line, `VARIANT/TASK/*` (a line per row was 300 lines of
    `1 1 1.00` for 300 rows, what the progress lines had said; report.md has each row)."""
    from ce_runtime.report.text import fmt_score
    from ce_runtime.store.record import Status, as_records

    rows: dict[str, tuple[list[int], list[float]]] = {}
    for r in as_records(records):
        group = f"{r.suite_id}/*" if r.suite_id is not None and r.row_id is not None \
            else r.task_id
        counts, scores = rows.setdefault(f"{r.variant_id}/{group}", ([0, 0], []))
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


def passed_gate_lines(summary: dict) -> list[str]:
    """A line per suite gate that passed, its metrics beside their minimums: a failed one
    is said by its `not passed:` line, a passed one was said nowhere on stdout (the
    precision and recall a skill's trigger check is run for were only in report.md)."""
    from ce_runtime.report.text import fmt_metric

    lines = []
    for g in summary.get("suite_gates") or ():
        limits = g.get("thresholds") or {}
        if not limits or not g.get("passed"):
            continue
        shown = ", ".join(f"{m} {fmt_metric((g.get('metrics') or {}).get(m))} >= {t:g}"
                          for m, t in limits.items())
        lines.append(f"suite gate {g['variant']}/{g['suite_id']}/{g['criterion']} passed: "
                     f"{shown}")
    return lines
