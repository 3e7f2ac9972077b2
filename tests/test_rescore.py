"""`ce rescore`: archived trials graded again offline, with the same or new criteria."""

import json
import os
import subprocess
import sys

import pytest

CE = [sys.executable, "-m", "ce_runtime.cli"]

TASK = """\
task_id: scripted
description: a scripted agent writes hello.py
initial_prompt: write hello.py
agent:
  type: script
  script:
    - write: hello.py
      content: |
        print("Hello, World!")
    - run: python hello.py
sandbox: {python: null}
success_criteria:
  - type: run_command
    command: python hello.py
    expected_stdout: "Hello, World!"
    description: runs
  - type: command_executed
    command_pattern: "python hello"
    description: ran it
"""


def ce(*args, cwd):
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_rescore_same_and_changed_criteria(tmp_path):
    (tmp_path / "t.yaml").write_text(TASK)
    assert ce("run", "t.yaml", "--repeats", "2", cwd=tmp_path).returncode == 0
    same = ce("rescore", "runs/latest", "--out", "same", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert "2 trial(s) re-scored, 0 changed" in same.stdout
    (tmp_path / "t2.yaml").write_text(TASK.replace('expected_stdout: "Hello, World!"',
                                                   'expected_stdout: "Goodbye"'))
    new = ce("rescore", "runs/latest", "t2.yaml", "--out", "new", cwd=tmp_path)
    assert new.returncode == 1  # the new criterion fails on the archived workspace
    assert "2 trial(s) re-scored, 2 changed" in new.stdout
    rec = json.loads((tmp_path / "new" / "default" / "scripted" / "01" / "task.json")
                     .read_text())
    assert rec["status"] == "FAILURE" and rec["previous"]["status"] == "SUCCESS"
    assert [c["passed"] for c in rec["criteria"]] == [False, True]
    assert rec["weighted_score"] == 0.5
    assert os.path.isfile(tmp_path / "new" / "report.md")
    # the archive itself is untouched
    old = json.loads(next((tmp_path / "runs").glob("*/default/scripted/01/task.json"))
                     .read_text())
    assert old["status"] == "SUCCESS"


@pytest.mark.slow
def test_a_command_that_writes_the_restored_workspace_leaves_the_store_intact(tmp_path):
    """Re-grading links the workspace to the object store (nothing copied); a command
    that rewrites a file gets a private copy first: the archive still verifies, and a
    second rescore gives the same result."""
    writer = TASK.replace("    command: python hello.py\n",
                          "    command: \"echo 'print(1)' > hello.py; chmod 600 hello.py; "
                          "python hello.py\"\n").replace('"Hello, World!"\n    description: runs',
                                                          '"1"\n    description: runs')
    (tmp_path / "t.yaml").write_text(TASK)
    assert ce("run", "t.yaml", cwd=tmp_path).returncode == 0
    (tmp_path / "w.yaml").write_text(writer)
    first = ce("rescore", "runs/latest", "w.yaml", "--out", "first", cwd=tmp_path)
    assert "1 trial(s) re-scored" in first.stdout, first.stderr
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    objects = [p for p in (run / "objects").rglob("*") if p.is_file()]
    import hashlib
    for obj in objects:  # every object still holds the bytes its name promises
        assert hashlib.sha256(obj.read_bytes()).hexdigest() == obj.parent.name + obj.name
        # no workspace link left behind: the run's and the results' (`--out` has objects
        # of its own, hard links) are its only names
        kept = tmp_path / "first" / "objects" / obj.parent.name / obj.name
        assert kept.samefile(obj) and obj.stat().st_nlink == 2
    again = ce("rescore", "runs/latest", "--out", "again", cwd=tmp_path)
    assert again.returncode == 0 and "1 trial(s) re-scored, 0 changed" in again.stdout, \
        again.stderr


LINKS_OUT = """\
task_id: links
description: the agent links to host paths, as agents do
initial_prompt: link
agent:
  type: script
  script:
    - run: "ln -s /usr/bin/env myenv && mkdir sub && ln -s ../../x sub/up && echo hi > out.txt"
sandbox: {python: null}
success_criteria:
  - type: file_contains
    path: out.txt
    includes: [hi]
    description: wrote its file
  - type: file_exists
    path: myenv
    description: made its link
"""


def test_a_trial_with_links_out_of_its_workspace_regrades_and_explains(tmp_path):
    (tmp_path / "t.yaml").write_text(LINKS_OUT)
    run = ce("run", "t.yaml", cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    manifest = json.loads(next((tmp_path / "runs").glob("*/default/links/00/workspace.json"))
                          .read_text())["files"]
    assert manifest["myenv"] == {"link": "/usr/bin/env"} and "sub/up" in manifest
    again = ce("rescore", "runs/latest", "--out", "again", cwd=tmp_path)
    assert again.returncode == run.returncode, again.stderr
    assert "1 trial(s) re-scored, 0 changed" in again.stdout  # no "damaged archive"
    explained = ce("explain", "runs/latest", cwd=tmp_path)
    assert explained.returncode == run.returncode and "damaged" not in explained.stderr
    assert "c1" in explained.stdout


AGENTLESS = """\
task_id: quiet
description: an agentless trial
agent: {type: none}
sandbox: {python: null}
pre_run:
  - command: "printf hi > hi.txt"
success_criteria:
  - type: file_contains
    path: hi.txt
    includes: [hi]
    description: pre_run wrote it
"""


def test_results_that_cannot_be_written_are_an_error_not_a_bug(tmp_path):
    """--out under a file (or anywhere it cannot write): one line naming the path, exit
    1, no traceback and nothing left behind, not an "internal error" (exit 3)."""
    (tmp_path / "t.yaml").write_text(AGENTLESS)
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    (tmp_path / "afile").write_text("x")
    res = ce("rescore", "run", "--out", "afile/sub", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"ce rescore: {tmp_path / 'afile'}: a file where a directory must go; "
        "no results written")
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "run", "t.yaml"]


@pytest.mark.parametrize("how", ["file", "read-only"])
def test_results_that_cannot_go_under_the_run_say_out_writes_them_elsewhere(tmp_path, how):
    """Without --out the results go to RUN/rescored: an archive on a read-only file
    system (or a file in their place) said only why the write failed; it says that
    --out DIR puts them elsewhere. Root writes through chmod: there the run directory is
    bind-mounted on itself read-only, a read-only file system (EROFS) for real."""
    (tmp_path / "t.yaml").write_text(AGENTLESS)
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    run, mounted = tmp_path / "run", False
    if how == "file":
        (run / "rescored").write_text("x")
    elif os.geteuid() == 0:
        subprocess.run(["mount", "--bind", str(run), str(run)], check=True)
        mounted = True
        subprocess.run(["mount", "-o", "remount,bind,ro", str(run)], check=True)
    else:
        os.chmod(run, 0o555)
    try:
        res = ce("rescore", "run", cwd=tmp_path)
    finally:
        if mounted:
            subprocess.run(["umount", str(run)], check=True)
        os.chmod(run, 0o755)
    if mounted:
        assert "Read-only file system" in res.stderr, res.stderr
    assert res.returncode == 1, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("ce rescore: run/rescored: "), last
    assert last.endswith("; no results written (`--out DIR` writes them elsewhere: a new "
                         "directory outside the run)"), last
    assert "Traceback" not in res.stderr


def test_a_failed_criterion_keeps_why_in_its_evidence_and_rescore_agrees(tmp_path):
    """evidence.json says why each criterion did not pass (the lines `ce explain` prints
    first: report.html shows them); a rescore writes the same, a passing one has none."""
    (tmp_path / "task.yaml").write_text("""\
task_id: why
description: one criterion fails, one passes
agent: {type: none}
sandbox: {python: null}
pre_run:
  - command: "printf 'hello world\\\\n' > a.txt"
success_criteria:
  - {type: file_contains, path: a.txt, includes: [hello, goodbye], description: both}
  - {type: file_matches_regex, path: a.txt, pattern: 'wor.d', description: a world}
  - {type: file_matches_regex, path: a.txt, pattern: '^bye', description: a bye}
""")
    res = ce("run", "task.yaml", "--run-dir", "run", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    trial = tmp_path / "run" / "default" / "why" / "00"
    evidence = json.loads((trial / "evidence.json").read_text())["criteria"]
    assert evidence == {
        "c0": [{"kind": "found", "lines": [
            "a.txt: 1 line",
            "includes 1/2: 'hello' found at a.txt:1:1; 'goodbye' not found"]}],
        "c2": [{"kind": "found", "lines": [
            "a.txt: 1 line", 're"^bye" matches nothing in a.txt']}]}
    res = ce("rescore", "run", "--out", "again", cwd=tmp_path)
    assert res.returncode == 1 and "0 changed" in res.stdout, res.stdout + res.stderr
    again = tmp_path / "again" / "default" / "why" / "00" / "evidence.json"
    assert json.loads(again.read_text())["criteria"] == evidence


def test_a_file_too_large_to_keep_is_graded_alike_by_the_run_and_the_rescore(tmp_path):
    """A sparse 300 MiB file (no disk used): the run's grader does not read it whole (an
    error naming the limit), the snapshot records it without its bytes, the rescore
    says the same, and `ce trial files` lists it as not kept."""
    (tmp_path / "task.yaml").write_text("""\
task_id: big
description: a file over the limit
agent: {type: none}
sandbox: {python: null}
pre_run:
  - command: "truncate -s 300M big.bin && echo small > small.txt"
success_criteria:
  - {type: file_exists, path: big.bin, description: exists}
  - {type: file_contains, path: big.bin, includes: [x], description: read}
  - {type: file_contains, path: small.txt, includes: [small], description: small}
""")
    res = ce("run", "task.yaml", "--run-dir", "run", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    trial = tmp_path / "run" / "default" / "big" / "00"
    record = json.loads((trial / "task.json").read_text())
    scores = [(c["score"], c["error"]) for c in record["criteria"]]
    assert scores == [(1.0, None), (0.0, "cannot read big.bin: too large to read: "
                                          "314,572,800 bytes (the limit is 256 MiB)"),
                      (1.0, None)]
    stored = sum(f.stat().st_size for f in (tmp_path / "run" / "objects").rglob("*")
                 if f.is_file())
    assert stored < 1 << 20
    res = ce("rescore", "run", "--out", "again", cwd=tmp_path)
    assert "1 trial(s) re-scored, 0 changed" in res.stdout, res.stdout + res.stderr
    listing = ce("trial", "files", str(trial), cwd=tmp_path)
    assert "(not kept)" in listing.stdout and "big.bin" in listing.stdout, listing


STATUS_KEPT = """\
task_id: {task_id}
description: the run decided this trial's status, not its criteria
initial_prompt: write a.txt
agent:
  type: script
  script:
    - {{write: a.txt, content: hi}}
    - {{sleep: 30}}
sandbox: {{python: null}}
{extra}
success_criteria:
  - {{type: file_exists, path: a.txt, description: wrote a.txt}}
"""


@pytest.mark.parametrize("task_id, extra, status, note", [
    ("slow", "run_limits: {task_timeout: 2}", "TIMEOUT",
     "NOTE: a run limit stopped the agent: the trial stays TIMEOUT"),
    ("seedless", "pre_run:\n  - {command: 'touch a.txt; false'}", "ERROR",
     "NOTE: the trial never reached grading (pre_run command failed: 'touch a.txt; false' "
     "(exit 1)): it stays ERROR"),
])
def test_explain_keeps_the_status_the_run_decided(tmp_path, task_id, extra, status, note):
    """As `ce rescore` does: explaining a TIMEOUT trial whose criteria pass said SUCCESS
    and exited 0; a trial whose pre_run failed (never graded) was 'now SUCCESS', every
    criterion a difference from the recorded grade."""
    (tmp_path / "t.yaml").write_text(STATUS_KEPT.format(task_id=task_id, extra=extra))
    run = ce("run", "t.yaml", cwd=tmp_path)
    assert run.returncode == 1 and f"1 {status}" in run.stdout, run.stdout + run.stderr
    explained = ce("explain", f"runs/latest/default/{task_id}/00", cwd=tmp_path)
    assert explained.returncode == 1, explained.stderr
    assert note in explained.stdout
    # its last line is the trial's status, as report.html's explanation ends
    assert explained.stdout.rstrip().splitlines()[-1].startswith(f"trial -> {status} (kept: ")
    assert "differs from the recorded grade" not in explained.stdout
    as_json = json.loads(ce("explain", f"runs/latest/default/{task_id}/00", "-f", "json",
                            cwd=tmp_path).stdout)
    assert as_json["recorded"]["status_kept"] is True
    rescored = ce("rescore", "runs/latest", "--out", "again", cwd=tmp_path)
    assert f"{status} -> {status}" in rescored.stdout, rescored.stdout + rescored.stderr


def test_results_go_to_a_new_directory_outside_the_run(tmp_path):
    """--out inside the run (its trials would be read as the run's own by the next
    re-score) or into a directory that holds something is refused (exit 2), as are -D
    and -e without TASKS (they would be ignored); nothing is written."""
    (tmp_path / "t.yaml").write_text(AGENTLESS)
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    for args, says in ((["--out", "run/default"], "is inside the run"),
                       (["--out", "run"], "is inside the run"),
                       (["--out", "full"], "exists and is not empty"),
                       (["-D", "success_criteria[0].weight=2"], "-D and -e apply to TASKS"),
                       (["-e", "t.yaml"], "-D and -e apply to TASKS")):
        res = ce("rescore", "run", *args, cwd=tmp_path)
        assert res.returncode == 2 and says in res.stderr, (args, res.stderr)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    (tmp_path / "empty").mkdir()
    ok = ce("rescore", "run", "--out", "empty", cwd=tmp_path)
    assert ok.returncode == 0 and (tmp_path / "empty" / "run.json").is_file(), ok.stderr


def test_explain_refuses_task_file_options_on_a_trial_and_speaks_json_for_a_plan(tmp_path):
    """A trial directory is explained with its own plan: -D, -e, --workspace, --trace
    are usage errors there (they were ignored). `ce explain TASK -f json` without a
    workspace gives the plan's facts as JSON (it printed the text)."""
    (tmp_path / "t.yaml").write_text(AGENTLESS)
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    trial = next(str(p.parent.relative_to(tmp_path))
                 for p in (tmp_path / "run").rglob("task.json"))
    for args in (["-D", "x=1"], ["-e", "t.yaml"], ["--workspace", "run"]):
        res = ce("explain", trial, *args, cwd=tmp_path)
        assert res.returncode == 2 and "applies to a task file" in res.stderr, res.stderr
    plan = ce("explain", "t.yaml", "-f", "json", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["task_id"] and doc["criteria"][0]["id"] == "c0"
    assert {"kind", "weight", "pass_threshold", "effects", "offline"} <= set(
        doc["criteria"][0])


POST_RUN_CLEANUP = """\
task_id: cleanup
description: post_run deletes what the criteria graded
agent: {type: none}
sandbox: {python: null}
pre_run: [{command: "mkdir -p node_modules && echo ok > node_modules/x && echo ok > result.txt"}]
post_run: [{command: "rm -rf node_modules result.txt && echo after > post.txt"}]
success_criteria:
  - {type: file_exists, path: result.txt, description: result written}
  - {type: file_exists, path: post.txt, description: not there when graded, weight: 0}
"""


def test_the_archive_is_the_graded_workspace_not_what_post_run_left(tmp_path):
    """post_run runs after grading and never affects the verdict (the guide): the
    snapshot is taken before it, so rescore and explain see what the criteria saw."""
    (tmp_path / "t.yaml").write_text(POST_RUN_CLEANUP)
    run = ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rec = json.loads((tmp_path / "run/default/cleanup/00/task.json").read_text())
    assert [c["score"] for c in rec["criteria"]] == [1.0, 0.0]
    assert rec["post_run"][0]["exit_code"] == 0  # it ran, after the snapshot
    again = ce("rescore", "run", "--out", "again", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 trial(s) re-scored, 0 changed" in again.stdout
    files = ce("trial", "files", "run/default/cleanup/00", cwd=tmp_path)
    assert "result.txt" in files.stdout and "post.txt" not in files.stdout


GRADER_WRITES = """\
task_id: grader_writes
description: a criterion's command changes the workspace the later criteria read
agent: {type: none}
sandbox: {python: null}
pre_run: [{command: "echo old > x.txt && mkdir -p node_modules/m && echo 1 > node_modules/m/v"}]
success_criteria:
  - {type: file_exists, path: created.txt, description: not there before the command}
  - {type: file_contains, path: x.txt, includes: [old], description: the agent's x.txt}
  - {type: run_command, command: "echo hi > created.txt; echo new > x.txt", description: w}
  - {type: file_contains, path: x.txt, includes: [new], description: the command's x.txt}
  - {type: file_exists, path: node_modules/m/v, description: found in a skipped directory}
"""


def test_the_archive_is_the_workspace_before_the_criteria_commands(tmp_path):
    """The snapshot was taken after grading: a criterion's command that wrote files
    (here created.txt and a new x.txt) made rescore and explain disagree with the run
    (c0 0 -> 1, c1 1 -> 0) and showed the grader's files as the agent's."""
    (tmp_path / "t.yaml").write_text(GRADER_WRITES)
    run = ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path)
    trial = "run/default/grader_writes/00"
    rec = json.loads((tmp_path / trial / "task.json").read_text())
    assert [c["score"] for c in rec["criteria"]] == [0.0, 1.0, 1.0, 1.0, 1.0], run.stderr
    again = ce("rescore", "run", "--out", "again", cwd=tmp_path)
    assert "1 trial(s) re-scored, 0 changed" in again.stdout, again.stdout + again.stderr
    said = ce("explain", trial, cwd=tmp_path)
    assert "differs" not in said.stdout, said.stdout
    files = ce("trial", "files", trial, cwd=tmp_path).stdout
    assert "created.txt" not in files and "node_modules/m/v" in files


def test_two_rescores_in_the_same_second_keep_both_results(tmp_path):
    """RUN/rescored/<time> has a one-second name: the second of two rescores started
    together failed at its end ("Directory not empty") and lost its grading. Each now
    reserves its own name (<time>, <time>-2)."""
    (tmp_path / "t.yaml").write_text(POST_RUN_CLEANUP)
    assert ce("run", "t.yaml", "--run-dir", "run", cwd=tmp_path).returncode == 0
    procs = [subprocess.Popen([*CE, "rescore", "run", "-q"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = [(*p.communicate(timeout=120), p.returncode) for p in procs]
    assert [code for _, _, code in results] == [0, 0, 0], results
    made = sorted(p.name for p in (tmp_path / "run" / "rescored").iterdir())
    assert len(made) == 3 and not any(name.startswith(".") for name in made), made
    for name in made:
        assert (tmp_path / "run" / "rescored" / name / "run.json").is_file()

