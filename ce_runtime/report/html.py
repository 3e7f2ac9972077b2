"""The HTML report's data: one dict for the page (summary, variants, paired comparison,
suite gates, the trials table) and, per trial, its detail (criteria with their evidence,
judge rationales, command output, the trace's timeline, the workspace's files and their
diff against the template), each read from the run directory, never re-graded.

`html_page.render_html` turns the dict into one self-contained file. The table is
embedded as compact rows (10,000 trials are ~2 MB); each trial's detail is its own JSON
element the page parses only when the trial is opened. Details are capped so that a big
run stays openable: DETAIL_TOTAL bytes shared by all trials (between DETAIL_MIN and
DETAIL_MAX each); long texts are cut (and say so), the timeline keeps its first events.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import msgspec

from ce_runtime.report.gates import SuiteGate
from ce_runtime.report.html_trial import TrialReads, trial_detail
from ce_runtime.report.rundir import RunData
from ce_runtime.report.text import (
    failed_criteria,
    fmt_paired,
    gates_passed,
    paired_early_note,
    run_limit_text,
)
from ce_runtime.report.usage_text import variant_tables
from ce_runtime.store.record import TrialRecord

DETAIL_TOTAL = 40_000_000  # bytes of per-trial detail in one page
DETAIL_MAX = 200_000  # per trial (a small run)
DETAIL_MIN = 3_000  # per trial (a huge run still shows the essentials)

COLUMNS = ("trial_id", "variant", "task", "row", "repeat", "status", "score", "turns",
           "tool_calls", "tokens", "cost", "duration", "early", "early_reason", "failed",
           "suite", "error", "cost_unknown", "limit")


def detail_budget(n_trials: int) -> int:
    """Bytes of detail each trial of an `n_trials` run may embed."""
    if n_trials <= 0:
        return DETAIL_MAX
    return max(DETAIL_MIN, min(DETAIL_MAX, DETAIL_TOTAL // n_trials))


def page_data(data: RunData, summary: dict[str, Any], gates: Sequence[SuiteGate],
              *, details: bool = True, reads: TrialReads | None = None,
              detail_note: str | None = None) -> dict[str, Any]:
    """Everything the page shows. `details` False leaves the per-trial detail out (the
    table and the summaries only), and so does a `detail_note`, which the page shows
    where a trial's detail would be. `reads`: the trials' files read ahead."""
    from ce_lang.api import __version__

    records = data.records
    variants = list(summary.get("variants") or {})
    paired, paired_note = _paired(data, variants)
    budget = detail_budget(len(records))
    args = data.run_json.get("args")
    out: dict[str, Any] = {
        "ce_version": __version__,
        "run_id": data.run_id,
        "status": data.run_json.get("status"),
        "trials_planned": data.run_json.get("trials_planned"),
        "rescored_from": args.get("rescored_from") if isinstance(args, dict) else None,
        "summary": _summary(summary),
        "variants": [_variant(v, summary["variants"][v]) for v in variants],
        "comparison": summary.get("comparison") or [],
        # the variants' usage per trial, as report.md's cells (report/usage_text.py)
        "usage_tables": variant_tables(summary),
        "paired": paired,
        "paired_note": paired_note,
        # report.md's note under its paired statistics, said under the paired table
        "paired_early_note": paired_early_note(summary.get("comparison")),
        "gates": [g.to_dict() for g in gates],
        # "1/2 suite gates passed", as report.md's verdict line (None: no thresholds)
        "gates_passed": gates_passed(gates),
        "columns": list(COLUMNS),
        "trials": rows(records),
        "detail_budget": budget,
        "details": None,
        "detail_note": detail_note,
    }
    if details and detail_note is None:
        if reads is None or reads.run_dir != data.run_dir:
            reads = TrialReads(data.run_dir)
        out["details"] = [_detail(data.run_dir, rec, budget, reads) for rec in records]
    return out


def _detail(run_dir: str, rec: TrialRecord, budget: int, reads: TrialReads) -> str:
    """The trial's detail; a trial directory malformed in a way nobody foresaw costs that
    trial its panel (which says why), never the report."""
    try:
        return trial_detail(run_dir, rec, budget, reads.templates, reads.get(rec))
    except Exception as exc:  # archive data of any shape
        return dumps({"trial_id": rec.trial_id, "status": rec.status,
                      "weighted_score": rec.weighted_score,
                      "usage": msgspec.to_builtins(rec.usage),
                      "criteria": [], "notes": [
                          f"this trial's files could not be read ({type(exc).__name__}: "
                          f"{str(exc)[:300]})"]})


def _summary(s: dict[str, Any]) -> dict[str, Any]:
    keys = ("exit_code", "exit_reasons", "experiment_ids", "trials", "by_status", "graded",
            "passed", "pass_rate", "pass_rate_ci95", "mean_score", "unscored",
            "stopped_early", "turns_avoided", "tokens", "cost_usd", "duration_s", "turns", "tool_calls",
            "within_expected_turns", "pass_at_k", "suite_gates_failed", "min_pass_rate", "cost_unknown", "judges",
            "cost_known_trials", "tokens_known_trials")
    return {k: s.get(k) for k in keys}


def _variant(name: str, v: dict[str, Any]) -> dict[str, Any]:
    keys = ("agents", "models", "trials", "by_status", "graded", "passed", "pass_rate",
            "pass_rate_ci95", "mean_score", "stopped_early", "cost_usd", "tokens",
            "pass_at_k", "duration_s", "cost_unknown", "cost_known_trials",
            "tokens_known_trials")
    return {"id": name, **{k: v.get(k) for k in keys}}


def _paired(data: RunData, variants: list[str]) -> tuple[list[dict[str, Any]], str | None]:
    """Each variant against the first, paired over shared tasks (report.stats)."""
    if len(variants) < 2:
        return [], None
    try:
        from ce_runtime.report.stats import paired_comparison
    except ImportError:  # an older checkout: the side-by-side view only
        return [], "paired statistics are not available in this version of ce"
    out = []
    for v in variants[1:]:
        entry: dict[str, Any] = {"variant": v, "baseline": variants[0]}
        for metric in ("score", "pass_rate"):
            r = paired_comparison(data.trials, variants[0], v, metric=metric)
            # the cells as report.md writes them (text.py's fmt_paired), shown as they are
            entry[metric] = {**r.to_dict(), "shown": fmt_paired(r)}
        out.append(entry)
    return out, None


def rows(records: Sequence[TrialRecord]) -> list[list[Any]]:
    """The trials table's rows, in record order."""
    from ce_runtime.report.frames import trials_frame
    from ce_runtime.report.usage import trial_usage

    usages = trial_usage(trials_frame(records)) if records else []
    return [_row(rec, known) for rec, known in zip(records, usages, strict=True)]


