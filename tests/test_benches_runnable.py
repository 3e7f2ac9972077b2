"""The benchmarks stay runnable (tiny sizes; the numbers themselves live in bench/README)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    pytest.param(["ray_pool.py", "--trials", "4", "--sleep", "0.05", "--repeat", "1",
                  "--nodes", "1", "--out", "{tmp}"], id="ray_pool"),
])
def test_bench_runs(tmp_path, args):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = subprocess.run([sys.executable, os.path.join(ROOT, "bench", argv[0]), *argv[1:]],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)  # a hang check; loaded CI machines are slow
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
