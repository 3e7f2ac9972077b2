"""`ce trace`: read a trace as JSON lines; turn foreign transcripts into traces."""

from __future__ import annotations

import os
import stat
import sys

import click


@click.group("trace")
def trace_cmd() -> None:
    """Read traces and import transcripts of runs ce did not make.

    A trace is the record of one trial: every message, tool call, tool result, token
    count and decision, in order (a binary file, usually trace.msgpack in the trial's
    run directory). Imported transcripts become traces that can be scored like any run.

    \b
      ce trace dump runs/latest/default/hello/00/trace.msgpack     one JSON object per event
      ce trace dump T.msgpack | jq 'select(.type == "tool_call")'  just the tool calls
      ce trace import out.jsonl -o t.msgpack         Claude Code `-p --output-format
                                                     stream-json --verbose` output
      ce trace import ~/.claude/projects/x/SESSION.jsonl -o t.msgpack   a session file
      ce trace import results/x/task.json -o t.msgpack --task-id hello  coder_eval result
      ce trace import ~/.codex/sessions/2026/12/01/rollout-X.jsonl -o t.msgpack  Codex
    """


@trace_cmd.command("dump")
@click.argument("trace", type=click.Path(exists=True))
def dump_cmd(trace: str) -> None:
    """Print every event of TRACE as one JSON object per line.

    TRACE is a trace file or a trial's directory (its trace.msgpack is read).

    Each object has `type` first (run, agent_start, turn_start, message, tool_call,
    tool_result, usage, decision, agent_end, run_end, ...) and then the event's fields;
    `t` is seconds since the run started. A trace cut short by a crash still prints the
    events before the damage; the damage is reported on stderr with its byte offset.
    Exit status 1 only when the file holds bytes of which no event could be read (an
    empty file is a trace with no events: nothing printed, exit 0).

    \b
    Examples:
      ce trace dump runs/latest/default/hello_world/00/trace.msgpack
      ce trace dump runs/latest/default/hello_world/00
      ce trace dump TRACE | jq -c 'select(.type == "tool_call")'
    """
    import msgspec

    from ce_runtime.trace.events import event_to_dict, read_trace

    trace = trace_file(trace)
    result = read_trace(trace)
    out = sys.stdout.buffer
    encode = msgspec.json.Encoder().encode
    for event in result.events:
        out.write(encode(event_to_dict(event)) + b"\n")
    out.flush()
    n = len(result.events)
    unreadable = no_event_read(trace, result)
    if unreadable:
        click.echo(f"ce trace dump: {unreadable}", err=True)
        sys.exit(1)
    if result.truncated:
        click.echo(f"ce trace dump: {trace}: truncated at byte {result.bytes_read}: the file "
                   f"ends inside an event (a crash while writing?); {n} events read",
                   err=True)
    elif result.corrupt_at is not None:
        click.echo(f"ce trace dump: {trace}: undecodable event at byte {result.corrupt_at}; "
                   f"{n} events read before it", err=True)


def trace_file(path: str) -> str:
    """The trace file PATH names: PATH itself, or a trial directory's trace.msgpack."""
    if os.path.isdir(path):
        inner = os.path.join(path, "trace.msgpack")
        if not os.path.isfile(inner):
            raise click.BadParameter(
                f"{path} is a directory without a trace.msgpack: give a trace file or a "
                "trial's directory (runs/RUN/VARIANT/TASK/NN)", param_hint="TRACE")
        return inner
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise click.BadParameter(f"{path} is not a regular file (a FIFO or device is "
                                 "never read): give a trace file or a trial's directory",
                                 param_hint="TRACE")
    return path


def no_event_read(path: str, result) -> str | None:
    """Why a file read as a trace yielded nothing (not a ce trace: a transcript given as
    one, say), or None: it has events, or is empty."""
    if result.events or not (result.truncated or result.corrupt_at is not None):
        return None
    where = f"truncated at byte {result.bytes_read}" if result.truncated \
        else f"undecodable event at byte {result.corrupt_at}"
    return (f"{path}: no event could be read ({where}): not a ce trace, or one cut short "
            "before its first event; a trace is the trace.msgpack of a trial's directory, "
            "and `ce trace import` turns a transcript into one")


@trace_cmd.command("import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The trace file to write (replaced atomically).")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "claude-stream", "claude-session", "coder-eval",
                                 "codex-session"]),
              help="The transcript's format; auto tells them apart by content.")
@click.option("--task-id", help="Task id for the header (default: the coder_eval task_id, "
                                "else the file name).")
@click.option("--trial-id", help="Trial id for the header (default: the file name; for "
                                 "task.json, its folder).")
@click.option("--plan-hash", default="", help="Plan hash for the header (default: none).")
def import_cmd(source: str, output: str, fmt: str, task_id: str | None,
               trial_id: str | None, plan_hash: str) -> None:
    """Convert the transcript SOURCE into a ce trace.

    \b
    Formats:
      claude-stream   `claude -p --output-format stream-json --verbose` output
      claude-session  Claude Code's own transcript, $CLAUDE_CONFIG_DIR/projects/*/*.jsonl
      coder-eval      a coder_eval task.json (EvaluationResult with its iterations)
      codex-session   Codex's session log, $CODEX_HOME/sessions/*/*/*/rollout-*.jsonl
                      (as ce's codex agent reads it: a turn per model answer, usage
                      per answer priced by the session's model)

    One turn per assistant API message; tool uses become tool calls (Codex shell tools
    are normalized to Bash, apply_patch to Edit), tool results keep their error status, and a call with no
    result is left unresolved. Malformed lines are reported as warnings and skipped.
    Prints one summary line; exit status 1 when the format cannot be recognized, or
    when nothing of it could be read (a truncated file: a trace of no events is not
    written).

    \b
    Examples:
      ce trace import out.jsonl -o t.msgpack
      ce trace import results/x/task.json -o t.msgpack --task-id hello
    """
    from ce_runtime.trace.events import write_trace
    from ce_runtime.trace.importers import UnknownFormat, import_file

    try:
        result = import_file(source, fmt, task_id=task_id, trial_id=trial_id,
                             plan_hash=plan_hash)
    except UnknownFormat as exc:
        click.echo(f"ce trace import: {exc}", err=True)
        sys.exit(1)
    for line, message, col in result.warnings:  # FILE:LINE:COL, as diagnostics are
        where = source + (f":{line}" if line else "") + (f":{col}" if line and col else "")
        click.echo(f"{where}: warning: {message}", err=True)
    if len(result.events) <= 1 and result.warnings:  # a header and nothing of the agent's
        click.echo(f"ce trace import: {source}: nothing could be imported (the warnings "
                   f"above); {output} not written", err=True)
        sys.exit(1)
    try:
        write_trace(output, result.events)
    except OSError as exc:
        click.echo(f"ce trace import: cannot write {output}: {exc.strerror or exc}", err=True)
        sys.exit(2)
    unresolved = f" ({result.unresolved} unresolved)" if result.unresolved else ""
    click.echo(f"{output}: {_count(len(result.events), 'event')}, "
               f"{_count(result.tool_calls, 'tool call')}{unresolved}, "
               f"{_count(len(result.warnings), 'warning')} [{result.format}]")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
