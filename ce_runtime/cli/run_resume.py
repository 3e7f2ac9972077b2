"""`ce run --resume`: what a resume runs with, and what it says of the run's trials.

The rule (also in `ce run --help`): what makes the run, what its trials measured, is
the run's and is kept: the tasks (PATHS), -e, -D, --agent, --model, --driver, --repeats,
--sample, the tags, and --scripted-model (where the agents' model answers from: scripted
replies and a real model's do not mix in one run's results). Giving another with
--resume is a usage error that names it. How the trials run, are graded and reported is
the run's unless given again: -j, --executor, --ray-address, --judge-replies (grading,
which `ce rescore --refresh-judges` redoes for every trial), --min-pass-rate,
--retry-errors, --junit-xml, --sarif; --allow-path adds to the run's. What is given wins,
and run.json records it from then on.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs
import click

from ce_runtime.cli.run_args import RunArgs

TAKEN = ("-j", "--executor", "--ray-address", "--judge-replies", "--junit-xml", "--sarif",
         "--min-pass-rate", "--retry-errors", "--allow-path")


def resumed(given: RunArgs, recorded: dict[str, Any]) -> tuple[RunArgs, str]:
    """The options a resume runs with (`recorded`: run.json's `args`), and where its -j
    came from (for the start line). A usage error for anything that would change the
    run."""
    _refuse_changes(given, recorded)
    executor, ray_address = given.executor, given.ray_address
    if executor is None or executor == recorded.get("executor"):
        # the run's executor, and its cluster, unless told otherwise: `--executor ray`
        # again does not mean "a new local Ray" for a run made on a cluster
        executor = recorded.get("executor")
        ray_address = ray_address or recorded.get("ray_address")
    jobs, jobs_from = given.jobs, ""
    if jobs is None:  # the run's concurrency unless told otherwise
        jobs, jobs_from = recorded_jobs(recorded.get("jobs"))
    judge_replies = given.judge_replies or recorded.get("judge_replies")  # grade as it began
    if judge_replies and not os.path.isfile(judge_replies):
        raise click.UsageError(f"--judge-replies file {judge_replies!r} not found")
    return attrs.evolve(
        given, paths=tuple(recorded["paths"]), experiment=recorded["experiment"],
        overrides=tuple(recorded["overrides"]), agent_type=recorded["agent_type"],
        model=recorded["model"], driver=recorded["driver"], repeats=recorded["repeats"],
        sample=recorded["sample"], tags=tuple(recorded["tags"]),
        exclude_tags=tuple(recorded["exclude_tags"]),
        allow_paths=(*recorded.get("allow_paths", ()), *given.allow_paths),
        judge_replies=judge_replies, scripted_model=bool(recorded.get("scripted_model")),
        executor=executor, ray_address=ray_address, jobs=jobs,
        min_pass_rate=given.min_pass_rate if given.min_pass_rate is not None
        else recorded.get("min_pass_rate"),
        retry_errors=given.retry_errors if given.retry_errors is not None
        else recorded_retries(recorded.get("retry_errors")),
        # the run's reports written again where it was asked for them, unless told
        junit_xml=given.junit_xml or recorded_path(recorded.get("junit_xml")),
        sarif=given.sarif or recorded_path(recorded.get("sarif"))), jobs_from


def _refuse_changes(given: RunArgs, recorded: dict[str, Any]) -> None:
    """What a resume would silently drop or mix in: a usage error naming each, not a run
    that is not what the user asked for."""
    names = [name for name, value in (
        ("PATHS", given.paths), ("-e", given.experiment), ("-D", given.overrides),
        ("--agent", given.agent_type), ("--model", given.model), ("--driver", given.driver),
        ("--repeats", given.repeats), ("--sample", given.sample), ("--tags", given.tags),
        ("--exclude-tags", given.exclude_tags)) if value]
    if names:
        raise click.UsageError(
            f"--resume finishes the run with the tasks and settings it started with; "
            f"{', '.join(names)} would change them (start a new run for that). A resume "
            f"takes {', '.join(TAKEN)}")
    scripted = bool(recorded.get("scripted_model"))
    if given.scripted_model is not None and given.scripted_model != scripted:
        flag = "--scripted-model" if given.scripted_model else "--no-scripted-model"
        mixed = "scripted" if given.scripted_model else "real model"
        began = "with" if scripted else "without"
        raise click.UsageError(
            f"the run was started {began} --scripted-model; {flag} would mix {mixed} "
            "replies into it: its finished trials are not run again. A resume finishes a "
            f"run as it began; start a new run {'without' if scripted else 'with'} "
            "--scripted-model for that")


def recorded_jobs(recorded) -> tuple[int, str]:
    """A resume's -j when none is given: the one run.json recorded (a run started before
    ce recorded it: 1, the default), with the start line's note on where it came from."""
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 1:
        return recorded, " (the run's)"
    return 1, " (the default: run.json records no -j)"


