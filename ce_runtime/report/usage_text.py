"""Usage per trial (report/usage.py) as text: the cells `ce compare` (md, html) and
report.md / report.html's variant comparison show, made here once so that the outputs
cannot drift apart. An unknown value is "—", never 0."""

from __future__ import annotations

from typing import Any

import msgspec

from ce_runtime.report.text import fmt_cost, fmt_duration
from ce_runtime.report.usage import METRICS, NAMES, UsageComparison

# a title, a header and rows of cells already formatted (compare_render's Table)
Table = tuple[str, list[str], list[list[str]]]
_SHORT = {"turns": "turns", "tool_calls": "tool calls", "input_tokens": "input tokens",
          "output_tokens": "output tokens", "cost_usd": "cost", "duration_s": "wall time"}
LABELS = dict(METRICS)


def fmt_value(metric: str, v: float | None) -> str:
    """A per-trial mean or median: turns and tool calls to 0.1, tokens whole, USD as the
    reports show a cost, wall time as a duration."""
    if v is None:
        return "—"
    if metric == "cost_usd":
        return fmt_cost(v)
    if metric == "duration_s":  # a trial of a second or less keeps its hundredths
        return f"{v:.2f}s" if v < 1 else fmt_duration(v)
    if metric in ("input_tokens", "output_tokens"):
        return f"{v:,.0f}"
    return f"{v:,.1f}"


def fmt_ratio(ratio: float | None, paired: int = 1) -> str:
    """B's mean over A's: '×0.60 (-40.0%)'; '—' with no trial known in both, 'n/a (A
    is 0)' when A's mean is 0 and B's is not."""
    if not paired:
        return "—"
    if ratio is None:
        return "n/a (A is 0)"
    return f"×{ratio:.2f} ({100 * (ratio - 1):+.1f}%)".replace("(+0.0%)", "(±0.0%)") \
        .replace("(-0.0%)", "(±0.0%)")


def _mean_median(side: dict[str, Any], metric: str) -> str:
    """'4.5 (4.0)': the mean (the median) of a SideUsage's fields; '—' when unknown for
    every trial."""
    if not side["n"]:
        return "—"
    return f"{fmt_value(metric, side['mean'])} ({fmt_value(metric, side['median'])})"


# ---------------------------------------------------------------------------- ce compare


def compare_line(u: UsageComparison) -> str:
    """The summary's one line: per metric, A's mean → B's and B ÷ A, over the trials
    known in both ('over 2 of 6' when not every matched trial; each side's own mean when
    no trial is known in both)."""
    parts = []
    for c in u.metrics:
        if not c.paired:
            parts.append(f"{_SHORT[c.metric]} {fmt_value(c.metric, c.a.mean)} → "
                         f"{fmt_value(c.metric, c.b.mean)}")
            continue
        text = f"{_SHORT[c.metric]} {fmt_value(c.metric, c.paired_a)} → " \
               f"{fmt_value(c.metric, c.paired_b)} {fmt_ratio(c.ratio, c.paired)}"
        parts.append(text + (f" over {c.paired} of {u.trials}" if c.paired < u.trials
                             else ""))
    return "; ".join(parts)


def compare_table(u: UsageComparison) -> Table:
    """A row per metric: each run's mean and median over its trials with the value
    known, B ÷ A over the trials known in both (with those means when they are not all
    of either side's), and for how many trials each is known."""
    rows = []
    for c in u.metrics:
        ratio = fmt_ratio(c.ratio, c.paired)
        if c.paired and (c.paired < c.a.n or c.paired < c.b.n):
            ratio += (f" over the {c.paired} known in both ({fmt_value(c.metric, c.paired_a)}"
                      f" → {fmt_value(c.metric, c.paired_b)})")
        rows.append([LABELS[c.metric], _mean_median(msgspec.structs.asdict(c.a), c.metric),
                     _mean_median(msgspec.structs.asdict(c.b), c.metric), ratio,
                     f"{c.a.n} / {c.b.n} / {c.paired}"])
    return (f"Usage per trial (over {covered(u)}; "
            "— unknown: not measured, never 0; B ÷ A over the trials known in both; "
            "informs, not gated)",
            ["Per trial", "A mean (median)", "B mean (median)", "B ÷ A",
             "Known in A / B / both"], rows)


