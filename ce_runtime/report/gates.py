"""Suite gates: per (variant, dataset suite, criterion), aggregate metrics and the verdict
of the criterion's `suite_thresholds`.

Classification criteria get accuracy, per-label precision/recall/F1, macro/weighted/micro
F1 and the confusion matrix; other criteria get pass_rate and mean_score (definitions in
`ce_runtime.report`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ce_runtime.report.frames import (
    CLASSIFICATION,
    EPSILON,
    Records,
    ratio,
    results_frame,
    trials_frame,
)
from ce_runtime.store.record import Status, TrialRecord, as_records


class SuiteGate(msgspec.Struct, frozen=True, kw_only=True):
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
    labels: list[str] = msgspec.field(default_factory=list)
    support: dict[str, int] = msgspec.field(default_factory=dict)  # label -> expected count
    confusion: list[list[int]] = msgspec.field(default_factory=list)  # [expected][observed]

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.suite_id}/{self.criterion}"

    def to_dict(self) -> dict[str, Any]:
        return msgspec.to_builtins(self)


GATE_KEYS = ("variant_id", "suite_id", "criterion_id")


def _label_order(label: str) -> tuple[bool, str]:
    return (label.startswith("("), label)  # (none) and (other) after the real labels


def _thresholds(records: Iterable[TrialRecord]) -> dict[tuple[str, str, str], dict]:
    """suite_thresholds per (variant, suite, criterion): configuration, not rows."""
    found: dict[tuple[str, str, str], dict] = {}
    for rec in records:
        if rec.suite_id is None:
            continue
        for c in rec.criteria:
            if c.suite_thresholds:
                found.setdefault((rec.variant_id, rec.suite_id, c.id), dict(c.suite_thresholds))
    return found


def _check(metrics: dict[str, float], thresholds: dict[str, float]) -> list[str]:
    failed = []
    for name, minimum in thresholds.items():
        value = metrics.get(name)
        if value is None or value < float(minimum) - EPSILON:
            failed.append(name)
    return failed


def suite_metrics(records: Records) -> list[SuiteGate]:
    """A gate per (variant, dataset suite, criterion), in first-seen order. Disabled
    criteria and NOT_GRADED trials are left out."""
    records = as_records(records)
    if all(r.suite_id is None for r in records):  # no dataset suite: no gate (no Polars)
        return []
    import polars as pl

    results = results_frame(records).lazy().filter(
        pl.col("suite_id").is_not_null() & ~pl.col("disabled")
        & (pl.col("status") != Status.NOT_GRADED.value))
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
            ratio(pl.col("tp"), pl.col("predicted")).alias("precision"),
            ratio(pl.col("tp"), pl.col("support")).alias("recall"),
            ratio(2 * pl.col("tp"), pl.col("predicted") + pl.col("support")).alias("f1"))
    )
    overall = per_label.group_by(GATE_KEYS).agg(
        pl.col("support").sum().alias("n_labelled"),
        ratio(pl.col("tp").sum(), pl.col("support").sum()).alias("accuracy"),
        pl.col("f1").mean().alias("macro_f1"),
        ratio((pl.col("f1") * pl.col("support")).sum(), pl.col("support").sum())
        .alias("weighted_f1"),
        ratio(2 * pl.col("tp").sum(), pl.col("predicted").sum() + pl.col("support").sum())
        .alias("micro_f1"))
    # coder_eval's statistics over every criterion's scores (`suite_thresholds: {mean:
    # 0.9}`), gateable on any criterion; shown where a threshold names them
    baseline = results.filter(pl.col("score").is_not_null()).group_by(GATE_KEYS).agg(
        pl.len().cast(pl.Float64).alias("b_count"), pl.col("score").mean().alias("b_mean"),
        pl.col("score").median().alias("b_median"),
        pl.col("score").std(ddof=0).alias("b_std"),
        pl.col("score").min().alias("b_min"), pl.col("score").max().alias("b_max"))
    scores = results.filter(pl.col("kind") != CLASSIFICATION).group_by(GATE_KEYS).agg(
        pl.len().alias("n_results"),
        pl.col("passed").cast(pl.Float64).mean().alias("pass_rate"),
        pl.col("score").mean().alias("mean_score"))
    gates_lf = (order.join(meta, on=GATE_KEYS).join(overall, on=GATE_KEYS, how="left")
                .join(suite_trials, on=["variant_id", "suite_id"], how="left")
                .join(scores, on=GATE_KEYS, how="left")
                .join(baseline, on=GATE_KEYS, how="left")
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
            metrics = {"pass_rate": g["pass_rate"], "mean_score": g["mean_score"],
                       **_baseline(g, limits)}
            failed = _check(metrics, limits)
            gates.append(SuiteGate(
                variant=g["variant_id"], suite_id=g["suite_id"], criterion=g["criterion_id"],
                metrics=metrics, thresholds=limits, failed=failed, passed=not failed,
                kind="score", criterion_type=g["type"], description=g["description"],
                n=g["n_results"] or 0,
                missing=(g["suite_trials"] or 0) - (g["n_results"] or 0)))
    return gates


def below_text(g: SuiteGate) -> str:
    """The metrics `g` failed on, each beside its minimum ("recall.bug 0.000 < 1"), and,
    for a label's metric with no case to count, why it is 0: scikit-learn's zero-division
    rule (no trial expected `bug`: a sample without one), not a wrong answer."""
    from ce_runtime.report.text import fmt_metric

    out = []
    for m in g.failed:
        text = f"{m} {fmt_metric(g.metrics.get(m))} < {g.thresholds[m]:g}"
        note = no_cases_note(g, m)
        out.append(f"{text} ({note})" if note else text)
    return ", ".join(out)


def no_cases_note(g: SuiteGate, metric: str) -> str:
    """Why a label's metric of `g` is 0 when it had no case to count; else ""."""
    kind, _, label = metric.partition(".")
    if g.kind != CLASSIFICATION or kind not in ("precision", "recall", "f1") or \
            label not in g.labels or metric == "f1.macro":
        return ""
    i = g.labels.index(label)
    expected = g.support.get(label, 0)
    answered = sum(row[i] for row in g.confusion) if g.confusion else 0
    if (kind == "recall" and not expected) or (kind == "f1" and not expected and not answered):
        return f"no trial expected {label}: 0 with nothing to count"
    if kind == "precision" and not answered:
        return f"no trial answered {label}: 0 with nothing to count"
    return ""


