"""Inputs built to be expensive compile with bounded time, memory and output.

Each case once cost minutes or gigabytes (issue 9): 20,000 unknown keys (every
diagnostic re-split the whole file: 50 s), a `<<` merge of 5,000 keys (each merged key
scanned every span: 16 s), a 200,000-character string literal in an expression (the
span locator searched the rest of the scalar per character: 30 s), a 12 MB list (7 s,
500 MB), a 100 KB line echoed in full under each diagnostic. The checks are on what
is printed and on the exit; the subprocess timeout is only a hang check.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ce_lang.render import ECHO_WIDTH, echo_window
from ce_lang.yaml_source import MAX_FILE_BYTES

CE = os.path.join(os.path.dirname(sys.executable), "ce")
BASE = """task_id: t
description: d
agent: {type: none}
success_criteria:
  - type: file_exists
    description: d
    path: a.txt
"""
HANG = 120  # seconds: far above any of these (each takes about a second now)


def compile_file(tmp_path, name: str, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run([CE, "compile", str(path)], capture_output=True, text=True,
                          timeout=HANG, env={**os.environ, "CE_PLAIN": "1"})


def test_a_file_over_the_limit_is_refused_before_parsing_and_named(tmp_path):
    rows = "".join(f"  - t{i}\n" for i in range(MAX_FILE_BYTES // 8))
    res = compile_file(tmp_path, "huge.yaml", BASE + "tags:\n" + rows)
    assert res.returncode == 1
    assert "error[CE0007]" in res.stderr and "huge.yaml:1:1" in res.stderr
    assert "MiB" in res.stderr and "dataset" in res.stderr
    assert len(res.stderr) < 2000  # the file's content is not echoed
    assert "Traceback" not in res.stderr


def test_a_file_just_under_the_limit_is_compiled(tmp_path):
    prompt = "x" * (MAX_FILE_BYTES - 4096)
    res = compile_file(tmp_path, "big_prompt.yaml", BASE.replace(
        "agent: {type: none}\n", f"initial_prompt: {prompt}\n"))
    assert res.returncode == 0, res.stderr[-2000:]


def test_twenty_thousand_unknown_keys_are_all_reported(tmp_path):
    keys = "".join(f"unknown_{i}: {i}\n" for i in range(20000))
    res = compile_file(tmp_path, "keys.yaml", BASE + keys)
    assert res.returncode == 1
    assert res.stderr.count("error[CE0101]") == 20000
    assert "keys.yaml:20007:1: error[CE0101]: unknown field `unknown_19999`" in res.stderr


def test_a_merge_of_thousands_of_keys_keeps_every_span(tmp_path):
    anchor = "".join(f"  k{i}: v{i}\n" for i in range(5000))
    # the merged mapping's values are checked as env values: one bad merged value must
    # point at its line in the anchor
    text = BASE + "x-defaults: &d\n" + anchor + "  bad: [1]\nsandbox:\n  env:\n    <<: *d\n"
    res = compile_file(tmp_path, "merge.yaml", text)
    assert res.returncode == 1
    bad_line = len(BASE.splitlines()) + 1 + 5000 + 1
    assert f"merge.yaml:{bad_line}:" in res.stderr, res.stderr[-3000:]


def test_a_long_string_literal_in_an_expression_is_linear(tmp_path):
    literal = "a" * 200_000
    text = BASE.replace("success_criteria:\n", "success_criteria:\n  - type: expr\n"
                        "    description: d\n    expr: 'len(\"" + literal + "\") == 0'\n")
    res = compile_file(tmp_path, "literal.yaml", text)
    assert "Traceback" not in res.stderr
    assert len(res.stderr) < 10_000  # the 200 KB line is not echoed
    assert "CE0214" in res.stderr  # it still gets its warning: always false/true


def test_a_100_kb_line_is_echoed_as_a_window_around_the_span(tmp_path):
    res = compile_file(tmp_path, "line.yaml", BASE + "x: [" + ",".join(["1"] * 50000) + "]\n")
    assert res.returncode == 1
    assert "unknown field `x`" in res.stderr
    assert len(res.stderr) < 3000
    echoed = [ln for ln in res.stderr.splitlines() if ln.startswith("8 | x: [")]
    assert len(echoed) == 1 and echoed[0].endswith("...")


@pytest.mark.parametrize("col", [1, 50, 500, 99_990, 100_000])
def test_echo_window_keeps_the_caret_under_the_span(col):
    src = "".join(chr(ord("a") + i % 26) for i in range(100_000))
    shown, at, width = echo_window(src, col, 5)
    assert len(shown) <= ECHO_WIDTH + 6
    under = shown[at - 1:at - 1 + width]
    assert under == src[col - 1:col - 1 + width]  # the caret points at the same text
    assert 1 <= width <= 5


def test_a_short_line_is_echoed_whole():
    assert echo_window("abc: 1", 1, 3) == ("abc: 1", 1, 3)
