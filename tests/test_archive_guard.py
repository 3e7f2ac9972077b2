"""Output files never land on a run's archive: --junit-xml / --sarif inside the run being
written, `ce report -o` / `ce compare -o` over run.json or a trial's files (each wrote
atomically over the archive and destroyed the run it reported on)."""

from __future__ import annotations

import json
import subprocess
import sys

CE = [sys.executable, "-m", "ce_runtime.cli"]
TASK = """\
task_id: t
description: agentless
agent: {type: none}
sandbox: {python: null}
pre_run: [{command: "echo ok > out.txt"}]
success_criteria:
  - {type: file_exists, path: out.txt, description: written}
"""


def ce(*args, cwd):
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_run_refuses_report_files_inside_its_own_run_directory(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK)
    for option, path in (("--junit-xml", "r/run.json"), ("--sarif", "r/report.md"),
                         ("--junit-xml", "r"), ("--sarif", "r/default/t/00/x.sarif")):
        res = ce("run", "t.yaml", "--run-dir", "r", option, path, cwd=tmp_path)
        assert res.returncode == 2, res.stderr
        assert f"{option} {path}: " in res.stderr and "nothing was run" in res.stderr
        assert not (tmp_path / "r" / "run.json").exists()
    ok = ce("run", "t.yaml", "--run-dir", "r", "--junit-xml", "r/junit.xml", "--sarif",
            "out/ce.sarif", cwd=tmp_path)  # a file of its own beside the run's is fine
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "r" / "junit.xml").is_file() and (tmp_path / "out" / "ce.sarif").is_file()


def test_report_and_compare_never_write_over_a_runs_archive(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK)
    assert ce("run", "t.yaml", "--run-dir", "r", cwd=tmp_path).returncode == 0
    run_json = (tmp_path / "r" / "run.json").read_bytes()
    record = tmp_path / "r" / "default" / "t" / "00" / "task.json"
    before = record.read_bytes()
    res = ce("report", "r", "-f", "md", "-o", "r/run.json", cwd=tmp_path)
    assert res.returncode == 2 and "part of the run archived in" in res.stderr
    res = ce("compare", "r", "r", "-o", "r/default/t/00/task.json", cwd=tmp_path)
    assert res.returncode == 2 and "part of the run archived in" in res.stderr
    assert (tmp_path / "r" / "run.json").read_bytes() == run_json
    assert record.read_bytes() == before
    json.loads(run_json)
    # a report regenerated in place, or written anywhere else, is fine
    assert ce("report", "r", "-f", "md", "-o", "r/report.md", cwd=tmp_path).returncode == 0
    assert ce("compare", "r", "r", "-o", "cmp.md", cwd=tmp_path).returncode == 0
