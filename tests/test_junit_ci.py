"""The JUnit file of `ce run --junit-xml` as CI test reports read it: one real run (two
variants, a passing, a failing and an erroring task, a dataset suite gate that fails,
`--min-pass-rate`) through the real CLI.

- GitLab's test report shows the *text* of a `<failure>`, `<error>` or `<skipped>`
  element, never its `message` attribute (lib/gitlab/ci/parsers/test/junit.rb takes
  the element's content): an ERROR trial, a failed suite gate or `--min-pass-rate` gate
  and a skipped trial had only the attribute, and GitLab showed them with no reason.
- Jenkins identifies a test by classname and name (the testsuite is not part of it):
  each variant's suite gate and `--min-pass-rate` gate had the same two, so the
  variants' gates read as one test listed twice.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: {task_id}
description: junit fixture
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "{pre_run}"
success_criteria:
  - type: run_command
    command: grep -qx 1 value.txt
    description: value.txt holds 1
"""

LABELS = """\
task_id: labels
description: a classification suite whose answers are half wrong
initial_prompt: "Label: ${row.text}"
dataset:
  rows:
    - {id: r1, text: crash, label: bug, answer: bug}
    - {id: r2, text: dark mode, label: feature, answer: bug}
agent: {type: claude-code}
reference:
  solve:
    - {write: label.txt, content: "${row.answer}"}
sandbox: {driver: tempdir, python: null}
success_criteria:
  - type: classification_match
    path: label.txt
    expected_label: "${row.label}"
    allowed_labels: [bug, feature]
    description: the issue is labelled
    pass_threshold: 0
    suite_thresholds: {accuracy: 0.75}
"""

EXPERIMENT = """\
experiment_id: two
description: two variants of the same suite
variants:
  - variant_id: first
    description: one
  - variant_id: second
    description: two
"""


@pytest.fixture(scope="module")
def junit(tmp_path_factory) -> ET.Element:
    root = tmp_path_factory.mktemp("junit")
    suite = root / "suite"
    suite.mkdir()
    for task_id, pre_run in (("passes", "echo 1 > value.txt"),
                             ("fails", "echo 2 > value.txt"), ("errs", "exit 3")):
        (suite / f"{task_id}.yaml").write_text(TASK.format(task_id=task_id, pre_run=pre_run))
    (suite / "labels.yaml").write_text(LABELS)
    (root / "exp.yaml").write_text(EXPERIMENT)
    res = subprocess.run([*CE, "run", "suite", "-e", "exp.yaml", "--agent", "oracle",
                          "--min-pass-rate", "0.9", "--run-dir", "run", "--junit-xml",
                          "junit.xml", "-q"], cwd=root, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 1, res.stderr
    return ET.parse(Path(root) / "junit.xml").getroot()


@pytest.mark.slow
def test_every_failure_error_and_skip_says_why_in_its_text(junit):
    outcomes = [(case, el) for case in junit.iter("testcase") for el in case
                if el.tag in ("failure", "error", "skipped")]
    kinds = Counter((el.tag, el.get("type")) for _, el in outcomes)
    # per variant: `fails` (FAILURE), `errs` (ERROR), the accuracy gate, --min-pass-rate
    assert kinds == {("failure", "FAILURE"): 2, ("error", "ERROR"): 2,
                     ("failure", "SUITE_GATE"): 2, ("failure", "MIN_PASS_RATE"): 2}
    for case, el in outcomes:
        text = (el.text or "").strip()
        assert text, f"{case.get('name')}: <{el.tag}> has no text (GitLab shows none)"
        assert text.splitlines()[0] == el.get("message"), (case.get("name"), text)
    error = next(el for _, el in outcomes if el.tag == "error")
    assert "pre_run command failed" in error.text
    failure = next(el for _, el in outcomes if el.get("type") == "FAILURE")
    # the failed criterion is still said beneath the summary line, with what the
    # grader found (a CI reader had the score and not why)
    assert "c0 run_command: score 0.00 < 0.90 (value.txt holds 1)\n" \
        "  $ grep -qx 1 value.txt: exit 1" in failure.text


@pytest.mark.slow
def test_testcase_names_are_unique_across_variants(junit):
    cases = Counter((case.get("classname"), case.get("name")) for case in junit.iter("testcase"))
    assert [key for key, n in cases.items() if n > 1] == []
    names = {case.get("name") for case in junit.iter("testcase")}
    # the variant leads every name, as in a trial's (`first/passes/00`)
    assert {"first/labels/c0 suite_thresholds", "second/labels/c0 suite_thresholds",
            "first/--min-pass-rate 0.9", "second/--min-pass-rate 0.9",
            "first/passes/00", "second/passes/00"} <= names


@pytest.mark.slow
def test_trial_and_suite_gate_testcases_name_their_task_file(junit):
    """`file`, relative to the directory `ce run` ran in (as the SARIF's URIs): GitLab
    links the test to the file (lib/gitlab/ci/parsers/test/junit.rb reads it; pytest's
    xunit1 family writes it); Jenkins' reader ignores attributes it does not know. The
    --min-pass-rate gate has no task file of its own."""
    files = {case.get("name"): case.get("file") for case in junit.iter("testcase")}
    for name, file in files.items():
        if "--min-pass-rate" in name:
            assert file is None, name
        elif name.endswith("suite_thresholds"):
            assert file == "suite/labels.yaml", name
        else:
            task = name.split("/")[1]
            assert file == f"suite/{task}.yaml", name
