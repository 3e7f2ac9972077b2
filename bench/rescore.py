"""Rescore benchmark: how fast `ce rescore` re-grades an archive, and what a judge costs.

    .venv/bin/python bench/rescore.py [--trials 10000] [--repeat 3] [--out DIR] [--json]
                                      [--command] [--profile] [--jobs N] [--work DIR]

`ce rescore RUN_DIR` re-grades every archived trial from its trace and workspace snapshot,
without the agent (do old scores reproduce? what would a changed criterion score?). An
archive of thousands of trials is ordinary (datasets x repeats x variants), so the
per-trial cost is what matters.

The archive is built fast: ONE real `ce run` of a scripted task (`agent: {type: script}`,
`sandbox: {python: null}`: a Skill call, two written files, a Bash command), then its one
trial directory cloned N times inside the run directory (trace.msgpack, workspace.json
and evidence.json hard-linked; task.json rewritten with its own trial_id). Every clone is
a valid trial: the benchmark fails unless rescore reports "N trial(s) re-scored, 0
changed" and exits 0. Criteria: command_executed (must run, must NOT run),
skill_triggered (trace criteria), file_exists, file_contains, json_check (file criteria).

1. **(a) trace+file**: those six criteria, N trials.
2. **(b) + judge, cached**: the same plus an `llm_judge` criterion whose verdict the run
   recorded in judges/ (the scripted judge of `--judge-replies`); `--offline` proves
   every verdict is reused (rescore must report N reused, 0 asked). N trials.
3. **(c) + judge, asked**: the same archive, `--refresh-judges --judge-replies FILE`: every
   trial asks the local scripted judge server (an HTTP round trip, the prompt built, the
   verdict stored). max(20, N/20) trials.
4. **(d) + run_command** (`--command`): (a) plus a `run_command` criterion, so every
   trial starts the trial's sandbox and runs a command. max(20, N/20) trials.

Each measurement is one `ce rescore RUN --out FRESH_DIR` subprocess, reaped with
`os.wait4` (its own peak RSS, `ru_maxrss`), `--repeat` times (median reported, fastest
alongside), with cached bytecode as in compile.py. The fixed cost (start-up, imports, the
reports: run.json, parquet, report.md) is measured apart by re-scoring ONE trial
directory of the same archive, so the table also shows the marginal cost per trial,
(T_n - T_1) / (n - 1), and the judge's cached/uncached ratio is taken on those.
`--profile` adds a cProfile of one `ce rescore --offline` over min(N, 1000) trials of (b).
Results go to OUT/rescore.json (default bench/.data/rescore.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchlib import git_rev

from ce_runtime.store.archive import record_digest  # the clones are signed as ce signs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_DATA = os.path.join(HERE, ".data")
CE = os.path.join(os.path.dirname(sys.executable), "ce")
GOAL = 1000  # trials/s for trace and file criteria (issue 14), marginal and end-to-end
TASK_ID = "archived"  # not "rescored", "plans", ...: trial_dirs() skips those names

TASK = r"""task_id: archived
description: a scripted agent leaves a trace and files for the rescore benchmark
initial_prompt: Tell me the date, write the report and show it.
agent:
  type: script
  script:
    - {tool: Skill, params: {skill: date-teller}, output: "2026-11-30 Monday"}
    - {write: report.json, content: '{"status": "ok", "items": [1, 2, 3], "name": "bench"}'}
    - {write: notes.md, content: "# Notes\nreport.json has it; the date: date-teller.\n"}
    - {run: cat report.json}
    - {say: done}
sandbox: {python: null}
success_criteria:
  - {type: command_executed, description: the report was shown, tool_name: Bash,
     command_pattern: "cat report\\.json", require_success: true, min_count: 1}
  - {type: command_executed, description: nothing was deleted, tool_name: Bash,
     command_pattern: "\\brm\\s+-rf\\b", min_count: 0, max_count: 0}
  - {type: skill_triggered, description: the date came from the skill,
     skill_name: date-teller, expected_skill: date-teller}
  - {type: file_exists, description: the report exists, path: report.json}
  - {type: file_contains, description: the notes point at the report, path: notes.md,
     includes: ["# Notes", "report.json", "date-teller"]}
  - {type: json_check, description: the report says ok and lists three items,
     path: report.json, assertions: [
       {expression: status, operator: equals, expected: ok},
       {expression: "length(items)", operator: equals, expected: 3},
       {expression: name, operator: regex, expected: "^ben"}]}
"""
JUDGE = """  - {type: llm_judge, description: the report is useful, files: [report.json, notes.md],
     prompt: You are reviewing report.json and notes.md for the rescore benchmark.}
