"""`ce compare A B -f html` in a narrow window, in a real browser (tests/test_report_html.py's
Chromium and Playwright; skipped without them): 1280 px (a laptop), 800 px (half of one)
and 390 px (a phone), as tests/test_report_html_narrow.py checks the run report.

A real pair of runs of scripted agents over several tasks and two variants (one with a
long name): a long task id, a dataset row with a long id, trials that flip both ways, a
criterion that flips in a trial whose outcome did not, a suite gate that regresses, a
trial that ERRORs in B only (its pre_run), a task only B ran and repeats B ran that A did
not, each run in a directory with a long name. Before, the page scrolled sideways at 800
and 390 px (document scrollWidth 1017 px at both: the tables of trial and task ids,
whose cells could not wrap) and its own stylesheet had none of the run report's rules.

Checked at each width: the page itself never scrolls sideways; every table is in its
own box; at a phone's width a wide table scrolls in its box with its first column (the
trial's id) kept in sight, a list of ids (one column) and the summary fit the page with
nothing hidden. Screenshots go to $CE_TEST_ARTIFACTS (else the test's tmp_path).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.engines import need
from tests.report_run import CE
from tests.test_report_html import _missing, artifacts, browser  # noqa: F401 (fixtures)
from tests.test_report_html_narrow import open_at_width, page_overflow

pytestmark = pytest.mark.slow

LONG_TASK = "report_generation_with_an_unusually_long_task_identifier_for_comparison"
LONG_VARIANT = "with-notes-and-a-longer-variant-name-for-the-comparison"
LONG_ROW = "row_with_a_long_identifier_for_the_dataset_that_goes_on"
RUN_A = "run-a-the-baseline-of-a-long-directory-name"
RUN_B = "run-b-the-candidate-of-a-long-directory-name"
WIDTHS = (1280, 800, 390)

# flag.txt and extra.txt come from the variant: A's and B's differ
TASKS = {
    "long.yaml": f"""\
task_id: {LONG_TASK}
description: long ids and long criterion descriptions
initial_prompt: write the report
agent:
  type: script
  script:
    - {{usage: {{input_tokens: 2400, output_tokens: 1200}}}}
    - {{write: report.txt, content: "status: ok\\n"}}
    - {{say: done}}
sandbox: {{driver: tempdir, python: null}}
success_criteria:
  - {{type: file_contains, path: flag.txt, includes: ["ok"],
     description: the flag file that the variant ships says ok and the report can be
       generated with every section counted exactly once}}
  - {{type: file_exists,
     path: a_file_with_a_really_long_name_that_the_agent_never_wrote_in_the_workspace.txt,
     weight: 0, description: a file with a really long name exists (informational)}}
""",
    "fixed.yaml": """\
task_id: fixed_when_the_flag_says_no
description: fails in A, passes in B
initial_prompt: go
agent: {type: script, script: [{usage: {input_tokens: 100, output_tokens: 50}}, {say: done}]}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: file_contains, path: flag.txt, includes: ["no"], description: the flag says no}
""",
    "pre.yaml": """\
task_id: prefail_when_the_fixture_database_is_unreachable
description: its pre_run fails in B (an ERROR before grading)
initial_prompt: go
agent: {type: script, script: [{say: done}]}
pre_run:
  - {command: "grep -q ok flag.txt || { echo the fixture database could not be reached >&2;
      exit 7; }", fail_on_error: true}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: file_exists, path: flag.txt, description: flag.txt exists}
""",
    "rows.yaml": f"""\
task_id: rows
description: a dataset suite, one row with a long id
initial_prompt: "${{row.word}}"
dataset:
  rows:
    - {{id: r1, word: one}}
    - {{id: {LONG_ROW}, word: long}}
agent: {{type: script, script: [{{write: w.txt, content: "${{row.word}}\\n"}}]}}
sandbox: {{driver: tempdir, python: null}}
success_criteria:
  - {{type: file_contains, path: flag.txt, includes: ["ok"], description: the flag says ok,
     suite_thresholds: {{pass_rate: 0.5}}}}
  - {{type: file_contains, path: extra.txt, includes: ["x"], weight: 0,
     description: the extra file says x (informational)}}
""",
}
ONLY_B = """\
task_id: a_task_that_only_the_second_run_has_with_a_long_name
description: only in B
initial_prompt: go
agent: {type: script, script: [{say: done}]}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: expr, kind: continuous, expr: '1.0', description: always}
"""
EXPERIMENT = f"""\
experiment_id: cmp
variants:
  - variant_id: plain
    template_sources:
      - type: starter_files
        files:
          - {{path: flag.txt, content: "FLAG\\n"}}
          - {{path: extra.txt, content: "x\\n"}}
  - variant_id: {LONG_VARIANT}
    template_sources:
      - type: starter_files
        files:
          - {{path: flag.txt, content: "ok\\n"}}
          - {{path: extra.txt, content: "EXTRA\\n"}}
