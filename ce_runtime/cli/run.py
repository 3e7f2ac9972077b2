"""`ce run`: run tasks end to end into a run directory, with reports and resume."""

from __future__ import annotations

import json
import os
import sys

import click


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


@click.command("run")
@click.argument("paths", nargs=-1, metavar="PATHS...")
@click.option("-e", "--experiment", type=click.Path(dir_okay=False),
              help="Experiment file: its variants are run against every task.")
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
@click.option("-j", "--jobs", type=click.IntRange(min=1),
              help="Trials run at the same time.  [default: 1; --resume keeps the run's "
                   "unless given]")
@click.option("--executor", type=click.Choice(["local", "ray"]),
              help="What runs the trials: local (an asyncio pool in this process; the "
                   "default) or ray (Ray tasks; pip install 'ce[ray]'). --resume keeps the "
                   "run's executor unless given.")
@click.option("--ray-address", metavar="ADDR",
              help="With --executor ray: the cluster to join (`auto`, or HOST:PORT); by "
                   "default a local Ray instance is started for the run.")
@click.option("--repeats", type=click.IntRange(min=1), help="Trials per task and variant.")
@click.option("--sample", type=click.IntRange(min=1), help="Keep N dataset rows per task.")
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
                   "its latest): only trials without a task.json are run.")
@click.option("--junit-xml", type=click.Path(dir_okay=False),
              help="Also write JUnit XML here (--resume writes the run's again unless given).")
@click.option("--sarif", type=click.Path(dir_okay=False),
              help="Also write SARIF 2.1.0 here: a result per failed criterion, located in "
                   "its task file (GitHub code scanning's upload-sarif; --resume writes the "
                   "run's again unless given).")
@click.option("--min-pass-rate", type=click.FloatRange(0, 1), metavar="RATE",
              help="Pass (exit 0) when at least RATE (0..1) of each variant's trials "
                   "succeed, instead of every trial; an ERROR trial is not a pass. Suite "
                   "gates still apply. --resume keeps the run's unless given.")
