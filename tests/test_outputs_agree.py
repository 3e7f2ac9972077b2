"""Every output of a run says the same about each trial and about the run.

A run writes one fact in many places: task.json, trials.parquet and results.parquet,
run.json, report.md, report.html (its data, and the page as Chromium draws it), the
JUnit and SARIF files, `ce run`'s own lines, and the commands that read it back (`ce
report -f md|json|junit|html`, `ce explain`, `ce rescore`, `ce runs`, `ce compare`). Bugs
hid where two of them disagreed about one number (report.md's cost against the CLI's,
cache tokens missing from some), so each fact is checked here in every place that
carries it, against task.json (the trial's record) and run.json (the run's), for one
run that exercises most of them: the bundled example tasks (agentless, the real Claude
Code CLI against its scripted model, `judged.yaml` graded with scripted verdicts, a
dataset, an early stop), plus a failing trial whose session is mostly prompt-cache
reads and whose judges report cache tokens (one judge model has no rate), an ERROR and
a TIMEOUT trial; two variants, two repeats. The same checks run again on what `ce
rescore` writes.

A number shown rounded is checked as the rounding of the record's own value: a place
that rounded another value (a sum in another order, the trial's cost from elsewhere)
fails."""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

import pytest

from tests.engines import need
from tests.outputs_run import (
    JUDGE_KEYS,
    ZERO_USAGE,
    Outputs,
    assert_block,
    cells,
    cost_total,
    counted,
    failed_ids,
    graded,
    html_data,
    junit_cases,
    known_cost,
    known_tokens,
    known_turns,
    make_outputs,
    md_run_table,
    md_trial_rows,
    money,
    pct,
    rescore,
    tokens_total,
    two,
    usage_of,
)
from tests.test_agent_fidelity import missing
from tests.test_report_html import Page, browser  # noqa: F401 (a fixture)
from tests.test_run_e2e import ce, load_run_json

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Outputs:
    need(missing("claude-code"))
    return make_outputs(tmp_path_factory.mktemp("outputs"))


@pytest.fixture(scope="module")
def rescored(made) -> Outputs:
    return rescore(made)


@pytest.fixture(scope="module", params=["run", "rescored"])
def out(request) -> Outputs:
    """Each check below holds for the run and for its re-score."""
    return request.getfixturevalue("made" if request.param == "run" else "rescored")


# -- the run exercises what the checks are about --------------------------------------------
def test_the_run_has_every_kind_of_fact_to_check(made):
    recs = made.records()
    statuses = Counter(r["status"] for r in recs.values())
    assert {"SUCCESS", "FAILURE", "ERROR", "TIMEOUT"} <= set(statuses), statuses
    assert {r["variant_id"] for r in recs.values()} == {"plain", "with-notes"}
    assert {r["repeat"] for r in recs.values()} == {0, 1}
    assert any(r.get("row_id") for r in recs.values())
    assert any(r.get("stopped_early") for r in recs.values())
    assert any(usage_of(r)["cache_read_tokens"] for r in recs.values())
    judged = [r["judge_usage"] for r in recs.values() if r.get("judge_usage")]
    assert any(j["cache_read_tokens"] for j in judged)
    assert any(j["recorded"] for j in judged) and any(j.get("cost_unknown") for j in judged)
    run = load_run_json(made.run_dir)
    assert run["suite_gates"] and run["comparison"]


# -- task.json against the parquet files and run.json ---------------------------------------
def test_trials_parquet_says_what_each_task_json_says(out):
    import polars as pl

    recs = out.records()
    rows = pl.read_parquet(os.path.join(out.run_dir, "trials.parquet")).to_dicts()
    assert sorted(r["trial_id"] for r in rows) == sorted(recs)
    for row in rows:
        rec = recs[row["trial_id"]]
        use = usage_of(rec)
        assert row["status"] == rec["status"]
        assert row["success"] == (rec["status"] == "SUCCESS") == rec["success"]
        assert row["weighted_score"] == rec["weighted_score"]
        assert row["stopped_early"] == bool(rec.get("stopped_early"))
        assert row["duration_s"] == rec["duration_s"]
        assert row["error"] == rec.get("error")
        assert row["cost_unknown"] == rec.get("cost_unknown")
        assert row["expected_turns"] == rec.get("expected_turns")
        for key in ("input_tokens", "output_tokens", "cache_read_tokens",
                    "cache_write_tokens", "cost_usd", "turns", "tool_calls"):
            assert row[key] == use[key], (row["trial_id"], key)
        assert row["total_tokens"] == use["input_tokens"] + use["output_tokens"]
        assert row["n_criteria"] == len(rec["criteria"])
        assert row["n_failed_criteria"] == len(failed_ids(rec))
        judge = rec.get("judge_usage") or {}
        for key in JUDGE_KEYS:
            assert row[f"judge_{key}"] == judge.get(key), (row["trial_id"], key)