def covered(u: UsageComparison) -> str:
    """The trials the means are over: 'the 5 matched trial(s) both runs graded', and
    the ERROR trials among them (graded is any status but NOT_GRADED, so an ERROR that
    never reached grading is one): '... graded or ended in an ERROR (A's 1 ERROR
    trial(s), 1 of which never reached grading)'."""
    text = f"the {u.trials} matched trial(s) both runs graded"
    errors = [f"{side}'s {n} ERROR trial(s)" + (f", {k} of which never reached grading"
                                                 if k else "")
              for side, n, k in (("A", u.errors_a, u.before_grading_a),
                                 ("B", u.errors_b, u.before_grading_b)) if n]
    return text + (f" or ended in an ERROR ({'; '.join(errors)})" if errors else "")


# ---------------------------------------------------------------------------- report.md


def variant_tables(summary: dict[str, Any]) -> list[Table]:
    """report.md's and report.html's: each variant's usage per trial, and each against
    the baseline (the comparison's `per_trial`); none for a run.json without them."""
    variants = summary.get("variants") or {}
    comparison = summary.get("comparison") or []
    if not comparison or not all(v.get("per_trial") for v in variants.values()):
        return []
    counted = all("errors" in v["per_trial"] for v in variants.values())
    head = ["Variant", *(["Trials"] if counted else []), *(LABELS[m] for m in NAMES)]
    rows = []
    for name, v in variants.items():
        graded = v.get("graded") or 0
        pt = v["per_trial"]
        cells = [_trials_cell(pt["trials"], [("", pt["errors"], pt["before_grading"])])] \
            if counted else []
        for m in NAMES:
            side = v["per_trial"][m]
            cell = _mean_median(side, m)
            if side["n"] and side["n"] < graded:
                cell += f", known for {side['n']} of {graded}"
            cells.append(cell)
        rows.append([name, *cells])
    # graded is any status but NOT_GRADED: an ERROR trial is one, so the means are over
    # the ERROR trials too, said under Trials (a run.json from before they were counted
    # has no such column)
    over = (": any status but NOT_GRADED, so the ERROR ones too (Trials: how many, how "
            "many of them ERROR and how many never reached grading)") if counted else ""
    out: list[Table] = [(f"Mean (median) per trial, over each variant's graded trials{over}; "
                         "— unknown: not measured, never 0", head, rows)]
    change_rows = []
    for c in comparison:
        pt = c.get("per_trial")
        if not pt:
            continue
        paired = _trials_cell(pt["trials"], [
            ("baseline: ", pt["baseline_errors"], pt["baseline_before_grading"]),
            ("variant: ", pt["errors"], pt["before_grading"])]) \
            if "errors" in pt else str(pt["trials"])
        change_rows.append([c["variant"], paired,
                            *(fmt_ratio(pt[m]["ratio"], pt[m]["paired"])
                              + ("" if pt[m]["paired"] in (0, pt["trials"])
                                 else f" over {pt[m]['paired']}") for m in NAMES)])
    out.append(("Against the baseline: variant ÷ baseline of the mean per trial, over "
                "the trials both graded (same task, row and repeat"
                + ("; the ERROR ones too: Paired trials says how many, of which side, and "
                   "how many never reached grading" if counted else "")
                + ") with the value known in both", ["Variant", "Paired trials",
                                                     *(LABELS[m] for m in NAMES)],
                change_rows))
    return out


def _trials_cell(trials: int, errors: list[tuple[str, int, int]]) -> str:
    """'12', '12 (2 ERROR)' or '12 (2 ERROR, 1 never reached grading)': how many trials
    a mean is over and the ERROR ones among them (`errors`: whose, how many ERROR and how
    many of those never reached grading); a pair's: '12 (baseline: 2 ERROR, 2 never
    reached grading; variant: 1 ERROR)'."""
    said = [f"{who}{n} ERROR" + (f", {k} never reached grading" if k else "")
            for who, n, k in errors if n]
    return f"{trials} ({'; '.join(said)})" if said else str(trials)
