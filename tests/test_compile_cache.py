"""`ce compile`'s cache (ce_lang/compile_cache.py): a hit is indistinguishable from a
compile, and every kind of input change is a miss.

Each `ce compile` runs in a fresh process with its own cache directory. Whether a run was
a hit is read off the entry file: a miss rewrites it (a new inode, by rename), a hit only
reads it. No timing here (bench/versus_reference.py measures).
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CLEAN = """task_id: {id}
description: a clean task
initial_prompt: Write a.txt.
agent: {{type: claude-code}}
sandbox: {{driver: tempdir}}
success_criteria:
  - {{type: file_exists, path: a.txt, description: exists}}
"""
WARNS = CLEAN.replace("{{driver: tempdir}}", "{{driver: tempdir, network: none}}")
BROKEN = CLEAN.replace("type: file_exists", "type: file_exits")


class Ce:
    """`ce compile` in a fresh process, cache under `cache`; `.hit` says what the last
    run did."""

    def __init__(self, tmp: Path):
        self.cache = tmp / "cache"
        self.env = {k: v for k, v in os.environ.items() if k != "CE_NO_COMPILE_CACHE"}
        self.env.update(XDG_CACHE_HOME=str(self.cache), NO_COLOR="1")
        self.hit: bool | None = None

    def entries(self) -> dict[str, int]:
        """The cache's entries; not the temporary files of a concurrent writer (`.tmp-*`:
        Python 3.13's glob matches names with a leading dot; one renamed away between
        the glob and its stat was a FileNotFoundError)."""
        d = self.cache / "ce" / "compile"
        out = {}
        for p in d.glob("*.entry") if d.is_dir() else ():
            if not p.name.startswith("."):
                with contextlib.suppress(FileNotFoundError):
                    out[p.name] = p.stat().st_ino
        return out

    def __call__(self, cwd: Path, *args: str, env: dict | None = None) -> tuple:
        before = self.entries()
        proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile", *args],
                              cwd=cwd, env={**self.env, **(env or {})}, capture_output=True,
                              timeout=300)
        after = self.entries()
        self.hit = bool(before) and after == before
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.fixture
def ce(tmp_path: Path) -> Ce:
    return Ce(tmp_path)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    d = tmp_path / "suite"
    d.mkdir()
    (d / "clean.yaml").write_text(CLEAN.format(id="clean"))
    (d / "warns.yaml").write_text(WARNS.format(id="warns"))
    (d / "broken.yaml").write_text(BROKEN.format(id="broken"))
    return d


def _same_three_ways(ce: Ce, cwd: Path, *args: str) -> tuple:
    first = ce(cwd, *args)
    assert ce.hit is False
    second = ce(cwd, *args)
    assert ce.hit is True
    uncached = ce(cwd, *args, "--no-cache")
    assert second == first == uncached
    return first


@pytest.mark.parametrize("args", [(), ("-q",), ("--format", "json"), ("--format", "sarif")],
                         ids=["human", "quiet", "json", "sarif"])
def test_a_hit_prints_what_a_compile_prints(ce, suite, args):
    code, out, err = _same_three_ways(ce, suite.parent, "suite", *args)
    assert code == 1  # the broken task
    shown = out + err
    assert "CE0108" in shown  # an error
    assert ("CE0215" in shown) == ("-q" not in args)  # and a warning


def test_clean_tasks_and_usage_errors_replay_too(ce, suite):
    assert _same_three_ways(ce, suite, "clean.yaml")[0] == 0
    code, _, err = _same_three_ways(ce, suite, "nothing-here/")
    assert code == 2 and "CE0006" in err


def test_emitted_files_are_written_again_on_a_hit(ce, suite):
    out = suite.parent / "out"
    _same_three_ways(ce, suite, "clean.yaml", "warns.yaml", "--emit", str(out))
    written = {p.relative_to(out): p.read_bytes() for p in out.rglob("*.json")}
    assert len(written) == 3  # two plans and trials.json
    shutil.rmtree(out)
    ce(suite, "clean.yaml", "warns.yaml", "--emit", str(out))
    assert ce.hit is True
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*.json")} == written


def _changes(ce: Ce, cwd: Path, args: tuple, change, *, differs: bool = True) -> tuple:
    """Cached, then `change()`: the next run is a miss and prints what --no-cache does."""
    before = ce(cwd, *args)
    ce(cwd, *args)
    assert ce.hit is True
    change()
    after = ce(cwd, *args)
    assert ce.hit is False, "a changed input must not be replayed"
    assert after == ce(cwd, *args, "--no-cache")
    if differs:
        assert after != before
    ce(cwd, *args)
    assert ce.hit is True  # and the new state is cached in turn
    return before, after


def test_a_task_edit_is_a_miss(ce, suite):
    task = suite / "clean.yaml"
    before, after = _changes(ce, suite, ("clean.yaml",),
                             lambda: task.write_text(WARNS.format(id="clean")))
    assert "CE0215" not in before[2] and "CE0215" in after[2]


def test_an_experiment_edit_is_a_miss(ce, suite):
    exp = suite / "exp.yaml"
    exp.write_text("experiment_id: e\nvariants:\n  - variant_id: a\n")
    before, after = _changes(
        ce, suite, ("clean.yaml", "-e", "exp.yaml"),
        lambda: exp.write_text("experiment_id: e\nvariants:\n  - variant_id: a\n"
                               "  - variant_id: b\n"))
    assert "1 trial " in before[2] and "2 trials" in after[2]


def test_a_dataset_file_edit_is_a_miss(ce, suite):
    (suite / "rows.jsonl").write_text('{"id": "r1", "q": "one"}\n')
    (suite / "ds.yaml").write_text(CLEAN.format(id="ds").replace(
        "initial_prompt: Write a.txt.", "initial_prompt: ${row.q}\n"
        "dataset: {paths: [rows.jsonl]}"))
    before, after = _changes(ce, suite, ("ds.yaml",), lambda: (suite / "rows.jsonl").write_text(
        '{"id": "r1", "q": "one"}\n{"id": "r2", "q": "two"}\n'))
    assert "1 trial " in before[2] and "2 trials" in after[2]


def test_a_prompt_file_appearing_and_disappearing_is_a_miss(ce, suite):
    (suite / "pf.yaml").write_text(CLEAN.format(id="pf").replace(
        "initial_prompt: Write a.txt.", "initial_prompt_file: prompt.md"))
    prompt = suite / "prompt.md"
    before, after = _changes(ce, suite, ("pf.yaml",), lambda: prompt.write_text("Go.\n"))
    assert before[0] == 1 and "CE0207" in before[2] and after[0] == 0
    _changes(ce, suite, ("pf.yaml",), prompt.unlink)
    assert ce(suite, "pf.yaml")[0] == 1


def test_a_prompt_file_edit_changes_the_emitted_plan(ce, suite):
    (suite / "pf.yaml").write_text(CLEAN.format(id="pf").replace(
        "initial_prompt: Write a.txt.", "initial_prompt_file: prompt.md"))
    prompt = suite / "prompt.md"
    prompt.write_text("Write a.txt.\n")
    _changes(ce, suite, ("pf.yaml", "--emit", "out", "-f", "json"),
             lambda: prompt.write_text("Write b.txt.\n"), differs=False)
    plans = list((suite / "out" / "plans").glob("*.json"))
    assert any("Write b.txt." in p.read_text() for p in plans)


def test_a_template_dir_edit_is_a_miss(ce, suite):
    tpl = suite / "tpl"
    tpl.mkdir()
    (tpl / "a.py").write_text("x = 1\n")
    (suite / "td.yaml").write_text(CLEAN.format(id="td").replace(
        "sandbox: {driver: tempdir}",
        "sandbox:\n  driver: tempdir\n  template_sources: [{type: template_dir, path: tpl}]"))
    args = ("td.yaml", "--emit", "out")
    _changes(ce, suite, args, lambda: (tpl / "a.py").write_text("x = 2\n"), differs=False)
    _changes(ce, suite, args, lambda: (tpl / "b.py").write_text("y = 1\n"), differs=False)
    assert len(list((suite / "out" / "plans").glob("*.json"))) == 3  # one per state


def test_a_glob_or_directory_gaining_a_file_is_a_miss(ce, suite):
    sub = suite / "more"
    sub.mkdir()
    before, after = _changes(ce, suite.parent, ("suite/*.yaml",),
                             lambda: (suite / "new.yaml").write_text(CLEAN.format(id="new")))
    assert "3 task files" in before[2] and "4 task files" in after[2]
    before, after = _changes(ce, suite.parent, ("suite",),
                             lambda: (sub / "deep.yaml").write_text(CLEAN.format(id="deep")))
    assert "4 task files" in before[2] and "5 task files" in after[2]


def test_a_criteria_file_edit_is_a_miss(ce, suite):
    (suite / "c.ce").write_text(
        'criterion made(path: str "the file") -> binary\n"""Made."""\n'
        "  score = path_exists(path)\nend\n")
    (suite / "cc.yaml").write_text(CLEAN.format(id="cc").replace(
        "success_criteria:", "criteria_files: [c.ce]\nsuccess_criteria:\n"
        "  - {type: made, path: a.txt, description: made}"))
    before, after = _changes(ce, suite, ("cc.yaml",), lambda: (suite / "c.ce").write_text(
        'criterion made(path: str "the file") -> binary\n"""Made."""\n'
        "  score = path_exits(path)\nend\n"))
    assert before[0] == 0 and after[0] == 1


def test_options_and_overrides_are_in_the_key(ce, suite):
    base = ce(suite, "clean.yaml")
    bigger = ce(suite, "clean.yaml", "--repeats", "3")
    assert ce.hit is False and "3 trials" in bigger[2]
    bad = ce(suite, "clean.yaml", "-D", "run_limits.max_turns=many")
    assert ce.hit is False and bad[0] != 0
    ok = ce(suite, "clean.yaml", "-D", "run_limits.max_turns=3")
    assert ce.hit is False and ok[0] == 0
    assert ce(suite, "clean.yaml") == base and ce.hit is True
    assert ce(suite, "clean.yaml", "-D", "run_limits.max_turns=many") == bad and ce.hit


def test_an_environment_variable_a_path_names_is_an_input(ce, suite, tmp_path):
    """`agent.plugins[].path` expands $VARS: the variable's value is observed."""
    inside = suite / "plugin"
    inside.mkdir()
    (suite / "pl.yaml").write_text(CLEAN.format(id="pl").replace(
        "agent: {type: claude-code}", "agent: {type: claude-code, plugins: [{path: $PLUGIN_DIR}]}"))
    here = ce(suite, "pl.yaml", env={"PLUGIN_DIR": str(inside)})
    assert here[0] == 0
    away = ce(suite, "pl.yaml", env={"PLUGIN_DIR": "/proc/self"})
    assert ce.hit is False and away[0] == 1 and "CE0216" in away[2]


