"""What every benchmark script shares (they run as scripts: `bench/` is on sys.path)."""

from __future__ import annotations

import hashlib
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_rev() -> str | None:
    """HEAD, plus `+dirty` and a short hash of the uncommitted diff of ce's sources (so a
    run that spans a change to them can tell); CE_BENCH_REV outside a git checkout."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=ROOT, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=ROOT).stdout.strip()
        diff = subprocess.run(["git", "diff", "HEAD", "--", "ce_lang", "ce_runtime",
                               "ce_agents", "stdlib_criteria", "grammar"],
                              capture_output=True, cwd=ROOT).stdout
        if diff:
            return f"{rev}+dirty({hashlib.sha1(diff).hexdigest()[:7]})"
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):  # e.g. a `git archive` snapshot
        return os.environ.get("CE_BENCH_REV")
