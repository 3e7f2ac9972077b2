"""Which usage a trial measured (ce_runtime/report/usage.py), on task.json-shaped records
through run.json's summary: a value the trial did not measure is unknown and moves no
mean. The end-to-end runs are tests/test_usage_compare.py."""

from __future__ import annotations

from ce_runtime import report as R
from tests.test_report import record


def per_trial(records) -> dict:
    return R.summary(records, [], "r", {})["variants"]["v"]["per_trial"]


def test_a_cost_with_no_rate_is_unknown_and_its_tokens_are_not():
    priced = record("v", "a", repeat=0, cost=0.02, tokens=(3000, 300))
    unpriced = dict(record("v", "a", repeat=1, cost=0.0, tokens=(1000, 100)),
                    cost_unknown="model 'house' has no rate on ce's rate card")
    pt = per_trial([priced, unpriced])
    assert pt["cost_usd"] == {"n": 1, "mean": 0.02, "median": 0.02}  # not $0.01 over 2
    assert pt["input_tokens"] == {"n": 2, "mean": 2000.0, "median": 2000.0}
    assert pt["output_tokens"]["mean"] == 200.0


def test_an_agent_that_never_ran_measured_no_turn_but_its_wall_time():
    ran = record("v", "a", turns=4, tool_calls=3, duration=10.0)
    lost = record("v", "b", status="ERROR", error="sandbox lost before the agent started",
                  outcome=None, turns=0, tool_calls=0, tokens=(0, 0), cost=0.0,
                  duration=2.0)
    pt = per_trial([ran, lost])
    assert pt["turns"] == {"n": 1, "mean": 4.0, "median": 4.0}
    assert pt["tool_calls"]["mean"] == 3.0
    assert pt["input_tokens"]["n"] == pt["cost_usd"]["n"] == 1
    assert pt["duration_s"] == {"n": 2, "mean": 6.0, "median": 6.0}


def test_an_agentless_trial_and_one_that_reported_no_usage():
    none = dict(record("v", "a", turns=0, tool_calls=0, tokens=(0, 0), cost=0.0),
                agent="none")
    oracle = dict(record("v", "b", turns=2, tool_calls=1, tokens=(0, 0), cost=0.0),
                  agent="oracle")
    pt = per_trial([none, oracle])
    assert pt["turns"] == {"n": 1, "mean": 2.0, "median": 2.0}  # the oracle's own
    for m in ("input_tokens", "output_tokens", "cost_usd"):
        assert pt[m] == {"n": 0, "mean": None, "median": None}, m
    # a variant with no graded trial at all still has its (unknown) usage
    ungraded = record("v", "c", status="NOT_GRADED")
    assert per_trial([ungraded])["turns"] == {"n": 0, "mean": None, "median": None}


def test_report_md_says_unknown_for_a_variant_that_measured_nothing():
    recs = [record("base", "a", turns=3, cost=0.01),
            dict(record("none", "a", turns=0, tool_calls=0, tokens=(0, 0), cost=0.0),
                 agent="none")]
    summary = R.summary(recs, [], "r", {})
    md = R.render_markdown(summary, recs, [])
    assert "| `none` | 1 | — | — | — | — | — | 10.0s (10.0s) |" in md
    assert "| `none` | 1 | — | — | — | — | — | ×1.00 (±0.0%) |" in md


def test_the_error_trials_a_variants_usage_is_over_are_counted():
    """A variant's usage is over its graded trials (any status but NOT_GRADED): an ERROR
    that was graded and one that never reached grading (no score) are among them, said
    in its `per_trial` and in report.md's Trials cell; a NOT_GRADED trial is not."""
    recs = [record("base", "a"), record("base", "b"), record("base", "c"),
            dict(record("v", "a", status="ERROR", error="the agent failed"),
                 weighted_score=0.0),
            record("v", "b", status="ERROR", error="pre_run failed", turns=0,
                   tool_calls=0, tokens=(0, 0), cost=0.0, outcome=None),
            record("v", "c", status="NOT_GRADED")]
    summary = R.summary(recs, [], "r", {})
    pt = summary["variants"]["v"]["per_trial"]
    assert (pt["trials"], pt["errors"], pt["before_grading"]) == (2, 2, 1)
    assert pt["turns"]["n"] == 1  # the ERROR before grading measured no turn
    pairs = summary["comparison"][0]["per_trial"]
    assert (pairs["trials"], pairs["errors"], pairs["before_grading"],
            pairs["baseline_errors"], pairs["baseline_before_grading"]) == (2, 2, 1, 0, 0)
    md = R.render_markdown(summary, recs, [])
    assert "| `base` | 3 | 3.0 (3.0) |" in md
    assert "| `v` | 2 (2 ERROR, 1 never reached grading) | 3.0 (3.0), known for 1 of 2 |" in md
    assert "| `v` | 2 (variant: 2 ERROR, 1 never reached grading) | ×1.00 (±0.0%) over 1 |" \
        in md