def recorded_retries(recorded) -> int | None:
    """The run's --retry-errors (None: not given, or a run from before it)."""
    ok = isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 0
    return recorded if ok else None


def recorded_path(recorded) -> str | None:
    return recorded if isinstance(recorded, str) and recorded else None


def say_replanned(run_dir: str, trials: list, done: set[str]) -> None:
    """A resume runs again, and replaces, the finished trials whose plan is no longer
    the one they ran with (the task, the experiment or ce's criteria changed since):
    said, with the trials, never done silently."""
    from ce_runtime.execute.trial import trial_dir_of

    replanned = []
    for t in trials:
        if t.trial_id in done:
            continue
        try:
            with open(os.path.join(trial_dir_of(run_dir, t), "task.json"),
                      encoding="utf-8") as fh:
                recorded = json.load(fh).get("plan_hash")
        except (OSError, ValueError, AttributeError):
            continue  # not run yet, or damaged (said above)
        if recorded and recorded != t.plan_hash:
            replanned.append(t.trial_id)
    if replanned:
        click.echo(f"ce run: {len(replanned)} finished trial(s) ran with another plan (the "
                   f"task, the experiment or ce's criteria changed since): "
                   f"{_shown(replanned)}; they run again and their results are replaced",
                   err=True)


def say_unplanned(run_dir: str, trials: list, planned_before: Any = None) -> None:
    """The finished trials of the run that its tasks no longer have (a task file removed
    or renamed, a task now skipped, a variant or dataset row gone): kept on disk, but
    the run's reports count only its planned trials; said, never dropped silently. And
    the trials it planned when it began (run.json's `trials_planned`: `planned_before`)
    that never ran and are gone from its tasks, by count."""
    from ce_lang.api import RUN_LEVEL_DIRS
    from ce_runtime.execute.trial import trial_dir_of

    planned = {os.path.normpath(trial_dir_of(run_dir, t)) for t in trials}
    unplanned = []
    for top in sorted(os.listdir(run_dir)):
        if top in RUN_LEVEL_DIRS or not os.path.isdir(os.path.join(run_dir, top)):
            continue
        for root, dirs, files in os.walk(os.path.join(run_dir, top)):
            dirs.sort()
            if "task.json" in files:
                dirs.clear()  # a trial's own directory (logs ...)
                if os.path.normpath(root) not in planned:
                    unplanned.append(os.path.relpath(root, run_dir))
    if unplanned:
        click.echo(f"ce run: {len(unplanned)} finished trial(s) are no longer among the "
                   f"run's tasks (a task file removed or renamed, a task skipped, a variant "
                   f"or dataset row gone since the run began): {_shown(unplanned)}; their "
                   "files are kept, the run's reports leave them out (restore the task and "
                   "resume to count them again)", err=True)
    # the trials the run planned that never finished and are gone from its tasks: no
    # directory names them, only the count the run began with (run.json)
    never = (planned_before - len(trials) - len(unplanned)
             if isinstance(planned_before, int) and not isinstance(planned_before, bool)
             else 0)
    if never > 0:
        click.echo(f"ce run: the run planned {planned_before} trial(s) when it began; "
                   f"{never} of them never ran and are no longer among its tasks (a task "
                   "file removed or renamed, a task now skipped, a repeat or dataset row "
                   f"gone): the run's reports count the {len(trials)} its tasks plan now",
                   err=True)


def _shown(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
