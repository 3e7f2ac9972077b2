"""Re-scoring reads archived workspaces in place (store/snapshot_view.py): every answer
a criterion gets from the snapshot view equals the restored directory's, and a workspace
is restored on disk only when a criterion needs one."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from ce_runtime.grade import rescore as R
from ce_runtime.grade.host import Host
from ce_runtime.store.archive import DamagedArchive
from ce_runtime.store.snapshot_view import NeedsWorkspace, SnapshotView
from ce_runtime.store.workspace_snapshot import restore_workspace, snapshot_workspace


def _workspace(root):
    """Files of every kind a workspace holds, and links of every kind a snapshot keeps."""
    def write(rel, data):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())

    write("report.json", json.dumps({"status": "ok", "items": [1, 2, 3]}))
    write("bad.json", "{not json")
    write("notes.md", "# Notes\nline two\n")
    write("empty.txt", "")
    write("bin.dat", bytes(range(256)))
    write("big.txt", "x" * (3 << 20))
    write("nested/a/b/deep.py", "print('deep')\n")
    write("nested/a/c.py", "print('c')\n")
    write("nested/z.txt", "z")
    write(".hidden/x.txt", "hidden")
    write("dist/out.js", "js")
    write("schema.json", json.dumps({"type": "object", "required": ["status"]}))
    write("calls.jsonl", '{"argv": ["git", "status"], "exit": 0}\nnot json\n')
    write("broken.jsonl", '{"argv": ["ls"]}\n')
    write("broken.jsonl.error", "one\ntwo\n")
    os.symlink("notes.md", root / "link_to_file")
    os.symlink("missing.txt", root / "dangling")
    os.symlink("link_to_dir/b/deep.py", root / "chain")
    os.symlink("notes.md/x", root / "through_file")
    (root / "weird").mkdir()
    os.symlink("up/../x", root / "weird" / "esc")  # textually inside, really outside
    os.symlink("loop2", root / "weird" / "loop1")
    os.symlink("loop1", root / "weird" / "loop2")


# links to directories: the snapshot of a workspace skips them (os.walk lists them as
# directories), a manifest may hold them all the same
DIR_LINKS = {"link_to_dir": {"link": "nested/a"}, "nested_link": {"link": "nested"},
             "weird/up": {"link": ".."}}  # weird/up: the workspace root itself


PLAIN = ["report.json", "missing.txt", "*.json", "**/*.py", "nested/**", "nested/*/", "*",
         ".*", ".hidden/*", "link_to_dir/*.py", "link_to_dir/b/deep.py", "dangling",
         "empty.txt", "bin.dat", "big.txt", "chain", "through_file", "dist/*.js",
         "**/*.js", "link_to_file", "nested", "nested/", "[nr]*", "n?tes.md",
         "nested/a/../z.txt", "nested/a/../../report.json", "a**b", "", "nested_link/**/*.py",
         "nested_link/a/c.py", "./report.json", "nested//a/c.py", "report.json/",
         "calls.jsonl", "broken.jsonl", "schema.json", "nested/a/b/../c.py",
         "weird/up/notes.md", "weird/up", "**/c.py", "link_to_dir/../z.txt"]
WEIRD = ["*/*/*.py", "weird/esc", "weird/loop1", "../x", "weird/*", "**", "**/*", "**/", "*/*",
         "weird/up/../x", "weird/up/weird/esc"]
OPS = ["path_exists", "glob", "read_text", "read_json", "read_cli_log"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    base = tmp_path_factory.mktemp("snap")
    ws, objects = base / "ws", base / "objects"
    ws.mkdir()
    _workspace(ws)
    manifest = snapshot_workspace(str(ws), str(objects))
    manifest["files"].update(DIR_LINKS)
    ref = base / "restored"
    restore_workspace(manifest, str(objects), str(ref), link_objects=True,
                      outward_links=True)  # weird/esc leaves through weird/up: as rescore
    return manifest, str(objects), str(ref), str(base)


def _outcome(host, op, args, workspaces):
    """What a builtin answers (or raises), with the directory graded named `<ws>`: a
    `../<dir>/...` pattern reaches the workspace from outside, and its matches, reads
    and errors spell the directory's (random) name."""
    def plain(text):
        for ws in filter(None, [*workspaces, host.workspace]):
            text = text.replace(os.path.realpath(ws), "<ws>").replace(ws, "<ws>")
            text = text.replace(os.path.basename(ws), "<ws>")
        return text

    try:
        value = host.call(op, list(args))
        if isinstance(value, list):
            value = [plain(v) for v in value]
        return "ok", type(value).__name__, value, [plain(r) for r in host.reads]
    except Exception as exc:
        return "error", type(exc).__name__, plain(str(exc)), [plain(r) for r in host.reads]