def test_results_parquet_says_what_each_criterion_in_task_json_says(out):
    import polars as pl

    recs = out.records()
    rows = pl.read_parquet(os.path.join(out.run_dir, "results.parquet")).to_dicts()
    want = {(t, c["id"]): (r, c) for t, r in recs.items() for c in r["criteria"]}
    assert sorted((r["trial_id"], r["criterion_id"]) for r in rows) == sorted(want)
    for row in rows:
        rec, crit = want[(row["trial_id"], row["criterion_id"])]
        assert row["status"] == rec["status"]
        assert row["stopped_early"] == bool(rec.get("stopped_early"))
        for key in ("type", "description", "kind", "score", "pass_threshold", "passed",
                    "weight", "gating", "advisory", "disabled", "error"):
            assert row[key] == crit[key], (row["trial_id"], row["criterion_id"], key)


def test_run_json_is_the_sum_of_its_trials_and_of_each_variant(out):
    recs = list(out.records().values())
    run = load_run_json(out.run_dir)
    assert_block(run, recs)
    assert set(run["variants"]) == {r["variant_id"] for r in recs}
    for variant, block in run["variants"].items():
        assert_block(block, [r for r in recs if r["variant_id"] == variant])
    assert run["exit_code"] == (0 if all(r["status"] == "SUCCESS" for r in recs)
                                and not run["suite_gates_failed"] else 1)
    assert run["suite_gates_failed"] == sum(not g["passed"] for g in run["suite_gates"])


# -- report.md -----------------------------------------------------------------------------
def test_report_md_shows_each_trial_as_its_task_json_says(out):
    recs = out.records()
    text = out.read("report.md")
    rows = md_trial_rows(text)
    assert sorted(rows) == sorted((r["variant_id"], r["task_id"], r["repeat"])
                                  for r in recs.values())
    for rec in recs.values():
        row = rows[(rec["variant_id"], rec["task_id"], rec["repeat"])]
        use = usage_of(rec)
        assert row["Status"].split()[-1] == rec["status"]
        assert row["Score"] == two(rec["weighted_score"])
        assert row["Turns"] == (str(use["turns"]) if known_turns(rec) else "—")
        assert row["Cost"] == money(known_cost(rec))
        expected = rec.get("expected_turns")
        if expected is not None:
            within = rec["status"] == "SUCCESS" and use["tool_calls"] + 1 <= 1.5 * expected
            assert row["Budget"] == f"{use['tool_calls'] + 1}/{expected} {'✓' if within else '✗'}"
        failed = failed_ids(rec)
        shown = re.search(r"(?:^|; )failed: ([^;]*)", row["Notes"])
        assert (shown.group(1).replace("`", "").split(", ") if shown else []) == failed
        assert ("stopped early" in row["Notes"]) == bool(rec.get("stopped_early"))
        assert ("error: " in row["Notes"]) == bool(rec.get("error"))

    # the Failures section: every trial with a failed criterion or an error, as recorded
    failures = {}
    if "## Failures" in text:
        section = text.split("## Failures", 1)[1].split("\n## ", 1)[0]
        for block in section.split("\n### ")[1:]:
            title, *lines = block.splitlines()
            found = re.fullmatch(r"`(.*)` — (\S+) \(score (\S+)\)", title)
            failures[found.group(1)] = (found.group(2), found.group(3), lines)
    assert sorted(failures) == sorted(t for t, r in recs.items()
                                      if failed_ids(r) or r.get("error"))
    for trial_id, (status, score, lines) in failures.items():
        rec = recs[trial_id]
        assert (status, score) == (rec["status"], two(rec["weighted_score"]))
        criteria = {c["id"]: c for c in rec["criteria"]}
        listed = [re.match(r"- `(\w+)` (\S+)(?: — .*)?: score (\S+) < (\S+)", line)
                  for line in lines if line.startswith("- `c")]
        assert [m.group(1) for m in listed] == failed_ids(rec)
        for m in listed:
            c = criteria[m.group(1)]
            assert (m.group(2), m.group(3), m.group(4)) == \
                (c["type"], two(c["score"]), two(c["pass_threshold"]))
        assert any(line.startswith("- **trial error:**") for line in lines) == \
            bool(rec.get("error"))


