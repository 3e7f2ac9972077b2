"""`ce rescore`: grade an archived run again, offline, with the same or new criteria."""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import signal
import sys
from typing import NamedTuple

import click

from ce_runtime.cli import rescore_pool, rescore_preflight
from ce_runtime.cli import rescore_results as RR
from ce_runtime.cli.options import MAX_JOBS, count, experiment_option
from ce_runtime.safe_text import terminal


@click.command("rescore")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("tasks", nargs=-1, metavar="[TASKS...]")
@experiment_option(help="Experiment the TASKS are resolved with (default: the run's own).")
@click.option("-D", "overrides", multiple=True, metavar="PATH=VALUE",
              help="Override a setting of the TASKS, as for `ce compile` (repeatable).")
@click.option("--allow-path", "allow_paths", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="Let task paths resolve into DIR, outside the suite root (repeatable; "
                   "see `ce compile --explain CE0216`).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Where the new results go: a new or empty directory outside the run "
                   "(default RUN_DIR/rescored/<time>, <time>-2 when taken).")
@click.option("--today", is_flag=True,
              help="Grade with today's standard criteria, not those the run archived.")
@click.option("--refresh-judges", is_flag=True,
              help="Ask the judges again instead of reusing the run's recorded verdicts.")
@click.option("--offline", is_flag=True,
              help="Never ask a judge: a verdict the run did not record is the "
                   "criterion's error.")
@click.option("--judge-replies", type=click.Path(exists=True, dir_okay=False),
              help="Scripted judge verdicts (see `ce run --judge-replies`).")
@click.option("--trial", "trial_ids", multiple=True, metavar="ID",
              help="Only this trial: its id or a unique prefix (default/hello); repeatable.")
@click.option("-q", "--quiet", is_flag=True,
              help="Only the trials whose status or score moved, and the summary line.")
@click.option("-j", "--jobs", type=count(MAX_JOBS),
              help="Processes grading at once (forked; each grades every Nth trial). The "
                   "output is the same with any -j; a big archive on a fast disk and many "
                   "CPUs re-scores faster.  [default: 1]")