BASELINE_METRICS = ("count", "mean", "median", "std", "min", "max", "completion_rate")


def _baseline(g: dict, limits: dict[str, float]) -> dict[str, float]:
    """coder_eval's per-criterion statistics a threshold names: count, mean, median, std
    (population), min and max of the scores, and completion_rate (the graded trials of
    the suite with a score for the criterion, over all of them)."""
    out = {}
    for name in BASELINE_METRICS:
        if name not in limits:
            continue
        if name == "completion_rate":
            total = g["suite_trials"] or 0
            out[name] = (g["b_count"] or 0) / total if total else 0.0
        elif g[f"b_{name}"] is not None:
            out[name] = float(g[f"b_{name}"])
    return out


def _classification_gate(g: dict, limits: dict[str, float], per_label: list[dict],
                         cells: dict[tuple[str, str], int]) -> SuiteGate:
    metrics: dict[str, float] = _baseline(g, limits)
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


def gate_key(g: Any) -> tuple[str, str, str] | None:
    """(variant, suite id, criterion id) of a gate as run.json records it (`suite_gates`,
    a SuiteGate's to_dict): the same gate in another run, or its re-score."""
    if not isinstance(g, dict):
        return None
    names = (g.get("variant"), g.get("suite_id"), g.get("criterion"))
    return names if all(isinstance(n, str) for n in names) else None  # type: ignore


def gate_verdict(g: dict[str, Any]) -> str:
    """passed, failed, or `no thresholds`: a dataset criterion without suite_thresholds
    has its metrics but decides nothing."""
    if not g.get("thresholds"):
        return "no thresholds"
    return "passed" if g.get("passed") else "failed"


