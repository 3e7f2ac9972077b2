"""report.html in a narrow window, in a real browser (tests/test_report_html.py's
Chromium and Playwright; skipped without them): 1280 px (a laptop), 800 px (half of
one, a CI artifact viewer's pane) and 390 px (a phone).

A real `ce run --agent oracle` of tasks made to be wide: a long task id, criteria with
long descriptions and long evidence (a long expected output, a long file name, an
output line of 500 characters), a trial that ERRORs before grading, dataset rows, and
two variants, one with a long name. Before, the page scrolled sideways at every width
(scrollWidth 1647 px at 1280, 800 and 390: the trials table), the trial panel was 62%
of a phone's width and scrolled sideways in it (522 px of content in 240), and the
variants chart cut a long variant's name off at its left edge.

Checked at each width: the page itself never scrolls sideways; a table wider than its
section scrolls in its own box with its first column kept in sight and readable; the
trial panel fits; no chart label is cut off. Screenshots go to $CE_TEST_ARTIFACTS
(else the test's tmp_path).

An id that fits is never cut mid-word at 1280 px: a task id of 24 characters broke in
two in a column of 171 px while the failed criteria's took 202 (its column's width was
shared out by the cells' whole texts, an id's counted as 12 characters).
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.engines import need
from tests.report_run import CE
from tests.test_report_html import _missing, artifacts, browser  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

LONG_TASK = "report_generation_with_an_unusually_long_task_identifier"
LONG_VARIANT = "with-notes-and-a-longer-variant-name"
FITS = "rename_the_config_loader"  # a task id that fits its column at 1280 px
WIDTHS = (1280, 800, 390)

TASKS = {
    "long.yaml": f"""\
task_id: {LONG_TASK}
description: long criterion descriptions and long evidence
initial_prompt: write the report
agent: {{type: claude-code}}
reference:
  solve:
    - {{write: report.txt, content: "status: pending\\n"}}
    - {{run: "python3 -c \\"print('z' * 600)\\""}}
sandbox: {{python: null}}
success_criteria:
  - {{type: file_contains, path: report.txt,
     includes: ["status: ok and every item was counted exactly once across the sections"],
     description: the generated report says that the status is ok and that every one of
       the three items was counted exactly once across all of the sections}}
  - {{type: run_command, command: "cat report.txt && python3 -c \\"print('q' * 500)\\"",
     expected_stdout: never-this-very-long-expected-standard-output-string-that-is-absent,
     stdout_match: contains, description: the report can be shown with a long print after it}}
  - {{type: file_exists,
     path: a_file_with_a_really_long_name_that_the_agent_never_wrote_in_the_workspace.txt,
     description: a file with a really long name exists}}
""",
    "prefail.yaml": """\
task_id: prefail
description: its pre_run fails, so it ends ERROR before grading
initial_prompt: go
agent: {type: claude-code}
pre_run:
  - {command: "echo the fixture database could not be reached from the sandbox >&2; exit 7",
     fail_on_error: true}
reference:
  solve:
    - {run: "echo hi"}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: x.txt, description: x.txt exists}
""",
    "fits.yaml": f"""\
task_id: {FITS}
description: a task id of 24 characters, the length of many
initial_prompt: go
agent: {{type: claude-code}}
reference:
  solve:
    - {{run: "echo hi"}}
sandbox: {{python: null}}
success_criteria:
  - {{type: file_exists, path: x.txt, description: x.txt exists}}
""",
    "rows.yaml": """\
task_id: rows
description: a dataset suite, one row with a long id
initial_prompt: "${row.word}"
dataset:
  rows:
    - {id: r1, word: one}
    - {id: row_with_a_long_identifier_for_the_dataset, word: long}
agent: {type: claude-code}
reference:
  solve:
    - {write: w.txt, content: "${row.word}\\n"}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: NOTES.md, description: the notes exist,
     suite_thresholds: {pass_rate: 0.5}}
""",
}

EXPERIMENT = f"""\
experiment_id: narrow
variants:
  - variant_id: plain
  - variant_id: {LONG_VARIANT}
    template_sources:
      - type: starter_files
        files:
          - {{path: NOTES.md, content: "# notes\\n"}}
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    need(_missing())
    root = tmp_path_factory.mktemp("report-narrow")
    (root / "tasks").mkdir()
    for name, text in TASKS.items():
        (root / "tasks" / name).write_text(text, encoding="utf-8")
    (root / "exp.yaml").write_text(EXPERIMENT, encoding="utf-8")
    proc = subprocess.run([*CE, "run", "tasks", "-e", "exp.yaml", "--agent", "oracle",
                           "--run-dir", str(root / "run")], cwd=root, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "CE_PLAIN": "1"})
    assert proc.returncode == 1, proc.stderr[-3000:]  # prefail ERRORs, the long task fails
    return f"file://{root / 'run' / 'report.html'}"


