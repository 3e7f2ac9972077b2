"""The two Polars frames every run aggregate is computed from, and their parquet files.

`trials_frame` has one row per trial, `results_frame` one row per criterion result; both
are built from task.json records (TrialRecords, or dicts of their shape). This is also
where the shared definitions live (the turn budget factor, the float tolerance; the
statuses are store/record.py's) so that the metrics and the renderers agree on them. Polars is imported inside the functions so that `ce --help`
never loads it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ce_runtime.store.atomic import write_bytes_atomic
from ce_runtime.store.record import Status, TrialRecord, as_records, record_dict

if TYPE_CHECKING:
    import polars as pl

CLASSIFICATION = "classification"
TURN_BUDGET_FACTOR = 1.5
EPSILON = 1e-9  # a metric within this of its minimum meets it (float noise in F1)

TRIAL_KEYS = ("trial_id", "variant_id", "experiment_id", "task_id", "suite_id", "row_id",
              "repeat")


def _trial_input_schema() -> dict[str, Any]:
    import polars as pl

    return {
        "trial_id": pl.String, "variant_id": pl.String, "experiment_id": pl.String,
        "task_id": pl.String, "suite_id": pl.String, "row_id": pl.String,
        "repeat": pl.Int64, "tags": pl.List(pl.String), "task_file": pl.String,
        "plan_hash": pl.String, "agent": pl.String, "model": pl.String,
        "status": pl.String, "stopped_early": pl.Boolean, "early_stop_reason": pl.String,
        "weighted_score": pl.Float64, "started_at": pl.String, "duration_s": pl.Float64,
        "agent_outcome": pl.Struct({"reason": pl.String, "detail": pl.String}),
        "usage": pl.Struct({"input_tokens": pl.Int64, "output_tokens": pl.Int64,
                            "cost_usd": pl.Float64, "turns": pl.Int64,
                            "tool_calls": pl.Int64}),
        "expected_turns": pl.Int64,
        "criteria": pl.List(pl.Struct({"passed": pl.Boolean, "gating": pl.Boolean})),
        "error": pl.String,
    }


Records = Sequence[TrialRecord | dict[str, Any]]  # typed, or task.json-shaped dicts


class _LastFrame:
    """The frame last built from a list of records, reused while the same (frozen)
    records come again: a run's end and a rescore make their metrics, summary and parquet
    from one list, and building the frame was a third of a re-scored trial's cost."""

    def __init__(self) -> None:
        self.records: list[TrialRecord] | None = None
        self.frame: pl.DataFrame | None = None

    def get(self, records: list[TrialRecord], build) -> pl.DataFrame:
        last = self.records
        if last is None or len(last) != len(records) or \
                any(a is not b for a, b in zip(last, records, strict=True)):
            self.records, self.frame = list(records), build(records)
        assert self.frame is not None
        return self.frame


_TRIALS, _RESULTS = _LastFrame(), _LastFrame()


def trials_frame(records: Records) -> pl.DataFrame:
    """One row per trial, in record order."""
    return _TRIALS.get(as_records(records), _trials_frame)


