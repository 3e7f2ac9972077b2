"""`ce compile`: static check of task and experiment files."""

from __future__ import annotations

import os
import sys

import click

from ce_runtime.cli.options import MAX_REPEATS, MAX_SAMPLE, count, experiment_option


@click.command("compile")
@click.argument("paths", nargs=-1, metavar="PATHS...")
@experiment_option(help="Experiment file whose variants are layered over every task.")
@click.option("-D", "overrides", multiple=True, metavar="PATH=VALUE",
              help="Override a setting on every task, e.g. -D agent.model=X "
                   "-D run_limits.max_turns=5 -D 'success_criteria[0].weight=2' (repeatable; "
                   "PATH as diagnostics print it, or a.0.b; VALUE is YAML).")
@click.option("--model", help="Shorthand for -D agent.model=MODEL.")
@click.option("--type", "--agent", "agent_type", metavar="TYPE",
              help="Shorthand for -D agent.type=TYPE (--agent, as for `ce run`).")
@click.option("--driver", metavar="DRIVER",
              help="Shorthand for -D sandbox.driver=DRIVER.")
@click.option("--repeats", type=count(MAX_REPEATS), help="Trials per task and variant.")
@click.option("--sample", type=count(MAX_SAMPLE),
              help="Keep N dataset rows per task (uniform, seeded).")
@click.option("--allow-path", "allow_paths", multiple=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False),
              help="Let task paths (prompt files, templates, references ...) resolve into "
                   "DIR, outside the suite root (repeatable; see `ce compile --explain "
                   "CE0216`).")
@click.option("--emit", "emit_dir", type=click.Path(file_okay=False),
              help="Write each resolved plan to DIR/plans/<hash>.json and DIR/trials.json.")
@click.option("-f", "--format", "fmt", type=click.Choice(["human", "json", "sarif"]),
              default="human", show_default=True, help="How to print diagnostics.")
@click.option("--explain", "explain_code", metavar="CODE",
              help="Explain a diagnostic code (e.g. CE0101; `all` lists every code) and exit.")
@click.option("-q", "--quiet", is_flag=True, help="Print errors only, and no summary line.")
@click.option("--no-cache", is_flag=True,
              help="Compile even if an identical compile is cached (also CE_NO_COMPILE_CACHE=1"
                   "). The cache replays a compile's output only while every file, listing, "
                   "glob and setting it consulted, and ce itself, are unchanged.")
def compile_cmd(paths, experiment, overrides, model, agent_type, driver, repeats, sample,
                allow_paths, emit_dir, fmt, explain_code, quiet, no_cache):
    """Check task files and resolve every trial they define.

    PATHS are task files, directories (searched recursively for *.yaml / *.yml; files
    that are neither tasks nor experiments are skipped) or globs. Every task is
    resolved under every variant of the experiment and every dataset row; all problems
    are reported in one pass, each with file:line:col.

    \b
    Exit status: 0 no errors (warnings allowed), 1 errors in the files,
    2 bad usage (no such path, a -D without `=`, no experiment file; the files are
    still checked), 3 internal error.

    \b
    Examples:
      ce compile tasks/
      ce compile tasks/hello_world.yaml -e experiments/ab.yaml --emit out/
      ce compile 'suite/**/*.yaml' -D run_limits.max_turns=10 --format sarif > ce.sarif
    """
    if explain_code:
        _explain(explain_code)
        return
    if not paths:
        raise click.UsageError("give at least one task file, directory or glob")
    color = sys.stderr.isatty() and "NO_COLOR" not in os.environ
    options = dict(experiment=experiment, overrides=tuple(overrides), model=model,
                   agent_type=agent_type, driver=driver, repeats=repeats, sample=sample,
                   allow_paths=tuple(allow_paths))
    cache = key = None
    if not no_cache:
        from ce_lang.api import compile_cache as cache

        if cache.disabled_by_env():
            cache = None
    if cache is not None:
        request = ("compile", tuple(paths), tuple(sorted(options.items())), emit_dir, fmt,
                   quiet, color, sys.stdout.isatty(), sys.stderr.isatty())
        key = cache.make_key(request, _CODE)
        hit = cache.lookup(key, {"host_limits": _host_limits})
        if hit is not None:  # the compiler is not even imported
            actions, code = hit  # printed through click.echo as a compile prints them
            _replay(actions)
            sys.exit(code)
    out = _Out()
    if cache is None:
        code = _compile(paths, options, emit_dir, fmt, quiet, color, out)
    else:
        with cache.recording() as recorder, WarningsSeen() as warned:
            code = _compile(paths, options, emit_dir, fmt, quiet, color, out)
        if not warned.seen:  # a Python warning went to stderr: not replayable
            cache.store(key, recorder, out.actions, code)
    sys.exit(code)


