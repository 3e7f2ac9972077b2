"""Run-speed benchmark for `ce run`: what the harness costs per trial, and how many
trivial trials per second it gets through.

    .venv/bin/python bench/run.py [--overhead-trials 40] [--venv-trials 12]
                                  [--trials 200] [--jobs 1,2,4] [--repeat 5]
                                  [--drivers tempdir,bwrap,docker] [--json]

Every trial is trivial on purpose, so what is measured is ce itself: an `agent: {type:
none}` task (no agent process, no model) with one starter file and one `file_exists`
criterion on it. A trial still does all of a real one: workspace set-up, trace writing
with the live monitor, grading, the content-addressed workspace snapshot and an atomic
task.json.

1. Overhead per trial, `-j 1`: the wall time of each trial (executor start callback to
   done callback, so its share of the executor is included), median / p90 / min in ms:
   - `python: null`: no venv (shell-only tasks);
   - `python: {env_packages: []}`: an empty venv (`uv venv`) built per trial, which
     every task without a `sandbox.python` block pays;
   - `python: null` under each sandbox driver (`--drivers`): bwrap's and docker's cost
     per trial next to tempdir's, as a ratio measured in the same run, and the cost of one
     command (`exec` of `true`, median of 50) in each. Docker runs `local/busybox` (the
     tests make it; a driver that cannot run here is reported, not measured).
2. Throughput: `--trials` trials (`--repeats` of the python: null task) through
   `ce_runtime.execute.suite.execute` at each `-j`: trials/s from the wall time of the whole
   execute call (median of `--repeat` runs), with the per-trial median at that `-j`.
3. The CLI: `ce run DIR --repeats N -j J` (highest J) in a subprocess, wall time
   including interpreter start-up, compiling, the run and the reports (run.json,
   parquet, report.md).

Every measurement runs in a fresh subprocess (imports, thread pools and caches of one
never leak into another), with cached bytecode (PYTHONDONTWRITEBYTECODE is dropped;
.pyc files go to bench/.data/pycache). Prints a table and writes bench/.data/run.json
(or JSON to stdout with --json, the table then to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchlib import git_rev

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(HERE, ".data")

TASK = """task_id: trivial
description: a trivial agentless trial (benchmark)
agent: {{type: none}}
sandbox:
  driver: {driver}
  python: {python}{docker}
  template_sources:
    - type: starter_files
      files:
        - path: out/status.txt
          content: "ok\\n"
success_criteria:
  - type: file_exists
    description: the status file exists
    path: out/status.txt
