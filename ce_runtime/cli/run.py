"""`ce run`: run tasks end to end into a run directory, with reports and resume."""

from __future__ import annotations

import os
import sys

import attrs
import click

from ce_runtime.cli.options import (
    MAX_JOBS,
    MAX_REPEATS,
    MAX_RETRIES,
    MAX_SAMPLE,
    NumberRange,
    count,
    experiment_option,
)
from ce_runtime.cli.run_refused import Refused, RunCommand


def _tag_match(tag: str, wanted: str) -> bool:
    return tag == wanted or tag.startswith(wanted + "-") or tag.startswith(wanted + ":")


def select(trials, tags: tuple[str, ...], exclude: tuple[str, ...]):
    want = [t.strip() for group in tags for t in group.split(",") if t.strip()]
    drop = [t.strip() for group in exclude for t in group.split(",") if t.strip()]
    out = []
    for t in trials:
        if t.plan.skip:
            continue
        if want and not any(_tag_match(tag, w) for tag in t.plan.tags for w in want):
            continue
        if any(_tag_match(tag, d) for tag in t.plan.tags for d in drop):
            continue
        out.append(t)
    return out


def _skipped_tasks(trials) -> str:
    """The tasks `skip:` keeps out of the run, with their reasons: said, never silent."""
    reasons: dict[str, str] = {}
    for t in trials:
        if t.plan.skip:
            task = t.plan.suite_id or t.plan.task_id
            reasons.setdefault(task, t.plan.skip if isinstance(t.plan.skip, str) else "")
    shown = [f"task {task!r}" + (f" ({why})" if why else "")
             for task, why in list(reasons.items())[:5]]
    return ", ".join(shown) + (f" and {len(reasons) - 5} more" if len(reasons) > 5 else "")


def _why_no_trial(trials, a) -> str:
    """Why nothing runs: no task file at all (a wrong directory), or the tags and `skip:`
    left none; one hint for every case sent a CI job to check tags it never gave."""
    if not trials:
        return (f"no task file in {' '.join(a.paths)} (YAML files that are neither a task "
                "nor an experiment are skipped)")
    tasks = {t.plan.suite_id or t.plan.task_id for t in trials if not t.plan.skip}
    if not tasks:
        return "no trial to run (every task has skip:)"
    given = " ".join(f"{flag} {','.join(v)}" for flag, v in (
        ("--tags", a.tags), ("--exclude-tags", a.exclude_tags)) if v)
    return f"no trial to run: {given} select none of the {len(tasks)} task(s)"


@click.command("run", cls=RunCommand)
@click.argument("paths", nargs=-1, metavar="PATHS...")
@experiment_option(help="Experiment file: its variants are run against every task.")
@click.option("-D", "overrides", multiple=True, metavar="PATH=VALUE",
              help="Override a setting on every task (repeatable), e.g. -D "
                   "run_limits.max_turns=5 or -D 'success_criteria[0].weight=2' (paths as "
                   "diagnostics print them).")
@click.option("--agent", "--type", "agent_type", metavar="TYPE",
              help="Agent for every task: claude-code, codex, openai, none, oracle, script ...")
@click.option("--model", help="Model for every task's agent.")
@click.option("--driver", metavar="DRIVER",
              help="Sandbox driver for every task: tempdir (isolates nothing), bwrap "
                   "(namespaces; recommended for real agents), docker.")
@click.option("-j", "--jobs", type=count(MAX_JOBS),
              help="Trials run at the same time.  [default: 1; --resume keeps the run's "
                   "unless given]")
@click.option("--executor", type=click.Choice(["local", "ray"]),
              help="What runs the trials: local (an asyncio pool in this process; the "
                   "default) or ray (Ray tasks; pip install 'ce[ray]'). --resume keeps the "
                   "run's executor unless given.")
@click.option("--ray-address", metavar="ADDR",
              help="With --executor ray: the cluster to join (`auto`, or HOST:PORT); by "
                   "default a local Ray instance is started for the run.")
@click.option("--repeats", type=count(MAX_REPEATS), help="Trials per task and variant.")
@click.option("--sample", type=count(MAX_SAMPLE), help="Keep N dataset rows per task.")
@click.option("--allow-path", "allow_paths", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="Let task paths (prompt files, templates, references ...) resolve into "
                   "DIR, outside the suite root (repeatable; see `ce compile --explain "
                   "CE0216`).")