def test_report_md_run_table_and_variants_say_what_run_json_says(out):
    run = load_run_json(out.run_dir)
    recs = out.records()
    by_variant = defaultdict(list)
    for rec in recs.values():
        by_variant[rec["variant_id"]].append(rec)
    text = out.read("report.md")
    table = md_run_table(text)
    trials, by_status = re.fullmatch(r"(\d+) \((.*)\)", table["Trials"]).groups()
    assert int(trials) == run["trials"]
    assert counted(by_status) == run["by_status"]
    low, high = run["pass_rate_ci95"]
    assert table["Pass rate"] == f"{pct(run['pass_rate'])} (95% CI {pct(low)}–{pct(high)})"
    n = run.get("unscored")
    assert table["Mean score"] == two(run["mean_score"]) + (
        f" (over {run['graded'] - n} of {run['graded']} graded trials: {n} without a score)"
        if n else "")
    pak = run["pass_at_k"]
    assert table[f"pass@{pak['k']}"].startswith(
        f"{pak['passed']}/{pak['tasks']} tasks × variants ({pct(pak['rate'])}); "
        f"every repeat passed: {pak['passed_all']}/{pak['tasks']}")
    wet = run["within_expected_turns"]
    assert table["Within expected turns"] == \
        f"{wet['within']}/{wet['budgeted']} budgeted trials ({pct(wet['share'])})"
    saved = run.get("turns_avoided")
    assert table["Stopped early"] == f"{run['stopped_early']} trial(s)" + (
        f", <= {saved['at_most']} turn(s) avoided" if saved else "") + (
        f" by the {saved['trials']} with a max_turns"
        if saved and saved["trials"] < run["stopped_early"] else "")
    assert table["Tokens"] == tokens_total(run, list(recs.values()))
    assert table["Cost"] == cost_total(run, list(recs.values()))
    j = run["judges"]
    assert table["Judge tokens"] == (
        f"{j['input_tokens']:,} in / {j['output_tokens']:,} out / {j['cache_read_tokens']:,} "
        f"cache read / {j['cache_write_tokens']:,} cache write ({j['calls']} llm_judge "
        f"verdict(s), {j['recorded']} reused from the cache)")
    assert table["Judge cost"].startswith(
        f"{money(j['cost_usd'])} + unknown for {j['cost_unknown']['trials']} trial(s)")
    passed = "✅ **PASSED**" if run["exit_code"] == 0 else "❌ **FAILED**"
    assert f"{passed} — {run['passed']}/{run['graded']} trials succeeded " \
        f"({pct(run['pass_rate'])})" in text
    for v, block in run["variants"].items():
        lead = text.split(f"## Variant `{v}`\n\n", 1)[1].splitlines()[0]
        assert f"— {block['passed']}/{block['graded']} succeeded ({pct(block['pass_rate'])}), " \
            f"mean score {two(block['mean_score'])}, cost " \
            f"{cost_total(block, by_variant[v], 'unknown')}, " \
            f"judges {money(block['judges']['cost_usd'])}" in lead
    compared = {cells(line)[0].strip("`"): cells(line) for line in
                text.split("## Variant comparison", 1)[1].split("Paired over", 1)[0]
                .splitlines() if line.startswith("| `")}
    for v, block in run["variants"].items():
        low, high = block["pass_rate_ci95"]
        vpak = block["pass_at_k"]
        assert compared[v] == [f"`{v}`", str(block["trials"]), pct(block["pass_rate"]),
                               f"{pct(low)}–{pct(high)}", two(block["mean_score"]),
                               f"{vpak['passed']}/{vpak['tasks']}",
                               cost_total(block, by_variant[v])]


