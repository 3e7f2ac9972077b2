"""The collector is quiet during a command's start-up and normal once its imports are
done (ce_runtime/startup_gc.py): in `ce run` through the installed script, and in its
report worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.test_report_worker import ENV, TASK

# this interpreter's own thresholds (700 on 3.11 and 3.12, 2,000 on 3.13), from a fresh one
DEFAULT = tuple(json.loads(subprocess.run(
    [sys.executable, "-c", "import gc, json; print(json.dumps(gc.get_threshold()))"],
    capture_output=True, text=True, check=True).stdout))

# counts the collections before and after the run's first trial starts; prints the
# collector's state as the process exits
_SCRIPT = """import atexit, gc, json, sys
counts = {"start-up": 0, "after": 0}
phase = ["start-up"]
def count(p, info):
    if p == "start":
        counts[phase[0]] += 1
gc.callbacks.append(count)
from ce_runtime import startup_gc
real = startup_gc.imports_done
def done():
    real()
    phase[0] = "after"
startup_gc.imports_done = done
atexit.register(lambda: print(json.dumps({"counts": counts, "threshold": gc.get_threshold(),
                                          "frozen": gc.get_freeze_count()})))
sys.argv = ['ce', *sys.argv[1:]]
from ce_runtime import boot
boot.entry()
"""


def _run(tmp_path, script: str, *argv: str) -> dict:
    (tmp_path / "t.yaml").write_text(TASK.format(name="t", word="hi"))
    res = subprocess.run([sys.executable, "-c", script, *argv], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=ENV)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def test_ce_run_starts_without_collections_then_collects_as_usual(tmp_path):
    """Before: ~80 collections in `ce run`'s start-up. Now none or nearly (the threshold
    is far above what the imports make); once the trials start, the default thresholds
    are back and what start-up made is frozen."""
    state = _run(tmp_path, _SCRIPT, "run", "t.yaml", "--run-dir", "run")
    assert state["counts"]["start-up"] <= 2, state
    assert tuple(state["threshold"]) == DEFAULT
    assert state["frozen"] > 10_000  # start-up's objects, out of every later pass
    assert (tmp_path / "run" / "report.html").is_file()  # the worker, started the same way


def test_without_the_ce_script_the_collector_is_left_alone(tmp_path):
    """ce's modules run by something else (a test, a library user, `python -m`): the run
    changes nothing of its collector."""
    script = _SCRIPT.replace("from ce_runtime import boot\nboot.entry()",
                             "from ce_runtime.cli import entry\nentry()")
    state = _run(tmp_path, script, "run", "t.yaml", "--run-dir", "run")
    assert state["counts"]["start-up"] > 10, state
    assert state["frozen"] == 0 and tuple(state["threshold"]) == DEFAULT, state


def test_the_report_worker_freezes_its_imports(tmp_path):
    """The worker process (worker_process.WORKER_MAIN) imports Polars with the collector
    quiet, then restores it: with no job (its input closed) it exits 0 at once."""
    from ce_runtime.worker_process import WORKER_MAIN

    probe = WORKER_MAIN.replace(
        "run_as_script()",
        "import gc, ce_runtime.report.job as j; j.read_frame = lambda fd: "
        "print(gc.get_threshold(), gc.get_freeze_count() > 10_000, flush=True); "
        "run_as_script()")
    res = subprocess.run([sys.executable, "-c", probe], input="", capture_output=True,
                         text=True, timeout=300, env={**ENV, "PYTHONPATH": os.getcwd()})
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[0] == f"{DEFAULT} True"