def test_host_limits_are_probed_on_a_hit_too(ce, suite):
    (suite / "lim.yaml").write_text(CLEAN.format(id="lim").replace(
        "sandbox: {driver: tempdir}", "sandbox: {driver: tempdir, limits: {max_pids: 64}}"))
    _same_three_ways(ce, suite, "lim.yaml")


def test_a_corrupt_or_foreign_entry_is_a_miss(ce, suite):
    good = _same_three_ways(ce, suite, "warns.yaml")
    (entry,) = (ce.cache / "ce" / "compile").glob("*.entry")
    for damage in (b"", b"garbage", entry.read_bytes()[:-7], b"\xe3" + b"\0" * 40):
        entry.write_bytes(damage)
        assert ce(suite, "warns.yaml") == good and ce.hit is False
    entry.chmod(0o664)  # writable by the group: never trusted
    assert ce(suite, "warns.yaml") == good and ce.hit is False


def test_the_cache_can_be_switched_off(ce, suite):
    ce(suite, "clean.yaml", "--no-cache")
    ce(suite, "clean.yaml", env={"CE_NO_COMPILE_CACHE": "1"})
    assert ce.entries() == {}
    help_ = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile", "--help"],
                           capture_output=True, text=True, env=ce.env, timeout=120).stdout
    assert "--no-cache" in help_ and "CE_NO_COMPILE_CACHE" in help_


