"""One CLI convention (issue 15): results on stdout, progress and diagnostics on stderr;
`--format` where there is more than one output form; `-q` quiet; `-D` takes the paths
diagnostics print; trial ids by unique prefix; unknown ids and criteria are errors with
a did-you-mean; report.md's failures name a `ce explain` command and a suite gate shows
its rows' own descriptions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CE = [sys.executable, "-m", "ce_runtime.cli"]


def ce(*args, cwd=None, env=None):
    full = {**os.environ, "CE_PLAIN": "1", **(env or {})}
    return subprocess.run([*CE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full, timeout=600)


# ---------------------------------------------------------------------------- report.md


def test_report_md_failures_point_to_explain_and_rows_keep_descriptions():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_report import crit, record

    from ce_runtime import report as R

    recs = [record("v", "suite", row=f"r{i}", status="FAILURE" if i == 2 else "SUCCESS",
                   criteria=[crit("c0", "file_exists", 0.0 if i == 2 else 1.0,
                                  description=f"row r{i} wrote out{i}.txt",
                                  suite_thresholds={"pass_rate": 0.5})])
            for i in (1, 2)]
    gates = R.suite_metrics(recs)
    text = R.render_markdown(R.summary(recs, gates, "r", None), recs, gates)
    failures = text.split("## Failures")[1].split("## Suite gates")[0]
    assert "`ce explain RUN/v/suite/r2/00`" in failures
    gate_row = next(line for line in text.splitlines() if line.startswith("| `v` | `suite`"))
    assert "row r1 wrote out1.txt" in gate_row and "row r2 wrote out2.txt" in gate_row
