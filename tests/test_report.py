"""Run reporting: frames, parquet, suite gates, run.json summary, report.md, JUnit.

The records are synthetic task.json dicts shaped like ce_runtime/execute/trial.py writes them:
two variants (`baseline`, `with-skill`) over a skill-routing dataset (8 rows, a
skill_triggered criterion gated by suite_thresholds plus a file_exists one), a bug-fix
task with 3 repeats and an expected_turns budget, a docs task (TIMEOUT vs SUCCESS with a
failing weight-0 criterion) and an ungraded task. Metric values are checked against
fractions computed by hand (scikit-learn's definitions), and against an independent
pure-Python implementation on random labels.

`CE_UPDATE_GOLDENS=1 pytest tests/test_report.py` rewrites tests/golden/report.md; read
the diff: it is the report a person opens after `ce run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from fractions import Fraction as F
from pathlib import Path

import pytest

from ce_runtime import report as R

GOLDEN = Path(__file__).parent / "golden" / "report.md"
ROOT = Path(__file__).resolve().parent.parent

THRESHOLDS = {"recall.yes": 0.7, "precision.yes": 0.7, "f1.macro": 0.6}


# ---------------------------------------------------------------------------- records


def crit(cid, ctype, score, *, kind="binary", passed=None, threshold=0.9, weight=1.0,
         gating=None, advisory=False, disabled=False, error=None, outputs=None,
         suite_thresholds=None, description=None):
    passed = score >= threshold if passed is None else passed
    return {
        "id": cid, "type": ctype, "description": description or f"{ctype} check",
        "kind": kind, "score": score, "pass_threshold": threshold, "passed": passed,
        "weight": weight,
        "gating": (weight > 0 and not advisory and not disabled) if gating is None else gating,
        "advisory": advisory, "disabled": disabled, "error": error,
        "outputs": outputs or {}, "suite_thresholds": suite_thresholds,
    }


def record(variant, task, *, row=None, repeat=0, status="SUCCESS", criteria=(), score=None,
           turns=3, tool_calls=2, tokens=(1000, 200), cost=0.01, duration=10.0,
           expected_turns=None, stopped_early=False, early_stop_reason=None, error=None,
           outcome=("finished", ""), model="claude-sonnet-4-6"):
    task_id = f"{task}/{row}" if row else task
    criteria = list(criteria)
    if score is None and criteria:
        weighted = [(c["score"], c["weight"]) for c in criteria
                    if c["weight"] > 0 and not c["disabled"]]
        total = sum(w for _, w in weighted)
        score = sum(s * w for s, w in weighted) / total if total else 0.0
    return {
        "schema_version": 1, "trial_id": f"{variant}/{task_id}/{repeat:02d}",
        "variant_id": variant, "experiment_id": "skill-ab", "task_id": task_id,
        "suite_id": task if row else None, "row_id": row, "repeat": repeat,
        "tags": ["skills"], "task_file": f"tasks/{task}.yaml", "task_dir": "tasks",
        "plan_hash": f"h-{task}", "agent": "claude-code", "model": model,
        "status": status, "stopped_early": stopped_early,
        "early_stop_reason": early_stop_reason,
        "weighted_score": score if status not in ("ERROR", "NOT_GRADED") or criteria
        else None,
        "success": status == "SUCCESS", "started_at": "2026-05-01T12:00:00+00:00",
        "duration_s": duration,
        "agent_outcome": {"reason": outcome[0], "detail": outcome[1]} if outcome else None,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1], "cost_usd": cost,
                  "turns": turns, "tool_calls": tool_calls},
        "expected_turns": expected_turns, "criteria": criteria, "error": error,
        "pre_run": [{"command": "make seed", "exit_code": 0, "stdout": "", "stderr": ""}],
        "post_run": [],
    }


POSITIVE = ("r1", "r2", "r3", "r8")  # expected_skill == skill_name
# observed label per row; None = the criterion errored without labels
OBSERVED = {
    "baseline": {"r1": "yes", "r2": "no", "r3": "no", "r4": "no", "r5": "yes", "r6": "no",
                 "r7": "no", "r8": "ERROR"},
    "with-skill": {"r1": "yes", "r2": "yes", "r3": "yes", "r4": "yes", "r5": "no",
                   "r6": "no", "r7": "no", "r8": None},
}


def routing_records(variant):
    out = []
    for i in range(1, 9):
        row = f"r{i}"
        expected = "yes" if row in POSITIVE else "no"
        observed = OBSERVED[variant][row]
        if observed == "ERROR":  # the sandbox was lost: no grading at all
            out.append(record(variant, "skill-routing", row=row, status="ERROR",
                              error="sandbox lost: container exited (137)",
                              outcome=("error", "killed"), tool_calls=0, turns=1))
            continue
        early = variant == "with-skill" and row == "r1"
        if observed is None:
            c0 = crit("c0", "skill_triggered", 0.0, kind="classification",
                      error="no turn records: the agent produced no trace",
                      suite_thresholds=THRESHOLDS, description="date-teller activation")
        else:
            c0 = crit("c0", "skill_triggered", 1.0 if observed == expected else 0.0,
                      kind="classification",
                      outputs={"observed": observed, "expected": expected},
                      suite_thresholds=THRESHOLDS, description="date-teller activation")
        made = not early and row != "r6"
        c1 = crit("c1", "file_exists", 1.0 if made else 0.0, advisory=early,
                  suite_thresholds={"pass_rate": 0.75}, description="answer.md was written")
        gating = [c for c in (c0, c1) if c["gating"]]
        ok = all(c["passed"] for c in gating)
        out.append(record(
            variant, "skill-routing", row=row, status="SUCCESS" if ok else "FAILURE",
            criteria=[c0, c1], stopped_early=early,
            early_stop_reason="armed criteria decided: c0 pass" if early else None,
            turns=2 if early else 4, tool_calls=1 if early else 3))
    return out


def bugfix_records(variant):
    plan = {"baseline": [("SUCCESS", 3), ("FAILURE", 4), ("SUCCESS", 7)],
            "with-skill": [("SUCCESS", 2), ("SUCCESS", 3), ("SUCCESS", 5)]}[variant]
    out = []
    for repeat, (status, calls) in enumerate(plan):
        ok = status == "SUCCESS"
        out.append(record(
            variant, "fix-bug", repeat=repeat, status=status, expected_turns=4,
            tool_calls=calls, turns=calls + 1, cost=0.02 + 0.01 * repeat,
            criteria=[
                crit("c0", "run_command", 1.0 if ok else 0.0,
                     description="the test suite passes",
                     error=None if ok else "exit 1: 2 failed, 5 passed"),
                crit("c1", "file_contains", 1.0 if ok else 0.5, kind="fraction",
                     description="the fix is in calc.py"),
            ]))
    return out


def docs_records(variant):
    if variant == "baseline":
        return [record(variant, "write-docs", status="TIMEOUT", duration=600.0,
                       outcome=("timeout", "task_timeout 600s"), tool_calls=12, turns=13,
                       criteria=[crit("c0", "file_exists", 0.0,
                                      description="README.md exists")])]
    return [record(variant, "write-docs", criteria=[
        crit("c0", "file_exists", 1.0, description="README.md exists"),
        crit("c1", "llm_judge", 0.4, kind="continuous", threshold=0.7, weight=0.0,
             description="prose quality (informational)"),
    ])]


def explore_records(variant):
    return [record(variant, "explore", status="NOT_GRADED", criteria=[], tool_calls=4)]


def all_records():
    out = []
    for variant in ("baseline", "with-skill"):
        out += routing_records(variant) + bugfix_records(variant) + docs_records(variant) \
            + explore_records(variant)
    return out


@pytest.fixture(scope="module")
def records():
    return all_records()


@pytest.fixture(scope="module")
def gates(records):
    return R.suite_metrics(records)


@pytest.fixture(scope="module")
def summ(records, gates):
    return R.summary(records, gates, "2026-05-01T12-00-00", {"paths": ["tasks/"]})


def gate(gates, variant, criterion):
    [g] = [g for g in gates if g.variant == variant and g.criterion == criterion]
    return g


def close(a, b):
    return abs(float(a) - float(b)) < 1e-12


# ---------------------------------------------------------------------------- frames


def test_trials_frame_one_row_per_trial(records):
    df = R.trials_frame(records)
    assert df.height == len(records) == 2 * (8 + 3 + 1 + 1)
    assert df["trial_id"].to_list() == [r["trial_id"] for r in records]
    for col in ("variant_id", "suite_id", "row_id", "repeat", "status", "success",
                "weighted_score", "stopped_early", "duration_s", "input_tokens",
                "output_tokens", "cost_usd", "turns", "tool_calls", "agent", "model"):
        assert col in df.columns
    row = df.filter(df["trial_id"] == "baseline/fix-bug/02").row(0, named=True)
    assert row["status"] == "SUCCESS" and row["tool_calls"] == 7
    assert row["visible_turns"] == 8 and row["expected_turns"] == 4
    assert row["within_expected_turns"] is False  # 8 > 1.5 x 4
    budget = df.filter(df["task_id"] == "fix-bug").select(
        "trial_id", "within_expected_turns").rows()
    assert budget == [("baseline/fix-bug/00", True), ("baseline/fix-bug/01", False),
                      ("baseline/fix-bug/02", False), ("with-skill/fix-bug/00", True),
                      ("with-skill/fix-bug/01", True), ("with-skill/fix-bug/02", True)]
    assert df.filter(df["expected_turns"].is_null())["within_expected_turns"].null_count() \
        == df.filter(df["expected_turns"].is_null()).height
    err = df.filter(df["status"] == "ERROR").row(0, named=True)
    assert err["n_criteria"] == 0 and err["weighted_score"] is None and err["graded"]
    assert df.filter(df["status"] == "NOT_GRADED")["graded"].to_list() == [False, False]
    assert str(df.schema["started_at"]).startswith("Datetime")


def test_results_frame_one_row_per_criterion_result(records):
    df = R.results_frame(records)
    assert df.height == sum(len(r["criteria"]) for r in records)
    cls = df.filter(df["type"] == "skill_triggered")
    assert cls.height == 15  # 8 rows x 2 variants, minus the ERROR trial's
    assert cls.filter(cls["observed"].is_null()).height == 1
    row = cls.filter(cls["trial_id"] == "baseline/skill-routing/r5/00").row(0, named=True)
    assert (row["observed"], row["expected"], row["score"], row["passed"]) == \
        ("yes", "no", 0.0, False)


def test_results_frame_tolerates_odd_outputs():
    rec = record("v", "t", criteria=[
        crit("c0", "custom", 1.0, kind="classification",
             outputs={"observed": True, "expected": 1, "extra": [1, 2]}),
        crit("c1", "custom", 0.5, outputs={"observed": {"nested": 1}})])
    df = R.results_frame([rec])
    assert df.select("observed", "expected", "score").rows() == \
        [("yes", "1", 1.0), (None, None, 0.5)]


def test_empty_run_frames_and_summary():
    assert R.trials_frame([]).height == 0
    assert R.results_frame([]).height == 0
    assert R.suite_metrics([]) == []
    s = R.summary([], [], "empty", None)
    assert s["exit_code"] == 1 and s["exit_reasons"] == ["no trial ran"]
    assert s["pass_rate"] is None and s["trials"] == 0
    assert "# ce run" in R.render_markdown(s, [], [])
    # a re-score of which nothing could be graded again (every trial damaged) ran nothing
    rescored = R.summary([], [], "empty", {"rescored_from": "/runs/r1"})
    assert rescored["exit_reasons"] == ["no trial was re-scored"]
    ET.fromstring(R.render_junit([], []))


def test_a_rescores_report_md_says_which_run_it_re_scored(records):
    """report.html's headline says `re-scored from RUN`; report.md, the one pasted into
    a review, read as a run of its own with nothing to say its trials ran elsewhere."""
    gates = R.suite_metrics(records)
    plain = R.render_markdown(R.summary(records, gates, "r", None), records, gates)
    again = R.render_markdown(R.summary(records, gates, "20261203-1200", {
        "rescored_from": "/archive/runs/20261101-0900-ab12"}), records, gates)
    assert "Re-scored from" not in plain
    assert again.splitlines()[:3] == [
        "# ce run `20261203-1200`", "",
        "Re-scored from `/archive/runs/20261101-0900-ab12`: its archived trials graded "
        "again, no agent run."]


def test_parquet_round_trip(tmp_path, records):
    import polars as pl

    R.write_parquet(str(tmp_path), records)
    assert sorted(os.listdir(tmp_path)) == ["results.parquet", "trials.parquet"]  # no temp
    trials = pl.read_parquet(tmp_path / "trials.parquet")
    results = pl.read_parquet(tmp_path / "results.parquet")
    assert trials.equals(R.trials_frame(records))
    assert results.equals(R.results_frame(records))
    assert trials.height == len(records)
    assert trials.filter(pl.col("stopped_early"))["trial_id"].to_list() == \
        ["with-skill/skill-routing/r1/00"]
    assert trials["tags"].to_list()[0] == ["skills"]


# ---------------------------------------------------------------------------- suite gates


def test_classification_metrics_baseline(gates):
    # expected yes: r1 r2 r3 (r8 ERRORed); observed yes: r1 r5
    # yes: tp 1, predicted 2, support 3;  no: tp 3, predicted 5, support 4
    g = gate(gates, "baseline", "c0")
    assert g.kind == "classification" and g.criterion_type == "skill_triggered"
    assert g.labels == ["no", "yes"] and g.support == {"no": 4, "yes": 3}
    assert g.confusion == [[3, 1], [2, 1]]  # rows expected (no, yes), columns observed
    assert g.n == 7 and g.missing == 1  # the ERROR trial has no labels
    f1_yes, f1_no = F(2, 5), F(2, 3)
    want = {
        "accuracy": F(4, 7), "micro_f1": F(4, 7),
        "precision.yes": F(1, 2), "recall.yes": F(1, 3), "f1.yes": f1_yes,
        "precision.no": F(3, 5), "recall.no": F(3, 4), "f1.no": f1_no,
        "macro_f1": (f1_yes + f1_no) / 2, "f1.macro": (f1_yes + f1_no) / 2,
        "weighted_f1": (f1_yes * 3 + f1_no * 4) / 7,
    }
    assert set(g.metrics) == set(want)
    for name, value in want.items():
        assert close(g.metrics[name], value), name
    assert g.thresholds == THRESHOLDS
    assert g.failed == ["recall.yes", "precision.yes", "f1.macro"] and not g.passed


def test_classification_metrics_with_skill(gates):
    # yes: tp 3, predicted 4 (r4 false positive), support 3; no: tp 3, predicted 3, support 4
    g = gate(gates, "with-skill", "c0")
    assert g.confusion == [[3, 1], [0, 3]]
    assert g.n == 7 and g.missing == 1  # r8: criterion error without outputs
    assert close(g.metrics["precision.yes"], F(3, 4))
    assert close(g.metrics["recall.yes"], 1)
    assert close(g.metrics["recall.no"], F(3, 4))
    assert close(g.metrics["precision.no"], 1)
    for name in ("f1.yes", "f1.no", "macro_f1", "weighted_f1", "micro_f1", "accuracy"):
        assert close(g.metrics[name], F(6, 7)), name
    assert g.failed == [] and g.passed


def test_score_metrics_on_dataset_criteria(gates):
    base = gate(gates, "baseline", "c1")
    # 7 graded-with-criteria rows; r6 never writes answer.md
    assert base.kind == "score" and base.n == 7 and base.missing == 1  # the ERROR trial
    assert close(base.metrics["pass_rate"], F(6, 7))
    assert close(base.metrics["mean_score"], F(6, 7))
    assert base.passed
    skill = gate(gates, "with-skill", "c1")
    # r1 stopped early before writing (advisory, still reported) and r6 never writes it
    assert skill.n == 8 and close(skill.metrics["pass_rate"], F(6, 8))
    assert skill.passed  # 0.75 >= 0.75: a metric equal to its minimum meets it
    assert [g.name for g in gates] == [
        "baseline/skill-routing/c0", "baseline/skill-routing/c1",
        "with-skill/skill-routing/c0", "with-skill/skill-routing/c1"]


def _reference_metrics(pairs):
    """scikit-learn's definitions, written out: labels = sorted(set(y_true) | set(y_pred)),
    0/0 -> 0."""
    labels = sorted({e for e, _ in pairs} | {o for _, o in pairs})
    n = len(pairs)
    out = {"accuracy": F(sum(e == o for e, o in pairs), n)}
    f1s = {}
    for lab in labels:
        tp = sum(e == o == lab for e, o in pairs)
        pred = sum(o == lab for _, o in pairs)
        sup = sum(e == lab for e, _ in pairs)
        p = F(tp, pred) if pred else F(0)
        r = F(tp, sup) if sup else F(0)
        f1s[lab] = (2 * p * r / (p + r)) if p + r else F(0)
        out[f"precision.{lab}"], out[f"recall.{lab}"], out[f"f1.{lab}"] = p, r, f1s[lab]
    out["macro_f1"] = sum(f1s.values()) / len(labels)
    out["weighted_f1"] = sum(f1s[lab] * sum(e == lab for e, _ in pairs)
                             for lab in labels) / n
    tp = sum(e == o for e, o in pairs)
    out["micro_f1"] = F(2 * tp, 2 * n)
    out["f1.macro"] = out["macro_f1"]
    return out


def test_metrics_match_reference_on_random_labels():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    label = st.sampled_from(["bug", "feature", "question", "(none)", "(other)"])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.tuples(label, label), min_size=1, max_size=30))
    def check(pairs):
        recs = [record("v", "triage", row=f"r{i}", criteria=[
            crit("c0", "classification_match", float(e == o), kind="classification",
                 outputs={"observed": o, "expected": e})]) for i, (e, o) in enumerate(pairs)]
        [g] = R.suite_metrics(recs)
        want = _reference_metrics(pairs)
        assert set(g.metrics) == set(want)
        for name, value in want.items():
            assert close(g.metrics[name], value), (name, g.metrics[name], value)
        assert sum(map(sum, g.confusion)) == len(pairs) == g.n
        assert g.labels[-1].startswith("(") or not any(
            lab.startswith("(") for lab in g.labels)

    check()


def test_threshold_on_unseen_label_scores_zero():
    recs = [record("v", "s", row=f"r{i}", criteria=[
        crit("c0", "skill_triggered", 1.0, kind="classification",
             outputs={"observed": "no", "expected": "no"},
             suite_thresholds={"recall.yes": 0.5, "accuracy": 1.0})]) for i in range(3)]
    [g] = R.suite_metrics(recs)
    assert g.labels == ["no", "yes"]  # yes shown (threshold names it) though never seen
    assert g.metrics["recall.yes"] == 0.0 and g.metrics["precision.yes"] == 0.0
    assert g.metrics["macro_f1"] == 1.0  # averages cover the labels seen, like sklearn
    assert g.confusion == [[3, 0], [0, 0]]
    assert g.failed == ["recall.yes"]


def test_a_gate_failed_on_a_metric_with_nothing_to_count_says_so():
    """recall.bug of a sample without a `bug` row is 0 by the zero-division rule: every
    trial right and the gate failed said only `recall.bug 0.000 < 1`; it says why now, in
    run.json's reasons, JUnit and SARIF alike. A metric with cases is left as it was."""
    from ce_runtime.report.gates import below_text
    from ce_runtime.report.junit import render_junit
    from ce_runtime.report.sarif import render_sarif

    def rows(pairs, thresholds):
        return [record("v", "s", row=f"r{i}", criteria=[
            crit("c0", "classification_match", float(e == o), kind="classification",
                 outputs={"observed": o, "expected": e}, suite_thresholds=thresholds)])
            for i, (e, o) in enumerate(pairs)]

    recs = rows([("ok", "ok"), ("ok", "ok")],
                {"recall.bug": 1.0, "precision.bug": 1.0, "f1.bug": 1.0, "accuracy": 1.0})
    [g] = R.suite_metrics(recs)
    assert g.failed == ["recall.bug", "precision.bug", "f1.bug"]
    why = ("recall.bug 0.000 < 1 (no trial expected bug: 0 with nothing to count), "
           "precision.bug 0.000 < 1 (no trial answered bug: 0 with nothing to count), "
           "f1.bug 0.000 < 1 (no trial expected bug: 0 with nothing to count)")
    assert below_text(g) == why
    summary = R.summary(recs, [g], "run-1", {})
    assert f"suite gate v/s/c0 failed: {why}" in summary["exit_reasons"]
    assert why.replace("<", "&lt;") in render_junit(recs, [g], summary)
    assert why in render_sarif(recs, "0", gates=[g])
    page = R.render_markdown(summary, recs, [g])
    assert "| recall.bug | 0.000 | 1 | ✗ below (no trial expected bug: 0 with nothing to " \
        "count) |" in page, page
    assert "| accuracy | 1.000 | 1 | ✓ |" in page

    # answered bug where none was expected: recall had no case, precision had one (0/1)
    [g] = R.suite_metrics(rows([("ok", "ok"), ("ok", "bug")],
                               {"recall.bug": 1.0, "precision.bug": 1.0}))
    assert below_text(g) == ("recall.bug 0.000 < 1 (no trial expected bug: 0 with nothing "
                             "to count), precision.bug 0.000 < 1")