def gate_changes(old: list[Any], new: list[Any]) -> list[str]:
    """Where the re-scored run's suite gates differ from the run's own (run.json's
    `suite_gates`), one line each, `*` first when a gate's verdict flipped, came or went
    ('* suite gate default/sentiment/c0: passed -> failed (accuracy 0.9 -> 0.6)'). A
    dataset criterion without suite_thresholds has its metrics but no verdict: it is
    never marked, and says `no thresholds` where a gate says passed or failed."""
    from ce_runtime.report.text import fmt_metric

    word = gate_verdict
    before = {k: g for g in old or [] if (k := gate_key(g)) is not None}
    out = []
    for g in new:
        k = gate_key(g)
        if k is None:
            continue
        name = "/".join(k)
        was = before.pop(k, None)
        if was is None:  # marked when it decides (has thresholds)
            out.append(f"{'*' if g.get('thresholds') else ' '} suite gate {name}: new, "
                       f"{word(g)}")
            continue
        old_m = was.get("metrics") if isinstance(was.get("metrics"), dict) else {}
        new_m = g.get("metrics") or {}
        alias = () if "f1.macro" in (g.get("thresholds") or {}) else ("f1.macro",)
        moved = [f"{m} {fmt_metric(old_m.get(m))} -> {fmt_metric(v)}"
                 for m, v in new_m.items()
                 if m not in alias and fmt_metric(old_m.get(m)) != fmt_metric(v)]
        flipped = bool(was.get("passed")) != bool(g.get("passed"))
        if flipped or moved or word(was) != word(g):
            verdict = f"{word(was)} -> {word(g)}" if word(was) != word(g) else word(g)
            out.append(f"{'*' if flipped else ' '} suite gate {name}: {verdict}"
                       + (f" ({', '.join(moved)})" if moved else ""))
    out += [f"* suite gate {'/'.join(k)}: no longer a gate (was {word(g)})"
            if g.get("thresholds") else f"  suite gate {'/'.join(k)}: no longer there"
            for k, g in before.items()]
    return out


# the metrics a comparison of two runs shows of every gate, besides those its thresholds
# name: a classification's accuracy and F1s, another criterion's pass rate and score
HEADLINE_METRICS = {CLASSIFICATION: ("accuracy", "macro_f1", "weighted_f1", "micro_f1"),
                    "score": ("pass_rate", "mean_score")}


class MetricChange(msgspec.Struct, frozen=True):
    """One metric of a gate in two runs: A's value, B's, B - A, and the minimum B's
    suite_thresholds set for it (A's when B has none; None: not thresholded)."""

    metric: str
    a: float | None
    b: float | None
    diff: float | None
    minimum: float | None
    failed_b: bool  # below B's minimum


class GateChange(msgspec.Struct, frozen=True, kw_only=True):
    """A suite gate (variant, dataset suite, criterion) in run A and run B (`ce compare`):
    each run's verdict (passed, failed, `no thresholds`; None: the run has no such gate)
    and its metrics side by side."""

    variant: str
    suite_id: str
    criterion: str
    criterion_type: str | None
    verdict_a: str | None
    verdict_b: str | None
    metrics: list[MetricChange]

    @property
    def name(self) -> str:
        return f"{self.variant}/{self.suite_id}/{self.criterion}"

    @property
    def regressed(self) -> bool:
        """Passed in A, fails in B: the suite fell below a minimum it met."""
        return self.verdict_a == "passed" and self.verdict_b == "failed"

    @property
    def fixed(self) -> bool:
        return self.verdict_a == "failed" and self.verdict_b == "passed"


def compare_gates(gates_a: list[Any], gates_b: list[Any]) -> list[GateChange]:
    """The suite gates of two runs (run.json's `suite_gates` of each), matched by
    variant, suite and criterion: B's order, then those only in A. Each shows its
    headline metrics (HEADLINE_METRICS) and those either run's thresholds name."""
    def number(v: Any) -> float | None:
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def field(g: dict[str, Any] | None, name: str) -> dict[str, Any]:
        value = (g or {}).get(name)
        return value if isinstance(value, dict) else {}

    def dicts(gates: list[Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
        return {k: g for g in gates or [] if (k := gate_key(g)) is not None}

    a, b = dicts(gates_a), dicts(gates_b)
    out = []
    for k in [*b, *(k for k in a if k not in b)]:
        ga, gb = a.get(k), b.get(k)
        either = gb if gb is not None else ga
        # the minimums B gates with; A's for a gate B does not have
        limits = field(gb, "thresholds") if gb is not None else field(ga, "thresholds")
        names = [*HEADLINE_METRICS.get(either.get("kind"), ()), *field(gb, "thresholds"),
                 *field(ga, "thresholds")]
        failed = (gb or {}).get("failed")
        failed_b = {m for m in failed if isinstance(m, str)} if isinstance(failed, list) \
            else set()
        metrics = []
        for m in dict.fromkeys(names):
            va, vb = number(field(ga, "metrics").get(m)), number(field(gb, "metrics").get(m))
            metrics.append(MetricChange(m, va, vb,
                                        None if va is None or vb is None else vb - va,
                                        number(limits.get(m)), m in failed_b))
        out.append(GateChange(
            variant=k[0], suite_id=k[1], criterion=k[2],
            criterion_type=either.get("criterion_type"),
            verdict_a=gate_verdict(ga) if ga is not None else None,
            verdict_b=gate_verdict(gb) if gb is not None else None, metrics=metrics))
    return out