# the command's own code, in every cache key besides ce_lang's
_CODE = (os.path.abspath(__file__),
         os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py"))


def _host_limits() -> dict:
    """What this host's sandboxes can enforce (probed only for a task setting a limit)."""
    from ce_runtime.execute.sandbox import host_limits

    return host_limits()


def _compile(paths, options: dict, emit_dir, fmt, quiet, color, out: _Out) -> int:
    from ce_lang.api import (
        CompileOptions,
        __version__,
        compile_paths,
        render_human,
        render_json,
        render_sarif,
    )

    result = compile_paths(paths, CompileOptions(host_limits=_host_limits, **options))
    diags = [d for d in result.diagnostics if not quiet or d.severity == "error"]
    summary = {
        "tasks": result.task_files,
        "trials": len(result.trials),
        "plans": len({t.plan_hash for t in result.trials}),
        "errors": result.errors,
        "warnings": result.warnings,
    }
    if fmt == "json":
        out.echo(render_json(diags, summary), nl=False)
    elif fmt == "sarif":
        out.echo(render_sarif(diags, __version__), nl=False)
    else:
        out.echo(render_human(diags, result.sources, color=color), nl=False, err=True)
        if not quiet:
            out.echo(_summary_line(summary), err=True)
    if emit_dir and not result.usage_error and result.errors == 0:
        try:
            _emit(emit_dir, result, out)
        except OSError as exc:  # --emit under a file, a read-only or missing mount ...
            where = exc.filename or emit_dir
            out.echo(f"ce compile: cannot write {where}: {exc.strerror or exc}; --emit "
                     "needs a directory it can create or write", err=True)
            return 2
    elif emit_dir:
        out.echo(f"nothing written to {emit_dir}: fix the errors first", err=True)
    if result.usage_error:
        return 2
    return 1 if result.errors else 0


class _Out:
    """What the command prints and writes, done and logged: a cache hit replays the log."""

    def __init__(self) -> None:
        self.actions: list[tuple] = []

    def echo(self, text: str, nl: bool = True, err: bool = False) -> None:
        self.actions.append(("echo", text, nl, err))
        click.echo(text, nl=nl, err=err)

    def makedirs(self, path: str) -> None:
        self.actions.append(("mkdir", path))
        os.makedirs(path, exist_ok=True)

    def write_json(self, path: str, value) -> None:
        from ce_runtime.store.atomic import write_json_atomic

        self.actions.append(("json", path, value))
        write_json_atomic(path, value)


def _replay(actions: list[tuple]) -> None:
    out = _Out()
    for action in actions:
        if action[0] == "echo":
            out.echo(action[1], nl=action[2], err=action[3])
        elif action[0] == "mkdir":
            out.makedirs(action[1])
        else:
            out.write_json(action[1], action[2])


class WarningsSeen:
    """Notes whether Python printed a warning (a regex's FutureWarning ...) meanwhile."""

    def __enter__(self) -> WarningsSeen:
        import warnings

        self.seen, self._shown = False, warnings.showwarning

        def show(*args, **kwargs):
            self.seen = True
            return self._shown(*args, **kwargs)

        warnings.showwarning = show
        return self

    def __exit__(self, *exc: object) -> None:
        import warnings

        warnings.showwarning = self._shown


def _summary_line(s: dict) -> str:
    def n(count: int, word: str) -> str:
        return f"{count} {word}{'' if count == 1 else 's'}"

    status = "ok" if s["errors"] == 0 else "failed"
    return (f"compile {status}: {n(s['tasks'], 'task file')}, {n(s['trials'], 'trial')} "
            f"({n(s['plans'], 'distinct plan')}), {n(s['errors'], 'error')}, "
            f"{n(s['warnings'], 'warning')}")


def _emit(out_dir: str, result, out: _Out) -> None:
    from ce_lang.api import plan_to_json, trial_to_json

    out.makedirs(os.path.join(out_dir, "plans"))
    written = set()
    for trial in result.trials:
        if trial.plan_hash not in written:
            written.add(trial.plan_hash)
            out.write_json(os.path.join(out_dir, "plans", f"{trial.plan_hash}.json"),
                           {"hash": trial.plan_hash, "plan": plan_to_json(trial.plan)})
    out.write_json(os.path.join(out_dir, "trials.json"),
                   {"trials": [trial_to_json(t) for t in result.trials]})
    out.echo(f"wrote {len(written)} plan(s) and trials.json to {out_dir}", err=True)


def _explain(code: str) -> None:
    from ce_lang.api import CODES

    if code.lower() == "all":
        for entry in CODES.values():
            click.echo(f"{entry.code}  {entry.severity:<7}  {entry.title}")
        return
    entry = CODES.get(code.upper())
    if entry is None:
        raise click.BadParameter(f"unknown code {code!r}", param_hint="--explain")
    click.echo(f"{entry.code} ({entry.severity}): {entry.title}\n\n{entry.explanation}")