def _view_host(manifest, objects, base, restored):
    def materialize():
        restored.append(1)
        path = tempfile.mkdtemp(dir=base)
        restore_workspace(manifest, objects, path, link_objects=True, outward_links=True)
        return path

    return Host(workspace="", ignore_patterns=("dist", "*.pyc"),
                files=SnapshotView(manifest, objects), materialize=materialize)


@pytest.mark.parametrize("op", OPS)
def test_the_snapshot_view_answers_as_the_restored_directory(archive, op):
    manifest, objects, ref, base = archive
    for pattern in PLAIN + WEIRD:
        disk = Host(workspace=ref, ignore_patterns=("dist", "*.pyc"))
        restored: list[int] = []
        view = _view_host(manifest, objects, base, restored)
        want = _outcome(disk, op, [pattern], [ref])
        got = _outcome(view, op, [pattern], [ref, view.workspace])
        assert got == want, (op, pattern)
        if pattern in PLAIN:  # answered from the manifest: nothing restored
            assert restored == [], (op, pattern)
        assert len(restored) <= 1


def test_schema_checks_and_similarity_read_the_view(archive):
    manifest, objects, ref, base = archive
    doc = {"status": "ok"}
    for schema in ["schema.json", "report.json", "bad.json", "missing.json", "*.json",
                   "bin.dat", "link_to_dir", "dangling"]:
        disk = Host(workspace=ref)
        restored: list[int] = []
        view = _view_host(manifest, objects, base, restored)
        assert _outcome(view, "schema_valid", [doc, schema], [ref, view.workspace]) == \
            _outcome(disk, "schema_valid", [doc, schema], [ref]), schema


def test_weird_links_are_answered_by_the_disk(archive):
    manifest, objects, _ref, _base = archive
    view = SnapshotView(manifest, objects)
    with pytest.raises(NeedsWorkspace):  # where it leads depends on the disk outside
        view.read("weird/esc")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        view.read("weird/loop1")  # as the disk says it
    assert view.read("chain") == b"print('deep')\n"
    assert view.read("empty.txt") == b""
    assert len(view.read("big.txt")) == 3 << 20
    assert view.lexists("dangling") and not view.is_file("dangling")


@pytest.mark.parametrize("manifest, why", [
    ({"files": {"a": {"link": "../x"}}}, "pointing out of the workspace"),
    ({"files": {"a": {"link": "/etc/passwd"}}}, "pointing out of the workspace"),
    ({"files": {"../a": {"sha256": "0" * 64}}}, "component"),
    ({"files": {"a": {"link": "b"}, "a/c": {"link": "b"}}}, "goes through a link"),
    ({"files": {"a/c": {"link": "b"}, "a": {"link": "b"}}}, "named twice"),
    ({"files": {"a": {"sha256": "xyz"}}}, "no valid sha256"),
    ({"files": {"a": {"sha256": "0" * 64}}}, "missing or unreadable"),
    ({"files": []}, "no `files` mapping"),
    ({"files": {"a": 3}}, "not an entry"),
])
def test_a_damaged_manifest_is_refused_as_a_restore_refuses_it(tmp_path, manifest, why):
    objects = str(tmp_path / "objects")
    os.makedirs(objects)
    with pytest.raises(DamagedArchive) as restored:
        restore_workspace(manifest, objects, str(tmp_path / "dest"))
    with pytest.raises(DamagedArchive) as viewed:
        SnapshotView(manifest, objects)
    assert str(viewed.value) == str(restored.value)
    assert why in str(viewed.value)