def test_coder_evals_score_statistics_gate_any_criterion():
    """`suite_thresholds: {mean: 0.9}` as coder_eval writes it: count, mean, median, std
    (population), min, max of a criterion's scores over the suite, and completion_rate
    (the graded trials with a score, over the suite's graded trials): on a score
    criterion and on a classification one, shown where a threshold names them."""
    import statistics

    scores = [1.0, 0.5, 0.0, 1.0]
    limits = {"mean": 0.7, "median": 0.75, "std": 0.0, "min": 0.0, "max": 1.0,
              "count": 4, "completion_rate": 0.9}
    recs = [record("v", "s", row=f"r{i}", criteria=[
        crit("c0", "file_contains", x, kind="fraction", suite_thresholds=limits),
        crit("c1", "skill_triggered", 1.0, kind="classification",
             outputs={"observed": "yes", "expected": "yes"},
             suite_thresholds={"mean": 1.0, "completion_rate": 0.9})])
        for i, x in enumerate(scores)]
    recs.append(record("v", "s", row="r9", status="ERROR", criteria=[], error="boom"))
    g0, g1 = R.suite_metrics(recs)
    assert g0.metrics["count"] == 4.0 and g0.metrics["max"] == 1.0 and g0.metrics["min"] == 0.0
    assert close(g0.metrics["mean"], statistics.fmean(scores))
    assert close(g0.metrics["median"], statistics.median(scores))
    assert close(g0.metrics["std"], statistics.pstdev(scores))
    assert close(g0.metrics["completion_rate"], F(4, 5))  # the ERROR row has no score
    assert g0.failed == ["mean", "completion_rate"]  # 0.625 < 0.7; median 0.75 meets 0.75
    assert g1.kind == "classification" and g1.metrics["mean"] == 1.0
    assert g1.failed == ["completion_rate"]
    [plain] = R.suite_metrics([record("v", "s", row="r0", criteria=[
        crit("c0", "file_contains", 1.0, kind="fraction")])])
    assert set(plain.metrics) == {"pass_rate", "mean_score"}  # named by no threshold