def test_suite_gates_agree_in_run_json_report_md_junit_and_html(out):
    run = load_run_json(out.run_dir)
    text = out.read("report.md")
    page = html_data(out.read("report.html")) if os.path.exists(
        os.path.join(out.run_dir, "report.html")) else None
    if page is not None:
        assert page["gates"] == run["suite_gates"]
    for g in run["suite_gates"]:
        title = f"### `{g['variant']}` · `{g['suite_id']}` · `{g['criterion']}` " \
            f"{g['criterion_type']} — {'✅ passed' if g['passed'] else '❌ failed'}"
        section = text.split(title + "\n", 1)[1].split("\n### ", 1)[0]
        shown = {c[0]: c[1:] for c in map(cells, section.splitlines())
                 if c and c[0] in g["metrics"]}
        for metric, (value, minimum, verdict) in shown.items():
            assert value == f"{g['metrics'][metric]:.3f}", metric
            limit = g["thresholds"].get(metric)
            assert minimum == ("—" if limit is None else f"{limit:g}")
            assert verdict == ("" if limit is None else "✓" if metric not in g["failed"]
                               else "✗ below")
        assert f"{g['n']} labelled result(s)" in section
    if out.junit is None:
        return
    cases = junit_cases(out.junit)
    for g in run["suite_gates"]:
        if g["thresholds"]:
            name = f"{g['variant']}/{g['suite_id']}/{g['criterion']} suite_thresholds"
            case = cases[(g["variant"], name)]
            assert case.find("failure") is None if g["passed"] else \
                case.find("failure").get("type") == "SUITE_GATE"


# -- report.html -----------------------------------------------------------------------------
def test_report_html_shows_each_trial_and_the_run_as_the_records_say(made):
    recs = made.records()
    run = load_run_json(made.run_dir)
    page = made.read("report.html")
    data = html_data(page)
    summary = data["summary"]
    for key, value in summary.items():
        assert value == run.get(key), key
    assert [v["id"] for v in data["variants"]] == list(run["variants"])
    for v in data["variants"]:
        for key, value in v.items():
            if key != "id":
                assert value == run["variants"][v["id"]].get(key), (v["id"], key)
    assert data["comparison"] == run["comparison"]
    rows = [dict(zip(data["columns"], row, strict=True)) for row in data["trials"]]
    assert sorted(r["trial_id"] for r in rows) == sorted(recs)
    for i, row in enumerate(rows):
        rec = recs[row["trial_id"]]
        use = usage_of(rec)
        assert (row["variant"], row["task"], row["row"], row["repeat"]) == \
            (rec["variant_id"], rec["task_id"], rec.get("row_id"), rec["repeat"])
        assert row["status"] == rec["status"]
        assert row["score"] == rec["weighted_score"]
        assert (row["turns"], row["tool_calls"]) == ((use["turns"], use["tool_calls"])
                                                     if known_turns(rec) else (None, None))
        assert row["tokens"] == (use["input_tokens"] + use["output_tokens"]
                                 if known_tokens(rec) else None)
        assert row["cost"] == known_cost(rec)
        assert row["duration"] == rec["duration_s"]
        assert row["early"] == bool(rec.get("stopped_early"))
        assert row["failed"] == failed_ids(rec)
        assert row["cost_unknown"] == rec.get("cost_unknown")
        assert (row["error"] is None) == (rec.get("error") is None)

        detail = html_data(page, f"ce-d{i}")
        assert detail["trial_id"] == rec["trial_id"]
        assert (detail["status"], detail["weighted_score"], detail["duration_s"]) == \
            (rec["status"], rec["weighted_score"], rec["duration_s"])
        assert {**ZERO_USAGE, **detail["usage"]} == use
        assert detail["cost_unknown"] == rec.get("cost_unknown")
        keys = ("id", "type", "score", "pass_threshold", "passed", "weight", "gating",
                "advisory", "disabled")
        assert [{k: c[k] for k in keys} for c in detail["criteria"]] == \
            [{k: c[k] for k in keys} for c in rec["criteria"]]
        # the arithmetic ends at the recorded score and status
        if rec["criteria"]:
            shown = "—" if rec["weighted_score"] is None else f"{rec['weighted_score']:.4g}"
            assert detail["arithmetic"][0].endswith(f" = {shown}")
            assert detail["arithmetic"][-1].endswith(f"-> {rec['status']}")
        # the timeline's last running totals are the trial's usage
        spent = [e for e in detail["timeline"] if e["k"] == "usage"]
        if spent:
            last = spent[-1]
            assert (last["total_in"], last["total_out"], last["total_cache_read"],
                    last["total_cache_write"]) == \
                (use["input_tokens"], use["output_tokens"], use["cache_read_tokens"],
                 use["cache_write_tokens"])
            assert spent[-1]["total_cost"] == pytest.approx(use["cost_usd"], abs=1e-6)


