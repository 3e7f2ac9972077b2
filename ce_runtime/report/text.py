"""Plain-text formatting shared by the run.json exit reasons, report.md and JUnit: numbers
as the reports show them, and which criteria count as a trial's failures."""

from __future__ import annotations

from typing import Any

from ce_runtime.report.frames import EPSILON
from ce_runtime.store.record import NOT_FAILED_STATUSES, CriterionRecord, Status, TrialRecord


def fmt_metric(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def fmt_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def fmt_score(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def fmt_below(score: float | None, threshold: float | None, digits: int = 2) -> str:
    """`score < threshold` for a criterion that failed, with as many decimals as tell
    them apart: 2/3 against 0.6667 read `0.67 < 0.67` (`ce explain` says `0.66667 <
    0.6667`)."""
    return " < ".join(fmt_apart(score, threshold, digits))


def fmt_apart(score: float | None, threshold: float | None, digits: int = 2
              ) -> tuple[str, str]:
    """`fmt_below`'s two numbers (report.html shows them apart)."""
    if score is None or threshold is None or score == threshold:
        return fmt_score(score), fmt_score(threshold)
    for n in range(digits, 17):
        a, b = f"{score:.{n}f}", f"{threshold:.{n}f}"
        if a != b:
            return (_trim(a), _trim(b)) if n > digits else (a, b)
    return repr(score), repr(threshold)


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number


def fmt_tokens(tokens: dict[str, Any]) -> str:
    """A summary's `tokens`: new input and output, and the prompt cache's reads and writes
    when there were any (none in an older ce's run.json)."""
    text = f"{tokens.get('input') or 0:,} in / {tokens.get('output') or 0:,} out"
    read, write = tokens.get("cache_read") or 0, tokens.get("cache_write") or 0
    if read or write:
        text += f" / {read:,} cache read / {write:,} cache write"
    return text


def fmt_cost(v: float | None) -> str:
    return "—" if v is None else f"${v:.4f}"


def fmt_signed(v: float | None, pct: bool) -> str:
    if v is None:
        return "—"
    if abs(v) < EPSILON:
        return "±0.0 pp" if pct else "±0.00"
    return f"{100 * v:+.1f} pp" if pct else f"{v:+.2f}"


def fmt_p(p: float | None) -> str:
    """A p-value as report.md's paired statistics show it."""
    if p is None:
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_paired(r: Any) -> dict[str, str]:
    """A paired comparison's (report/stats.py's PairedComparison) cells as report.md's
    "Paired statistics" writes them, which report.html shows as they are: the means
    (`means`), Δ (`diff`), the interval's ends (`low`, `high`) and p; a pass rate in
    percent and percentage points, a score with 2 decimals; "—" over no shared task."""
    if not r.n_tasks:
        return dict.fromkeys(("means", "diff", "low", "high", "p"), "—")
    pct = r.metric == "pass_rate"
    fmt = fmt_pct if pct else fmt_score
    return {"means": f"{fmt(r.mean_a)} → {fmt(r.mean_b)}",
            "diff": fmt_signed(r.mean_diff, pct), "low": fmt_signed(r.ci_low, pct),
            "high": fmt_signed(r.ci_high, pct), "p": fmt_p(r.p_value)}


def gates_passed(gates: Any) -> str | None:
    """"1/2 suite gates passed": the suite gates with thresholds (report/gates.py's
    SuiteGate), as report.md's verdict line and report.html's header say it; None when
    no gate has a threshold."""
    thresholded = [g for g in gates if g.thresholds]
    if not thresholded:
        return None
    return f"{sum(g.passed for g in thresholded)}/{len(thresholded)} suite gates passed"


def paired_early_note(comparison: Any) -> str | None:
    """The note under the paired comparison when a paired task includes an early-stopped
    trial (summary's `comparison`, its `stopped_early_tasks`)."""
    early = sum(c.get("stopped_early_tasks") or 0 for c in comparison or ())
    if not early:
        return None
    return (f"{early} paired task(s) include an early-stopped trial: its score counts "
            "criteria that were advisory on a truncated run; compare them with care.")


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(round(seconds), 60)
    if m < 60:
        return f"{m}m {s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


def failed_criteria(rec: TrialRecord) -> list[CriterionRecord]:
    """Criteria that failed and counted, or failed with an error (advisory included)."""
    return [c for c in rec.criteria
            if not c.disabled and not c.passed and (c.gating or c.error)]


def run_limit_text(rec: TrialRecord, width: int = 80) -> str | None:
    """Which run limit ended a trial (TIMEOUT, MAX_TURNS_EXHAUSTED, a budget), as the
    agent's outcome says it ("stopped: task_timeout (2s)"); None for a trial that has
    an error of its own, or that no limit ended. Such a trial fails with every criterion
    passed: this is all a report can say of why."""
    outcome = rec.agent_outcome
    if rec.error or rec.status in (*NOT_FAILED_STATUSES, Status.FAILURE) or \
            outcome is None or not outcome.reason:
        return None
    detail = outcome.detail or ""
    if len(detail) > width:
        detail = detail[: width - 1] + "…"
    return outcome.reason + (f": {detail}" if detail else "")
