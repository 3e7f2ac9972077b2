"""action.yml: a well-formed composite action whose inputs are all used, and whose `Run ce`
step, executed here with bash as a runner would (its `${{ inputs.* }}` filled in, ce on
PATH, GITHUB_OUTPUT a file), leaves JUnit, SARIF and the reports in the output directory
and reports ce's exit status."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"

TASK = """\
task_id: action-demo
description: passes or fails on the file pre_run writes
agent: {type: none}
sandbox: {driver: tempdir, python: null}
pre_run:
  - command: echo VALUE > v.txt
success_criteria:
  - type: run_command
    command: grep -qx 1 v.txt
    description: v.txt holds 1
"""


@pytest.fixture(scope="module")
def action():
    return yaml.safe_load(ACTION.read_text())


def test_composite_action_shape(action):
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    for step in steps:
        assert ("uses" in step) != ("run" in step), step
        if "run" in step:
            assert step["shell"] == "bash", step["name"]
            # inputs reach scripts through env only (no expression in the script text)
            assert "${{" not in step["run"], step["name"]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == ["actions/setup-python", "actions/upload-artifact",
                    "github/codeql-action/upload-sarif"]
    text = ACTION.read_text()
    for name in action["inputs"]:
        assert f"inputs.{name}" in text, f"input {name} is never used"
    assert action["inputs"]["suite"]["required"] is True
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    # a cancelled job's SARIF is a part of the run (what ran before the stop): code
    # scanning would close the alerts of every trial that did not run
    sarif = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action"))
    assert sarif["if"].startswith("!cancelled() && "), sarif["if"]


def _fill(value: str, inputs: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m.group(1)], value)


@pytest.mark.slow
@pytest.mark.parametrize("value,code,suite", [
    ("1", 0, "tasks"), ("2", 1, "tasks"),
    # several paths, a glob ce expands, a newline between them (a YAML block input)
    ("1", 0, "tasks/demo.yaml\n  more/*.yaml")])
def test_run_step_collects_the_results(action, tmp_path, value, code, suite):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "demo.yaml").write_text(TASK.replace("VALUE", value))
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "other.yaml").write_text(
        TASK.replace("VALUE", value).replace("action-demo", "action-other"))
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    inputs.update(suite=suite, args="--repeats 2")
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "run")
    env = {k: _fill(v, inputs) for k, v in step["env"].items()}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ce").write_text(f"#!/bin/sh\nexec {sys.executable} -m ce_runtime.cli \"$@\"\n")
    (bin_dir / "ce").chmod(0o755)
    out_file, summary = tmp_path / "github_output", tmp_path / "step_summary"
    summary.write_text("earlier step\n")
    res = run_step(step, env, tmp_path, out_file, summary)
    assert res.returncode == 0, res.stderr  # the step itself never fails
    outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines())
    assert outputs["exit-code"] == str(code)
    latest = (tmp_path / "runs" / "latest").resolve()
    assert outputs["run-dir"] == str(latest)
    out = tmp_path / "ce-results"
    assert {p.name for p in out.iterdir()} >= {"junit.xml", "ce.sarif", "report.md",
                                               "run.json", "trials.parquet",
                                               "results.parquet"}
    # the artifact is a baseline `ce compare` reads (a later job downloads it): compared
    # with the run itself, nothing regressed
    compared = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compare", str(out),
                               str(latest)], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert (out / "report.md").read_bytes() == (latest / "report.md").read_bytes()
    if (latest / "report.html").exists():
        assert (out / "report.html").read_bytes() == (latest / "report.html").read_bytes()
    trials = 4 if "more" in suite else 2  # each path's task, --repeats 2
    assert f'"trials": {trials},' in (out / "run.json").read_text()
    sarif = (out / "ce.sarif").read_text()
    assert ('"ruleId": "ce/run_command"' in sarif) == (code == 1)
    assert shutil.which("ce", path=str(bin_dir))
    # the job's summary page gets the report after what earlier steps wrote
    assert summary.read_text() == "earlier step\n" + (latest / "report.md").read_text()
    assert not (out / ".ce-started").exists()
    # a finished run's SARIF goes to code scanning (with upload-sarif: true)
    inputs["upload-sarif"] = "true"
    assert check_sarif(action, inputs, tmp_path) == ("true", "")

    # a second run that ce refuses (exit 2) starts no run: runs/latest is the first
    # run's, and nothing of it is taken for this one's results; nor are the first run's
    # files in the output directory (the same step twice in a job, a kept workspace):
    # its junit.xml and ce.sarif stayed, and were uploaded as this run's. ce writes
    # them saying it refused the input
    out_file.write_text("")
    env["CE_ARGS"] = "--repeats 0"
    res = run_step(step, env, tmp_path, out_file, summary)
    assert res.returncode == 0, res.stderr
    outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines())
    assert outputs == {"exit-code": "2"}, outputs
    assert "ce run started no run (exit 2): no reports to collect" in res.stdout
    assert not {"report.md", "run.json", "report.html", "trials.parquet",
                "results.parquet"} & {p.name for p in out.iterdir()}
    refused = "ce run refused its input: Invalid value for '--repeats'"
    assert f'<error type="REFUSED" message="{refused}' in (out / "junit.xml").read_text()
    sarif = json.loads((out / "ce.sarif").read_text())["runs"][0]
    assert sarif["results"] == [] and sarif["invocations"][0]["executionSuccessful"] is False
    # ...which code scanning would not process: not uploaded (the first run's was)
    assert check_sarif(action, inputs, tmp_path) == ("false", "did not finish")


def check_sarif(action: dict, inputs: dict, cwd: Path) -> tuple[str, str]:
    """The `Check the SARIF for code scanning` step run with bash -e as a runner runs it
    (`python` on PATH, as setup-python leaves it): its `upload` output, and its notice."""
    step = next(s for s in action["runs"]["steps"] if s.get("id") == "sarif")
    out_file = cwd / "sarif_output"
    out_file.write_text("")
    res = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=cwd, capture_output=True, text=True,
        timeout=60, env={**os.environ, **{k: _fill(v, inputs) for k, v in step["env"].items()},
                         "GITHUB_OUTPUT": str(out_file),
                         "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                 f"{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines())
    notice = re.search(r"::notice::.*?run (did not finish)", res.stdout)
    return outputs["upload"], notice.group(1) if notice else ""


def test_an_unfinished_runs_sarif_is_not_uploaded_to_code_scanning(action, tmp_path):
    """A SARIF whose run says executionSuccessful false (an interrupted run, a refusal
    without diagnostics) went to code scanning, which processes none (codeql-action #1393:
    'unsuccessful execution'); upload-sarif, waiting for the processing, then failed its
    step and the job, fail-on-failure: false or not. Skipped with a notice; a finished
    run's, or one whose invocation does not say, is uploaded; so is a SARIF that does not
    parse (upload-sarif says why)."""
    steps = action["runs"]["steps"]
    check = next(s for s in steps if s.get("id") == "sarif")
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action"))
    assert steps.index(check) + 1 == steps.index(upload)
    assert check["if"] == "!cancelled() && inputs.upload-sarif == 'true'"
    assert upload["if"] == "!cancelled() && steps.sarif.outputs.upload == 'true'"
    assert _fill(upload["with"]["sarif_file"], {"output-dir": "out"}) \
        == _fill(check["env"]["CE_SARIF"], {"output-dir": "out"}) == "out/ce.sarif"
    inputs = {"output-dir": "out"}
    assert check_sarif(action, inputs, tmp_path) == ("false", "")  # no SARIF at all
    (tmp_path / "out").mkdir()
    sarif = tmp_path / "out" / "ce.sarif"

    def doc(*invocations):
        return json.dumps({"version": "2.1.0", "runs": [
            {"tool": {"driver": {"name": "ce"}}, "results": [],
             **({"invocations": list(invocations)} if invocations else {})}]})

    for text, expected in [
            (doc({"executionSuccessful": True}), ("true", "")),
            (doc(), ("true", "")),
            (doc({"executionSuccessful": False, "toolExecutionNotifications": [
                {"level": "error", "message": {"text": "the run was interrupted"}}]}),
             ("false", "did not finish")),
            (doc({"executionSuccessful": True}, {"executionSuccessful": False}),
             ("false", "did not finish")),
            ("{not json", ("true", "")), ("[]", ("true", ""))]:
        sarif.write_text(text)
        assert check_sarif(action, inputs, tmp_path) == expected, text


def run_step(step: dict, env: dict, cwd: Path, out_file: Path, summary: Path):
    """The `Run ce` step's script under bash -e, as a runner runs it, with ce on PATH."""
    return subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=cwd, capture_output=True, text=True,
        timeout=300, env={**os.environ, **env, "GITHUB_OUTPUT": str(out_file),
                          "GITHUB_STEP_SUMMARY": str(summary),
                          "PATH": f"{cwd / 'bin'}{os.pathsep}{os.environ['PATH']}",
                          "PYTHONPATH": str(ROOT)})