def test_concurrent_compiles_share_the_cache_safely(ce, suite):
    expected = ce(suite, ".", "--no-cache")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: ce(suite, "."), range(8)))
    assert all(r == expected for r in results)
    assert len(ce.entries()) == 1
    assert ce(suite, ".") == expected and ce.hit is True
    assert not [p for p in (ce.cache / "ce" / "compile").iterdir()
                if not p.name.endswith(".entry")]  # no temporary file left


# -- in-process: the key, pruning, the recorder --------------------------------------------
def test_the_key_covers_ces_own_code(tmp_path, monkeypatch):
    from ce_lang import compile_cache

    code = tmp_path / "code"
    code.mkdir()
    (code / "m.py").write_text("A = 1\n")
    monkeypatch.setattr(compile_cache, "CODE_ROOTS", [*compile_cache.CODE_ROOTS, str(code)])
    keys = [compile_cache.make_key(("r",))]
    assert compile_cache.make_key(("r",)) == keys[0]
    (code / "m.py").write_text("A = 22\n")
    keys.append(compile_cache.make_key(("r",)))
    (code / "n.py").write_text("")
    keys.append(compile_cache.make_key(("r",)))
    (code / "m.py").unlink()
    keys.append(compile_cache.make_key(("r",)))
    keys.append(compile_cache.make_key(("other request",)))
    assert len(set(keys)) == len(keys)


