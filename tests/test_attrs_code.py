"""The cache of attrs' generated methods (ce_lang/attrs_code.py), in real processes: a
second process compiles nothing and builds classes that behave as compiled ones; a file
others could write, or a damaged one, is no cache; CE_NO_ATTRS_CACHE=1 turns it off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Imports the compiler and the runtime's classes, then reports the cache's counts and
# what the classes do: equality, hashing, repr, frozenness, defaults, a compiled plan.
PROBE = r"""
import json, attrs
import ce_lang
from ce_lang import attrs_code
from ce_lang.api import compile_paths, CompileOptions, plan_to_json
from ce_lang.plan import Arming, EarlyStop
import ce_runtime.execute.suite, ce_runtime.grade.interpreter

a, b = Arming("pass", "stop_when"), Arming("pass", "stop_when")
try:
    a.polarity = "fail"
    frozen = False
except attrs.exceptions.FrozenInstanceError:
    frozen = True
result = compile_paths(["tasks/hello_world.yaml"], CompileOptions())
print(json.dumps({
    "stats": attrs_code.stats(),
    "eq": a == b and a != Arming("fail", "stop_when"),
    "hash": hash(a) == hash(b) and hash(EarlyStop(True, ("c0",))) == hash(EarlyStop(True, ("c0",))),
    "repr": repr(a), "frozen": frozen, "default": Arming("pass", "x").decide_within,
    "plan": plan_to_json(result.trials[0].plan),
}, default=str))
"""


def probe(cache_home, **env_extra):
    env = {k: v for k, v in os.environ.items() if k != "CE_NO_ATTRS_CACHE"}
    env.update(XDG_CACHE_HOME=str(cache_home), **env_extra)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cache_files(cache_home):
    d = os.path.join(cache_home, "ce", "attrs-code")
    return [os.path.join(d, n) for n in os.listdir(d)] if os.path.isdir(d) else []


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A first process (compiles everything, writes the cache) and a second (reads it)."""
    home = tmp_path_factory.mktemp("attrs-cache")
    return home, probe(home), probe(home)


def test_second_process_compiles_nothing(compiled):
    home, first, second = compiled
    assert first["stats"]["hits"] == 0 and first["stats"]["misses"] > 100
    # every class, frozen ones with their per-process __hash__ salt included
    assert second["stats"] == {"hits": first["stats"]["misses"], "misses": 0,
                               "entries": first["stats"]["misses"]}
    [path] = cache_files(home)
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_cached_classes_behave_as_compiled(compiled):
    _, first, second = compiled
    for out in (first, second):
        assert out["eq"] and out["hash"] and out["frozen"]
        assert out["repr"] == "Arming(polarity='pass', source='stop_when', decide_within=None)"
        assert out["default"] is None
    assert first["plan"] == second["plan"]


def test_a_file_others_may_write_is_no_cache(compiled):
    home = compiled[0]
    [path] = cache_files(home)
    os.chmod(path, 0o666)
    try:
        assert probe(home)["stats"]["hits"] == 0
    finally:
        os.chmod(path, 0o600)


def test_a_damaged_file_is_compiled_past_and_rewritten(tmp_path):
    first = probe(tmp_path)
    [path] = cache_files(tmp_path)
    with open(path, "r+b") as fh:
        fh.truncate(1000)
    again = probe(tmp_path)
    assert again["stats"]["hits"] == 0 and again["stats"]["misses"] == first["stats"]["misses"]
    assert probe(tmp_path)["stats"]["misses"] == 0  # written again, whole


def test_off_by_environment(tmp_path):
    assert probe(tmp_path, CE_NO_ATTRS_CACHE="1")["stats"] is None
    assert cache_files(tmp_path) == []


def test_help_imports_no_attrs():
    """The hook waits for attrs to be imported: `ce --help` still loads none of it."""
    code = ("import sys; from ce_runtime.cli import main\n"
            "try:\n main(['--help'])\nexcept SystemExit: pass\n"
            "print('attr' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_files_of_other_pythons_are_pruned_once_stale(tmp_path):
    """Each Python and attrs leaves a file; one not written for 30 days is removed when
    another is written (a venv deleted, an attrs upgraded), a recent one is kept."""
    from ce_lang.attrs_code import prune

    old, recent, mine = (tmp_path / n for n in ("a.marshal", "b.marshal", "c.marshal"))
    for path in (old, recent, mine):
        path.write_bytes(b"x")
    month = 31 * 86400
    os.utime(old, (os.path.getatime(old) - month, os.path.getmtime(old) - month))
    os.utime(mine, (os.path.getatime(mine) - month, os.path.getmtime(mine) - month))
    (tmp_path / "other.txt").write_bytes(b"not ours")
    prune(str(tmp_path), keep="c.marshal")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.marshal", "c.marshal",
                                                          "other.txt"]


def test_an_overfull_file_keeps_what_the_process_used(tmp_path):
    """Past MAX_ENTRIES (each edit of ce's classes adds entries, and the file is loaded
    whole at every start), a write keeps only this process's entries."""
    from ce_lang import attrs_code

    cache_dir = tmp_path / "attrs-code"
    cache_dir.mkdir(mode=0o700)
    path = str(cache_dir / "x.marshal")
    code = compile("x = 1", "<attrs generated methods m.C>", "exec")
    stale = {f"old-{i}": code for i in range(attrs_code.MAX_ENTRIES + 1)}
    assert attrs_code.write_private(path, attrs_code._encode(stale))
    cache = attrs_code._Cache(path)
    assert len(cache.stored) == attrs_code.MAX_ENTRIES + 1
    namespace: dict = {}
    cache.compile_and_eval("y = 2", {}, namespace, "<attrs generated methods m.D>")
    assert namespace == {"y": 2} and cache.misses == 1
    cache.save()
    assert list(attrs_code._load(path)) == list(cache.used)
