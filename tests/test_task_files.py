"""The task directory's files a plan grades with are kept with the run: a re-grade of the
archived plan reads those, not what the task directory holds today (edited, moved,
deleted, another machine)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ce_lang.api import CompileOptions, compile_paths
from ce_runtime.store import task_files

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: kept
description: the grader reads hidden files of the task directory
initial_prompt: write hello.txt and data.json
agent:
  type: script
  script:
    - write: hello.txt
      content: "hello\\n"
    - write: data.json
      content: '{"n": 1}'
sandbox: {python: null}
reference:
  file: reference/solution.txt
success_criteria:
  - type: run_command
    command: diff hello.txt $TASK_DIR/hidden/expected.txt
    description: the hidden expected output
  - type: json_check
    path: data.json
    json_schema: $TASK_DIR/schema.json
    description: the task's schema
  - type: run_command
    command: cmp hello.txt "${TASK_DIR}/reference/solution.txt"
    description: the reference
"""


def _suite(root) -> str:
    task_dir = root / "suite" / "kept"
    (task_dir / "hidden").mkdir(parents=True)
    (task_dir / "reference").mkdir()
    (task_dir / "t.yaml").write_text(TASK)
    (task_dir / "hidden" / "expected.txt").write_text("hello\n")
    (task_dir / "reference" / "solution.txt").write_text("hello\n")
    (task_dir / "schema.json").write_text(json.dumps(
        {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}))
    return str(task_dir)


def ce(*args, cwd, tmp):
    env = {**os.environ, "CE_PLAIN": "1", "TMPDIR": str(tmp)}
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


def test_the_paths_a_plan_grades_with(tmp_path):
    task_dir = _suite(tmp_path)
    (trial,) = compile_paths([os.path.join(task_dir, "t.yaml")], CompileOptions()).trials
    assert task_files.graded_paths(trial.plan) == [
        "reference/solution.txt", "hidden/expected.txt", "schema.json"]


def test_paths_above_the_task_directory_keep_their_place(tmp_path):
    task_dir = tmp_path / "family" / "one"
    (task_dir / "docs").mkdir(parents=True)
    (tmp_path / "family" / "shared").mkdir()
    (tmp_path / "family" / "shared" / "rubric.md").write_text("be strict\n")
    (task_dir / "docs" / "a.md").write_text("a\n")
    run = tmp_path / "run"
    (run / "objects").mkdir(parents=True)
    kept = task_files.snapshot(str(task_dir), ["../shared/rubric.md", "docs", "gone.txt"],
                               str(run / "objects"))
    assert sorted(kept["files"]) == ["../shared/rubric.md", "docs/a.md"]
    assert kept["missing"] == ["gone.txt"]
    path = task_files.manifest_path(str(run), "ab" * 32)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as fh:
        json.dump({"version": 1, "task_dirs": {str(task_dir): kept}}, fh)
    # unchanged: the directory itself, nothing said
    assert task_files.task_dir_for(str(run), "ab" * 32, str(task_dir)) == (str(task_dir), [])
    shutil.rmtree(tmp_path / "family")
    task_files._RESOLVED.clear()
    where, notes = task_files.task_dir_for(str(run), "ab" * 32, str(task_dir))
    assert where != str(task_dir) and notes and "graded with the copies" in notes[0]
    with open(os.path.join(where, "..", "shared", "rubric.md")) as fh:
        assert fh.read() == "be strict\n"
    with open(os.path.join(where, "docs", "a.md")) as fh:
        assert fh.read() == "a\n"
    assert not os.path.exists(os.path.join(where, "gone.txt"))


