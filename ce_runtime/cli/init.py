"""`ce init`: a starter task, an experiment and a reference solution to edit."""

from __future__ import annotations

import os
import sys

import click

TASK = """\
# A starter task: the agent writes greet.py; three criteria check it.
# Edit the prompt and the criteria; `ce compile` says what is wrong, with did-you-mean.
task_id: greet
description: >-
  The agent writes greet.py, which prints a greeting for the name given on the
  command line.
tags: [starter]

initial_prompt: |
  Write a Python script greet.py. `python greet.py Ada` must print exactly:

  Hello, Ada!

agent:
  type: claude-code
  allowed_tools: [Read, Write, Edit, Bash]

run_limits:
  max_turns: 10
  task_timeout: 300

# What `ce run --agent oracle` applies instead of an agent: it proves the task solvable
# and its criteria able to pass. A real agent never sees it.
reference:
  directory: reference        # copied into the workspace (relative to this file)

success_criteria:
  - type: file_exists
    path: greet.py
    description: greet.py was written

  - type: file_contains
    path: greet.py
    includes: ["sys.argv"]
    description: the name comes from the command line
    weight: 0.5

  - type: run_command
    command: python greet.py Ada
    expected_stdout: "Hello, Ada!"
    stdout_match: exact
    timeout: 10
    description: "`python greet.py Ada` prints the greeting"
    weight: 2.0
"""

REFERENCE = """\
import sys

print(f"Hello, {sys.argv[1]}!")
"""

EXPERIMENT = """\
# An experiment: every task under each variant, compared in report.md.
#   ce run tasks/ -e experiments/models.yaml      (needs ANTHROPIC_API_KEY)
experiment_id: models
description: Two Claude models on the same tasks.

defaults:
  repeats: 3                  # trials per task and variant: pass@k and intervals

variants:
  - variant_id: sonnet
    agent: {model: claude-sonnet-4-6}
  - variant_id: opus
    agent: {model: claude-opus-4-1}
"""

FILES = {
    os.path.join("tasks", "greet.yaml"): TASK,
    os.path.join("tasks", "reference", "greet.py"): REFERENCE,
    os.path.join("experiments", "models.yaml"): EXPERIMENT,
}


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init_cmd(directory: str) -> None:
    """Write a starter task, an experiment and a reference solution into DIRECTORY.

    \b
    DIRECTORY (default: the current directory) gets
      tasks/greet.yaml               a task: prompt, agent, limits, three criteria
      tasks/reference/greet.py       its reference solution (what the oracle applies)
      experiments/models.yaml        an experiment: the tasks under two models
    An existing file is never overwritten: nothing is written then (exit 2).

    \b
    Examples:
      ce init my-evals && cd my-evals
      ce compile .                   check the files
      ce run . --agent oracle        prove the task solvable, offline
    """
    targets = {rel: os.path.join(directory, rel) for rel in FILES}
    present = [path for path in targets.values() if os.path.lexists(path)]
    if present:
        click.echo("ce init: nothing written: " + ", ".join(present) + " already "
                   "exist(s); choose another directory or move them", err=True)
        sys.exit(2)
    written: list[str] = []
    for rel, path in targets.items():
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(FILES[rel])
        except OSError as exc:  # a read-only or missing parent, a full disk ...
            done = f" (written: {', '.join(written)})" if written else " (nothing written)"
            click.echo(f"ce init: cannot write {exc.filename or path}: "
                       f"{exc.strerror or exc}{done}", err=True)
            sys.exit(2)
        written.append(path)
    where = "." if os.path.abspath(directory) == os.getcwd() else directory
    click.echo(f"wrote {len(FILES)} files in {where}:")
    for rel in FILES:
        click.echo(f"  {rel}")
    tasks = os.path.join(where, "tasks")
    click.echo("\nnext:")
    steps = ((f"ce compile {where}", "check the task and the experiment"),
             (f"ce run {where} --agent oracle", "apply the reference solution: it must pass"),
             ("ce explain runs/latest --trial default/greet", "why each criterion scored"),
             (f"ce run {tasks} -e {os.path.join(where, 'experiments', 'models.yaml')}",
              "the real agent, two models (ANTHROPIC_API_KEY)"))
    width = min(max(len(c) for c, _ in steps), 60)  # a long path: its line wraps instead
    for command, why in steps:
        if len(command) > width:
            click.echo(f"  {command}\n  {'':<{width}}  {why}")
        else:
            click.echo(f"  {command:<{width}}  {why}")
