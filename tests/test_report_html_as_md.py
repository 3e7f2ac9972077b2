"""report.html says what report.md says, in a real browser (tests/test_report_html.py's
Chromium and Playwright; skipped without them), and `ce compare -f html` links each run
to its report.html. A real `ce run` of scripted agents under two variants: a turn of
2,400 input tokens, an early stop, a dataset suite whose gate passes, a criterion only
one variant passes; then the same tasks again where it fails (run B, a regression).

Checked against report.md's own text: the header counts the suite gates that passed,
the timeline's tokens have thousands separators as the panel's header, the paired
comparison's cells and its early-stop note are report.md's; and the compare page's run
ids and flipped trials go to the runs' report.html (a relative path), the trial's panel
open.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.engines import need
from tests.report_run import CE
from tests.test_report_html import Page, _missing, browser  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

TASKS = {
    "tokens.yaml": """\
task_id: tokens
description: two turns of tokens; the notes come from the variant
initial_prompt: go
agent:
  type: script
  script:
    - {usage: {input_tokens: 2400, output_tokens: 1200}}
    - {usage: {input_tokens: 5100, output_tokens: 300}}
    - {say: done}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: expr, kind: continuous, expr: '1.0', description: always}
  - {type: file_exists, path: NOTES.md, description: the notes exist}
""",
    "early.yaml": """\
task_id: early
description: stops as soon as the version command ran
initial_prompt: go
agent:
  type: script
  script:
    - {run: "echo Python 3.11.7"}
    - {write: version.txt, content: "3.11.7\\n"}
    - {say: done}
run_limits: {stop_early: true}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: command_executed, tool_name: Bash, command_pattern: "echo Python",
     min_count: 1, stop_when: pass, description: the agent checked the version}
  - {type: file_exists, path: version.txt, description: version.txt was written}
""",
    "rows.yaml": """\
task_id: rows
description: a dataset suite whose gate passes
initial_prompt: "${row.word}"
dataset:
  rows:
    - {id: r1, word: one}
    - {id: r2, word: two}
agent: {type: script, script: [{say: done}]}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: expr, kind: continuous, expr: '1.0', description: always,
     suite_thresholds: {pass_rate: 0.5}}
""",
}

EXPERIMENT = """\
experiment_id: asmd
variants:
  - variant_id: plain
  - variant_id: with-notes
    template_sources:
      - type: starter_files
        files:
          - {path: NAME, content: "# notes\\n"}
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """run-a (with-notes ships NOTES.md) and run-b (it does not: a regression)."""
    need(_missing())
    root = tmp_path_factory.mktemp("report-as-md")
    (root / "tasks").mkdir()
    for name, text in TASKS.items():
        (root / "tasks" / name).write_text(text, encoding="utf-8")
    for run, name in (("run-a", "NOTES.md"), ("run-b", "OTHER.md")):
        (root / f"{run}.yaml").write_text(EXPERIMENT.replace("NAME", name), encoding="utf-8")
        proc = subprocess.run([*CE, "run", "tasks", "-e", f"{run}.yaml", "--run-dir", run],
                              cwd=root, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "CE_PLAIN": "1"})
        assert proc.returncode == 1, proc.stderr[-3000:]  # plain/tokens fails
    return root


@pytest.fixture
def page(browser, root):  # noqa: F811 (browser: the imported fixture)
    p = Page(browser, f"file://{root / 'run-a' / 'report.html'}")
    yield p
    p.close()


def _md(root) -> str:
    return (root / "run-a" / "report.md").read_text(encoding="utf-8")


def test_the_header_counts_the_suite_gates_that_passed(page, root):
    """report.md's verdict line says '2/2 suite gates passed'; the page's header named a
    failed gate among the reasons but counted a passing run's gates nowhere."""
    said = re.search(r"; (\d+/\d+ suite gates passed)", _md(root)).group(1)
    assert said == "2/2 suite gates passed"
    assert said in page.page.locator("#top").inner_text()
    assert page.page.locator("#gates-passed").inner_text() == f" · {said}"
    assert page.errors == []