def test_markdown_score_gate_shows_a_failed_thresholds_value():
    """A score criterion's gate row shows pass rate and mean score only: a failed `std`
    or `max` threshold is shown with its value, else the reader sees "❌ failed" beside
    minimums that say nothing of what fell short."""
    recs = [record("v", "s", row=f"r{i}", criteria=[
        crit("c0", "file_exists", x, kind="binary",
             suite_thresholds={"std": 0.5, "count": 3})])
        for i, x in enumerate([1.0, 0.0, 1.0])]
    [g] = R.suite_metrics(recs)
    assert g.failed == ["std"]
    page = R.render_markdown(R.summary(recs, [g], "r", None), recs, [g])
    assert "| std 0.471 < 0.5 ✗, count ≥ 3 | ❌ failed |" in page, page


def test_non_dataset_and_disabled_criteria_have_no_gates():
    recs = [record("v", "single", criteria=[
        crit("c0", "skill_triggered", 1.0, kind="classification",
             outputs={"observed": "yes", "expected": "yes"})])]
    recs += [record("v", "s", row="r1", criteria=[
        crit("c0", "llm_judge", 0.0, kind="continuous", disabled=True, passed=False)])]
    assert R.suite_metrics(recs) == []


# ---------------------------------------------------------------------------- summary


