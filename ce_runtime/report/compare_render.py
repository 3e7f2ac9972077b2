"""`ce compare` output: a RunComparison (ce_runtime/report/compare.py) as markdown, JSON or
one self-contained HTML page (inline CSS, no script, nothing fetched; its only links go to
the runs' own report.html, by a path relative to the page)."""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from ce_runtime.report.compare import RunComparison, RunSide, TrialFlip
from ce_runtime.report.frames import EPSILON
from ce_runtime.report.stats import PairedComparison
from ce_runtime.report.text import fmt_metric, fmt_pct, fmt_score, fmt_signed
from ce_runtime.report.usage_text import compare_line, compare_table
from ce_runtime.safe_text import md_inline

COMPARE_SCHEMA_VERSION = 1

# A table is a title, a header and rows of cells already formatted as text; `md` and
# `html` render the same tables, so the two outputs cannot drift apart.
Table = tuple[str, list[str], list[list[str]]]


def render_json(c: RunComparison, fail_on: str) -> str:
    doc = {"schema_version": COMPARE_SCHEMA_VERSION, **c.to_dict(fail_on)}
    return json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _fmt_p(p: float | None) -> str:
    """`p = 0.031`, `p < 0.001`."""
    if p is None:
        return "p = —"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _delta(p: PairedComparison, pct: bool) -> str:
    if not p.n_tasks:
        return "— (no task graded in both)"
    mc = ", Monte Carlo" if p.test == "monte-carlo" else ""
    return (f"{fmt_signed(p.mean_diff, pct)} (95% CI {fmt_signed(p.ci_low, pct)} to "
            f"{fmt_signed(p.ci_high, pct)}; {_fmt_p(p.p_value)}{mc}; "
            f"{p.n_tasks} paired task(s): {p.wins} up, {p.losses} down, {p.ties} level)")


def _rate(side: RunSide) -> str:
    ci = side.pass_rate_ci95
    text = f"{fmt_pct(side.pass_rate)} ({side.passed}/{side.graded})"
    return text + (f", 95% CI {fmt_pct(ci[0])}–{fmt_pct(ci[1])}" if ci else "")


def verdict(c: RunComparison, fail_on: str) -> tuple[bool, str]:
    """(regressed, one line) as the page and the command's last line say it."""
    baseline = [f"A (the baseline) did not finish: {c.a.state()}"] if c.a.unfinished else []
    if c.regressed(fail_on):
        head = "NOT COMPARED" if c.nothing_compared else \
            "REGRESSED" if c.dropped(fail_on) else "INCOMPLETE"
        return True, f"{head}: " + "; ".join(c.reasons(fail_on) + baseline)
    notes = []
    if c.regressions:
        notes.append(f"{len(c.regressions)} trial(s) flipped to failure (not gated: "
                     f"--fail-on {fail_on})")
    if c.gate_regressions:  # under --fail-on never
        notes.append(f"{len(c.gate_regressions)} suite gate(s) passed in A and fail in B "
                     f"(not gated: --fail-on {fail_on})")
    if c.improvements:
        notes.append(f"{len(c.improvements)} trial(s) fixed")
    fixed = [g for g in c.gates if g.fixed]
    if fixed:
        notes.append(f"{len(fixed)} suite gate(s) fixed")
    if c.incomplete:  # said, never silently passed
        notes.append(f"INCOMPLETE, not gated (--fail-on {fail_on}): "
                     + ", and ".join(c.incomplete_reasons()))
    notes += baseline
    return False, "no regression" + (": " + "; ".join(notes) if notes else "")


def _status(c: RunComparison) -> str | None:
    """Each run's status, when one of them did not finish (run.json)."""
    if not (c.a.unfinished or c.b.unfinished):
        return None
    return "; ".join(f"{name} {side.state() or side.status or 'not recorded'}"
                     for name, side in (("A", c.a), ("B", c.b)))


def _errors(side: RunSide) -> str:
    return f" ({side.errors} ERROR)" if side.errors else ""


def _mean_score(side: RunSide) -> str:
    """The mean score, and the graded trials it leaves out (no score: an ERROR before
    grading) as report.md says them: a mean of 1.00 over 2 of 4 trials is no better run."""
    text = fmt_score(side.mean_score)
    if side.unscored:
        text += (f" (over {side.graded - side.unscored} of {side.graded} graded trials: "
                 f"{side.unscored} without a score)")
    return text


