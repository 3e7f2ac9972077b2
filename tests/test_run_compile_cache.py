"""`ce run` takes its compiled trials from the compile cache (cli/run_plans.py) only while
everything the compile consulted is unchanged, and a hit runs exactly what a compile
would have given."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

TASK = """task_id: cached
description: a cached compile
agent: {{type: none}}
sandbox: {{python: null}}
pre_run:
  - command: "printf hello > out.txt"
success_criteria:
  - {{type: file_contains, path: out.txt, includes: [{word}], description: says it}}
"""
# counts what was imported by the `ce run` process itself (the report worker aside)
PROBE = ("import sys\n"
         "from ce_runtime.cli import main\n"
         "try:\n"
         "    main(sys.argv[1:])\n"
         "except SystemExit as done:\n"
         "    print('exit', done.code, 'compiler' if 'ce_lang.compiler' in sys.modules "
         "else 'no-compiler')\n")
VOLATILE = ("duration_s", "started_at", "record_sha256", "trace_sha256")


def _run(suite: Path, run: str, *extra: str, env: dict | None = None) -> tuple[str, str]:
    full = {k: v for k, v in os.environ.items() if k != "CE_NO_COMPILE_CACHE"}
    full.update(XDG_CACHE_HOME=str(suite / "cache"), NO_COLOR="1", CE_PLAIN="1", **(env or {}))
    res = subprocess.run([sys.executable, "-c", PROBE, "run", "t.yaml", "--run-dir", run,
                          *extra], cwd=suite, capture_output=True, text=True, timeout=300,
                         env=full)
    return res.stdout.splitlines()[-1], res.stderr


def _records(run: Path) -> list[dict]:
    out = []
    for path in sorted(glob.glob(f"{run}/*/*/*/task.json")):
        rec = json.loads(Path(path).read_text())
        for command in rec["pre_run"]:
            command.pop("duration_ms")
        out.append({k: v for k, v in rec.items() if k not in VOLATILE})
    return out


def test_a_hit_runs_what_the_compile_gave_without_the_compiler(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK.format(word="hello"))
    first, _ = _run(tmp_path, "r1")
    second, _ = _run(tmp_path, "r2")
    off, _ = _run(tmp_path, "r3", "--no-cache")
    env_off, _ = _run(tmp_path, "r4", env={"CE_NO_COMPILE_CACHE": "1"})
    assert first == "exit 0 compiler" and second == "exit 0 no-compiler"
    assert off == env_off == "exit 0 compiler"
    assert _records(tmp_path / "r1") == _records(tmp_path / "r2") == _records(tmp_path / "r3")
    plans = {run: {p.name: p.read_bytes() for p in (tmp_path / run / "plans").iterdir()}
             for run in ("r1", "r2", "r3")}
    assert plans["r1"] and plans["r1"] == plans["r2"] == plans["r3"]


def test_an_edited_task_is_compiled_again(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK.format(word="hello"))
    assert _run(tmp_path, "r1")[0] == "exit 0 compiler"
    (tmp_path / "t.yaml").write_text(TASK.format(word="goodbye"))
    assert _run(tmp_path, "r2")[0] == "exit 1 compiler"  # the new criterion fails
    assert _records(tmp_path / "r2")[0]["criteria"][0]["passed"] is False


def test_errors_and_warnings_read_the_same_from_a_hit(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK.format(word="hello") + "unknown_key: 1\n")
    first = _run(tmp_path, "r1")
    second = _run(tmp_path, "r2")
    assert first[0] == "exit 2 compiler" and second[0] == "exit 2 no-compiler"
    assert "unknown_key" in first[1] and first[1] == second[1]