@click.option("--tags", multiple=True, help="Only tasks with one of these tags (comma list; "
              "`smoke` also selects smoke-pass, smoke:x ...).")
@click.option("--exclude-tags", multiple=True, help="Skip tasks with one of these tags.")
@click.option("--run-dir", "run_dir", type=click.Path(file_okay=False),
              help="The run directory itself (new or empty; as in coder_eval). Default: a "
                   "new RUNS_ROOT/<time>-<id>. A directory of runs given here (the meaning "
                   "before issue 15) is still taken as --runs-root, with a note.")
@click.option("--runs-root", "runs_root", default="runs", show_default=True,
              type=click.Path(file_okay=False),
              help="Where new run directories are made when --run-dir is not given; "
                   "RUNS_ROOT/latest points at the newest.")
@click.option("--resume", "resume_dir", type=click.Path(exists=True, file_okay=False),
              help="Finish an interrupted run (a run directory, or a directory of runs: "
                   "its latest): only unfinished trials are run (no task.json, a trial file "
                   "missing or damaged, or a changed plan: each named); with none left, "
                   "the reports are written again. A resume keeps what makes the run "
                   "(PATHS, -e, -D, --agent, --model, --driver, --repeats, --sample, the "
                   "tags and --scripted-model: giving another is a usage error) and takes "
                   "the run's -j, --executor, --judge-replies, --min-pass-rate, "
                   "--retry-errors, --junit-xml and --sarif unless given again "
                   "(--allow-path adds to the run's).")
@click.option("--retry-errors", type=click.IntRange(0, MAX_RETRIES), metavar="N",
              help="Run a trial that ended in an ERROR (ce's or the infrastructure's "
                   "failure: a sandbox, a pre_run command, the agent's CLI or model API; "
                   "not an integrity violation) again, up to N more times, after the other "
                   "trials. Earlier attempts are kept in RUN/attempts/; the latest counts. "
                   "--resume keeps the run's unless given, and runs again its finished "
                   "ERROR trials that have attempts left.  [default: 0]")
@click.option("--junit-xml", type=click.Path(dir_okay=False),
              help="Also write JUnit XML here (--resume writes the run's again unless given).")
@click.option("--sarif", type=click.Path(dir_okay=False),
              help="Also write SARIF 2.1.0 here: a result per failed criterion and per "
                   "failed suite gate, located in its task file (GitHub code scanning's "
                   "upload-sarif; --resume writes the run's again unless given).")
@click.option("--min-pass-rate", type=NumberRange(0, 1), metavar="RATE",
              help="Pass (exit 0) when at least RATE (0..1) of each variant's trials "
                   "succeed, instead of every trial; an ERROR trial is not a pass. Suite "
                   "gates still apply. --resume keeps the run's unless given.")
@click.option("--scripted-model/--no-scripted-model", default=None,
              help="Agents that call a model (claude-code ...) talk to a local server that "
                   "replays the task's scripted session (agent.model_script, or "
                   "<task>.<agent type>.model.yaml beside the task): the real agent CLI, "
                   "offline, no API key. Part of the run, as --model is: --resume keeps "
                   "the run's, and refuses the other (scripted and real replies do not "
                   "mix in one run's results: start a new run).  [default: off]")
@click.option("--judge-replies", type=click.Path(exists=True, dir_okay=False),
              help="Grade judge criteria with scripted verdicts from this YAML file (a local "
                   "loopback server; for demos and tests, no API key needed).")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress and no compile warnings on stderr; errors and the results "
                   "(stdout) are still printed.")
@click.option("--no-cache", is_flag=True,
              help="Compile the tasks even if an identical compile is cached (also "
                   "CE_NO_COMPILE_CACHE=1). The cache gives the compiled trials only while "
                   "every file, listing, glob and setting the compile consulted, and ce "
                   "itself, are unchanged.")