def _row(rec: TrialRecord, known: dict[str, Any]) -> list[Any]:
    """The table's row: the record's own numbers, which the page rounds for display as
    report.md does (rounded here first, a second rounding could move them: a score of
    0.134999 became 0.135, shown 0.14 against report.md's 0.13). `known`: the trial's
    turns, tool calls, tokens and cost, None when unknown (report/usage.py's
    `trial_usage`; the page and its trial panel show "—" and "unknown", never 0 or $0)."""
    tokens = None if known["input_tokens"] is None \
        else known["input_tokens"] + known["output_tokens"]
    failed = [c.id for c in failed_criteria(rec)]
    return [
        rec.trial_id, rec.variant_id, rec.task_id, rec.row_id,
        rec.repeat, rec.status, rec.weighted_score,
        known["turns"], known["tool_calls"], tokens,
        known["cost_usd"], rec.duration_s,
        rec.stopped_early, rec.early_stop_reason, failed,
        # an outage's ERROR (the model API was failing) is said as an error, also next to
        # the criteria it failed: it is the trial's reason, not a run limit's
        rec.suite_id, _short(rec.error_reason if rec.model_outage else rec.error, 300),
        rec.cost_unknown, None if rec.model_outage else run_limit_text(rec),
    ]


def _short(text: Any, limit: int) -> str | None:
    if text is None:
        return None
    s = str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def dumps(value: Any) -> str:
    """JSON safe inside a <script> element (no `<` at all, so no `</script>` or `<!--`);
    NaN and infinities become null (JSON has none)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=str)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"),
                          default=str)
    return (text.replace("<", "\\u003c").replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029"))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
