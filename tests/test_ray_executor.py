"""`ce run --executor ray`: the same results as the local pool, on a Ray instance ce starts
(one node) and on a two-node cluster of `ray start`s on this machine (tests/ray_cluster.py,
stopped by its own process ids); a worker killed mid-trial gives one result, leaks no
scratch and leaves no agent process; an interrupted Ray run resumes.

Without Ray the tests skip with the reason, except under CE_REQUIRE_ENGINES=1 (CI), where
a missing Ray fails them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner

from tests.engines import need
from tests.ray_cluster import RayCluster, ray_missing
from tests.test_run_e2e import CE, ENV, ROOT, SLOWISH, TASKS, run_dir_in, task_jsons

JUDGE = os.path.join(TASKS, "judged.replies.yaml")
ORACLE = ["run", TASKS, "--agent", "oracle", "-j", "2", "--judge-replies", JUDGE]


def _env(cwd: str, **extra: str) -> dict[str, str]:
    tmp = os.path.join(cwd, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env = {**ENV, "TMPDIR": tmp, "RAY_AUTH_MODE": "token", **extra}
    env.pop("RAY_ADDRESS", None)
    return env


def _ce(args: list[str], cwd: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([CE, *args], cwd=cwd, env=_env(cwd), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _outcomes(run_dir: str) -> dict[str, tuple]:
    return {tid: (r["status"], r["weighted_score"],
                  tuple((c["id"], c["score"]) for c in r["criteria"]))
            for tid, r in task_jsons(run_dir).items()}


def _scratch_left(cwd: str) -> list[str]:
    """Scratch under the test's TMPDIR that no live process owns: a trial's leftovers.
    A live Ray worker keeps its root (ce-ray-<uid>/<pid>-*: its warm sandbox inits), never
    a trial's run-* scratch."""
    tmp = os.path.join(cwd, "tmp")
    left = [n for n in os.listdir(tmp) if n != f"ce-ray-{os.getuid()}"]
    base = os.path.join(tmp, f"ce-ray-{os.getuid()}")
    for name in os.listdir(base) if os.path.isdir(base) else []:
        if not os.path.exists(f"/proc/{name.split('-')[0]}"):
            left.append(f"{base}/{name} (of a dead worker)")
        else:
            left += [f"{base}/{name}/{n}" for n in os.listdir(os.path.join(base, name))
                     if n.startswith("run-")]
    return left


@pytest.fixture(scope="module")
def local_baseline(tmp_path_factory) -> dict[str, tuple]:
    cwd = str(tmp_path_factory.mktemp("local"))
    res = _ce([*ORACLE, "--runs-root", "runs"], cwd)
    assert res.returncode == 0, res.stderr[-3000:]
    return _outcomes(run_dir_in(os.path.join(cwd, "runs")))


def test_without_ray_the_executor_is_a_one_line_error(tmp_path, monkeypatch):
    from ce_runtime.cli import main
    from ce_runtime.execute import executor

    monkeypatch.setattr(executor, "ray_missing", lambda: "--executor ray needs Ray, which "
                        "is not installed: pip install 'ce[ray]'")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["run", os.path.join(TASKS, "hello_world.yaml"),
                                    "--agent", "oracle", "--executor", "ray"])
    assert res.exit_code == 2, res.output
    assert "pip install 'ce[ray]'" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "runs").exists()  # said before a run directory is made


@pytest.mark.slow
def test_one_node_gives_the_local_results(tmp_path, local_baseline):
    need(ray_missing())
    cwd = str(tmp_path)
    res = _ce([*ORACLE, "--executor", "ray", "--runs-root", "runs"], cwd)
    assert res.returncode == 0, res.stderr[-3000:]
    run_dir = run_dir_in(os.path.join(cwd, "runs"))
    assert _outcomes(run_dir) == local_baseline
    with open(os.path.join(run_dir, "run.json")) as fh:
        args = json.load(fh)["args"]
    assert args["executor"] == "ray" and args["ray_address"] is None
    assert "Traceback" not in res.stderr and "WARNING" not in res.stderr
    assert _scratch_left(cwd) == []


@pytest.mark.slow
def test_two_nodes_give_the_local_results(tmp_path, local_baseline):
    need(ray_missing())
    cwd = str(tmp_path)
    with RayCluster(nodes=2, cpus=1, tmpdir=_env(cwd)["TMPDIR"]) as cluster:
        res = _ce([*ORACLE, "--executor", "ray", "--ray-address", cluster.address,
                   "--runs-root", "runs"], cwd)
        assert res.returncode == 0, res.stderr[-3000:] + cluster.logs()
        run_dir = run_dir_in(os.path.join(cwd, "runs"))
        assert _outcomes(run_dir) == local_baseline
        assert _scratch_left(cwd) == []


KILLED_TASK = """task_id: killed
description: the first attempt hangs until its worker is killed; the retry finishes
initial_prompt: go
agent:
  type: script
  script:
    - run: 'if [ -e {flag} ]; then echo again; else touch {flag}; sleep {marker}; fi'
    - write: done.txt
      content: ok
sandbox: {{driver: tempdir, python: null}}
success_criteria:
  - type: file_exists
    description: d
    path: done.txt
"""