# -- whole trials ----------------------------------------------------------------------------
TASK = """\
task_id: files
description: a scripted agent leaves files and links for re-scoring
initial_prompt: write the files
agent:
  type: script
  script:
    - {write: report.json, content: '{"status": "ok", "items": [1, 2, 3], "name": "bench"}'}
    - {write: notes.md, content: "# Notes\\nreport.json has it\\n"}
    - {write: src/pkg/mod.py, content: "def f():\\n    return 1\\n"}
    - {write: empty.txt, content: ""}
    - {run: "ln -s report.json alias.json && ln -s src/pkg/mod.py mod.py && ln -s gone dangling"}
    - {say: done}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, description: the report exists, path: report.json}
  - {type: file_exists, description: a module exists, path: "src/**/*.py"}
  - {type: file_exists, description: nothing missing, path: missing.txt}
  - {type: file_contains, description: notes, path: notes.md, includes: ["# Notes", "nope"]}
  - {type: json_check, description: the alias, path: alias.json, assertions: [
       {expression: status, operator: equals, expected: ok},
       {expression: name, operator: regex, expected: "^ben"}]}
  - {type: file_check, description: the module through the link, path: mod.py,
     includes: ["def f"], patterns: [{pattern: "return \\\\d+"}]}
  - {type: file_contains, description: a dangling link, path: dangling, includes: [x]}
  - {type: file_exists, description: the empty file, path: empty.txt}
  - {type: command_executed, description: linked, command_pattern: "ln -s", min_count: 1}
  - {type: expr, description: comprehensions, expr: 'all(trace.tool_calls, c -> c.tool !=
     "Nope") and exists(trace.tool_calls, c -> c.tool == "Write")'}
  - {type: expr, kind: continuous, description: a ratio, expr: 'len(filter(trace.tool_calls,
     c -> c.ok)) / max(len(trace.tool_calls), 1)'}
  - {type: expr, description: map and in, expr: '"Write" in map(trace.tool_calls, c -> c.tool)
     and len(map(trace.tool_calls, c -> c.tool)) > 2'}
  - {type: expr, description: out of range, expr: 'trace.tool_calls[99].ok'}
  - {type: expr, kind: continuous, description: by zero, expr: '1.0 / (len(trace.tool_calls)
     - len(trace.tool_calls))'}
  - {type: expr, description: a condition, expr: 'if len(trace.tool_calls) > 1 then -1 < 0
     else false'}
  - {type: expr, description: a document, expr: 'read_json("report.json").value.status ==
     "ok" and read_json("bad.json").ok == false'}
"""
COMMAND = """\
  - {type: run_command, description: the report is shown, command: cat report.json,
     expected_stdout: '"status": "ok"', stdout_match: contains}
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    src = tmp_path_factory.mktemp("run")
    (src / "files.yaml").write_text(TASK)
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "files.yaml",
                           "--repeats", "2"], cwd=src, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return src, os.path.realpath(src / "runs" / "latest")


def _rescore_all(run, monkeypatch=None, plan=None, runner_for=None):
    out = []
    for d in R.trial_dirs(run):
        out.append(R.rescore_trial(d, run, plan, runner_for=runner_for))
    return out


def test_a_trial_graded_from_the_store_equals_one_graded_on_disk(run_dir, monkeypatch):
    _src, run = run_dir
    before = R.RESTORED[0]
    viewed = _rescore_all(run)
    assert R.RESTORED[0] == before  # file and trace criteria: nothing restored

    class Disk(SnapshotView):  # every question asked of the restored directory
        def lexists(self, rel):
            raise NeedsWorkspace(rel)

    monkeypatch.setattr(R, "SnapshotView", Disk)
    on_disk = _rescore_all(run)
    assert R.RESTORED[0] == before + len(on_disk)
    assert viewed == on_disk
    record, evidence = viewed[0]
    assert set(evidence["criteria"]) <= {c["id"] for c in record["criteria"]}
    scores = [c["score"] for c in record["criteria"]]
    assert scores[0] == 1.0 and scores[2] == 0.0 and scores[4] == 1.0 and scores[5] == 1.0
    assert record["criteria"][6]["error"]  # the dangling link cannot be read
    with open(os.path.join(R.trial_dirs(run)[0], "task.json")) as fh:
        old = json.load(fh)
    assert [c["score"] for c in old["criteria"]] == scores  # reproduces the run's grade


def test_a_workspace_is_restored_only_for_a_criterion_that_needs_one(run_dir):
    from ce_lang.api import CompileOptions, compile_paths

    src, run = run_dir
    (src / "cmd.yaml").write_text(TASK + COMMAND)
    plan = compile_paths([str(src / "cmd.yaml")], CompileOptions()).trials[0].plan
    started = []

    class Runner:
        def __init__(self, ws, *args, before_start=None, **kw):
            self.ws, self.before_start = ws, before_start

        def __enter__(self):
            started.append(self.ws)
            self.before_start()
            return self

        def __exit__(self, *exc):
            return None

        def run(self, command, timeout, max_output):
            out = subprocess.run(command, shell=True, cwd=self.ws, capture_output=True,
                                 text=True)

            class Res:
                exit_code, stdout, stderr = out.returncode, out.stdout, out.stderr
                timed_out, duration_ms = False, 1.0
            return Res()

        def cancel(self):
            pass

    before = R.RESTORED[0]
    results = _rescore_all(run, plan=plan, runner_for=Runner)
    assert R.RESTORED[0] == before + len(results) == before + 2  # once per trial
    assert len(started) == 2 and not any(os.path.exists(ws) for ws in started)
    assert all(r[0]["criteria"][-1]["passed"] for r in results)
    before = R.RESTORED[0]
    _rescore_all(run, runner_for=Runner)  # the run's own plan runs no command
    assert R.RESTORED[0] == before and len(started) == 2


def test_ce_rescore_writes_the_same_files_and_leaves_nothing_staged(run_dir):
    src, run = run_dir
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "rescore", run, "--out",
                           str(src / "again")], capture_output=True, text=True, timeout=300)
    assert "2 trial(s) re-scored, 0 changed" in proc.stdout, proc.stderr
    assert not [n for n in os.listdir(src) if ".partial" in n]
    from ce_runtime.store.archive import record_digest, verified_trial

    for d in R.trial_dirs(str(src / "again")):
        task, _manifest, _trace = verified_trial(d)  # digests hold
        assert record_digest(task) == task["record_sha256"]  # as the archive signs
        orig = os.path.join(run, task["rescored_from"])
        with open(os.path.join(orig, "evidence.json"), "rb") as a, \
                open(os.path.join(d, "evidence.json"), "rb") as b:
            assert json.load(a) == json.load(b)


def test_random_patterns_agree(archive):
    """Patterns made of the components that matter (wildcards, `**`, `..`, links to
    directories, a link to the root), fixed seed: the view answers as the disk."""
    import random

    manifest, objects, ref, base = archive
    parts = ["*", "**", "?", "nested", "a", "b", "..", ".", "*.py", "*.txt", "link_to_dir",
             "nested_link", "weird", "up", "[a-n]*", "", "c.py", "deep.py", "notes.md"]
    rng = random.Random(14)
    for _ in range(300):
        pattern = "/".join(rng.choice(parts) for _ in range(rng.randint(1, 4)))
        if pattern.startswith("/"):
            continue
        for op in ("path_exists", "glob", "read_text"):
            disk = Host(workspace=ref, ignore_patterns=("dist",))
            view = _view_host(manifest, objects, base, [])
            view.ignore_patterns = ("dist",)
            assert _outcome(view, op, [pattern], [ref]) == \
                _outcome(disk, op, [pattern], [ref]), (op, pattern)


def test_compiled_criteria_grade_as_the_tree_walker(run_dir):
    """grade/compiled.py against the evidence evaluator: every result, value (in order)
    and kept element the same, on criteria of every kind of node and error."""
    import attrs

    from ce_lang.api import program_for
    from ce_runtime.grade.compiled import CompiledProgram, compiled_grader
    from ce_runtime.grade.grading import host_for
    from ce_runtime.grade.interpreter import Grader
    from ce_runtime.store.archive import verified_trial
    from ce_runtime.trace.events import load_trace
    from ce_runtime.trace.view import build_view

    _src, run = run_dir
    for d in R.trial_dirs(run):
        old, manifest, trace = verified_trial(d)
        plan, stdlib, digest, _ = R._archived_grading(run, old["plan_hash"], False)
        program = program_for(plan, stdlib, plan_hash=digest)
        view = build_view(load_trace(trace).events)
        compiled = compiled_grader(plan, program)
        graders = (Grader(plan, program=program),
                   Grader(plan, program=program, evaluator=CompiledProgram()),
                   Grader(plan, program=program, evaluator=CompiledProgram(program)),
                   compiled, compiled)  # (twice: the closures built, then reused)
        for stopped, armed in ((False, ()), (True, (plan.criteria[0].id,))):
            graded = []
            for grader in graders:
                host = host_for(plan, "", "", view)
                host.files = SnapshotView(manifest, os.path.join(run, "objects"))
                graded.append(grader.grade(host, stopped_early=stopped, armed=armed))
            tree = graded[0]
            errors = set()
            # plain, with parameter-only terms folded, rescore's grader (looked up once)
            for compiled in graded[1:]:
                assert (tree.weighted_score, tree.success, tree.stopped_early) == \
                    (compiled.weighted_score, compiled.success, compiled.stopped_early)
                for a, b in zip(tree.criteria, compiled.criteria, strict=True):
                    assert attrs.evolve(a, duration_ms=0) == attrs.evolve(b, duration_ms=0)
                    assert list(a.values.items()) == list(b.values.items())
                    errors.add(a.error and a.error.split(" ")[0])
            assert {"index", "division"} <= errors  # the error paths were taken
            assert any(c.advisory for c in tree.criteria) is stopped


@pytest.mark.parametrize("command", [
    "cat report.json", "bash -lc 'rm -rf /tmp/x'", "sh -c \"echo 'x'\"", "c'u'rl x",
    "unterminated 'quote", "", "bash -c", "zsh -lc 'bash -c \"ls -la\"'", "a  b\tc"])
def test_compiled_matches_searches_the_texts_tool_calls_search(command):
    from ce_lang.api import Regex, ToolCallView
    from ce_runtime.grade.compiled import _FORMS, _matches, _shell_forms, _State

    _FORMS.pop(command, None)
    view = ToolCallView(index=0, tool="Bash", raw_tool="Bash", params={"command": command})
    if command:
        assert (command, *_shell_forms(command)) == tuple(view.texts())
    else:  # an empty command is no shell command: its JSON parameters are searched
        assert view.command is None and view.texts() == ['{"command": ""}']
    for reused in (False, True):  # the forms made, then the forms a later trial reuses
        if not reused:
            _FORMS.pop(command, None)
        for tool, params in (("Bash", {"command": command}), ("Read", {"path": command})):
            call = ToolCallView(index=0, tool=tool, raw_tool=tool, params=params)
            for pattern in ("rm -rf", "curl", "ls -la", "^cat", "x", "quote", "path"):
                regex = Regex(pattern)
                assert _matches(_State(None, {}), call, regex) == call.matches(regex)


def test_an_interrupted_write_leaves_no_results_directory(tmp_path):
    from ce_runtime.store.staged_run import StagedRun

    out = tmp_path / "rescored" / "now"
    with pytest.raises(KeyboardInterrupt), StagedRun(str(out)) as staged:
        staged.write("default/t/00/task.json", b"{}\n")
        assert not out.exists()  # staged under a hidden name
        raise KeyboardInterrupt
    assert not out.exists() and os.listdir(tmp_path / "rescored") == []
    with StagedRun(str(out)) as staged:
        staged.write("default/t/00/task.json", b"{}\n")
        staged.commit()
    assert (out / "default" / "t" / "00" / "task.json").read_bytes() == b"{}\n"
    assert os.listdir(tmp_path / "rescored") == ["now"]


def test_a_glob_means_the_same_under_every_python(tmp_path):
    """`src/**` and `a**b` as Python 3.13's pathlib reads them (coder_eval's), on the
    disk and from the snapshot, whichever Python runs ce."""
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    for rel in ("src/top.py", "src/pkg/mod.py", "abxb.txt", "other.txt"):
        (ws / rel).write_text(rel)
    os.symlink("pkg", ws / "src" / "linked")  # `**` does not go through it
    objects = str(tmp_path / "objects")
    manifest = snapshot_workspace(str(ws), objects)
    disk = Host(workspace=str(ws))
    view = _view_host(manifest, objects, str(tmp_path), [])
    for host in (disk, view):
        assert host.matches("src/**") == ["src/pkg/mod.py", "src/top.py"]
        assert host.matches("**") == ["abxb.txt", "other.txt", "src/pkg/mod.py",
                                      "src/top.py"]
        assert host.matches("a**b.txt") == host.matches("a*b.txt") == ["abxb.txt"]
        assert host.matches("src/**/") == []  # directories only: no file
        assert host.matches("src/**/*.py") == ["src/pkg/mod.py", "src/top.py"]


def test_links_out_of_the_workspace_are_the_agents_and_regrade_as_they_graded(tmp_path):
    """`ln -s /usr/bin/env myenv` is agent output, not damage: re-grading keeps such
    links (the snapshot view and the restored directory answer alike, and never read
    through them), while extraction for a person still refuses them."""
    ws, objects = tmp_path / "ws", str(tmp_path / "objects")
    (ws / "sub").mkdir(parents=True)
    (ws / "out.txt").write_text("hi\n")
    (tmp_path / "outside.txt").write_text("host secret\n")
    os.symlink("/usr/bin/env", ws / "myenv")
    os.symlink("../../outside.txt", ws / "sub" / "esc")
    os.symlink(str(tmp_path), ws / "hostdir")
    manifest = snapshot_workspace(str(ws), objects)
    assert manifest["files"]["myenv"] == {"link": "/usr/bin/env"}
    with pytest.raises(DamagedArchive, match="pointing out of the workspace"):
        SnapshotView(manifest, objects)  # the default: a restore for a person refuses
    ref = tmp_path / "restored"
    restore_workspace(manifest, objects, str(ref), outward_links=True)
    assert os.readlink(ref / "myenv") == "/usr/bin/env"
    restored = []

    def materialize():
        restored.append(1)
        path = tempfile.mkdtemp(dir=tmp_path)
        restore_workspace(manifest, objects, path, link_objects=True, outward_links=True)
        return path

    for pattern in ["myenv", "sub/esc", "hostdir", "hostdir/outside.txt", "out.txt", "*",
                    "**", "sub/*", "**/*", "myenv/x"]:
        for op in OPS:
            view = Host(workspace="", files=SnapshotView(manifest, objects,
                                                         outward_links=True),
                        materialize=materialize)
            disk = Host(workspace=str(ref))
            got, want = _outcome(view, op, [pattern], [str(ref)]), \
                _outcome(disk, op, [pattern], [str(ref)])
            assert got == want, (op, pattern)
            assert "host secret" not in repr(got)  # nothing read through a link out


def test_trial_lines_and_damage_keep_their_order_in_a_merged_stream(run_dir, tmp_path):
    """stdout's trial lines are written in blocks when it is no terminal; what goes to
    stderr (a damaged trial) still comes after the lines before it, in one stream."""
    _src, run = run_dir
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    first, second = R.trial_dirs(str(copy))
    with open(os.path.join(second, "workspace.json"), "ab") as fh:
        fh.write(b" ")  # no longer the recorded digest
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "rescore", str(copy),
                           "--out", str(tmp_path / "out")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items()
                               if k != "PYTHONUNBUFFERED"})  # buffered, as usual
    lines = proc.stdout.splitlines()
    end = next(i for i, line in enumerate(lines) if " trial(s) re-scored, " in line)
    order = [i for i, line in enumerate(lines[:end])
             if os.path.relpath(first, copy) in line or line.startswith("! ")]
    assert proc.returncode == 1, proc.stdout
    assert len(order) == 2 and lines[order[0]].startswith("  ") \
        and lines[order[1]].startswith("! "), proc.stdout
    assert lines[end].startswith("1 trial(s) re-scored, 0 changed; 1 trial(s) not re-scored")
    assert lines[end + 1] == ("not passed: 1 trial(s) of the run are damaged, not "
                              "re-scored: 1 of 2 planned trial(s) re-scored")
    assert lines[end + 2] == "not passed: 1 of 1 trial(s) did not succeed"
    # then the trial that did not succeed, as `ce run` lists it
    assert lines[end + 3:] == [f"FAILURE {os.path.relpath(first, copy)}: failed c2 "
                               "file_exists, c3 file_contains, c6 file_contains, c12 expr, "
                               "c13 expr"], proc.stdout


def test_a_task_named_like_a_directory_of_the_run_is_found(tmp_path):
    """Only the run's own top-level directories are skipped: a task whose id is
    `objects` or `plans` (default/objects/00) is a trial like any other, while a
    re-score's results (rescored/...) are not the run's trials."""
    from ce_runtime.grade.rescore import trial_dirs

    for rel in ("default/objects/00", "default/plans/00", "rescored/t/default/a/00"):
        os.makedirs(tmp_path / rel)
        (tmp_path / rel / "task.json").write_text("{}")
    os.makedirs(tmp_path / "objects" / "ab")
    assert trial_dirs(str(tmp_path)) == [str(tmp_path / "default" / "objects" / "00"),
                                         str(tmp_path / "default" / "plans" / "00")]


SKIPPED_BUT_GRADED = """\
task_id: keep
description: criteria on what a workspace snapshot skips
initial_prompt: go
agent:
  type: script
  script:
    - write: node_modules/pkg/index.js
      content: "module.exports = 1\\n"
    - run: "mkdir out && mkdir -p node_modules/empty node_modules/other"