def test_summary_counts_and_rates(summ):
    assert summ["run_id"] == "2026-05-01T12-00-00"
    assert summ["args"] == {"paths": ["tasks/"]}  # `ce run --resume` reads it back
    assert summ["trials"] == 26
    assert summ["by_status"] == {"SUCCESS": 14, "FAILURE": 8, "TIMEOUT": 1, "ERROR": 1,
                                 "NOT_GRADED": 2}
    assert summ["graded"] == 24 and summ["passed"] == 14
    assert close(summ["pass_rate"], F(14, 24))
    lo, hi = summ["pass_rate_ci95"]
    # Wilson 95% for 14/24
    assert abs(lo - 0.38835) < 1e-5 and abs(hi - 0.75532) < 1e-5
    assert summ["stopped_early"] == 1
    assert summ["tokens"] == {"input": 26000, "output": 5200, "total": 31200, "cache_read": 0,
                              "cache_write": 0}
    json.dumps(summ)  # run.json-ready


def test_summary_per_variant(summ):
    base, skill = summ["variants"]["baseline"], summ["variants"]["with-skill"]
    assert list(summ["variants"]) == ["baseline", "with-skill"]
    # baseline: routing r1 r4 r7 ok (r6: file missing; r2 r3 r5 wrong; r8 ERROR),
    # fix-bug 2/3, docs TIMEOUT
    assert base["passed"] == 5 and base["graded"] == 12
    assert base["by_status"] == {"SUCCESS": 5, "FAILURE": 5, "TIMEOUT": 1, "ERROR": 1,
                                 "NOT_GRADED": 1}
    # with-skill: routing r1 r2 r3 r5 r7 (r4 wrong, r6 no file, r8 criterion error),
    # fix-bug 3/3, docs
    assert skill["passed"] == 9 and skill["graded"] == 12
    scores = [r["weighted_score"] for r in all_records()
              if r["variant_id"] == "with-skill" and r["status"] != "NOT_GRADED"]
    assert close(skill["mean_score"], F(sum(map(F, scores))) / len(scores))
    assert base["within_expected_turns"] == {"budgeted": 3, "within": 1, "share": 1 / 3}
    assert skill["within_expected_turns"] == {"budgeted": 3, "within": 3, "share": 1.0}
    assert summ["within_expected_turns"] == {"budgeted": 6, "within": 4, "share": 4 / 6}


