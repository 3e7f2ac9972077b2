"""report.html as a user reads it in a real browser (Debian's Chromium, as
tests/test_report_html.py drives it): a real `ce run --agent oracle` of tasks made to
be awkward to show (a long unbreakable path and command, a trial that ERRORs before
grading, dataset rows whose ids are prefixes of each other) under two variants.

Checked: the trial panel fits its width (long text wraps), an ERROR trial's panel says it
was never graded, the paired pass rate reads in percent as report.md has it, a task's
click shows that task's trials only, and the page works from the keyboard.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.engines import need
from tests.report_run import CE
from tests.test_report_html import Page, _missing, browser  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

LONG = "very_long_directory_name_without_any_break_" * 4
LONGPATH = f"{LONG}/and_a_file_name_that_goes_on_and_on.txt"

TASKS = {
    "longpath.yaml": f"""\
task_id: longpath
description: long unbreakable text in the timeline and the workspace
initial_prompt: write it
agent: {{type: claude-code}}
reference:
  solve:
    - {{write: {LONGPATH}, content: "x\\n"}}
    - {{run: "echo {'y' * 400}"}}
sandbox: {{python: null}}
success_criteria:
  - {{type: file_exists, path: {LONGPATH}, description: the file exists}}
""",
    "prefail.yaml": """\
task_id: prefail
description: its pre_run fails, so it ends ERROR before grading
initial_prompt: go
agent: {type: claude-code}
pre_run:
  - {command: "echo broken >&2; exit 7", fail_on_error: true}
reference:
  solve:
    - {run: "echo hi"}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: x.txt, description: x.txt exists}
""",
    "rows.yaml": """\
task_id: rows
description: row ids that are prefixes of each other (r1, r10)
initial_prompt: "${row.word}"
dataset:
  rows:
    - {id: r1, word: one}
    - {id: r10, word: ten}
agent: {type: claude-code}
reference:
  solve:
    - {write: w.txt, content: "${row.word}\\n"}
sandbox:
  python: null
  template_sources:
    - type: starter_files
      files:
        - {path: README.md, content: "# rows\\n"}
success_criteria:
  - {type: file_exists, path: NOTES.md, description: the notes exist}
""",
}

EXPERIMENT = """\
experiment_id: reading
variants:
  - variant_id: plain
  - variant_id: with-notes
    template_sources:
      - type: starter_files
        files:
          - {path: NOTES.md, content: "# notes\\n"}
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    need(_missing())
    root = tmp_path_factory.mktemp("report-reading")
    (root / "tasks").mkdir()
    for name, text in TASKS.items():
        (root / "tasks" / name).write_text(text, encoding="utf-8")
    (root / "exp.yaml").write_text(EXPERIMENT, encoding="utf-8")
    proc = subprocess.run([*CE, "run", "tasks", "-e", "exp.yaml", "--agent", "oracle",
                           "--run-dir", str(root / "run")], cwd=root, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "CE_PLAIN": "1"})
    assert proc.returncode == 1, proc.stderr[-3000:]  # prefail ERRORs, plain/rows fail
    return str(root / "run")


@pytest.fixture
def page(browser, run_dir):  # noqa: F811 (browser: the imported fixture)
    p = Page(browser, "file://" + os.path.join(run_dir, "report.html"))
    yield p
    p.close()


def _open(page: Page, trial: str):
    page.page.keyboard.press("Escape")
    page.page.locator("#trial-table tbody tr", has_text=trial).first.click()
    return page.page.locator("#detail")


def test_long_unbreakable_text_wraps_in_the_trial_panel(page):
    """A long path in a tool call's parameters and in the workspace's file list, and a
    long output line, wrap inside the panel: it never scrolls sideways (the Bytes column
    and the close button were pushed out of sight)."""
    detail = _open(page, "plain/longpath/00")
    assert LONG in detail.locator("table.file-list").inner_text()
    wide = detail.evaluate("d => d.scrollWidth - d.clientWidth")
    assert wide <= 0, f"the panel scrolls {wide}px sideways"
    assert page.errors == []


def test_a_tasks_click_shows_that_tasks_trials_only(page):
    """The tasks table says 'a click shows its trials': rows/r1's click showed rows/r10's
    trials too (the task id went into the free-text filter, a substring match)."""
    p = page.page
    r1 = p.locator("#task-table tbody tr[data-task='rows/r1']")
    assert r1.locator("td").nth(1).inner_text() == "2"  # two variants, one repeat
    r1.click()
    assert sorted(page.rows()) == ["plain/rows/r1/00", "with-notes/rows/r1/00"]
    assert "2 of " in p.locator("#count").inner_text()
    # typing in the filter box is a substring search again
    p.locator("#filter").fill("rows/r1")
    assert len(page.rows()) == 4
    # so is the 'most divergent tasks' link of the paired comparison
    assert page.errors == []


