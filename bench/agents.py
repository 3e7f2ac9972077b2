"""Real-agent benchmark: what ce adds to a Claude Code trial, with the CLI's own cost
reported apart.

    .venv/bin/python bench/agents.py [--trials 5] [--drivers tempdir,bwrap] [--json]

The task is tasks/hello_world.yaml with its scripted session (3 model calls, a Write and
a Bash), so the model takes no time and what is measured is the CLI and ce:

1. **the CLI alone**: the bundled Claude Code CLI driven by claude-agent-sdk straight
   from this process (no ce, no sandbox) against the same scripted server, in a fresh
   directory: its start-up (spawn to the `init` message) and the whole session;
2. **a ce trial**: `ce_runtime.execute.suite.execute` with `--scripted-model` semantics,
   at -j 1, per driver: each trial's wall time (set-up, the sandbox, the CLI through
   the launcher, grading with a `python hello.py` criterion, snapshot, task.json);
3. **harness overhead** = trial median - CLI session median, per driver.

Medians over `--trials`; every measurement in a fresh subprocess.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TASK = os.path.join(ROOT, "tasks", "hello_world.yaml")
SCRIPT = os.path.join(ROOT, "tasks", "hello_world.claude-code.model.yaml")


def cli_alone(trials: int) -> dict[str, Any]:
    sys.path.insert(0, ROOT)
    import claude_agent_sdk as sdk
    import yaml

    from ce_agents.claude_code import CLI_ENV, bundled_cli
    from ce_runtime.model_server import ModelServer, Script

    with open(SCRIPT, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    startups, sessions = [], []
    for _ in range(trials):
        work = tempfile.mkdtemp(prefix="ce-bench-cli-")
        try:
            with ModelServer(Script.from_data(data, workspace=work)) as server:
                options = sdk.ClaudeAgentOptions(
                    cwd=work, cli_path=bundled_cli(), model="claude-sonnet-4-6",
                    allowed_tools=["Read", "Write", "Edit", "Bash"],
                    permission_mode="acceptEdits", setting_sources=[],
                    env={**CLI_ENV, "ANTHROPIC_BASE_URL": server.url,
                         "ANTHROPIC_API_KEY": "scripted",
                         "CLAUDE_CONFIG_DIR": os.path.join(work, ".claude-config")})

                async def session(options=options) -> tuple[float, float]:
                    t0 = time.perf_counter()
                    init = None
                    async for message in sdk.query(prompt="Create hello.py", options=options):
                        if init is None and isinstance(message, sdk.SystemMessage):
                            init = time.perf_counter() - t0
                    return init or 0.0, time.perf_counter() - t0

                startup, whole = asyncio.run(session())
        finally:
            shutil.rmtree(work, ignore_errors=True)
        startups.append(startup * 1000)
        sessions.append(whole * 1000)
    return {"startup_ms": statistics.median(startups), "session_ms": statistics.median(sessions),
            "sessions_ms": [round(s) for s in sessions]}


def ce_trials(driver: str, trials: int) -> dict[str, Any]:
    sys.path.insert(0, ROOT)
    from ce_lang.api import CompileOptions, compile_paths
    from ce_runtime.execute import suite as R

    work = tempfile.mkdtemp(prefix="ce-bench-agent-")
    try:
        for path in (TASK, SCRIPT):
            shutil.copy(path, work)
        result = compile_paths([os.path.join(work, "hello_world.yaml")],
                               CompileOptions(repeats=trials, driver=driver))
        run_dir = R.new_run_dir(os.path.join(work, "runs"))
        started: dict[str, float] = {}
        walls: list[float] = []
        statuses: dict[str, int] = {}

        def on_start(trial) -> None:
            started[trial.trial_id] = time.perf_counter()

        def on_done(trial, record) -> None:
            walls.append((time.perf_counter() - started[trial.trial_id]) * 1000)
            statuses[str(record.status)] = statuses.get(str(record.status), 0) + 1

        asyncio.run(R.execute(result.trials, run_dir,
                              R.RunOptions(jobs=1, scripted_model=True), on_start, on_done))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if statuses != {"SUCCESS": trials}:
        raise SystemExit(f"benchmark trials did not all succeed: {statuses}")
    return {"driver": driver, "trial_ms": statistics.median(walls),
            "trials_ms": [round(w) for w in walls]}


def in_subprocess(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_one", *args],
                          capture_output=True, text=True, env={**os.environ, "CE_PLAIN": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"measurement {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--drivers", default="tempdir,bwrap")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--_one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._one:
        kind, n = args._one[0], int(args._one[1])
        print(json.dumps(cli_alone(n) if kind == "cli" else ce_trials(kind, n)))
        return
    sys.path.insert(0, ROOT)
    from ce_runtime.execute.sandbox import unavailable

    out: dict[str, Any] = {"cli": in_subprocess(["cli", str(args.trials)]), "drivers": {}}
    for driver in [d.strip() for d in args.drivers.split(",") if d.strip()]:
        why = unavailable(driver)
        out["drivers"][driver] = {"unavailable": why} if why else \
            in_subprocess([driver, str(args.trials)])
    cli = out["cli"]
    lines = [f"real-agent benchmark: hello_world with the bundled Claude Code CLI, "
             f"{args.trials} trials each", "",
             f"  the CLI alone: start-up (spawn to init) {cli['startup_ms']:.0f} ms, "
             f"whole session {cli['session_ms']:.0f} ms (median)",
             f"  {'driver':<10} {'trial ms':>9} {'overhead ms':>12}"]
    for driver, row in out["drivers"].items():
        if "unavailable" in row:
            lines.append(f"  {driver:<10} not measured: {row['unavailable']}")
            continue
        row["overhead_ms"] = row["trial_ms"] - cli["session_ms"]
        lines.append(f"  {driver:<10} {row['trial_ms']:>9.0f} {row['overhead_ms']:>12.0f}")
    table = "\n".join(lines) + "\n"
    if args.json:
        print(json.dumps(out, indent=2))
        print(table, file=sys.stderr, end="")
    else:
        print(table, end="")


if __name__ == "__main__":
    main()
