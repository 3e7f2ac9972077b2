"""`ce init` (issue 15): a starter task, experiment and reference solution that compile
clean and pass `ce run --agent oracle` offline; it never overwrites a file."""

from __future__ import annotations

import os
import subprocess
import sys

CE = [sys.executable, "-m", "ce_runtime.cli"]
NO_KEYS = ("ANTHROPIC_API_KEY", "CE_JUDGE_URL", "CE_JUDGE_API_KEY", "OPENAI_API_KEY")


def ce(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k not in NO_KEYS} | {"CE_PLAIN": "1"}
    return subprocess.run([*CE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_init_then_compile_clean_and_the_oracle_passes(tmp_path):
    res = ce("init", "evals", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    evals = tmp_path / "evals"
    assert (evals / "tasks" / "greet.yaml").is_file()
    assert (evals / "tasks" / "reference" / "greet.py").is_file()
    assert (evals / "experiments" / "models.yaml").is_file()
    assert "ce run evals --agent oracle" in res.stdout  # the next commands to try
    # each command and what it does, two spaces apart at least (the last one ran into
    # its text: `...models.yaml the real agent`)
    assert "  ce run evals/tasks -e evals/experiments/models.yaml  the real agent" in \
        res.stdout, res.stdout

    comp = ce("compile", "evals", cwd=tmp_path)
    assert comp.returncode == 0 and "0 errors, 0 warnings" in comp.stderr, comp.stderr
    exp = ce("compile", "evals/tasks", "-e", "evals/experiments/models.yaml", cwd=tmp_path)
    assert exp.returncode == 0 and "0 errors, 0 warnings" in exp.stderr, exp.stderr
    assert "6 trials (2 distinct plans)" in exp.stderr

    run = ce("run", "evals", "--agent", "oracle", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1/1 trial(s): 1 SUCCESS" in run.stdout


def test_init_refuses_to_overwrite(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "greet.yaml").write_text("mine")
    res = ce("init", cwd=tmp_path)
    assert res.returncode == 2 and "nothing written" in res.stderr
    assert (tmp_path / "tasks" / "greet.yaml").read_text() == "mine"
    assert not (tmp_path / "experiments").exists()


def test_init_where_nothing_can_be_written_says_so(tmp_path):
    """A directory under a file (or read-only, or on a full disk): an 'internal error
    ... this is a bug in ce' with exit 1, before."""
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    res = ce("init", "afile/evals", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr
    assert "ce init: cannot write afile/evals: Not a directory (nothing written)" \
        in res.stderr