def test_pass_at_k(summ):
    base = summ["variants"]["baseline"]["pass_at_k"]
    # tasks: 8 routing rows (k=1), fix-bug (k=3), write-docs (k=1); explore not graded
    assert base["tasks"] == 10 and base["k_range"] == [1, 3] and base["k"] is None
    assert base["passed"] == 4  # r1 r4 r7 + fix-bug (2 of 3 repeats)
    assert base["passed_all"] == 3  # fix-bug failed one repeat
    only_bugfix = bugfix_records("baseline")
    s = R.summary(only_bugfix, [], "r", None)
    assert s["pass_at_k"] == {"tasks": 1, "k": 3, "k_range": [3, 3], "passed": 1,
                              "rate": 1.0, "passed_all": 0, "rate_all": 0.0}


def test_variant_comparison_is_paired(summ):
    [c] = summ["comparison"]
    assert c["variant"] == "with-skill" and c["baseline"] == "baseline"
    assert c["shared_tasks"] == 10
    # per task success rates: baseline r1 r4 r7 = 1, fix-bug 2/3, others 0
    base_rates = [1, 0, 0, 1, 0, 0, 1, 0, F(2, 3), 0]  # r1..r8, fix-bug, write-docs
    skill_rates = [1, 1, 1, 0, 1, 0, 1, 0, 1, 1]  # r4 r6 r8 fail
    assert close(c["baseline_pass_rate"], sum(map(F, base_rates)) / 10)
    assert close(c["pass_rate"], sum(map(F, skill_rates)) / 10)
    assert close(c["pass_rate_diff"], (sum(map(F, skill_rates)) - sum(map(F, base_rates))) / 10)
    # r1 ties on success and loses on score: stopped early, its unarmed c1 scored 0
    assert (c["better"], c["worse"], c["same"]) == (5, 2, 3)
    assert c["stopped_early_tasks"] == 1


def _ok_records():
    return [record("v", "t", repeat=i, criteria=[crit("c0", "file_exists", 1.0)])
            for i in range(2)]


def test_exit_code_rules(records, gates, summ):
    assert summ["exit_code"] == 1
    assert summ["exit_reasons"][0] == "12 of 26 trial(s) did not succeed"
    assert any("suite gate baseline/skill-routing/c0 failed: recall.yes 0.333 < 0.7"
               in r for r in summ["exit_reasons"])
    ok = _ok_records()
    s = R.summary(ok, R.suite_metrics(ok), "r", None)
    assert (s["exit_code"], s["exit_reasons"]) == (0, [])
    # every trial succeeded but a suite gate failed
    rows = [record("v", "s", row=f"r{i}", criteria=[
        crit("c0", "skill_triggered", 1.0, kind="classification",
             outputs={"observed": "no", "expected": "no"},
             suite_thresholds={"recall.yes": 0.5})]) for i in range(2)]
    s = R.summary(rows, R.suite_metrics(rows), "r", None)
    assert all(r["status"] == "SUCCESS" for r in rows) and s["exit_code"] == 1
    # NOT_GRADED is not SUCCESS
    s = R.summary([*ok, record("v", "x", status="NOT_GRADED")], [], "r", None)
    assert s["exit_code"] == 1


# ---------------------------------------------------------------------------- markdown


def test_markdown_golden(records, gates, summ):
    text = R.render_markdown(summ, records, gates)
    if os.environ.get("CE_UPDATE_GOLDENS") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text, encoding="utf-8")
    assert GOLDEN.exists(), "no golden report.md: run with CE_UPDATE_GOLDENS=1 and read it"
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_markdown_content(records, gates, summ):
    text = R.render_markdown(summ, records, gates)
    assert text.startswith("# ce run `2026-05-01T12-00-00`\n")
    assert "❌ **FAILED**" in text
    assert ("> **NOTE:** `with-skill/skill-routing/r1/00` stopped early (armed criteria "
            "decided: c0 pass)") in text
    assert "## Variant `baseline`" in text and "## Variant `with-skill`" in text
    assert "sandbox lost: container exited (137)" in text
    assert "exit 1: 2 failed, 5 passed" in text
    assert "## Variant comparison (baseline `baseline`)" in text
    assert "prose quality" not in text.split("## Failures")[1].split("## Suite gates")[0]
    one = _ok_records()
    s = R.summary(one, [], "r", None)
    single = R.render_markdown(s, one, [])
    assert "✅ **PASSED**" in single and "comparison" not in single
    assert "Suite gates" not in single and "## Failures" not in single


def test_the_summed_time_says_it_includes_set_up_and_grading(records, gates, summ):
    """run.json's duration_s sums each trial's duration_s, from its sandbox set-up to its
    grading: "Agent time" overstated what the agent took."""
    text = R.render_markdown(summ, records, gates)
    assert "| Trial time | 14m 10s (sum over trials, set-up and grading included) |" in text
    assert "Agent time" not in text