def test_report_html_in_a_browser_reads_as_report_md(made, browser):  # noqa: F811
    """What the page draws (its own number formatting, in JavaScript) against
    report.md's text for the same facts."""
    recs = made.records()
    md = made.read("report.md")
    table = md_run_table(md)
    rows = md_trial_rows(md)
    page = Page(browser, "file://" + os.path.join(made.run_dir, "report.html"))
    try:
        p = page.page
        shown = dict(zip(p.locator("#summary tr th").all_inner_texts(),
                         p.locator("#summary tr td").all_inner_texts(), strict=True))
        for key in ("Trials", "Pass rate", "Mean score", "Stopped early", "Tokens", "Cost",
                    "Judge tokens", "Judge cost", "Trial time"):
            # why a cost is unknown: inline in report.md, the page's tooltip
            inline = re.sub(r"(unknown for \d+ trial\(s\)): .*?(?= \(not in|$)", r"\1",
                            table[key])
            assert shown[key] == inline, key
        run = load_run_json(made.run_dir)
        assert shown["pass@k"].startswith(table[f"pass@{run['pass_at_k']['k']}"].split()[0])
        assert shown["Within expected turns"].split()[0] == \
            table["Within expected turns"].split()[0]
        variants = {cells[0]: cells for cells in (
            row.locator("td").all_inner_texts()
            for row in p.locator("#variant-table tbody tr").all())}
        compared = {c[0].strip("`"): c for c in map(cells, md.split(
            "## Variant comparison", 1)[1].split("Paired over", 1)[0].splitlines())
            if c and c[0].startswith("`")}
        for v, md_cells in compared.items():
            # md: variant, trials, pass rate, CI, mean score, pass@k, cost
            html_cells = variants[v]
            assert [html_cells[i] for i in (2, 4, 5, 6, 7, 9)] == \
                [md_cells[i] for i in (1, 2, 3, 4, 5, 6)]
        trials = {cells[0]: cells for cells in (
            row.locator("td").all_inner_texts()
            for row in p.locator("#trial-table tbody tr").all())}
        assert sorted(trials) == sorted(recs)
        for trial_id, cells_ in trials.items():
            rec = recs[trial_id]
            md_row = rows[(rec["variant_id"], rec["task_id"], rec["repeat"])]
            # trial, variant, task, repeat, status, score, turns, tools, tokens, cost, time
            status, _, badge = cells_[4].partition("stopped early")
            assert (status.strip(), bool(badge or _)) == \
                (rec["status"], bool(rec.get("stopped_early")))
            assert (cells_[5], cells_[6], cells_[9]) == \
                (md_row["Score"], md_row["Turns"], md_row["Cost"])
            assert cells_[10] == f"{rec['duration_s']:.1f}s"
        cached = recs["plain/cached/00"]
        use = usage_of(cached)
        p.locator("#trial-table tbody tr", has_text="plain/cached/00").click()
        header = p.locator("#detail p").first.inner_text()
        assert f"{use['input_tokens']:,} in / {use['output_tokens']:,} out / " \
            f"{use['cache_read_tokens']:,} cache read / {use['cache_write_tokens']:,} " \
            "cache write tokens" in header
        assert f"score {cached['weighted_score']:.3f}" in header
        assert money(use["cost_usd"]) in header
        timeline = p.locator("#detail table.tl").inner_text()
        # with thousands separators, as the header above says them
        assert f"(so far {use['input_tokens']:,} / {use['output_tokens']:,} / " \
            f"{use['cache_read_tokens']:,} cache read / {use['cache_write_tokens']:,} cache " \
            f"write, {money(use['cost_usd'])})" in timeline
        assert page.errors == []
    finally:
        page.close()