"""
PYTHON = {"none": "null", "venv": "{env_packages: []}"}


def bench_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(DATA, "pycache")
    env["CE_PLAIN"] = "1"
    return env


DOCKER_IMAGE = "local/busybox"


def write_task(directory: str, python: str, driver: str = "tempdir") -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "trivial.yaml")
    docker = f"\n  docker: {{image: {DOCKER_IMAGE}}}" if driver == "docker" else ""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(TASK.format(python=PYTHON[python], driver=driver, docker=docker))
    return path


def measure_exec(driver: str, n: int = 50) -> float:
    """Median ms of one `exec` of `true` in a started sandbox of `driver`."""
    sys.path.insert(0, ROOT)
    from types import SimpleNamespace

    from ce_runtime.execute.sandbox import open_sandbox
    from ce_runtime.execute.sandbox.base import SandboxSpec

    async def main() -> float:
        scratch = tempfile.mkdtemp(prefix="ce-bench-exec-")
        docker = SimpleNamespace(image=DOCKER_IMAGE, dockerfile_path=None, working_dir=None,
                                 extra_mounts=[], env_passthrough=None,
                                 env_passthrough_extra=[], network=None, build=None)
        box = open_sandbox(driver, SandboxSpec("bench", scratch, scratch, docker=docker))
        await box.start()
        times = []
        try:
            for _ in range(n):
                t0 = time.perf_counter()
                await box.exec(["true"])
                times.append((time.perf_counter() - t0) * 1000)
        finally:
            await box.teardown()
            shutil.rmtree(scratch, ignore_errors=True)
        return statistics.median(times)

    return asyncio.run(main())


def uv_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ce", "uv")


# ======================================================================================
# One measurement (in its own subprocess)
# ======================================================================================

def measure(python: str, trials: int, jobs: int) -> dict[str, Any]:
    """Run `trials` trivial trials at `jobs` through the executor, in this process.
    `python` is none, venv, or none@DRIVER."""
    sys.path.insert(0, ROOT)
    from ce_lang.compiler import CompileOptions, compile_paths
    from ce_runtime.execute import suite as R
    python, _, driver = python.partition("@")
    work = tempfile.mkdtemp(prefix="ce-bench-run-")
    try:
        task = write_task(os.path.join(work, "tasks"), python, driver or "tempdir")
        result = compile_paths([task], CompileOptions(repeats=trials))
        if result.errors:
            raise SystemExit(f"the benchmark task does not compile: {result.diagnostics}")
        run_dir = R.new_run_dir(os.path.join(work, "runs"))
        started: dict[str, float] = {}
        walls: list[float] = []
        statuses: dict[str, int] = {}

        def on_start(trial) -> None:
            started[trial.trial_id] = time.perf_counter()

        def on_done(trial, record) -> None:
            walls.append((time.perf_counter() - started[trial.trial_id]) * 1000)
            statuses[str(record.status)] = statuses.get(str(record.status), 0) + 1

        t0 = time.perf_counter()
        asyncio.run(R.execute(result.trials, run_dir,
                              R.RunOptions(jobs=jobs, uv_cache=uv_cache()), on_start, on_done))
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if statuses != {"SUCCESS": trials}:
        raise SystemExit(f"benchmark trials did not all succeed: {statuses}")
    ordered = sorted(walls)
    row = {"python": python, "driver": driver or "tempdir", "trials": trials, "jobs": jobs,
           "wall_s": wall, "trials_per_s": trials / wall, "median_ms": statistics.median(walls),
           "p90_ms": ordered[int(0.9 * (len(ordered) - 1))], "min_ms": ordered[0]}
    if driver:
        row["exec_ms"] = measure_exec(driver)
    return row


def measure_cli(trials: int, jobs: int) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="ce-bench-cli-")
    try:
        task = write_task(os.path.join(work, "tasks"), "none")
        ce = os.path.join(os.path.dirname(sys.executable), "ce")
        t0 = time.perf_counter()
        proc = subprocess.run([ce, "run", task, "--repeats", str(trials), "-j", str(jobs),
                               "--runs-root", os.path.join(work, "runs")], cwd=work,
                              env=bench_env(), capture_output=True, text=True)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"ce run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"trials": trials, "jobs": jobs, "wall_s": wall, "trials_per_s": trials / wall}


def in_subprocess(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--_one", *args],
                          env=bench_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"measurement {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ======================================================================================
# The whole benchmark
# ======================================================================================

def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median wall time, plus every run's wall time."""
    best = dict(sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2])
    best["runs_wall_s"] = [round(r["wall_s"], 3) for r in runs]
    return best


def run_all(args: argparse.Namespace, say) -> dict[str, Any]:
    out: dict[str, Any] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "loadavg_at_start": list(os.getloadavg())},
        "git": git_rev(), "overhead": {}, "drivers": {}, "throughput": [], "cli": None}
    # warm-up: the uv cache, bytecode, the page cache
    in_subprocess(["venv", "2", "1"])
    in_subprocess(["none", "5", "1"])
    for python, n in (("none", args.overhead_trials), ("venv", args.venv_trials)):
        say(f"overhead, python: {PYTHON[python]}: {n} trials at -j 1 ...")
        out["overhead"][python] = median_run(
            [in_subprocess([python, str(n), "1"]) for _ in range(args.repeat)])
    sys.path.insert(0, ROOT)
    from ce_runtime.execute.sandbox import unavailable

    for driver in args.drivers:
        why = unavailable(driver)
        if driver == "docker" and why is None:
            probe = subprocess.run(["docker", "image", "inspect", DOCKER_IMAGE],
                                   capture_output=True)
            why = None if probe.returncode == 0 else f"no {DOCKER_IMAGE} image (the tests " \
                                                     "make it: pytest tests/test_sandbox_drivers.py)"
        if why:
            out["drivers"][driver] = {"unavailable": why}
            say(f"driver {driver}: not measured ({why})")
            continue
        say(f"overhead under {driver}: {args.overhead_trials} trials at -j 1 ...")
        out["drivers"][driver] = median_run(
            [in_subprocess([f"none@{driver}", str(args.overhead_trials), "1"])
             for _ in range(args.repeat)])
    for jobs in args.jobs:
        say(f"throughput: {args.trials} trials at -j {jobs} ...")
        row = median_run([in_subprocess(["none", str(args.trials), str(jobs)])
                          for _ in range(args.repeat)])
        out["throughput"].append(row)
    jobs = max(args.jobs)
    say(f"CLI: ce run --repeats {args.trials} -j {jobs} ...")
    out["cli"] = median_run([in_subprocess(["cli", str(args.trials), str(jobs)])
                             for _ in range(args.repeat)])
    return out


