"""ce against the reference implementation (coder-eval 0.12.16), side by side.

    .venv/bin/python bench/versus_reference.py [--reference BIN] [--reference-tasks DIR]
                                               [--repeat 5] [--tasks 40] [--run-tasks 8]
                                               [--out bench/.data]

The reference installs beside ce (see ../shared/SEMANTICS.md: Python >= 3.13,
`pip install coder-eval==0.12.16 typer==0.28.0`; its task files come with its source
distribution). .ci/run installs both under /tmp/ce_ref and exports CE_REFERENCE_BIN and
CE_REFERENCE_TASKS, the defaults of --reference and --reference-tasks. Two measurements,
each a median of `--repeat` fresh processes, ce and the reference interleaved so a busy
machine hurts both alike:

1. **compile**: `ce compile SUITE...` against `coder-eval plan SUITE...` on the
   reference's own example tasks that both accept (the first `--tasks`, sorted by path;
   which ones is printed), twice: **cold** (`--no-cache`: a full compile) and **warm**
   (a hit of ce's compile cache: the same command run again with nothing changed). The
   three commands are interleaved; the warm-up round stores the cache entry.
2. **run**: `ce run DIR -j 1` against `coder-eval run DIR -j 1` on `--run-tasks`
   agentless tasks (`agent: {type: none}`, the default sandbox, a pre_run command and two
   file criteria: the reference's own agentless smoke test, renamed), each into a fresh
   run directory.

Prints wall times and ratios (reference / ce), and for the run what bounds it: the CPU
time of ce's run (its process and every one it started, the report worker too, which
ends on its own after its reply: the bench is their subreaper), and, timed in the same
rounds against the reference's run and the 10x budget: `python -c "import polars"` (the
floor of a run whose report worker imports Polars) and the report worker alone doing the
run's job (`python -m ce_runtime.report.job` fed the 8 trials' records: what the end of
`ce run` waits for). Writes OUT/versus.json (OUT: --out,
bench/.data by default; the .pyc files of both tools go to OUT/pycache).
Goals of issue 14: >= 10x on both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import git_rev

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, ".data")
CE = os.path.join(os.path.dirname(sys.executable), "ce")
AGENTLESS = """task_id: agentless_{i}
description: an agentless trial (benchmark)
agent:
  type: none
sandbox:
  driver: tempdir
pre_run:
  - command: "printf ran-without-a-coder > proof.txt"
success_criteria:
  - type: file_exists
    path: proof.txt
    description: pre_run wrote its file
  - type: file_contains
    path: proof.txt
    includes: [ran-without-a-coder]
    description: with the expected content
"""


PYCACHE = os.path.join(DATA, "pycache")  # under --out once main() has parsed it


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out.update(TELEMETRY_ENABLED="false", CE_PLAIN="1", NO_COLOR="1",
               PYTHONPYCACHEPREFIX=PYCACHE)
    return out


def timed(argv: list[str], cwd: str) -> tuple[float, int, float]:
    """Wall time to the process's exit, taken by a blocking wait4, its exit code, and its
    CPU time (user + system, with every process it started: ce's report worker, its
    sandboxes). Not subprocess.run's
    timeout: it polls for the exit in sleeps growing to 50 ms, which rounded each time up
    by as much (measured: ce's times came out as 0.065, 0.115, 0.365 ... s)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    watchdog = threading.Timer(600, proc.kill)
    watchdog.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        watchdog.cancel()
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    while True:  # what it left to end by itself (ce's report worker, after its reply)
        try:
            _, _, left = os.wait4(-1, 0)  # ours as this process is their subreaper
        except ChildProcessError:
            break
        cpu += left.ru_utime + left.ru_stime
    return seconds, proc.returncode, cpu


def become_subreaper() -> None:
    """Orphans of a measured command (a process it does not wait for) come to us, so
    their CPU is counted with the command's."""
    import ctypes

    pr_set_child_subreaper = 36
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def accepted(argv: list[str], cwd: str) -> bool:
    proc = subprocess.run(argv, cwd=cwd, env=env(), capture_output=True, timeout=300)
    return proc.returncode == 0


def choose_suite(ref_bin: str, tasks_dir: str, n: int, work: str) -> list[str]:
    """The reference's example tasks both tools accept (copied with their support files)."""
    suite = os.path.join(work, "suite")
    shutil.copytree(tasks_dir, suite)
    found = []
    for root, dirs, files in os.walk(suite):
        dirs[:] = sorted(d for d in dirs if d not in ("experiments",))
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")):
                found.append(os.path.relpath(os.path.join(root, name), suite))
    both = []
    for rel in sorted(found):
        if accepted([CE, "compile", rel, "-q"], suite) and \
                accepted([ref_bin, "plan", rel], suite):
            both.append(rel)
        if len(both) == n:
            break
    return both


def interleaved(commands: list[list[str]], cwd: str, repeat: int,
                fresh: str | None = None) -> list[tuple[list[float], list[float]]]:
    """Wall and CPU times of each command, run in turn `repeat` times; an argument equal to
    `fresh` becomes a new run directory each time."""
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in commands]
    for i in range(repeat + 1):  # the first round warms caches (bytecode, the stdlib cache)
        for which, (argv, (walls, cpus)) in enumerate(zip(commands, out, strict=True)):
            argv = [os.path.join(cwd, f"runs-{which}-{i}") if a == fresh else a
                    for a in argv]
            seconds, code, cpu = timed(argv, cwd)
            if code not in (0, 1):
                sys.exit(f"{' '.join(argv)} exited {code}")
            if i:
                walls.append(seconds)
                cpus.append(cpu)
    return out