def run_cmd(**params):
    """Run the agent on every trial of PATHS and grade it.

    PATHS are task files, directories or globs, as for `ce compile`. Every task is
    compiled first; any error stops the run before an agent starts. Results go to
    runs/<run-id>/ (runs/latest points at the newest; --run-dir DIR writes DIR itself,
    --runs-root DIR makes DIR/<run-id>): run.json, trials.parquet,
    results.parquet, report.md, report.html (`ce report` makes either again) and one
    directory per trial with its task.json, trace and workspace snapshot (`ce explain
    TRIAL_DIR` re-grades it offline).

    Before anything is set up, ce checks what this machine must provide: the --agent
    name (did-you-mean), each agent's adapter, the sandbox drivers, the credentials of
    agents and judges. The results table and summary line go to stdout; progress,
    warnings and errors to stderr (-q: errors only).

    \b
    Exit status: 0 every trial succeeded (or, with --min-pass-rate RATE, at least RATE
    of each variant's trials) and every suite gate passed; 1 otherwise (or interrupted,
    or the run held by another ce run); 2 bad input; 3 a bug in ce (CE_DEBUG=1 shows it).

    \b
    Examples:
      ce run tasks/ --agent oracle -j 4        prove every task solvable
      ce run tasks/hello_world.yaml -e exp.yaml --repeats 3
      ce run --resume runs/latest              finish an interrupted run
      ce run tasks/ --min-pass-rate 0.8        gate CI on 80% of trials passing
      ce run tasks/ --agent oracle --run-dir out/smoke > results.txt
    """
    from ce_runtime.cli.run_args import RunArgs

    state: dict = {}  # the run directory and the signals, once known
    try:
        _run(state, RunArgs.from_click(params))
    except BrokenPipeError:
        raise
    except OSError as exc:  # a write failed: read-only run directory, no space ...
        _write_failed(exc, state.get("run_dir"), state.get("resume_dir"))
    except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort,
            SystemExit) as exc:
        from ce_runtime.cli.run_refused import refusal_lines, write

        if (why := refusal_lines(exc)) is not None:  # exit 2: said in --junit-xml, --sarif
            write(params, why, getattr(exc, "diagnostics", ()))
        raise
    except Exception as exc:  # a bug of ce's (exit 3): the run's run.json says it ended
        _mark_failed(state.get("run_dir"), f"internal error ({type(exc).__name__}: {exc})")
        raise
    finally:
        if "stops" in state:  # every write done: the signals are the caller's again
            state["stops"].restore()


def _run(state, args):
    from ce_runtime.cli.report_worker import ReportWorker

    worker = ReportWorker.start()  # imports Polars on another CPU meanwhile
    try:
        _run_with(state, worker, args)
    finally:
        if worker is not None:
            worker.close()