@click.option("--scripted-model", is_flag=True,
              help="Agents that call a model (claude-code ...) talk to a local server that "
                   "replays the task's scripted session (agent.model_script, or "
                   "<task>.<agent type>.model.yaml beside the task): the real agent CLI, "
                   "offline, no API key.")
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
    of each variant's trials) and every suite gate passed; 1 otherwise (or
    interrupted); 2 bad input.

    \b
    Examples:
      ce run tasks/ --agent oracle -j 4        prove every task solvable
      ce run tasks/hello_world.yaml -e exp.yaml --repeats 3
      ce run --resume runs/latest              finish an interrupted run
      ce run tasks/ --min-pass-rate 0.8        gate CI on 80% of trials passing
      ce run tasks/ --agent oracle --run-dir out/smoke > results.txt
    """
    state: dict = {"sarif": params.pop("sarif")}  # a resume may take the run's
    try:
        _run(state, **params)
    except SystemExit as done:
        sarif = state.get("sarif")
        if sarif and state.get("run_dir") and done.code in (0, 1):
            from ce_runtime.report.sarif import sarif_after_run

            sarif_after_run(state["run_dir"], sarif)
        raise
    except BrokenPipeError:
        raise
    except OSError as exc:  # a write failed: read-only run directory, no space ...
        _write_failed(exc, state.get("run_dir"))


def _run(state, paths, experiment, overrides, agent_type, model, driver, jobs, repeats, sample,
         allow_paths, tags, exclude_tags, runs_root, resume_dir, junit_xml, scripted_model,
         judge_replies, executor=None, ray_address=None, quiet=False, run_dir=None,
         no_cache=False, min_pass_rate=None):
    from ce_runtime.cli.report_worker import ReportWorker

    worker = ReportWorker.start()  # imports Polars on another CPU meanwhile
    try:
        _run_with(state, worker, paths, experiment, overrides, agent_type, model, driver,
                  jobs, repeats, sample, allow_paths, tags, exclude_tags, runs_root,
                  resume_dir, junit_xml, scripted_model, judge_replies, executor,
                  ray_address, quiet, run_dir, no_cache, min_pass_rate)
    finally:
        if worker is not None:
            worker.close()


def _run_with(state, worker, paths, experiment, overrides, agent_type, model, driver, jobs,
              repeats, sample, allow_paths, tags, exclude_tags, runs_root, resume_dir,
              junit_xml, scripted_model, judge_replies, executor, ray_address, quiet,
              run_dir, no_cache, min_pass_rate):
    from ce_lang.api import render_human
    from ce_runtime.cli import run_dirs
    from ce_runtime.cli import run_preflight as P
    from ce_runtime.cli.run_output import Progress
    from ce_runtime.execute import suite as R

    P.agent_name(agent_type)
    recorded_id = None
    jobs_from = ""  # where a resume's -j came from, for the start line
    if resume_dir:
        if run_dir:
            raise click.UsageError("--resume names the run directory; drop --run-dir")
        from ce_runtime.cli.pick import latest_run

        resume_dir = latest_run(resume_dir, "run", "--resume")
        try:
            meta = R.load_json(os.path.join(resume_dir, "run.json"))
            meta["args"]["paths"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise click.BadParameter(f"{resume_dir} is not a run directory of `ce run` "
                                     f"(its run.json is missing or unreadable: {exc})",
                                     param_hint="--resume") from None
        args = meta["args"]
        _resume_keeps(paths, experiment, overrides, agent_type, model, driver, repeats,
                      sample, tags, exclude_tags)
        recorded_id = meta.get("run_id")
        paths, experiment, overrides = args["paths"], args["experiment"], args["overrides"]
        agent_type, model, driver = args["agent_type"], args["model"], args["driver"]
        repeats, sample = args["repeats"], args["sample"]
        tags, exclude_tags = args["tags"], args["exclude_tags"]
        allow_paths = (*args.get("allow_paths", ()), *allow_paths)
        judge_replies = judge_replies or args.get("judge_replies")  # grade as it began
        scripted_model = scripted_model or bool(args.get("scripted_model"))
        if executor is None or executor == args.get("executor"):
            # the run's executor, and its cluster, unless told otherwise: `--executor ray`
            # again does not mean "a new local Ray" for a run made on a cluster
            executor = args.get("executor")
            ray_address = ray_address or args.get("ray_address")
        if jobs is None:  # the run's concurrency unless told otherwise
            jobs, jobs_from = _recorded_jobs(args.get("jobs"))
        if min_pass_rate is None:  # the run's gate unless told otherwise
            min_pass_rate = args.get("min_pass_rate")
        # the run's reports written again where it was asked for them, unless told
        junit_xml = junit_xml or _recorded_path(args.get("junit_xml"))
        state["sarif"] = state.get("sarif") or _recorded_path(args.get("sarif"))
        if judge_replies and not os.path.isfile(judge_replies):
            raise click.UsageError(f"--judge-replies file {judge_replies!r} not found")
        run_dir = resume_dir
        lock = _lock(run_dir)
        state["run_dir"] = run_dir  # before anything is written
    elif not paths:
        raise click.UsageError("give at least one task file, directory or glob")
    if jobs is None:
        jobs = 1
    # --agent replaces the agent at run time (recorded in each task.json), except on
    # `agent: {type: none}` tasks, which have no agent to replace
    from ce_runtime.cli.run_plans import compile_for_run

    # `--agent none` is `-D agent.type=none`: the same contract (no prompt, no trace
    # criteria); any other --agent is checked against each task (CE0220 for the oracle)
    result = compile_for_run(tuple(paths), dict(
        experiment=experiment, overrides=tuple(overrides), model=model,
        driver=driver, repeats=repeats, sample=sample, allow_paths=tuple(allow_paths),
        agent_type="none" if agent_type == "none" else None,
        run_agent=agent_type if agent_type != "none" else None), cached=not no_cache)
    color = sys.stderr.isatty() and "NO_COLOR" not in os.environ
    if result.errors:
        errors = [d for d in result.diagnostics if d.severity == "error" or not quiet]
        click.echo(render_human(errors, result.sources, color=color), err=True, nl=False)
        click.echo(f"ce run: {result.errors} error(s) in the task files; nothing was run",
                   err=True)
        sys.exit(2)
    if result.warnings and not quiet:  # what `ce compile` says, `ce run` says
        click.echo(render_human(result.diagnostics, result.sources, color=color), err=True,
                   nl=False)
    trials = select(result.trials, tuple(tags), tuple(exclude_tags))
    if not trials:
        click.echo("ce run: no trial to run (check --tags / skip:)", err=True)
        sys.exit(2)
    P.drivers(trials)
    executor = _check_executor(executor or "local", ray_address)
    P.agents(trials, agent_type)
    P.costs(trials, agent_type, quiet)
    P.models(trials, agent_type, scripted_model)
    P.judges(trials, judge_replies)
    if not resume_dir:
        run_dir = run_dirs.choose(run_dir, runs_root)
        state["run_dir"] = run_dir
        lock = _lock(run_dir)
    run_id = run_dirs.run_id(run_dir, recorded_id)
    # absolute paths: `--resume` may run from another directory
    config = {"paths": [os.path.abspath(p) for p in paths],
              "experiment": os.path.abspath(experiment) if experiment else None,
              "overrides": list(overrides), "agent_type": agent_type, "model": model,
              "driver": driver, "repeats": repeats, "sample": sample, "tags": list(tags),
              "exclude_tags": list(exclude_tags),
              "allow_paths": [os.path.abspath(p) for p in allow_paths],
              "judge_replies": os.path.abspath(judge_replies) if judge_replies else None,
              "scripted_model": scripted_model, "executor": executor,
              "ray_address": ray_address, "jobs": jobs, "min_pass_rate": min_pass_rate,
              "junit_xml": os.path.abspath(junit_xml) if junit_xml else None,
              "sarif": os.path.abspath(state["sarif"]) if state.get("sarif") else None}
    for repaired in R.write_plans(run_dir, trials, result.plan_files):
        click.echo(f"ce run: damaged archive: {repaired}; written again from the task file",
                   err=True)
    done, damaged = R.already_run(run_dir, trials)
    if resume_dir:
        for why in damaged:
            click.echo(f"ce run: {why}; the trial runs again", err=True)
        _say_replanned(run_dir, trials, done)
    todo = [t for t in trials if t.trial_id not in done]
    R.write_run_json(run_dir, {"run_id": run_id, "status": "running", "created_at": R.now_iso(),
                               "args": config, "trials": len(trials)})
    if not quiet:
        click.echo(f"run {run_dir}: {len(trials)} trial(s), {len(trials) - len(todo)} already "
                   f"done, -j {jobs}{jobs_from}", err=True)
    progress = Progress(len(trials), len(trials) - len(todo), quiet)
    interrupted = False
    loopback = None
    if judge_replies:
        import yaml

        from ce_runtime.model_server import ModelServer

        with open(judge_replies, encoding="utf-8") as fh:
            loopback = ModelServer(yaml.safe_load(fh) or {}, judge=True).__enter__()
        os.environ["CE_JUDGE_URL"] = loopback.url
    try:
        from ce_runtime.execute.executor import ExecutorUnavailable

        try:
            stopped_by = _run_until_stopped(R.execute(
                todo, run_dir, R.RunOptions(jobs=jobs, agent=agent_type, uv_cache=_uv_cache(),
                                            scripted_model=scripted_model, executor=executor,
                                            ray_address=ray_address),
                progress.start, progress.done))
        except ExecutorUnavailable as exc:  # e.g. no Ray cluster at --ray-address
            stopped_by = f"ce run: {exc}"
        if stopped_by is not None:
            interrupted = True
            click.echo(f"\n{stopped_by}: finished trials are kept; resume with "
                       f"`ce run --resume {run_dir}`", err=True)
    finally:
        progress.close()
        if loopback is not None:
            loopback.__exit__(None, None, None)
    records = R.collect(run_dir, trials)
    code = _finish(run_dir, run_id, config, records, len(trials), interrupted, junit_xml,
                   progress.lost, worker)
    os.close(lock)  # unlocked only once everything is written
    sys.exit(1 if interrupted else code)


def _resume_keeps(paths, experiment, overrides, agent_type, model, driver, repeats, sample,
                  tags, exclude_tags) -> None:
    """What a resume would silently drop (the run's own settings make its plans): a usage
    error naming each, not a run that is not what the user asked for."""
    given = [name for name, value in (
        ("PATHS", paths), ("-e", experiment), ("-D", overrides), ("--agent", agent_type),
        ("--model", model), ("--driver", driver), ("--repeats", repeats),
        ("--sample", sample), ("--tags", tags), ("--exclude-tags", exclude_tags)) if value]
    if given:
        raise click.UsageError(
            f"--resume finishes the run with the tasks and settings it started with; "
            f"{', '.join(given)} would change them (start a new run for that). A resume "
            "takes -j, --executor, --ray-address, --judge-replies, --junit-xml, --sarif, "
            "--min-pass-rate, --allow-path")


def _recorded_jobs(recorded) -> tuple[int, str]:
    """A resume's -j when none is given: the one run.json recorded (a run started before
    ce recorded it: 1, the default), with the start line's note on where it came from."""
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 1:
        return recorded, " (the run's)"
    return 1, " (the default: run.json records no -j)"


