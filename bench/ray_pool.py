"""Ray executor benchmark: N short trials on the local pool and on Ray, same parallelism.

    .venv/bin/python bench/ray_pool.py [--trials 100] [--sleep 0.25] [--jobs 2]
                                       [--nodes 1,2] [--repeat 3] [--json]

The trials: one scripted task (`agent: {type: script}`: `{sleep: S}` then a file written;
`sandbox: {python: null}`, the tempdir driver; a file_exists criterion), `--trials`
repeats of it, compiled once. Every measurement is one `suite.execute()` of all of them
into a fresh run directory, in this process, timed from the call to its return (what
`ce run` spends running trials; compiling, the reports and Ray's start-up are outside):

- **local**: the asyncio pool, `-j JOBS`.
- **ray, N node(s)**: the Ray executor joined to a cluster of `ray start` nodes on this
  machine (tests/ray_cluster.py; JOBS CPUs in all: one node of JOBS, or JOBS nodes of 1),
  started before and stopped after by their own process ids. The driver is connected once
  per cluster and a warm-up execute of JOBS trials (untimed) starts the workers, as on a
  cluster that is already up: the table measures trials, not Ray's start-up (which is
  also shown: `ray.init` to the cluster, and the warm-up).

Each is run `--repeat` times (median and fastest). Columns: wall time, its ratio to the
local pool's, and the per-trial overhead: (wall - ideal) x JOBS / N, where ideal = N x
SLEEP / JOBS is the time the sleeps alone take at JOBS at a time; so the overhead is what
each trial costs beyond its own work (sandbox, trace, grading, the round trip). The
benchmark fails unless every trial of every measurement is SUCCESS.
Results go to OUT/ray_pool.json (default bench/.data/ray_pool.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from benchlib import ROOT, git_rev

sys.path.insert(0, ROOT)

TASK = """task_id: sleeper
description: sleeps, then writes a file
initial_prompt: go
agent:
  type: script
  script:
    - sleep: {sleep}
    - write: done.txt
      content: ok
sandbox: {{driver: tempdir, python: null}}
success_criteria:
  - type: file_exists
    description: the file is there
    path: done.txt
"""


def _trials(tmp: str, n: int, sleep: float) -> list:
    from ce_lang.api import CompileOptions, compile_paths

    path = os.path.join(tmp, "sleeper.yaml")
    with open(path, "w") as fh:
        fh.write(TASK.format(sleep=sleep))
    result = compile_paths([path], CompileOptions(repeats=n))
    if result.errors:
        sys.exit(f"the benchmark task does not compile: {result.diagnostics}")
    return list(result.trials)


def _execute(trials: list, runs: str, jobs: int, executor: str) -> float:
    from ce_runtime.execute import suite as R

    run_dir = R.new_run_dir(runs)
    R.write_plans(run_dir, trials)
    options = R.RunOptions(jobs=jobs, executor=executor)
    start = time.perf_counter()
    records = asyncio.run(R.execute(trials, run_dir, options))
    wall = time.perf_counter() - start
    bad = [r for r in records if r.status != "SUCCESS"]
    if bad or len(records) != len(trials):
        sys.exit(f"{executor}: {len(bad)} trial(s) not SUCCESS of {len(records)}: "
                 f"{bad[:1]}")
    shutil.rmtree(run_dir, ignore_errors=True)
    return wall


def _measure(label: str, trials: list, runs: str, args, executor: str, say) -> dict[str, Any]:
    walls = []
    for i in range(args.repeat):
        walls.append(_execute(trials, runs, args.jobs, executor))
        say(f"  {label}: run {i + 1}/{args.repeat}: {walls[-1]:.2f} s")
    return {"label": label, "walls": walls, "median": statistics.median(walls),
            "min": min(walls)}


def _ray_cluster(nodes: int, trials: list, runs: str, args, say) -> dict[str, Any]:
    os.environ["RAY_AUTH_MODE"] = "token"  # as the nodes (Ray 2.60's default)
    from ce_runtime.execute.ray_executor import _import_ray
    from tests.ray_cluster import RayCluster

    cpus = args.jobs if nodes == 1 else max(1, args.jobs // nodes)
    with RayCluster(nodes=nodes, cpus=cpus) as cluster:
        ray = _import_ray()
        t0 = time.perf_counter()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        init_s = time.perf_counter() - t0
        try:
            warm = _execute(trials[:args.jobs], runs, args.jobs, "ray")
            say(f"  ray {nodes} node(s): ray.init {init_s:.2f} s, warm-up "
                f"({args.jobs} trials) {warm:.2f} s")
            out = _measure(f"ray, {nodes} node(s)", trials, runs, args, "ray", say)
        finally:
            ray.shutdown()
    from ce_runtime.execute.ray_executor import sweep_worker_scratch

    sweep_worker_scratch()  # the cluster's workers are gone: their scratch roots too
    out.update(init_s=init_s, warmup_s=warm, nodes=nodes, cpus_per_node=cpus)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--sleep", type=float, default=0.25, help="seconds each trial sleeps")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nodes", default="1,2", help="Ray cluster sizes, comma list")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", ".data"))
    ap.add_argument("--json", action="store_true", help="JSON on stdout, table on stderr")
    args = ap.parse_args()
    show = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    tmp = tempfile.mkdtemp(prefix="ce-bench-ray-")
    rev = git_rev()
    try:
        trials = _trials(tmp, args.trials, args.sleep)
        runs = os.path.join(tmp, "runs")
        _execute(trials[:args.jobs], runs, args.jobs, "local")  # warm-up: imports
        rows = [_measure("local pool", trials, runs, args, "local", say)]
        for nodes in [int(n) for n in args.nodes.split(",") if n]:
            rows.append(_ray_cluster(nodes, trials, runs, args, say))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ideal = args.trials * args.sleep / args.jobs
    base = rows[0]["median"]
    for r in rows:
        r["ratio"] = r["median"] / base
        r["overhead_ms_per_trial"] = (r["median"] - ideal) * args.jobs / args.trials * 1000
    print(f"\n{args.trials} trials of {args.sleep} s, -j {args.jobs} (ideal {ideal:.2f} s); "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, git {rev}", file=show)
    print(f"{'executor':<18} {'median s':>9} {'min s':>7} {'vs local':>9} "
          f"{'overhead/trial':>15}", file=show)
    for r in rows:
        print(f"{r['label']:<18} {r['median']:>9.2f} {r['min']:>7.2f} {r['ratio']:>8.3f}x "
              f"{r['overhead_ms_per_trial']:>12.1f} ms", file=show)
    for r in rows[1:]:
        print(f"  {r['label']}: ray.init {r['init_s']:.2f} s, warm-up {r['warmup_s']:.2f} s "
              f"(not in the table)", file=show)
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "git": rev, "git_end": git_rev(),
              "python": platform.python_version(), "cpus": os.cpu_count(),
              "trials": args.trials, "sleep": args.sleep, "jobs": args.jobs, "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ray_pool.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    if args.json:
        json.dump(result, sys.stdout, indent=2)


if __name__ == "__main__":
    main()