def _run_with(state, worker, a):
    from ce_lang.api import render_human
    from ce_runtime.cli import run_dirs, run_resume, run_retry
    from ce_runtime.cli import run_preflight as P
    from ce_runtime.cli.run_output import Progress
    from ce_runtime.cli.run_signals import Stops
    from ce_runtime.execute import suite as R

    P.agent_name(a.agent_type)
    recorded_id = created_at = planned_before = None
    jobs_from = ""  # where a resume's -j came from, for the start line
    if a.resume_dir:
        if a.run_dir:
            raise click.UsageError("--resume names the run directory; drop --run-dir")
        from ce_runtime.cli.pick import latest_run

        resume_dir = latest_run(a.resume_dir, "run", "--resume")
        try:
            meta = R.load_json(os.path.join(resume_dir, "run.json"))
            if not isinstance(meta, dict) or not isinstance(meta.get("args"), dict):
                raise ValueError("not the JSON object `ce run` writes, with its `args`")
            meta["args"]["paths"]
        except KeyError:
            raise click.BadParameter(f"{resume_dir} is not a run directory of `ce run` "
                                     "(its run.json records no task paths)",
                                     param_hint="--resume") from None
        except (OSError, ValueError, TypeError) as exc:
            raise click.BadParameter(f"{resume_dir} is not a run directory of `ce run` "
                                     f"(its run.json is missing or unreadable: {exc})",
                                     param_hint="--resume") from None
        a, jobs_from = run_resume.resumed(a, meta["args"])
        recorded_id = meta.get("run_id")
        planned_before = meta.get("trials_planned")
        created_at = meta.get("created_at")  # a resume is the same run: it began then
        run_dir = resume_dir
        state["resume_dir"] = run_dir  # its lock not taken: nothing of it was changed
        lock = _lock(run_dir)
        state["run_dir"] = run_dir  # before anything is written
    elif not a.paths:
        raise click.UsageError("give at least one task file, directory or glob")
    if a.jobs is None:
        a = attrs.evolve(a, jobs=1)
    # --agent replaces the agent at run time (recorded in each task.json), except on
    # `agent: {type: none}` tasks, which have no agent to replace
    from ce_runtime.cli.run_plans import compile_for_run

    # `--agent none` is `-D agent.type=none`: the same contract (no prompt, no trace
    # criteria); any other --agent is checked against each task (CE0220 for the oracle)
    agent_type = a.agent_type
    result = compile_for_run(a.paths, dict(
        experiment=a.experiment, overrides=a.overrides, model=a.model,
        driver=a.driver, repeats=a.repeats, sample=a.sample, allow_paths=a.allow_paths,
        agent_type="none" if agent_type == "none" else None,
        run_agent=agent_type if agent_type != "none" else None), cached=not a.no_cache)
    color = sys.stderr.isatty() and "NO_COLOR" not in os.environ
    if result.errors:
        errors = [d for d in result.diagnostics if d.severity == "error" or not a.quiet]
        click.echo(render_human(errors, result.sources, color=color), err=True, nl=False)
        why = f"{result.errors} error(s) in the task files; nothing was run"
        click.echo(f"ce run: {why}", err=True)
        raise Refused([why], result.diagnostics)
    if result.warnings and not a.quiet:  # what `ce compile` says, `ce run` says
        click.echo(render_human(result.diagnostics, result.sources, color=color), err=True,
                   nl=False)
    if a.sample and not a.quiet and not any(t.plan.row_id for t in result.trials):
        click.echo(f"ce run: --sample {a.sample} keeps dataset rows, and no task here has a "
                   "dataset: every trial runs", err=True)
    trials = select(result.trials, a.tags, a.exclude_tags)
    skipped = _skipped_tasks(result.trials)
    if skipped and not a.quiet:
        click.echo(f"ce run: not run (skip:): {skipped}", err=True)
    if not trials:
        click.echo(f"ce run: {(why := _why_no_trial(result.trials, a))}", err=True)
        raise Refused([why])
    P.drivers(trials)
    a = attrs.evolve(a, executor=_check_executor(a.executor or "local", a.ray_address))
    P.agents(trials, agent_type)
    P.costs(trials, agent_type, a.quiet, result.sources, color)
    P.models(trials, agent_type, bool(a.scripted_model))
    P.judges(trials, a.judge_replies)
    P.outputs({"--junit-xml": a.junit_xml, "--sarif": a.sarif}, a.resume_dir or (
        a.run_dir if a.run_dir and not run_dirs.is_runs_root(a.run_dir) else None))
    if not a.resume_dir:
        run_dir = run_dirs.choose(a.run_dir, a.runs_root)
        state["run_dir"] = run_dir
        lock = _lock(run_dir)
    # once the lock is held, not sooner: a `ce run` that stops on bad input or a held
    # lock leaves nothing in $TMPDIR (a running trial whose task directory holds $TMPDIR
    # would see it come and go)
    _start_zygote_early(trials, a.executor)
    run_id = run_dirs.run_id(run_dir, recorded_id)
    config = a.config()
    for repaired in R.write_plans(run_dir, trials, result.plan_files):
        click.echo(f"ce run: damaged archive: {repaired}; written again from the task file",
                   err=True)
    done, damaged = R.already_run(run_dir, trials)
    if a.resume_dir:
        for why in damaged:
            click.echo(f"ce run: {why}; the trial runs again", err=True)
        run_resume.say_replanned(run_dir, trials, done)
        run_resume.say_unplanned(run_dir, trials, planned_before)
    retries = run_retry.Retries(run_dir, a.retry_errors or 0, a.quiet)
    if a.resume_dir:
        retries.already_errored(trials, done)
    todo = [t for t in trials if t.trial_id not in done]
    if not todo:  # a resume with nothing left: no trial forks from it
        from ce_runtime.execute.sandbox.tempdir import discard_early_zygote

        discard_early_zygote()
    stops = state["stops"] = Stops().install()  # from here, no signal cuts the writes
    R.write_run_json(run_dir, {"run_id": run_id, "status": "running",
                               "created_at": created_at or R.now_iso(),
                               "args": config, "trials": len(trials)}, sync_later=True)
    if not a.quiet:
        left = "" if todo else "; nothing left to run: the reports are written again"
        click.echo(f"run {run_dir}: {len(trials)} trial(s), {len(trials) - len(todo)} already "
                   f"done, -j {a.jobs}{jobs_from}{left}", err=True)
        retries.say_held()
    progress = Progress(len(trials), len(trials) - len(todo), a.quiet)
    on_done = progress.done
    if worker is not None:
        on_done = _follow(worker, run_dir, run_id, config, trials, done, a.junit_xml,
                          progress.done)
    on_done = retries.on_done(on_done)
    stopped_by = failed = None
    try:
        while todo:  # no executor is started for nothing; then each retry pass
            stopped_by, failed = _run_trials(stops, todo, run_dir, a, progress.start,
                                             on_done)
            todo = retries.next_pass() if stopped_by is None and failed is None else []
            progress.total += len(todo)
    finally:
        progress.close()
    if (retried := retries.summary()) and not a.quiet:
        click.echo(retried, err=True)
    records = R.collect(run_dir, trials)
    interrupted = stopped_by is not None and len(records) < len(trials)
    if interrupted:
        click.echo(f"\n{stopped_by}: finished trials are kept; resume with "
                   f"`ce run --resume {run_dir}`", err=True)
    elif stopped_by is not None:  # after the last trial: nothing was cut short
        click.echo(f"\nce run: {stopped_by} once every trial had finished: nothing was cut "
                   "short", err=True)
    if failed is not None:
        missing = len(trials) - len(records)
        click.echo(f"ce run: {failed}; {len(records)} of {len(trials)} trial(s) have run "
                   f"(kept); `ce run --resume {run_dir}` runs the other {missing} once it "
                   "can start (or with another --executor)", err=True)
    code = _finish(run_dir, run_id, config, records, len(trials), interrupted, a.junit_xml,
                   progress.lost, worker, failed, _unrun(trials, records, progress.lost),
                   a.quiet, _unrun_files(trials, records, progress.lost))
    if a.sarif:  # still under the lock: a resume waiting for it reads a finished run
        from ce_runtime.report.sarif import sarif_after_run

        sarif_after_run(run_dir, a.sarif, quiet=a.quiet)
    os.close(lock)  # unlocked only once everything is written
    sys.exit(1 if interrupted or failed else code)