def open_at_width(browser, url: str, width: int,  # noqa: F811 (browser: the fixture)
                  ready: str | None = "body[data-ready='1']"):
    """A page at `width` px, once `ready` shows (None: a page without a script), and the
    errors its console says."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    if ready is not None:
        page.wait_for_selector(ready, state="attached")
    return page, errors


def page_overflow(page) -> int:
    """How far the page itself scrolls sideways (0: not at all)."""
    return page.evaluate("document.scrollingElement.scrollWidth"
                         " - document.scrollingElement.clientWidth")


def _cut_labels(page) -> list[str]:
    """The chart texts that do not fit inside their chart's drawing (its viewBox)."""
    return page.evaluate("""() => [...document.querySelectorAll('main svg text')].filter(t => {
        const b = t.getBBox(), v = t.ownerSVGElement.viewBox.baseVal;
        return b.x < -0.5 || b.x + b.width > v.width + 0.5;
      }).map(t => t.textContent)""")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_page_never_scrolls_sideways(browser, report, artifacts, width):  # noqa: F811
    page, errors = open_at_width(browser, report, width)
    try:
        page.screenshot(path=os.path.join(artifacts, f"narrow-{width}.png"), full_page=True)
        assert page_overflow(page) <= 0, (
            f"at {width}px the page scrolls {page_overflow(page)}px sideways")
        assert _cut_labels(page) == []
        # the trial panel, of the trial with long evidence and of the ERROR trial: it
        # fits the window and never scrolls sideways itself
        for trial in (f"plain/{LONG_TASK}/00", "plain/prefail/00"):
            page.keyboard.press("Escape")
            page.locator("#trial-table tbody tr", has_text=trial).click()
            detail = page.locator("#detail")
            box = detail.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
            inside = detail.evaluate("d => d.scrollWidth - d.clientWidth")
            assert inside <= 0, f"at {width}px {trial}'s panel scrolls {inside}px sideways"
            assert page_overflow(page) <= 0
            assert detail.locator("button.close").is_visible()
        page.screenshot(path=os.path.join(artifacts, f"narrow-{width}-panel.png"))
        assert errors == []
    finally:
        page.close()


def test_a_wide_table_scrolls_in_its_box_its_first_column_in_sight(browser, report):  # noqa: F811
    """At a phone's width the trials table is wider than the page: it scrolls in its own
    box, and its first column (the trial's id, which says its variant, task and repeat)
    stays where it was, wide enough to read."""
    page, errors = open_at_width(browser, report, 390)
    try:
        box = page.locator("#trial-table").locator("xpath=..")
        assert box.evaluate("b => b.scrollWidth > b.clientWidth"), "nothing to scroll"
        first = page.locator("#trial-table tbody tr").first.locator("td").first
        before = first.bounding_box()
        box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
        after = first.bounding_box()
        assert box.evaluate("b => b.scrollLeft") > 0
        assert (before["x"], before["width"]) == (after["x"], after["width"])
        assert after["width"] >= 100, f"the first column is {after['width']}px wide"
        # a long id wraps inside it and is shown whole
        long_id = f"{LONG_VARIANT}/rows/row_with_a_long_identifier_for_the_dataset/00"
        cell = page.locator("#trial-table tbody tr", has_text=long_id).locator("td").first
        assert cell.inner_text().replace("\n", "") == long_id
        assert cell.evaluate("c => c.scrollWidth <= c.clientWidth")  # nothing hidden
        assert errors == []
    finally:
        page.close()


# a cell's text as the lines it is drawn on (its characters grouped by their line's top)
LINES = """td => {
  const lines = []; let top = null;
  const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) for (let i = 0; i < n.data.length; i++) {
    const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
    const t = Math.round(r.getBoundingClientRect().top);
    if (t !== top) { lines.push(""); top = t; }
    lines[lines.length - 1] += n.data[i];
  }
  return lines;
}"""


def test_an_id_that_fits_is_never_cut_mid_word(browser, report):  # noqa: F811
    """At 1280 px: the 24-character task id is on one line, in the trials table and in
    the tasks table; no id whose parts (up to a "/" or a hyphen) are of 26 characters at
    most is cut inside one (a trial id wraps after its "/" first); and the trials table
    still fits its section (the ids took no more than the table has)."""
    page, errors = open_at_width(browser, report, 1280)
    try:
        rows = page.locator("#trial-table tbody tr", has_text=f"/{FITS}/")
        assert rows.count() == 2
        for i in range(2):
            assert rows.nth(i).locator("td").nth(2).evaluate(LINES) == [FITS]
        task = page.locator(f"#task-table tbody tr[data-task='{FITS}'] td").first
        assert task.evaluate(LINES) == [FITS]
        cells = page.locator("#trial-table tbody td:nth-child(-n+3), #task-table tbody td:first-child")
        checked = 0
        for i in range(cells.count()):
            lines = cells.nth(i).evaluate(LINES)
            text = "".join(lines)
            if max(len(p) for p in re.split(r"(?<=[/-])", text)) > 26:
                continue  # longer than its column is kept: it may wrap inside one
            checked += 1
            assert all(line.endswith(("/", "-")) for line in lines[:-1]), lines
        assert checked >= 20, checked
        box = page.locator("#trial-table").locator("xpath=..")
        assert box.evaluate("b => b.scrollWidth - b.clientWidth") <= 0
        assert page_overflow(page) <= 0
        assert errors == []
    finally:
        page.close()