def test_the_timelines_tokens_read_as_the_panels_header(page):
    """One number format on the panel: its header said '7,500 in' and the timeline
    '+2400 in' (no thousands separator)."""
    page.page.locator("#trial-table tbody tr", has_text="plain/tokens/00").click()
    detail = page.page.locator("#detail")
    assert "7,500 in / 1,500 out tokens" in detail.locator("p").first.inner_text()
    usage = detail.locator("table.tl tr.usage").all_inner_texts()
    assert "+2,400 in / +1,200 out tokens" in usage[0]
    assert "(so far 7,500 / 1,500" in usage[1]
    assert page.errors == []


def _md_paired(root, metric: str) -> list[str]:
    part = _md(root).split("### Paired statistics", 1)[1]
    row = next(line for line in part.splitlines() if f"| {metric} |" in line)
    return [c.strip() for c in row.strip("|").split("|")]


@pytest.mark.parametrize("metric,label", [("score", "score"),
                                          ("pass_rate", "pass rate")])
def test_the_paired_cells_are_report_mds(page, root, metric, label):
    """The paired comparison's means, Δ, interval and p as report.md writes them (its
    formatter, carried in the page's data): the score row read '0.750 → 0.875', Δ
    '+0.125', '+0.000 … +0.375' and p '1.00' against report.md's 0.75 → 0.88, +0.12,
    ±0.00 to +0.38 and 1.000."""
    md = _md_paired(root, label)
    cells = page.page.locator(f"#paired-table tr[data-metric='{metric}'] td").all_inner_texts()
    assert cells[2] == md[2]  # tasks
    assert cells[3] == md[3]  # baseline → variant
    assert cells[4] == md[4]  # Δ
    assert cells[5].split(" … ") == md[5].split(" to ")  # the interval's ends
    assert cells[6] == md[6].removesuffix(" *MC*")  # p (the test is its own column)
    assert page.errors == []


def test_the_paired_comparison_says_a_task_stopped_early(page, root):
    """report.md's note that a paired task includes an early-stopped trial (its score
    counts criteria that were advisory on a truncated run) was missing from the page."""
    note = re.search(r"> \*\*NOTE:\*\* (\d+ paired task\(s\) include an early-stopped .*)",
                     _md(root)).group(1)
    assert page.page.locator("#paired-early-note").inner_text() == note
    assert page.errors == []


def _compare(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CE, "compare", *args, "-f", "html"], cwd=root,
                          capture_output=True, text=True, timeout=300)


def test_the_compare_page_links_each_run_and_its_regressions(browser, root):  # noqa: F811
    """`ce compare A B -f html -o out/sub/compare.html`: each run's id links to its
    report.html by a path relative to the page, a regression's trial to its panel in B's
    report (report.html#trial=ID opens it). The page loads nothing else."""
    made = _compare(root, "run-a", "run-b", "-o", "out/sub/compare.html")
    assert made.returncode == 1, made.stderr  # with-notes/tokens/00 regressed
    html = (root / "out" / "sub" / "compare.html").read_text(encoding="utf-8")
    assert '<a href="../../run-a/report.html"' in html
    assert '<a href="../../run-b/report.html#trial=with-notes/tokens/00">' \
        "with-notes/tokens/00</a>" in html
    assert "<script" not in html and "src=" not in html and "<link" not in html

    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"file://{root / 'out' / 'sub' / 'compare.html'}")
        page.locator("h1 a", has_text="run-b").click()
        page.wait_for_selector("body[data-ready='1']", state="attached")
        assert page.url == f"file://{root / 'run-b' / 'report.html'}"
        page.go_back()
        page.locator("td a", has_text="with-notes/tokens/00").click()
        page.wait_for_selector("body[data-ready='1']", state="attached")
        detail = page.locator("#detail")
        assert detail.is_visible()
        assert detail.locator("#detail-title").inner_text() == "with-notes/tokens/00"
        assert errors == []
    finally:
        page.close()


def test_a_run_without_its_report_is_not_linked(root):
    """A run copied without its report.html (its parquet files only) has no link; the
    page written to stdout links from the current directory."""
    bare = root / "run-a-bare"
    shutil.copytree(root / "run-a", bare, dirs_exist_ok=True)
    (bare / "report.html").unlink()
    made = _compare(root, "run-a-bare", "run-b")
    assert made.returncode == 1, made.stderr
    assert 'href="run-a-bare/' not in made.stdout
    assert '<a href="run-b/report.html" title="its report.html"><code>' in made.stdout