def _power(c: RunComparison, fail_on: str) -> str | None:
    """Said when too few tasks are paired for any drop to be significant: the exact
    sign-flip p over n tasks is at least 2 / 2^n (0.0625 for 5), so the rule's
    significant-drop part cannot fire (a 3-task A/B gated on it passed whatever B did)."""
    n = c.pass_rate.n_tasks
    if fail_on == "never" or not n or 2 / 2 ** n < c.alpha:
        return None
    return (f"with {n} paired task(s) no pass-rate drop can reach p < {c.alpha:g} (the "
            f"smallest possible p is {2 / 2 ** n:.3g}): the significant-drop rule cannot fire")


def _trials(c: RunComparison) -> str:
    text = (f"A {c.a.trials}{_errors(c.a)}, B {c.b.trials}{_errors(c.b)}; "
            f"{c.matched_trials} matched (same variant, task, row and repeat)")
    for ids, mine, other in ((c.unmatched_a, "A", "B"), (c.unmatched_b, "B", "A")):
        if ids:
            text += f"; {len(ids)} of {mine}'s without a match in {other} (a task both ran)"
    return text


def _flip_rows(flips: tuple[TrialFlip, ...]) -> list[list[str]]:
    return [[f.trial_id, f"{f.status_a} → {f.status_b}",
             f"{fmt_score(f.score_a)} → {fmt_score(f.score_b)}",
             ", ".join(x.label for x in f.criteria) or "—"]
            for f in flips]


def tables(c: RunComparison, fail_on: str) -> tuple[list[tuple[str, str]], list[Table]]:
    """(the summary as label/value pairs, the detail tables)."""
    _, line = verdict(c, fail_on)
    status = _status(c)
    summary = [
        ("Verdict", line),
        *([("Run status", status)] if status else []),
        ("Regression rule", _rule(fail_on, c.alpha)),
        ("A", f"{c.a.run_id} ({c.a.path})"),
        ("B", f"{c.b.run_id} ({c.b.path})"),
        ("Trials", _trials(c)),
        ("Pass rate", f"A {_rate(c.a)}; B {_rate(c.b)}"),
        ("Δ pass rate (B − A)", _delta(c.pass_rate, True)),
        *([("Significance", power)] if (power := _power(c, fail_on)) else []),
        ("Mean score", f"A {_mean_score(c.a)}; B {_mean_score(c.b)}"),
        ("Δ mean score (B − A)", _delta(c.score, False)),
        ("Flips", f"{len(c.regressions)} trial(s) pass → fail, {len(c.improvements)} fail "
                  f"→ pass; {len(c.criterion_changes)} other criterion flip(s)"),
        *([("Suite gates", _gates_line(c))] if c.gates else []),
        *([("Usage per trial (mean A → B, B ÷ A)", compare_line(c.usage))]
          if c.usage else []),
    ]
    head = ["Trial", "Status A → B", "Score A → B", "Criteria"]
    out: list[Table] = [
        ("Regressions: passed in A, fail in B", head, _flip_rows(c.regressions)),
        ("Improvements: failed in A, pass in B", head, _flip_rows(c.improvements)),
        ("Criteria that flipped in trials whose outcome did not",
         ["Trial", "Criterion", "Gating", "Passed A → B", "Score A → B"],
         [[ch.trial_id, ch.criterion.label
           + (f": {ch.criterion.description}" if ch.criterion.description else ""),
           "yes" if ch.criterion.gating else "no",
           "yes → no" if ch.broken else "no → yes",
           f"{fmt_score(ch.criterion.score_a)} → {fmt_score(ch.criterion.score_b)}"]
          for ch in c.criterion_changes]),
    ]
    if c.gates:  # a run of no dataset suite has none: no section
        out.append(("Suite gates (dataset suite_thresholds; passed in A and failing in B: a "
                    "regression)", ["Gate", "Verdict A → B", "Metric", "A", "B", "Δ",
                                    "Minimum"], _gate_rows(c)))
    if c.usage:
        out.append(compare_table(c.usage))
    if c.by_variant:
        out.append(("By variant", ["Variant", "Δ pass rate", "Δ mean score"],
                    [[v, _delta(r, True), _delta(s, False)] for v, r, s in c.by_variant]))
    changed = [t for t in c.tasks  # a score known in one run only changed too
               if abs(t.rate_diff or 0.0) > 1e-9 or abs(t.score_diff or 0.0) > 1e-9
               or (t.score_a is None) != (t.score_b is None)]
    rows = []
    for t in changed:
        ci = t.rate_diff_ci95
        rows.append([t.variant_id, t.task_id, f"{t.trials_a} / {t.trials_b}",
                     f"{fmt_pct(t.rate_a)} → {fmt_pct(t.rate_b)}",
                     fmt_signed(t.rate_diff, True),
                     f"{fmt_signed(ci[0], True)} to {fmt_signed(ci[1], True)}" if ci else "—",
                     f"{fmt_score(t.score_a)} → {fmt_score(t.score_b)}",
                     fmt_signed(t.score_diff, False)])
    unchanged = len(c.tasks) - len(changed)
    out.append((f"Tasks that changed ({unchanged} of {len(c.tasks)} shared task(s) "
                "unchanged; Δ pass rate with Newcombe's 95% interval)",
                ["Variant", "Task", "Trials A / B", "Pass rate A → B", "Δ", "95% CI",
                 "Score A → B", "Δ score"], rows))
    out.append(("Tasks only in A (not compared)", ["Task"], [[t] for t in c.only_a]))
    out.append(("Tasks only in B (not compared)", ["Task"], [[t] for t in c.only_b]))
    for ids, mine, other in ((c.unmatched_a, "A", "B"), (c.unmatched_b, "B", "A")):
        if ids:  # a repeat one run did not run, a trial lost from it
            out.append((f"Trials only in {mine}, of a task both ran (no match in {other}; "
                        "not compared)", ["Trial"], [[t] for t in ids]))
    return summary, out


