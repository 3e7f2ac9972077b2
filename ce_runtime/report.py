"""Run reporting: task.json records -> parquet, suite gates, run.json summary, report.md, JUnit.

Every aggregate is computed by Polars expressions over two frames: `trials_frame` (one row
per trial) and `results_frame` (one row per criterion result). Python only reshapes the
records on the way in and formats the aggregates on the way out. Polars is imported inside
the functions so that `ce --help` never loads it.

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
- exit code: 0 when every trial is SUCCESS and every suite gate passed, else 1.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ce_runtime.atomic import write_bytes_atomic

if TYPE_CHECKING:
    import polars as pl

STATUSES = ("SUCCESS", "FAILURE", "TIMEOUT", "MAX_TURNS_EXHAUSTED", "TOKEN_BUDGET_EXCEEDED",
            "COST_BUDGET_EXCEEDED", "ERROR", "NOT_GRADED")
CLASSIFICATION = "classification"
TURN_BUDGET_FACTOR = 1.5
WILSON_Z = 1.959963984540054  # two-sided 95%
EPSILON = 1e-9  # a metric within this of its minimum meets it (float noise in F1)
SUMMARY_SCHEMA_VERSION = 1

TRIAL_KEYS = ("trial_id", "variant_id", "experiment_id", "task_id", "suite_id", "row_id",
              "repeat")


@attrs.frozen
class SuiteGate:
    """Aggregate metrics of one criterion over a dataset suite, for one variant, and the
    verdict of its `suite_thresholds` (none set: always passes)."""

    variant: str
    suite_id: str
    criterion: str
    metrics: dict[str, float]
    thresholds: dict[str, float]
    failed: list[str]
    passed: bool
    kind: str = "score"  # classification | score
    criterion_type: str | None = None
    description: str | None = None
    n: int = 0  # results the metrics are computed over
    missing: int = 0  # graded trials of the suite without a (labelled) result for it
    labels: list[str] = attrs.field(factory=list)
    support: dict[str, int] = attrs.field(factory=dict)  # label -> expected count
    confusion: list[list[int]] = attrs.field(factory=list)  # [expected][observed], labels order

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.suite_id}/{self.criterion}"

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


# ---------------------------------------------------------------------------- frames


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


def trials_frame(records: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """One row per trial, in record order."""
    import polars as pl

    raw = pl.from_dicts(list(records), schema=_trial_input_schema(), strict=False)
    usage = pl.col("usage").struct
    status = pl.col("status")
    graded = status.is_not_null() & (status != "NOT_GRADED")
    visible_turns = usage.field("tool_calls").fill_null(0) + 1
    return raw.lazy().select(
        *TRIAL_KEYS,
        status,
        (status == "SUCCESS").fill_null(False).alias("success"),
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
        .then((status == "SUCCESS")
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


def _result_rows(records: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    # Reshaping only: `outputs` is an open mapping whose values Polars cannot type up front.
    for rec in records:
        base = {k: rec.get(k) for k in TRIAL_KEYS}
        base["status"] = rec.get("status")
        base["stopped_early"] = bool(rec.get("stopped_early"))
        for c in rec.get("criteria") or ():
            outputs = c.get("outputs") or {}
            yield {
                **base, "criterion_id": c.get("id"), "type": c.get("type"),
                "description": c.get("description"), "kind": c.get("kind"),
                "score": c.get("score"), "pass_threshold": c.get("pass_threshold"),
                "passed": c.get("passed"), "weight": c.get("weight"),
                "gating": c.get("gating"), "advisory": c.get("advisory"),
                "disabled": bool(c.get("disabled")), "error": c.get("error"),
                "observed": _label(outputs.get("observed")),
                "expected": _label(outputs.get("expected")),
            }


def results_frame(records: Sequence[dict[str, Any]]) -> pl.DataFrame:
    """One row per criterion result: the trial's ids and status, then the criterion's
    fields and, for classification criteria, the observed and expected labels."""
    import polars as pl

    return pl.DataFrame(list(_result_rows(records)), schema=_results_schema(), strict=False)


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    frame.write_parquet(buf)
    return buf.getvalue()


def write_parquet(run_dir: str, records: Sequence[dict[str, Any]]) -> None:
    """trials.parquet and results.parquet in `run_dir`, each written atomically."""
    write_bytes_atomic(os.path.join(run_dir, "trials.parquet"),
                       _parquet_bytes(trials_frame(records)))
    write_bytes_atomic(os.path.join(run_dir, "results.parquet"),
                       _parquet_bytes(results_frame(records)))


# ---------------------------------------------------------------------------- suite gates

GATE_KEYS = ("variant_id", "suite_id", "criterion_id")


def _label_order(label: str) -> tuple[bool, str]:
    return (label.startswith("("), label)  # (none) and (other) after the real labels


def _thresholds(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str], dict]:
    """suite_thresholds per (variant, suite, criterion): configuration, not rows."""
    found: dict[tuple[str, str, str], dict] = {}
    for rec in records:
        if rec.get("suite_id") is None:
            continue
        for c in rec.get("criteria") or ():
            if c.get("suite_thresholds"):
                found.setdefault((rec.get("variant_id"), rec["suite_id"], c.get("id")),
                                 dict(c["suite_thresholds"]))
    return found


def _check(metrics: dict[str, float], thresholds: dict[str, float]) -> list[str]:
    failed = []
    for name, minimum in thresholds.items():
        value = metrics.get(name)
        if value is None or value < float(minimum) - EPSILON:
            failed.append(name)
    return failed


def suite_metrics(records: Sequence[dict[str, Any]]) -> list[SuiteGate]:
    """A gate per (variant, dataset suite, criterion), in first-seen order. Disabled
    criteria and NOT_GRADED trials are left out."""
    import polars as pl

    results = results_frame(records).lazy().filter(
        pl.col("suite_id").is_not_null() & ~pl.col("disabled")
        & (pl.col("status") != "NOT_GRADED"))
    order = results.select(*GATE_KEYS).unique(maintain_order=True).with_row_index("order")
    meta = results.group_by(GATE_KEYS, maintain_order=True).agg(
        pl.col("type").first(), pl.col("description").first(),
        (pl.col("kind") == CLASSIFICATION).any().alias("classification"))
    cls = results.filter(pl.col("kind") == CLASSIFICATION)
    labelled = cls.filter(pl.col("observed").is_not_null() & pl.col("expected").is_not_null())
    # graded trials of the suite: those without a labelled result for a criterion (an
    # ERROR before grading, a criterion error without outputs) are its `missing`
    suite_trials = trials_frame(records).lazy().filter(
        pl.col("suite_id").is_not_null() & pl.col("graded")).group_by(
        "variant_id", "suite_id").agg(pl.len().alias("suite_trials"))
    pairs = labelled.group_by(*GATE_KEYS, "expected", "observed").agg(pl.len().alias("n"))
    predicted = pairs.group_by(*GATE_KEYS, pl.col("observed").alias("label")).agg(
        pl.col("n").sum().alias("predicted"))
    support = pairs.group_by(*GATE_KEYS, pl.col("expected").alias("label")).agg(
        pl.col("n").sum().alias("support"))
    tp = pairs.filter(pl.col("expected") == pl.col("observed")).group_by(
        *GATE_KEYS, pl.col("expected").alias("label")).agg(pl.col("n").sum().alias("tp"))
    per_label = (
        support.join(predicted, on=[*GATE_KEYS, "label"], how="full", coalesce=True)
        .join(tp, on=[*GATE_KEYS, "label"], how="left")
        .with_columns(pl.col("support", "predicted", "tp").fill_null(0))
        .with_columns(
            _ratio(pl.col("tp"), pl.col("predicted")).alias("precision"),
            _ratio(pl.col("tp"), pl.col("support")).alias("recall"),
            _ratio(2 * pl.col("tp"), pl.col("predicted") + pl.col("support")).alias("f1"))
    )
    overall = per_label.group_by(GATE_KEYS).agg(
        pl.col("support").sum().alias("n_labelled"),
        _ratio(pl.col("tp").sum(), pl.col("support").sum()).alias("accuracy"),
        pl.col("f1").mean().alias("macro_f1"),
        _ratio((pl.col("f1") * pl.col("support")).sum(), pl.col("support").sum())
        .alias("weighted_f1"),
        _ratio(2 * pl.col("tp").sum(), pl.col("predicted").sum() + pl.col("support").sum())
        .alias("micro_f1"))
    scores = results.filter(pl.col("kind") != CLASSIFICATION).group_by(GATE_KEYS).agg(
        pl.len().alias("n_results"),
        pl.col("passed").cast(pl.Float64).mean().alias("pass_rate"),
        pl.col("score").mean().alias("mean_score"))
    gates_lf = (order.join(meta, on=GATE_KEYS).join(overall, on=GATE_KEYS, how="left")
                .join(suite_trials, on=["variant_id", "suite_id"], how="left")
                .join(scores, on=GATE_KEYS, how="left")
                .sort("order"))
    gates_df, per_label_df, pairs_df = pl.collect_all([gates_lf, per_label, pairs])

    thresholds = _thresholds(records)
    label_rows: dict[tuple, list[dict]] = {}
    for row in per_label_df.sort("label").iter_rows(named=True):
        label_rows.setdefault(tuple(row[k] for k in GATE_KEYS), []).append(row)
    cells: dict[tuple, dict[tuple[str, str], int]] = {}
    for row in pairs_df.iter_rows(named=True):
        cells.setdefault(tuple(row[k] for k in GATE_KEYS), {})[
            (row["expected"], row["observed"])] = row["n"]

    gates = []
    # one iteration per gate (an aggregate), never per trial
    for g in gates_df.iter_rows(named=True):
        key = tuple(g[k] for k in GATE_KEYS)
        limits = {k: float(v) for k, v in thresholds.get(key, {}).items()}
        if g["classification"]:
            gates.append(_classification_gate(g, limits, label_rows.get(key, []),
                                              cells.get(key, {})))
        else:
            metrics = {"pass_rate": g["pass_rate"], "mean_score": g["mean_score"]}
            failed = _check(metrics, limits)
            gates.append(SuiteGate(
                variant=g["variant_id"], suite_id=g["suite_id"], criterion=g["criterion_id"],
                metrics=metrics, thresholds=limits, failed=failed, passed=not failed,
                kind="score", criterion_type=g["type"], description=g["description"],
                n=g["n_results"] or 0,
                missing=(g["suite_trials"] or 0) - (g["n_results"] or 0)))
    return gates


def _ratio(num: pl.Expr, den: pl.Expr) -> pl.Expr:
    """num / den, 0.0 when den is 0 (scikit-learn's zero_division=0)."""
    import polars as pl

    return pl.when(den > 0).then(num / den).otherwise(0.0)


def _classification_gate(g: dict, limits: dict[str, float], per_label: list[dict],
                         cells: dict[tuple[str, str], int]) -> SuiteGate:
    metrics: dict[str, float] = {}
    for name in ("accuracy", "macro_f1", "weighted_f1", "micro_f1"):
        metrics[name] = float(g[name]) if g[name] is not None else 0.0
    metrics["f1.macro"] = metrics["macro_f1"]
    seen = {row["label"] for row in per_label}
    # a label named by a threshold but never seen scores 0 (and stays out of the averages)
    wanted = {name.split(".", 1)[1] for name in limits
              if name.split(".", 1)[0] in ("precision", "recall", "f1")
              and name != "f1.macro"}
    labels = sorted(seen | wanted, key=_label_order)
    support = {lab: 0 for lab in labels}
    for lab in labels:
        metrics[f"precision.{lab}"] = metrics[f"recall.{lab}"] = metrics[f"f1.{lab}"] = 0.0
    for row in per_label:
        lab = row["label"]
        metrics[f"precision.{lab}"] = float(row["precision"])
        metrics[f"recall.{lab}"] = float(row["recall"])
        metrics[f"f1.{lab}"] = float(row["f1"])
        support[lab] = int(row["support"])
    confusion = [[cells.get((e, o), 0) for o in labels] for e in labels]
    failed = _check(metrics, limits)
    return SuiteGate(
        variant=g["variant_id"], suite_id=g["suite_id"], criterion=g["criterion_id"],
        metrics=metrics, thresholds=limits, failed=failed, passed=not failed,
        kind=CLASSIFICATION, criterion_type=g["type"], description=g["description"],
        n=g["n_labelled"] or 0, missing=(g["suite_trials"] or 0) - (g["n_labelled"] or 0),
        labels=labels, support=support,
        confusion=confusion)


# ---------------------------------------------------------------------------- summary


def _stats_exprs() -> list[pl.Expr]:
    import polars as pl

    graded = pl.col("graded")
    n = graded.sum()
    passed = pl.col("success").sum()
    p = _ratio(passed, n)
    z2 = WILSON_Z ** 2
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = WILSON_Z * ((p * (1 - p) / n + z2 / (4 * n * n)).sqrt()) / denom
    within = pl.col("within_expected_turns")
    return [
        pl.len().alias("trials"),
        *[(pl.col("status") == s).sum().alias(f"status.{s}") for s in STATUSES],
        n.alias("graded"),
        passed.alias("passed"),
        pl.when(n > 0).then(p).alias("pass_rate"),
        pl.when(n > 0).then((center - half).clip(0.0, 1.0)).alias("pass_rate_low"),
        pl.when(n > 0).then((center + half).clip(0.0, 1.0)).alias("pass_rate_high"),
        pl.col("weighted_score").filter(graded).mean().alias("mean_score"),
        pl.col("stopped_early").sum().alias("stopped_early"),
        pl.col("input_tokens").sum(), pl.col("output_tokens").sum(),
        pl.col("total_tokens").sum(), pl.col("cost_usd").sum(),
        pl.col("duration_s").sum(), pl.col("turns").sum(), pl.col("tool_calls").sum(),
        within.is_not_null().sum().alias("budgeted"),
        within.fill_null(False).sum().alias("within"),
    ]


def _pass_at_k(trials: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    """Per task (variant and task id), k = its graded repeats; then counted per `by`
    (the whole run when empty)."""
    import polars as pl

    per_task = trials.filter(pl.col("graded")).group_by("variant_id", "task_id").agg(
        pl.len().alias("k"), pl.col("success").any().alias("any"),
        pl.col("success").all().alias("all"))
    exprs = [pl.len().alias("tasks"), pl.col("k").min().alias("k_min"),
             pl.col("k").max().alias("k_max"), pl.col("any").sum().alias("pass_at_k"),
             pl.col("all").sum().alias("pass_all_k")]
    return per_task.group_by(by).agg(exprs) if by else per_task.select(exprs)


def _breakdown(row: dict[str, Any], pak: dict[str, Any] | None) -> dict[str, Any]:
    tasks = pak["tasks"] if pak else 0
    pak = pak if tasks else None
    k = None
    if pak and pak["k_min"] == pak["k_max"]:
        k = pak["k_min"]
    return {
        "trials": row["trials"],
        "by_status": {s: row[f"status.{s}"] for s in STATUSES if row[f"status.{s}"]},
        "graded": row["graded"],
        "passed": row["passed"],
        "pass_rate": row["pass_rate"],
        "pass_rate_ci95": None if row["pass_rate"] is None
        else [row["pass_rate_low"], row["pass_rate_high"]],
        "mean_score": row["mean_score"],
        "stopped_early": row["stopped_early"],
        "tokens": {"input": row["input_tokens"], "output": row["output_tokens"],
                   "total": row["total_tokens"]},
        "cost_usd": row["cost_usd"],
        "duration_s": row["duration_s"],
        "turns": row["turns"],
        "tool_calls": row["tool_calls"],
        "within_expected_turns": {
            "budgeted": row["budgeted"], "within": row["within"],
            "share": row["within"] / row["budgeted"] if row["budgeted"] else None},
        "pass_at_k": {
            "tasks": tasks, "k": k,
            "k_range": [pak["k_min"], pak["k_max"]] if pak else None,
            "passed": pak["pass_at_k"] if pak else 0,
            "rate": pak["pass_at_k"] / tasks if tasks else None,
            "passed_all": pak["pass_all_k"] if pak else 0,
            "rate_all": pak["pass_all_k"] / tasks if tasks else None},
    }


def _comparison(trials: pl.LazyFrame, variants: list[str]) -> list[dict[str, Any]]:
    """Each variant against the first (the baseline), paired over the tasks both ran:
    per task, the success rate and mean score over its repeats; then mean differences."""
    import polars as pl

    if len(variants) < 2:
        return []
    per_task = trials.filter(pl.col("graded")).group_by("variant_id", "task_id").agg(
        pl.col("success").cast(pl.Float64).mean().alias("rate"),
        pl.col("weighted_score").mean().alias("score"),
        pl.col("stopped_early").any().alias("early"))
    base = per_task.filter(pl.col("variant_id") == variants[0]).drop("variant_id")
    paired = per_task.filter(pl.col("variant_id") != variants[0]).join(
        base, on="task_id", suffix="_base").with_columns(
        (pl.col("rate") - pl.col("rate_base")).alias("d_rate"),
        (pl.col("score") - pl.col("score_base")).alias("d_score"))
    # a task is better/worse on its success rate, ties broken by its mean score
    d = pl.when(pl.col("d_rate").abs() > EPSILON).then(pl.col("d_rate")) \
        .otherwise(pl.col("d_score").fill_null(0.0))
    agg = paired.group_by("variant_id").agg(
        pl.len().alias("shared_tasks"),
        pl.col("rate_base").mean().alias("baseline_pass_rate"),
        pl.col("rate").mean().alias("pass_rate"),
        pl.col("d_rate").mean().alias("pass_rate_diff"),
        pl.col("score_base").mean().alias("baseline_mean_score"),
        pl.col("score").mean().alias("mean_score"),
        pl.col("d_score").mean().alias("mean_score_diff"),
        (d > EPSILON).sum().alias("better"),
        (d < -EPSILON).sum().alias("worse"),
        (d.abs() <= EPSILON).sum().alias("same"),
        (pl.col("early") | pl.col("early_base")).sum().alias("stopped_early_tasks")).collect()
    rows = {r["variant_id"]: r for r in agg.iter_rows(named=True)}
    out = []
    for v in variants[1:]:
        r = rows.get(v)
        if r is None:
            r = {"shared_tasks": 0, "better": 0, "worse": 0, "same": 0,
                 "stopped_early_tasks": 0}
        out.append({"variant": v, "baseline": variants[0],
                    **{k: r.get(k) for k in (
                        "shared_tasks", "baseline_pass_rate", "pass_rate", "pass_rate_diff",
                        "baseline_mean_score", "mean_score", "mean_score_diff",
                        "better", "worse", "same", "stopped_early_tasks")}})
    return out


def summary(records: Sequence[dict[str, Any]], gates: Sequence[SuiteGate], run_id: str,
            config: dict[str, Any] | None) -> dict[str, Any]:
    """The run.json document. `config` is stored under `args` (what `ce run --resume`
    reads back)."""
    import polars as pl

    trials = trials_frame(records).lazy()
    overall_lf = trials.select(_stats_exprs())
    per_variant_lf = trials.group_by("variant_id", maintain_order=True).agg(
        *_stats_exprs(),
        pl.col("agent").drop_nulls().unique(maintain_order=True).alias("agents"),
        pl.col("model").drop_nulls().unique(maintain_order=True).alias("models"))
    experiments_lf = trials.select(
        pl.col("experiment_id").drop_nulls().unique(maintain_order=True))
    pak_all_lf = _pass_at_k(trials, [])
    pak_variant_lf = _pass_at_k(trials, ["variant_id"])
    overall, per_variant, pak_all, pak_variant, experiments = pl.collect_all(
        [overall_lf, per_variant_lf, pak_all_lf, pak_variant_lf, experiments_lf])
    total = overall.row(0, named=True)
    pak_total = pak_all.row(0, named=True) if pak_all.height else None
    if pak_total is not None and not pak_total["tasks"]:
        pak_total = None
    paks = {r["variant_id"]: r for r in pak_variant.iter_rows(named=True)}
    variants = [r["variant_id"] for r in per_variant.iter_rows(named=True)]

    failed_gates = [g for g in gates if not g.passed]
    not_success = total["trials"] - total["status.SUCCESS"]
    reasons = []
    if not records:
        reasons.append("no trial ran")
    if not_success:
        reasons.append(f"{not_success} of {total['trials']} trial(s) did not succeed")
    reasons += [f"suite gate {g.name} failed: " + ", ".join(
        f"{m} {_fmt_metric(g.metrics.get(m))} < {g.thresholds[m]:g}" for m in g.failed)
        for g in failed_gates]
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run_id": run_id,
        "args": config,
        "exit_code": 1 if reasons else 0,
        "exit_reasons": reasons,
        "experiment_ids": experiments["experiment_id"].to_list(),
        **_breakdown(total, pak_total),
        "variants": {r["variant_id"]: {"agents": r["agents"], "models": r["models"],
                                       **_breakdown(r, paks.get(r["variant_id"]))}
                     for r in per_variant.iter_rows(named=True)},
        "comparison": _comparison(trials, variants),
        "suite_gates": [g.to_dict() for g in gates],
        "suite_gates_failed": len(failed_gates),
    }


# ---------------------------------------------------------------------------- markdown


def _fmt_metric(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def _score(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def _cost(v: float | None) -> str:
    return "—" if v is None else f"${v:.4f}"


def _signed(v: float | None, pct: bool) -> str:
    if v is None:
        return "—"
    if abs(v) < EPSILON:
        return "±0.0 pp" if pct else "±0.00"
    return f"{100 * v:+.1f} pp" if pct else f"{v:+.2f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(round(seconds), 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


def _cell(text: Any, limit: int = 160) -> str:
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("|", "\\|")


def _code(text: Any) -> str:
    s = str(text).replace("`", "'")
    return f"`{s}`"


def _status_counts(by_status: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in by_status.items()) or "none"


def _early_note(rec: dict[str, Any]) -> str:
    reason = rec.get("early_stop_reason") or "armed criteria decided"
    advisory = [c for c in rec.get("criteria") or () if c.get("advisory")]
    text = (f"> **NOTE:** {_code(rec.get('trial_id'))} stopped early ({_cell(reason)}); it "
            "was gated on its armed criteria only")
    if advisory:
        text += "; advisory — not gated: " + ", ".join(
            f"{_code(c.get('id'))} {c.get('type')} {_score(c.get('score'))}"
            + ("" if c.get("passed") else " (below its threshold)") for c in advisory)
    return text + "."


def render_markdown(summary: dict[str, Any], records: Sequence[dict[str, Any]],
                    gates: Sequence[SuiteGate]) -> str:
    out: list[str] = []
    w = out.append
    ok = summary["exit_code"] == 0
    w(f"# ce run {_code(summary.get('run_id'))}")
    w("")
    if summary.get("experiment_ids"):
        w("Experiment " + ", ".join(_code(e) for e in summary["experiment_ids"]) + ".")
        w("")
    verdict = "✅ **PASSED**" if ok else "❌ **FAILED**"
    gates_line = ""
    thresholded = [g for g in gates if g.thresholds]
    if thresholded:
        passed = sum(g.passed for g in thresholded)
        gates_line = f"; {passed}/{len(thresholded)} suite gates passed"
    w(f"{verdict} — {summary['passed']}/{summary['graded']} graded trials succeeded "
      f"({_pct(summary['pass_rate'])}){gates_line}.")
    if not ok and summary.get("exit_reasons"):
        w("")
        for reason in summary["exit_reasons"]:
            w(f"- {reason}")
    w("")
    w("| Run | |")
    w("|---|---|")
    w(f"| Trials | {summary['trials']} ({_status_counts(summary['by_status'])}) |")
    ci = summary.get("pass_rate_ci95")
    ci_text = f" (95% CI {_pct(ci[0])}–{_pct(ci[1])})" if ci else ""
    w(f"| Pass rate | {_pct(summary['pass_rate'])}{ci_text} |")
    w(f"| Mean score | {_score(summary['mean_score'])} |")
    pak = summary["pass_at_k"]
    if pak["tasks"] and (pak["k_range"] or [1, 1])[1] > 1:
        lo, hi = pak["k_range"]
        k = f"pass@{hi}" if lo == hi else f"pass@k (k = {lo}–{hi} repeats)"
        w(f"| {k} | {pak['passed']}/{pak['tasks']} tasks ({_pct(pak['rate'])}); "
          f"every repeat passed: {pak['passed_all']}/{pak['tasks']} |")
    wet = summary["within_expected_turns"]
    if wet["budgeted"]:
        w(f"| Within expected turns | {wet['within']}/{wet['budgeted']} budgeted trials "
          f"({_pct(wet['share'])}) |")
    if summary["stopped_early"]:
        w(f"| Stopped early | {summary['stopped_early']} trial(s) |")
    tok = summary["tokens"]
    w(f"| Tokens | {tok['input']:,} in / {tok['output']:,} out |")
    w(f"| Cost | {_cost(summary['cost_usd'])} |")
    w(f"| Agent time | {_duration(summary['duration_s'])} (sum over trials) |")
    w("")

    variants = list(summary["variants"])
    by_variant: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for rec in records:
        by_variant.setdefault(rec.get("variant_id"), []).append(rec)
    budgeted = any(rec.get("expected_turns") is not None for rec in records)
    for v in variants:
        vs = summary["variants"][v]
        w(f"## Variant {_code(v)}")
        w("")
        who = []
        if vs.get("agents"):
            who.append("agent " + ", ".join(_code(a) for a in vs["agents"]))
        if vs.get("models"):
            who.append("model " + ", ".join(_code(m) for m in vs["models"]))
        lead = ", ".join(who)
        w((lead[:1].upper() + lead[1:] + " — " if lead else "")
          + f"{vs['passed']}/{vs['graded']} succeeded ({_pct(vs['pass_rate'])}), mean score "
          f"{_score(vs['mean_score'])}, cost {_cost(vs['cost_usd'])}.")
        w("")
        head = ["Task", "Repeat", "Status", "Score", "Turns"]
        if budgeted:
            head.append("Budget")
        head += ["Cost", "Notes"]
        w("| " + " | ".join(head) + " |")
        w("|" + "|".join("---:" if h in ("Repeat", "Score", "Turns", "Cost") else "---"
                         for h in head) + "|")
        notes_after: list[str] = []
        for rec in by_variant.get(v, []):
            w("| " + " | ".join(_trial_cells(rec, budgeted)) + " |")
            if rec.get("stopped_early"):
                notes_after.append(_early_note(rec))
        w("")
        if budgeted:
            w(f"Budget: visible turns (tool calls + 1) / expected_turns; ✓ when the trial "
              f"succeeded within {TURN_BUDGET_FACTOR:g}× the budget.")
            w("")
        for note in notes_after:
            w(note)
            w("")

    failing = [rec for rec in records if _failures(rec) or rec.get("error")]
    if failing:
        w("## Failures")
        w("")
        for rec in failing:
            w(f"### {_code(rec.get('trial_id'))} — {rec.get('status')} "
              f"(score {_score(rec.get('weighted_score'))})")
            w("")
            if rec.get("error"):
                w(f"- **trial error:** {_cell(rec['error'], 400)}")
            outcome = rec.get("agent_outcome") or {}
            if rec.get("status") not in ("SUCCESS", "FAILURE") and outcome.get("reason"):
                detail = f": {_cell(outcome.get('detail'), 200)}" if outcome.get("detail") else ""
                w(f"- agent ended: {_cell(outcome['reason'])}{detail}")
            for c in _failures(rec):
                w(_criterion_line(c))
            w("")

    if gates:
        w("## Suite gates")
        w("")
        for g in gates:
            if g.kind == CLASSIFICATION:
                _render_classification_gate(w, g)
        score_gates = [g for g in gates if g.kind != CLASSIFICATION]
        if score_gates:
            w("### Criteria over dataset rows")
            w("")
            w("| Variant | Suite | Criterion | Results | Pass rate | Mean score | Thresholds "
              "| Gate |")
            w("|---|---|---|---:|---:|---:|---|---|")
            for g in score_gates:
                n = f"{g.n} (+{g.missing} missing)" if g.missing else str(g.n)
                limits = ", ".join(f"{m} ≥ {t:g}" for m, t in g.thresholds.items()) or "—"
                w(f"| {_code(g.variant)} | {_code(g.suite_id)} | "
                  f"{_code(g.criterion)} {_cell(g.criterion_type or '')}: "
                  f"{_cell(g.description or '', 60)} | {n} | "
                  f"{_pct(g.metrics.get('pass_rate'))} | "
                  f"{_score(g.metrics.get('mean_score'))} | {limits} | "
                  f"{_gate_word(g)} |")
            w("")

    comparison = summary.get("comparison") or []
    if comparison:
        w(f"## Variant comparison (baseline {_code(comparison[0]['baseline'])})")
        w("")
        w("| Variant | Trials | Pass rate | 95% CI | Mean score | pass@k | Cost |")
        w("|---|---:|---:|---|---:|---:|---:|")
        for v in variants:
            vs = summary["variants"][v]
            ci = vs.get("pass_rate_ci95")
            ci_text = f"{_pct(ci[0])}–{_pct(ci[1])}" if ci else "—"
            vpak = vs["pass_at_k"]
            w(f"| {_code(v)} | {vs['trials']} | {_pct(vs['pass_rate'])} | {ci_text} | "
              f"{_score(vs['mean_score'])} | {vpak['passed']}/{vpak['tasks']} | "
              f"{_cost(vs['cost_usd'])} |")
        w("")
        w("Paired over the tasks both variants ran (per task: success rate and mean score "
          "over its repeats; a task is better or worse on its success rate, then its score):")
        w("")
        w("| Variant | Shared tasks | Pass rate | Δ pass rate | Mean score | Δ mean score "
          "| Better / worse / same |")
        w("|---|---:|---:|---:|---:|---:|---|")
        for c in comparison:
            rate = (f"{_pct(c['baseline_pass_rate'])} → {_pct(c['pass_rate'])}"
                    if c["shared_tasks"] else "—")
            score = (f"{_score(c['baseline_mean_score'])} → {_score(c['mean_score'])}"
                     if c["shared_tasks"] else "—")
            w(f"| {_code(c['variant'])} | {c['shared_tasks']} | {rate} | "
              f"{_signed(c['pass_rate_diff'], True)} | {score} | "
              f"{_signed(c['mean_score_diff'], False)} | "
              f"{c['better']} / {c['worse']} / {c['same']} |")
        w("")
        early = sum(c.get("stopped_early_tasks") or 0 for c in comparison)
        if early:
            w(f"> **NOTE:** {early} paired task(s) include an early-stopped trial: its score "
              "counts criteria that were advisory on a truncated run; compare them with care.")
            w("")
    return "\n".join(out).rstrip() + "\n"


def _gate_word(g: SuiteGate) -> str:
    if not g.thresholds:
        return "no thresholds"
    return "✅ passed" if g.passed else "❌ failed"


def _trial_cells(rec: dict[str, Any], budgeted: bool) -> list[str]:
    usage = rec.get("usage") or {}
    status = rec.get("status") or "?"
    mark = {"SUCCESS": "✅", "NOT_GRADED": "➖"}.get(status, "❌")
    cells = [_code(rec.get("task_id")), str(rec.get("repeat", 0)), f"{mark} {status}",
             _score(rec.get("weighted_score")), str(usage.get("turns", 0))]
    if budgeted:
        expected = rec.get("expected_turns")
        if expected is None:
            cells.append("—")
        else:
            visible = (usage.get("tool_calls") or 0) + 1
            within = rec.get("status") == "SUCCESS" \
                and visible <= TURN_BUDGET_FACTOR * expected
            cells.append(f"{visible}/{expected} {'✓' if within else '✗'}")
    cells.append(_cost(usage.get("cost_usd")))
    notes = []
    if rec.get("stopped_early"):
        notes.append(f"stopped early ({_cell(rec.get('early_stop_reason') or 'decided')})")
    failures = _failures(rec)
    if failures:
        notes.append("failed: " + ", ".join(_code(c.get("id")) for c in failures))
    if rec.get("error"):
        notes.append("error: " + _cell(rec["error"], 80))
    cells.append("; ".join(notes))
    return cells


def _failures(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Criteria that failed and counted, or failed with an error (advisory included)."""
    return [c for c in rec.get("criteria") or ()
            if not c.get("disabled") and not c.get("passed")
            and (c.get("gating") or c.get("error"))]


def _criterion_line(c: dict[str, Any]) -> str:
    parts = [f"- {_code(c.get('id'))} {c.get('type')}"]
    if c.get("description"):
        parts.append(f" — {_cell(c['description'], 120)}")
    parts.append(f": score {_score(c.get('score'))} < {_score(c.get('pass_threshold'))}")
    outputs = c.get("outputs") or {}
    if "observed" in outputs or "expected" in outputs:
        parts.append(f" (observed {_code(outputs.get('observed'))}, expected "
                     f"{_code(outputs.get('expected'))})")
    if not c.get("gating"):
        parts.append(" *(advisory — not gated)*" if c.get("advisory") else " *(not gated)*")
    if c.get("error"):
        parts.append(f"\n  - error: {_cell(c['error'], 400)}")
    return "".join(parts)


def _render_classification_gate(w, g: SuiteGate) -> None:
    title = f"{_code(g.variant)} · {_code(g.suite_id)} · {_code(g.criterion)}"
    if g.criterion_type:
        title += f" {g.criterion_type}"
    w(f"### {title} — {_gate_word(g)}")
    w("")
    about = f"{g.n} labelled result(s)"
    if g.missing:
        about += f"; {g.missing} graded trial(s) without labels (ERROR or criterion error), " \
            "left out"
    if g.description:
        about = f"{_cell(g.description, 120)}. " + about[0].upper() + about[1:]
    w(about + ".")
    w("")
    w("| Metric | Value | Minimum | |")
    w("|---|---:|---:|---|")
    shown = ["accuracy", "macro_f1", "weighted_f1", "micro_f1"]
    shown += [m for m in g.thresholds if m not in shown]
    for m in shown:
        limit = g.thresholds.get(m)
        verdict = "" if limit is None else "✗ below" if m in g.failed else "✓"
        w(f"| {m} | {_fmt_metric(g.metrics.get(m))} | "
          f"{'—' if limit is None else f'{limit:g}'} | {verdict} |")
    w("")
    if g.labels:
        w("| Label | Precision | Recall | F1 | Support |")
        w("|---|---:|---:|---:|---:|")
        for lab in g.labels:
            w(f"| {_cell(lab)} | {_fmt_metric(g.metrics.get(f'precision.{lab}'))} | "
              f"{_fmt_metric(g.metrics.get(f'recall.{lab}'))} | "
              f"{_fmt_metric(g.metrics.get(f'f1.{lab}'))} | {g.support.get(lab, 0)} |")
        w("")
        w("Confusion matrix (rows: expected, columns: observed):")
        w("")
        w("| expected \\ observed | " + " | ".join(_cell(lab) for lab in g.labels) + " |")
        w("|---|" + "---:|" * len(g.labels))
        for lab, row in zip(g.labels, g.confusion, strict=True):
            w(f"| **{_cell(lab)}** | " + " | ".join(str(n) for n in row) + " |")
        w("")


# ---------------------------------------------------------------------------- junit

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_FAILURE_STATUSES = ("FAILURE", "TIMEOUT", "MAX_TURNS_EXHAUSTED", "TOKEN_BUDGET_EXCEEDED",
                     "COST_BUDGET_EXCEEDED")


def _x(text: Any) -> str:
    """Text XML 1.0 can carry (terminal escapes and other control characters dropped)."""
    return _XML_INVALID.sub("", "" if text is None else str(text))


def _criterion_text(c: dict[str, Any]) -> str:
    line = f"{c.get('id')} {c.get('type')}: score {_score(c.get('score'))} < " \
           f"{_score(c.get('pass_threshold'))}"
    if c.get("description"):
        line += f" ({c['description']})"
    if c.get("error"):
        line += f"\n  error: {c['error']}"
    return line


def render_junit(records: Sequence[dict[str, Any]], gates: Sequence[SuiteGate]) -> str:
    """JUnit XML: a testsuite per variant, a testcase per trial (failure for a failed
    verdict or a run limit, error for ERROR, skipped for NOT_GRADED) and one per suite
    gate with thresholds (classname `suite.<suite_id>`)."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="ce")
    suites: dict[str, ET.Element] = {}
    counts: dict[str, dict[str, float]] = {}

    def suite(variant: str) -> ET.Element:
        if variant not in suites:
            suites[variant] = ET.SubElement(root, "testsuite", name=_x(variant))
            counts[variant] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0,
                               "time": 0.0}
        return suites[variant]

    for rec in records:
        variant = rec.get("variant_id") or "default"
        ts = suite(variant)
        c = counts[variant]
        duration = float(rec.get("duration_s") or 0.0)
        c["tests"] += 1
        c["time"] += duration
        tc = ET.SubElement(ts, "testcase", classname=_x(rec.get("task_id")),
                           name=_x(rec.get("trial_id")), time=f"{duration:.3f}")
        status = rec.get("status")
        failures = _failures(rec)
        body = "\n".join(_criterion_text(f) for f in failures)
        if status == "NOT_GRADED":
            c["skipped"] += 1
            ET.SubElement(tc, "skipped", message="not graded")
        elif status == "ERROR":
            c["errors"] += 1
            outcome = rec.get("agent_outcome") or {}
            message = rec.get("error") or (
                f"agent {outcome['reason']}: {outcome.get('detail') or ''}".rstrip(": ")
                if outcome.get("reason") else "trial error")
            el = ET.SubElement(tc, "error", type="ERROR", message=_x(message))
            el.text = _x(body) or None
        elif status in _FAILURE_STATUSES or (status != "SUCCESS"):
            c["failures"] += 1
            summary_line = f"{status}: " + (", ".join(str(f.get("id")) for f in failures)
                                            or (rec.get("error") or "no criterion failed"))
            el = ET.SubElement(tc, "failure", type=_x(status), message=_x(summary_line))
            el.text = _x(body) or None
        notes = []
        if rec.get("stopped_early"):
            notes.append(f"stopped early ({rec.get('early_stop_reason') or 'decided'}); "
                         "non-armed criteria are advisory, not gated")
        score = rec.get("weighted_score")
        notes.append(f"status {status}, weighted score {_score(score)}")
        ET.SubElement(tc, "system-out").text = _x("\n".join(notes))

    for g in gates:
        if not g.thresholds:
            continue  # metrics only, nothing to pass or fail
        ts = suite(g.variant)
        c = counts[g.variant]
        c["tests"] += 1
        tc = ET.SubElement(ts, "testcase", classname=_x(f"suite.{g.suite_id}"),
                           name=_x(f"{g.criterion} suite_thresholds"), time="0.000")
        if not g.passed:
            c["failures"] += 1
            msg = ", ".join(f"{m} {_fmt_metric(g.metrics.get(m))} < {g.thresholds[m]:g}"
                            for m in g.failed)
            ET.SubElement(tc, "failure", type="SUITE_GATE", message=_x(msg))
        shown = {k: v for k, v in g.metrics.items() if k != "f1.macro"}
        ET.SubElement(tc, "system-out").text = _x(
            "\n".join(f"{k} = {_fmt_metric(v)}" for k, v in shown.items()))

    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for variant, ts in suites.items():
        c = counts[variant]
        for k in ("tests", "failures", "errors", "skipped"):
            ts.set(k, str(int(c[k])))
            total[k] += c[k]
        ts.set("time", f"{c['time']:.3f}")
        total["time"] += c["time"]
    for k in ("tests", "failures", "errors", "skipped"):
        root.set(k, str(int(total[k])))
    root.set("time", f"{total['time']:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"

