"""Compile speed of a big dataset task: `ce compile TASK -q` of a sentiment-classification
task whose JSONL dataset has --rows rows (four criteria reading ${row.text} and
${row.label}: classification_match, file_contains, file_exists, an llm_judge whose
prompt holds the review), with the compile cache off.

    .venv/bin/python bench/dataset_compile.py [--rows 20000] [--repeat 3]
                                              [--against /tmp/old]

Prints the median wall and CPU time (user + system) of --repeat fresh processes, and
rows per second. With --against ROOT (another checkout, e.g. `git archive OLD | tar -x -C
/tmp/old`), both run in alternation, round by round (a shared machine changes speed
between rounds, not within one), and the ratio old / this is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TASK = """\
task_id: sentiment
description: classify the sentiment of a review
dataset:
  paths: [rows.jsonl]
initial_prompt: |
  Classify the sentiment of this review as positive, negative or neutral.
  Write only the label to label.txt.

  Review: ${row.text}
agent:
  type: claude-code
run_limits:
  max_turns: 4
success_criteria:
  - type: classification_match
    path: label.txt
    expected_label: "${row.label}"
    allowed_labels: [positive, negative, neutral]
    description: "label for ${row.id} is ${row.label}"
  - type: file_contains
    path: label.txt
    includes: ["${row.label}"]
    description: "label.txt names ${row.label}"
  - type: file_exists
    path: label.txt
    description: label.txt written
  - type: llm_judge
    prompt: |
      The review was: ${row.text}
      The expected sentiment is ${row.label}. Score 1 if label.txt says so.
    files: [label.txt]
    description: judge agrees with ${row.label}
"""


def write_task(n: int, out: str) -> str:
    rng = random.Random(7)
    words = ["good", "bad", "great", "awful", "fine", "terrible", "lovely", "boring",
             "exciting", "slow", "fast", "cheap", "pricey", "tasty", "bland"]
    with open(os.path.join(out, "rows.jsonl"), "w", encoding="utf-8") as fh:
        for i in range(n):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(5, 25)))
            fh.write(json.dumps({"id": f"r{i:06d}", "text": f"The product was {text}.",
                                 "label": rng.choice(["positive", "negative", "neutral"])})
                     + "\n")
    path = os.path.join(out, "task.yaml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(TASK)
    return path


def one(checkout: str, task: str) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=checkout, CE_NO_COMPILE_CACHE="1",
               PYTHONPYCACHEPREFIX=os.path.join(os.path.dirname(task), "pycache"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile", task, "-q"],
                         env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        sys.exit(f"ce compile ({checkout}) exited {res.returncode}: {res.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--against", help="another checkout's root, run in alternation")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ce-bench-dataset-")
    task = write_task(args.rows, work)
    checkouts = {"this": ROOT, **({"against": args.against} if args.against else {})}
    for checkout in checkouts.values():  # bytecode
        one(checkout, task)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in checkouts}
    for i in range(args.repeat):
        for name in (list(checkouts) if i % 2 == 0 else list(reversed(checkouts))):
            times[name].append(one(checkouts[name], task))
    print(f"ce compile of a {args.rows:,}-row dataset task (cache off), median of "
          f"{args.repeat}, {os.cpu_count()} CPUs")
    med = {}
    for name, rows in times.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        med[name] = (wall, cpu)
        print(f"    {name:<8} {checkouts[name][-40:]:<40} wall {wall:7.2f} s   cpu {cpu:7.2f} s"
              f"   {args.rows / wall:8.0f} rows/s")
    if "against" in med:
        print(f"    against / this: wall {med['against'][0] / med['this'][0]:.2f}x, "
              f"cpu {med['against'][1] / med['this'][1]:.2f}x")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
