"""report.md: the run summary, per-variant trial tables, failures, suite gates and the
variant comparison, rendered for people from run.json, the records and the gates."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ce_runtime.report.frames import CLASSIFICATION, TURN_BUDGET_FACTOR, Records, trials_frame
from ce_runtime.report.gates import SuiteGate, no_cases_note
from ce_runtime.report.text import (
    failed_criteria,
    fmt_below,
    fmt_cost,
    fmt_duration,
    fmt_metric,
    fmt_paired,
    fmt_pct,
    fmt_score,
    fmt_signed,
    fmt_tokens,
    gates_passed,
    paired_early_note,
    run_limit_text,
)
from ce_runtime.report.usage import trial_usage
from ce_runtime.report.usage_text import variant_tables
from ce_runtime.safe_text import md_inline, one_line
from ce_runtime.store.record import (
    NOT_FAILED_STATUSES,
    CriterionRecord,
    Status,
    TrialRecord,
    as_records,
)


def _cell(text: Any, limit: int = 160) -> str:
    """One line of text an agent may have written (errors name its files): no HTML,
    no control character reaches the page (report.md is a CI job's summary)."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return md_inline(s)


def _cost(block: dict[str, Any], why: bool = False, none: str = "—") -> str:
    """A summary's cost: the sum over the trials whose cost is known (report/usage.py's
    rule, run.json's `cost_known_trials`), "over K of N trial(s)" when not all, `none`
    ("—"; "unknown" in a sentence) when none is (never $0); `why`: the trials whose model has no rate, and why. A block without
    the count (the judges') is the sum and its unpriced trials, as before."""
    unknown = block.get("cost_unknown")
    known = block.get("cost_known_trials")
    if known is None:
        text = fmt_cost(block["cost_usd"])
        if not unknown:
            return text
        text += f" + unknown for {unknown['trials']} trial(s)"
        return text + (": " + _cell("; ".join(unknown["why"]), 400) if why else "")
    text = fmt_cost(block["cost_usd"]) if known else none
    if known and known < block["trials"]:
        text += f" over {known} of {block['trials']} trial(s)"
    if why and unknown:
        text += f"; {unknown['trials']} unpriced: " + _cell("; ".join(unknown["why"]), 400)
    return text


def _tokens(block: dict[str, Any]) -> str:
    """A summary's tokens, as `_cost` says its cost: over the trials whose tokens are
    known (report/usage.py's rule, run.json's `tokens_known_trials`), "over K of N
    trial(s)" when not all, "—" when none is (never 0 in / 0 out); an older run.json
    without the count: the sums."""
    known = block.get("tokens_known_trials")
    if known == 0:
        return "—"
    text = fmt_tokens(block["tokens"])
    if known is not None and known < block["trials"]:
        text += f" over {known} of {block['trials']} trial(s)"
    return text


def _code(text: Any) -> str:
    s = one_line(str(text)).replace("`", "'")
    return f"`{s}`"


def _status_counts(by_status: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in by_status.items()) or "none"


def _turns_avoided(summary: dict[str, Any]) -> str:
    """", <= 27 turn(s) avoided": what the early stops saved at most (max_turns minus the
    turns taken), said of the trials that had a max_turns when not all had one."""
    saved = summary.get("turns_avoided")
    if not saved:
        return ""
    text = f", <= {saved['at_most']} turn(s) avoided"
    if saved["trials"] < summary["stopped_early"]:
        text += f" by the {saved['trials']} with a max_turns"
    return text


def _early_note(rec: TrialRecord) -> str:
    reason = rec.early_stop_reason or "armed criteria decided"
    advisory = [c for c in rec.criteria if c.advisory]
    remaining = rec.early_stop.turns_remaining_at_stop if rec.early_stop else None
    avoided = "" if remaining is None else f" <= {remaining} turn(s) avoided;"
    text = (f"> **NOTE:** {_code(rec.trial_id)} stopped early ({_cell(reason)});{avoided} "
            "it was gated on its armed criteria only")
    if advisory:
        text += "; advisory — not gated: " + ", ".join(
            f"{_code(c.id)} {c.type} {fmt_score(c.score)}"
            + ("" if c.passed else " (below its threshold)") for c in advisory)
    return text + "."


def render_markdown(summary: dict[str, Any], records: Records,
                    gates: Sequence[SuiteGate]) -> str:
    records = as_records(records)
    out: list[str] = []
    w = out.append
    ok = summary["exit_code"] == 0
    w(f"# ce run {_code(summary.get('run_id'))}")
    w("")
    args = summary.get("args")
    source = args.get("rescored_from") if isinstance(args, dict) else None
    if isinstance(source, str) and source:  # as report.html's headline says it
        w(f"Re-scored from {_code(source)}: its archived trials graded again, no agent run.")
        w("")
    if summary.get("experiment_ids"):
        w("Experiment " + ", ".join(_code(e) for e in summary["experiment_ids"]) + ".")
        w("")
    unfinished = summary.get("status") in ("interrupted", "incomplete")
    verdict = "✅ **PASSED**" if ok else \
        f"⚠️ **{summary['status'].upper()}**" if unfinished else "❌ **FAILED**"
    passed_gates = gates_passed(gates)
    gates_line = f"; {passed_gates}" if passed_gates else ""
    if summary.get("min_pass_rate") is not None:
        gates_line += (f"; at least {fmt_pct(summary['min_pass_rate'])} of each variant's "
                       "trials must succeed")
    # "graded" read as "reached grading": an ERROR trial counts here as a trial that did
    # not succeed; only NOT_GRADED ones are left out, and said
    ungraded = (summary.get("by_status") or {}).get(Status.NOT_GRADED, 0)
    left_out = f"; {ungraded} not graded, left out" if ungraded else ""
    w(f"{verdict} — {summary['passed']}/{summary['graded']} trials succeeded "
      f"({fmt_pct(summary['pass_rate'])}){left_out}{gates_line}.")
    if not ok and summary.get("exit_reasons"):
        w("")
        for reason in summary["exit_reasons"]:
            w(f"- {reason}")
    w("")
    w("| Run | |")
    w("|---|---|")
    w(f"| Trials | {summary['trials']} ({_status_counts(summary['by_status'])}) |")
    ci = summary.get("pass_rate_ci95")
    ci_text = f" (95% CI {fmt_pct(ci[0])}–{fmt_pct(ci[1])})" if ci else ""
    w(f"| Pass rate | {fmt_pct(summary['pass_rate'])}{ci_text} |")
    w(f"| Mean score | {fmt_score(summary['mean_score'])}{_unscored(summary)} |")
    pak = summary["pass_at_k"]
    if pak["tasks"] and (pak["k_range"] or [1, 1])[1] > 1:
        lo, hi = pak["k_range"]
        k = f"pass@{hi}" if lo == hi else f"pass@k (k = {lo}–{hi} repeats)"
        # counted per (variant, task): one task run under two variants is two
        what = "tasks" if len(summary["variants"]) <= 1 else "tasks × variants"
        w(f"| {k} | {pak['passed']}/{pak['tasks']} {what} ({fmt_pct(pak['rate'])}); "
          f"every repeat passed: {pak['passed_all']}/{pak['tasks']} |")
    wet = summary["within_expected_turns"]
    if wet["budgeted"]:
        w(f"| Within expected turns | {wet['within']}/{wet['budgeted']} budgeted trials "
          f"({fmt_pct(wet['share'])}) |")
    if summary["stopped_early"]:
        w(f"| Stopped early | {summary['stopped_early']} trial(s){_turns_avoided(summary)} |")
    again = summary.get("retried")  # run.json's, from `ce run --retry-errors`
    if isinstance(again, dict) and again.get("trials"):
        w(f"| Ran again after an ERROR | {again['trials']} trial(s) (--retry-errors; the "
          f"latest attempt counts), {again.get('earlier_attempts', 0)} earlier attempt(s) "
          "kept in `attempts/` |")
    w(f"| Tokens | {_tokens(summary)} |")
    w(f"| Cost | {_cost(summary, why=True)} |")
    judges = summary.get("judges")
    if judges:
        w(f"| Judge tokens | {judges['input_tokens']:,} in / {judges['output_tokens']:,} out"
          f" / {judges['cache_read_tokens']:,} cache read / {judges['cache_write_tokens']:,}"
          f" cache write ({_judge_calls(judges)}, {judges['recorded']} reused from the"
          " cache) |")
        w(f"| Judge cost | {_cost(judges, why=True)} (not in the agent's cost) |")
    # each trial's duration_s runs from its set-up to its grading, not the agent's turn
    w(f"| Trial time | {fmt_duration(summary['duration_s'])} (sum over trials, set-up and "
      "grading included) |")
    w("")

    variants = list(summary["variants"])
    by_variant: dict[str, list[TrialRecord]] = {v: [] for v in variants}
    for rec in records:
        by_variant.setdefault(rec.variant_id, []).append(rec)
    budgeted = any(rec.expected_turns is not None for rec in records)
    # each trial's turns, tokens and cost, None where unknown (report/usage.py's rule,
    # as the totals)
    usages = dict(zip((rec.trial_id for rec in records),
                      trial_usage(trials_frame(records)) if records else (), strict=True))
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
          + f"{vs['passed']}/{vs['graded']} succeeded ({fmt_pct(vs['pass_rate'])}), mean score "
          f"{fmt_score(vs['mean_score'])}, cost {_cost(vs, none='unknown')}"
          + (f", judges {_cost(vs['judges'])}" if vs.get("judges") else "") + ".")
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
            w("| " + " | ".join(_trial_cells(rec, budgeted, usages[rec.trial_id])) + " |")
            if rec.stopped_early:
                notes_after.append(_early_note(rec))
        w("")
        if budgeted:
            w(f"Budget: visible turns (tool calls + 1) / expected_turns; ✓ when the trial "
              f"succeeded within {TURN_BUDGET_FACTOR:g}× the budget.")
            w("")
        for note in notes_after:
            w(note)
            w("")

    # a run limit (TIMEOUT, MAX_TURNS_EXHAUSTED, ...) fails a trial whose criteria pass:
    # listed too, with how the agent ended, or the report said nothing of why it failed
    failing = [rec for rec in records if failed_criteria(rec) or rec.error
               or rec.status not in NOT_FAILED_STATUSES]
    if failing:
        w("## Failures")
        w("")
        w("RUN is this report's directory; `ce explain RUN/TRIAL` re-grades a trial from its "
          "archive and shows why each criterion scored as it did.")
        w("")
        for rec in failing:
            w(f"### {_code(rec.trial_id)} — {rec.status} "
              f"(score {fmt_score(rec.weighted_score)})")
            w("")
            if rec.error:
                w(f"- **trial error:** {_cell(rec.error, 400)}")
            outcome = rec.agent_outcome
            if rec.status not in (Status.SUCCESS, Status.FAILURE) and outcome is not None \
                    and outcome.reason:
                detail = f": {_cell(outcome.detail, 200)}" if outcome.detail else ""
                w(f"- agent ended: {_cell(outcome.reason)}{detail}")
            for c in failed_criteria(rec):
                w(_criterion_line(c))
            w(f"- why: `ce explain {os.path.join('RUN', str(rec.trial_id))}`")
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
            descriptions = _row_descriptions(records)
            for g in score_gates:
                about = descriptions.get((g.variant, g.suite_id, g.criterion), g.description)
                n = f"{g.n} (+{g.missing} missing)" if g.missing else str(g.n)
                limits = ", ".join(_limit_text(g, m, t) for m, t in g.thresholds.items()) \
                    or "—"
                w(f"| {_code(g.variant)} | {_code(g.suite_id)} | "
                  f"{_code(g.criterion)} {_cell(g.criterion_type or '')}: "
                  f"{_cell(about or '', 120)} | {n} | "
                  f"{fmt_pct(g.metrics.get('pass_rate'))} | "
                  f"{fmt_score(g.metrics.get('mean_score'))} | {limits} | "
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
            ci_text = f"{fmt_pct(ci[0])}–{fmt_pct(ci[1])}" if ci else "—"
            vpak = vs["pass_at_k"]
            w(f"| {_code(v)} | {vs['trials']} | {fmt_pct(vs['pass_rate'])} | {ci_text} | "
              f"{fmt_score(vs['mean_score'])} | {vpak['passed']}/{vpak['tasks']} | "
              f"{_cost(vs)} |")
        w("")
        w("Paired over the tasks both variants ran (per task: success rate and mean score "
          "over its repeats; a task is better or worse on its success rate, then its score):")
        w("")
        w("| Variant | Shared tasks | Pass rate | Δ pass rate | Mean score | Δ mean score "
          "| Better / worse / same |")
        w("|---|---:|---:|---:|---:|---:|---|")
        for c in comparison:
            rate = (f"{fmt_pct(c['baseline_pass_rate'])} → {fmt_pct(c['pass_rate'])}"
                    if c["shared_tasks"] else "—")
            score = (f"{fmt_score(c['baseline_mean_score'])} → {fmt_score(c['mean_score'])}"
                     if c["shared_tasks"] else "—")
            w(f"| {_code(c['variant'])} | {c['shared_tasks']} | {rate} | "
              f"{fmt_signed(c['pass_rate_diff'], True)} | {score} | "
              f"{fmt_signed(c['mean_score_diff'], False)} | "
              f"{c['better']} / {c['worse']} / {c['same']} |")
        w("")
        _render_usage(w, summary)
        _render_paired_stats(w, comparison, records)
        early = paired_early_note(comparison)
        if early:
            w(f"> **NOTE:** {early}")
            w("")
    return "\n".join(out).rstrip() + "\n"


def _row_descriptions(records: Sequence[TrialRecord]) -> dict[tuple, str]:
    """A suite gate's description from its rows' own: the one they share, or each distinct
    one (a `${row.x}` description differs per row; the first row's is no one else's)."""
    seen: dict[tuple, list[str]] = {}
    for rec in records:
        for c in rec.criteria:
            if rec.suite_id and c.description:
                texts = seen.setdefault((rec.variant_id, rec.suite_id, c.id), [])
                if c.description not in texts:
                    texts.append(c.description)
    out = {}
    for key, texts in seen.items():
        if len(texts) == 1:
            out[key] = texts[0]
        else:
            shown = "; ".join(texts[:3]) + ("; …" if len(texts) > 3 else "")
            out[key] = f"per row ({len(texts)} descriptions): {shown}"
    return out


def _limit_text(g: SuiteGate, metric: str, minimum: float) -> str:
    """A score gate's threshold; a failed one with its value, as the table's columns
    show only pass rate and mean score ("std 0.471 < 0.5 ✗")."""
    if metric not in g.failed:
        return f"{metric} ≥ {minimum:g}"
    return f"{metric} {fmt_metric(g.metrics.get(metric))} < {minimum:g} ✗"


def _gate_word(g: SuiteGate) -> str:
    if not g.thresholds:
        return "no thresholds"
    return "✅ passed" if g.passed else "❌ failed"


def _trial_cells(rec: TrialRecord, budgeted: bool, known: dict[str, Any]) -> list[str]:
    """The trial's row; `known` its turns and cost (report/usage.py's `trial_usage`),
    None when unknown ("—", never 0 or $0)."""
    usage = rec.usage
    status = rec.status or "?"
    mark = {Status.SUCCESS: "✅", Status.NOT_GRADED: "➖"}.get(status, "❌")
    turns = known["turns"]
    cells = [_code(rec.task_id), str(rec.repeat), f"{mark} {status}",
             fmt_score(rec.weighted_score), "—" if turns is None else str(turns)]
    if budgeted:
        expected = rec.expected_turns
        if expected is None:
            cells.append("—")
        else:
            visible = usage.tool_calls + 1
            within = rec.status == Status.SUCCESS and visible <= TURN_BUDGET_FACTOR * expected
            cells.append(f"{visible}/{expected} {'✓' if within else '✗'}")
    cells.append(fmt_cost(known["cost_usd"]))
    notes = []
    if rec.stopped_early:
        notes.append(f"stopped early ({_cell(rec.early_stop_reason or 'decided')})")
    failures = failed_criteria(rec)
    if failures:
        notes.append("failed: " + ", ".join(_code(c.id) for c in failures))
    if rec.error:
        notes.append("error: " + _cell(rec.error, 80))
    elif (limit := run_limit_text(rec)) is not None:  # a run limit: which
        notes.append(_cell(limit, 100))
    cells.append("; ".join(notes))
    return cells


def _criterion_line(c: CriterionRecord) -> str:
    parts = [f"- {_code(c.id)} {c.type}"]
    if c.description:
        parts.append(f" — {_cell(c.description, 120)}")
    parts.append(f": score {fmt_below(c.score, c.pass_threshold)}")
    outputs = c.outputs
    if "observed" in outputs or "expected" in outputs:
        parts.append(f" (observed {_code(outputs.get('observed'))}, expected "
                     f"{_code(outputs.get('expected'))})")
    if not c.gating:
        parts.append(" *(advisory — not gated)*" if c.advisory else " *(not gated)*")
    if c.error:
        parts.append(f"\n  - error: {_cell(c.error, 400)}")
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
        note = no_cases_note(g, m) if m in g.failed else ""
        verdict += f" ({_cell(note)})" if note else ""
        w(f"| {m} | {fmt_metric(g.metrics.get(m))} | "
          f"{'—' if limit is None else f'{limit:g}'} | {verdict} |")
    w("")
    if g.labels:
        w("| Label | Precision | Recall | F1 | Support |")
        w("|---|---:|---:|---:|---:|")
        for lab in g.labels:
            w(f"| {_cell(lab)} | {fmt_metric(g.metrics.get(f'precision.{lab}'))} | "
              f"{fmt_metric(g.metrics.get(f'recall.{lab}'))} | "
              f"{fmt_metric(g.metrics.get(f'f1.{lab}'))} | {g.support.get(lab, 0)} |")
        w("")
        w("Confusion matrix (rows: expected, columns: observed):")
        w("")
        w("| expected \\ observed | " + " | ".join(_cell(lab) for lab in g.labels) + " |")
        w("|---|" + "---:|" * len(g.labels))
        for lab, row in zip(g.labels, g.confusion, strict=True):
            w(f"| **{_cell(lab)}** | " + " | ".join(str(n) for n in row) + " |")
        w("")


# ---------------------------------------------------------------------------- A/B statistics


def _render_paired_stats(w, comparison: Sequence[dict[str, Any]],
                         records: Sequence[TrialRecord]) -> None:
    """Each variant against the baseline (ce_runtime/report/stats.py): the paired mean
    difference with its bootstrap interval, the sign-flip test's p-value, wins / losses
    / ties and the most divergent tasks."""
    from ce_runtime.report.stats import paired_comparison

    trials = trials_frame(records)
    rows = []
    for c in comparison:
        for metric in ("pass_rate", "score"):
            rows.append(paired_comparison(trials, c["baseline"], c["variant"], metric=metric))
    if not any(r.n_tasks for r in rows):
        return
    w("### Paired statistics")
    w("")
    used = " or ".join(str(n) for n in sorted({r.resamples for r in rows if r.n_tasks}))
    w(f"Per task, the pass rate or the mean score over its repeats; Δ = variant − "
      f"{_code(comparison[0]['baseline'])} over the tasks both graded, with a 95% paired "
      f"bootstrap interval ({used} resamples, seed 0); p: two-sided sign-flip "
      "permutation test (exact; *MC*: Monte Carlo); wins / losses / ties: tasks where the "
      "variant is above / below / level with the baseline.")
    w("")
    w("| Variant | Metric | Tasks | Baseline → variant | Δ | 95% CI | p | "
      "Wins / losses / ties |")
    w("|---|---|---:|---|---:|---|---:|---|")
    for r in rows:
        if not r.n_tasks:
            w(f"| {_code(r.variant_b)} | {r.metric.replace('_', ' ')} | 0 | — | — | — | — "
              "| — |")
            continue
        # the cells report.html's paired table shows too (report/text.py's fmt_paired)
        cell = fmt_paired(r)
        p = cell["p"] + (" *MC*" if r.test == "monte-carlo" else "")
        w(f"| {_code(r.variant_b)} | {r.metric.replace('_', ' ')} | {r.n_tasks} | "
          f"{cell['means']} | {cell['diff']} | {cell['low']} to {cell['high']} | {p} | "
          f"{r.wins} / {r.losses} / {r.ties} |")
    w("")
    divergent = [r for r in rows if r.metric == "score" and r.most_divergent]
    if divergent:
        w("Most divergent tasks (mean score, baseline → variant):")
        w("")
        for r in divergent:
            w(f"- {_code(r.variant_b)}: " + "; ".join(
                f"{_code(task)} {fmt_score(a)} → {fmt_score(b)} ({fmt_signed(b - a, False)})"
                for task, a, b in r.most_divergent))
        w("")


def _render_usage(w, summary: dict[str, Any]) -> None:
    """What a trial of each variant cost, and each against the baseline
    (report/usage_text.py, whose cells report.html shows too)."""
    tables = variant_tables(summary)
    if not tables:
        return
    w("### Usage per trial")
    w("")
    for title, head, rows in tables:
        w(title + ":")
        w("")
        w("| " + " | ".join(head) + " |")
        w("|---|" + "---:|" * (len(head) - 1))
        for r in rows:
            w("| " + " | ".join([_code(r[0]), *r[1:]]) + " |")
        w("")


def _judge_calls(judges: dict[str, Any]) -> str:
    """"2 llm_judge verdict(s), 1 agent_judge session(s)": each kind that was called
    (a run.json from before sessions were counted has none)."""
    sessions = int(judges.get("agent_sessions") or 0)
    calls = int(judges["calls"]) - sessions
    parts = [f"{calls} llm_judge verdict(s)"] if calls or not sessions else []
    return ", ".join(parts + ([f"{sessions} agent_judge session(s)"] if sessions else []))


def _unscored(summary: dict) -> str:
    """The graded trials the mean score leaves out (no score: an ERROR before grading),
    said beside it: a mean of 1.00 over 3 of 4 graded trials is not a perfect run."""
    n = summary.get("unscored")
    return f" (over {summary['graded'] - n} of {summary['graded']} graded trials: " \
        f"{n} without a score)" if n else ""