def test_pruning_keeps_the_newest_entries(tmp_path):
    from ce_lang import compile_cache

    for i in range(12):
        p = tmp_path / f"{i:02d}.entry"
        p.write_bytes(b"x" * 10)
        os.utime(p, (1000 + i, 1000 + i))
    compile_cache.prune(str(tmp_path), max_entries=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{i:02d}.entry"
                                                          for i in range(7, 12)]
    compile_cache.prune(str(tmp_path), max_bytes=25)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["10.entry", "11.entry"]


def test_every_observation_replays_to_what_was_recorded():
    """The log of a real compile (examples: templates, prompt files, criteria files,
    datasets, globs) replays to the same values on the unchanged tree."""
    from ce_lang import hostfs
    from ce_lang.compiler import CompileOptions, compile_paths

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with hostfs.Recorder() as rec:
            compile_paths(["tasks", "tasks/hello_*.yaml"], CompileOptions(
                experiment="tasks/experiments/model_ab.yaml",
                host_limits=lambda: {"tempdir": {}}))
        log = rec.log()
        ops = {op for op, _, _ in log}
        assert {"mode", "realpath", "listdir", "glob", "read"} <= ops
        assert rec.consistent
        assert [(op, args, hostfs.replay(op, args)) for op, args, _ in log] == log
    finally:
        os.chdir(cwd)


# -- no compiler module touches the host except through hostfs ------------------------------
ALLOWED = {"ce_lang/hostfs.py": "the recorder itself",
           "ce_lang/compile_cache.py": "the cache's own files and the key's stats",
           "ce_lang/lang/safecache.py": "ce's derived per-user cache, keyed on its inputs",
           "ce_lang/caches.py": "ce's cache directory and its files (not a compile input)",
           "ce_lang/attrs_code.py": "the cache of attrs' generated code (ce's own file)"}
FS_CALLS = {
    "os": {"stat", "lstat", "fstat", "open", "listdir", "scandir", "walk", "readlink",
           "access", "getcwd", "getcwdb", "environ", "getenv", "fdopen", "fwalk"},
    "os.path": {"exists", "lexists", "isfile", "isdir", "islink", "ismount", "getsize",
                "getmtime", "getatime", "getctime", "realpath", "samefile", "expanduser",
                "expandvars"},
    "glob": {"glob", "iglob"},
    "io": {"open"},
}
FS_NAMES = {"open", "entry_points", "pathlib", "glob", "shutil"}


def fs_access(source: str) -> list[tuple[int, str]]:
    """(line, what) for every host access in `source` not routed through hostfs."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            base = node.value
            owner = base.id if isinstance(base, ast.Name) else \
                f"{base.value.id}.{base.attr}" if isinstance(base, ast.Attribute) \
                and isinstance(base.value, ast.Name) else None
            if owner in FS_CALLS and node.attr in FS_CALLS[owner]:
                found.append((node.lineno, f"{owner}.{node.attr}"))
            if node.attr in ("read_text", "read_bytes", "iterdir", "rglob", "is_file",
                             "is_dir", "is_symlink") and owner != "hostfs":
                found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Name) and node.id in FS_NAMES \
                and isinstance(node.ctx, ast.Load):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.ImportFrom) and node.module in (
                "os", "os.path", "glob", "pathlib", "shutil", "importlib.metadata", "io"):
            found.append((node.lineno, f"from {node.module} import"))
        elif isinstance(node, ast.Import) and any(
                a.name in ("pathlib", "shutil", "glob", "importlib.metadata")
                for a in node.names):
            found.append((node.lineno, "import " + ", ".join(a.name for a in node.names)))
    return found


def test_no_compiler_module_touches_the_host_outside_hostfs():
    offenders = []
    for path in sorted((ROOT / "ce_lang").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED or rel.startswith("ce_lang/docgen/"):
            continue  # docgen writes docs/, it is not the compiler
        offenders += [f"{rel}:{line}: {what}"
                      for line, what in fs_access(path.read_text(encoding="utf-8"))]
    assert offenders == []


def test_the_host_access_scan_sees_every_form():
    src = ("import os, glob, pathlib\nfrom os.path import isfile\n"
           "def f(p):\n    open(p)\n    os.path.exists(p)\n    os.walk(p)\n"
           "    glob.glob(p)\n    os.environ.get('X')\n    p.read_text()\n"
           "    x = os.getcwd\n    from importlib.metadata import entry_points\n")
    kinds = {what for _, what in fs_access(src)}
    assert kinds >= {"import os, glob, pathlib", "from os.path import", "open",
                     "os.path.exists", "os.walk", "glob.glob", "os.environ", ".read_text",
                     "os.getcwd", "from importlib.metadata import"}
