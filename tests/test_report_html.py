"""The HTML report in a real browser: Playwright (Python) driving Debian's Chromium
(`apt-get install chromium`; never a downloaded browser).

A real run is made first (tests/report_run.py: two variants, a classification suite with
wrong answers, an early stop, a failing file check) and `ce run`'s own report.html is
opened from disk. Checked: no console error, a trial opens on click with its criteria,
timeline and workspace diff, filters narrow the table, sorting, the confusion matrix's
counts against results.parquet, early stops marked, and paging over 10,000 synthetic
rows. Screenshots are kept under $CE_TEST_ARTIFACTS (else the test's tmp_path).

Without chromium or playwright the tests skip with the reason; CI (CE_REQUIRE_ENGINES=1)
fails instead, so they never skip unnoticed there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.engines import need
from tests.report_run import CE, make_run

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def _missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"no {CHROMIUM} (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


@pytest.fixture(scope="module")
def browser():
    need(_missing())
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    need(_missing())
    return make_run(tmp_path_factory.mktemp("report-html"))


@pytest.fixture
def artifacts(tmp_path, request):
    base = os.environ.get("CE_TEST_ARTIFACTS")
    path = os.path.join(base, "report_html") if base else str(tmp_path)
    os.makedirs(path, exist_ok=True)
    return path


class Page:
    """A page with every console error and uncaught exception collected."""

    def __init__(self, browser, url: str):
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("console", lambda m: self.errors.append(m.text)
                     if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", state="attached")

    def rows(self) -> list[str]:
        return self.page.locator("#trial-table tbody tr td:first-child").all_inner_texts()

    def panel_line(self, trial: str) -> str:
        """The trial panel's first line (status, score, usage) of `trial`, opened from
        the trials table (a panel already open is closed first)."""
        self.page.keyboard.press("Escape")
        self.page.locator("#trial-table tbody tr", has_text=trial).click()
        return self.page.locator("#detail p").first.inner_text()

    def close(self):
        self.page.close()


@pytest.fixture
def page(browser, run_dir):
    p = Page(browser, "file://" + os.path.join(run_dir, "report.html"))
    yield p
    p.close()


def _trials(run_dir):
    import polars as pl

    return pl.read_parquet(os.path.join(run_dir, "trials.parquet"))


def _report_of_edited(browser, run_dir, tmp_path, trials) -> Page:
    """report.html of a copy of the run whose trials.parquet is `trials` (an edit of
    the run's), open in a Page."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    trials.write_parquet(copy / "trials.parquet")
    proc = subprocess.run([*CE, "report", str(copy), "-f", "html", "-o",
                           str(copy / "report.html")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return Page(browser, "file://" + str(copy / "report.html"))


def test_loads_without_errors(page, run_dir, artifacts):
    p = page.page
    assert p.locator("#verdict").inner_text() == "FAILED"
    trials = _trials(run_dir)
    rate = trials["success"].sum() / trials.height
    assert p.locator("#pass-rate").inner_text() == f"{100 * rate:.1f}%"
    assert "Wilson interval" in p.locator("#top").inner_text()
    # "graded trials" read as "reached grading", ERROR ones included: said plainly
    assert f"{trials['success'].sum()}/{trials.height} trials succeeded — pass rate" in \
        p.locator("#top").inner_text()
    assert p.locator("#variant-table tbody tr").count() == 2
    with open(os.path.join(run_dir, "run.json")) as fh:
        variants = json.load(fh)["variants"]
    shown = p.locator("#variant-table tbody tr td:nth-child(2)").all_inner_texts()
    assert shown == [" / ".join(x for x in (", ".join(v.get("agents") or []),
                                            ", ".join(v.get("models") or [])) if x) or "—"
                     for v in variants.values()]  # agents, then models: never one list
    assert p.locator("svg.variant-chart circle").count() == 2
    assert p.locator("#paired-table tbody tr").count() == 2  # score and pass rate
    assert len(page.rows()) == trials.height
    p.screenshot(path=os.path.join(artifacts, "report.png"), full_page=True)
    assert page.errors == []
    # nothing but the file itself was requested: no network at view time
    assert all(u.startswith("file://") for u in page.requests), page.requests


def test_usage_per_trial_is_drawn_as_report_md_shows_it(page, run_dir):
    """The variants' usage per trial (report/usage_text.py) reads in the page as in
    report.md, cell for cell; the oracle agent calls no model: its tokens and cost are
    unknown ("—"), never $0."""
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        part = fh.read().split("### Usage per trial", 1)[1].split("\n### ", 1)[0]
    md = [[c.strip().strip("`") for c in line.strip("|").split("|")]
          for line in part.splitlines() if line.startswith("| `")]
    p = page.page
    drawn = [row.locator("td").all_inner_texts() for table in ("usage-table",
                                                                 "usage-change-table")
             for row in p.locator(f"#{table} tbody tr").all()]
    assert drawn == md and len(drawn) == 3  # two variants, one against the baseline
    for row in drawn[:2]:
        assert re.fullmatch(r"\d+", row[1])  # the trials it is over, none of them ERROR
        assert row[4:7] == ["—", "—", "—"]  # input tokens, output tokens, cost
        assert re.fullmatch(r"\d+\.\d \(\d+\.\d\)", row[2])  # turns
    assert page.errors == []


def test_a_variant_of_two_agents_is_not_read_as_agent_and_model(browser, run_dir, tmp_path):
    with open(os.path.join(run_dir, "report.html"), encoding="utf-8") as fh:
        html = fh.read()
    assert '"agents":["oracle"]' in html
    html = html.replace('"agents":["oracle"]', '"agents":["none","claude-code"]')
    path = tmp_path / "report.html"
    path.write_text(html, encoding="utf-8")
    p = Page(browser, "file://" + str(path))
    try:
        cells = p.page.locator("#variant-table tbody tr td:nth-child(2)").all_inner_texts()
        assert cells and all(c.startswith("none, claude-code") for c in cells), cells
        assert p.errors == []
    finally:
        p.close()


def test_trial_opens_on_click(page, artifacts):
    p = page.page
    assert p.locator("#detail").is_hidden()
    p.locator("#trial-table tbody tr", has_text="plain/files/00").click()
    assert p.locator("#detail").is_visible()
    assert p.locator("#detail-title").inner_text() == "plain/files/00"
    detail = p.locator("#detail")
    assert detail.locator(".crit").count() == 3
    assert detail.locator(".crit.fail").count() == 1  # c2: NOTES.md is missing
    assert "the report can be shown" in detail.inner_text()
    assert 'path: "NOTES.md"' in detail.locator(".crit[data-criterion='c2']").inner_text()
    # why it failed, as `ce explain` says it first (kept in evidence.json by the run)
    assert detail.locator(".crit[data-criterion='c2'] ul.found li").all_inner_texts() == \
        ["'NOTES.md' matches nothing"]
    assert detail.locator(".crit[data-criterion='c0'] ul.found").count() == 0  # it passed
    assert "shown" in detail.locator(".crit[data-criterion='c1'] pre").first.inner_text()
    assert "weighted score = (c0 1×1 + c1 1×1 + c2 0×1) / 3" in \
        detail.locator("pre.arithmetic").inner_text()
    tl = detail.locator("table.tl").inner_text()
    assert "Write" in tl and "cat report.txt" in tl and "agent ended: finished" in tl
    diff = detail.locator("tr.file[data-path='report.txt'] + tr pre.diff").inner_text()
    assert "-status: pending" in diff and "+status: ok" in diff
    assert detail.locator("tr.file[data-path='README.md'] td.fs-unchanged").count() == 1
    p.screenshot(path=os.path.join(artifacts, "trial.png"))
    p.keyboard.press("Escape")
    assert p.locator("#detail").is_hidden()
    assert page.errors == []


def test_a_cost_no_rate_prices_is_shown_unknown_not_as_a_sum(browser, run_dir, tmp_path):
    """A trial whose cost is unknown (report/usage.py's rule: its model has no rate, or
    it reported none, as the oracle's trials here): its cost cell is "—" (the no-rate
    reason in a tooltip), its panel says "cost unknown", and the run's and its variant's
    cost are the sum over the trials of known cost, over how many; they said $0.0000."""
    import polars as pl

    trials = _trials(run_dir)
    why = "model my-local-llm has no rate (add it under agent.pricing)"
    variant = trials["variant_id"][0]
    unknown, priced, oracle = trials.filter(pl.col("variant_id") == variant)["trial_id"][:3]
    p = _report_of_edited(browser, run_dir, tmp_path, trials.with_columns(
        pl.when(pl.col("trial_id") == unknown).then(pl.lit(why))
        .otherwise(pl.col("cost_unknown")).alias("cost_unknown"),
        pl.when(pl.col("trial_id") == priced).then(pl.lit(0.02))
        .otherwise(pl.col("cost_usd")).alias("cost_usd")))
    try:
        page = p.page
        row = page.locator("#trial-table tbody tr", has_text=unknown)
        cost_cell = row.locator("td:nth-child(10)")
        assert cost_cell.inner_text() == "—"
        assert cost_cell.locator("span").get_attribute("title") == why
        others = page.locator("#trial-table tbody tr td:nth-child(10)").all_inner_texts()
        assert sorted(others) == sorted(["$0.0200"] + ["—"] * (trials.height - 1))
        assert "$0.0000" not in page.locator("body").inner_text()
        run_cost = page.locator("#summary tr", has_text="Cost").locator("td")
        assert run_cost.inner_text() == f"$0.0200 over 1 of {trials.height} trial(s); " \
            "1 unpriced"
        assert run_cost.locator("span").get_attribute("title") == why
        n = trials.filter(pl.col("variant_id") == variant).height
        cells = page.locator("#variant-table tbody tr", has_text=variant) \
            .locator("td:last-child").all_inner_texts()
        assert cells == [f"$0.0200 over 1 of {n} trial(s); 1 unpriced"]
        row.click()
        assert f"cost unknown ({why})" in page.locator("#detail").inner_text()
        assert " · cost unknown · " in p.panel_line(oracle)
        assert " · $0.0200 · " in p.panel_line(priced)
        assert p.errors == []
    finally:
        p.close()


def test_unknown_tokens_and_turns_are_shown_unknown_not_as_0(browser, run_dir, tmp_path):
    """Tokens a trial did not report (the oracle's trials here) and the turns and tool
    calls of a trial where no agent ran (`agent: none`) are unknown (report/usage.py's
    rule), as its cost is: the table's Tokens cells said 0 (and an agentless trial's
    Turns and Tools 0), the run's Tokens row "0 in / 0 out" and the panel "0 in / 0 out
    tokens". Now "—" and "unknown"; the run's tokens over how many trials knew them."""
    import polars as pl

    trials = _trials(run_dir)
    measured, agentless, oracle = trials["trial_id"][:3]
    p = _report_of_edited(browser, run_dir, tmp_path, trials.with_columns(
        pl.when(pl.col("trial_id") == measured).then(pl.lit(1000))
        .otherwise(pl.col("input_tokens")).alias("input_tokens"),
        pl.when(pl.col("trial_id") == measured).then(pl.lit(200))
        .otherwise(pl.col("output_tokens")).alias("output_tokens"),
        pl.when(pl.col("trial_id") == agentless).then(pl.lit("none"))
        .otherwise(pl.col("agent")).alias("agent"),
        pl.when(pl.col("trial_id") == agentless).then(pl.lit(None))
        .otherwise(pl.col("outcome_reason")).alias("outcome_reason")))
    try:
        page = p.page

        def cells(trial):  # Turns, Tools, Tokens
            row = page.locator("#trial-table tbody tr", has_text=trial)
            return [row.locator(f"td:nth-child({i})").inner_text() for i in (7, 8, 9)]

        assert cells(measured)[2] == "1,200"
        assert cells(agentless) == ["—", "—", "—"]
        turns, tools, tokens = cells(oracle)
        assert tokens == "—" and turns.isdigit() and tools.isdigit()
        tokens = page.locator("#trial-table tbody tr td:nth-child(9)").all_inner_texts()
        assert sorted(tokens) == sorted(["1,200"] + ["—"] * (trials.height - 1))
        run_tokens = page.locator("#summary tr", has_text="Tokens").first.locator("td")
        assert run_tokens.inner_text() == f"1,000 in / 200 out over 1 of {trials.height} " \
            "trial(s)"
        assert " · turns unknown, tool calls unknown · tokens unknown · " in \
            p.panel_line(agentless)
        assert f" · {turns} turn(s), {tools} tool call(s) · tokens unknown · " in \
            p.panel_line(oracle)
        assert " · 1,000 in / 200 out tokens · " in p.panel_line(measured)
        assert p.errors == []
    finally:
        p.close()


def test_early_stop_is_marked(page, run_dir):
    p = page.page
    early = _trials(run_dir).filter("stopped_early")
    assert early.height == 2
    # each stopped after 1 of the default max_turns 100: at most 99 turns saved each
    assert "2 trial(s), <= 198 turn(s) avoided" in p.locator("body").inner_text()
    assert p.locator("#trial-table .badge.early").count() == early.height
    p.locator("#early-only").check()
    assert sorted(page.rows()) == sorted(early["trial_id"].to_list())
    p.locator("#trial-table tbody tr").first.click()
    text = p.locator("#detail").inner_text()
    assert "Early stop" in text and "decided by c0" in text
    assert "live monitor: c0 decided pass" in text
    assert "advisory — not gated" in text  # c1 file_exists was not armed
    assert page.errors == []


def test_filters_narrow_the_table(page, run_dir):
    p = page.page
    trials = _trials(run_dir)
    p.locator("#filter").fill("files")
    assert sorted(page.rows()) == ["plain/files/00", "with-notes/files/00"]
    assert p.locator("#count").inner_text() == f"2 of {trials.height} trials"
    p.locator("#filter").fill("")
    p.locator("#status-filter").select_option("FAILURE")
    failed = trials.filter(trials["status"] == "FAILURE")["trial_id"].to_list()
    assert sorted(page.rows()) == sorted(failed)
    p.locator("#variant-filter").select_option("with-notes")
    assert sorted(page.rows()) == sorted(t for t in failed if t.startswith("with-notes/"))
    p.locator("#filter").fill("c2")  # a failed criterion's id
    assert page.rows() == []  # with-notes has NOTES.md: its files trial passed
    p.locator("#variant-filter").select_option("")
    assert page.rows() == ["plain/files/00"]
    assert page.errors == []


def test_tasks_table(page, run_dir):
    """Per task, each variant's passes over its trials; sortable; a click filters the
    trials to that task."""
    import polars as pl

    p = page.page
    trials = _trials(run_dir)
    per = trials.group_by("task_id").agg(pl.col("success").mean().alias("rate"))
    assert p.locator("#task-table tbody tr").count() == per.height
    files = p.locator("#task-table tbody tr[data-task='files']")
    assert files.locator("td").all_inner_texts()[1:5] == ["2", "50.0%", "0/1 · 0.67",
                                                          "1/1 · 1.00"]
    p.locator("#task-table th[data-col='rate']").click()
    rates = [float(t.rstrip("%")) for t in
             p.locator("#task-table tbody tr td:nth-child(3)").all_inner_texts()]
    assert rates == sorted(rates)
    assert rates == sorted(round(100 * r, 1) for r in per["rate"].to_list())
    p.locator("#task-filter").fill("classify")
    assert p.locator("#task-table tbody tr").count() == 6
    p.locator("#task-filter").fill("files")
    p.locator("#task-table tbody tr[data-task='files']").click()
    assert sorted(page.rows()) == ["plain/files/00", "with-notes/files/00"]
    assert page.errors == []


def test_sort_by_score(page):
    p = page.page
    p.locator("#trial-table th[data-col='score']").click()
    scores = [float(s) for s in p.locator("#trial-table tbody tr td:nth-child(6)")
              .all_inner_texts()]
    assert scores == sorted(scores)
    p.locator("#trial-table th[data-col='score']").click()
    scores = [float(s) for s in p.locator("#trial-table tbody tr td:nth-child(6)")
              .all_inner_texts()]
    assert scores == sorted(scores, reverse=True)


def test_confusion_matrix_counts(page, run_dir):
    """Every heat-map cell against the counts computed from results.parquet."""
    import polars as pl

    results = pl.read_parquet(os.path.join(run_dir, "results.parquet"))
    want = (results.filter(pl.col("kind") == "classification")
            .group_by("variant_id", "suite_id", "criterion_id", "expected", "observed")
            .len())
    expected = {(r["variant_id"], r["expected"], r["observed"]): r["len"]
                for r in want.iter_rows(named=True)}
    p = page.page
    got = {}
    gates = p.locator("#gates .gate")
    assert gates.count() == 2
    for i in range(gates.count()):
        gate = gates.nth(i)
        variant = gate.get_attribute("data-gate").split("/")[0]
        cells = gate.locator("svg.confusion g.cm-cell")
        assert cells.count() == 4
        for j in range(cells.count()):
            c = cells.nth(j)
            n = int(c.get_attribute("data-count"))
            assert c.locator("text").text_content() == str(n)
            if n:
                got[(variant, c.get_attribute("data-expected"),
                     c.get_attribute("data-observed"))] = n
    assert got == expected
    assert page.errors == []


def test_ten_thousand_rows_page(browser, run_dir, tmp_path, artifacts):
    """10,000 trials (synthetic rows, no detail): the table pages, filters and sorts."""
    from ce_runtime.report.html_page import render_html

    rows = []
    for i in range(10_000):
        status = "SUCCESS" if i % 3 else "FAILURE"
        rows.append([f"v/task{i:05d}/00", "v", f"task{i:05d}", None, 0, status,
                     1.0 if i % 3 else 0.25, 2, 1, 10, 0.001, 0.5, i % 97 == 0, None,
                     [] if i % 3 else ["c0"], None, None])
    from ce_runtime.report.html import COLUMNS

    data = {"run_id": "synthetic", "summary": {"exit_code": 1, "exit_reasons": [],
            "trials": 10_000, "by_status": {}, "graded": 10_000, "passed": 6666,
            "pass_rate": 0.6666, "pass_rate_ci95": [0.657, 0.676], "tokens": {}},
            "variants": [], "comparison": [], "paired": [], "paired_note": None,
            "gates": [], "columns": list(COLUMNS), "trials": rows, "details": None}
    path = tmp_path / "big.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = Page(browser, f"file://{path}")
    try:
        assert len(page.rows()) == 100
        assert page.page.locator("#page-info").inner_text() == "page 1 of 100"
        page.page.locator("#next").click()
        assert page.rows()[0] == "v/task00100/00"
        page.page.locator("#status-filter").select_option("FAILURE")
        assert page.page.locator("#count").inner_text() == "3334 of 10000 trials"
        page.page.locator("#filter").fill("task0999")
        assert page.rows() == ["v/task09990/00", "v/task09993/00", "v/task09996/00",
                               "v/task09999/00"]
        page.page.locator("#trial-table tbody tr").first.click()
        assert "without per-trial detail" in page.page.locator("#detail").inner_text()
        page.page.screenshot(path=os.path.join(artifacts, "big.png"))
        assert page.errors == []
    finally:
        page.close()


def test_no_chromium_means_skip_with_reason(monkeypatch):
    """The skip names what is missing (CI turns it into a failure: CE_REQUIRE_ENGINES)."""
    monkeypatch.setattr(os.path, "exists", lambda p: False)
    assert "apt-get install -y chromium" in _missing()


def _report_page(browser, run_dir: str, tmp_path) -> Page:
    """The run's report.html as `ce report -f html` renders it, open in the browser."""
    from tests.test_run_e2e import ce

    res = ce("report", run_dir, "-f", "html", "-o", "r.html", cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    return Page(browser, "file://" + str(tmp_path / "r.html"))


def test_the_judges_cost_is_shown_next_to_the_agents(browser, tmp_path):
    """report.html's summary: the llm_judge calls' tokens and cost (their unknown part
    said, with the reason), as report.md shows them."""
    from tests.test_judge_usage import PRICED, UNKNOWN, judged_run

    p = _report_page(browser, judged_run(tmp_path), tmp_path)
    try:
        rows = p.page.locator("#summary tr")
        tokens = rows.filter(has_text="Judge tokens").locator("td").inner_text()
        assert tokens == ("1,500 in / 300 out / 2,000 cache read / 400 cache write "
                          "(2 llm_judge verdict(s), 0 reused from the cache)")
        judge_cost = rows.filter(has_text="Judge cost").locator("td")
        assert judge_cost.inner_text() == (f"${PRICED:.4f} + unknown for 1 trial(s) "
                                           "(not in the agent's cost)")
        assert judge_cost.locator("span span").get_attribute("title") == UNKNOWN
        # the agent (none) reported no cost: unknown, not $0 (report/usage.py's rule)
        assert rows.filter(has_text="Cost").first.locator("td").inner_text() == "—"
        assert p.errors == []
    finally:
        p.close()


@pytest.mark.slow
def test_the_agent_judge_sessions_are_counted_with_the_judges(browser, tmp_path):
    """report.html says the agent_judge sessions apart from the llm_judge verdicts, and
    counts their cost in the judges' (as report.md does)."""
    from tests.test_judge_usage import agent_judged_run

    p = _report_page(browser, agent_judged_run(tmp_path), tmp_path)
    try:
        rows = p.page.locator("#summary tr")
        tokens = rows.filter(has_text="Judge tokens").locator("td").inner_text()
        assert tokens == ("4,400 in / 350 out / 7,000 cache read / 1,100 cache write "
                          "(1 llm_judge verdict(s), 1 agent_judge session(s), 0 reused "
                          "from the cache)")
        assert rows.filter(has_text="Judge cost").locator("td").inner_text() == \
            "$0.0247 (not in the agent's cost)"
        assert p.errors == []
    finally:
        p.close()


def test_a_number_is_rounded_as_report_md_rounds_it(browser, tmp_path):
    """report.html shows a number as report.md, JUnit and `ce run` do (report/text.py:
    the value itself rounded, a tie to even). JavaScript's toFixed rounds a tie up: 9 of
    16 trials passing was 56.2% in report.md and 56.3% in report.html, a score of 0.625
    0.62 and 0.63, $0.03125 $0.0312 and $0.0313, and 119.5 s of trial time "1m 60s"
    (report.md: 2m 00s). The table carried a score rounded to 4 places and a time to
    3, which a second rounding could move (0.134999 became 0.135, shown 0.14 against
    report.md's 0.13)."""
    from ce_runtime.report.html import COLUMNS
    from ce_runtime.report.html import rows as table_rows
    from ce_runtime.report.html_page import render_html
    from ce_runtime.report.text import fmt_cost, fmt_duration, fmt_pct, fmt_score
    from ce_runtime.store.record import as_record
    from tests.test_report import record

    trials = [("tie", 0.625, 0.03125, 2.25), ("near", 0.13499999999999998, 0.00004999999,
                                             2.3499999999)]
    rows = table_rows([as_record(record("v", task, score=score, cost=cost, duration=duration,
                                        turns=1, tool_calls=0, tokens=(10, 0)))
                       for task, score, cost, duration in trials])
    summary = {"exit_code": 1, "exit_reasons": [], "trials": 16,
               "by_status": {"SUCCESS": 9, "FAILURE": 7}, "graded": 16, "passed": 9,
               "pass_rate": 0.5625, "pass_rate_ci95": [0.0625, 0.9375], "mean_score": 0.625,
               "tokens": {}, "cost_usd": 0.03125, "duration_s": 119.5,
               "within_expected_turns": {"budgeted": 0}, "pass_at_k": {}}
    data = {"run_id": "ties", "summary": summary, "variants": [], "comparison": [],
            "paired": [], "paired_note": None, "gates": [], "columns": list(COLUMNS),
            "trials": rows, "details": None}
    path = tmp_path / "ties.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = Page(browser, f"file://{path}")
    try:
        shown = {page.page.locator("#summary tr th").nth(i).inner_text():
                 page.page.locator("#summary tr td").nth(i).inner_text()
                 for i in range(page.page.locator("#summary tr").count())}
        assert shown["Pass rate"] == f"{fmt_pct(0.5625)} (95% CI {fmt_pct(0.0625)}–" \
            f"{fmt_pct(0.9375)})" == "56.2% (95% CI 6.2%–93.8%)"
        assert shown["Mean score"] == fmt_score(0.625) == "0.62"
        assert shown["Cost"] == fmt_cost(0.03125) == "$0.0312"
        assert shown["Trial time"] == f"{fmt_duration(119.5)} (sum over trials, set-up " \
            "and grading included)" == "2m 00s (sum over trials, set-up and grading included)"
        for task, score, cost, duration in trials:
            cells = page.page.locator("#trial-table tbody tr", has_text=f"v/{task}/00") \
                .locator("td").all_inner_texts()
            assert cells[5:] == [fmt_score(score), "1", "0", "10", fmt_cost(cost),
                                 f"{duration:.1f}s", ""]
        assert page.errors == []
    finally:
        page.close()


def test_a_failed_score_gate_threshold_shows_its_value(browser, tmp_path):
    """The score gates' table shows pass rate and mean score only: a failed `std`
    threshold is shown with its value, as report.md shows it ("std 0.471 < 0.5 ✗")."""
    from ce_runtime.report import suite_metrics
    from ce_runtime.report.html_page import render_html
    from tests.test_report import crit, record

    recs = [record("v", "s", row=f"r{i}", criteria=[
        crit("c0", "file_exists", x, kind="binary", suite_thresholds={"std": 0.5, "count": 3})])
        for i, x in enumerate([1.0, 0.0, 1.0])]
    [g] = suite_metrics(recs)
    summary = {"exit_code": 1, "exit_reasons": [], "trials": 3, "by_status": {},
               "graded": 3, "passed": 2, "pass_rate": 2 / 3, "pass_rate_ci95": None,
               "mean_score": 2 / 3, "tokens": {}, "cost_usd": 0, "duration_s": 0,
               "within_expected_turns": {"budgeted": 0}, "pass_at_k": {}}
    data = {"run_id": "gate", "summary": summary, "variants": [], "comparison": [],
            "paired": [], "paired_note": None, "gates": [g.to_dict()], "columns": [],
            "trials": [], "details": None}
    path = tmp_path / "gate.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = Page(browser, f"file://{path}")
    try:
        cells = page.page.locator("#gates tbody tr").first.locator("td").all_inner_texts()
        assert cells[-2:] == ["std 0.471 < 0.5 ✗, count ≥ 3", "✗ failed"], cells
        assert page.errors == []
    finally:
        page.close()


def test_an_error_trial_says_its_error_in_the_table(browser, tmp_path):
    """A trial's own error (a pre_run that failed, a sandbox lost) was the bare word
    `error` in the table, its text only in a tooltip, while an agent's error and
    report.md spelled theirs out: it is spelled out too (its first 80 characters)."""
    from ce_runtime.report.html import COLUMNS
    from ce_runtime.report.html import rows as table_rows
    from ce_runtime.report.html_page import render_html
    from ce_runtime.store.record import as_record
    from tests.test_report import record

    long = "pre_run command failed: 'make seed' (exit 2): " + "x" * 80
    rows = table_rows([as_record(record("v", task, status="ERROR", error=error,
                                        outcome=None))
                       for task, error in (("pre", "pre_run command failed: 'exit 3' (exit 3)"),
                                           ("long", long))])
    summary = {"exit_code": 1, "exit_reasons": [], "trials": 2, "by_status": {"ERROR": 2},
               "graded": 2, "passed": 0, "pass_rate": 0.0, "pass_rate_ci95": [0.0, 0.66],
               "mean_score": None, "tokens": {}, "cost_usd": 0.0, "duration_s": 1.0,
               "within_expected_turns": {"budgeted": 0}, "pass_at_k": {}}
    data = {"run_id": "errors", "summary": summary, "variants": [], "comparison": [],
            "paired": [], "paired_note": None, "gates": [], "columns": list(COLUMNS),
            "trials": rows, "details": None}
    path = tmp_path / "errors.html"
    path.write_text(render_html(data), encoding="utf-8")
    page = Page(browser, f"file://{path}")
    try:
        def cell(task):
            return page.page.locator("#trial-table tbody tr", has_text=f"v/{task}/00") \
                .locator("td").all_inner_texts()[-1]

        assert cell("pre") == "error: pre_run command failed: 'exit 3' (exit 3)"
        assert cell("long") == "error: " + long[:79] + "…"
        assert page.errors == []
    finally:
        page.close()


def test_an_empty_workspace_says_so_not_an_empty_table(browser, tmp_path):
    """A trial whose workspace held no file when the agent ended showed the Workspace
    heading, "(against the template)" and a table of headers with no row."""
    import subprocess
    import sys

    (tmp_path / "t.yaml").write_text(
        "task_id: empty\ndescription: leaves nothing\nagent: {type: none}\n"
        "sandbox: {python: null}\nsuccess_criteria:\n"
        "  - {type: run_command, command: 'true', description: runs}\n")
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                          "--run-dir", "R"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    p = Page(browser, "file://" + str(tmp_path / "R" / "report.html"))
    try:
        p.page.locator("#trial-table tbody tr", has_text="default/empty/00").click()
        detail = p.page.locator("#detail")
        assert "the workspace was empty when the agent ended" in detail.inner_text()
        assert detail.locator("table.file-list").count() == 0
        assert p.errors == []
    finally:
        p.close()
