"""`ce agents`: the agents ce can run, and installing the ones that come from npm."""

from __future__ import annotations

import sys

import click


@click.group("agents")
def agents_cmd():
    """The agents ce runs: list them, install the npm ones ahead of a run.

    \b
    Examples:
      ce agents list                   what each agent runs, and what is installed
      ce agents install                every npm agent (codex, opencode, pi)
      ce agents install codex
    """


@agents_cmd.command("list")
def list_cmd():
    """Every built-in agent, what it runs, and whether its CLI is installed.

    \b
    Example:
      ce agents list
    """
    from ce_runtime.execute.agents import BUILTIN
    from ce_runtime.execute.sandbox import tools

    for name in sorted(BUILTIN):
        if name in tools.NPM_AGENTS:
            package, version, _ = tools.NPM_AGENTS[name]
            where = tools.installed(name)
            state = f"installed: {where}" if where else "not installed yet (ce agents install)"
            if where and name in tools.NEEDS_RIPGREP:  # its search tools run it
                from ce_runtime.execute.sandbox import ripgrep

                rg = ripgrep.find(tools.agent_dir(name))
                state += f" (ripgrep: {rg or 'none yet: ce agents install ' + name})"
            click.echo(f"{name:<12} {package}@{version}  {state}")
        elif name == "claude-code":  # no npm install: the CLI comes in the SDK's wheel
            where = _bundled_claude()
            state = f"installed: {where}" if where else \
                "not installed (claude-agent-sdk without its bundled CLI: reinstall ce)"
            click.echo(f"{name:<12} the Claude Code CLI bundled in claude-agent-sdk  {state}")
        else:
            click.echo(f"{name:<12} built into ce")


@agents_cmd.command("install")
@click.argument("names", nargs=-1, metavar="[NAME...]")
def install_cmd(names):
    """Install the npm agents NAMES (default: all of them) into ce's cache.

    `ce run` installs an agent on first use too; this does it ahead (CI images, offline
    machines later). Versions are pinned by ce.

    \b
    Examples:
      ce agents install
      ce agents install codex opencode
    """
    from ce_runtime.execute.sandbox import tools

    wanted = list(names) or list(tools.NPM_AGENTS)
    unknown = [n for n in wanted if n not in tools.NPM_AGENTS]
    if unknown:  # a name ce does not install is bad input, said before installing any
        from ce_lang.api import did_you_mean

        hint = did_you_mean(unknown[0], list(tools.NPM_AGENTS))
        raise click.BadParameter(
            f"{', '.join(unknown)}: not an npm agent ce installs (those are "
            f"{', '.join(sorted(tools.NPM_AGENTS))})" + (f"; {hint}" if hint else ""),
            param_hint="NAME")
    failed = False
    for name in wanted:
        try:
            path = tools.install(name, say=lambda msg: click.echo(msg, err=True))
        except tools.ToolError as exc:
            click.echo(f"ce agents install: {exc}", err=True)
            failed = True
            continue
        click.echo(f"{name}: {path}")
    sys.exit(1 if failed else 0)


def _bundled_claude() -> str | None:
    """The Claude Code CLI inside the claude-agent-sdk wheel (where the claude-code
    adapter runs it from), or None when the package or its binary is not there. Found
    without importing the SDK (or the adapter: agents load through the registry)."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = os.path.join(root, "_bundled", "claude")
        if os.path.isfile(path):
            return path
    return None
