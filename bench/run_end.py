"""The end of `ce run`: from its last trial to its exit, where the report worker's reports
are written (issue 14).

`ce run` of the agentless suite (versus_reference.AGENTLESS, 8 tasks, `-j 1`, tempdir
sandbox), warm (compile cache and bytecode), through a wrapper that notes when each
trial's `on_done` ran, when `_finish` (the reports and the table) began and ended, and
when the process exited. With `--against ROOT` (another checkout, e.g. `git archive`
of an older commit unpacked), both run in alternation, round by round: a shared machine
changes speed between rounds, not within one.

    python bench/run_end.py [--repeat 15] [--against /tmp/base] [--out DIR]

Prints, per checkout: `_finish` (median, min ms), last on_done -> exit (the end), and
the whole run's wall time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from versus_reference import AGENTLESS  # noqa: E402

WRAPPER = """\
import os, sys, time

out = open(os.environ["CE_END_TIMES"], "a")

def note(what):
    out.write(f"{time.perf_counter()} {what}\\n")
    out.flush()

from ce_runtime.cli import run, run_output

finish, done = run._finish, run_output.Progress.done

def timed_finish(*args, **kwargs):
    note("finish")
    try:
        return finish(*args, **kwargs)
    finally:
        note("finished")

def timed_done(self, *args, **kwargs):
    note("done")
    return done(self, *args, **kwargs)

run._finish, run_output.Progress.done = timed_finish, timed_done
import atexit
atexit.register(note, "exit")  # entry() runs the atexit handlers, then os._exit
sys.argv = ["ce", *sys.argv[1:]]
try:  # the `ce` script's own entry (since it starts the report worker itself)
    from ce_runtime.boot import entry
except ImportError:  # a checkout from before
    from ce_runtime.cli import entry
entry()
"""


def env(checkout: str, times: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out.update(PYTHONPATH=checkout, CE_END_TIMES=times, CE_PLAIN="1", NO_COLOR="1",
               TELEMETRY_ENABLED="false",
               PYTHONPYCACHEPREFIX=os.path.join(os.path.dirname(times), "pycache"))
    return out


def one_run(work: str, checkout: str) -> tuple[float, float, float]:
    """(_finish ms, last on_done -> exit ms, wall ms) of one warm `ce run`."""
    times = os.path.join(work, "times.txt")
    if os.path.exists(times):
        os.unlink(times)
    subprocess.run(["rm", "-rf", os.path.join(work, "X")], check=True)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, os.path.join(work, "wrapper.py"), "run",
                          "agentless", "-j", "1", "--run-dir", "X"], cwd=work,
                         env=env(checkout, times), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f"ce run ({checkout}) exited {res.returncode}: {res.stderr[-2000:]}")
    notes: dict[str, float] = {}
    with open(times, encoding="utf-8") as fh:
        for line in fh:
            t, what = line.split()
            notes[what] = float(t)  # the last `done` is the last trial's
    return ((notes["finished"] - notes["finish"]) * 1000,
            (notes["exit"] - notes["done"]) * 1000, wall * 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--against", help="another checkout's root, run in alternation")
    ap.add_argument("--out", help="work directory (default: a temporary one)")
    args = ap.parse_args()
    work = args.out or tempfile.mkdtemp(prefix="ce-bench-end-")
    os.makedirs(os.path.join(work, "agentless"), exist_ok=True)
    for i in range(8):
        with open(os.path.join(work, "agentless", f"agentless_{i}.yaml"), "w") as fh:
            fh.write(AGENTLESS.format(i=i))
    with open(os.path.join(work, "wrapper.py"), "w") as fh:
        fh.write(WRAPPER)
    checkouts = {"this": ROOT, **({"against": args.against} if args.against else {})}
    for checkout in checkouts.values():  # warm: bytecode, compile cache
        one_run(work, checkout)
        one_run(work, checkout)
    rows: dict[str, list[tuple[float, float, float]]] = {name: [] for name in checkouts}
    for i in range(args.repeat):
        for name in (list(checkouts) if i % 2 == 0 else list(reversed(checkouts))):
            rows[name].append(one_run(work, checkouts[name]))
    print(f"the end of `ce run` (8 agentless tasks, -j 1, warm), {args.repeat} rounds, "
          f"{os.cpu_count()} CPUs")
    print(f"    {'checkout':<40} {'_finish ms':>16} {'last trial->exit':>18} "
          f"{'wall ms':>16}   (median / min)")
    for name, values in rows.items():
        cols = list(zip(*values, strict=True))
        cells = [f"{statistics.median(c):7.0f} / {min(c):5.0f}" for c in cols]
        print(f"    {checkouts[name][-40:]:<40} {cells[0]:>16} {cells[1]:>18} {cells[2]:>16}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