def report_job(work: str) -> str:
    """The report worker's job for one `ce run` of the agentless suite (its records, as
    `ce run` hands them over), in a file; the worker writes its reports into that run."""
    import glob

    from ce_runtime.store.record import read_record
    from ce_runtime.store.report_job import RunReports, frame

    run_dir = os.path.join(work, "job-run")
    _, code, _ = timed([CE, "run", "agentless", "-j", "1", "--run-dir", run_dir], work)
    if code not in (0, 1):
        sys.exit(f"ce run of the agentless suite exited {code}")
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
        meta = json.load(fh)
    records = [read_record(os.path.dirname(p))
               for p in sorted(glob.glob(os.path.join(run_dir, "*", "*", "*", "task.json")))]
    path = os.path.join(work, "job.msgpack")
    with open(path, "wb") as fh:
        fh.write(frame(RunReports(
            run_dir, meta["run_id"], meta["args"], records, len(records), False, None, [])))
    return path


def pair_ratios(ce: list[float], ref: list[float]) -> tuple[float, float, float]:
    """(min, median, max) of the reference's time over ce's, round by round."""
    ratios = [r / c for c, r in zip(ce, ref, strict=True)]
    return min(ratios), statistics.median(ratios), max(ratios)


def median_compile(cold: list[str], warm: list[str], ref: list[str], cwd: str,
                   repeat: int) -> tuple[list[float], list[float], list[float]]:
    """Interleaved wall times of ce cold, ce warm and the reference (first round: warm-up,
    which also stores the warm command's cache entry)."""
    out: tuple[list[float], list[float], list[float]] = ([], [], [])
    for i in range(repeat + 1):
        for argv, times in zip((cold, warm, ref), out, strict=True):
            seconds, code, _ = timed(argv, cwd)
            if code not in (0, 1):
                sys.exit(f"{' '.join(argv)} exited {code}")
            if i:
                times.append(seconds)
    return out


