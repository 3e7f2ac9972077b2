"""What an agent writes (file names, its error message) reaches the terminal, report.md and
re-score output as text, never as escape sequences, rich markup, HTML or Markdown links:
`ce run` on a terminal ended in `internal error (MarkupError ...)` (no report) when an
agent's error held `[/x]`, and `ce explain`, `ce trial files`, `ce rescore` and report.md
(a CI job's summary) carried `\\x1b]0;...` and `<img ...>` from its file names as they
were."""

from __future__ import annotations

import os
import select
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ce_runtime.cli import main
from ce_runtime.safe_text import md_inline, one_line, terminal

CE = [sys.executable, "-m", "ce_runtime.cli"]
EVIL = "e\x1b]0;pwned\x07\x1b[2J<img src=x onerror=alert(1)>[click](http:evil)\u202e"

NAMES = """\
task_id: names
description: the agent names its files with escapes and HTML
initial_prompt: write files
agent:
  type: script
  script:
    - run: |
        printf x > "$(printf 'b\\033]0;pwned\\007\\033[2J.txt')"
        printf x > 'c<img src=x onerror=alert(1)>[click](http:evil).txt'
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: file_contains, path: "*.txt", includes: [y], description: one txt file}
"""

FAILS = """\
task_id: fails
description: the agent ends with an error holding rich markup and escapes
initial_prompt: fail
agent:
  type: script
  script:
    - {fail: "[/oops] [bold]x[/bold] \\e]0;pwned\\a <img src=x>"}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - {type: file_exists, path: x, description: x}
"""


def _on_a_terminal(args: list[str], cwd: str) -> tuple[int, str]:
    """`ce ARGS` with a pseudo-terminal as stdin, stdout and stderr (the live display)."""
    master, slave = os.openpty()
    env = {k: v for k, v in os.environ.items() if k != "CE_PLAIN"}
    proc = subprocess.Popen([*CE, *args], cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                            env={**env, "TERM": "xterm", "COLUMNS": "200"},
                            start_new_session=True)
    os.close(slave)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            if not ready:
                proc.kill()
                pytest.fail("ce run on a terminal did not finish")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    return proc.wait(timeout=60), out.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("agent_text")
    (root / "names.yaml").write_text(NAMES)
    (root / "fails.yaml").write_text(FAILS)
    code, out = _on_a_terminal(["run", "names.yaml", "fails.yaml", "--run-dir", "run"],
                               str(root))
    return root, code, out


def test_an_agents_error_neither_ends_the_run_nor_reaches_the_terminal_raw(run):
    root, code, out = run
    assert "internal error" not in out and "MarkupError" not in out, out
    assert code == 1, out  # trials that did not succeed, not a crash
    assert (root / "run" / "report.md").is_file()
    assert "\x1b]0;pwned" not in out
    assert "[/oops] [bold]x[/bold] \\x1b]0;pwned\\x07" in out  # said as written, escaped


def test_report_md_carries_no_escape_html_or_link_of_the_agents(run):
    root, _, _ = run
    report = (root / "run" / "report.md").read_text()
    assert "\x1b" not in report and "\x07" not in report
    assert "<img" not in report and "](http:evil)" not in report
    assert "\\x1b]0;pwned\\x07" in report  # the file is still named, readably
    assert "&lt;img src=x onerror=alert(1)>[click]\\(http:evil)" in report


def test_explain_trial_files_and_rescore_print_the_names_escaped(run):
    root, _, _ = run
    trial = str(root / "run" / "default" / "names" / "00")
    for args in (["trial", "files", trial], ["explain", trial]):
        res = CliRunner().invoke(main, args)
        assert "\x1b" not in res.output and "\x07" not in res.output, args
        assert "b\\x1b]0;pwned\\x07\\x1b[2J.txt" in res.output, (args, res.output)
    res = subprocess.run([*CE, "rescore", str(root / "run")], capture_output=True,
                         text=True, timeout=300, cwd=root)
    assert "\x1b" not in res.stdout + res.stderr


def test_safe_text_escapes_what_a_terminal_or_markdown_would_act_on():
    assert one_line("a\nb\x1b[31m\u202e") == "a\\nb\\x1b[31m\\u202e"
    assert terminal("l1\n\tl2\x1b]0;t\x07") == "l1\n\tl2\\x1b]0;t\\x07"
    cell = md_inline(EVIL + " p < 0.05 | x")
    assert "<img" not in cell and "](" not in cell and "\x1b" not in cell
    assert cell.endswith("p < 0.05 \\| x")