def test_markdown_says_why_a_run_limit_trial_failed_with_every_criterion_passed():
    # a TIMEOUT whose criteria all pass failed the run with nothing said: no Failures
    # entry and an empty Notes cell, where the JUnit and SARIF files named the limit
    rec = record("v", "t", status="TIMEOUT", outcome=("stopped", "task_timeout (2s)"),
                 criteria=[crit("c0", "file_exists", 1.0)])
    text = R.render_markdown(R.summary([rec], [], "r", None), [rec], [])
    row = next(line for line in text.splitlines() if line.startswith("| `t`"))
    assert row.endswith("| stopped: task_timeout (2s) |")
    failures = text.split("## Failures")[1]
    assert "### `v/t/00` — TIMEOUT (score 1.00)" in failures
    assert "- agent ended: stopped: task_timeout (2s)" in failures
    # and the JUnit failure names the limit, not "no criterion failed"
    junit = ET.fromstring(R.render_junit([rec], []))
    assert junit.find("testsuite/testcase/failure").get("message") == \
        "TIMEOUT: stopped: task_timeout (2s)"
    # and report.html's trial table: its "Failed criteria" cell was empty for it
    from ce_runtime.report.html import COLUMNS, rows
    from ce_runtime.store.record import as_record

    cells = dict(zip(COLUMNS, rows([as_record(rec)])[0], strict=True))
    assert cells["failed"] == [] and cells["limit"] == "stopped: task_timeout (2s)"
    failed = record("v", "t", status="FAILURE", outcome=("stopped", "done"),
                    criteria=[crit("c0", "file_exists", 0.0)])
    assert dict(zip(COLUMNS, rows([as_record(failed)])[0], strict=True))["limit"] is None


def test_an_unknown_cost_reads_unknown_never_0_and_a_total_says_over_how_many():
    """A trial that measured no cost (no agent, the oracle, a script without `usage`: $0
    reported; or a model with no rate) has an unknown cost, by report/usage.py's rule, as
    the usage-per-trial table says: report.md's Cost line, the variant's line and its
    comparison row, and the trial's cell said $0.0000 for it, and a total counted it as
    $0. Now "—" ("unknown" in the variant's sentence); a total over some trials says over
    how many; run.json keeps `cost_usd` and adds `cost_known_trials`."""
    from ce_runtime.report.html import COLUMNS, rows
    from ce_runtime.store.record import as_record

    oracle = [record(v, "t", cost=0.0, tokens=(0, 0), model=None, score=1.0)
              for v in ("a", "b")]
    s = R.summary(oracle, [], "r", None)
    assert (s["cost_usd"], s["cost_known_trials"]) == (0.0, 0)
    assert s["variants"]["a"]["cost_known_trials"] == 0
    text = R.render_markdown(s, oracle, [])
    assert "| Cost | — |" in text and "$0.0000" not in text
    assert "mean score 1.00, cost unknown." in text
    assert text.count("| 1.00 | 3 | — |") == 2  # each trial's cost cell
    assert "| 1 | 100.0% | 20.7%–100.0% | 1.00 | 1/1 | — |" in text  # the comparison row
    assert [dict(zip(COLUMNS, r, strict=True))["cost"] for r in
            rows([as_record(r) for r in oracle])] == [None, None]

    mixed = [record("a", "t", repeat=0, cost=0.02, score=1.0),
             record("a", "t", repeat=1, cost=0.0, score=1.0),
             record("b", "t", cost=0.01, score=1.0)]
    s = R.summary(mixed, [], "r", None)
    assert (s["cost_usd"], s["cost_known_trials"]) == (0.03, 2)
    text = R.render_markdown(s, mixed, [])
    assert "| Cost | $0.0300 over 2 of 3 trial(s) |" in text
    assert "cost $0.0200 over 1 of 2 trial(s)." in text
    assert "| `b` | 1 | 100.0% | 20.7%–100.0% | 1.00 | 1/1 | $0.0100 |" in text
    assert [r for r in text.splitlines() if r.startswith("| `t`")][1].endswith(
        "| 1.00 | 3 | — |  |")


def test_unknown_tokens_and_turns_read_unknown_never_0_and_a_total_says_over_how_many():
    """Tokens a trial did not report (no agent, the oracle, a script without `usage`)
    and the turns and tool calls of a trial where no agent ran are unknown, by
    report/usage.py's rule, as its cost is: report.md's Tokens line said `0 in / 0 out`
    and an agentless trial's Turns cell 0, report.html's Turns, Tools and Tokens cells 0.
    Now "—"; a total over some trials says over how many; run.json keeps its sums and
    adds `tokens_known_trials`."""
    from ce_runtime.report.html import COLUMNS, rows
    from ce_runtime.store.record import as_record

    agentless = record("a", "t", tokens=(0, 0), cost=0.0, turns=0, tool_calls=0,
                       outcome=None, model=None, score=1.0)
    agentless["agent"] = "none"
    s = R.summary([agentless], [], "r", None)
    assert (s["tokens"]["input"], s["tokens_known_trials"]) == (0, 0)
    assert s["variants"]["a"]["tokens_known_trials"] == 0
    text = R.render_markdown(s, [agentless], [])
    assert "| Tokens | — |" in text and "0 in / 0 out" not in text
    assert "| `t` | 0 | ✅ SUCCESS | 1.00 | — | — |  |" in text  # turns and cost
    [row] = [dict(zip(COLUMNS, r, strict=True)) for r in rows([as_record(agentless)])]
    assert (row["turns"], row["tool_calls"], row["tokens"], row["cost"]) == \
        (None, None, None, None)

    # the oracle ran (its turns are known) but reported no token
    oracle = record("a", "t", repeat=1, tokens=(0, 0), cost=0.0, turns=2, tool_calls=2,
                    model=None, score=1.0)
    oracle["agent"] = "oracle"
    mixed = [record("a", "t", tokens=(1000, 200), score=1.0), oracle]
    s = R.summary(mixed, [], "r", None)
    assert (s["tokens"]["input"], s["tokens_known_trials"]) == (1000, 1)
    text = R.render_markdown(s, mixed, [])
    assert "| Tokens | 1,000 in / 200 out over 1 of 2 trial(s) |" in text
    assert "| `t` | 1 | ✅ SUCCESS | 1.00 | 2 | — |  |" in text
    cells = [dict(zip(COLUMNS, r, strict=True)) for r in rows([as_record(r) for r in mixed])]
    assert [(c["turns"], c["tool_calls"], c["tokens"]) for c in cells] == \
        [(3, 2, 1200), (2, 2, None)]


def test_markdown_escapes_table_cells():
    rec = record("v", "t", status="ERROR", error="boom | bad\nsecond line", criteria=[])
    s = R.summary([rec], [], "r", None)
    text = R.render_markdown(s, [rec], [])
    row = next(line for line in text.splitlines() if line.startswith("| `t`"))
    assert "boom \\| bad second line" in row