# -- JUnit ---------------------------------------------------------------------------------
def test_junit_says_what_each_trial_and_run_json_say(made):
    recs = made.records()
    run = load_run_json(made.run_dir)
    root = ET.parse(made.junit).getroot()
    cases = junit_cases(made.junit)
    trials = {name: case for (_, name), case in cases.items() if name in recs}
    assert sorted(trials) == sorted(recs)
    for trial_id, case in trials.items():
        rec = recs[trial_id]
        assert case.get("classname") == rec["task_id"]
        assert case.get("time") == f"{rec['duration_s']:.3f}"
        assert case.find("system-out").text.endswith(
            f"status {rec['status']}, weighted score {two(rec['weighted_score'])}")
        kind = {"SUCCESS": None, "ERROR": "error", "NOT_GRADED": "skipped"}.get(
            rec["status"], "failure")
        assert [child.tag for child in case if child.tag != "system-out"] == \
            ([kind] if kind else [])
        if kind == "failure":
            failure = case.find("failure")
            assert failure.get("type") == rec["status"]
            assert failure.get("message") == f"{rec['status']}: " + (
                ", ".join(failed_ids(rec)) or rec.get("error") or "no criterion failed")
        if kind == "error":
            assert case.find("error").get("message") == rec["error"]
        if kind in ("failure", "error"):
            criteria = {c["id"]: c for c in rec["criteria"]}
            # the message, then a line per failed criterion (and its error indented)
            message, *lines = (case.find(kind).text or "").splitlines()
            assert message == case.find(kind).get("message")
            lines = [line for line in lines if not line.startswith("  ")]
            assert [line.split()[0] for line in lines] == failed_ids(rec)
            for line in lines:
                c = criteria[line.split()[0]]
                assert f": score {two(c['score'])} < {two(c['pass_threshold'])}" in line

    gates = [g for g in run["suite_gates"] if g["thresholds"]]
    by_status = run["by_status"]
    not_graded, errors = by_status.get("NOT_GRADED", 0), by_status.get("ERROR", 0)
    assert int(root.get("tests")) == run["trials"] + len(gates)
    assert int(root.get("errors")) == errors
    assert int(root.get("skipped")) == not_graded
    assert int(root.get("failures")) == run["trials"] - run["passed"] - errors - \
        not_graded + sum(not g["passed"] for g in gates)
    assert root.get("time") == f"{run['duration_s']:.3f}"
    for suite in root.iter("testsuite"):
        block = run["variants"][suite.get("name")]
        assert suite.get("time") == f"{block['duration_s']:.3f}"
        assert int(suite.get("errors")) == block["by_status"].get("ERROR", 0)


def test_sarif_has_a_result_for_each_failure_the_reports_list(made):
    recs = made.records()
    with open(os.path.join(os.path.dirname(made.run_dir), "run.sarif"), encoding="utf-8") as fh:
        results = json.load(fh)["runs"][0]["results"]
    by_trial = defaultdict(list)
    for result in results:
        by_trial[result["properties"]["trial_id"]].append(result)
    for trial_id, rec in recs.items():
        found = by_trial.get(trial_id, [])
        for result in found:
            assert (result["properties"]["status"], result["properties"]["weighted_score"]) \
                == (rec["status"], rec["weighted_score"])
        criteria = {c["id"]: c for c in rec["criteria"]}
        failed = failed_ids(rec)
        # an ERROR trial has its own result, also beside its failed criteria (an agent
        # that crashed after writing files is graded)
        errors = [r for r in found if r["ruleId"] == "ce/trial-error"]
        assert len(errors) == (rec["status"] == "ERROR"), trial_id
        found = [r for r in found if r["ruleId"] != "ce/trial-error"]
        if failed:
            assert [r["partialFingerprints"]["ceTrialCriterion/v1"] for r in found] == \
                [f"{trial_id}#{c}" for c in failed]
            for result, cid in zip(found, failed, strict=True):
                c = criteria[cid]
                assert result["ruleId"] == f"ce/{c['type']}"
                assert result["level"] == ("error" if c["gating"] else "warning")
                assert f" scored {two(c['score'])} < {two(c['pass_threshold'])}" in \
                    result["message"]["text"]
        elif rec["status"] == "ERROR":
            assert found == []
            assert errors[0]["message"]["text"] == f"{trial_id}: ERROR: {rec['error']}"
        elif rec["status"] == "SUCCESS":
            assert found == []
        else:
            assert [r["ruleId"] for r in found] == ["ce/trial-status"]


