"""ce's per-user cache runs no code: a planted pickle is a miss, never executed."""

from __future__ import annotations

import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CE = [sys.executable, "-m", "ce_runtime.cli"]


class _Planted:
    """Unpickling this runs `touch MARKER` (what a replaced cache file could do)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _compile(cache: Path) -> subprocess.CompletedProcess:
    # the compiler itself must load the stdlib: no compile-cache hit replaying its output
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "CE_NO_COMPILE_CACHE": "1"}
    return subprocess.run([str(ROOT / ".venv" / "bin" / "ce"), "compile",
                           str(ROOT / "tasks" / "hello_world.yaml")],
                          env=env, capture_output=True, text=True, cwd=str(ROOT))


def _cache_files(cache: Path) -> dict[str, Path]:
    files = sorted((cache / "ce").iterdir())
    return {("lark" if p.name.startswith("criteria-lark-") else "records"
             if p.name.startswith("stdlib-records-") else "stdlib"): p for p in files
            if not p.name.startswith(".")}


def test_cache_files_are_private_data(tmp_path):
    res = _compile(tmp_path)
    assert res.returncode == 0, res.stderr
    files = _cache_files(tmp_path)
    assert set(files) == {"lark", "stdlib", "records"}
    assert stat.S_IMODE((tmp_path / "ce").stat().st_mode) == 0o700
    for path in files.values():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # the grammar's tables hold no global at all: plain data
    import pickletools

    ops = {op.name for op, _, _ in pickletools.genops(files["lark"].read_bytes())}
    assert not ops & {"GLOBAL", "STACK_GLOBAL", "REDUCE", "INST", "OBJ"}


def test_a_planted_pickle_is_never_run(tmp_path):
    assert _compile(tmp_path).returncode == 0
    for kind in ("records", "stdlib", "lark"):
        files = _cache_files(tmp_path)
        path = files[kind]
        marker = tmp_path / f"pwned-{kind}"
        path.write_bytes(pickle.dumps(_Planted(str(marker))))
        os.chmod(path, 0o600)
        if kind == "lark":  # the grammar is loaded only when the stdlib is not cached
            files["stdlib"].unlink()
        res = _compile(tmp_path)
        assert res.returncode == 0, res.stderr
        assert not marker.exists(), f"the {kind} cache ran code"
        # the miss rebuilt it: data again, and the next compile uses it
        assert b"system" not in path.read_bytes()


def test_a_cache_file_others_may_write_is_not_trusted(tmp_path):
    assert _compile(tmp_path).returncode == 0
    path = _cache_files(tmp_path)["stdlib"]
    os.chmod(path, 0o666)
    before = path.stat().st_ino
    assert _compile(tmp_path).returncode == 0
    # not loaded: rebuilt and replaced by a private file
    assert path.stat().st_ino != before
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_only_ce_lang_classes_resolve():
    from ce_lang.lang import safecache

    assert safecache.ce_lang_classes("ce_lang.lang.checker", "Registry")
    assert not safecache.ce_lang_classes("ce_lang.lang.stdlib", "os")  # an imported module
    assert not safecache.ce_lang_classes("ce_lang.lang.stdlib", "stdlib_files")  # a function
    assert not safecache.ce_lang_classes("os", "system")
    assert not safecache.ce_lang_classes("ce_lang.lang.checker", "Registry.__init__")


def test_old_entries_of_a_kind_are_pruned_and_the_used_ones_kept(tmp_path, monkeypatch):
    """Every edit of the standard criteria makes a new key; the cache keeps the KEEP most
    recently used entries of each kind, whatever else it holds."""
    from ce_lang.lang import safecache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory = Path(safecache.cache_dir())
    for i in range(safecache.KEEP + 4):
        safecache.store(f"stdlib-{i:04d}.pickle", {"i": i})
        os.utime(directory / f"stdlib-{i:04d}.pickle", (1000 + i, 1000 + i))
    safecache.store("criteria-lark-aaaa.pickle", [1])
    (directory / "stdlib-extra-part.pickle").write_bytes(b"x")  # not of the kind
    assert safecache.load("stdlib-0005.pickle", safecache.no_globals) == {"i": 5}  # used
    safecache.store("stdlib-new.pickle", {"i": "new"})
    kept = sorted(p.name for p in directory.glob("stdlib-*.pickle"))
    newest = [f"stdlib-{i:04d}.pickle" for i in range(safecache.KEEP + 4)][-(safecache.KEEP - 2):]
    assert kept == sorted(["stdlib-0005.pickle", "stdlib-new.pickle", *newest,
                           "stdlib-extra-part.pickle"])
    assert (directory / "criteria-lark-aaaa.pickle").exists()


def test_an_archived_stdlib_is_checked_once_per_machine(tmp_path, monkeypatch):
    """A rescore or explain of an archived run loads the standard criteria the run kept;
    the second time (another process) they come from the cache, equal to a fresh check."""
    from ce_lang.lang import stdlib

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    texts = tuple(sorted(stdlib.stdlib_texts().items()))
    stdlib.archived_stdlib_registry.cache_clear()
    fresh = stdlib.archived_stdlib_registry(texts)
    stored = sorted((tmp_path / "ce").glob("archived_stdlib-*.pickle"))
    assert len(stored) == 1
    stdlib.archived_stdlib_registry.cache_clear()
    import ce_lang.lang.parser as parser

    monkeypatch.setattr(parser, "parse_module", None)  # a hit must not parse anything
    again = stdlib.archived_stdlib_registry(texts)
    assert sorted(again.criteria) == sorted(fresh.criteria) and again.origin == fresh.origin
    edited = tuple((n, t + "\n# edited\n") if i == 0 else (n, t)
                   for i, (n, t) in enumerate(texts))
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    stdlib.archived_stdlib_registry(edited)  # other texts: another entry
    assert len(list((tmp_path / "ce").glob("archived_stdlib-*.pickle"))) == 2
    stdlib.archived_stdlib_registry.cache_clear()
