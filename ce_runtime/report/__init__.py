"""Run reporting: task.json records -> parquet, suite gates, run.json summary, report.md, JUnit.

Every aggregate is computed by Polars expressions over two frames: `trials_frame` (one row
per trial) and `results_frame` (one row per criterion result). Python only reshapes the
records on the way in and formats the aggregates on the way out. Polars is imported inside
the functions so that `ce --help` never loads it.

This module is the entry point `ce run` uses and the place the definitions are written
down; the work is done by one module per job:

- `report_frames`    the two frames and trials.parquet / results.parquet
- `report_gates`     suite metrics and `suite_thresholds` gates (`SuiteGate`)
- `report_summary`   the run.json document and the exit code
- `report_usage`     what a trial cost, per run or variant, and B ÷ A (`usage_text`: as text)
- `report_text`      number formatting shared by the renderers
- `report_markdown`  report.md
- `report_junit`     JUnit XML

Definitions (the report and run.json use the same ones):

- graded trial: any status but NOT_GRADED (an ERROR trial counts, as a failure).
- pass rate: SUCCESS / graded trials; Wilson 95% interval alongside.
- mean score: mean weighted_score over graded trials that have one (ERROR trials that
  never reached grading have none).
- within expected turns (TASK_DEFINITION_GUIDE, expected_turns): over graded trials
  whose task sets `expected_turns`, the share that succeeded with visible turns (tool
  calls + 1 for the final reply) <= 1.5 x expected_turns.
- pass@k: per (variant, task), k = the task's graded repeats; the task passes@k when any
  repeat succeeded (pass^k: when every repeat did).
- suite metrics (per variant, dataset suite and criterion, pooling rows and repeats):
  classification criteria (outputs `observed`/`expected`) get accuracy, per-label
  precision/recall/F1, macro/weighted/micro F1 and the confusion matrix, with
  scikit-learn's definitions (labels = those seen as expected or observed, sorted;
  a 0/0 precision, recall or F1 is 0); other criteria get pass_rate and mean_score.
  A gate passes when every `suite_thresholds` metric is >= its minimum.
- usage per trial (`report_usage`; each variant's `per_trial`, `ce compare`'s `usage`):
  mean and median turns, tool calls, input and output tokens, USD and wall time over the
  graded trials that measured each (unknown, never 0: no agent ran, no token or no cost
  reported, a model with no rate), ERROR trials among them and counted apart (how many,
  and how many never reached grading); a ratio to the baseline (or A) is of the means over
  the matched trials that measured it in both. The run's and each variant's cost
  (`cost_usd`) is the sum over its `cost_known_trials` (the same rule): with none it
  is unknown ("—"), never $0, and a trial's cost cell is "—" when unknown. Likewise
  its `tokens` (sums) are over its `tokens_known_trials`, and a trial's turns, tool
  calls and tokens cells are "—" when unknown, never 0.
- exit code: 0 when every trial is SUCCESS and every suite gate passed, else 1.
"""

from __future__ import annotations

import os

# Polars sums a column in per-thread pieces whose split varies from one process to the
# next, so a mean could differ in its last digit between `ce run`'s report and `ce
# report` of the same run (measured: 0.6458333333333333 or ...334). One thread makes
# every aggregate reproducible; report-sized frames gain nothing from more. Set before
# Polars starts its thread pool: the report modules, whose package this is, and the
# report worker import it before Polars.
os.environ["POLARS_MAX_THREADS"] = "1"

from ce_runtime.report.frames import results_frame, trials_frame, write_parquet
from ce_runtime.report.gates import SuiteGate, suite_metrics
from ce_runtime.report.junit import render_junit
from ce_runtime.report.markdown import render_markdown
from ce_runtime.report.summary import summary

__all__ = [
    "SuiteGate",
    "render_junit",
    "render_markdown",
    "results_frame",
    "suite_metrics",
    "summary",
    "trials_frame",
    "write_parquet",
]


def load_polars() -> None:
    """Import Polars now (the report worker: while the trials run, not at the end)."""
    import polars  # noqa: F401