def _start_zygote_early(trials, executor: str) -> None:
    """Tempdir trials get their inits from a zygote: started now, its start-up overlaps
    the run's remaining set-up (plans, run.json, the pool): the executor adopts it, and
    `ce run` ends it at exit if not."""
    from ce_runtime import zygote_process
    from ce_runtime.execute.sandbox.tempdir import start_zygote_early, uses_zygote

    if executor == "local" and any(uses_zygote(t.plan.sandbox) for t in trials):
        start_zygote_early()  # the one the `ce` script started, if it did
    zygote_process.discard()  # not needed: not left waiting for the run's end


def _follow(worker, run_dir, run_id, config, trials, done, junit_xml, on_done):
    """Tell the report worker the run's trials, and each as it finishes (after
    `on_done`): it reads their records and makes the reports while the next trials
    run."""
    from ce_runtime.execute.trial import trial_dir_of
    from ce_runtime.store.report_job import Begin

    worker.begin(Begin(run_dir, run_id, config, len(trials), junit_xml,
                       [trial_dir_of(run_dir, t) for t in trials],
                       [i for i, t in enumerate(trials) if t.trial_id in done]),
                 [t.trial_id for t in trials])

    def trial_done(trial, record) -> None:
        on_done(trial, record)
        worker.trial_done(trial.trial_id)

    return trial_done