def _pids_with(needle: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if needle in fh.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        stat = fh.read()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _worker_of(pid: int, workers: list[int]) -> int | None:
    while pid > 1:
        if pid in workers:
            return pid
        try:
            pid = _ppid(pid)
        except OSError:
            return None
    return None


@pytest.mark.slow
def test_a_worker_killed_mid_trial_gives_one_result_and_leaks_nothing(tmp_path):
    need(ray_missing())
    cwd = str(tmp_path)
    marker = "317.25"  # `sleep 317.25`: the first attempt's agent command, found by it
    flag = tmp_path / "first-attempt"
    (tmp_path / "killed.yaml").write_text(KILLED_TASK.format(flag=flag, marker=marker))
    env = _env(cwd)
    with RayCluster(nodes=1, cpus=2, tmpdir=env["TMPDIR"]) as cluster:
        proc = subprocess.Popen(
            [CE, "run", "killed.yaml", "--executor", "ray", "--ray-address", cluster.address,
             "--runs-root", "runs"], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            worker = None
            while worker is None and time.monotonic() < deadline and proc.poll() is None:
                sleepers = _pids_with(f"sleep {marker}".encode())
                if sleepers:
                    worker = _worker_of(sleepers[0], cluster.worker_pids())
                time.sleep(0.2)
            assert worker is not None, "the trial's agent never ran on a cluster worker"
            os.kill(worker, signal.SIGKILL)
            _out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err[-3000:]
        assert len(re.findall(r"\] SUCCESS +default/killed/00", err)) == 1, err
        run_dir = run_dir_in(os.path.join(cwd, "runs"))
        records = task_jsons(run_dir)
        assert [r["status"] for r in records.values()] == ["SUCCESS"]
        from ce_runtime.store.archive import verified_trial

        verified_trial(os.path.join(run_dir, "default", "killed", "00"))  # not damaged
        # the agent of the killed attempt died with its worker; its scratch was swept
        deadline = time.monotonic() + 10
        while _pids_with(f"sleep {marker}".encode()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _pids_with(f"sleep {marker}".encode()) == []
        assert _scratch_left(cwd) == []


@pytest.mark.slow
def test_an_interrupted_ray_run_resumes_on_ray(tmp_path):
    need(ray_missing())
    cwd = str(tmp_path)
    (tmp_path / "slowish.yaml").write_text(SLOWISH)
    env = _env(cwd)
    runs = tmp_path / "runs"
    with RayCluster(nodes=1, cpus=2, tmpdir=env["TMPDIR"]) as cluster:
        proc = subprocess.Popen(
            [CE, "run", "slowish.yaml", "--repeats", "12", "-j", "2", "--executor", "ray",
             "--ray-address", cluster.address, "--runs-root", str(runs)], cwd=cwd, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            deadline = time.monotonic() + 300
            done = 0
            while time.monotonic() < deadline and proc.poll() is None and done < 3:
                dirs = [d for d in runs.glob("*") if d.is_dir() and not d.is_symlink()]
                if dirs:
                    done = len(list(dirs[0].glob("default/slowish/*/task.json")))
                time.sleep(0.1)
            assert done >= 3, "no trial finished"
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1, err[-3000:]
        assert "SIGTERM received: finished trials are kept; resume with" in err
        assert "Traceback" not in err
        run_dir = run_dir_in(str(runs))
        kept = len(task_jsons(run_dir))
        assert 3 <= kept < 12
        with open(os.path.join(run_dir, "run.json")) as fh:
            assert json.load(fh)["status"] == "interrupted"
        assert _scratch_left(cwd) == []
        # no --executor: the run's own (ray, this cluster)
        res = subprocess.run([CE, "run", "--resume", run_dir], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
        assert f"{kept} already done" in res.stderr
        assert len(re.findall(r"\] SUCCESS ", res.stderr)) == 12 - kept
        with open(os.path.join(run_dir, "run.json")) as fh:
            meta = json.load(fh)
        assert meta["status"] == "complete"
        assert meta["args"]["executor"] == "ray"
        assert meta["args"]["ray_address"] == cluster.address
        assert len(task_jsons(run_dir)) == 12
        assert _scratch_left(cwd) == []



def test_the_driver_writes_a_remote_trial_once_and_only_inside_the_run(tmp_path):
    """write_result: run-level files it has are kept, the trial's files replace an
    earlier attempt's with task.json last, and nothing outside objects/ and judges/."""
    from types import SimpleNamespace

    from ce_runtime.execute.executor import TrialResult, write_result

    run_dir = tmp_path / "run"
    trial = SimpleNamespace(variant_id="default", plan=SimpleNamespace(task_id="t"), repeat=0)
    (run_dir / "objects" / "ab").mkdir(parents=True)
    (run_dir / "objects" / "ab" / "cd").write_bytes(b"already here")
    tdir = run_dir / "default" / "t" / "00"
    tdir.mkdir(parents=True)
    (tdir / "evidence.json").write_text("stale")  # an earlier attempt's
    result = TrialResult("t/00", {"status": "SUCCESS"},
                         {"trace.msgpack": b"T", "workspace.json": b"{}", "task.json": b"{}"},
                         {"objects/ab/cd": b"same name, same bytes", "judges/k.json": b"{}"})
    write_result(str(run_dir), trial, result)
    assert (run_dir / "objects" / "ab" / "cd").read_bytes() == b"already here"
    assert (run_dir / "judges" / "k.json").read_bytes() == b"{}"
    assert sorted(os.listdir(tdir)) == ["task.json", "trace.msgpack", "workspace.json"]
    with pytest.raises(ValueError, match="outside objects/ and judges/"):
        write_result(str(run_dir), trial, TrialResult("t/00", {}, {}, {"../evil": b"x"}))
    assert not (tmp_path / "evil").exists()
