"""The trials and results frames are built column by column from the records' attributes;
they must be the frames the row-by-row build (`record_dict` of each record, then
`pl.from_dicts`) made: same columns, dtypes and values, for every shape of record."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

from ce_runtime.report import frames as F
from ce_runtime.store.record import Status, as_records, record_dict


def _trial_input_schema() -> dict[str, Any]:
    return {
        "trial_id": pl.String, "variant_id": pl.String, "experiment_id": pl.String,
        "task_id": pl.String, "suite_id": pl.String, "row_id": pl.String,
        "repeat": pl.Int64, "tags": pl.List(pl.String), "task_file": pl.String,
        "plan_hash": pl.String, "agent": pl.String, "model": pl.String,
        "status": pl.String, "stopped_early": pl.Boolean, "early_stop_reason": pl.String,
        "early_stop": F._early_stop_schema(),
        "weighted_score": pl.Float64, "started_at": pl.String, "duration_s": pl.Float64,
        "agent_outcome": pl.Struct({"reason": pl.String, "detail": pl.String}),
        "usage": pl.Struct({"input_tokens": pl.Int64, "output_tokens": pl.Int64,
                            "cache_read_tokens": pl.Int64, "cache_write_tokens": pl.Int64,
                            "cost_usd": pl.Float64, "turns": pl.Int64,
                            "tool_calls": pl.Int64}),
        "expected_turns": pl.Int64,
        "criteria": pl.List(pl.Struct({"passed": pl.Boolean, "gating": pl.Boolean,
                                       "disabled": pl.Boolean, "error": pl.String})),
        "error": pl.String, "cost_unknown": pl.String,
        "judge_usage": pl.Struct({
            "calls": pl.Int64, "agent_sessions": pl.Int64, "recorded": pl.Int64,
            "unmetered": pl.Int64,
            "input_tokens": pl.Int64, "output_tokens": pl.Int64,
            "cache_read_tokens": pl.Int64, "cache_write_tokens": pl.Int64,
            "cost_usd": pl.Float64, "cost_unknown": pl.List(pl.String)}),
    }


def _reference_trials_input(records) -> pl.DataFrame:
    return pl.from_dicts([record_dict(r) for r in records], schema=_trial_input_schema(),
                         strict=False)


def _reference_trials_frame(records) -> pl.DataFrame:
    """The row-by-row build, as it was."""
    raw = _reference_trials_input(records)
    usage = pl.col("usage").struct
    status = pl.col("status")
    graded = status.is_not_null() & (status != Status.NOT_GRADED.value)
    visible_turns = usage.field("tool_calls").fill_null(0) + 1
    return raw.lazy().select(
        *F.TRIAL_KEYS,
        status,
        (status == Status.SUCCESS.value).fill_null(False).alias("success"),
        graded.fill_null(False).alias("graded"),
        "weighted_score",
        pl.col("stopped_early").fill_null(False),
        "early_stop_reason",
        "early_stop",
        pl.col("early_stop").struct.field("turns_remaining_at_stop")
        .alias("turns_remaining_at_stop"),
        pl.col("started_at").str.to_datetime(time_unit="us", time_zone="UTC", strict=False),
        "duration_s",
        usage.field("input_tokens").fill_null(0).alias("input_tokens"),
        usage.field("output_tokens").fill_null(0).alias("output_tokens"),
        (usage.field("input_tokens").fill_null(0) + usage.field("output_tokens").fill_null(0))
        .alias("total_tokens"),
        usage.field("cache_read_tokens").fill_null(0).alias("cache_read_tokens"),
        usage.field("cache_write_tokens").fill_null(0).alias("cache_write_tokens"),
        usage.field("cost_usd").fill_null(0.0).alias("cost_usd"),
        "cost_unknown",
        usage.field("turns").fill_null(0).alias("turns"),
        usage.field("tool_calls").fill_null(0).alias("tool_calls"),
        visible_turns.alias("visible_turns"),
        "expected_turns",
        pl.when(pl.col("expected_turns").is_not_null() & graded)
        .then((status == Status.SUCCESS.value)
              & (visible_turns <= F.TURN_BUDGET_FACTOR * pl.col("expected_turns")))
        .alias("within_expected_turns"),
        "agent", "model", "tags", "task_file", "plan_hash",
        pl.col("agent_outcome").struct.field("reason").alias("outcome_reason"),
        pl.col("agent_outcome").struct.field("detail").alias("outcome_detail"),
        "error",
        pl.col("criteria").list.len().fill_null(0).cast(pl.Int64).alias("n_criteria"),
        pl.col("criteria").list.eval(
            ((pl.element().struct.field("gating")
              | pl.element().struct.field("error").is_not_null())
             & ~pl.element().struct.field("passed") & ~pl.element().struct.field("disabled"))
            .cast(pl.Int64)).list.sum().fill_null(0).alias("n_failed_criteria"),
        *(pl.col("judge_usage").struct.field(c[len("judge_"):]).alias(c)
          for c in F.JUDGE_COLUMNS),
    ).collect()


def _reference_results(records) -> pl.DataFrame:
    rows = []
    for rec in records:
        base = {k: getattr(rec, k) for k in F.TRIAL_KEYS}
        base["status"] = str(rec.status)
        base["stopped_early"] = rec.stopped_early
        for c in rec.criteria:
            rows.append({
                **base, "criterion_id": c.id, "type": c.type, "description": c.description,
                "kind": c.kind, "score": c.score, "pass_threshold": c.pass_threshold,
                "passed": c.passed, "weight": c.weight, "gating": c.gating,
                "advisory": c.advisory, "disabled": c.disabled, "error": c.error,
                "observed": F._label(c.outputs.get("observed")),
                "expected": F._label(c.outputs.get("expected"))})
    return pl.DataFrame(rows, schema=F._results_schema(), strict=False)


def _crit(i, **kw):
    return {"id": f"c{i}", "type": "file_exists", **kw}


RECORDS = [
    {"trial_id": "v/a/00", "status": "SUCCESS", "variant_id": "v", "task_id": "a",
     "weighted_score": 1, "repeat": 0, "tags": ["x", "y"], "started_at":
     "2026-12-01T09:00:00+00:00", "duration_s": 1.5, "expected_turns": 2,
     "agent_outcome": {"reason": "done", "detail": "ok"},
     "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 40,
               "cost_usd": 0.25, "turns": 2, "tool_calls": 3},
     "criteria": [_crit(1, score=1.0, passed=True, gating=True, weight=1.0,
                        outputs={"observed": "yes", "expected": True}),
                  _crit(2, kind="classification", score=0.0, gating=False, advisory=True,
                        outputs={"observed": "no", "expected": False}, error="boom")]},
    {"trial_id": "v/a/01", "status": "FAILURE", "suite_id": "s", "row_id": "r1",
     "weighted_score": None, "stopped_early": True, "early_stop_reason": "gate",
     "early_stop": {"reason": "criterion_passed", "deciding_criterion": "c1",
                    "armed_criteria": ["c1"], "turn_index": 2, "turns_remaining_at_stop": 8},
     "criteria": [_crit(1, disabled=True, advisory=True, description="d",
                        pass_threshold=0.5, suite_thresholds={"pass_rate": 0.5})]},
    {"trial_id": "v/b/00", "status": "NOT_GRADED", "error": "no grading", "model": "m",
     "agent": "codex", "task_file": "b.yaml", "plan_hash": "ab" * 32,
     "cost_unknown": "model 'm' has no rate",
     "judge_usage": {"calls": 2, "agent_sessions": 1, "recorded": 1, "unmetered": 0, "input_tokens": 7,
                     "output_tokens": 3, "cache_read_tokens": 5, "cache_write_tokens": 2,
                     "cost_usd": 0.5, "cost_unknown": ["judge model 'x' has no rate"]}},
    {"trial_id": "v/b/01", "status": "ERROR", "usage": {"turns": 1},
     "started_at": "not a date", "rescored_from": "x", "previous": {"status": "ERROR"}},
]


@pytest.mark.parametrize("n", [0, 1, len(RECORDS)])
def test_frames_built_by_column_are_the_row_built_frames(n):
    records = as_records(RECORDS[:n])
    got, want = F._trials_frame(records), _reference_trials_frame(records)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)
    got, want = F._results_frame(records), _reference_results(records)
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)
    assert got.height == sum(len(r.criteria) for r in records)


def test_the_trials_frame_reads_the_columns():
    frame = F._trials_frame(as_records(RECORDS))
    row = frame.row(0, named=True)
    assert (row["total_tokens"], row["visible_turns"], row["n_criteria"],
            row["n_failed_criteria"], row["within_expected_turns"]) == (15, 4, 2, 1, False)
    # c2, advisory, failed with an error: a failure the reports name (report.md's
    # "failed: c2"), counted (it was not)
    assert frame["success"].to_list() == [True, False, False, False]
    assert frame["graded"].to_list() == [True, True, False, True]


def test_outputs_of_any_type_are_labels():
    """Outputs differing in type between criteria (a number, a mapping): the row build
    could not type the records (no supertype of the two structs); by column, only the
    labels are read."""
    records = as_records([{**RECORDS[0], "criteria": [
        _crit(1, outputs={"observed": 3, "expected": {"a": 1}}),
        _crit(2, outputs={"observed": "yes", "expected": True})]}])
    with pytest.raises(TypeError):
        _reference_trials_input(records)
    assert F._trials_frame(records)["n_criteria"].to_list() == [2]
    frame = F._results_frame(records)
    assert frame["observed"].to_list() == ["3", "yes"]
    assert frame["expected"].to_list() == [None, "yes"]


def test_results_repeat_each_trials_keys_once_per_criterion_in_any_order():
    """Trials without criteria first, then with 1 and 2 (the keys are repeated per
    criterion by count: a zero must repeat nothing and shift nothing)."""
    records = as_records(list(reversed(RECORDS)) * 3)
    got, want = F._results_frame(records), _reference_results(records)
    assert got.equals(want, null_equal=True) and got.height == 9
    assert got["trial_id"].to_list() == ["v/a/01", "v/a/00", "v/a/00"] * 3