"""


@pytest.fixture(scope="module")
def page_url(tmp_path_factory) -> str:
    need(_missing())
    root = tmp_path_factory.mktemp("compare-narrow")
    for run, flag, extra, more in ((RUN_A, "ok", "x", ()), (RUN_B, "no", "y", ("--repeats",
                                                                              "2"))):
        tasks = root / f"tasks-{run[:5]}"
        tasks.mkdir()
        for name, text in TASKS.items():
            (tasks / name).write_text(text, encoding="utf-8")
        if run == RUN_B:
            (tasks / "only_b.yaml").write_text(ONLY_B, encoding="utf-8")
        (root / f"{run[:5]}.yaml").write_text(
            EXPERIMENT.replace("FLAG", flag).replace("EXTRA", extra), encoding="utf-8")
        proc = subprocess.run([*CE, "run", tasks.name, "-e", f"{run[:5]}.yaml", "--run-dir",
                               run, "-q", *more], cwd=root, capture_output=True, text=True,
                              timeout=300, env={**os.environ, "CE_PLAIN": "1"})
        assert proc.returncode == 1, proc.stderr[-3000:]
    made = subprocess.run([*CE, "compare", RUN_A, RUN_B, "-f", "html", "-o", "out/cmp.html"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert made.returncode == 1, made.stderr  # regressed: flips, a gate, an ERROR
    html = (root / "out" / "cmp.html").read_text(encoding="utf-8")
    for said in (f"plain/{LONG_TASK}/00", "SUCCESS → ERROR", "FAILURE → SUCCESS",
                 f"{LONG_VARIANT}/rows/{LONG_ROW}/00", "passed → failed ✗",
                 "Tasks only in B", "Trials only in B"):
        assert said in html, said  # every kind of table the page has, to be measured
    return f"file://{root / 'out' / 'cmp.html'}"


def test_the_page_is_styled_by_the_run_reports_stylesheet(page_url):
    """The run report's rules (assets/report.css), not a copy of them; still no script."""
    from ce_runtime.report.html_page import asset

    html = Path(page_url.removeprefix("file://")).read_text(encoding="utf-8")
    assert asset("report.css") in html and "<script" not in html


@pytest.mark.parametrize("width", WIDTHS)
def test_the_compare_page_never_scrolls_sideways(browser, page_url, artifacts, width):  # noqa: F811
    page, errors = open_at_width(browser, page_url, width, ready=None)
    try:
        page.screenshot(path=os.path.join(artifacts, f"compare-narrow-{width}.png"),
                        full_page=True)
        assert page_overflow(page) <= 0, (
            f"at {width}px the page scrolls {page_overflow(page)}px sideways")
        # every table in its own box, each box inside the window
        outside = page.evaluate("""(w) => [...document.querySelectorAll('table')].filter(t =>
            !t.parentElement.classList.contains('wide')
            || t.parentElement.getBoundingClientRect().right > w).length""", width)
        assert outside == 0
        assert errors == []
    finally:
        page.close()


def test_a_wide_table_scrolls_in_its_box_a_list_fits(browser, page_url):  # noqa: F811
    """At a phone's width the regressions table is wider than the page: it scrolls in its
    box and its first column (the trial's id, a link to its panel) stays in sight. The
    summary and a list of ids (one column) fit the page, their text wrapped, nothing
    hidden."""
    page, errors = open_at_width(browser, page_url, 390, ready=None)
    try:
        table = page.locator("h2", has_text="Regressions").locator(
            "xpath=following-sibling::div[1]")
        assert table.evaluate("b => b.scrollWidth > b.clientWidth"), "nothing to scroll"
        first = table.locator("tbody tr").nth(1).locator("td").first
        before = first.bounding_box()
        table.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
        after = first.bounding_box()
        assert table.evaluate("b => b.scrollLeft") > 0
        assert (before["x"], before["width"]) == (after["x"], after["width"])
        assert after["width"] >= 100, f"the first column is {after['width']}px wide"
        assert first.inner_text().replace("\n", "") == f"plain/{LONG_TASK}/00"
        assert first.locator("a").get_attribute("href").endswith(f"#trial=plain/{LONG_TASK}/00")
        main = page.locator("main").evaluate("m => m.clientWidth - 24")  # its padding
        for box in (page.locator("div.wide").first,  # the summary
                    page.locator("h2", has_text="Trials only in B").locator(
                        "xpath=following-sibling::div[1]")):
            assert box.evaluate("b => b.scrollWidth <= b.clientWidth"), box.inner_text()[:80]
            width = box.locator("table").evaluate("t => t.getBoundingClientRect().width")
            assert width >= main - 2, f"{width}px of {main}"
        cell = page.locator("td", has_text=f"{LONG_VARIANT}/rows/{LONG_ROW}/01")
        assert cell.inner_text().replace("\n", "") == f"{LONG_VARIANT}/rows/{LONG_ROW}/01"
        assert errors == []
    finally:
        page.close()