# -- what `ce run` and `ce rescore` print --------------------------------------------------
def test_ce_runs_lines_say_what_the_records_and_run_json_say(made):
    recs = made.records()
    run = load_run_json(made.run_dir)
    assert made.exit_code == run["exit_code"]
    # the results table: per variant/task, trials, successes and the mean score (over
    # the graded trials that have one, as everywhere: an ERROR trial has none); a
    # dataset's rows are one line, variant/task/*
    groups = defaultdict(list)
    for rec in recs.values():
        task = f"{rec['suite_id']}/*" if rec.get("row_id") else rec["task_id"]
        groups[f"{rec['variant_id']}/{task}"].append(rec)
    assert any(key.endswith("/dataset_classification/*") for key in groups)
    lines = made.stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("trial group")))
    table = {}
    for line in lines[start + 1:start + 1 + len(groups)]:
        key, n, ok, mean = line.split()
        table[key] = (int(n), int(ok), mean)
    want = {}
    for key, group in groups.items():
        scored = [r["weighted_score"] for r in group
                  if graded(r) and r["weighted_score"] is not None]
        want[key] = (len(group), sum(r["status"] == "SUCCESS" for r in group),
                     two(sum(scored) / len(scored)) if scored else "—")
    assert table == want
    # a suite gate that passed: a line with its metrics beside their minimums (one that
    # failed has its `not passed:` line)
    passed = [g for g in run["suite_gates"] if g["thresholds"] and g["passed"]]
    assert passed
    for g in passed:
        shown = ", ".join(f"{m} {g['metrics'][m]:.3f} >= {t:g}"
                          for m, t in g["thresholds"].items())
        assert (f"suite gate {g['variant']}/{g['suite_id']}/{g['criterion']} passed: "
                f"{shown}") in lines
    done = re.search(r"^(\d+)/(\d+) trial\(s\): (.*); report: ", made.stdout, re.M)
    assert (int(done.group(1)), int(done.group(2))) == (run["trials"], run["trials_planned"])
    assert counted(done.group(3)) == run["by_status"]
    # the progress lines: each trial's status, time and score
    progress = {m.group(2): m for m in re.finditer(
        r"^\[\d+/\d+\] (\S+)\s+(\S+)  (\d+\.\d)s ?(score \S+)?(  \(stopped early\))?",
        made.stderr, re.M)}
    assert sorted(progress) == sorted(recs)
    for trial_id, m in progress.items():
        rec = recs[trial_id]
        assert m.group(1) == rec["status"]
        assert m.group(3) == f"{rec['duration_s']:.1f}"
        assert m.group(4) == (None if rec["weighted_score"] is None
                              else f"score {rec['weighted_score']:.2f}")
        assert bool(m.group(5)) == bool(rec.get("stopped_early"))


def test_ce_rescore_reproduces_every_trial_and_says_so(made, rescored):
    before, after = made.records(), rescored.records()
    assert sorted(after) == sorted(before)
    keys = ("status", "weighted_score", "success", "stopped_early", "usage", "duration_s",
            "error", "cost_unknown", "expected_turns")
    for trial_id, rec in after.items():
        old = before[trial_id]
        assert {k: rec.get(k) for k in keys} == {k: old.get(k) for k in keys}, trial_id
        assert [{k: v for k, v in c.items() if k != "outputs"} for c in rec["criteria"]] == \
            [{k: v for k, v in c.items() if k != "outputs"} for c in old["criteria"]]
        assert rec["previous"]["status"] == old["status"]
        assert rec["previous"]["weighted_score"] == old["weighted_score"]
        judge, old_judge = rec.get("judge_usage"), old.get("judge_usage")
        assert (judge is None) == (old_judge is None)
        if judge:  # every verdict reused, at the tokens and cost recorded when asked for
            assert {k: v for k, v in judge.items() if k != "recorded"} == \
                {k: v for k, v in old_judge.items() if k != "recorded"}
            assert judge["recorded"] == judge["calls"]
    shown = {m.group(1): m.groups()[1:] for m in re.finditer(
        r"^[ *] (\S+)\s+(\S+) -> (\S+)\s+(\S+)\s+->\s+(\S+)", rescored.stdout, re.M)}
    assert sorted(shown) == sorted(after)

    def three(v):
        return "-" if v is None else f"{v:.3f}"

    for trial_id, (was, now, score_was, score_now) in shown.items():
        rec = after[trial_id]
        assert (was, score_was) == (rec["previous"]["status"],
                                    three(rec["previous"]["weighted_score"]))
        assert (now, score_now) == (rec["status"], three(rec["weighted_score"]))
    calls = sum((r.get("judge_usage") or {}).get("calls", 0) for r in after.values())
    assert f"{len(after)} trial(s) re-scored, 0 changed; judges: {calls} recorded " \
        "verdict(s) reused, 0 asked; results: " in rescored.stdout
    assert rescored.exit_code == load_run_json(rescored.run_dir)["exit_code"]
    run, again = load_run_json(made.run_dir), load_run_json(rescored.run_dir)
    for key in ("trials", "by_status", "graded", "passed", "pass_rate", "pass_rate_ci95",
                "mean_score", "tokens", "cost_usd", "turns", "tool_calls", "pass_at_k",
                "within_expected_turns", "suite_gates", "comparison", "exit_code"):
        assert again[key] == run[key], key