def rescore_cmd(run_dir, tasks, experiment, overrides, allow_paths, out_dir, today, refresh_judges,
                offline, judge_replies, trial_ids, quiet, jobs):
    """Re-score every trial of RUN_DIR from its trace and workspace snapshot.

    RUN_DIR is a run directory (`runs/latest`), one trial directory of a run, or a
    directory of runs (its latest run is used, and said on stderr).

    Without TASKS each trial is graded with the plan it ran with and the standard
    criteria the run archived: a check that its scores reproduce (a newer ce scores an
    old run with the definitions it ran with; --today uses today's). With TASKS (files,
    directories, globs) the tasks are compiled again, under the run's experiment unless
    -e says otherwise, and each trial is graded with its new plan: change a criterion,
    fix a threshold, add a check, and see what the archived runs would have scored.

    No agent runs. Commands in run_command criteria run again in the trial's own
    environment (its sandbox driver, venv and node packages, rebuilt in a restored
    workspace). Judge verdicts the run recorded are reused, keyed by the whole request
    (model, prompt, file contents), so re-scoring is free and deterministic; a changed
    request asks the judge (--offline: it does not; --refresh-judges: ask every time).
    A re-score that would ask a judge with none configured (no key, no CE_JUDGE_URL, no
    --judge-replies) is refused before anything is graded, naming each criterion, as
    `ce run` refuses it; a judge whose request is unchanged needs none.

    Every trial whose status or score moved is marked `*`, with each criterion that
    changed, recorded and new (a grading that failed: ERROR, no score, and why); then
    each dataset suite gate that moved, of the suites re-graded whole, marked `*` when
    its verdict flipped, and the gates of a suite with a trial not re-graded (missing,
    damaged, no task in TASKS) said not compared, naming the trials (on stdout, with the
    summary line; damaged and missing trials and notes on stderr). The results
    (RUN_DIR/rescored/<time>) are a run directory of their own, with report.md and
    report.html as `ce run` writes them: `ce explain` works on its trials; a re-score
    that left trials out (missing or damaged) says so in them (status incomplete, as an
    interrupted run's).

    Exit status, as `ce run`'s for the re-scored trials: 0 every one succeeded (or, with
    the run's --min-pass-rate, enough did) and every suite gate passed; 1 otherwise
    (each reason printed as `not passed: ...`, then the trials that did not succeed as
    `ce run` lists them, not with -q), or a trial's archive is damaged, or a
    trial the run's results count is missing (its directory deleted), or the results
    could not be written; 2 bad input (a TASKS error, a path that is no run, a judge
    to ask and none configured).

    \b
    Examples:
      ce rescore runs/latest
      ce rescore runs/latest/default/hello_world/00
      ce rescore runs/latest tasks/ -D success_criteria.0.pass_threshold=0.5
      ce rescore runs/latest --offline
      ce rescore runs/ --trial default/hello -q
    """
    from ce_runtime.cli.report_worker import ReportWorker

    worker = ReportWorker.start()  # imports Polars on another CPU while trials are graded
    before = _stop_on_signals()
    where: dict = {}  # where the results go by default (RUN/rescored), once known
    try:
        _rescore(where, worker, run_dir, tasks, experiment, overrides, allow_paths, out_dir, today,
                 refresh_judges, offline, judge_replies, trial_ids, quiet, jobs)
    except _Stopped as exc:  # what was staged is removed (StagedRun's exit): said, exit 1
        click.echo(f"ce rescore: {exc} received: stopped; a re-score stopped before its "
                   "end writes no results", err=True)
        sys.exit(1)
    except BrokenPipeError:
        raise
    except OSError as exc:  # the results could not be written: said, exit 1
        _write_failed(exc, where.get("default_out"))
    except rescore_pool.PoolFailed as exc:
        click.echo(f"ce rescore: {exc}; no results written", err=True)
        sys.exit(1)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if worker is not None:
            worker.close()


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a `kill`, a CI job cancelled, a closed terminal), raised as a
    Ctrl-C is: the staged results are removed, the graders stopped (rescore_pool)."""


def _stop_on_signals() -> dict:
    """SIGTERM and SIGHUP raise `_Stopped` where they would kill ce (their default):
    killed, a re-score left its staged `.NAME.partial-PID` and its reserved results
    directory behind. Only the first raises (a second must not cut the clean-up short).
    The handlers before, to restore."""
    raised: list[int] = []

    def on_signal(signum, _frame) -> None:
        if not raised:
            raised.append(signum)
            raise _Stopped(signal.Signals(signum).name)

    before = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            before[sig] = signal.signal(sig, on_signal)
    return before


def _check_out(out_dir: str, run_dir: str) -> None:
    """--out is a new (or empty) directory outside the run: inside it, the results'
    trials would be read as the run's own by the next re-score; into a non-empty one,
    they would mix with what is there."""
    out, run = os.path.realpath(out_dir), os.path.realpath(run_dir)
    if out == run or out.startswith(run + os.sep):
        raise click.BadParameter(f"{out_dir} is inside the run {run_dir}: give a directory "
                                 "outside it (without --out the results go to "
                                 "RUN/rescored/<time>, which the run keeps apart)",
                                 param_hint="--out")
    try:
        entries = os.listdir(out_dir)
    except OSError:  # a new directory (or one it cannot make: said when it is written)
        return
    if entries:
        raise click.BadParameter(f"{out_dir} exists and is not empty: give a new directory",
                                 param_hint="--out")


def _write_failed(exc: OSError, default_out: str | None = None) -> None:
    """A write that failed ends the rescore with exit 1, naming the path. Nothing is
    left of the results (they were staged: see store/staged_run.py). One that failed
    under `default_out` (RUN/rescored, no --out given: a read-only archive, a file in
    its place) says that --out puts the results elsewhere."""
    import errno

    if exc.filename:
        path = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
        why = exc.strerror or str(exc)
        if exc.errno == errno.EEXIST and os.path.isfile(exc.filename):
            why = "a file where a directory must go"
        what = f"{path}: {why}"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a write() names no file
        what = f"a disk is full (the results' or the scratch's: {exc.strerror or exc})"
    else:
        what = f"operating system error: {exc.strerror or exc}"
    hint = ""
    if default_out and exc.filename and _under(str(exc.filename), default_out):
        hint = " (`--out DIR` writes them elsewhere: a new directory outside the run)"
    click.echo(f"ce rescore: {what}; no results written{hint}", err=True)
    sys.exit(1)


def _under(path: str, folder: str) -> bool:
    path, folder = os.path.abspath(path), os.path.abspath(folder)
    return path == folder or path.startswith(folder + os.sep)


def _rescore(where, worker, run_dir, tasks, experiment, overrides, allow_paths, out_dir, today,
             refresh_judges, offline, judge_replies, trial_ids, quiet, jobs=None):
    from ce_runtime.cli.pick import by_prefix, latest_run
    from ce_runtime.grade.rescore import rescore_trial, trial_dirs
    from ce_runtime.store.archive import (
        DamagedArchive,
        find_run_root,
        load_task_record,
        read_trial_files,
        verified_trial_data,
    )
    from ce_runtime.store.staged_run import StagedRun, reserve
    from ce_runtime.store.verdicts import VerdictStore

    if refresh_judges and offline:
        raise click.UsageError("--refresh-judges and --offline contradict each other")
    replies = _judge_replies(judge_replies)
    run_dir = latest_run(run_dir, "rescore")
    only_trial = None
    if not os.path.isdir(os.path.join(run_dir, "plans")):
        root = find_run_root(run_dir)
        if root is None or not os.path.isfile(os.path.join(run_dir, "task.json")):
            raise click.BadParameter(f"{run_dir} is neither a run directory (plans/, "
                                     "objects/) nor a trial directory of one (task.json)",
                                     param_hint="RUN_DIR")
        only_trial, run_dir = os.path.abspath(run_dir), root
    if (overrides or experiment) and not tasks:
        raise click.UsageError("-D and -e apply to TASKS compiled again; without TASKS the "
                               "run's own plans are re-graded as they are")
    if out_dir:
        _check_out(out_dir, run_dir)
    plans = {}
    task_dirs = {}
    if tasks:
        compiled = _compile(tasks, experiment or _run_experiment(run_dir), overrides,
                            allow_paths)
        plans = {k: plan for k, (plan, _) in compiled.items()}
        task_dirs = {k: task_dir for k, (_, task_dir) in compiled.items()}
    planned_tasks = {task_id for _, task_id in plans}
    dirs = [only_trial] if only_trial else trial_dirs(run_dir)
    if trial_ids:
        ids = [os.path.relpath(d, run_dir) for d in dirs]
        picked = {by_prefix(t, ids, "trial", "--trial") for t in trial_ids}
        dirs = [d for d, i in zip(dirs, ids, strict=True) if i in picked]
    if not dirs:
        raise click.BadParameter(f"{run_dir} holds no trial (no task.json)",
                                 param_hint="RUN_DIR")
    mode = "offline" if offline else ("refresh" if refresh_judges else "use")
    # a judge it would have to ask, and none to ask: refused before anything is graded
    rescore_preflight.judges(run_dir, dirs, plans, mode, replies is not None)
    whole = only_trial is None and not trial_ids
    lost, lost_count = RR.lost_trials(run_dir, dirs) if whole else ([], 0)
    if whole and (damaged_summary := RR.run_json_problem(run_dir)):
        _err(f"ce rescore: {damaged_summary}; the run's --min-pass-rate, status and suite "
             "gates are unknown: the re-score gates every trial, compares no gate and "
             "cannot tell which trials are missing")
    if lost_count:
        _err(f"ce rescore: {lost_count} trial(s) of the run {RR.why_lost(run_dir)}, not "
             "re-scored" + (f": {RR.shown(lost)}" if lost else ""))
    if not out_dir:
        where["default_out"] = os.path.join(run_dir, "rescored")
    out = out_dir or reserve(os.path.join(run_dir, "rescored"),
                             dt.datetime.now().strftime("%Y%m%d-%H%M%S"))
    # the results are staged and renamed into place at the end: interrupted, nothing
    staged = StagedRun(out, reserved=out_dir is None)
    verdicts = VerdictStore(os.path.join(staged.path, "judges"), mode,
                            also_read=(os.path.join(run_dir, "judges"),))
    runner_for = _runner  # the sandbox code is imported when a criterion runs a command
    judge, loopback = _judge(replies)
    tally = _Tally()
    used: dict = {}

    def _relative(d: str) -> str:
        return os.path.relpath(d, run_dir).replace(os.sep, "/")

    def grade(n: int, d: str) -> _Outcome:
        try:  # a damaged trial is listed; the others are re-scored
            files = read_trial_files(d)  # each read once
            plan = task_dir = None
            if tasks:  # a trial without a task in TASKS is only counted
                old = load_task_record(d, files.task)
                plan = plans.get((old["variant_id"], old["task_id"]))
                task_dir = task_dirs.get((old["variant_id"], old["task_id"]))
                if plan is None:  # a variant TASKS do not define (-e) is not a task gone
                    other = old["variant_id"] if old["task_id"] in planned_tasks else None
                    return _Outcome(None, (), no_task=True, suite=_suite_of(old),
                                    other_variant=other, trial=_relative(d))
            loaded = verified_trial_data(d, files)
            old = loaded[0]
            rec, evidence = rescore_trial(d, run_dir, plan, judge, runner_for,
                                          task_dir=task_dir, verdicts=verdicts, today=today,
                                          used_plans=used, loaded=loaded)
        except DamagedArchive as exc:  # its suite, if a dataset's, is not re-graded whole
            trial = _relative(d)
            return _Outcome(None, ((2, f"! {trial:<40} {exc}"),), damaged=str(exc),
                            suite=RR.suite_of_trial(trial), trial=trial)
        # written now (staged): memory holds the records the reports need only
        staged.trial(rec["rescored_from"], d, rec, evidence, loaded[2] is not None,
                     old.get("trace_sha256"), old.get("workspace_sha256"))
        return _Outcome(rec, _echo(rec, old, quiet))

    def finish():  # a grading process's end: its trials written, what it used
        staged.flush()
        return used, verdicts.hits, verdicts.asked

    with staged:
        processes = rescore_pool.usable(jobs, len(dirs)) if replies is None else 1
        try:
            if processes == 1:
                for n, d in enumerate(dirs):
                    tally.add(grade(n, d))
            else:
                for more_used, hits, asked in rescore_pool.run(
                        dirs, processes, grade, finish, staged.abort, tally.add):
                    for digest, plan in more_used.items():
                        used.setdefault(digest, plan)
                    verdicts.hits += hits
                    verdicts.asked += asked
        finally:
            # the collector's full passes scanned every record kept for the reports
            # (tens of microseconds a trial, and growing with the run); frozen, they
            # were left out, and are collectable again from here
            gc.unfreeze()
            if loopback is not None:
                loopback.__exit__(None, None, None)
        records, changed, no_task, damaged = \
            tally.records, tally.changed, tally.no_task, tally.damaged
        state = RR.run_state(run_dir) if whole else ("complete", None, None)
        ran = RR.ran_in(run_dir)  # a re-score's: the run to resume, not the re-score
        if whole and (lost_count or damaged):  # not the whole run: its results say so
            state = ("incomplete", max(state[1] or 0, len(records) + lost_count
                                       + len(damaged)), state[2],
                     RR.left_out(lost_count, len(damaged), ran,
                                 ran != os.path.abspath(run_dir)))
        staged.flush()  # every trial on disk: report.html reads their directories
        summary = RR.write_results(staged.path, records, run_dir, used, out, worker, state,
                                   ran)
        code = int(summary.get("exit_code", 1))
        staged.commit()
    gates, not_compared = [], {}
    if whole:  # a part of a suite has gates of its own, not comparable with the run's:
        # only the gates of the suites re-graded whole are compared, the others said not
        # compared with the trials left out (TASKS may leave whole suites out: not said)
        left_out = {k: list(v) for k, v in tally.left_out.items()}
        for trial in lost:
            if (suite := RR.suite_of_trial(trial)) is not None:
                left_out.setdefault(suite, []).append(("missing from the run", trial))
        unknown = f"{lost_count - len(lost)} trial(s) missing from the run, which ones " \
            "unknown: trials.parquet cannot be read" if lost_count > len(lost) else None
        defined = {(v, t.split("/")[0]) for v, t in plans if "/" in t} if tasks else None
        gates, not_compared = RR.gate_changes_of(
            run_dir, summary.get("suite_gates") or [], tally.suites, left_out, unknown,
            defined)
        for line in gates:
            _say(line)
    note = f"; {no_task} trial(s) have no task in TASKS" if no_task else ""
    if tally.other_variants:
        shown = ", ".join(sorted(tally.other_variants))
        note += (f" ({sum(tally.other_variants.values())} of them of a task TASKS have, "
                 f"under variant(s) TASKS do not define: {shown})")
    unrun = _tasks_not_run(plans, dirs, run_dir, lost) if tasks and whole else []
    if unrun:  # a row added to a dataset: its gates count only the rows the run has
        _err(f"ce rescore: {len(unrun)} dataset row(s) of TASKS have no trial in the run, "
             f"not graded (suite gates leave them out): {RR.shown(unrun)}")
        note += f"; {len(unrun)} row(s) of TASKS not in the run"
    if damaged:
        code = max(code, 1)
        note += f"; {len(damaged)} trial(s) not re-scored (damaged archive)"
    if lost_count:  # the archive lost them, as a damaged trial is lost: not a pass
        code = max(code, 1)
        note += f"; {lost_count} trial(s) missing from the run"
    asked = f"; judges: {verdicts.hits} recorded verdict(s) reused, {verdicts.asked} asked" \
        if verdicts.hits or verdicts.asked else ""
    flips = sum(line.startswith("*") for line in gates)
    note += f"; {flips} suite gate(s) changed verdict" if flips else ""
    if not_compared:
        note += f"; {len(not_compared)} suite gate(s) not compared (not every trial of " \
            "their suite re-scored)"
    click.echo(f"{len(records)} trial(s) re-scored, {changed} changed{note}{asked}; "
               f"results: {out}")
    if summary.get("exit_code"):  # why it is not a pass, as `ce run` says it
        # a gate not compared failed over part of its suite: not evaluated, said once
        for reason in RR.gate_reasons(list(summary.get("exit_reasons") or ()), not_compared):
            click.echo(f"not passed: {reason}")
    from ce_runtime.cli.run_output import trial_lines

    # then, as it does, the trials that did not succeed (not with -q) and why the ERROR
    # trials are ones
    for line in trial_lines(records, os.path.join(out, "report.md"), quiet):
        click.echo(line)
    sys.exit(code)


def _tasks_not_run(plans: dict, dirs: list[str], run_dir: str, lost: list[str]) -> list[str]:
    """VARIANT/TASK/ROW of the TASKS rows the run has no trial of (nor a lost one), in
    the dataset suites it ran; none for a sampled run (its other rows never ran)."""
    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
            if (json.load(fh).get("args") or {}).get("sample"):
                return []
    except (OSError, ValueError, AttributeError):
        return []
    ran = {os.path.dirname(os.path.relpath(d, run_dir)).replace(os.sep, "/") for d in dirs}
    ran |= {i.rsplit("/", 1)[0] for i in lost}
    suites = {r.rsplit("/", 1)[0] for r in ran if r.count("/") >= 2}
    return sorted(f"{v}/{t}" for v, t in plans if "/" in t and f"{v}/{t}" not in ran
                  and f"{v}/{t.rsplit('/', 1)[0]}" in suites)


def _moved(rec) -> bool:
    before = rec["previous"]
    return before["status"] != rec["status"] or _differs(before["weighted_score"],
                                                         rec["weighted_score"])


class _Outcome(NamedTuple):
    """What one archived trial came to: its new record (None: damaged, or no task in
    TASKS) and the lines to print for it, (1, text) on stdout and (2, text) on stderr."""

    record: dict | None
    lines: tuple[tuple[int, str], ...]
    damaged: str | None = None
    no_task: bool = False
    suite: tuple[str, str] | None = None  # a dataset trial left out: its (variant, suite)
    other_variant: str | None = None  # no task: its task is in TASKS, not its variant
    trial: str | None = None  # a trial left out (damaged, no task): its id


class _Tally:
    """The outcomes, in the archive's order: printed, counted, the records kept."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.changed = self.no_task = 0
        self.damaged: list[str] = []
        self.suites: set[tuple[str, str]] = set()  # (variant, suite) of re-graded trials
        # ... with trials left out: (why, trial id) of each (damaged, no task in TASKS)
        self.left_out: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self.other_variants: dict[str, int] = {}  # no task: variants TASKS do not define

    def add(self, outcome: _Outcome) -> None:
        for stream, line in outcome.lines:
            (_say if stream == 1 else _err)(line)
        if outcome.damaged is not None:
            self.damaged.append(outcome.damaged)
        self.no_task += outcome.no_task
        if outcome.other_variant is not None:
            self.other_variants[outcome.other_variant] = \
                self.other_variants.get(outcome.other_variant, 0) + 1
        if outcome.suite is not None:
            why = "damaged archive" if outcome.damaged is not None else "no task in TASKS"
            self.left_out.setdefault(outcome.suite, []).append((why, outcome.trial or "?"))
        if outcome.record is not None:
            self.records.append(outcome.record)
            suite = _suite_of(outcome.record)
            if suite is not None:
                self.suites.add(suite)
            self.changed += _moved(outcome.record)
            if len(self.records) % 256 == 0:  # the records kept so far: out of the
                gc.freeze()  # collector's full passes (undone at the end, below)