def _gates_line(c: RunComparison) -> str:
    both = [g for g in c.gates if g.verdict_a is not None and g.verdict_b is not None]
    text = (f"{len(both)} in both runs: {len(c.gate_regressions)} passed → failed, "
            f"{sum(g.fixed for g in c.gates)} failed → passed")
    for side, n in (("A", sum(g.verdict_b is None for g in c.gates)),
                    ("B", sum(g.verdict_a is None for g in c.gates))):
        text += f"; {n} only in {side}" if n else ""
    return text


def _gate_rows(c: RunComparison) -> list[list[str]]:
    """A row per metric of each gate; the gate and its verdicts on its first."""
    rows = []
    for g in c.gates:
        was, now = (v or f"not in {side}" for v, side in ((g.verdict_a, "A"),
                                                           (g.verdict_b, "B")))
        verdict = f"{was} → {now}" + (" ✗" if g.regressed else " ✓" if g.fixed else "")
        name = g.name + (f" {g.criterion_type}" if g.criterion_type else "")
        for i, m in enumerate(g.metrics):
            minimum = "—" if m.minimum is None else f"{m.minimum:g}" + (
                " ✗" if m.failed_b else " ✓" if g.verdict_b is not None else "")
            rows.append([name if i == 0 else "", verdict if i == 0 else "", m.metric,
                         fmt_metric(m.a), fmt_metric(m.b), _signed(m.diff), minimum])
    return rows


def _signed(v: float | None) -> str:
    """B - A of a metric, as fmt_metric shows each (3 decimals)."""
    if v is None:
        return "—"
    return "±0.000" if abs(v) < EPSILON else f"{v:+.3f}"


def _rule(fail_on: str, alpha: float) -> str:
    sig = (f"a significant pass-rate drop (paired over shared tasks, sign-flip p < "
           f"{alpha:g})")
    gate = "a suite gate that passed in A and fails in B"
    return {"flips": f"--fail-on flips: any trial that passed in A and fails in B, {gate}, "
                     f"or {sig}",
            "significant": f"--fail-on significant: {sig}, or {gate}",
            "never": "--fail-on never: report only"}[fail_on]


# ---------------------------------------------------------------------------- markdown


def _md_cell(text: str) -> str:
    """A cell as report.md writes one (safe_text.md_inline): what the runs hold (trial
    ids, criterion descriptions, paths) is shown as written, never rendered (a `<img
    ...>`, a `[x](url)`) nor acted on (an escape sequence), on a CI job's summary page
    as on a terminal."""
    return md_inline(text)


def render_md(c: RunComparison, fail_on: str) -> str:
    summary, detail = tables(c, fail_on)
    out = [f"# ce compare `{c.a.run_id}` → `{c.b.run_id}`", "", "| | |", "|---|---|"]
    regressed, _ = verdict(c, fail_on)
    mark = {"Verdict": "❌ " if regressed else "✅ ", "Run status": "⚠️ "}
    out += [f"| {k} | {mark.get(k, '')}{_md_cell(v)} |" for k, v in summary]
    out.append("")
    for title, head, rows in detail:
        out += [f"## {title}", ""]
        if not rows:
            out += ["None.", ""]
            continue
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join("---" for _ in head) + "|")
        out += ["| " + " | ".join(_md_cell(x) for x in r) + " |" for r in rows]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# ---------------------------------------------------------------------------- html