@pytest.mark.slow
def test_a_rescore_reads_the_task_files_the_run_kept(tmp_path):
    task_dir = _suite(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    ran = ce("run", os.path.join(task_dir, "t.yaml"), "--run-dir", "run", cwd=tmp_path, tmp=tmp)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(os.listdir(tmp_path / "run" / "task_files")) == 1

    # the task's hidden files change after the run
    with open(os.path.join(task_dir, "hidden", "expected.txt"), "w") as fh:
        fh.write("goodbye\n")
    os.remove(os.path.join(task_dir, "schema.json"))
    same = ce("rescore", "run", "--out", "same", cwd=tmp_path, tmp=tmp)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "1 trial(s) re-scored, 0 changed" in same.stdout
    assert "task's files changed since the run (hidden/expected.txt, schema.json)" in \
        same.stderr  # the notes go with the warnings

    # a rescore with the task compiled again grades with today's files: it is asked to
    # (the compiler checks that a `$TASK_DIR/` schema exists)
    with open(os.path.join(task_dir, "schema.json"), "w") as fh:
        fh.write('{"type": "object"}')
    new = ce("rescore", "run", os.path.join(task_dir, "t.yaml"), "--out", "new",
             cwd=tmp_path, tmp=tmp)
    assert new.returncode == 1 and "1 changed" in new.stdout, new.stdout + new.stderr

    # the run moved to another directory, its task directory gone
    shutil.move(tmp_path / "run", tmp_path / "elsewhere")
    shutil.rmtree(tmp_path / "suite")
    moved = ce("rescore", "elsewhere", "--out", "moved", cwd=tmp_path, tmp=tmp)
    assert moved.returncode == 0 and "0 changed" in moved.stdout, moved.stdout + moved.stderr
    explained = ce("explain", "elsewhere/default/kept/00", cwd=tmp_path, tmp=tmp)
    assert explained.returncode == 0, explained.stdout + explained.stderr
    assert "graded with the copies the run kept" in explained.stdout
    # the rescored run can be explained too: it links the kept files
    again = ce("explain", "moved/default/kept/00", cwd=tmp_path, tmp=tmp)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not [n for n in os.listdir(tmp) if n.startswith("ce-task-files-")]


def test_editing_a_file_a_criterion_names_is_a_new_plan(tmp_path):
    task_dir = _suite(tmp_path)
    path = os.path.join(task_dir, "t.yaml")
    (before,) = compile_paths([path], CompileOptions()).trials
    assert {"hidden/expected.txt", "schema.json", "reference/solution.txt"} <= set(
        before.plan.inputs)
    with open(os.path.join(task_dir, "hidden", "expected.txt"), "w") as fh:
        fh.write("goodbye\n")
    (after,) = compile_paths([path], CompileOptions()).trials
    assert after.plan_hash != before.plan_hash
    assert after.plan.inputs["hidden/expected.txt"] != before.plan.inputs["hidden/expected.txt"]
    assert after.plan.inputs["schema.json"] == before.plan.inputs["schema.json"]


@pytest.mark.parametrize("entry", [
    {"files": {"a.txt": 5}},  # read by the check of the live directory: no AttributeError
    {"files": {"/etc/passwd": {"sha256": "00" * 32}}},  # never read from outside
    {"files": {"docs/../../x": {"sha256": "00" * 32}}},
    {"files": {}, "missing": "abc"},
    {"files": {"a.txt": {"sha256": "not hex"}}, "missing": ["b"]},
])
def test_a_damaged_manifest_is_a_damaged_archive_naming_it(tmp_path, entry):
    from ce_runtime.store.archive import DamagedArchive

    task_dir = tmp_path / "task"
    task_dir.mkdir()
    (task_dir / "a.txt").write_text("now\n")
    run = tmp_path / "run"
    (run / "objects").mkdir(parents=True)
    path = task_files.manifest_path(str(run), "cd" * 32)
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as fh:
        json.dump({"version": 1, "task_dirs": {str(task_dir): entry}}, fh)
    task_files._RESOLVED.clear()
    with pytest.raises(DamagedArchive) as exc:
        task_files.task_dir_for(str(run), "cd" * 32, str(task_dir))
    assert exc.value.path == path


TEMPLATED = """\
task_id: templated
description: the agent edits a file of the template
initial_prompt: change app.py
agent:
  type: script
  script:
    - write: app.py
      content: "x = 3\\n"
sandbox:
  python: null
  template_sources:
    - {type: template_dir, path: tpl}
success_criteria:
  - {type: file_exists, path: app.py, description: kept}
"""


def test_a_template_changed_since_the_run_is_diffed_as_the_run_kept_it(tmp_path):
    """report.html's file diffs are against the template the trials started from: a
    template directory edited after the run is rebuilt from the copies the run kept
    (templates/<hash>.json), and the trial's panel says so."""
    from ce_runtime.report.html_trial import TemplateCache, trial_detail
    from ce_runtime.report.rundir import load_run

    task_dir = tmp_path / "suite"
    (task_dir / "tpl").mkdir(parents=True)
    (task_dir / "t.yaml").write_text(TEMPLATED)
    (task_dir / "tpl" / "app.py").write_text("x = 1\n")
    (task_dir / "tpl" / "notes.txt").write_text("keep\n")
    os.symlink("notes.txt", task_dir / "tpl" / "link.txt")
    (task_dir / "tpl" / "dist").mkdir()  # dropped by the default ignore patterns: the
    (task_dir / "tpl" / "dist" / "bundle.js").write_text("x")  # copy and archive skip it
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    ran = ce("run", str(task_dir / "t.yaml"), "--run-dir", "run", cwd=tmp_path, tmp=tmp)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run = str(tmp_path / "run")
    (kept,) = os.listdir(os.path.join(run, "templates"))
    with open(os.path.join(run, "templates", kept)) as fh:
        entry = json.load(fh)["task_dirs"][str(task_dir)]
    assert sorted(entry["files"]) == ["tpl/app.py", "tpl/link.txt", "tpl/notes.txt"]
    assert entry["files"]["tpl/link.txt"] == {"link": "notes.txt"}

    def files_and_notes():
        task_files._RESOLVED.clear()
        data = load_run(run)
        detail = json.loads(trial_detail(run, data.records[0], 200_000, TemplateCache(run)))
        return {f["path"]: (f["status"], f.get("diff")) for f in detail["files"]}, \
            detail.get("notes") or []

    before, notes = files_and_notes()
    assert notes == [] and before["notes.txt"][0] == "unchanged"
    assert before["app.py"][0] == "modified" and "-x = 1" in before["app.py"][1]

    # the template is edited after the run: the same diffs, and the panel says why
    (task_dir / "tpl" / "app.py").write_text("x = 2\n")
    (task_dir / "tpl" / "notes.txt").unlink()
    after, notes = files_and_notes()
    assert after == before
    assert len(notes) == 1 and "tpl/app.py, tpl/notes.txt" in notes[0] \
        and "the template rebuilt from the copies the run kept" in notes[0]
    report = ce("report", "run", "-f", "html", cwd=tmp_path, tmp=tmp)
    assert report.returncode == 0, report.stderr
    assert not [n for n in os.listdir(tmp) if n.startswith("ce-task-files-")]
