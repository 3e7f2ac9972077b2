"""report.html's trial panel says a failed criterion's score and threshold as report.md
does (report/text.py's fmt_below): 0.8999 against 0.9 read `score 0.900 (continuous) vs
pass threshold 0.90 -> FAIL` and the panel's arithmetic `c0 0.9 < 0.9`. In a real
browser (tests/test_report_html.py's Chromium and Playwright; skipped without them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.test_report_html import Page, browser  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

TASK = """\
task_id: near
description: a score just under its threshold
initial_prompt: go
agent: {type: script, script: [{say: done}]}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: expr, kind: continuous, expr: '0.8999', description: just under}
  - {type: expr, kind: continuous, expr: '0.95', description: over}
"""


def test_a_failed_score_is_told_from_its_threshold_in_the_panel(browser, tmp_path):  # noqa: F811
    (tmp_path / "t.yaml").write_text(TASK)
    made = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                           "--run-dir", "run"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 1, made.stdout + made.stderr
    assert "score 0.8999 < 0.9" in (tmp_path / "run" / "report.md").read_text()
    page = Page(browser, f"file://{tmp_path / 'run' / 'report.html'}")
    try:
        page.page.locator("#trial-table tbody tr", has_text="default/near/00").click()
        detail = page.page.locator("#detail")
        assert detail.locator(".crit[data-criterion='c0'] .mono").first.inner_text() == \
            "score 0.8999 (continuous) vs pass threshold 0.9 -> FAIL; weight 1"
        # a criterion that passed keeps the panel's 3 and 2 decimals
        assert detail.locator(".crit[data-criterion='c1'] .mono").first.inner_text() == \
            "score 0.950 (continuous) vs pass threshold 0.90 -> PASS; weight 1"
        assert "c0 0.8999 < 0.9 -> FAILURE" in detail.locator("pre.arithmetic").inner_text()
        assert page.errors == []
    finally:
        page.close()
