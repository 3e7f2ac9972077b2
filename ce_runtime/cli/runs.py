"""`ce runs`: the runs under a directory, newest first."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from typing import Any

import click

from ce_runtime.store.runs_root import (
    KILLED,
    is_run,
    read_run_json,
    run_id_of,
    run_status,
    runs_in,
    started_at,
)


@click.command("runs")
@click.argument("directory", default="runs", metavar="[DIR]",
                type=click.Path(file_okay=False))
@click.option("-f", "--format", "fmt", type=click.Choice(("text", "json")), default="text",
              show_default=True, help="text: a table; json: a list of objects.")
def runs_cmd(directory, fmt):
    """List the runs under DIR (default ./runs), newest first; DIR a run itself: that run.

    A run is a subdirectory with a run.json (what `ce run` writes); `latest` and other
    links are skipped. For each: its directory (and its run id, when it was copied or
    moved under another name), the time it started (run.json's created_at,
    else the time in its id, else the file's time; UTC in JSON, local in the table),
    tasks (distinct variant/task/row, from trials.parquet), trials, pass rate
    (passed/graded), and status: complete, interrupted, incomplete (trials lost),
    failed, running (its `ce run` still holds the run's lock) or killed (run.json says
    running but no process holds the lock: its `ce run` was killed or the machine went
    down; `ce run --resume RUN` continues it), and the verdict: `pass` when `ce run`
    exited 0 for it (every trial, gate and --min-pass-rate passed), else `fail (CODE)`.
    A run whose ERROR trials ran again (`ce run --retry-errors N`) gets a line saying how
    many, and where their earlier attempts are kept.

    Exit status: 0 (also when DIR holds no run); 2 when DIR does not exist or is not
    a directory.

    \b
    Examples:
      ce runs                      the runs under ./runs
      ce runs ci/runs -f json      for scripts: [{"run_id": ..., "pass_rate": ...}, ...]
    """
    if not os.path.isdir(directory):
        what = "not a directory" if os.path.exists(directory) else "no such directory"
        click.echo(f"ce runs: {directory}: {what}", err=True)
        sys.exit(2)
    named = is_run(directory)
    runs = [directory] if named else runs_in(directory)
    rows = [r for r in (_describe(p, named) for p in runs) if r is not None]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"no run under {directory}", err=True)
        return
    head = ("RUN", "STARTED", "TASKS", "TRIALS", "PASS RATE", "STATUS", "VERDICT")
    table = [head] + [(_name(r), _short_time(r["time"]), _n(r["tasks"]), _n(r["trials"]),
                       _rate(r), r["status"] or "?", _verdict(r["exit_code"], r["status"]))
                      for r in rows]
    killed = [r["path"] for r in rows if r["status"] == KILLED]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        click.echo("  ".join(c.ljust(w) if i in (0, 1, 5, 6) else c.rjust(w)
                             for i, (c, w) in enumerate(zip(row, widths, strict=True)))
                   .rstrip())
    for r in rows:
        if r.get("retried_trials"):
            click.echo(f"{r['path']}: {r['retried_trials']} trial(s) ran again after an ERROR "
                       f"(--retry-errors); {r['earlier_attempts']} earlier attempt(s) kept in "
                       f"{os.path.join(r['path'], 'attempts')}")
    for path in killed:
        click.echo(f"{path}: killed before it ended; `ce run --resume {path}` runs the "
                   "trials it lacks", err=True)


def _name(row: dict[str, Any]) -> str:
    """The run's directory (what the other commands take), and its run id when the run
    was copied or moved under another name: by id alone, two copies of one run were
    two lines alike, neither saying which directory it is."""
    name = os.path.basename(os.path.abspath(row["path"]))
    return name if name == row["run_id"] else f"{name} (run {row['run_id']})"


def _describe(path: str, named: bool = False) -> dict[str, Any] | None:
    """A run's row, or None when `path` is no run (no run.json, a file, a link found in
    a directory of runs; a link named on the command line, `runs/latest`, is its run)."""
    if (os.path.islink(path) and not named) or not os.path.isdir(path) or not is_run(path):
        return None
    doc = read_run_json(path)
    row = {"run_id": run_id_of(path, doc), "path": path, "time": started_at(path, doc)}
    if doc is None:
        return {**row, "tasks": None, "trials": None, "graded": None, "passed": None,
                "pass_rate": None, "status": "unreadable run.json", "exit_code": None}
    return {
        **row, "tasks": _tasks(path), "trials": _int(doc.get("trials")),
        "graded": _int(doc.get("graded")), "passed": _int(doc.get("passed")),
        "pass_rate": doc.get("pass_rate") if isinstance(doc.get("pass_rate"), int | float)
        else None,
        "status": run_status(path, doc.get("status")),
        "exit_code": _int(doc.get("exit_code")),
        **_attempts(doc),
    }


def _attempts(doc: dict[str, Any]) -> dict[str, int]:
    """How many trials of the run ran again after an ERROR, and their earlier attempts:
    run.json's `retried` (ce_runtime/execute/attempts.retried: the attempts of each
    trial's own plan), 0 for a run that has none or is still running."""
    again = doc.get("retried") if isinstance(doc.get("retried"), dict) else {}
    return {"retried_trials": _int(again.get("trials")) or 0,
            "earlier_attempts": _int(again.get("earlier_attempts")) or 0}


def _tasks(path: str) -> int | None:
    trials = os.path.join(path, "trials.parquet")
    if not os.path.isfile(trials):
        return None
    import polars as pl

    try:
        cols = ["variant_id", "task_id", "row_id"]
        return pl.scan_parquet(trials).select(cols).unique().select(pl.len()).collect().item()
    except Exception:  # a damaged parquet file: the listing still shows the run
        return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _short_time(t: str | None) -> str:
    if not t:
        return "?"
    try:
        return dt.datetime.fromisoformat(t).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return t


def _n(v: int | None) -> str:
    return "?" if v is None else str(v)


def _verdict(exit_code: int | None, status: str | None) -> str:
    """What `ce run` exited with for it (its gates, --min-pass-rate, an interruption):
    what a CI job saw; `fail` for a run a bug or a write failure stopped before its
    summary; `-` before the run ended."""
    if exit_code is None:
        return "fail" if status == "failed" else "-"
    return "pass" if exit_code == 0 else f"fail ({exit_code})"


def _rate(r: dict[str, Any]) -> str:
    if r["pass_rate"] is None:
        return "—"
    return f"{100 * r['pass_rate']:.1f}% ({r['passed']}/{r['graded']})"
