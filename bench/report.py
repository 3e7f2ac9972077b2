"""Report benchmark: `ce report` over a big run (time, peak RSS, the HTML's size).

    .venv/bin/python bench/report.py [--trials 10000] [--repeat 3] [--out DIR] [--json]
                                     [--browser]

The run is built fast: ONE real `ce run --agent oracle` of the report tests' fixture
(tests/report_run.py: 16 trials over two variants: a classification suite with wrong
answers, file checks with a diff against the template, a command's output, early
stops), then its trial directories cloned round-robin into N trials (repeats of the same
tasks: trace.msgpack, workspace.json and evidence.json hard-linked, task.json rewritten
with its own trial_id and repeat), and trials.parquet, results.parquet and run.json
written for all N with ce's own report functions. Every clone is a real trial: the
report reads each one's trace, evidence and workspace (the template is rebuilt once per
plan).

Measured, each as one `ce report RUN -f FORMAT -o FILE` subprocess reaped with
`os.wait4` (its own peak RSS), `--repeat` times (median, fastest alongside): the HTML
report (per-trial detail embedded, capped) and report.md. `--browser` also opens the
HTML in Chromium (Playwright, /usr/bin/chromium) and times the page until its table is
drawn, and opening one trial. Results go to OUT/report.json (default bench/.data).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchlib import git_rev

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
DEFAULT_DATA = os.path.join(HERE, ".data")
CE = os.path.join(os.path.dirname(sys.executable), "ce")


def bench_env(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(data_dir, "pycache")
    env["CE_PLAIN"] = "1"
    return env


def clone_run(run: str, dest: str, n: int) -> None:
    """A run directory of `n` trials cloned round-robin from `run`'s trials."""
    from ce_runtime import report
    from ce_runtime.grade.rescore import trial_dirs
    from ce_runtime.store.archive import record_digest
    from ce_runtime.store.atomic import write_json_atomic

    os.makedirs(dest)
    for part in ("plans", "objects", "definitions"):
        if os.path.isdir(os.path.join(run, part)):
            shutil.copytree(os.path.join(run, part), os.path.join(dest, part))
    templates = []
    for d in trial_dirs(run):
        with open(os.path.join(d, "task.json"), encoding="utf-8") as fh:
            templates.append((d, json.load(fh)))
    width = max(2, len(str(n // len(templates))))
    records = []
    for i in range(n):
        src, rec = templates[i % len(templates)]
        repeat = i // len(templates)
        trial_id = f"{rec['variant_id']}/{rec['task_id']}/{repeat:0{width}d}"
        d = os.path.join(dest, *trial_id.split("/"))
        os.makedirs(d)
        for name in ("trace.msgpack", "workspace.json", "evidence.json"):
            if os.path.exists(os.path.join(src, name)):
                os.link(os.path.join(src, name), os.path.join(d, name))
        clone = {**rec, "trial_id": trial_id, "repeat": repeat}
        clone.pop("record_sha256", None)
        clone["record_sha256"] = record_digest(clone)
        with open(os.path.join(d, "task.json"), "w", encoding="utf-8") as fh:
            json.dump(clone, fh)
        records.append(clone)
    gates = report.suite_metrics(records)
    summary = report.summary(records, gates, os.path.basename(dest), {"bench": True})
    summary["status"] = "complete"
    write_json_atomic(os.path.join(dest, "run.json"), summary)
    report.write_parquet(dest, records)


def measure(run: str, fmt: str, out: str, env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([CE, "report", run, "-f", fmt, "-o", out], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"ce report {run} -f {fmt}: exit {code}\n{err[-3000:]}")
    return {"seconds": wall, "peak_rss_mib": usage.ru_maxrss / 1024,
            "cpu_seconds": usage.ru_utime + usage.ru_stime, "bytes": os.path.getsize(out)}


def browser(html: str) -> dict[str, Any] | None:
    """Seconds until the page drew its table, and to open the last trial."""
    if not os.path.exists("/usr/bin/chromium"):
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium",
                              args=["--no-sandbox", "--disable-gpu"])
        page = b.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        t0 = time.perf_counter()
        page.goto("file://" + html, timeout=300_000)
        page.wait_for_selector("body[data-ready='1']", state="attached", timeout=300_000)
        load = time.perf_counter() - t0
        page.locator("#trial-table th[data-col='trial_id']").click()
        page.locator("#trial-table th[data-col='trial_id']").click()  # descending
        t0 = time.perf_counter()
        page.locator("#trial-table tbody tr").first.click()
        page.wait_for_selector("#detail-title")
        open_s = time.perf_counter() - t0
        b.close()
    if errors:
        sys.exit(f"the page raised: {errors[:3]}")
    return {"load_seconds": load, "open_trial_seconds": open_s}


def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(runs, key=lambda r: r["seconds"])
    best = dict(ordered[len(ordered) // 2])
    best["min_seconds"] = ordered[0]["seconds"]
    best["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3, help="fresh runs of each measurement")
    ap.add_argument("--browser", action="store_true",
                    help="also time the page in Chromium (load, open a trial)")
    ap.add_argument("--json", action="store_true", help="JSON to stdout, table to stderr")
    ap.add_argument("--out", help="write OUT/report.json (default bench/.data)")
    args = ap.parse_args()
    data_dir = os.path.abspath(args.out) if args.out else DEFAULT_DATA
    os.makedirs(data_dir, exist_ok=True)
    env = bench_env(data_dir)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    from tests.report_run import make_run

    work = tempfile.mkdtemp(prefix="ce-bench-report-")
    try:
        say("one real ce run of the fixture tasks ...")
        run = make_run(os.path.join(work, "src"))
        dest = os.path.join(work, "run")
        t0 = time.perf_counter()
        clone_run(run, dest, args.trials)
        say(f"{args.trials:,} trials cloned in {time.perf_counter() - t0:.1f}s")
        measure(dest, "md", os.path.join(work, "warm.md"), env)  # .pyc and page cache
        rows: dict[str, list] = {"html": [], "md": []}
        for r in range(args.repeat):
            say(f"run {r + 1}/{args.repeat} ...")
            for fmt in rows:
                rows[fmt].append(measure(dest, fmt, os.path.join(work, f"r.{fmt}"), env))
        results = {fmt: median(v) for fmt, v in rows.items()}
        if args.browser:
            say("timing the page in Chromium ...")
            results["browser"] = browser(os.path.join(work, "r.html"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {"meta": {"trials": args.trials, "repeat": args.repeat, "git": git_rev(),
                    "python": platform.python_version(), "cpus": os.cpu_count(),
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           **results}
    with open(os.path.join(data_dir, "report.json"), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    m = doc["meta"]
    lines = [f"ce report benchmark: {m['trials']:,} trials, Python {m['python']}, "
             f"{m['cpus']} CPUs, git {m['git']}, --repeat {m['repeat']}", "",
             f"{'format':<8} {'median s':>9} {'min s':>7} {'cpu s':>7} {'peak RSS':>10} "
             f"{'size':>10}"]
    for fmt in ("html", "md"):
        r = doc[fmt]
        lines.append(f"{fmt:<8} {r['seconds']:>9.2f} {r['min_seconds']:>7.2f} "
                     f"{r['cpu_seconds']:>7.2f} {r['peak_rss_mib']:>6.1f} MiB "
                     f"{r['bytes'] / 2**20:>6.2f} MiB")
    if doc.get("browser"):
        b = doc["browser"]
        lines.append(f"\nChromium: the page drew its table in {b['load_seconds']:.2f} s; "
                     f"a trial opened in {b['open_trial_seconds']:.2f} s")
    table = "\n".join(lines) + "\n"
    if args.json:
        print(table, file=sys.stderr, end="")
        print(json.dumps(doc, indent=2))
    else:
        print(table, end="")


if __name__ == "__main__":
    main()
