"""`ce model-server`: the scripted model server, for your own agent experiments."""

from __future__ import annotations

import sys
import time

import click


@click.command("model-server")
@click.option("--script", "script_path", required=True,
              type=click.Path(exists=True, dir_okay=False),
              help="The scripted session: a YAML file with `steps` (and `rows`, `judge`, "
                   "`agent_judge`; its `user_turns`, a simulated user's lines, are "
                   "read by `ce run`, not served). Its format: docs/agents.md.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@click.option("--row", help="Play the steps of this dataset row (`rows:` in the script).")
@click.option("--workspace", help="What `{workspace}` in the steps becomes (default: the "
                                   "working directory the agent states in its prompt).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False),
              help="Append every request (JSON lines: API, step, reply, usage) to this file.")
@click.option("--judge", is_flag=True,
              help="Serve as a judge: plain requests get the `judge` verdicts, streamed "
                   "sessions the `agent_judge` steps.")
def model_server_cmd(script_path, port, row, workspace, log_path, judge):
    """Serve a scripted model session on 127.0.0.1.

    It speaks the Anthropic Messages API (streaming and JSON, count_tokens, models) and
    the OpenAI Chat Completions and Responses APIs (streaming and JSON), and answers
    each model call with the script's next step, chosen by the conversation's position
    (client retries and side requests never desynchronize it; parallel sessions are
    fine). Point an agent at it, for example:

    \b
      ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=x claude -p "..."
      OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 OPENAI_API_KEY=x your-agent ...

    Ctrl-C stops it.

    \b
    Examples:
      ce model-server --script session.yaml --port 8765
      ce model-server --script session.yaml --log calls.jsonl
    """
    from ce_runtime.model_server import ModelServer, Script, ScriptError
    from ce_runtime.model_server.script import load_script_file

    try:  # YAML and script errors alike: one line with the file's line:col
        data = load_script_file(script_path)
        script = Script.from_data(data, row=row, workspace=workspace, where=script_path)
    except ScriptError as exc:
        click.echo(f"ce model-server: {exc}", err=True)
        sys.exit(2)
    if not ((script.judge or script.agent_judge) if judge else script.steps):  # nothing
        what = "`judge` verdicts nor `agent_judge` steps (--judge)" if judge else "steps" + (
            f" for row {row}" if row else "")
        click.echo(f"ce model-server: {script_path} has no {what} to serve", err=True)
        sys.exit(2)
    try:
        server = ModelServer(script, judge=judge, port=port, log_path=log_path)
    except OSError as exc:
        click.echo(f"ce model-server: cannot listen on port {port}: {exc.strerror}", err=True)
        sys.exit(2)
    with server:
        click.echo(f"serving {script_path} ({len(script.steps)} steps) at {server.url}",
                   err=True)
        click.echo(server.url)  # the one line a script reads
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            click.echo(f"\nstopped after {len(server.log)} request(s)", err=True)