# -- the commands that read a run back -------------------------------------------------------
@pytest.mark.parametrize("fmt, written", [("md", "report.md"), ("json", "run.json"),
                                          ("html", "report.html"), ("junit", None)])
def test_ce_report_writes_again_what_the_run_wrote(made, fmt, written):
    # (the JUnit's testcases name their task files relative to the current directory, as
    # CI test reports link them: the same file from where the run was made)
    where = os.path.dirname(made.run_dir) if fmt == "junit" else made.run_dir
    res = ce("report", made.run_dir, "-f", fmt, cwd=where)
    assert res.returncode == 0, res.stderr
    if fmt == "junit":
        with open(made.junit, encoding="utf-8") as fh:
            assert res.stdout == fh.read()
    elif fmt == "json":
        assert json.loads(res.stdout) == load_run_json(made.run_dir)
    else:
        assert res.stdout == made.read(written)


EXPLAINED = ("plain/cached/00", "plain/judged/00", "plain/early_stop/00",
             "with-notes/slow/01", "with-notes/errored/00", "with-notes/hello_world/01",
             "with-notes/dataset_classification/fixed-date-math/00")


def test_ce_explain_regrades_each_trial_to_what_task_json_says(made):
    recs = made.records()
    keys = ("id", "type", "score", "pass_threshold", "passed", "weight", "gating",
            "advisory", "disabled")
    for trial_id in EXPLAINED:
        rec = recs[trial_id]
        where = os.path.join(made.run_dir, trial_id)
        res = ce("explain", where, "-f", "json", cwd=made.run_dir)
        assert res.returncode == (0 if rec["status"] == "SUCCESS" else 1), res.stderr
        explained = json.loads(res.stdout)
        recorded = explained["recorded"]
        assert (recorded["status"], recorded["weighted_score"], recorded["differences"]) == \
            (rec["status"], rec["weighted_score"], [])
        text = ce("explain", where, cwd=made.run_dir).stdout
        shown = "-" if rec["weighted_score"] is None else f"{rec['weighted_score']:.4g}"
        assert f"(recorded status {rec['status']}, weighted score {shown})" in text
        if rec["status"] not in ("SUCCESS", "FAILURE"):  # a run limit or an ERROR
            assert recorded["status_kept"] and f"stays {rec['status']}" in text
        else:
            assert text.rstrip().endswith(f"-> {rec['status']}")
        if rec["status"] == "ERROR":
            continue  # graded for information only: the record has no criteria
        assert math.isclose(explained["weighted_score"], rec["weighted_score"])
        assert explained["stopped_early"] == bool(rec.get("stopped_early"))
        assert [{k: c[k] for k in keys} for c in explained["criteria"]] == \
            [{k: c[k] for k in keys} for c in rec["criteria"]]


def test_ce_runs_and_ce_compare_say_what_run_json_says(made, rescored):
    from datetime import datetime

    recs = made.records()
    run = load_run_json(made.run_dir)
    first = min(datetime.fromisoformat(r["started_at"]) for r in recs.values())
    # the run began before its first trial (the summary that replaced the first run.json
    # kept no time: `ce runs` listed the run as started when it ended)
    assert datetime.fromisoformat(run["created_at"]) <= first
    res = ce("runs", os.path.dirname(made.run_dir), "-f", "json", cwd=made.run_dir)
    (listed,) = [r for r in json.loads(res.stdout) if r["run_id"] == run["run_id"]]
    assert listed["time"] == run["created_at"]
    assert listed["status"] == run["status"]
    assert listed["tasks"] == len({(r["variant_id"], r["task_id"]) for r in recs.values()})
    for key in ("trials", "graded", "passed", "pass_rate"):
        assert listed[key] == run[key], key
    res = ce("compare", made.run_dir, rescored.run_dir, "-f", "json", cwd=made.run_dir)
    assert res.returncode == 0, res.stderr
    compared = json.loads(res.stdout)
    for side, where in (("a", made), ("b", rescored)):
        block = load_run_json(where.run_dir)
        for key in ("trials", "graded", "passed", "pass_rate", "pass_rate_ci95",
                    "mean_score"):
            assert compared[side][key] == block[key], (side, key)
        # when the run began (run.json's created_at); a re-score's has none: its first
        # trial's start
        began = datetime.fromisoformat(run["created_at"]) if side == "a" else first
        assert datetime.fromisoformat(compared[side]["started_at"]) == began, side
    assert compared["matched_trials"] == run["trials"]
    assert not compared["regressions"] and not compared["improvements"]