# ---------------------------------------------------------------------------- junit


def test_junit_parses_and_counts_match(records, gates):
    root = ET.fromstring(R.render_junit(records, gates))
    assert root.tag == "testsuites"
    suites = {ts.get("name"): ts for ts in root.findall("testsuite")}
    assert list(suites) == ["baseline", "with-skill"]
    base = suites["baseline"]
    # 13 trials + 2 suite gates
    assert base.get("tests") == "15" and len(base.findall("testcase")) == 15
    assert base.get("errors") == "1" and base.get("skipped") == "1"
    # 5 FAILURE + 1 TIMEOUT + 1 failed gate
    assert base.get("failures") == "7"
    assert root.get("tests") == "30"
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites.values())
    case = base.find("testcase[@name='baseline/fix-bug/01']")
    failure = case.find("failure")
    assert failure.get("type") == "FAILURE" and "c0" in failure.get("message")
    assert "exit 1: 2 failed, 5 passed" in failure.text
    timeout = base.find("testcase[@name='baseline/write-docs/00']/failure")
    assert timeout.get("type") == "TIMEOUT"
    err = base.find("testcase[@name='baseline/skill-routing/r8/00']/error")
    assert "sandbox lost" in err.get("message")
    assert base.find("testcase[@name='baseline/explore/00']/skipped") is not None
    gate_case = base.find("testcase[@classname='suite.skill-routing']"
                          "[@name='baseline/skill-routing/c0 suite_thresholds']")
    assert "recall.yes 0.333 < 0.7" in gate_case.find("failure").get("message")
    skill = suites["with-skill"]
    early = skill.find("testcase[@name='with-skill/skill-routing/r1/00']")
    assert early.find("failure") is None
    assert "stopped early" in early.find("system-out").text


def test_junit_of_an_interrupted_run_says_trials_did_not_run():
    # Ctrl-C after 2 of 6 trials: the JUnit file listed the 2, both green (tests="2",
    # failures="0"); a CI test report took the run for a pass
    from ce_runtime.report.summary import with_run_state

    recs = [record("v", f"t{i}", criteria=[crit("c0", "file_exists", 1.0)]) for i in (1, 2)]
    summary = with_run_state(R.summary(recs, [], "r", None), "interrupted", 6)
    root = ET.fromstring(R.render_junit(recs, [], summary))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "0", "1")
    err = root.find("testsuite[@name='(run)']/testcase[@name='every planned trial ran']/error")
    assert err.get("type") == "INTERRUPTED" and err.get("message") == (
        "the run was interrupted: 2 of 6 planned trial(s) ran; `ce run --resume RUN` runs "
        "the other 4")
    complete = with_run_state(R.summary(recs, [], "r", None), "complete", 2)
    assert ET.fromstring(R.render_junit(recs, [], complete)).get("errors") == "0"


def test_junit_has_a_skipped_testcase_per_trial_not_run():
    # an executor that did not start after 1 of 4 trials: the 3 planned trials that never
    # ran were in no testcase, a CI dashboard counted 2 tests (the trial and the run's
    # error) where 4 trials were planned
    from ce_runtime.report.summary import with_run_state

    recs = [record("v", "t1", criteria=[crit("c0", "file_exists", 1.0)])]
    unrun = ["v/t1/01", "w/suite/row-2/00", "w/t2/00"]
    summary = with_run_state(R.summary(recs, [], "r", None), "incomplete", 4,
                             error="the ray executor did not start", unrun=unrun)
    assert summary["unrun_trials"] == unrun
    root = ET.fromstring(R.render_junit(recs, [], summary))
    assert (root.get("tests"), root.get("skipped"), root.get("errors")) == ("5", "3", "1")
    cases = {c.get("name"): (s.get("name"), c.get("classname"), c.find("skipped"))
             for s in root.iter("testsuite") for c in s.iter("testcase")}
    assert {n: c[:2] for n, c in cases.items() if c[2] is not None} == {
        "v/t1/01": ("v", "t1"), "w/suite/row-2/00": ("w", "suite/row-2"),
        "w/t2/00": ("w", "t2")}  # as their records would say: variant, task (and row)
    assert cases["w/t2/00"][2].get("message") == (
        "not run: the ray executor did not start (`ce run --resume RUN` runs it)")
    assert root.find("testsuite[@name='w']").get("skipped") == "2"
    # a finished run has none, whatever it is given
    done = with_run_state(R.summary(recs, [], "r", None), "complete", 1, unrun=unrun)
    assert "unrun_trials" not in done
    assert ET.fromstring(R.render_junit(recs, [], done)).get("tests") == "1"


def test_junit_has_the_min_pass_rate_gate_of_each_variant():
    # `ce run --min-pass-rate 0.5`: variant b below it fails the run (exit 1), but the
    # JUnit file had only the trials, so a CI test report could not say why the job
    # failed, nor that a run with failed trials passed its gate
    recs = [record("a", "t1", criteria=[crit("c0", "file_exists", 1.0)]),
            record("a", "t2", status="FAILURE", criteria=[crit("c0", "file_exists", 0.0)]),
            record("b", "t1", status="FAILURE", criteria=[crit("c0", "file_exists", 0.0)]),
            record("b", "t2", status="ERROR", criteria=[])]
    summary = R.summary(recs, [], "r", {"min_pass_rate": 0.5})
    root = ET.fromstring(R.render_junit(recs, [], summary))
    a = root.find("testsuite[@name='a']/testcase[@name='a/--min-pass-rate 0.5']")
    assert a.find("failure") is None
    assert a.find("system-out").text == "1 of 2 trial(s) succeeded (50.0%)"
    b = root.find("testsuite[@name='b']/testcase[@name='b/--min-pass-rate 0.5']/failure")
    assert b.get("type") == "MIN_PASS_RATE"
    assert b.get("message") == "0 of 2 trial(s) succeeded (0.0%), below --min-pass-rate 0.5"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "3", "1")
    # without the gate, nothing is added
    plain = ET.fromstring(R.render_junit(recs, [], R.summary(recs, [], "r", None)))
    assert plain.get("tests") == "4"


def test_junit_error_falls_back_to_the_agent_outcome():
    rec = record("v", "t", status="ERROR", criteria=[],
                 outcome=("error", "the task has no reference solution"))
    root = ET.fromstring(R.render_junit([rec], []))
    assert root.find("testsuite/testcase/error").get("message") == \
        "agent error: the task has no reference solution"