def _recorded_path(recorded) -> str | None:
    return recorded if isinstance(recorded, str) and recorded else None


def _say_replanned(run_dir: str, trials: list, done: set[str]) -> None:
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
        shown = ", ".join(replanned[:5]) + (f" and {len(replanned) - 5} more"
                                            if len(replanned) > 5 else "")
        click.echo(f"ce run: {len(replanned)} finished trial(s) ran with another plan (the "
                   f"task, the experiment or ce's criteria changed since): {shown}; they run "
                   "again and their results are replaced", err=True)


def _write_failed(exc: OSError, run_dir: str | None) -> None:
    """A write failure ends the run with exit 1, naming the path; run.json says so too
    when it can still be written (else the message says it could not)."""
    from ce_runtime.execute import suite as R

    if exc.filename:
        path = str(exc.filename) + (f" -> {exc.filename2}" if exc.filename2 else "")
        what = f"cannot write {path}: {exc.strerror or exc}"
    else:  # an OS error that names no file (a sandbox that could not start, ...)
        what = f"operating system error: {exc.strerror or exc}"
    click.echo(f"ce run: {what}", err=True)
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
    else:
        click.echo(f"ce run: {os.path.join(run_dir, 'run.json')} marked failed; finished "
                   f"trials are kept (`ce run --resume {run_dir}` once the cause is fixed)",
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


def _run_until_stopped(work) -> str | None:
    """Run the trials' coroutine; what stopped it early ("interrupted" for Ctrl-C,
    "SIGTERM received", ...) or None when it finished.

    SIGTERM and SIGHUP (a `kill`, a closed terminal, a CI job cancelled) end the run as
    Ctrl-C does: the trials are cancelled (their processes killed, their scratch
    removed). Their handler cancels the main task itself rather than raising SIGINT, so
    they work where SIGINT is ignored (a script's background job, nohup). A second signal
    while the run directory is being finished is noted and does not cut the writes."""
    import asyncio
    import signal

    received: list[str] = []
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task]] = []

    def on_signal(signum: int, _frame) -> None:
        first = not received
        received.append(f"{signal.Signals(signum).name} received")
        if first and running and not running[0][0].is_closed():
            loop, task = running[0]
            loop.call_soon_threadsafe(task.cancel)  # also wakes the loop's select()

    async def main():
        running.append((asyncio.get_running_loop(), asyncio.current_task()))
        if received:  # stopped while the loop was starting
            work.close()
            raise asyncio.CancelledError
        return await work

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)  # kept until ce exits: the finishing writes finish
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        return received[0] if received else "interrupted"
    except asyncio.CancelledError:
        if not received:
            raise
        return received[0]
    return received[0] if received else None


