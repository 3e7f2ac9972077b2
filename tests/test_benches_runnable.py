"""The benchmarks stay runnable (tiny sizes; the numbers themselves live in bench/README)."""

import json
import os
import subprocess
import sys

import pytest

from tests.engines import need

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE_TASKS = "/tmp/ce_ref/coder_eval-0.12.16/tasks"  # .ci/run unpacks the sdist there


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ["compile.py", "--tasks", "20", "--repeat", "1", "--out", "{tmp}"],
    ["runtime.py", "--events", "5000", "--writer-events", "1000", "--trials", "50",
     "--repeat", "1", "--out", "{tmp}"],
    ["run.py", "--overhead-trials", "3", "--venv-trials", "2", "--trials", "10",
     "--jobs", "1,2", "--repeat", "1", "--drivers", "tempdir,bwrap,docker"],
    ["agents.py", "--trials", "1", "--drivers", "tempdir,bwrap"],
    pytest.param(["rescore.py", "--trials", "40", "--repeat", "1", "--out", "{tmp}"],
                 id="rescore"),
    pytest.param(["report.py", "--trials", "40", "--repeat", "1", "--out", "{tmp}"],
                 id="report"),
    pytest.param(["run_end.py", "--repeat", "1", "--out", "{tmp}"], id="run_end"),
    pytest.param(["ray_pool.py", "--trials", "4", "--sleep", "0.05", "--repeat", "1",
                  "--nodes", "1", "--out", "{tmp}"], id="ray_pool"),
])
def test_bench_runs(tmp_path, args):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = subprocess.run([sys.executable, os.path.join(ROOT, "bench", argv[0]), *argv[1:]],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)  # a hang check; loaded CI machines are slow
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]


def _reference() -> tuple[str, str]:
    """The reference CLI (coder-eval 0.12.16) and its example tasks, as .ci/run exports them."""
    ref_bin = os.environ.get("CE_REFERENCE_BIN", "")
    tasks = os.environ.get("CE_REFERENCE_TASKS", REFERENCE_TASKS)
    need(None if ref_bin and os.access(ref_bin, os.X_OK) else
         "no reference CLI: set CE_REFERENCE_BIN to coder-eval 0.12.16's executable "
         f"(.ci/run installs it){f'; {ref_bin!r} is not executable' if ref_bin else ''}")
    need(None if os.path.isdir(tasks) else
         f"no reference example tasks at {tasks} (.ci/run unpacks coder-eval's sdist)")
    return ref_bin, tasks


@pytest.mark.slow
def test_versus_reference_runs(tmp_path):
    ref_bin, tasks = _reference()
    res = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "versus_reference.py"),
         "--reference", ref_bin, "--reference-tasks", tasks, "--repeat", "1", "--tasks", "3",
         "--run-tasks", "2", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    for row in ("compile cold", "compile warm", "run"):
        assert any(line.split()[:len(row.split())] == row.split()
                   for line in res.stdout.splitlines()), (row, res.stdout)
    with open(tmp_path / "versus.json") as fh:
        data = json.load(fh)
    assert set(data["results"]) == {"compile cold", "compile warm", "run"}
    assert len(data["suite"]) == 3, data["suite"]
    for name, row in data["results"].items():
        assert row["tasks"] > 0 and row["ce_s"] > 0 and row["reference_s"] > 0, (name, row)
        assert row["ratio"] > 0, (name, row)
        lo, hi = row["ratio_by_round_range"]
        assert 0 < lo <= row["ratio_by_round"] <= hi, (name, row)
    # one round: its ratio is the ratio of the medians
    assert abs(data["results"]["run"]["ratio_by_round"]
               - data["results"]["run"]["ratio"]) < 1e-9
    assert data["results"]["run"]["tasks"] == 2
    # the report worker was timed on the run's own job (it exits 3 if the job is wrong)
    assert len(data["report_worker_all"]) == 1 and data["report_worker_all"][0] > 0
    assert "the report worker alone, on this run's job:" in res.stdout
