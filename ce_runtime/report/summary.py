"""The run.json summary: counts by status, pass rate with its Wilson interval, mean score,
pass@k, turn budgets, cost, each variant's usage per trial (`per_trial`: report/usage.py),
the paired comparison of variants, and the exit code.

Definitions in `ce_runtime.report`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ce_runtime.report.frames import EPSILON, Records, ratio, trials_frame
from ce_runtime.report.gates import SuiteGate, below_text
from ce_runtime.report.usage import (
    cost_known,
    no_pairs,
    no_usage,
    tokens_known,
    variant_usage,
)
from ce_runtime.store.record import STATUSES, Status

if TYPE_CHECKING:
    import polars as pl

WILSON_Z = 1.959963984540054  # two-sided 95%
SUMMARY_SCHEMA_VERSION = 1


@functools.cache
def _stats_exprs() -> tuple[pl.Expr, ...]:
    """The run's and each variant's aggregates: built once (~1 ms of Python per call,
    twice per summary; a Polars expression is a value, reused by every query)."""
    import polars as pl

    graded = pl.col("graded")
    n = graded.sum()
    passed = pl.col("success").sum()
    p = ratio(passed, n)
    z2 = WILSON_Z ** 2
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = WILSON_Z * ((p * (1 - p) / n + z2 / (4 * n * n)).sqrt()) / denom
    within = pl.col("within_expected_turns")
    return (
        pl.len().alias("trials"),
        *[(pl.col("status") == s.value).sum().alias(f"status.{s.value}") for s in STATUSES],
        n.alias("graded"),
        passed.alias("passed"),
        pl.when(n > 0).then(p).alias("pass_rate"),
        # exactly 0 with no success and 1 with no failure (the formula's value; in floats
        # it came out as 5.6e-17 for 0/3 and 0.9999999999999999 for 10/10)
        pl.when(n > 0).then(pl.when(passed == 0).then(0.0)
                            .otherwise((center - half).clip(0.0, 1.0))).alias("pass_rate_low"),
        pl.when(n > 0).then(pl.when(passed == n).then(1.0)
                            .otherwise((center + half).clip(0.0, 1.0))).alias("pass_rate_high"),
        pl.col("weighted_score").filter(graded).mean().alias("mean_score"),
        (graded & pl.col("weighted_score").is_null()).sum().alias("unscored"),
        pl.col("stopped_early").sum().alias("stopped_early"),
        pl.col("turns_remaining_at_stop").sum().alias("turns_avoided"),
        pl.col("turns_remaining_at_stop").is_not_null().sum().alias("turns_avoided_trials"),
        pl.col("input_tokens").sum(), pl.col("output_tokens").sum(),
        pl.col("total_tokens").sum(), pl.col("cache_read_tokens").sum(),
        pl.col("cache_write_tokens").sum(),
        tokens_known().sum().alias("tokens_known_trials"), pl.col("cost_usd").sum(),
        pl.col("cost_unknown").is_not_null().sum().alias("cost_unknown"),
        cost_known(pl.col("cost_usd"), pl.col("cost_unknown")).sum()
        .alias("cost_known_trials"),
        pl.col("duration_s").sum(), pl.col("turns").sum(), pl.col("tool_calls").sum(),
        within.is_not_null().sum().alias("budgeted"),
        within.fill_null(False).sum().alias("within"),
    )


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
        "by_status": {s.value: row[f"status.{s.value}"] for s in STATUSES
                      if row[f"status.{s.value}"]},
        "graded": row["graded"],
        "passed": row["passed"],
        "pass_rate": row["pass_rate"],
        "pass_rate_ci95": None if row["pass_rate"] is None
        else [row["pass_rate_low"], row["pass_rate_high"]],
        "mean_score": row["mean_score"],
        # graded trials the mean leaves out: no score (an ERROR before grading); only
        # when there are some
        **({"unscored": row["unscored"]} if row["unscored"] else {}),
        "stopped_early": row["stopped_early"],
        # what the early stops saved at most: each one's max_turns minus its turns (only
        # when some early-stopped trial had a max_turns: `trials` of them)
        **({"turns_avoided": {"at_most": row["turns_avoided"],
                              "trials": row["turns_avoided_trials"]}}
           if row["turns_avoided_trials"] else {}),
        # input is new input only; the prompt cache's reads and writes apart (a Claude
        # Code session's input is mostly cache reads), not in total
        "tokens": {"input": row["input_tokens"], "output": row["output_tokens"],
                   "total": row["total_tokens"], "cache_read": row["cache_read_tokens"],
                   "cache_write": row["cache_write_tokens"]},
        # the trials whose tokens are known (report/usage.py's rule: some token reported);
        # with none the tokens are unknown ("—" in the reports), not 0
        "tokens_known_trials": row["tokens_known_trials"],
        # to the nano-dollar: sums in another order (the run's, a variant's) differ in
        # the last bits, and $0.35355 would print as $0.3535 in one place, $0.3536 in the other
        "cost_usd": None if row["cost_usd"] is None else round(row["cost_usd"], 9),
        # only when some trial's cost is unknown (its model has no rate): cost_usd
        # leaves those trials' tokens out
        **({"cost_unknown": {"trials": row["cost_unknown"], "why": row["cost_unknown_why"]}}
           if row["cost_unknown"] else {}),
        # the trials whose cost is known (report/usage.py's rule: a rate and more than $0
        # reported); cost_usd is theirs, and with none it is unknown, not $0
        "cost_known_trials": row["cost_known_trials"],
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


def _below_min_pass_rate(per_variant: Any, min_rate: float) -> list[str]:
    """`ce run --min-pass-rate`: each variant's successes over every trial it ran (an
    ERROR or NOT_GRADED trial is not a pass) must reach the minimum."""
    rows = list(per_variant.iter_rows(named=True))
    out = []
    for r in rows:
        ok, n = r[f"status.{Status.SUCCESS.value}"], r["trials"]
        if n and ok / n < min_rate:
            who = f"variant {r['variant_id']}: " if len(rows) > 1 else ""
            out.append(f"{who}{ok} of {n} trial(s) succeeded ({100 * ok / n:.1f}%), below "
                       f"--min-pass-rate {min_rate:g}")
    return out


def summary(records: Records, gates: Sequence[SuiteGate], run_id: str,
            config: dict[str, Any] | None) -> dict[str, Any]:
    """The run.json document. `config` is stored under `args` (what `ce run --resume`
    reads back)."""
    import polars as pl

    trials = trials_frame(records).lazy()
    overall_lf = trials.select(_stats_exprs())
    per_variant_lf = trials.group_by("variant_id", maintain_order=True).agg(
        *_stats_exprs(),
        pl.col("agent").drop_nulls().unique(maintain_order=True).alias("agents"),
        pl.col("model").drop_nulls().unique(maintain_order=True).alias("models"),
        pl.col("cost_unknown").drop_nulls().unique(maintain_order=True)
        .alias("cost_unknown_why"))
    experiments_lf = trials.select(
        pl.col("experiment_id").drop_nulls().unique(maintain_order=True))
    pak_all_lf = _pass_at_k(trials, [])
    pak_variant_lf = _pass_at_k(trials, ["variant_id"])
    overall, per_variant, pak_all, pak_variant, experiments = pl.collect_all(
        [overall_lf, per_variant_lf, pak_all_lf, pak_variant_lf, experiments_lf])
    total = overall.row(0, named=True)
    total["cost_unknown_why"] = list(dict.fromkeys(
        why for r in per_variant.iter_rows(named=True) for why in r["cost_unknown_why"]))
    pak_total = pak_all.row(0, named=True) if pak_all.height else None
    if pak_total is not None and not pak_total["tasks"]:
        pak_total = None
    paks = {r["variant_id"]: r for r in pak_variant.iter_rows(named=True)}
    variants = [r["variant_id"] for r in per_variant.iter_rows(named=True)]
    per_trial, usage_changes = variant_usage(trials, variants)

    judged = [(_field(r, "variant_id"), _field(r, "judge_usage")) for r in records]
    failed_gates = [g for g in gates if not g.passed]
    not_success = total["trials"] - total[f"status.{Status.SUCCESS.value}"]
    reasons = []
    if not records:  # a re-score's trials ran in its run: none of them was re-graded
        reasons.append("no trial was re-scored" if (config or {}).get("rescored_from")
                       else "no trial ran")
    min_rate = (config or {}).get("min_pass_rate")
    if not_success and min_rate is None:
        reasons.append(f"{not_success} of {total['trials']} trial(s) did not succeed")
    elif not_success:
        reasons += _below_min_pass_rate(per_variant, float(min_rate))
    reasons += [f"suite gate {g.name} failed: {below_text(g)}" for g in failed_gates]
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "run_id": run_id,
        "args": config,
        "exit_code": 1 if reasons else 0,
        "exit_reasons": reasons,
        **({} if min_rate is None else {"min_pass_rate": float(min_rate)}),
        "experiment_ids": experiments["experiment_id"].to_list(),
        **_breakdown(total, pak_total),
        **_judges(judged),
        "variants": {r["variant_id"]: {"agents": r["agents"], "models": r["models"],
                                       **_breakdown(r, paks.get(r["variant_id"])),
                                       **_judges(judged, r["variant_id"]),
                                       "per_trial": per_trial.get(r["variant_id"])
                                       or no_usage()}
                     for r in per_variant.iter_rows(named=True)},
        "comparison": [{**c, "per_trial": usage_changes.get(c["variant"]) or no_pairs()}
                       for c in _comparison(trials, variants)],
        "suite_gates": [g.to_dict() for g in gates],
        "suite_gates_failed": len(failed_gates),
    }


def _field(record: Any, key: str) -> Any:
    """A record's field as plain data (a TrialRecord's or a task.json dict's)."""
    import msgspec

    value = record.get(key) if isinstance(record, dict) else getattr(record, key, None)
    return msgspec.to_builtins(value) if value is not None else None