"""
COMMAND = """  - {type: run_command, description: the report is shown, command: cat report.json,
     expected_stdout: '"status": "ok"', stdout_match: contains}
"""
REPLIES = """judge:
  - score: 0.9
    rationale: scripted verdict for the rescore benchmark
"""
# name: (title, archive, extra ce rescore flags, small?)
VARIANTS = {
    "a": ("(a) trace+file criteria", "plain", [], False),
    "b": ("(b) + llm_judge, cached (--offline)", "judged", ["--offline"], False),
    "c": ("(c) + llm_judge, asked (--refresh-judges)", "judged",
          ["--refresh-judges", "--judge-replies", "{replies}"], True),
    "d": ("(d) + run_command", "command", [], True),
}


def bench_env(data_dir: str) -> dict[str, str]:
    # ce as a user runs it: bytecode cached, stdout buffered when it is no terminal
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(data_dir, "pycache")
    env["CE_PLAIN"] = "1"
    return env


def real_run(work: str, kind: str, env: dict[str, str]) -> str:
    """One `ce run` of the benchmark task (`kind`: plain, judged, command); its run dir."""
    src = os.path.join(work, "src", kind)
    os.makedirs(src, exist_ok=True)
    extra = {"plain": "", "judged": JUDGE, "command": COMMAND}[kind]
    with open(os.path.join(src, f"{TASK_ID}.yaml"), "w", encoding="utf-8") as fh:
        fh.write(TASK + extra)
    replies = os.path.join(work, "replies.yaml")
    runs = os.path.join(src, "runs")
    proc = subprocess.run([CE, "run", f"{TASK_ID}.yaml", "--runs-root", runs,
                           "--judge-replies", replies], cwd=src, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"ce run ({kind}) failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return os.path.realpath(os.path.join(runs, "latest"))


def clone_run(run: str, dest: str, n: int) -> str:
    """A run directory of `n` trials, each a copy of `run`'s one trial; the trial dir of
    the first clone is returned (for the one-trial measurement)."""
    os.makedirs(dest)
    for part in ("plans", "objects", "definitions", "judges"):
        if os.path.isdir(os.path.join(run, part)):
            shutil.copytree(os.path.join(run, part), os.path.join(dest, part))
    shutil.copy2(os.path.join(run, "run.json"), dest)
    tdir = os.path.join(run, "default", TASK_ID, "00")
    with open(os.path.join(tdir, "task.json"), encoding="utf-8") as fh:
        record = json.load(fh)
    if record["status"] != "SUCCESS":
        sys.exit(f"the template trial did not succeed: {record['status']} {record['error']}")
    width = max(5, len(str(n - 1)))
    for i in range(n):
        rel = f"default/{TASK_ID}/{i:0{width}d}"
        d = os.path.join(dest, rel)
        os.makedirs(d)
        for name in ("trace.msgpack", "workspace.json", "evidence.json"):
            os.link(os.path.join(tdir, name), os.path.join(d, name))
        with open(os.path.join(d, "task.json"), "w", encoding="utf-8") as fh:
            clone = {**record, "trial_id": rel, "repeat": i}
            json.dump({**clone, "record_sha256": record_digest(clone)}, fh, indent=1)
    return os.path.join(dest, f"default/{TASK_ID}/{0:0{width}d}")


def rescore(target: str, n: int, flags: list[str], out: str, env: dict[str, str],
            judged: str | None) -> dict[str, Any]:
    """`ce rescore TARGET --out OUT FLAGS`; wall time and peak RSS of exactly that child.
    Fails unless all `n` trials reproduce (and, `judged`, the judge verdicts were all
    reused or all asked)."""
    log = out + ".stderr"
    with open(log, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([CE, "rescore", target, "--out", out, *flags], env=env,
                                stdout=err, stderr=subprocess.STDOUT)  # results: stdout
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    with open(log, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    last = (text.strip().splitlines() or [""])[-1]
    want = [f"{n} trial(s) re-scored, 0 changed", {
        None: "", "reused": f"judges: {n} recorded verdict(s) reused, 0 asked",
        "asked": f"judges: 0 recorded verdict(s) reused, {n} asked"}[judged]]
    if code != 0 or not all(w in last for w in want):
        sys.exit(f"ce rescore {target} {' '.join(flags)}: exit {code}, expected "
                 f"{want!r} in its last line:\n{text[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    os.unlink(log)
    return {"seconds": wall, "peak_rss_mib": usage.ru_maxrss / 1024,
            "cpu_seconds": usage.ru_utime + usage.ru_stime}


def profile(run: str, work: str, n: int, env: dict[str, str]) -> str:
    """cProfile of one `ce rescore --offline` of `n` clones of `run`: the top ce functions
    by cumulative time and the top functions by own time."""
    import io
    import pstats

    dest, prof = os.path.join(work, "archives", f"profile-{n}"), os.path.join(work, "prof")
    clone_run(run, dest, n)
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", prof, "-m",
                           "ce_runtime.cli", "rescore", dest, "--out",
                           os.path.join(work, "out", "profile"), "--offline"],
                          env=env, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0 or f"{n} trial(s) re-scored, 0 changed" not in proc.stdout:
        sys.exit(f"profiled ce rescore failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(r"ce_(runtime|lang)/", 22)
    stats.sort_stats("tottime").print_stats(12)
    keep = [ln.replace(ROOT + os.sep, "") for ln in buf.getvalue().splitlines()
            if re.match(r"\s+(ncalls|[\d/]+\s+\d)", ln)]
    return f"cProfile of ce rescore --offline, {n} trials of (b) (ce functions by " \
           "cumulative time, then all by own time):\n" + "\n".join(keep)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda r: r["seconds"])
    best = dict(ordered[len(ordered) // 2])
    best["min_seconds"] = ordered[0]["seconds"]
    best["runs"] = [round(r["seconds"], 3) for r in runs]
    best["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return best


def run_all(args: argparse.Namespace, env: dict[str, str], say) -> dict[str, Any]:
    small = max(20, args.trials // 20)
    names = ["a", "b", "c"] + (["d"] if args.command else [])
    work = tempfile.mkdtemp(prefix="ce-bench-rescore-", dir=args.work)
    results: dict[str, Any] = {}
    try:
        replies = os.path.join(work, "replies.yaml")
        with open(replies, "w", encoding="utf-8") as fh:
            fh.write(REPLIES)
        kinds = sorted({VARIANTS[v][1] for v in names})
        say(f"one real ce run per archive ({', '.join(kinds)}) ...")
        runs = {kind: real_run(work, kind, env) for kind in kinds}
        targets: dict[str, tuple[str, str, int]] = {}
        for v in names:
            n = small if VARIANTS[v][3] else args.trials
            t0 = time.perf_counter()
            dest = os.path.join(work, "archives", f"{v}-{n}")
            one = clone_run(runs[VARIANTS[v][1]], dest, n)
            targets[v] = (dest, one, n)
            say(f"{VARIANTS[v][0]}: {n:,} trials cloned in {time.perf_counter() - t0:.1f}s")
        outs = os.path.join(work, "out")
        os.makedirs(outs)
        seq = iter(range(10**9))

        def measure(v: str, target: str, n: int) -> dict[str, Any]:
            flags = [f.replace("{replies}", replies) for f in VARIANTS[v][2]]
            if args.jobs != 1:
                flags += ["-j", str(args.jobs)]
            judged = {"b": "reused", "c": "asked"}.get(v)
            return rescore(target, n, flags, os.path.join(outs, str(next(seq))), env, judged)

        measure("a", targets["a"][1], 1)  # warm .pyc files and the page cache
        raw: dict[str, dict[str, list]] = {v: {"n": [], "one": []} for v in names}
        for r in range(args.repeat):  # interleaved: the machine's load hits all alike
            say(f"run {r + 1}/{args.repeat}: " + ", ".join(
                f"{v} ({targets[v][2]:,})" for v in names) + " ...")
            for v in names:
                dest, one, n = targets[v]
                raw[v]["one"].append(measure(v, one, 1))
                raw[v]["n"].append(measure(v, dest, n))
        for v in names:
            n = targets[v][2]
            full, one = summarize(raw[v]["n"]), summarize(raw[v]["one"])
            marginal = (full["seconds"] - one["seconds"]) / max(1, n - 1)
            results[v] = {"title": VARIANTS[v][0], "trials": n, **full,
                          "trials_per_s": n / full["seconds"],
                          "best_trials_per_s": n / full["min_seconds"],
                          "one_trial": one, "marginal_ms_per_trial": marginal * 1000,
                          "marginal_trials_per_s": 1 / marginal if marginal > 0 else None,
                          "flags": VARIANTS[v][2]}
        if args.profile:
            say("profiling ce rescore --offline on (b) ...")
            results["profile"] = profile(runs["judged"], work, min(args.trials, 1000), env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def render(r: dict[str, Any]) -> str:
    m, v = r["meta"], r["variants"]
    lines = [f"ce rescore benchmark: {m['trials']:,} archived trials (6 trace+file criteria), "
             f"Python {m['python']}, {m['cpus']} CPUs, git {m['git']}, "
             f"--repeat {m['repeat']}, -j {m.get('jobs', 1)}"
             f"{', archives in ' + m['work'] if m.get('work') else ''} "
             f"(load average at start: {m['loadavg']})", "",
             f"{'variant':<44} {'trials':>6} {'median s':>9} {'min s':>7} {'trials/s':>9} "
             f"{'(best)':>7} {'peak RSS':>10} {'1 trial s':>9} {'marginal ms/trial':>18}"]
    for row in v.values():
        lines.append(f"{row['title']:<44} {row['trials']:>6,} {row['seconds']:>9.2f} "
                     f"{row['min_seconds']:>7.2f} {row['trials_per_s']:>9.0f} "
                     f"{row['best_trials_per_s']:>7.0f} {row['peak_rss_mib']:>6.1f} MiB "
                     f"{row['one_trial']['seconds']:>9.2f} "
                     f"{row['marginal_ms_per_trial']:>18.2f}")
    ms = {k: row["marginal_ms_per_trial"] for k, row in v.items()}
    lines += ["", f"judge asked {ms['c']:.2f} ms/trial, cached {ms['b']:.2f} ms/trial "
                  f"(marginal): cached/uncached = {r['ratio_cached_uncached']:.2f}, the cache "
                  f"saves {ms['c'] - ms['b']:.2f} ms per trial (whole-run trials/s: "
                  f"{r['ratio_cached_uncached_raw']:.2f})",
              f"a cached llm_judge criterion: +{ms['b'] - ms['a']:.2f} ms/trial over (a); fixed "
              f"cost of one ce rescore (1 trial of (a)): {v['a']['one_trial']['seconds']:.2f} s"]
    if "d" in v:
        lines.append(f"a run_command criterion: +{ms['d'] - ms['a']:.2f} ms/trial over (a)")
    a = v["a"]
    marginal = a["marginal_trials_per_s"] or 0.0
    lines.append(f"goal (issue 14): (a) >= {GOAL:,} trials/s: end-to-end "
                 f"{a['trials_per_s']:,.0f}/s over {a['trials']:,} trials "
                 f"({'met' if a['trials_per_s'] >= GOAL else 'NOT met'}), marginal "
                 f"{marginal:,.0f}/s ({'met' if marginal >= GOAL else 'NOT met'})")
    if r.get("profile"):
        lines += ["", r["profile"]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=10_000,
                    help="archived trials for (a) and (b); (c), (d) get max(20, N/20)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh runs of each measurement")
    ap.add_argument("--command", action="store_true",
                    help="also measure (d): a run_command criterion (a sandbox per trial)")
    ap.add_argument("--profile", action="store_true",
                    help="add a cProfile of ce rescore on min(N, 1000) trials of (b)")
    ap.add_argument("--json", action="store_true", help="JSON to stdout, table to stderr")
    ap.add_argument("--out", help="write OUT/rescore.json (default bench/.data)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="`ce rescore -j JOBS` (grading processes; default 1)")
    ap.add_argument("--work", help="where the archives are made and re-scored (default: "
                                   "the system's temp dir; e.g. /dev/shm for tmpfs)")
    args = ap.parse_args()
    if args.trials < 2:
        ap.error("--trials must be at least 2")
    data_dir = os.path.abspath(args.out) if args.out else DEFAULT_DATA
    os.makedirs(data_dir, exist_ok=True)
    env = bench_env(data_dir)
    rev = git_rev()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    variants = run_all(args, env, say)
    prof = variants.pop("profile", None)
    b, c = variants["b"], variants["c"]
    report = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "trials": args.trials,
                       "jobs": args.jobs, "work": args.work,
                       "repeat": args.repeat, "python": platform.python_version(),
                       "platform": platform.platform(terse=True), "cpus": os.cpu_count(),
                       "loadavg": load, "git": rev, "git_end": git_rev()},
              "variants": variants,
              "ratio_cached_uncached": b["marginal_ms_per_trial"]
              / max(c["marginal_ms_per_trial"], 1e-9),
              "ratio_cached_uncached_raw": c["trials_per_s"] / b["trials_per_s"],
              "profile": prof}
    if rev != report["meta"]["git_end"]:
        say(f"WARNING: the tree changed during the run ({rev} -> {report['meta']['git_end']})")
    path = os.path.join(data_dir, "rescore.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    table = render(report)
    if args.json:
        print(table, file=sys.stderr)
        print(json.dumps(report, indent=1))
    else:
        print("\n" + table, end="")
        shown = os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path
        print(f"written {shown}")


if __name__ == "__main__":
    main()
