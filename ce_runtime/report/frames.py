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
from collections.abc import Sequence
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from msgspec import to_builtins
from msgspec.structs import astuple

from ce_runtime.store.atomic import write_bytes_atomic
from ce_runtime.store.record import CriterionRecord, Status, TrialRecord, as_records

if TYPE_CHECKING:
    import polars as pl

CLASSIFICATION = "classification"
TURN_BUDGET_FACTOR = 1.5
EPSILON = 1e-9  # a metric within this of its minimum meets it (float noise in F1)

TRIAL_KEYS = ("trial_id", "variant_id", "experiment_id", "task_id", "suite_id", "row_id",
              "repeat")


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

    raw = pl.DataFrame(_trial_columns(records), schema=_trial_columns_schema(), strict=False)
    status = pl.col("status")
    graded = status.is_not_null() & (status != Status.NOT_GRADED.value)
    visible_turns = pl.col("tool_calls") + 1
    return raw.lazy().select(
        *TRIAL_KEYS,
        status,
        (status == Status.SUCCESS.value).fill_null(False).alias("success"),
        graded.fill_null(False).alias("graded"),
        "weighted_score",
        pl.col("stopped_early").fill_null(False),
        "early_stop_reason",
        "early_stop",
        # how many turns an early stop saved at most (max_turns minus the turns taken)
        pl.col("early_stop").struct.field("turns_remaining_at_stop")
        .alias("turns_remaining_at_stop"),
        pl.col("started_at").str.to_datetime(time_unit="us", time_zone="UTC", strict=False),
        "duration_s",
        "input_tokens", "output_tokens",
        (pl.col("input_tokens") + pl.col("output_tokens")).alias("total_tokens"),
        "cache_read_tokens", "cache_write_tokens",
        "cost_usd", "cost_unknown", "turns", "tool_calls",
        visible_turns.alias("visible_turns"),
        "expected_turns",
        pl.when(pl.col("expected_turns").is_not_null() & graded)
        .then((status == Status.SUCCESS.value)
              & (visible_turns <= TURN_BUDGET_FACTOR * pl.col("expected_turns")))
        .alias("within_expected_turns"),
        "agent", "model", "tags", "task_file", "plan_hash", "outcome_reason",
        "outcome_detail", "error", "n_criteria", "n_failed_criteria", *JUDGE_COLUMNS,
    ).collect()


_PLAIN_TRIAL_FIELDS = (*TRIAL_KEYS, "tags", "task_file", "plan_hash", "agent", "model",
                       "status", "stopped_early", "early_stop_reason", "weighted_score",
                       "started_at", "duration_s", "expected_turns", "error",
                       "cost_unknown")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                 "cost_usd", "turns", "tool_calls")
# task.json's judge_usage (null: no judge was called), flat; `ce report` rebuilds it
_JUDGE_FIELDS = ("calls", "agent_sessions", "recorded", "unmetered", "input_tokens",
                 "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")
JUDGE_COLUMNS = (*(f"judge_{k}" for k in _JUDGE_FIELDS), "judge_cost_unknown")


def _trial_columns_schema() -> dict[str, Any]:
    import polars as pl

    return {
        **{k: (pl.Int64 if k == "repeat" else pl.String) for k in TRIAL_KEYS},
        "tags": pl.List(pl.String), "task_file": pl.String, "plan_hash": pl.String,
        "agent": pl.String, "model": pl.String, "status": pl.String,
        "stopped_early": pl.Boolean, "early_stop_reason": pl.String,
        "weighted_score": pl.Float64, "started_at": pl.String, "duration_s": pl.Float64,
        "expected_turns": pl.Int64, "error": pl.String, "cost_unknown": pl.String,
        "input_tokens": pl.Int64, "output_tokens": pl.Int64, "cache_read_tokens": pl.Int64,
        "cache_write_tokens": pl.Int64, "cost_usd": pl.Float64,
        "turns": pl.Int64, "tool_calls": pl.Int64,
        "outcome_reason": pl.String, "outcome_detail": pl.String,
        "n_criteria": pl.Int64, "n_failed_criteria": pl.Int64,
        **{f"judge_{k}": pl.Float64 if k == "cost_usd" else pl.Int64 for k in _JUDGE_FIELDS},
        "judge_cost_unknown": pl.List(pl.String),
        "early_stop": _early_stop_schema(),
    }


