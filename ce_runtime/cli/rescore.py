"""`ce rescore`: grade an archived run again, offline, with the same or new criteria."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

import click


@click.command("rescore")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("tasks", nargs=-1, metavar="[TASKS...]")
@click.option("-e", "--experiment", type=click.Path(dir_okay=False),
              help="Experiment the TASKS are resolved with (as in the original run).")
@click.option("-D", "overrides", multiple=True, metavar="PATH=VALUE",
              help="Override a setting of the TASKS, as for `ce compile` (repeatable).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Where the new results go (default RUN_DIR/rescored/<time>).")
@click.option("--judge-replies", type=click.Path(exists=True, dir_okay=False),
              help="Scripted judge verdicts (see `ce run --judge-replies`).")
def rescore_cmd(run_dir, tasks, experiment, overrides, out_dir, judge_replies):
    """Re-score every trial of RUN_DIR from its trace and workspace snapshot.

    Without TASKS each trial is graded with the plan it ran with (a check that grading
    is reproducible). With TASKS (files, directories, globs) the tasks are compiled
    again and each trial is graded with its new plan: change a criterion, fix a
    threshold, add a check, and see what the archived runs would have scored. No agent
    runs; commands in run_command criteria run again in a restored workspace.

    \b
    Examples:
      ce rescore runs/latest
      ce rescore runs/latest tasks/ -D success_criteria.0.pass_threshold=0.5
    """
    from ce_runtime.execute.sandbox.runner import local_runner
    from ce_runtime.grade.rescore import rescore_trial, trial_dirs

    plans = {}
    if tasks:
        from ce_lang.api import CompileOptions, compile_paths, render_human

        result = compile_paths(tasks, CompileOptions(experiment=experiment,
                                                     overrides=tuple(overrides)))
        if result.errors:
            click.echo(render_human(result.diagnostics, result.sources), err=True, nl=False)
            sys.exit(2)
        # repeats of a task share one plan: match on variant and task, not the repeat
        plans = {(t.variant_id, t.plan.task_id): t.plan for t in result.trials}
    dirs = trial_dirs(run_dir)
    if not dirs:
        raise click.BadParameter(f"{run_dir} holds no trial (no task.json)",
                                 param_hint="RUN_DIR")
    judge = None
    loopback = None
    if judge_replies:
        import yaml

        from ce_runtime.grade.judge import HttpJudge
        from ce_runtime.model_server import ModelServer

        with open(judge_replies, encoding="utf-8") as fh:
            loopback = ModelServer(yaml.safe_load(fh) or {}, judge=True).__enter__()
        judge = HttpJudge(loopback.url, "loopback")
    records, changed, missing = [], 0, 0
    try:
        for d in dirs:
            with open(os.path.join(d, "task.json"), encoding="utf-8") as fh:
                old = json.load(fh)
            trial_id = old["trial_id"]
            plan = plans.get((old["variant_id"], old["task_id"])) if tasks else None
            if tasks and plan is None:
                missing += 1
                continue
            rec = rescore_trial(d, run_dir, plan, judge, local_runner)
            records.append(rec)
            before = rec["previous"]
            moved = before["status"] != rec["status"] or _differs(before["weighted_score"],
                                                                    rec["weighted_score"])
            changed += moved
            mark = "*" if moved else " "
            click.echo(f"{mark} {trial_id:<40} {before['status']:>9} -> {rec['status']:<9} "
                       f"{_fmt(before['weighted_score'])} -> {_fmt(rec['weighted_score'])}",
                       err=True)
    finally:
        if loopback is not None:
            loopback.__exit__(None, None, None)
    out = out_dir or os.path.join(run_dir, "rescored",
                                  dt.datetime.now().strftime("%Y%m%d-%H%M%S"))
    code = _write(out, records, run_dir)
    note = f"; {missing} trial(s) have no task in TASKS" if missing else ""
    click.echo(f"\n{len(records)} trial(s) re-scored, {changed} changed{note}; "
               f"results: {out}", err=True)
    sys.exit(code)


def _differs(a, b) -> bool:
    if a is None or b is None:
        return a is not b
    return abs(a - b) > 1e-9


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, int | float) else "  -  "


def _write(out: str, records, run_dir: str) -> int:
    from ce_runtime import report
    from ce_runtime.store.atomic import write_bytes_atomic, write_json_atomic

    os.makedirs(out, exist_ok=True)
    for rec in records:
        tdir = os.path.join(out, rec["rescored_from"])
        os.makedirs(tdir, exist_ok=True)
        write_json_atomic(os.path.join(tdir, "task.json"), rec)
    gates = report.suite_metrics(records)
    summary = report.summary(records, gates, os.path.basename(os.path.abspath(out)),
                             {"rescored_from": os.path.abspath(run_dir)})
    summary["status"] = "complete"
    write_json_atomic(os.path.join(out, "run.json"), summary)
    if records:
        report.write_parquet(out, records)
    write_bytes_atomic(os.path.join(out, "report.md"),
                       report.render_markdown(summary, records, gates).encode())
    return int(summary.get("exit_code", 1))
