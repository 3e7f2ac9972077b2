"""`ce explain`: why each criterion scored as it did, or what a plan will compute."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile

import click

from ce_runtime.cli.options import experiment_option
from ce_runtime.safe_text import terminal


@click.command("explain", context_settings={"allow_extra_args": True})
@click.argument("task", type=click.Path())
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False),
              help="The trial's trace (ce trace format; see `ce trace import`).")
@click.option("--workspace", type=click.Path(exists=True, file_okay=False),
              help="The trial's final workspace directory.")
@click.option("--criterion", "only", metavar="ID", multiple=True,
              help="Only this criterion (c0, c1 ..., its index, or its type); repeat it "
                   "for several.")
@click.option("--trial", "trial_id", metavar="ID",
              help="Which trial: of the resolved TASK (default: the first), or of the run "
                   "TASK names; its id or a unique prefix (default/hello).")
@experiment_option(help="Resolve TASK under this experiment (pick the variant with --trial).")
@click.option("-D", "overrides", multiple=True, metavar="PATH=VALUE",
              help="Override a setting, as for `ce compile` (repeatable).")
@click.option("--allow-path", "allow_paths", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="Let task paths resolve into DIR, outside the suite root (repeatable; "
                   "see `ce compile --explain CE0216`).")
@click.option("-f", "--format", "fmt", type=click.Choice(("text", "json")), default=None,
              help="text (the default) or json (machine-readable: the same facts, the "
                   "trial's status and each criterion's evidence and tree; "
                   "docs/explain-rescore.md).")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json.")
@click.pass_context
def explain_cmd(ctx, task, trace_path, workspace, only, trial_id, experiment, overrides,
                allow_paths, fmt, as_json):
    """Explain TASK's criteria: before a run, or for a finished trial.

    \b
    Without --workspace: what each criterion will compute, its effects, whether it can
    decide early (and in which direction), and whether it can be re-scored offline.
    With --workspace (and --trace for trace criteria): the evaluation tree of every
    criterion with the values and evidence behind its score, then the arithmetic from
    the criterion scores to the weighted score and the verdict.

    TASK may also be a trial directory of a run (runs/latest/VARIANT/TASK/NN): its plan,
    trace and archived workspace are used, no agent runs. Or a run directory, or a
    directory of runs (its latest run is used, and said), with --trial naming the trial
    by a unique prefix of its id.

    \b
    Examples:
      ce explain runs/latest/default/hello_world/00
      ce explain runs/ --trial default/hello       the latest run's trial
      ce explain runs/latest/default/hello_world/00 --criterion c1 -f json
      ce explain runs/latest/default/hello_world/00 --criterion c1 --criterion c3
      ce explain tasks/hello_world.yaml
      ce explain tasks/hello_world.yaml --workspace ws/ --trace run.trace
      ce explain tasks/hello_world.yaml --workspace ws/ --criterion c1
    """
    as_json = as_json or fmt == "json"
    if ctx.args:
        raise click.UsageError(_extra_arguments(task, ctx.args, trial_id, only))
    if not os.path.exists(task):
        from ce_runtime.cli.pick import missing_path

        raise missing_path(task, "TASK")
    only = tuple(only) or None
    if os.path.isdir(task):
        from ce_runtime.cli.pick import trial_of_run

        given = [name for name, value in (("-e", experiment), ("-D", overrides),
                                          ("--allow-path", allow_paths),
                                          ("--workspace", workspace), ("--trace", trace_path))
                 if value]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise click.UsageError(
                f"{', '.join(given)} {verb} to a task file; a run's trial is explained with "
                "its own archived plan, workspace and trace (to grade it with changes: ce "
                "rescore RUN TASKS -D ...)")

        _explain_trial_dir(trial_of_run(task, trial_id, "explain", "TASK"), only, as_json)
        return
    from ce_lang.api import CompileOptions, compile_paths, render_human

    result = compile_paths([task], CompileOptions(experiment=experiment,
                                                  overrides=tuple(overrides),
                                                  allow_paths=tuple(allow_paths)))
    if result.errors:
        click.echo(render_human(result.diagnostics, result.sources), err=True, nl=False)
        sys.exit(2 if result.usage_error else 1)
    from ce_runtime.cli.pick import by_prefix, criterion

    trial = result.trials[0]
    if trial_id:
        wanted = by_prefix(trial_id, [t.trial_id for t in result.trials], "trial", "--trial")
        trial = next(t for t in result.trials if t.trial_id == wanted)
    for name in only or ():
        criterion(name, [(c.id, c.type) for c in trial.plan.criteria])
    if workspace is None:
        if trace_path:
            raise click.UsageError("--trace needs --workspace (the trial's final files)")
        from ce_runtime.grade.explain_plan import explain_plan, explain_plan_json

        if as_json:
            click.echo(json.dumps(explain_plan_json(trial.plan, trial.trial_id, only),
                                  indent=2, default=str))
        else:
            click.echo(explain_plan(trial.plan, trial.trial_id, only), nl=False)
        return
    from ce_runtime.execute.sandbox.runner import local_runner
    from ce_runtime.grade.explain import explain_json, explain_trial
    from ce_runtime.grade.grading import grade_files, reference_paths
    from ce_runtime.grade.host import InfrastructureError

    if trace_path:  # a transcript given as the trace would grade as an empty one
        from ce_runtime.cli.trace import no_event_read
        from ce_runtime.trace.events import read_trace

        unreadable = no_event_read(trace_path, read_trace(trace_path))
        if unreadable:
            raise click.BadParameter(unreadable, param_hint="--trace")
    try:
        with contextlib.ExitStack() as stack:
            graded_ws = os.path.abspath(workspace)
            if any(step.effect == "exec" for step in trial.plan.steps):
                # a criterion's command may write (`echo new > x.txt`, a build): it runs
                # in a copy, never in the user's directory, as a trial's archive is
                tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="ce-explain-"))
                graded_ws = os.path.join(tmp, "ws")
                shutil.copytree(workspace, graded_ws, symlinks=True)
            runner = stack.enter_context(local_runner(
                graded_ws, trial.task_dir, reference_paths(trial.plan, trial.task_dir)))
            grader, graded, host, read = grade_files(trial.plan, trial.task_dir, graded_ws,
                                                     trace_path, runner=runner)
    except InfrastructureError as exc:
        click.echo(f"ce: cannot grade: {exc} (the trial would be ERROR)", err=True)
        sys.exit(1)
    if read is not None and (read.truncated or read.corrupt_at is not None):
        where = f"truncated at byte {read.bytes_read}" if read.truncated \
            else f"corrupt at byte {read.corrupt_at}"
        click.echo(f"warning: {trace_path}: the trace is {where}; graded on its first "
                   f"{len(read.events)} events, {read.ignored_bytes} byte(s) ignored",
                   err=True)
    if as_json:
        click.echo(json.dumps(explain_json(trial.plan, graded, grader.instances, host, only),
                              indent=2))
    else:
        _say(explain_trial(trial.plan, grader.instances, graded, host, only), nl=False)
    sys.exit(0 if graded.success else 1)


def _extra_arguments(task: str, extras: list[str], trial_id: str | None,
                     only: tuple[str, ...]) -> str:
    """What to type instead of `ce explain RUN TRIAL CRITERION`: TASK is the one argument,
    the trial and the criterion are options. Each extra word goes, in order, to the
    option it reads as: a criterion's id or index (c1, 1) to --criterion, else to --trial
    while that is free (a trial directory or a task file's single trial has none), then
    --criterion (a criterion's type). Click said only `Got unexpected extra arguments`."""
    import re
    import shlex

    has_trial = bool(trial_id) or os.path.isfile(os.path.join(task, "task.json"))
    given = [task]
    for word in extras:
        if os.path.exists(word) and not os.path.exists(os.path.join(task, word)):
            return (f"ce explain takes one TASK (a task file, a trial directory, a run or a "
                    f"directory of runs), got {len(extras) + 1}: {shlex.join([task, *extras])};"
                    " explain one at a time, and name the trial and the criterion with "
                    "--trial and --criterion")
        if re.fullmatch(r"c?\d+", word) or has_trial:
            given += ["--criterion", word]
        else:
            given += ["--trial", word]
            has_trial = True
    for name in only:
        given += ["--criterion", name]
    if trial_id:
        given += ["--trial", trial_id]
    return (f"unexpected argument{'s' if len(extras) > 1 else ''} {shlex.join(extras)}: "
            "TASK is the only argument; the trial and the criterion are options (a trial "
            f"by its id or a unique prefix, a criterion by id, index or type): "
            f"ce explain {shlex.join(given)}")


def _explain_trial_dir(trial_dir: str, only: tuple[str, ...] | None, as_json: bool) -> None:
    """Re-grade an archived trial the way it was graded: its plan, the standard criteria
    the run kept, its own sandbox environment, the judge verdicts the run recorded (no
    judge is asked); say so where the re-grade differs from the record."""
    import tempfile

    import msgspec

    from ce_runtime.cli.rescore import _uv_cache
    from ce_runtime.execute.sandbox.runner import local_runner
    from ce_runtime.grade.explain import explain_json, explain_trial
    from ce_runtime.grade.grading import grade_files, reference_paths
    from ce_runtime.grade.host import InfrastructureError
    from ce_runtime.grade.interpreter import criterion_records
    from ce_runtime.grade.rescore import (
        archived_plan,
        criterion_changes,
        kept_status,
        never_graded,
    )
    from ce_runtime.store.archive import (
        DamagedArchive,
        find_run_root,
        load_definitions,
        verified_trial,
    )
    from ce_runtime.store.record import Status, checked_record
    from ce_runtime.store.task_files import task_dir_for
    from ce_runtime.store.verdicts import VerdictStore
    from ce_runtime.store.workspace_snapshot import restore_workspace
    from ce_runtime.trace.events import TraceDamaged

    task_json = os.path.join(trial_dir, "task.json")
    root = find_run_root(trial_dir)
    if not os.path.isfile(task_json) or root is None:
        raise click.BadParameter(f"{trial_dir} is not a trial directory of a run (no task.json "
                                 "under a run with plans/ and objects/)", param_hint="TASK")
    verdicts = VerdictStore(os.path.join(root, "judges"), "offline",
                            unanswered=_unanswered(trial_dir))
    with tempfile.TemporaryDirectory(prefix="ce-explain-") as ws:
        try:  # every archived part is checked: a damaged one is said, not believed
            recorded, manifest, trace = verified_trial(trial_dir)
            task = checked_record(recorded, trial_dir)
            plan = archived_plan(root, task.plan_hash)
            stdlib = load_definitions(root, plan.stdlib_digest) if plan.stdlib_digest \
                else None
            from ce_runtime.cli.pick import criterion

            for name in only or ():
                criterion(name, [(c.id, c.type) for c in plan.criteria])
            restore_workspace(manifest, os.path.join(root, "objects"), ws,
                              outward_links=True)
            task_dir, task_notes = task_dir_for(root, task.plan_hash, task.task_dir or "")
            with local_runner(ws, task_dir, reference_paths(plan, task_dir), plan=plan,
                              uv_cache=_uv_cache()) as runner:
                grader, graded, host, _ = grade_files(
                    plan, task_dir, ws, trace, stopped_early=task.stopped_early,
                    runner=runner, stdlib=stdlib, verdicts=verdicts, strict_trace=True)
        except TraceDamaged as exc:
            click.echo(f"ce: damaged archive: {exc.path}: {exc.why} at byte {exc.offset}",
                       err=True)
            sys.exit(1)
        except DamagedArchive as exc:
            click.echo(f"ce: {exc}", err=True)
            sys.exit(1)
        except InfrastructureError as exc:  # e.g. its environment cannot be rebuilt here
            _not_regraded(task, plan, str(exc), as_json)
        # a run limit or an ERROR before grading stays the trial's status, as in rescore;
        # so does an ERROR the agent ended in (its criteria graded what it left)
        kept = kept_status(task.status, task.criteria)
        not_graded = never_graded(task.status, task.criteria)
        error = task.error_reason
        agent_failed = kept == Status.ERROR and not not_graded
        differences = [] if not_graded else criterion_changes(
            [msgspec.to_builtins(c) for c in task.criteria], criterion_records(plan, graded))
        if as_json:
            out = explain_json(plan, graded, grader.instances, host, only,
                               status=kept, error=error)
            out["recorded"] = {"status": str(task.status),
                               "weighted_score": task.weighted_score,
                               "differences": differences, "status_kept": kept is not None}
            click.echo(json.dumps(out, indent=2))
        else:
            _say(f"trial {task.trial_id} (recorded status "
                       f"{task.status or '?'}, weighted score "
                       f"{_score(task.weighted_score)}); re-graded from the archive")
            if stdlib is None:
                _say("note: the run kept no standard criteria: re-graded with today's")
            for note in task_notes:
                _say(f"note: {note}")
            if differences:
                _say("NOTE: this re-grade differs from the recorded grade (recorded "
                           f"{task.status} {_score(task.weighted_score)}, now "
                           f"{kept or (Status.SUCCESS if graded.success else Status.FAILURE)} "
                           f"{_score(graded.weighted_score)}):")
                for line in differences:
                    _say(f"  {line}")
                for line in _commands_that_differ(trial_dir, host.evidence):
                    _say(f"  {line}")
            if not_graded:
                _say(f"NOTE: the trial never reached grading ({error or kept}):"
                           f" it stays {kept}; the criteria below grade its archived "
                           "workspace for information only")
            elif agent_failed:
                said = error or "the trial ended in an error (no reason was recorded)"
                _say(f"NOTE: {said}: the trial stays {kept}, whatever the criteria "
                           "below score")
            elif kept is not None:
                _say(f"NOTE: a run limit stopped the agent: the trial stays {kept}, "
                           "whatever the criteria below score")
            _say(explain_trial(plan, grader.instances, graded, host, only,
                                     None if kept is None else str(kept),
                                     None if not agent_failed else
                                     "the model API was failing" if task.model_outage
                                     else "the agent ended in an error"), nl=False)
    sys.exit(0 if graded.success and kept is None else 1)


def _commands_that_differ(trial_dir: str, now: dict) -> list[str]:
    """A command a criterion ran again whose result is not the one the run recorded
    (evidence.json), both results: why a re-grade differs from the record is usually
    there (a flaky test, a clock, the network), and the evidence below shows only the
    new one."""
    from ce_runtime.grade.explain_calls import output_gist

    try:
        with open(os.path.join(trial_dir, "evidence.json"), "rb") as fh:
            then = json.loads(fh.read()).get("criteria")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(then, dict):
        return []

    def commands(entries) -> list[dict]:
        return [e for e in entries or () if isinstance(e, dict) and e.get("kind") == "command"]

    def said(e: dict) -> str:
        out, err = output_gist(e.get("stdout")), output_gist(e.get("stderr"))
        return (f"exit {e.get('exit_code')}" + (", timed out" if e.get("timed_out") else "")
                + (f"; stdout: {out!r}" if out else "") + (f"; stderr: {err!r}" if err else ""))

    keys = ("exit_code", "stdout", "stderr", "timed_out")
    lines = []
    for cid, entries in now.items():
        recorded = commands(then.get(cid))
        for i, e in enumerate(commands(entries)):
            was = recorded[i] if i < len(recorded) else None
            if was is None or was.get("command") != e.get("command") or \
                    all(was.get(k) == e.get(k) for k in keys):
                continue
            lines.append(f"{cid} $ {e.get('command')}: the run's {said(was)}; "
                         f"now {said(e)}")
    return lines


def _unanswered(trial_dir: str) -> dict[str, dict]:
    """The judges the trial's run asked whose session ended without a verdict (a
    timeout, a crash), by request, as its evidence.json keeps them: never recorded in
    judges/, so the re-grade (which asks no judge) says the run's outcome for them."""
    try:
        with open(os.path.join(trial_dir, "evidence.json"), "rb") as fh:
            criteria = json.loads(fh.read()).get("criteria")
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for entries in criteria.values() if isinstance(criteria, dict) else ():
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, dict) and e.get("kind") == "judge" and e.get("error") \
                    and not e.get("recorded") and isinstance(e.get("request"), str):
                out[e["request"]] = {k: v for k, v in e.items() if k != "kind"}
    return out


def _say(text: str, **kwargs) -> None:
    """A line of the human explanation: file names, messages and outputs in it are the
    agent's, and no escape sequence of theirs reaches the terminal."""
    click.echo(terminal(text), **kwargs)


def _not_regraded(task, plan, why: str, as_json: bool) -> None:
    """An archived trial whose criteria cannot be graded again here (its sandbox or
    environment cannot be rebuilt): what the run recorded, the reason of an ERROR, and
    why there is no re-grade; exit 1."""
    error = task.error_reason
    if as_json:
        click.echo(json.dumps({
            "task_id": plan.task_id, "weighted_score": None, "success": False,
            "stopped_early": bool(task.stopped_early), "status": str(task.status),
            "error": error, "criteria": [], "regrade_error": why,
            "recorded": {"status": str(task.status), "weighted_score": task.weighted_score,
                         "differences": [], "status_kept": True}}, indent=2))
    else:
        _say(f"trial {task.trial_id} (recorded status {task.status or '?'}, weighted "
                   f"score {_score(task.weighted_score)}); not re-graded")
        if error:
            _say(f"error: {error}")
    click.echo(f"ce: cannot grade the archived trial again here: {why}", err=True)
    sys.exit(1)


def _score(x) -> str:
    return f"{x:.4g}" if isinstance(x, int | float) else "-"