def _early_stop_schema() -> Any:
    """task.json's early_stop as a struct column (null: the trial ran to its end), its
    fields EarlyStop's own: a field added to the record reaches the parquet."""
    import typing

    import msgspec
    import polars as pl

    from ce_runtime.store.record import EarlyStop

    scalars = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}

    def polars_type(hint: Any) -> Any:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) is list:
            return pl.List(polars_type(args[0]))
        return scalars[args[0] if args else hint]

    return pl.Struct({f.name: polars_type(f.type) for f in msgspec.structs.fields(EarlyStop)})


def _trial_columns(records: list[TrialRecord]) -> dict[str, list[Any]]:
    """The trials frame's input, flat, column by column from the records' attributes
    (nothing nested for Polars to convert: usage and the agent's outcome by field, the
    criteria counted here)."""
    cols: dict[str, list[Any]] = {k: [getattr(r, k) for r in records]
                                  for k in _PLAIN_TRIAL_FIELDS}
    cols["status"] = [None if v is None else str(v) for v in cols["status"]]
    usages = [r.usage for r in records]
    for k in _USAGE_FIELDS:
        cols[k] = [getattr(u, k) for u in usages]
    outcomes = [r.agent_outcome for r in records]
    cols["outcome_reason"] = [None if o is None else o.reason for o in outcomes]
    cols["outcome_detail"] = [None if o is None else o.detail for o in outcomes]
    cols["n_criteria"] = [len(r.criteria) for r in records]
    # the criteria the reports name as the trial's failures (an advisory one that failed
    # with an error too: report.md listed it, this column did not count it)
    from ce_runtime.report.text import failed_criteria

    cols["n_failed_criteria"] = [len(failed_criteria(r)) for r in records]
    judges = [r.judge_usage for r in records]
    for k in _JUDGE_FIELDS:
        cols[f"judge_{k}"] = [None if j is None else getattr(j, k) for j in judges]
    cols["judge_cost_unknown"] = [None if j is None else list(j.cost_unknown) for j in judges]
    cols["early_stop"] = [None if r.early_stop is None else to_builtins(r.early_stop)
                          for r in records]
    return cols


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


_CRITERION_FIELDS = ("type", "description", "kind", "score", "pass_threshold", "passed",
                     "weight", "gating", "advisory", "disabled", "error")
_CRITERION_STRUCT_FIELDS = CriterionRecord.__struct_fields__


def _result_columns(records: list[TrialRecord]) -> dict[str, list[Any]]:
    """The results frame, column by column: a row per criterion result, the trial's
    keys repeated on each (reshaping only: `outputs` is an open mapping whose values
    Polars cannot type up front). Built by C-level iteration where it can be (a
    trial's value repeated per criterion, a criterion's fields as one tuple): a
    rescore's 10,000 trials have some 60,000 results."""
    counts = [len(r.criteria) for r in records]
    results = list(chain.from_iterable(r.criteria for r in records))

    def per_result(values: list[Any]) -> list[Any]:
        return list(chain.from_iterable(map(repeat, values, counts)))

    cols: dict[str, list[Any]] = {k: per_result([getattr(r, k) for r in records])
                                  for k in TRIAL_KEYS}
    cols["status"] = per_result([str(r.status) for r in records])
    cols["stopped_early"] = per_result([r.stopped_early for r in records])
    fields = dict(zip(_CRITERION_STRUCT_FIELDS,
                      zip(*map(astuple, results), strict=True) if results
                      else ((),) * len(_CRITERION_STRUCT_FIELDS), strict=True))
    cols["criterion_id"] = list(fields["id"])
    for k in _CRITERION_FIELDS:
        cols[k] = list(fields[k])
    outputs = fields["outputs"]
    cols["observed"] = [_label(o.get("observed")) if o else None for o in outputs]
    cols["expected"] = [_label(o.get("expected")) if o else None for o in outputs]
    return cols


def results_frame(records: Records) -> pl.DataFrame:
    """One row per criterion result: the trial's ids and status, then the criterion's
    fields and, for classification criteria, the observed and expected labels."""
    return _RESULTS.get(as_records(records), _results_frame)


def _results_frame(records: list[TrialRecord]) -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(_result_columns(records), schema=_results_schema(), strict=False)


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_parquet(buf)
    return buf.getvalue()


def write_parquet(run_dir: str, records: Records) -> None:
    """trials.parquet and results.parquet in `run_dir`, each written atomically."""
    records = as_records(records)
    write_bytes_atomic(os.path.join(run_dir, "trials.parquet"),
                       parquet_bytes(trials_frame(records)))
    write_bytes_atomic(os.path.join(run_dir, "results.parquet"),
                       parquet_bytes(results_frame(records)))


def ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """num / den, 0.0 when den is 0 (scikit-learn's zero_division=0)."""
    import polars as pl

    return pl.when(den > 0).then(num / den).otherwise(0.0)
