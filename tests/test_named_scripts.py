"""A scripted model session (or judge replies) named on the command line, as a glob over
a task directory names them (`ce compile tasks/*.yaml` matches
hello_world.codex.model.yaml): skipped with one warning, not compiled as a task, which
said every task field it lacks (52 errors for the bundled examples)."""

from __future__ import annotations

import glob
import os

from ce_lang.compiler import compile_paths

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_bundled_examples_compile_by_glob_with_their_sessions_skipped():
    files = sorted(glob.glob(os.path.join(ROOT, "tasks", "*.yaml")))
    sessions = [f for f in files if f.endswith((".model.yaml", ".replies.yaml"))]
    assert len(sessions) >= 10
    result = compile_paths(files)
    [d] = [d for d in result.diagnostics if d.severity in ("error", "warning")]
    assert (d.code, d.severity) == ("CE0008", "warning")
    assert d.message.startswith(f"skipped {len(sessions)} scripted model session(s), not "
                                "task files: ")
    assert result.trials and {t.source for t in result.trials}.isdisjoint(sessions)


def test_sessions_alone_are_no_task_at_all(write):
    session = write("t.model.yaml", "steps:\n  - text: done\n")
    result = compile_paths([session])
    assert [(d.code, d.severity) for d in result.diagnostics] == [("CE0006", "error")]
    assert result.diagnostics[0].message.endswith("; no task file left")
    assert result.trials == []


def test_a_file_with_a_key_no_script_has_is_still_compiled_as_a_task(write):
    """`steps` beside a key of neither kind: likely a task missing its fields, said so."""
    result = compile_paths([write("t.yaml", "steps: []\ndescription: d\n")])
    assert {d.code for d in result.diagnostics} >= {"CE0101", "CE0102"}
