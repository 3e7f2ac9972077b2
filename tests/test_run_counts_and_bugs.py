"""What a command line's counts may be, and what a bug of ce's leaves of a run: a value
past its bound is a usage error before anything is made (one past 2**64 stopped a run
already begun: exit 3, run.json "running" for good), and a run a bug stops says
`failed` in its run.json, why included."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.test_run_e2e import ce, env_for
from tests.test_run_resume_options import AGENTLESS

HUGE = "99999999999999999999"  # > 2**64


@pytest.mark.parametrize("args", [
    ["run", "agentless.yaml", "-j", HUGE], ["run", "agentless.yaml", "--sample", HUGE],
    ["run", "agentless.yaml", "--repeats", "10001"], ["compile", "agentless.yaml",
                                                      "--repeats", "10001"],
    ["rescore", "run", "-j", HUGE]])
def test_a_count_past_its_bound_is_a_usage_error_before_anything_is_made(tmp_path, args):
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    (tmp_path / "run").mkdir()
    res = ce(*args, "--run-dir", "out", cwd=str(tmp_path)) if args[0] == "run" \
        else ce(*args, cwd=str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert "is not in the range 1<=x<=" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_repeats_past_the_bound_in_an_experiment_is_a_compile_error(tmp_path):
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    (tmp_path / "e.yaml").write_text("experiment_id: e\ndefaults: {repeats: 100000000}\n"
                                     "variants: [{variant_id: a}]\n")
    res = ce("compile", "agentless.yaml", "-e", "e.yaml", cwd=str(tmp_path), timeout=60)
    assert res.returncode == 1 and "e.yaml:2:21: error[CE0104]: `defaults.repeats` must be " \
        ">= 1 and <= 10000, found 100000000" in res.stderr, res.stderr


WRAPPER = """\
import sys
from ce_runtime.cli import run

def broken(*args, **kwargs):
    raise RuntimeError("a bug at the end")

run._finish = broken
sys.argv = ["ce", *sys.argv[1:]]
from ce_runtime.cli import entry
entry()
"""


def test_a_run_a_bug_stops_says_failed_in_its_run_json(tmp_path):
    (tmp_path / "agentless.yaml").write_text(AGENTLESS)
    (tmp_path / "broken_ce.py").write_text(WRAPPER)
    res = subprocess.run([sys.executable, "broken_ce.py", "run", "agentless.yaml",
                          "--run-dir", "out"], cwd=tmp_path, env=env_for(str(tmp_path)),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 3, res.stderr
    assert "ce: internal error (RuntimeError: a bug at the end)" in res.stderr
    meta = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (meta["status"], meta["error"]) == (
        "failed", "internal error (RuntimeError: a bug at the end)")
    listed = ce("runs", ".", cwd=str(tmp_path))  # it listed the run as running
    [line] = [x for x in listed.stdout.splitlines() if x.startswith("out ")]
    assert line.split()[-2:] == ["failed", "fail"], listed.stdout  # status, verdict
