"""The `ce` command. Subcommands load lazily so `ce --help` imports almost nothing.

`entry` is `main` run as a process, which ends without the interpreter's teardown: what
the installed `ce` script (ce_runtime/boot.py, which may start a report worker first)
and `python -m ce_runtime.cli` (whose package, click included, is loaded by then) call. Tests call `main` itself.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from ce_lang.api import __version__

_COMMANDS = {
    "compile": ("ce_runtime.cli.compile", "compile_cmd"),
    "criteria": ("ce_runtime.cli.criteria", "criteria_cmd"),
    "trace": ("ce_runtime.cli.trace", "trace_cmd"),
    "explain": ("ce_runtime.cli.explain", "explain_cmd"),
    "run": ("ce_runtime.cli.run", "run_cmd"),
    "rescore": ("ce_runtime.cli.rescore", "rescore_cmd"),
    "report": ("ce_runtime.cli.report", "report_cmd"),
    "model-server": ("ce_runtime.cli.model_server", "model_server_cmd"),
    "agents": ("ce_runtime.cli.agents", "agents_cmd"),
    "compare": ("ce_runtime.cli.compare", "compare_cmd"),
    "runs": ("ce_runtime.cli.runs", "runs_cmd"),
    "trial": ("ce_runtime.cli.trial", "trial_cmd"),
    "init": ("ce_runtime.cli.init", "init_cmd"),
}


# One-line help shown by `ce --help` without importing any subcommand.
_SHORT_HELP = {
    "compile": "Check task files and resolve every trial they define.",
    "criteria": "Browse criterion definitions: docs, signatures, effects.",
    "explain": "Explain a plan, or why each criterion of a trial scored as it did.",
    "run": "Run the agent on every trial and grade it, into a run directory.",
    "rescore": "Grade an archived run again, offline, with the same or new criteria.",
    "report": "Regenerate a run's report (md, json, junit, html, sarif) from its results.",
    "trace": "Dump traces, and import foreign transcripts as traces.",
    "model-server": "Serve a scripted model session (Anthropic and OpenAI APIs), offline.",
    "agents": "List the agents ce runs; install the npm ones (codex, opencode, pi).",
    "compare": "What regressed and improved between two runs; exit 1 on a regression.",
    "runs": "List the runs under a directory, newest first.",
    "trial": "A trial's archived workspace: list its files or restore them.",
    "init": "Write a starter task, experiment and reference solution to edit.",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _SHORT_HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        """Every command shares one rule: a bug in ce is one line and exit 3, never a
        traceback (CE_DEBUG=1 shows it); usage errors and exits pass through."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort,
                SystemExit, KeyboardInterrupt, BrokenPipeError):
            raise
        except Exception as exc:
            if os.environ.get("CE_DEBUG"):
                raise
            click.echo(f"ce: internal error ({type(exc).__name__}: {exc}); this is a bug in "
                       "ce. Re-run with CE_DEBUG=1 for the traceback.", err=True)
            sys.exit(3)

    def main(self, *args, **kwargs):
        """A reader that stops early (`ce criteria list | head -1`) ends ce quietly: no
        traceback, no exit 3, exit 1 as Python does on EPIPE (see the Python docs' "Note
        on SIGPIPE"). stdout is flushed here, so a pipe that closed after the last write
        is caught too, not at interpreter exit."""
        try:
            try:
                return super().main(*args, **kwargs)
            finally:
                sys.stdout.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # the final flush at exit writes nowhere
            sys.exit(1)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click draws its did-you-mean from `self.commands`, which a lazy group leaves
        empty: `ce compil` said only "No such command" where `ce criteria lst` suggests."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            raise click.exceptions.NoSuchCommand(
                exc.command_name, possibilities=self.list_commands(ctx), ctx=ctx) from None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = _COMMANDS.get(name)
        if target is None:
            return None
        module = importlib.import_module(target[0])
        return getattr(module, target[1])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"],
                                              "max_content_width": 100})
@click.version_option(__version__, prog_name="ce")
def main() -> None:
    """ce evaluates AI coding agents.

    A task is a YAML file: a prompt, an agent, a sandbox and weighted success criteria.
    ce compiles it, runs the agent, records a trace, scores it and explains every score.

    \b
    Start here:
      ce init my-evals                  a starter task, experiment and reference solution
      ce compile tasks/                 check every task file, print diagnostics
      ce compile TASK.yaml -e EXP.yaml  resolve a task under an experiment's variants
      ce compile --explain CE0101       what a diagnostic code means
      ce criteria list                  the standard criteria; `show NAME` documents one
    """



def entry() -> None:
    """`main` as a process: once the command is done (its files written and closed, its
    atexit handlers run, stdout and stderr flushed) the process ends with `os._exit`.
    Python's own shutdown would then only free memory, module by module: 60-100 ms after
    a `ce run` that loaded Polars and the compiler, for nothing anyone sees. Falls back to
    the ordinary exit while a non-daemon thread still runs (Python would wait for it) or
    when CE_SLOW_EXIT is set (a tool that hooks the interpreter's teardown)."""
    try:
        main()
    except SystemExit as done:
        code = done.code
    else:  # click's standalone mode always exits; kept for safety
        code = 0
    if os.environ.get("CE_SLOW_EXIT") or _other_threads_running():
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # what the interpreter does with sys.exit("text")
        print(code, file=sys.stderr)
        code = 1
    import atexit
    import contextlib

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # a reader that left; a closed stdout
        code = code or 1
    with contextlib.suppress(BrokenPipeError, ValueError):
        sys.stderr.flush()
    os._exit(code & 0xFF)  # as the kernel truncates sys.exit(256) or sys.exit(-1)


def _other_threads_running() -> bool:
    import threading

    return any(t.is_alive() and not t.daemon for t in threading.enumerate()
               if t is not threading.main_thread())