def _judges(judged: list[tuple[Any, Any]], variant: Any = ...) -> dict[str, Any]:
    """run.json's `judges` (what the llm_judge calls cost, apart from the agent's
    `cost_usd`), of the run or one variant; nothing when no trial called a judge."""
    from ce_runtime.grade.judge_usage import total

    out = total(u for v, u in judged if variant is ... or v == variant)
    return {"judges": out} if out else {}


def with_run_state(summary: dict[str, Any], status: str, planned: int | None,
                   lost: Sequence[dict[str, Any]] = (), error: str | None = None,
                   created_at: str | None = None, unrun: Sequence[str] = (),
                   unrun_files: dict[str, str] | None = None) -> dict[str, Any]:
    """`summary` of a run that `status` says may not have finished: trials_planned, the
    lost trials, and a run that did not run every planned trial is not a pass (exit 1,
    the reason first), so report.md, report.html and run.json never say PASSED for the
    trials a Ctrl-C left unrun. `error`: what left them unrun, when not a signal (an
    executor that did not start), recorded and said in place of "the run was ...".
    `created_at`: when the run began (`ce run` writes it at its start; `ce runs` lists
    it). `unrun`: the ids of the planned trials that never ran (nor were lost), kept as
    `unrun_trials` for the JUnit file's skipped testcases (`ce report` reads them back);
    `unrun_files`: {VARIANT/TASK[/ROW]: task file} of those, kept as `unrun_task_files`
    (each testcase's `file`)."""
    summary["status"] = status
    if created_at is not None:
        summary["created_at"] = created_at
    if planned is not None:
        summary["trials_planned"] = planned
    planned = summary["trials"] if planned is None else planned
    if lost:
        summary["lost_trials"] = [{"trial_id": r["trial_id"], "error": r["error"]}
                                  for r in lost]
    if status in ("interrupted", "incomplete"):
        if error:
            summary["error"] = error
        if unrun:
            summary["unrun_trials"] = list(unrun)
            groups = {i.rpartition("/")[0] for i in unrun}
            files = {k: v for k, v in (unrun_files or {}).items() if k in groups}
            if files:
                summary["unrun_task_files"] = files
        missing = planned - summary["trials"]
        args = summary.get("args")
        source = (args.get("ran_in") or args.get("rescored_from")) \
            if isinstance(args, dict) else None
        # a re-score's trials ran in the run it re-scored (or, re-scoring a re-score, in
        # the run that one re-scored: `ran_in`): that run is the one to resume
        reason = (f"{error}: " if error else f"the run was {status}: ") + \
            f"{summary['trials']} of {planned} planned trial(s) " + \
            ("re-scored" if source else "ran")
        if missing > 0 and not (source and error):  # a re-score's error says what to do
            reason += f"; `ce run --resume {source or 'RUN'}` runs the other {missing}"
        summary["exit_reasons"] = [reason, *summary["exit_reasons"]]
        summary["exit_code"] = 1
    return summary