def test_junit_strips_characters_xml_cannot_carry():
    rec = record("v", "t", status="ERROR", error="\x1b[31mred\x1b[0m \x00 done", criteria=[])
    root = ET.fromstring(R.render_junit([rec], []))
    assert root.find("testsuite/testcase/error").get("message") == "[31mred[0m  done"


# ---------------------------------------------------------------------------- hygiene


def test_import_does_not_load_polars():
    code = ("import sys, ce_runtime.report\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'polars'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_a_frame_is_built_once_per_list_of_records_and_never_reused_for_another(records):
    import msgspec

    from ce_runtime.store.record import as_records

    typed = as_records(records)
    first = R.trials_frame(typed)
    assert R.trials_frame(typed) is first and R.results_frame(typed) is \
        R.results_frame(typed)  # the metrics, summary and parquet of one list share it
    copy = list(typed)
    assert R.trials_frame(copy) is first  # the same records in a new list
    other = [msgspec.structs.replace(typed[0], status="ERROR"), *typed[1:]]
    changed = R.trials_frame(other)
    assert changed is not first and changed["status"][0] == "ERROR"
    assert R.trials_frame(typed[:-1]).height == len(typed) - 1
    assert R.trials_frame(typed)["status"].to_list() == first["status"].to_list()


def test_an_interrupted_run_is_never_reported_as_passed(tmp_path):
    """Ctrl-C after 2 of 6 trials, both passed: run.json, report.md and `ce report` say
    the run was interrupted (exit 1, the resume named), never PASSED."""
    from ce_runtime.report.render import render
    from ce_runtime.report.run_end import write_run_reports
    ok = _ok_records()
    summary = write_run_reports(str(tmp_path), "r", {}, ok, 6, True, None, [])
    assert summary["exit_code"] == 1
    assert summary["exit_reasons"][0] == (
        "the run was interrupted: 2 of 6 planned trial(s) ran; `ce run --resume RUN` "
        "runs the other 4")
    meta = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert (meta["status"], meta["exit_code"], meta["trials_planned"]) == (
        "interrupted", 1, 6)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "PASSED" not in text and "⚠️ **INTERRUPTED**" in text
    assert "- the run was interrupted: 2 of 6 planned trial(s) ran" in text
    assert render(str(tmp_path), "md") == text  # `ce report` says the same
    assert json.loads(render(str(tmp_path), "json"))["exit_code"] == 1
    # a finished run is unchanged
    (tmp_path / "done").mkdir()
    done = write_run_reports(str(tmp_path / "done"), "r", {}, ok, 2, False, None, [])
    assert (done["status"], done["exit_code"], done["exit_reasons"]) == ("complete", 0, [])


def test_the_run_and_its_variant_print_the_same_cost():
    """The costs of the README's first run: summed for the run and for its one variant
    in another order, they printed $0.3535 and $0.3536 in the same report.md."""
    costs = [0.0, 0.0402, 0.02355, 0.02355, 0.02355, 0.02355, 0.0069, 0.0144, 0.0069,
             0.0069, 0.0069, 0.02415, 0.028200000000000003, 0.0384, 0.039, 0.0474]
    recs = [record("default", f"t{i}", cost=c, criteria=[crit("c0", "file_exists", 1.0)])
            for i, c in enumerate(costs)]
    s = R.summary(recs, [], "r", None)
    assert s["cost_usd"] == s["variants"]["default"]["cost_usd"] == 0.35355
    text = R.render_markdown(s, recs, [])
    # t0's $0 is no cost reported: unknown (report/usage.py), so over 15 of the 16
    assert "| Cost | $0.3535 over 15 of 16 trial(s) |" in text
    assert "cost $0.3535 over 15 of 16 trial(s)." in text


@pytest.mark.parametrize("n", [3, 10, 1000])
def test_wilson_interval_ends_exactly_at_0_and_1(n):
    # no success: the lower bound is 0, not 5.6e-17; no failure: the upper is 1, not
    # 0.9999999999999999 (run.json and `ce compare` alike)
    from ce_runtime.report.intervals import wilson

    ok = [record("v", "t", repeat=i, criteria=[crit("c", "file_exists", 1.0)])
          for i in range(n)]
    bad = [record("v", "t", repeat=i, status="FAILURE",
                  criteria=[crit("c", "file_exists", 0.0)]) for i in range(n)]
    assert R.summary(ok, [], "r", None)["pass_rate_ci95"][1] == 1.0
    assert R.summary(bad, [], "r", None)["pass_rate_ci95"][0] == 0.0
    assert wilson(n, n)[1] == 1.0 and wilson(0, n)[0] == 0.0
    # in between, coder_eval's wilson_interval (3 of 7): unchanged
    low, high = wilson(3, 7)
    assert abs(low - 0.1582198552514697) < 1e-15 and abs(high - 0.7495416354723428) < 1e-15
    mixed = ok[:3] + [record("v", "t", repeat=10 + i, status="FAILURE",
                             criteria=[crit("c", "file_exists", 0.0)]) for i in range(4)]
    low, high = R.summary(mixed, [], "r", None)["pass_rate_ci95"]
    assert abs(low - 0.1582198552514697) < 1e-15 and abs(high - 0.7495416354723428) < 1e-15


def test_ce_runs_results_table_means_the_score_run_json_means(capsys):
    # one task per variant, so each table row's mean is its variant's run.json mean_score:
    # over the graded trials that have a score. An ERROR trial has none; the table
    # counted it as 0 (0.50 for a task whose one scored repeat had 1.00; 0.00 for one
    # that only errored, where run.json and report.md say "—")
    from ce_runtime.cli.run_output import summary_table

    recs = [record("mixed", "t", criteria=[crit("c", "file_exists", 1.0)]),
            record("mixed", "t", repeat=1, status="ERROR", error="pre_run failed"),
            record("errored", "t", status="ERROR", error="pre_run failed"),
            record("partly", "t", criteria=[crit("c", "file_exists", 1.0),
                                            crit("d", "file_exists", 0.0)],
                   status="FAILURE"),
            record("partly", "t", repeat=1, status="NOT_GRADED", score=1.0)]
    means = {v: b["mean_score"] for v, b in R.summary(recs, [], "r", None)["variants"].items()}
    assert means == {"mixed": 1.0, "errored": None, "partly": 0.5}
    summary_table(recs)
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows == {"mixed/t": ["2", "1", "1.00"], "errored/t": ["1", "0", "—"],
                    "partly/t": ["2", "0", "0.50"]}