def _echo(rec, old, quiet: bool) -> tuple[tuple[int, str], ...]:
    """One line per trial (a moved one marked `*`), with the criteria that changed."""
    from ce_runtime.grade.rescore import criterion_changes
    from ce_runtime.store.record import Status

    moved = _moved(rec)
    if quiet and not moved:
        return ()
    before = rec["previous"]
    mark = "*" if moved else " "
    lines = [(1, f"{mark} {rec['trial_id']:<40} {before['status']:>9} -> "
                 f"{rec['status']:<9} {_fmt(before['weighted_score'])} -> "
                 f"{_fmt(rec['weighted_score'])}")]
    if rec["status"] == Status.ERROR and not rec.get("criteria") \
            and rec.get("error") != old.get("error"):
        # the grading failed (no criterion result, no score): why, not each criterion
        # as gone
        lines.append((1, f"      error: {rec.get('error')}"))
    else:
        lines += [(1, f"      {line}") for line in
                  criterion_changes(old.get("criteria"), rec.get("criteria") or [])]
    if not quiet:
        lines += [(2, f"      note: {note}") for note in rec.get("rescore_notes", ())]
    return tuple(lines)


def _say(line: str) -> None:
    """`click.echo(line)`, without its flush when stdout is no terminal and the line
    plain ASCII (nothing for click to strip or encode): a write per 8 KiB of lines, not
    a write per trial. stdout is flushed before anything goes to stderr (`_err`), so a
    merged stream keeps its order; and at the end (the summary line, or the exit)."""
    if _PIPED[0] is None:
        _PIPED[0] = sys.stdout is not None and not sys.stdout.isatty()
    if _PIPED[0] and line.isascii() and line.isprintable():
        sys.stdout.write(line + "\n")
    else:  # errors name the agent's files: none of its escape sequences is written
        click.echo(terminal(line))