def _trials_frame(records: list[TrialRecord]) -> pl.DataFrame:
    import polars as pl

    raw = pl.from_dicts([record_dict(r) for r in records],
                        schema=_trial_input_schema(), strict=False)
    usage = pl.col("usage").struct
    status = pl.col("status")
    graded = status.is_not_null() & (status != Status.NOT_GRADED.value)
    visible_turns = usage.field("tool_calls").fill_null(0) + 1
    return raw.lazy().select(
        *TRIAL_KEYS,
        status,
        (status == Status.SUCCESS.value).fill_null(False).alias("success"),
        graded.fill_null(False).alias("graded"),
        "weighted_score",
        pl.col("stopped_early").fill_null(False),
        "early_stop_reason",
        pl.col("started_at").str.to_datetime(time_unit="us", time_zone="UTC", strict=False),
        "duration_s",
        usage.field("input_tokens").fill_null(0).alias("input_tokens"),
        usage.field("output_tokens").fill_null(0).alias("output_tokens"),
        (usage.field("input_tokens").fill_null(0) + usage.field("output_tokens").fill_null(0))
        .alias("total_tokens"),
        usage.field("cost_usd").fill_null(0.0).alias("cost_usd"),
        usage.field("turns").fill_null(0).alias("turns"),
        usage.field("tool_calls").fill_null(0).alias("tool_calls"),
        visible_turns.alias("visible_turns"),
        "expected_turns",
        pl.when(pl.col("expected_turns").is_not_null() & graded)
        .then((status == Status.SUCCESS.value)
              & (visible_turns <= TURN_BUDGET_FACTOR * pl.col("expected_turns")))
        .alias("within_expected_turns"),
        "agent", "model", "tags", "task_file", "plan_hash",
        pl.col("agent_outcome").struct.field("reason").alias("outcome_reason"),
        pl.col("agent_outcome").struct.field("detail").alias("outcome_detail"),
        "error",
        pl.col("criteria").list.len().fill_null(0).cast(pl.Int64).alias("n_criteria"),
        pl.col("criteria").list.eval(
            (pl.element().struct.field("gating") & ~pl.element().struct.field("passed"))
            .cast(pl.Int64)).list.sum().fill_null(0).alias("n_failed_criteria"),
    ).collect()


def _results_schema() -> dict[str, Any]:
    import polars as pl

    return {
        **{k: (pl.Int64 if k == "repeat" else pl.String) for k in TRIAL_KEYS},
        "status": pl.String, "stopped_early": pl.Boolean,
        "criterion_id": pl.String, "type": pl.String, "description": pl.String,
        "kind": pl.String, "score": pl.Float64, "pass_threshold": pl.Float64,
        "passed": pl.Boolean, "weight": pl.Float64, "gating": pl.Boolean,
        "advisory": pl.Boolean, "disabled": pl.Boolean, "error": pl.String,
        "observed": pl.String, "expected": pl.String,
    }


def _label(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _result_rows(records: Records) -> Iterable[dict[str, Any]]:
    # Reshaping only: `outputs` is an open mapping whose values Polars cannot type up front.
    for rec in as_records(records):
        base = {k: getattr(rec, k) for k in TRIAL_KEYS}
        base["status"] = str(rec.status)
        base["stopped_early"] = rec.stopped_early
        for c in rec.criteria:
            yield {
                **base, "criterion_id": c.id, "type": c.type,
                "description": c.description, "kind": c.kind,
                "score": c.score, "pass_threshold": c.pass_threshold,
                "passed": c.passed, "weight": c.weight,
                "gating": c.gating, "advisory": c.advisory,
                "disabled": c.disabled, "error": c.error,
                "observed": _label(c.outputs.get("observed")),
                "expected": _label(c.outputs.get("expected")),
            }


def results_frame(records: Records) -> pl.DataFrame:
    """One row per criterion result: the trial's ids and status, then the criterion's
    fields and, for classification criteria, the observed and expected labels."""
    return _RESULTS.get(as_records(records), _results_frame)


def _results_frame(records: list[TrialRecord]) -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(list(_result_rows(records)), schema=_results_schema(), strict=False)


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_parquet(buf)
    return buf.getvalue()


def write_parquet(run_dir: str, records: Records) -> None:
    """trials.parquet and results.parquet in `run_dir`, each written atomically."""
    records = as_records(records)
    write_bytes_atomic(os.path.join(run_dir, "trials.parquet"),
                       _parquet_bytes(trials_frame(records)))
    write_bytes_atomic(os.path.join(run_dir, "results.parquet"),
                       _parquet_bytes(results_frame(records)))


def ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """num / den, 0.0 when den is 0 (scikit-learn's zero_division=0)."""
    import polars as pl

    return pl.when(den > 0).then(num / den).otherwise(0.0)
