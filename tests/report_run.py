"""A small real run for the report tests: `--agent oracle` plays each task's scripted
reference solution (no model, no key; `${row.*}` is substituted there), two variants,
a classification suite whose scripted answers are partly wrong (so its confusion matrix
has every cell), a failing file check, a command's output and an early stop.

    from tests.report_run import make_run
    run_dir = make_run(tmp_path)   # RUN/<id>, a real `ce run` directory
"""

from __future__ import annotations

import os
import subprocess
import sys

CE = [sys.executable, "-m", "ce_runtime.cli"]

# rows: (id, expected skill, the skill the scripted agent calls)
ROWS = [("d1", "date-teller", "date-teller"), ("d2", "date-teller", "date-teller"),
        ("d3", "date-teller", "none"), ("n1", "", "none"), ("n2", "", "date-teller"),
        ("n3", "", "none")]
# expected yes -> observed yes 2, no 1; expected no -> yes 1, no 2 (per variant)
CONFUSION = {("yes", "yes"): 2, ("yes", "no"): 1, ("no", "yes"): 1, ("no", "no"): 2}

CLASSIFY = """\
task_id: classify
description: does the agent call the date-teller skill exactly for date questions?
initial_prompt: "${row.prompt}"
dataset:
  rows:
ROWS_HERE
agent: {type: claude-code}
reference:
  solve:
    - {tool: Skill, params: {skill: "${row.called}"}, output: "2026-12-01 Tuesday"}
    - {say: "answered"}
sandbox:
  python: null
  template_sources:
    - type: starter_files
      files:
        - {path: .claude/skills/date-teller/SKILL.md, content: "---\\nname: date-teller\\ndescription: Tells the date.\\n---\\n"}
success_criteria:
  - type: skill_triggered
    skill_name: date-teller
    expected_skill: "${row.expected_skill}"
    description: date-teller fires exactly on the date questions
    suite_thresholds: {recall.yes: 0.6, precision.yes: 0.6}
""".replace("ROWS_HERE", "\n".join(
    f"    - {{id: {i}, prompt: 'question {i}', expected_skill: '{e}', called: '{c}'}}"
    for i, e, c in ROWS))

FILES = """\
task_id: files
description: the agent writes a report and prints it; the notes come from the variant
initial_prompt: Write report.txt and show it.
agent: {type: claude-code}
reference:
  solve:
    - {write: report.txt, content: "status: ok\\nitems: 3\\n"}
    - {run: cat report.txt}
    - {say: done}
sandbox:
  python: null
  template_sources:
    - type: starter_files
      files:
        - {path: README.md, content: "# the template\\n"}
        - {path: report.txt, content: "status: pending\\n"}
success_criteria:
  - {type: file_contains, path: report.txt, includes: ["status: ok", "items: 3"],
     description: the report says ok}
  - {type: run_command, command: "cat report.txt && echo shown", expected_stdout: shown,
     stdout_match: contains, description: the report can be shown}
  - {type: file_exists, path: NOTES.md, description: the notes exist}
"""

EARLY = """\
task_id: early
description: stops as soon as the version command ran
initial_prompt: Check the python version and write it down.
agent: {type: claude-code}
reference:
  solve:
    - {run: "echo Python 3.11.7"}
    - {write: version.txt, content: "3.11.7\\n"}
    - {say: done}
run_limits: {stop_early: true}
sandbox: {python: null}
success_criteria:
  - {type: command_executed, tool_name: Bash, command_pattern: "echo Python", min_count: 1,
     stop_when: pass, description: the agent checked the version}
  - {type: file_exists, path: version.txt, description: version.txt was written}
"""

EXPERIMENT = """\
experiment_id: notes-ab
description: does shipping NOTES.md in the template help?
variants:
  - variant_id: plain
  - variant_id: with-notes
    template_sources:
      - type: starter_files
        files:
          - {path: NOTES.md, content: "# notes\\n"}
"""


def write_tasks(root: str) -> tuple[str, str]:
    """The task directory and the experiment file, written under `root`."""
    tasks = os.path.join(root, "tasks")
    os.makedirs(tasks, exist_ok=True)
    for name, text in (("classify.yaml", CLASSIFY), ("files.yaml", FILES),
                       ("early.yaml", EARLY)):
        with open(os.path.join(tasks, name), "w", encoding="utf-8") as fh:
            fh.write(text)
    experiment = os.path.join(root, "notes_ab.yaml")
    with open(experiment, "w", encoding="utf-8") as fh:
        fh.write(EXPERIMENT)
    return tasks, experiment


def make_run(root) -> str:
    """Run the fixture tasks under the two variants; the run directory (resolved)."""
    root = str(root)
    write_tasks(root)
    runs = os.path.join(root, "runs")
    proc = subprocess.run([*CE, "run", "tasks", "-e", "notes_ab.yaml", "--agent", "oracle",
                           "--runs-root", runs],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CE_PLAIN": "1"})
    if proc.returncode not in (0, 1):  # 1: some trials fail, as they should
        raise AssertionError(f"ce run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return os.path.realpath(os.path.join(runs, "latest"))