sandbox: {python: null}
success_criteria:
  - {type: file_contains, path: node_modules/pkg/index.js, includes: [exports],
     description: a literal path inside node_modules}
  - {type: file_exists, path: "node_modules/*/*.js", description: a glob spelling it}
  - {type: file_exists, path: out, description: an empty directory}
  - {type: file_exists, path: node_modules/empty, description: one inside node_modules}
  - {type: run_command, command: "test -d out && test -d node_modules/empty",
     description: a command sees them in the restored workspace}
"""


def test_what_the_grading_found_where_a_snapshot_skips_is_kept(tmp_path):
    """A criterion that read a file in node_modules/ or found an empty directory passed
    live; the snapshot skips node_modules and lists files, so the re-grade of the
    archive failed them (SUCCESS -> FAILURE). What the grading found is kept: the
    re-score, `ce explain` and `ce trial files --extract` answer as the run did, and
    nothing else of node_modules is archived."""
    (tmp_path / "t.yaml").write_text(SKIPPED_BUT_GRADED)

    def ce(*args):
        return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**os.environ, "CE_PLAIN": "1"})

    run = ce("run", "t.yaml", "-q", "--run-dir", "run")
    assert run.returncode == 0, run.stdout + run.stderr
    with open(tmp_path / "run" / "default" / "keep" / "00" / "workspace.json") as fh:
        files = json.load(fh)["files"]
    assert sorted(files) == ["node_modules/empty", "node_modules/pkg/index.js", "out"]
    assert files["out"] == {"dir": True} == files["node_modules/empty"]
    again = ce("rescore", "run")
    assert again.returncode == 0 and "1 trial(s) re-scored, 0 changed" in again.stdout, \
        again.stdout + again.stderr
    explained = ce("explain", "run/default/keep/00")
    assert explained.returncode == 0 and "-> SUCCESS" in explained.stdout, explained.stdout
    extracted = ce("trial", "files", "run/default/keep/00", "--extract", "x")
    assert extracted.returncode == 0, extracted.stderr
    assert (tmp_path / "x" / "out").is_dir() and (tmp_path / "x" / "node_modules" /
                                                   "empty").is_dir()
    assert not (tmp_path / "x" / "node_modules" / "other").exists()


def test_an_empty_directory_entry_reads_as_the_restored_directory(tmp_path):
    """`{"dir": true}` in workspace.json: the view and the restore agree (a directory,
    empty), and one that a file or link already names is a damaged archive."""
    from ce_runtime.store.archive import DamagedArchive
    from ce_runtime.store.workspace_snapshot import restore_workspace

    objects = tmp_path / "objects"
    objects.mkdir()
    manifest = {"files": {"out": {"dir": True}, "a/b": {"dir": True}}}
    view = SnapshotView(manifest, str(objects))
    restore_workspace(manifest, str(objects), str(tmp_path / "ws"))
    for rel in ("out", "a", "a/b"):
        assert view.is_dir(rel) and (tmp_path / "ws" / rel).is_dir()
    assert not view.lexists("out/x") and list((tmp_path / "ws" / "out").iterdir()) == []
    through = {"files": {"f": {"link": "a"}, "f/sub": {"dir": True}}}
    with pytest.raises(DamagedArchive, match="goes through a link"):
        SnapshotView(through, str(objects))
    with pytest.raises(DamagedArchive, match="goes through a link"):
        restore_workspace(through, str(objects), str(tmp_path / "ws2"))
