"""What makes a trial cheap to start must not make it leak: the run's zygote that forks
each tempdir trial's init, the children-list walk that finds a trial's processes, and
venvs copied from one built per run."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ce_runtime.execute.sandbox import shim
from ce_runtime.execute.sandbox.base import SandboxSpec
from ce_runtime.execute.sandbox.tempdir import TempdirSandbox, close_warm_inits, zygote
from ce_runtime.execute.sandbox.venvs import clone_venv, forget_templates, machine_cache_dir
from ce_runtime.execute.sandbox.workspace import prepare_workspace
from tests.processes import process_stats

ROOT = Path(__file__).resolve().parent.parent


def _alive(pid: int) -> bool:
    stats = process_stats()
    return pid in stats and stats[pid][1] != "Z"


def _gone_within(pids: list[int], seconds: float) -> list[int]:
    """The pids still alive after waiting up to `seconds` (a hang bound, not a timing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def test_the_init_is_forked_by_the_zygote_and_is_a_session_leader(tmp_path):
    async def main():
        boxes = []
        try:
            for i in range(3):
                scratch = tmp_path / f"s{i}"
                scratch.mkdir()
                box = TempdirSandbox(SandboxSpec(f"t/{i}", str(scratch), str(tmp_path),
                                                 warm=True))
                await box.start()
                boxes.append(box)
            z = zygote().proc.pid
            facts = [(process_stats()[b.init.pid][2], b.init.pid,
                      (await b.exec("echo $$")).stdout) for b in boxes]
            for b in boxes:
                await b.teardown()
            return z, facts, [b.init.returncode for b in boxes]
        finally:
            await close_warm_inits()

    z, facts, codes = asyncio.run(main())
    for rest, pid, out in facts:
        assert int(rest[0]) == z  # the zygote's child, not ce's
        assert int(rest[1]) == pid and int(rest[2]) == pid  # its own group and session
        assert out.strip().isdigit()
    assert len({pid for _, pid, _ in facts}) == 3  # one init per trial
    # each one ended, and the zygote said how (0, or SIGKILL when teardown's kill of the
    # group overtook the init's own exit)
    assert all(code in (0, -signal.SIGKILL) for code in codes), codes
    assert not _alive(z)


def test_a_killed_ce_takes_the_zygote_the_inits_and_their_daemons_with_it(tmp_path):
    script = textwrap.dedent(f"""
        import asyncio, json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from ce_runtime.execute.sandbox.base import SandboxSpec
        from ce_runtime.execute.sandbox.tempdir import TempdirSandbox, zygote

        async def main():
            box = TempdirSandbox(SandboxSpec("t/0", {str(tmp_path)!r}, {str(tmp_path)!r},
                                             warm=True))
            await box.start()
            out = await box.exec("setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $!")
            print(json.dumps([zygote().proc.pid, box.init.pid, int(out.stdout)]), flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(proc.stdout.readline())
        assert all(_alive(p) for p in pids)
        os.kill(proc.pid, signal.SIGKILL)  # no teardown, no clean-up: only the kernel's
        proc.wait(timeout=30)
        assert _gone_within(pids, 20.0) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _box(tmp_path, i: int = 0) -> TempdirSandbox:
    scratch = tmp_path / f"s{i}"
    scratch.mkdir()
    return TempdirSandbox(SandboxSpec(f"t/{i}", str(scratch), str(tmp_path), warm=True))


def test_a_zygote_started_before_the_loop_is_adopted_and_ended_with_the_run(tmp_path):
    # `ce run` starts the zygote before its event loop exists; the loop's zygote takes
    # that process over (no second one), forks the trials' inits from it, and ends it
    from ce_runtime.execute.sandbox import tempdir

    tempdir.start_zygote_early()
    early = tempdir._EARLY[0]
    pid, ctl_dir = early.popen.pid, early.ctl_dir
    assert os.path.basename(ctl_dir).startswith(f"ce-run-{os.getpid()}-")  # swept if killed

    async def main():
        try:
            box = _box(tmp_path)
            await box.start()
            out = await box.exec("echo hi")
            adopted = zygote().proc.pid
            parent = int(process_stats()[box.init.pid][2][0])
            await box.teardown()
            return out.stdout, adopted, parent
        finally:
            await close_warm_inits()

    out, adopted, parent = asyncio.run(main())
    assert out == "hi\n"
    assert adopted == pid and parent == pid and tempdir._EARLY == []
    assert _gone_within([pid], 20.0) == [] and not os.path.exists(ctl_dir)


def test_a_zygote_started_early_and_never_adopted_is_ended_at_exit(tmp_path):
    script = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(ROOT)!r})
        from ce_runtime.execute.sandbox import tempdir

        tempdir.start_zygote_early()
        early = tempdir._EARLY[0]
        print(json.dumps([early.popen.pid, early.ctl_dir]), flush=True)
        sys.stdin.readline()  # until the test has seen it
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    pid, ctl_dir = json.loads(proc.stdout.readline())
    assert _alive(pid) and os.path.isdir(ctl_dir)
    proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert _gone_within([pid], 20.0) == [] and not os.path.exists(ctl_dir)


def test_an_early_zygote_that_does_not_start_gives_way_to_a_fresh_one(tmp_path, monkeypatch):
    # a zygote that never says "ready" (here: a program that exits at once) is discarded
    # and the run starts its own, as without an early start
    from ce_runtime.execute.sandbox import tempdir

    monkeypatch.setattr(tempdir, "ZYGOTE", "/bin/true")
    tempdir.start_zygote_early()
    broken = tempdir._EARLY[0]
    monkeypatch.undo()

    async def main():
        try:
            box = _box(tmp_path)
            await box.start()
            out = await box.exec("echo ok")
            await box.teardown()
            return out.stdout, zygote().proc.pid
        finally:
            await close_warm_inits()

    out, fresh = asyncio.run(main())
    assert out == "ok\n" and fresh != broken.popen.pid
    assert broken.popen.poll() is not None and not os.path.exists(broken.ctl_dir)


def test_the_zygote_the_ce_script_boots_is_the_runs_and_waits_for_its_socket(tmp_path):
    # the `ce` script starts the zygote before ce loads (ce_runtime/zygote_process.py):
    # nothing in $TMPDIR until the run names its socket, then it is the one the run's
    # trials fork from (their init runs `zygote.py -`), and it ends with the run
    from ce_runtime import zygote_process
    from ce_runtime.execute.sandbox import tempdir

    zygote_process.start_early()
    booted = zygote_process._early
    assert booted is not None
    tempdir.start_zygote_early()
    early = tempdir._EARLY[0]
    assert early.popen is booted and zygote_process.claim() is None

    async def main():
        try:
            box = _box(tmp_path)
            await box.start()
            out = await box.exec("tr '\\0' ' ' < /proc/$PPID/cmdline")
            await box.teardown()
            return out.stdout, zygote().proc.pid
        finally:
            await close_warm_inits()

    cmdline, adopted = asyncio.run(main())
    assert adopted == booted.pid and cmdline.rstrip().endswith("zygote.py -"), cmdline
    assert _gone_within([booted.pid], 20.0) == [] and not os.path.exists(early.ctl_dir)


def test_a_booted_zygote_no_run_claims_ends_on_its_own(tmp_path):
    # a `ce run` that stops on bad input, or runs bwrap trials, never names a socket:
    # discarded (or ce gone: end of its input), the zygote exits, having made nothing
    from ce_runtime import zygote_process

    zygote_process.start_early()
    first = zygote_process._early
    zygote_process.discard()
    assert first.poll() is not None and zygote_process._early is None
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-I", "-S", zygote_process.ZYGOTE, "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env={"TMPDIR": str(tmp)})
    out, err = proc.communicate(b"", timeout=60)  # ce exited before naming a socket
    assert (proc.returncode, out, err) == (0, b"", b"")
    assert sorted(os.listdir(tmp_path)) == ["tmp"] and os.listdir(tmp) == []


def test_ce_run_uses_the_booted_zygote_and_leaves_no_process(tmp_path):
    task = tmp_path / "who.yaml"
    task.write_text(textwrap.dedent("""\
        task_id: who
        description: which zygote forked the init
        agent: {type: none}
        sandbox: {python: null}
        pre_run:
          - command: "tr '\\\\0' ' ' < /proc/$PPID/cmdline > who.txt"
        success_criteria:
          - {type: file_contains, path: who.txt, includes: ["zygote.py -"], description: booted}
    """))
    ce = os.path.join(os.path.dirname(sys.executable), "ce")
    # as their subreaper, this child gets every process ce leaves behind: each must end
    # by itself (the report worker after its reply, a zygote at the end of its input)
    script = textwrap.dedent(f"""
        import ctypes, os, subprocess, sys, time
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
        code = subprocess.run([{ce!r}, *sys.argv[1:]], cwd={str(tmp_path)!r},
                              capture_output=True).returncode
        deadline, left = time.monotonic() + 20, []
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0 and time.monotonic() > deadline:
                left = open("/proc/self/task/%d/children" % os.getpid()).read().split()
                break
            if pid == 0:
                time.sleep(0.05)
        print(code, len(left))
    """)
    for argv in (["run", "who.yaml", "--run-dir", "r", "-q"],  # uses it
                 ["run", "who.yaml", "--run-dir", "r2", "-q", "--driver", "nosuch"],  # not
                 ["run", "missing.yaml", "-q"]):  # bad input
        res = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True,
                             text=True, timeout=300)
        code, left = map(int, res.stdout.split())
        assert left == 0, (argv, res.stdout, res.stderr)
        assert code == (0 if argv[1] == "who.yaml" and "--driver" not in argv else 2), argv


def test_children_lists_find_what_a_scan_of_proc_finds():
    tree = subprocess.Popen(["/bin/sh", "-c", "sleep 30 & sleep 30 & "
                             "(sleep 30 & sleep 30; true) & wait"])
    try:
        deadline = time.monotonic() + 20
        # settled: the four sleeps have exec'd (a forked `sh` about to become `sleep`
        # changed its name between two of the reads below)
        while [c for _, c in shim._by_scan(tree.pid).values()].count("sleep") < 4 \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        walked, scanned = shim._by_children(tree.pid), shim._by_scan(tree.pid)
        assert walked is not None  # this kernel has children lists
        assert walked == scanned and len(walked) >= 5
        assert shim.descendants(tree.pid) == scanned
    finally:
        for pid in shim._by_scan(tree.pid):
            os.kill(pid, signal.SIGKILL)
        tree.kill()
        tree.wait()


@pytest.fixture
def venv_plan(tmp_path):
    from ce_lang.api import CompileOptions, compile_paths

    (tmp_path / "t.yaml").write_text("task_id: t\ndescription: d\n"
                                     "agent: {type: none}\nsuccess_criteria:\n"
                                     "  - {type: file_exists, path: x, description: d}\n")
    result = compile_paths([str(tmp_path / "t.yaml")], CompileOptions())
    assert result.trials, result.diagnostics
    return result.trials[0].plan


def test_trial_venvs_are_private_copies_of_one_template(tmp_path, venv_plan):
    forget_templates()
    a, b = tmp_path / "a", tmp_path / "b"
    logs = [prepare_workspace(venv_plan, str(tmp_path), str(ws)) for ws in (a, b)]
    assert all(r.ok for r in logs), logs
    assert logs[0].log == logs[1].log and logs[0].log[0].startswith("python: created .venv")
    for ws in (a, b):
        out = subprocess.run([str(ws / ".venv/bin/python"), "-c",
                              "import sys; print(sys.prefix)"],
                             capture_output=True, text=True, check=True).stdout.strip()
        assert os.path.realpath(out) == os.path.realpath(ws / ".venv")
        assert "relocatable = true" in (ws / ".venv/pyvenv.cfg").read_text()
    cfg_a, cfg_b = (a / ".venv/pyvenv.cfg"), (b / ".venv/pyvenv.cfg")
    assert os.stat(cfg_a).st_ino != os.stat(cfg_b).st_ino and os.stat(cfg_a).st_nlink == 1
    (a / ".venv/lib").joinpath("marker").write_text("a's own")
    cfg_a.write_text("edited by trial a\n")
    assert not (b / ".venv/lib/marker").exists() and "relocatable" in cfg_b.read_text()
    c = tmp_path / "c"
    assert prepare_workspace(venv_plan, str(tmp_path), str(c)).ok
    assert "relocatable" in (c / ".venv/pyvenv.cfg").read_text()  # the template is intact


def test_an_empty_venv_template_is_the_machines_and_outlives_the_process(tmp_path,
                                                                        monkeypatch,
                                                                        venv_plan):
    """Installing nothing, the template is kept per machine: a later process (here: the
    process's templates forgotten) copies it without running uv again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    forget_templates()
    first = prepare_workspace(venv_plan, str(tmp_path), str(tmp_path / "a"))
    assert first.ok, first
    kept = os.listdir(machine_cache_dir())
    assert len(kept) == 1 and not kept[0].startswith(".building-")
    template = Path(machine_cache_dir(), kept[0], "venv")
    stamp = os.stat(template / "pyvenv.cfg").st_mtime_ns
    forget_templates()
    second = prepare_workspace(venv_plan, str(tmp_path), str(tmp_path / "b"))
    assert second.ok and second.log == first.log
    assert os.listdir(machine_cache_dir()) == kept  # not built again
    assert os.stat(template / "pyvenv.cfg").st_mtime_ns == stamp
    copy = tmp_path / "b/.venv"
    assert os.stat(copy / "pyvenv.cfg").st_ino != os.stat(template / "pyvenv.cfg").st_ino
    out = subprocess.run([str(copy / "bin/python"), "-c", "import sys; print(sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.realpath(out) == os.path.realpath(copy)


def test_a_machine_template_others_could_have_written_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    built: list[str] = []

    def build(path: str, log: list[str]) -> None:
        os.makedirs(os.path.join(path, "bin"))
        Path(path, "pyvenv.cfg").write_text(f"build {len(built)}\n")
        built.append(path)
        log.append(f"built {len(built)}")

    machine = (sys.executable,)
    assert clone_venv(("k",), str(tmp_path / "a"), build, str(tmp_path), machine) == ["built 1"]
    assert clone_venv(("k",), str(tmp_path / "b"), build, str(tmp_path), machine) == ["built 1"]
    (entry,) = os.listdir(machine_cache_dir())
    os.chmod(os.path.join(machine_cache_dir(), entry), 0o777)  # group/world-writable
    forget_templates()
    assert clone_venv(("k",), str(tmp_path / "c"), build, str(tmp_path), machine) == ["built 2"]
    assert (tmp_path / "c/pyvenv.cfg").read_text() == "build 1\n"
    assert clone_venv(("k2",), str(tmp_path / "d"), build, str(tmp_path), machine) == ["built 3"]
    forget_templates()


def test_a_killed_build_of_a_machine_template_is_swept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    os.makedirs(machine_cache_dir())
    old, fresh = (Path(machine_cache_dir(), n) for n in (".building-old", ".building-new"))
    for d in (old, fresh):
        (d / "venv").mkdir(parents=True)
    os.utime(old, (time.time() - 7200, time.time() - 7200))

    def build(path: str, log: list[str]) -> None:
        os.makedirs(path)

    clone_venv(("k",), str(tmp_path / "a"), build, str(tmp_path), (sys.executable,))
    assert not old.exists() and fresh.exists()  # another process may be building that one
    forget_templates()


def test_the_trash_deletes_everything_put_in_it_by_close(tmp_path):
    from ce_runtime.execute.trash import Trash

    trash = Trash()
    trees = []
    for i in range(20):
        tree = tmp_path / f"scratch-{i}" / "ws" / "deep"
        tree.mkdir(parents=True)
        (tree / "file").write_text("x")
        trees.append(tree.parent.parent)
        trash.put(str(trees[-1]))
    trash.close()
    assert not any(t.exists() for t in trees)
    trash.close()  # twice is harmless
    (tmp_path / "later").mkdir()
    trash.put(str(tmp_path / "later"))  # usable again after a close
    trash.close()
    assert not (tmp_path / "later").exists()


def test_a_runs_venv_templates_live_in_its_scratch_root(tmp_path):
    """A venv with packages (here: a build that stands for `uv venv` + `uv pip install`)
    is templated per run, in the run's scratch root: the next run resolves again."""
    builds: list[str] = []

    def build(path: str, log: list[str]) -> None:
        os.makedirs(os.path.join(path, "bin"))
        builds.append(path)

    root = tmp_path / "run-scratch"
    root.mkdir()
    key = ("uv", sys.executable, ("requests",), None)
    for ws in ("a", "b"):
        clone_venv(key, str(tmp_path / ws / ".venv"), build, str(root))
    assert [p.name[:8] for p in root.iterdir()] == ["ce-venv-"]  # built once, kept there
    assert len(builds) == 1
    import shutil

    shutil.rmtree(root)  # the run ended: the next run builds its own
    root.mkdir()
    clone_venv(key, str(tmp_path / "c" / ".venv"), build, str(root))
    assert len(list(root.iterdir())) == 1 and (tmp_path / "c/.venv/bin").is_dir()
    assert len(builds) == 2


def test_an_agentless_trial_has_no_agent_phase_to_check(tmp_path):
    """`agent: {type: none}` runs nothing between pre_run and grading, so ce does not
    look for what it left running or changed: a service pre_run started that keeps
    writing a file of the venv (which the integrity check watches for an agent) leaves
    the trial graded, not an ERROR blamed on an agent that never ran."""
    task = tmp_path / "tasks" / "service.yaml"
    task.parent.mkdir()
    task.write_text(textwrap.dedent("""\
        task_id: service
        description: pre_run starts a service that keeps writing into the venv
        agent: {type: none}
        sandbox: {driver: tempdir}
        pre_run:
          - command: >-
              echo start > .venv/service.log;
              (while :; do echo tick >> .venv/service.log; done) >/dev/null 2>&1 &
              sleep 0.05
        success_criteria:
          - type: file_exists
            path: .venv/service.log
            description: the service's log is there
    """))
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", str(task), "-q",
                           "--run-dir", str(run_dir)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    record = json.loads((run_dir / "default" / "service" / "00" / "task.json").read_text())
    assert (record["status"], record.get("error")) == ("SUCCESS", None), proc.stderr
    assert "integrity" not in record.get("notes", {})
    assert proc.returncode == 0, proc.stderr