def main() -> None:
    global PYCACHE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", default=os.environ.get("CE_REFERENCE_BIN",
                                                          "/tmp/ref313/bin/coder-eval"))
    ap.add_argument("--reference-tasks", default=os.environ.get(
        "CE_REFERENCE_TASKS", "/tmp/ce_ref/coder_eval-0.12.16/tasks"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=40)
    ap.add_argument("--run-tasks", type=int, default=8)
    ap.add_argument("--out", default=DATA, help="where versus.json (and the .pyc files) go")
    args = ap.parse_args()
    become_subreaper()
    if not os.access(args.reference, os.X_OK):
        sys.exit(f"no reference at {args.reference} (see the docstring to install it)")
    if not os.path.isdir(args.reference_tasks):
        sys.exit(f"no reference tasks at {args.reference_tasks} (its sdist's tasks/)")
    os.makedirs(args.out, exist_ok=True)
    PYCACHE = os.path.join(args.out, "pycache")
    rev = git_rev()
    with tempfile.TemporaryDirectory(prefix="ce-versus-") as work:
        suite = choose_suite(args.reference, args.reference_tasks, args.tasks, work)
        print(f"compile suite: {len(suite)} reference example tasks both accept", file=sys.stderr)
        cwd = os.path.join(work, "suite")
        ce_cold, ce_warm, ref_c = median_compile(
            [CE, "compile", *suite, "-q", "--no-cache"], [CE, "compile", *suite, "-q"],
            [args.reference, "plan", *suite], cwd, args.repeat)
        run_dir = os.path.join(work, "agentless")
        os.makedirs(run_dir)
        for i in range(args.run_tasks):
            with open(os.path.join(run_dir, f"agentless_{i}.yaml"), "w") as fh:
                fh.write(AGENTLESS.format(i=i))
        # the third command is the floor of any run that writes its reports with Polars
        # (the report worker imports it); the fourth, the report worker alone doing this
        # run's job (a fresh interpreter, Polars, the report modules, the 8 trials'
        # reports): what the end of `ce run` waits for. Measured in the same rounds.
        job = report_job(work)
        (ce_r, ce_cpu), (ref_r, _), (polars_r, _), (worker_r, _) = interleaved(
            [[CE, "run", "agentless", "-j", "1", "--run-dir", "X"],
             [args.reference, "run", "agentless", "-j", "1", "--run-dir", "X"],
             [sys.executable, "-c", "import polars"],
             ["sh", "-c", f'exec "{sys.executable}" -m ce_runtime.report.job < "{job}"']],
            work, args.repeat, fresh="X")
    rows = {
        "compile cold": (len(suite), statistics.median(ce_cold), statistics.median(ref_c)),
        "compile warm": (len(suite), statistics.median(ce_warm), statistics.median(ref_c)),
        "run": (args.run_tasks, statistics.median(ce_r), statistics.median(ref_r)),
    }
    # each round ran ce and the reference back to back: a round's ratio is measured at
    # one speed of a machine whose speed drifts (30 % between rounds seen on this VM)
    paired = {"compile cold": pair_ratios(ce_cold, ref_c),
              "compile warm": pair_ratios(ce_warm, ref_c), "run": pair_ratios(ce_r, ref_r)}
    load = os.getloadavg()
    print(f"\nce against coder-eval 0.12.16: git {rev}, {os.cpu_count()} CPUs, median of "
          f"{args.repeat} (load average at end: {load[0]:.2f})")
    print(f"    {'what':<12} {'tasks':>5} {'ce s':>8} {'reference s':>12} {'ratio':>7} "
          f"{'by round (min-max)':>22}  goal")
    for name, (n, c, r) in rows.items():
        lo, mid, hi = paired[name]
        print(f"    {name:<12} {n:>5} {c:>8.3f} {r:>12.3f} {r / c:>6.1f}x "
              f"{mid:>8.1f}x ({lo:.1f}-{hi:.1f}x)  >= 10x")
    print("    compile suite: " + ", ".join(suite))
    run_cpu, floor = statistics.median(ce_cpu), statistics.median(polars_r)
    budget = rows["run"][2] / 10
    floor_ratio = statistics.median(r / f for r, f in zip(ref_r, polars_r, strict=True))
    worker, worker_ratio = statistics.median(worker_r), statistics.median(
        r / w for r, w in zip(ref_r, worker_r, strict=True))
    print(f"    the report worker alone, on this run's job: {worker:.3f} s, the reference's "
          f"run / {worker_ratio:.1f} by round (it starts ~35 ms into `ce run`)")
    print(f"    run's CPU (ce's process and every one it started: the report worker, the "
          f"sandboxes): {run_cpu:.3f} s, {run_cpu / rows['run'][1]:.1f} CPUs busy\n"
          f"    `python -c 'import polars'` alone (the report worker's floor): {floor:.3f} s, "
          f"the reference's run / {floor_ratio:.1f} by round\n"
          f"    the 10x budget: {budget:.3f} s wall, so at most {budget * (os.cpu_count() or 1):.3f} s "
          f"of CPU on {os.cpu_count()} CPUs")
    with open(os.path.join(args.out, "versus.json"), "w") as fh:
        json.dump({"git": rev, "suite": suite, "repeat": args.repeat,
                   "load": load[0], "results": {k: {"tasks": n, "ce_s": c, "reference_s": r,
                                                   "ratio": r / c,
                                                   "ratio_by_round": paired[k][1],
                                                   "ratio_by_round_range": [paired[k][0],
                                                                            paired[k][2]]}
                                               for k, (n, c, r) in rows.items()},
                   "ce_all": {"compile cold": ce_cold, "compile warm": ce_warm,
                              "run": ce_r, "run_cpu": ce_cpu},
                   "import_polars_all": polars_r, "report_worker_all": worker_r,
                   "reference_all": {"compile": ref_c, "run": ref_r}}, fh, indent=1)


if __name__ == "__main__":
    main()