_PIPED: list[bool | None] = [None]


def _err(line: str) -> None:
    sys.stdout.flush()
    click.echo(terminal(line), err=True)
def _compile(tasks, experiment, overrides, allow_paths=()) -> dict:
    from ce_lang.api import CompileOptions, compile_paths, render_human

    result = compile_paths(tasks, CompileOptions(experiment=experiment,
                                                 overrides=tuple(overrides),
                                                 allow_paths=tuple(allow_paths)))
    if result.errors:
        click.echo(render_human(result.diagnostics, result.sources), err=True, nl=False)
        sys.exit(2)
    # repeats of a task share one plan: match on variant and task, not the repeat; with
    # the task's directory, where its $TASK_DIR files (reference, hidden tests) are read
    return {(t.variant_id, t.plan.task_id): (t.plan, t.task_dir) for t in result.trials}


def _run_experiment(run_dir: str) -> str | None:
    """The experiment the run was made with (its run.json), if the file is still there."""
    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
            path = (json.load(fh).get("args") or {}).get("experiment")
    except (OSError, ValueError, AttributeError):
        return None
    return path if path and os.path.isfile(path) else None


def _runner(workspace, task_dir, reference, plan, before_start=None):
    from ce_runtime.execute.sandbox.runner import local_runner

    return local_runner(workspace, task_dir, reference, plan=plan, uv_cache=_uv_cache(),
                        before_start=before_start)


def _uv_cache() -> str:
    from ce_runtime.cli.run import _uv_cache as cache

    return cache()


def _judge_replies(path):
    """The --judge-replies file's script, checked before anything is re-scored."""
    if not path:
        return None
    from ce_runtime.model_server.script import ScriptError, load_script_file

    try:
        return load_script_file(path)
    except ScriptError as exc:
        raise click.BadParameter(str(exc), param_hint="--judge-replies") from None


def _judge(replies):
    if replies is None:
        return None, None
    from ce_runtime.grade.judge import HttpJudge
    from ce_runtime.model_server import ModelServer

    loopback = ModelServer(replies, judge=True).__enter__()
    return HttpJudge(loopback.url, "loopback"), loopback


def _differs(a, b) -> bool:
    if a is None or b is None:
        return a is not b
    return abs(a - b) > 1e-9


def _fmt(x) -> str:
    return f"{x:.3f}" if isinstance(x, int | float) else "  -  "


def _suite_of(record: dict) -> tuple[str, str] | None:
    """A dataset trial's (variant, suite id), the key of its suite's gates."""
    suite = record.get("suite_id")
    return (record.get("variant_id"), suite) if isinstance(suite, str) else None