# The run report's stylesheet (assets/report.css: its tables in boxes that scroll sideways,
# the first column kept in sight, ids that wrap; the page never scrolls sideways at a
# phone's width) and the few rules of this page's own.
_CSS = """
td.bad, td.good { font-weight: 600; } .good { color: var(--ok); }
/* the summary's two columns (a label, its line of text) take the page's width */
.wide > table.summary { width: 100%; } .summary td { max-width: none; }
@media (prefers-color-scheme: dark) {
  :root { --line: #30363d; --bg2: #161b22; --muted: #8b949e; --row: #0d1117; }
  body { background: #0d1117; color: #e6edf3; } a { color: #4493f8; }
}
"""


_ID_COLUMNS = {"Trial", "Task", "Variant", "Gate"}  # the columns of ids (no spaces in them)


def report_href(side: RunSide, page_dir: str) -> str | None:
    """The run's report.html as a link from a page in `page_dir` (a relative path, URL
    quoted); None when the run has no report.html (a copy of its parquet files only)."""
    report = os.path.join(side.path, "report.html")
    if not os.path.isfile(report):
        return None
    try:
        rel = os.path.relpath(os.path.abspath(report), os.path.abspath(page_dir))
    except ValueError:  # another drive (Windows): no relative path
        return None
    return quote(rel.replace(os.sep, "/"))


def _trial_links(c: RunComparison, page_dir: str | None) -> dict[str, str]:
    """A trial id the page names -> its panel in its run's report.html (report.js opens
    `#trial=ID`): B's flipped trials and B's or A's unmatched ones."""
    if page_dir is None:
        return {}
    out: dict[str, str] = {}
    for side, ids in ((c.a, c.unmatched_a),
                      (c.b, [f.trial_id for f in (*c.regressions, *c.improvements)]
                       + [ch.trial_id for ch in c.criterion_changes] + list(c.unmatched_b))):
        href = report_href(side, page_dir)
        if href:
            out.update((i, f"{href}#trial={quote(i, safe='/')}") for i in ids)
    return out


def render_html(c: RunComparison, fail_on: str, page_dir: str | None = None) -> str:
    """The page; `page_dir`: the directory it is written to, from which each run's id
    and each flipped trial link to the run's report.html (None: no link)."""
    from ce_runtime.report.html_page import asset

    esc: Callable[[Any], str] = lambda s: html.escape(str(s), quote=True)  # noqa: E731
    summary, detail = tables(c, fail_on)
    regressed, _ = verdict(c, fail_on)
    trials = _trial_links(c, page_dir)

    def run_id(side: RunSide) -> str:
        code = f"<code>{esc(side.run_id)}</code>"
        href = report_href(side, page_dir) if page_dir is not None else None
        return f'<a href="{esc(href)}" title="its report.html">{code}</a>' if href else code

    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width,initial-scale=1">',
             f"<title>ce compare {esc(c.a.run_id)} → {esc(c.b.run_id)}</title>",
             f"<style>{asset('report.css')}{_CSS}</style></head><body>",
             f'<header id="top"><h1>ce compare {run_id(c.a)} → {run_id(c.b)}</h1></header>',
             "<main>", '<div class="wide"><table class="summary">']
    for k, v in summary:
        cls = ' class="bad"' if (k == "Verdict" and regressed) or k == "Run status" else \
            ' class="good"' if k == "Verdict" else ""
        mark = ("✗ " if regressed else "✓ ") if k == "Verdict" else \
            "⚠ " if k == "Run status" else ""
        side = {"A": c.a, "B": c.b}.get(k)
        text = f"{run_id(side)} ({esc(side.path)})" if side is not None else esc(v)
        parts.append(f"<tr><th>{esc(k)}</th><td{cls}>{mark}{text}</td></tr>")
    parts.append("</table></div>")

    def cell(x: str, trial: bool, ident: bool) -> str:
        href = trials.get(x) if trial else None
        # an id (a trial's, a task's, a variant's, a gate's) wraps anywhere (report.css)
        td = '<td class="id">' if ident else "<td>"
        return f'{td}<a href="{esc(href)}">{esc(x)}</a></td>' if href else f"{td}{esc(x)}</td>"

    for title, head, rows in detail:
        parts.append(f"<h2>{esc(title)}</h2>")
        if not rows:
            parts.append('<p class="muted">None.</p>')
            continue
        parts.append('<div class="wide"><table><thead><tr>'
                     + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>")
        trial = head[0] == "Trial"  # a trial's id first: a link to its panel
        ids = [h in _ID_COLUMNS for h in head]
        parts += ["<tr>" + "".join(cell(x, trial and not j, ids[j]) for j, x in enumerate(r))
                  + "</tr>" for r in rows]
        parts.append("</tbody></table></div>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


RENDERERS = {"md": render_md, "json": render_json, "html": render_html}