def render(r: dict[str, Any]) -> str:
    m = r["machine"]
    load = ", ".join(f"{x:.2f}" for x in m["loadavg_at_start"])
    lines = [f"ce run benchmark: Python {m['python']}, {m['cpus']} CPUs, git {r['git']} "
             f"(load average at start: {load})", "",
             "(1) harness overhead per trial, -j 1 (none agent, 1 file_exists criterion)",
             f"    {'sandbox':<32} {'trials':>6} {'median ms':>10} {'p90 ms':>8} "
             f"{'min ms':>8}"]
    for python, row in r["overhead"].items():
        goal = ""
        if python == "none":  # issue 14: <= 20 ms per agentless trial without a venv
            goal = "  goal <= 20 ms: " + ("met" if row["median_ms"] <= 20 else "NOT met")
        lines.append(f"    {'python: ' + PYTHON[python]:<32} {row['trials']:>6} "
                     f"{row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} {row['min_ms']:>8.1f}"
                     + goal)
    if r.get("drivers"):
        base = r["drivers"].get("tempdir", {}).get("median_ms")
        lines += ["", "(1b) per trial by sandbox driver, python: null, -j 1; one command = "
                      "exec of `true`",
                  f"    {'driver':<10} {'trials':>6} {'median ms':>10} {'p90 ms':>8} "
                  f"{'x tempdir':>9} {'exec ms':>8}"]
        for driver, row in r["drivers"].items():
            if "unavailable" in row:
                lines.append(f"    {driver:<10} not measured: {row['unavailable']}")
                continue
            ratio = f"{row['median_ms'] / base:.1f}" if base else "-"
            lines.append(f"    {driver:<10} {row['trials']:>6} {row['median_ms']:>10.1f} "
                         f"{row['p90_ms']:>8.1f} {ratio:>9} {row['exec_ms']:>8.1f}")
    lines += ["", "(2) throughput, python: null (executor in-process; median of runs)",
              f"    {'-j':>4} {'trials':>6} {'wall s':>8} {'trials/s':>9} {'range of runs':>14} "
              f"{'per-trial median ms':>20}"]
    for row in r["throughput"]:
        rates = sorted(row["trials"] / w for w in row["runs_wall_s"])
        spread = f"{rates[0]:.0f}-{rates[-1]:.0f}"
        lines.append(f"    {row['jobs']:>4} {row['trials']:>6} {row['wall_s']:>8.2f} "
                     f"{row['trials_per_s']:>9.1f} {spread:>14} {row['median_ms']:>20.1f}")
    c = r["cli"]
    lines += ["", f"(3) CLI: ce run --repeats {c['trials']} -j {c['jobs']} (start-up, compile, "
                  "run, reports)",
              f"    wall {c['wall_s']:.2f} s, {c['trials_per_s']:.1f} trials/s "
              f"(runs: {', '.join(f'{w:.2f}' for w in c['runs_wall_s'])} s)"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--overhead-trials", type=int, default=40,
                    help="trials per overhead measurement without a venv")
    ap.add_argument("--venv-trials", type=int, default=12,
                    help="trials per overhead measurement with an empty venv")
    ap.add_argument("--trials", type=int, default=200, help="trials per throughput run")
    ap.add_argument("--jobs", default="1,2,4", help="comma list of -j values")
    ap.add_argument("--repeat", type=int, default=5, help="fresh processes per measurement")
    ap.add_argument("--drivers", default="tempdir,bwrap,docker",
                    help="sandbox drivers whose per-trial cost is compared")
    ap.add_argument("--json", action="store_true", help="print JSON to stdout, table to stderr")
    ap.add_argument("--_one", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._one:
        kind, trials, jobs = args._one[0], int(args._one[1]), int(args._one[2])
        result = measure_cli(trials, jobs) if kind == "cli" else measure(kind, trials, jobs)
        print(json.dumps(result))
        return
    args.jobs = [int(j) for j in args.jobs.split(",") if j.strip()]
    args.drivers = [d.strip() for d in args.drivers.split(",") if d.strip()]

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    os.makedirs(DATA, exist_ok=True)
    result = run_all(args, say)
    table = render(result)
    if args.json:
        print(json.dumps(result, indent=2))
        print(table, file=sys.stderr, end="")
        return
    path = os.path.join(DATA, "run.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    print("\n" + table, end="")
    print(f"written: {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
