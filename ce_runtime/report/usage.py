"""What a trial cost, per trial: turns (model calls), tool calls, input and output tokens,
USD and wall time, as means and medians per run or variant and as B's ratio to A over
the trials both graded (`ce compare`, and report.md / report.html's variant comparison).
Polars computes every aggregate; `usage_text.py` formats them.

A value the trial did not measure is unknown (null), never 0, so it never drags a mean:

- turns and tool calls: unknown when no agent ran (`agent: none`, a trial whose agent
  never started: no agent outcome) unless the trial still reported tokens or a cost;
- input and output tokens: unknown when the trial reported no token at all (new input,
  output, cache reads and writes all 0: `none`, `oracle`, a script without a `usage`
  action; a real model call always has some);
- cost: unknown when its model has no rate (the record's `cost_unknown`) or the trial
  reported no cost ($0: an agent that reports none; a free local model reads as unknown
  too, which is the side to err on: "B costs 100% less" it does not);
- wall time: the trial's `duration_s` (set-up, agent and grading), unknown only when
  not recorded.

A side's mean and median are over its trials with the value known (`n` of them); B's
ratio to A is mean B / mean A over the matched trials known in both (`paired`), so a
trial one side did not measure moves neither. The ratio is None with no such trial,
or when A's mean is 0 and B's is not (1.0 when both are 0). The judges' cost is apart
(run.json's `judges`), not in these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    import polars as pl

# (column, label) in the order every table shows them
METRICS: tuple[tuple[str, str], ...] = (
    ("turns", "Turns"), ("tool_calls", "Tool calls"), ("input_tokens", "Input tokens"),
    ("output_tokens", "Output tokens"), ("cost_usd", "Cost (USD)"),
    ("duration_s", "Wall time"))
NAMES = tuple(m for m, _ in METRICS)
# the trials frame's columns the known values are made from, with their type (a
# trials.parquet of an older ce may lack one: read as not recorded)
_SOURCE = {"agent": "str", "outcome_reason": "str", "cost_unknown": "str",
           "turns": "int", "tool_calls": "int", "input_tokens": "int",
           "output_tokens": "int", "cache_read_tokens": "int",
           "cache_write_tokens": "int", "cost_usd": "float", "duration_s": "float"}


class SideUsage(msgspec.Struct, frozen=True):
    """One metric of one side: its mean and median over the `n` trials it is known for."""

    n: int
    mean: float | None
    median: float | None


class UsageChange(msgspec.Struct, frozen=True):
    """One metric of both runs; `ratio` = `paired_b` / `paired_a`, the means over the
    `paired` matched trials known in both."""

    metric: str
    a: SideUsage
    b: SideUsage
    paired: int
    paired_a: float | None
    paired_b: float | None
    ratio: float | None


class UsageComparison(msgspec.Struct, frozen=True):
    """The usage of the `trials` matched trials both runs graded, metric by metric.
    Graded is any status but NOT_GRADED (report/__init__.py): an ERROR trial is one, so
    `errors_a` and `errors_b` count each run's ERROR trials among them, and
    `before_grading_a` and `before_grading_b` those of them that never reached grading
    (no score: they measured what they did before, often nothing but their wall time)."""

    trials: int
    metrics: tuple[UsageChange, ...]
    errors_a: int = 0
    errors_b: int = 0
    before_grading_a: int = 0
    before_grading_b: int = 0


def known(frame: pl.DataFrame | pl.LazyFrame, keep: Sequence[str]) -> pl.LazyFrame:
    """`keep` and one column per metric (NAMES), null where the trial did not measure it
    (the module's rules)."""
    import polars as pl

    lf = frame.lazy()
    have = set(lf.collect_schema().names())
    types = {"str": pl.String, "int": pl.Int64, "float": pl.Float64}

    def col(name: str) -> pl.Expr:
        dtype = types[_SOURCE[name]]
        return pl.col(name).cast(dtype) if name in have else pl.lit(None, dtype)

    has_tokens = tokens_known(col)
    has_cost = cost_known(col("cost_usd"), col("cost_unknown"))
    ran = turns_known(col)
    return lf.select(
        *keep,
        *(pl.when(ran).then(col(c)).alias(c) for c in ("turns", "tool_calls")),
        *(pl.when(has_tokens).then(col(c)).alias(c) for c in ("input_tokens",
                                                               "output_tokens")),
        pl.when(has_cost).then(col("cost_usd")).alias("cost_usd"),
        col("duration_s").alias("duration_s"))


def cost_known(cost_usd: pl.Expr, cost_unknown: pl.Expr) -> pl.Expr:
    """Whether a trial's cost is known (the module's rule): its model has a rate and it
    reported more than $0. run.json's `cost_known_trials` counts these, and report.md's
    and report.html's cost totals and cells show only them."""
    return cost_unknown.is_null() & (cost_usd.fill_null(0.0) > 0)


def tokens_known(col: Callable[[str], pl.Expr] | None = None) -> pl.Expr:
    """Whether a trial's tokens are known (the module's rule): it reported some token
    (new input, output, cache reads or writes). `col` gives a column (pl.col: the trials
    frame's). run.json's `tokens_known_trials` counts these; report.md's and
    report.html's token totals and cells show only them."""
    import polars as pl

    col = col or pl.col
    return sum((col(c).fill_null(0) for c in ("input_tokens", "output_tokens",
                                              "cache_read_tokens", "cache_write_tokens")),
               pl.lit(0)) > 0


def turns_known(col: Callable[[str], pl.Expr] | None = None) -> pl.Expr:
    """Whether a trial's turns and tool calls are known (the module's rule): an agent
    other than `none` ran and ended with an outcome, or the trial reported tokens or a
    cost."""
    import polars as pl

    col = col or pl.col
    agent = col("agent")
    return (agent.is_not_null() & (agent != "none") & col("outcome_reason").is_not_null()) \
        | tokens_known(col) | cost_known(col("cost_usd"), col("cost_unknown"))


def trial_usage(trials: pl.DataFrame) -> list[dict[str, Any]]:
    """Each trial's turns, tool_calls, input_tokens, output_tokens and cost_usd in the
    frame's order, None where unknown: report.md's and report.html's per-trial cells."""
    cols = ("turns", "tool_calls", "input_tokens", "output_tokens", "cost_usd")
    return known(trials, ()).select(*cols).collect().to_dicts()


def side_exprs(suffix: str = "") -> list[pl.Expr]:
    """Per metric: `<m>.n`, `<m>.mean`, `<m>.median` of the column `<m><suffix>`."""
    import polars as pl

    out = []
    for m in NAMES:
        c = pl.col(m + suffix)
        out += [c.count().alias(f"{m}.n"), _round(c.mean(), m).alias(f"{m}.mean"),
                _round(c.median(), m).alias(f"{m}.median")]
    return out


def _round(expr: pl.Expr, metric: str) -> pl.Expr:
    """A cost to the nano-dollar, as run.json's `cost_usd` (a mean summed in another
    order, the variant's and its pairs', differs in the last bits: 0.015 and
    0.015000000000000001)."""
    return expr.round(9) if metric == "cost_usd" else expr


def paired_exprs(suffix: str) -> list[pl.Expr]:
    """Per metric over the rows known in both (`<m>` is A's, `<m><suffix>` B's):
    `<m>.paired`, `<m>.paired_a`, `<m>.paired_b` and `<m>.ratio`."""
    import polars as pl

    out = []
    for m in NAMES:
        a, b = pl.col(m), pl.col(m + suffix)
        both = a.is_not_null() & b.is_not_null()
        mean_a, mean_b = (_round(x.filter(both).mean(), m) for x in (a, b))
        out += [both.sum().alias(f"{m}.paired"), mean_a.alias(f"{m}.paired_a"),
                mean_b.alias(f"{m}.paired_b"),
                pl.when(mean_a > 0).then(mean_b / mean_a)
                .when((mean_a == 0) & (mean_b == 0)).then(pl.lit(1.0))
                .alias(f"{m}.ratio")]
    return out


def _error_flags() -> list[pl.Expr]:
    """`error`: the trial ended in an ERROR (graded all the same: any status but
    NOT_GRADED is); `before_grading`: an ERROR that never reached grading (no score: it
    measured what it did before, often nothing but its wall time)."""
    import polars as pl

    from ce_runtime.store.record import Status

    error = pl.col("status") == Status.ERROR.value
    return [error.alias("error"),
            (error & pl.col("weighted_score").is_null()).alias("before_grading")]


def _side(row: dict[str, Any], m: str) -> SideUsage:
    return SideUsage(row[f"{m}.n"], row[f"{m}.mean"], row[f"{m}.median"])


# ---------------------------------------------------------------------------- ce compare


def compare_usage(trials_a: pl.DataFrame, trials_b: pl.DataFrame,
                  key: Sequence[str]) -> UsageComparison:
    """Both runs' usage over their matched trials (same `key`: variant, task, row and
    repeat) that both graded (ERROR trials too, counted apart)."""
    import polars as pl

    def prep(frame: pl.DataFrame) -> pl.LazyFrame:
        graded = frame.lazy().filter(pl.col("graded").fill_null(False))
        return known(graded.with_columns(*_error_flags()), (*key, "error", "before_grading")) \
            .with_columns(pl.col("row_id").fill_null(""))

    matched = prep(trials_a).join(prep(trials_b), on=list(key), suffix="_b",
                                  nulls_equal=True)
    counts = [pl.col(c).sum().alias(c) for c in ("error", "error_b", "before_grading",
                                                  "before_grading_b")]
    row = matched.select(pl.len().alias("trials"), *counts, *side_exprs(), *[
        e.name.suffix("_b") for e in side_exprs("_b")], *paired_exprs("_b")) \
        .collect().row(0, named=True)
    metrics = []
    for m in NAMES:
        b = SideUsage(row[f"{m}.n_b"], row[f"{m}.mean_b"], row[f"{m}.median_b"])
        metrics.append(UsageChange(m, _side(row, m), b, row[f"{m}.paired"],
                                   row[f"{m}.paired_a"], row[f"{m}.paired_b"],
                                   row[f"{m}.ratio"]))
    return UsageComparison(row["trials"], tuple(metrics), row["error"], row["error_b"],
                           row["before_grading"], row["before_grading_b"])


# ---------------------------------------------------------------------------- run.json


_VARIANT_KEY = ("task_id", "row_id", "repeat")
# a variant's `per_trial` counts, and a comparison's (its paired trials')
_COUNTS = ("trials", "errors", "before_grading")
_PAIR_COUNTS = (*_COUNTS, "baseline_errors", "baseline_before_grading")


def variant_usage(trials: pl.LazyFrame, variants: list[str]
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """({variant: run.json's `per_trial`}, {variant: its comparison's `per_trial`}):
    each variant's usage over its graded trials, and each but the first against the
    first (the baseline) over the trials both graded (same task, row and repeat).

    Graded is any status but NOT_GRADED, so an ERROR trial is one: a variant's
    `per_trial` says how many `trials` its means are over, how many of them ended in an
    ERROR (`errors`) and how many of those never reached grading (`before_grading`); a
    comparison's says the same of its paired trials, the variant's (`errors`,
    `before_grading`) and the baseline's (`baseline_errors`,
    `baseline_before_grading`)."""
    import polars as pl

    graded = known(trials.filter(pl.col("graded")).with_columns(*_error_flags()),
                   ("variant_id", *_VARIANT_KEY, "error", "before_grading")) \
        .with_columns(pl.col("row_id").fill_null(""))
    counts = [pl.len().alias("trials"), pl.col("error").sum().alias("errors"),
              pl.col("before_grading").sum().alias("before_grading")]
    queries = [graded.group_by("variant_id", maintain_order=True).agg(*counts,
                                                                      *side_exprs())]
    if len(variants) > 1:
        base = graded.filter(pl.col("variant_id") == variants[0]).drop("variant_id")
        pairs = graded.filter(pl.col("variant_id") != variants[0]).join(
            base, on=list(_VARIANT_KEY), suffix="_base", nulls_equal=True)
        # the paired means are named for the baseline (`<m>`) and the variant (`_base`
        # is the baseline's here, so swap them)
        swapped = pairs.select("variant_id", "error", "before_grading",
                               "error_base", "before_grading_base",
                               *(pl.col(f"{m}_base").alias(m) for m in NAMES),
                               *(pl.col(m).alias(f"{m}_v") for m in NAMES))
        queries.append(swapped.group_by("variant_id", maintain_order=True).agg(
            *counts, pl.col("error_base").sum().alias("baseline_errors"),
            pl.col("before_grading_base").sum().alias("baseline_before_grading"),
            *paired_exprs("_v")))
    frames = pl.collect_all(queries)
    per_trial = {r["variant_id"]: {**{k: r[k] for k in _COUNTS},
                                   **{m: msgspec.structs.asdict(_side(r, m)) for m in NAMES}}
                 for r in frames[0].iter_rows(named=True)}
    changes = {}
    if len(frames) > 1:
        for r in frames[1].iter_rows(named=True):
            changes[r["variant_id"]] = {
                **{k: r[k] for k in _PAIR_COUNTS},
                **{m: {"paired": r[f"{m}.paired"], "baseline_mean": r[f"{m}.paired_a"],
                       "mean": r[f"{m}.paired_b"], "ratio": r[f"{m}.ratio"]}
                   for m in NAMES}}
    return per_trial, changes


def no_usage() -> dict[str, Any]:
    """A variant's `per_trial` when it graded no trial."""
    return {**dict.fromkeys(_COUNTS, 0), **{m: {"n": 0, "mean": None, "median": None} for m in NAMES}}


def no_pairs() -> dict[str, Any]:
    """A comparison's `per_trial` when the variant shares no graded trial with the
    baseline."""
    return {**dict.fromkeys(_PAIR_COUNTS, 0), **{m: {"paired": 0, "baseline_mean": None, "mean": None,
                                "ratio": None} for m in NAMES}}