def _md_paired(run_dir: str, metric: str) -> list[str]:
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as fh:
        part = fh.read().split("### Paired statistics", 1)[1]
    row = next(line for line in part.splitlines() if f"| {metric} |" in line)
    return [c.strip() for c in row.strip("|").split("|")]


def test_the_paired_pass_rate_reads_in_percent_as_report_md(page, run_dir):
    """The paired comparison's pass-rate row in percent and percentage points, as
    report.md's (and as every other pass rate on the page): it read '0.500 → 1.000',
    Δ '+0.500'."""
    md = _md_paired(run_dir, "pass rate")
    row = page.page.locator("#paired-table tbody tr", has_text="pass rate")
    cells = row.locator("td").all_inner_texts()
    assert cells[3] == md[3] and "%" in cells[3]  # baseline → variant
    assert cells[4] == md[4] and cells[4].endswith(" pp")  # Δ
    assert cells[5].split(" … ") == md[5].split(" to ")  # the interval's ends
    assert page.errors == []


def test_an_error_trials_panel_says_it_was_never_graded(page):
    """A trial that ended ERROR before grading (its pre_run failed) has no criterion
    result: its panel said 'weighted score = 0 (no criterion with weight > 0)' and
    'gate (every enabled criterion with weight > 0): 0/0 passed -> ERROR' under an empty
    Criteria heading, while its task has a criterion (ce explain: 'the trial never
    reached grading')."""
    detail = _open(page, "plain/prefail/00")
    text = detail.inner_text()
    assert "pre_run command failed" in text
    arithmetic = detail.locator("pre.arithmetic").inner_text()
    assert "no criterion with weight > 0" not in arithmetic
    assert "0/0 passed" not in arithmetic
    assert "never reached grading" in arithmetic
    assert "no criterion was graded" in detail.locator(".no-criteria").inner_text()
    assert page.errors == []


def test_the_page_works_from_the_keyboard(page):
    """Tab reaches a trial's row and Enter opens its panel, whose close button takes the
    focus; Escape closes it and gives the focus back to the row. A column header sorts on
    Enter and says how (aria-sort); a task's row filters on Enter; the filter box and the
    selects have names a screen reader reads. Rows and headers took mouse clicks only."""
    p = page.page
    p.locator("#filter").focus()
    for _ in range(40):  # past the selects, check boxes and headers to the first row
        p.keyboard.press("Tab")
        if p.evaluate("document.activeElement.closest('#trial-table tbody tr') !== null"):
            break
    focused = p.evaluate("document.activeElement.dataset.index")
    assert focused is not None, "Tab never reached a trial's row"
    p.keyboard.press("Enter")
    assert p.locator("#detail").is_visible()
    assert p.evaluate("document.getElementById('detail').contains(document.activeElement)")
    p.keyboard.press("Escape")
    assert p.locator("#detail").is_hidden()
    assert p.evaluate("document.activeElement.dataset.index") == focused

    head = p.locator("#trial-table th[data-col='score']")
    head.focus()
    p.keyboard.press("Enter")
    assert head.get_attribute("aria-sort") == "ascending"
    p.keyboard.press(" ")
    assert head.get_attribute("aria-sort") == "descending"

    p.locator("#task-table tbody tr[data-task='rows/r10']").focus()
    p.keyboard.press("Enter")
    assert sorted(page.rows()) == ["plain/rows/r10/00", "with-notes/rows/r10/00"]

    for role, name in (("searchbox", "filter trials"), ("searchbox", "filter tasks"),
                       ("combobox", "status"), ("combobox", "variant")):
        assert p.get_by_role(role, name=name).count() == 1, (role, name)
    assert page.errors == []


def test_a_workspace_files_content_opens_from_the_keyboard(page):
    """A file's row in the trial panel shows or hides its content on Enter, as on a
    click (it took mouse clicks only)."""
    detail = _open(page, "plain/longpath/00")
    row = detail.locator(f"tr.file[data-path='{LONGPATH}']")
    content = row.locator("xpath=following-sibling::tr[1]")
    assert content.is_visible()  # an added file's content is open
    row.focus()
    assert row.evaluate("r => r === document.activeElement"), "the row takes no focus"
    page.page.keyboard.press("Enter")
    assert content.is_hidden()
    page.page.keyboard.press(" ")
    assert content.is_visible()
    assert page.errors == []
