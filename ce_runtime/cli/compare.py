"""`ce compare`: what regressed and what improved between two runs of the same tasks."""

from __future__ import annotations

import os
import sys

import click

from ce_runtime.cli.options import NumberRange

FORMATS = ("md", "json", "html")
FAIL_ON = ("flips", "significant", "never")


@click.command("compare")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="md",
              show_default=True, help="md, json, or one self-contained HTML page.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write to this file instead of stdout.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="flips", show_default=True,
              help="What counts as a regression (exit 1); see above.")
@click.option("--alpha", type=NumberRange(0.0, 1.0, min_open=True, max_open=True),
              default=0.05, show_default=True,
              help="Significance level of the pass-rate drop.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the bootstrap intervals and Monte Carlo p-values (the same "
                   "seed, the same report).")
def compare_cmd(run_a, run_b, fmt, output, fail_on, alpha, seed):
    """Compare RUN_B with RUN_A (the baseline): what regressed and what improved.

    RUN_A and RUN_B are run directories (`runs/<id>`, `runs/latest`, a directory of
    runs meaning its latest, `<run>/rescored/<time>`). Trials are matched by variant, task id, dataset row and repeat;
    criterion results as `ce rescore` matches them: the same id, type and description;
    else the same type and description (it moved: a criterion added or removed in B's
    task shifts the ids; A's id is shown); else the same id and type (its description
    edited). The report lists the trials that
    flipped (passed in A and fail in B: regressions; the reverse: improvements) with
    the criteria that flipped with them, criteria that flipped in trials whose outcome
    did not, each run's ERROR trials, pass rate (Wilson 95% interval) and mean score
    (over the trials with a score; those without one are counted beside it), the paired
    differences over the tasks both runs graded (per task: pass rate and mean score
    over its repeats; mean Δ with a 95% paired bootstrap interval and a two-sided
    sign-flip permutation test's p-value), per-task changes (Δ pass rate with
    Newcombe's 95% interval), the tasks present in only one run (never compared), and
    each dataset suite gate (suite_thresholds, as each run's run.json records it) with
    its verdict in A and in B and its metrics side by side (accuracy and F1s, or pass
    rate and mean score, and those its thresholds name). It also shows what a trial
    cost (informs, never gates): per run, the mean and median turns, tool calls, input
    and output tokens, USD and wall time over the matched trials both graded, and B ÷ A
    over the trials that measured each in both. A value a trial did not measure (no
    agent ran, no tokens or cost reported, a model with no rate) is unknown ("—"),
    never 0, and moves no mean.

    \b
    Regression (exit 1), by --fail-on:
      flips        any matched trial that passed (SUCCESS) in A and does not in B,
                   a suite gate that passed in A and fails in B, or a significant
                   drop (the default)
      significant  a significant drop: the paired mean per-task pass-rate
                   difference B − A is negative and its sign-flip p < --alpha; or
                   a suite gate that passed in A and fails in B (the suite's own
                   minimum, which `ce run` exits 1 on: never one trial's noise).
                   Over n paired tasks p is at least 2 / 2^n: with 5 or fewer no
                   drop is significant at 0.05 (the report's "Significance" says so)
      never        never (report only)

    A task missing from B is listed, not counted as a regression; so is a suite gate
    only one run has (a suite added, removed or renamed). Two runs with no task
    in common (another experiment's variants, another suite) compare nothing, which
    fails the gate too (NOT COMPARED); and so does a B that is not a whole run
    (INCOMPLETE): its run.json status is not `complete` (interrupted, incomplete,
    failed, or running: still going, or killed), or it lacks a trial of a task both ran
    (a repeat not run, a trial lost before a re-score; named on stderr and in the
    report). What B did not run is no evidence either way. Neither is gated with
    --fail-on never (the report still says it). An A (the baseline) that did not
    finish is said on the verdict line and in the report's "Run status", not gated.

    \b
    Exit status: 0 no regression; 1 a regression, nothing compared, an incomplete
    B, a damaged or missing file of a run (run.json, trials.parquet: one line
    naming it, as for `ce report`), or the output could not be written; 2 usage
    error (a path that is not a run directory: one line naming it).

    \b
    Examples:
      ce compare runs/20261130-090000-123a runs/latest
      ce compare runs/main runs/latest --fail-on significant -f json -o compare.json
      ce compare runs/main runs/latest -f html -o compare.html
    """
    from ce_runtime.cli.pick import say_if_latest
    from ce_runtime.report.compare import compare_runs
    from ce_runtime.report.compare_load import NotARun
    from ce_runtime.report.compare_render import RENDERERS, verdict

    for run in (run_a, run_b):
        say_if_latest(run, "compare")
    try:
        comparison = compare_runs(run_a, run_b, seed=seed, alpha=alpha)
    except NotARun as exc:  # not a run directory: usage (2); a damaged file: 1
        click.echo(f"ce compare: {exc}", err=True)
        sys.exit(2 if exc.usage else 1)
    for side, ids in (("A", comparison.unmatched_a), ("B", comparison.unmatched_b)):
        if ids:  # a trial lost from one run (a deleted trial directory, re-scored
            other = "B" if side == "A" else "A"  # without it) is said, never dropped
            click.echo(f"ce compare: {len(ids)} trial(s) of {side} have no match in "
                       f"{other} (a task both ran; not compared): " + ", ".join(ids[:5])
                       + (f" and {len(ids) - 5} more" if len(ids) > 5 else ""), err=True)
    if fmt == "html":  # the runs' ids link to their report.html, from where it is written
        from ce_runtime.report.compare_render import render_html

        page_dir = os.path.dirname(os.path.abspath(output)) if output else os.getcwd()
        text = render_html(comparison, fail_on, page_dir)
    else:
        text = RENDERERS[fmt](comparison, fail_on)
    if output:
        from ce_runtime.cli.archive_guard import clash
        from ce_runtime.store.atomic import write_bytes_atomic

        why = clash(output)
        if why:
            click.echo(f"ce compare: -o {output} is {why}: give a path outside the run's "
                       "archive", err=True)
            sys.exit(2)

        try:
            os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
            write_bytes_atomic(output, text.encode())
        except OSError as exc:
            click.echo(f"ce compare: cannot write {output}: {exc.strerror or exc}", err=True)
            sys.exit(1)
    else:
        click.echo(text, nl=False)
    regressed, line = verdict(comparison, fail_on)
    click.echo(f"ce compare: {line}" + (f"; report: {output}" if output else ""), err=True)
    sys.exit(1 if regressed else 0)