def _run_trials(stops, todo, run_dir, a, on_start, on_done
                ) -> tuple[str | None, str | None]:
    """Run the trials still to run: (what stopped them early, or None; why the executor
    did not start, or None)."""
    from ce_runtime import startup_gc
    from ce_runtime.execute import suite as R
    from ce_runtime.execute.executor import ExecutorUnavailable

    startup_gc.imports_done()
    loopback = None
    if a.judge_replies:
        import yaml

        from ce_runtime.model_server import ModelServer

        with open(a.judge_replies, encoding="utf-8") as fh:
            loopback = ModelServer(yaml.safe_load(fh) or {}, judge=True).__enter__()
        os.environ["CE_JUDGE_URL"] = loopback.url
    try:
        return stops.run(R.execute(
            todo, run_dir, R.RunOptions(jobs=a.jobs, agent=a.agent_type, uv_cache=_uv_cache(),
                                        scripted_model=bool(a.scripted_model),
                                        executor=a.executor, ray_address=a.ray_address),
            on_start, on_done)), None
    except ExecutorUnavailable as exc:  # e.g. no Ray cluster at --ray-address
        return None, f"the {a.executor} executor did not start: {exc}"
    finally:
        if loopback is not None:
            loopback.__exit__(None, None, None)


def _mark_failed(run_dir: str | None, error: str) -> None:
    """run.json of a run that a bug of ce's stopped says `failed` and why, not `running`
    for good (`ce runs` listed it running; a resume took it up and met the bug again).
    Best effort: the bug is reported either way."""
    from ce_runtime.execute import suite as R

    path = os.path.join(run_dir, "run.json") if run_dir else None
    if path is None or not os.path.isfile(path):
        return
    try:
        meta = R.load_json(path)
        if isinstance(meta, dict) and meta.get("status") == "running":
            meta["status"], meta["error"] = "failed", error
            R.write_run_json(run_dir, meta)
    except (OSError, ValueError, TypeError, AttributeError):
        pass


def _write_failed(exc: OSError, run_dir: str | None, resume_dir: str | None = None) -> None:
    """A write failure ends the run with exit 1, naming the path; run.json says so too
    when it can still be written (else the message says it could not). A resume that
    failed before it held the run's lock (`resume_dir` without `run_dir`) changed
    nothing of the run."""
    import errno

    from ce_runtime.execute import suite as R

    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if exc.filename:
        path = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
        what = f"cannot write {path}: {exc.strerror or exc}"
    elif full and run_dir:  # a write() names no file: say which disk
        what = f"the disk holding {run_dir} is full ({exc.strerror or exc})"
    else:  # an OS error that names no file (a sandbox that could not start, ...)
        what = f"operating system error: {exc.strerror or exc}"
    click.echo(f"ce run: {what}", err=True)
    if run_dir is None and resume_dir is not None:
        click.echo(f"ce run: nothing was changed in {resume_dir} (`ce run --resume "
                   f"{resume_dir}` once the cause is fixed)", err=True)
        sys.exit(1)
    if run_dir is None or not os.path.isfile(os.path.join(run_dir, "run.json")):
        where = run_dir or "the run directory"
        click.echo(f"ce run: no run.json in {where} was marked (none was written yet)",
                   err=True)
        sys.exit(1)
    try:
        meta = R.load_json(os.path.join(run_dir, "run.json"))
        meta["status"] = "failed"
        meta["error"] = what
        R.write_run_json(run_dir, meta)
    except (OSError, ValueError, TypeError, AttributeError) as again:
        click.echo(f"ce run: {os.path.join(run_dir, 'run.json')} could not be marked "
                   f"failed either: {again}", err=True)
        click.echo(f"ce run: finished trials are kept (`ce run --resume {run_dir}` once "
                   f"{'there is space' if full else 'the cause is fixed'})", err=True)
    else:
        click.echo(f"ce run: {os.path.join(run_dir, 'run.json')} marked failed; finished "
                   f"trials are kept (`ce run --resume {run_dir}` once "
                   f"{'there is space' if full else 'the cause is fixed'})",
                   err=True)
    sys.exit(1)


def _lock(run_dir: str) -> int:
    """The run directory's lock, held until ce exits; exit 1 if another run holds it."""
    from ce_runtime.execute import suite as R

    try:
        return R.lock_run_dir(run_dir)
    except R.RunDirBusy as exc:
        click.echo(f"ce run: {exc}; nothing was changed", err=True)
        sys.exit(1)