def _check_executor(name: str, ray_address: str | None) -> str:
    """The executor can run here (Ray installed for --executor ray), else exit 2."""
    from ce_runtime.execute.executor import ray_missing

    if ray_address and name != "ray":
        raise click.UsageError("--ray-address needs --executor ray")
    why = ray_missing() if name == "ray" else None
    if why:
        click.echo(f"ce run: {why}", err=True)
        sys.exit(2)
    return name


def _uv_cache() -> str:
    from ce_lang.api import ce_cache

    return ce_cache("uv")


def _finish(run_dir, run_id, config, records, total, interrupted, junit_xml,
            lost=(), worker=None) -> int:
    """run.json, parquet, report.md and .html, JUnit (by the report worker, or here
    without one) and the summary table; the exit code. A lost trial (its directory
    deleted while it ran) is listed and makes the exit 1."""
    from ce_runtime.cli.run_output import summary_table

    lost = [dict(r) for r in lost]
    summary = None
    if worker is not None:
        from ce_runtime.report.job import RunReports

        summary = worker.write_reports(RunReports(run_dir, run_id, config, records, total,
                                                  interrupted, junit_xml, lost))
    if summary is None:
        from ce_runtime.report.run_end import write_run_reports

        summary = write_run_reports(run_dir, run_id, config, records, total, interrupted,
                                    junit_xml, lost)
    summary_table(records)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(summary.get("by_status", {}).items()))
    click.echo(f"{len(records)}/{total} trial(s): {counts or 'none'}; report: "
               f"{os.path.join(run_dir, 'report.md')}")
    if summary.get("exit_code"):  # why the run is not a pass: a gate, a rate, a Ctrl-C
        for reason in summary.get("exit_reasons") or ():
            click.echo(f"not passed: {reason}")
    for r in lost:
        click.echo(f"ce run: trial {r['trial_id']} lost: {r['error']}", err=True)
    return 1 if lost else int(summary.get("exit_code", 1))