def _check_executor(name: str, ray_address: str | None) -> str:
    """The executor can run here (Ray installed for --executor ray), else exit 2."""
    from ce_runtime.execute.executor import ray_missing

    if ray_address and name != "ray":
        raise click.UsageError("--ray-address needs --executor ray")
    why = ray_missing() if name == "ray" else None
    if why:
        click.echo(f"ce run: {why}", err=True)
        raise Refused([why])
    return name


def _uv_cache() -> str:
    from ce_lang.api import ce_cache

    return ce_cache("uv")


def _load_summary_table() -> None:
    """What the summary table imports (the report package, ~3 ms), while the report
    worker writes: not after it."""
    import ce_runtime.report.text  # noqa: F401


def _unrun(trials, records, lost) -> list[str]:
    """The ids of the planned trials with no record that were not lost either: those a
    Ctrl-C (or an executor that did not start) left unrun, in the run's order."""
    have = {r.trial_id for r in records} | {r["trial_id"] for r in lost}
    return [t.trial_id for t in trials if t.trial_id not in have]


def _unrun_files(trials, records, lost) -> dict[str, str]:
    """{`VARIANT/TASK[/ROW]`: task file, as `rundir.task_file_path` makes it} of the
    trials `_unrun` names: their JUnit testcases' `file`."""
    unrun = set(_unrun(trials, records, lost))
    return {t.trial_id.rpartition("/")[0]: os.path.join(t.task_dir, os.path.basename(
        t.source)) for t in trials if t.trial_id in unrun and t.source}


def _finish(run_dir, run_id, config, records, total, interrupted, junit_xml,
            lost=(), worker=None, error=None, unrun=(), quiet=False,
            unrun_files=None) -> int:
    """run.json, parquet, report.md and .html, JUnit (by the report worker, or here
    without one) and the summary table; the exit code. A lost trial (its directory
    deleted while it ran) is listed and makes the exit 1. `error`: what stopped the run
    short other than a signal (an executor that did not start); `unrun`: the planned
    trials that did not run (`_unrun`: JUnit's skipped testcases), `unrun_files` their
    task files (`_unrun_files`)."""
    from ce_runtime.cli.run_output import passed_gate_lines, summary_table, trial_lines

    lost = [dict(r) for r in lost]
    summary = None
    if worker is not None:
        from ce_runtime.store.report_job import RunReports

        summary = worker.write_reports(RunReports(
            run_dir, run_id, config, [worker.reference(r) for r in records], total,
            interrupted, junit_xml, lost, error, list(unrun), dict(unrun_files or {})),
            meanwhile=_load_summary_table)
    if summary is None:
        from ce_runtime.report.run_end import write_run_reports

        summary = write_run_reports(run_dir, run_id, config, records, total, interrupted,
                                    junit_xml, lost, error, unrun, unrun_files)
    summary_table(records)
    from ce_runtime.store.record import STATUSES

    by_status = summary.get("by_status", {})
    order = [*(s for s in STATUSES if s in by_status),  # the reports' order
             *sorted(s for s in by_status if s not in STATUSES)]
    counts = ", ".join(f"{by_status[s]} {s}" for s in order)
    click.echo(f"{len(records)}/{total} trial(s): {counts or 'none'}; report: "
               f"{os.path.join(run_dir, 'report.md')}")
    for line in passed_gate_lines(summary):
        click.echo(line)
    if summary.get("exit_code"):  # why it is not a pass: a gate, a rate, a Ctrl-C ...
        for reason in summary.get("exit_reasons") or ():  # the run's own path for RUN
            click.echo(f"not passed: {reason.replace('--resume RUN`', f'--resume {run_dir}`')}")
    for line in trial_lines(records, os.path.join(run_dir, "report.md"), quiet):
        click.echo(line)
    if junit_xml and not quiet:  # said as `--sarif` says its file (and as it, not with -q)
        from ce_runtime.report.junit import junit_counts

        click.echo(f"JUnit XML: {junit_xml} ({junit_counts(junit_xml)})", err=True)
    for r in lost:
        click.echo(f"ce run: trial {r['trial_id']} lost: {r['error']}", err=True)
    return 1 if lost else int(summary.get("exit_code", 1))
