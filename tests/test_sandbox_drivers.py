"""The Sandbox protocol, held by every driver the same way: commands, timeouts and
cancellation, stdin and binary output, file operations as the agent, spawned processes
with pipes, the agent phase (grader inputs locked, leftovers killed), teardown that
reaps daemons, the two environments, and what is recorded as enforced."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from ce_runtime.execute.sandbox import open_sandbox, unavailable
from ce_runtime.execute.sandbox.base import (
    AGENT,
    GRADER,
    Limits,
    SandboxError,
    SandboxFileError,
    SandboxSpec,
)
from ce_runtime.execute.sandbox.tempdir import close_warm_inits
from tests.engines import (
    BUSYBOX_IMAGE,
    PYTHON_IMAGE,
    busybox_image,
    bwrap_missing,
    docker_missing,
    need,
    python_image,
)

# "tempdir-forked": tempdir as `ce run` starts it (warm=True), its init forked by the
# run's zygote instead of launched
DRIVERS = ["tempdir", "tempdir-forked", "bwrap", "docker"]
# killing what a command started, also in an image whose `sh` is dash (Debian's), not
# busybox: their `kill` differ
KILLING = [*DRIVERS, "docker-debian"]


def docker_block(image=BUSYBOX_IMAGE, **kw):
    base = dict(image=image, dockerfile_path=None, working_dir=None, extra_mounts=[],
                env_passthrough=None, env_passthrough_extra=[], network=None, build=None)
    base.update(kw)
    return SimpleNamespace(**base)


def require(driver: str) -> None:
    if driver == "bwrap":
        need(bwrap_missing())
    elif driver == "docker":
        need(docker_missing())
        need(busybox_image())
    elif driver == "docker-debian":
        need(python_image())


@pytest.fixture
def task_dir(tmp_path) -> Path:
    d = tmp_path / "task"
    (d / "ref").mkdir(parents=True)
    (d / "ref" / "solution.py").write_text("SOLUTION = 42\n")
    (d / "hidden_test.sh").write_text("echo hidden-ok\n")
    return d


def spec_for(driver, tmp_path, task_dir, **kw) -> SandboxSpec:
    if driver == "tempdir-forked":
        kw.setdefault("warm", True)
    scratch = tmp_path / f"scratch-{os.urandom(3).hex()}"
    scratch.mkdir()
    if driver == "docker":
        kw.setdefault("docker", docker_block())
    if driver == "docker-debian":
        kw.setdefault("docker", docker_block(PYTHON_IMAGE))
    return SandboxSpec("t/00", str(scratch), str(task_dir),
                       reference=(str(task_dir / "ref"),), **kw)


def in_box(driver, tmp_path, task_dir, body, **kw):
    require(driver)

    async def main():
        box = open_sandbox(driver.split("-")[0], spec_for(driver, tmp_path, task_dir, **kw))
        try:
            await box.start()
            try:
                return await body(box)
            finally:
                await box.teardown()
        finally:
            await close_warm_inits()
    return asyncio.run(main())


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_exec_output_exit_code_cwd_stdin_and_binary(driver, tmp_path, task_dir):
    async def body(box):
        a = await box.exec("echo out; echo err >&2; pwd; exit 3")
        b = await box.exec(["cat"], stdin=b"from stdin")
        c = await box.exec(["/bin/sh", "-c", "printf '\\000\\377'"], binary=True)
        d = await box.exec("head -c 5000 /dev/zero | tr '\\0' x", max_output=100)
        e = await box.exec(["no-such-program-here"])
        return box.inner_workspace, a, b, c, d, e
    ws, a, b, c, d, e = in_box(driver, tmp_path, task_dir, body)
    assert (a.exit_code, a.stdout, a.stderr) == (3, f"out\n{ws}\n", "err\n")
    assert (b.exit_code, b.stdout) == (0, "from stdin")
    assert c.stdout == b"\x00\xff"
    assert d.stdout.startswith("x" * 100) and "truncated: 4900 of 5000" in d.stdout
    assert e.exit_code == 127


@pytest.mark.slow
@pytest.mark.parametrize("driver", KILLING)
def test_a_timeout_kills_the_command_and_its_children(driver, tmp_path, task_dir):
    async def body(box):
        started = time.monotonic()
        res = await box.exec("sleep 30 & echo $! > child.pid; echo started; wait", timeout=1)
        took = time.monotonic() - started
        await asyncio.sleep(0.3)
        check = await box.exec('kill -0 "$(cat child.pid)" 2>/dev/null && echo alive '
                               '|| echo dead')
        return res, took, check
    res, took, check = in_box(driver, tmp_path, task_dir, body)
    assert res.timed_out and res.exit_code == -1 and res.stdout == "started\n"
    assert took < 10
    assert check.stdout == "dead\n"


@pytest.mark.slow
@pytest.mark.parametrize("driver", KILLING)
def test_cancelling_a_command_kills_it(driver, tmp_path, task_dir):
    async def body(box):
        task = asyncio.ensure_future(box.exec("echo $$ > me.pid; exec sleep 30"))
        for _ in range(200):
            if (Path(box.workspace) / "me.pid").exists():
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)
        return await box.exec('kill -0 "$(cat me.pid)" 2>/dev/null && echo alive || echo dead')
    assert in_box(driver, tmp_path, task_dir, body).stdout == "dead\n"


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_file_operations_as_the_agent(driver, tmp_path, task_dir):
    async def body(box):
        ws = box.inner_workspace
        first = await box.write_file(f"{ws}/a/b/c.txt", b"one\n", 0o750)
        again = await box.write_file(f"{ws}/a/b/c.txt", b"two\n")
        data = await box.read_file(f"{ws}/a/b/c.txt")
        with pytest.raises(SandboxFileError) as missing:
            await box.read_file(f"{ws}/nope.txt")
        return first, again, data, str(missing.value)
    first, again, data, missing = in_box(driver, tmp_path, task_dir, body)
    assert (first, again, data) == (False, True, b"two\n")
    assert "No such file" in missing or "can't open" in missing
    ws = next(tmp_path.glob("scratch-*/ws"))
    assert (ws / "a/b/c.txt").read_text() == "two\n"
    assert oct((ws / "a/b/c.txt").stat().st_mode & 0o777) == oct(0o750)


@pytest.mark.slow
@pytest.mark.parametrize("driver", KILLING)
def test_spawn_gives_pipes_and_dies_when_killed(driver, tmp_path, task_dir):
    async def body(box):
        # after its line it outlives the end of its input (as `tail -f` does)
        proc = await box.spawn(["/bin/sh", "-c", "echo $$ > spawned.pid; "
                                "read line; echo got:$line; exec sleep 30"])
        proc.stdin.write(b"hello\n")
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        proc.kill()
        await proc.wait()
        await asyncio.sleep(0.5)
        check = await box.exec('kill -0 "$(cat spawned.pid)" 2>/dev/null && echo alive '
                               '|| echo dead')
        return line, check
    line, check = in_box(driver, tmp_path, task_dir, body)
    assert line == b"got:hello\n"
    assert check.stdout == "dead\n"  # docker: killed in the container, not only its client


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "tempdir-forked", "bwrap", "docker-debian"])
def test_no_process_of_a_trial_is_in_ces_process_group(driver, tmp_path, task_dir):
    """Every host process a sandbox starts (the init, run_client and docker clients for
    spawned commands, commands and launchers) is out of ce's process group, so a SIGINT
    to that group (Ctrl-C, or to a script's background `ce run`, which ignores it) never
    reaches a trial: run_client, in ce's group, took it and killed the agent's CLI behind
    ce's back. A launcher is spawned here as an agent SDK spawns its CLI: in our group
    (docker: an image with the glibc the host's /bin/sh links)."""
    from tests.processes import process_stats

    async def body(box):
        spawned = await box.spawn(["/bin/sh", "-c", "echo up; exec sleep 30"])
        lines = [await asyncio.wait_for(spawned.stdout.readline(), 30)]
        by_sdk = await asyncio.create_subprocess_exec(
            box.launcher(["/bin/sh", "-c", "echo up; exec sleep 30"], box.env(AGENT)),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE)
        lines.append(await asyncio.wait_for(by_sdk.stdout.readline(), 30))
        running = asyncio.ensure_future(box.exec("echo up > up.txt; sleep 30"))
        up = Path(box.workspace) / "up.txt"
        for _ in range(600):
            if up.exists():
                break
            await asyncio.sleep(0.05)
        ours = os.getpgid(0)
        children = [(pid, comm) for pid, (comm, _, rest) in process_stats().items()
                    if int(rest[0]) == os.getpid()]
        in_group = [(pid, comm) for pid, comm in children if os.getpgid(pid) == ours]
        running.cancel()
        for proc in (spawned, by_sdk):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        return lines, up.exists(), children, in_group
    lines, up, children, in_group = in_box(driver, tmp_path, task_dir, body)
    assert lines == [b"up\n", b"up\n"] and up
    assert len(children) >= 3, children  # and the exec's docker client, or the init
    assert in_group == [], children


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_views_agent_phase_and_teardown(driver, tmp_path, task_dir, monkeypatch):
    monkeypatch.setenv("CE_DRIVER_TEST_TOKEN", "tok-0123456789-secret")

    async def body(box):
        pre = await box.exec('cat "$TASK_DIR/hidden_test.sh"; cat "$REFERENCE_DIR/solution.py"',
                             view=GRADER)
        await box.exec("setsid sleep 600 > /dev/null 2>&1 < /dev/null &", view=GRADER)
        await box.agent_starts()
        agent_env = (await box.exec("env", view=AGENT)).stdout
        locked = await box.exec("ls /run/ce-grader/task 2>&1; echo rc=$?")
        await box.exec("sleep 500 > /dev/null 2>&1 < /dev/null &")
        left = await box.agent_ended()
        after = await box.exec('cat "$TASK_DIR/hidden_test.sh"', view=GRADER)
        killed = await box.teardown()
        return pre, agent_env, locked, left, after, killed
    pre, agent_env, locked, left, after, killed = in_box(driver, tmp_path, task_dir, body)
    assert pre.stdout == "echo hidden-ok\nSOLUTION = 42\n"
    assert "TASK_DIR" not in agent_env and "REFERENCE_DIR" not in agent_env
    assert "tok-0123456789" not in agent_env
    if not driver.startswith("tempdir"):
        assert "Permission denied" in locked.stdout and "rc=0" not in locked.stdout
    assert len(left) == 1, (left, killed)  # the agent's sleep (or its shell, not yet exec'd)
    assert after.stdout == "echo hidden-ok\n"  # the grader's view is back
    assert any("sleep" in k for k in killed), (left, killed)  # pre_run daemon, at teardown


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_limits_are_enforced_or_said(driver, tmp_path, task_dir):
    async def body(box):
        return box.enforcement, await box.exec(
            "i=0; while [ $i -lt 100 ]; do sleep 5 & i=$((i+1)); done; echo all-started")
    enforcement, res = in_box(driver, tmp_path, task_dir, body,
                              limits=Limits(pids=20, disk_mb=5))
    assert "max_disk_mb" in " ".join(enforcement.not_enforced)
    if "max_pids" in enforcement.limits:
        assert "all-started" not in res.stdout or res.exit_code != 0
    else:
        assert any("max_pids" in n for n in enforcement.not_enforced)


# -- bwrap: the model-only network ------------------------------------------------------------
class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"model says hi")

    def log_message(self, *a):
        pass


@pytest.mark.slow
def test_bwrap_model_network_reaches_the_model_and_nothing_else(tmp_path, task_dir):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    fetch = ("python3 -c \"import urllib.request,sys; "
             "print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())\" ")

    async def body(box):
        url = await box.route_model("127.0.0.1", server.server_address[1])
        ok = await box.exec(fetch + url)
        blocked = await box.exec(fetch + f"http://127.0.0.1:{other.server_address[1]}")
        return url, ok, blocked
    try:
        url, ok, blocked = in_box("bwrap", tmp_path, task_dir, body, network="model")
    finally:
        server.shutdown()
        other.shutdown()
    assert url.startswith("http://127.0.0.1:") and ok.stdout == "model says hi\n"
    assert blocked.exit_code != 0 and "model says hi" not in blocked.stdout

    async def none_body(box):
        with pytest.raises(SandboxError, match="network"):
            await box.route_model("127.0.0.1", 1)
    in_box("bwrap", tmp_path, task_dir, none_body, network="none")


# -- docker: the venv in the container, images that are missing ------------------------------
@pytest.mark.slow
def test_docker_builds_the_venv_in_the_container(tmp_path, task_dir):
    need(python_image())
    from ce_lang.api import compile_paths

    (task_dir / "task.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: p\n"
        f"sandbox: {{driver: docker, docker: {{image: {PYTHON_IMAGE}}}}}\n"
        "success_criteria:\n  - {type: file_exists, path: x, description: d}\n")
    plan = compile_paths([str(task_dir / "task.yaml")]).trials[0].plan

    async def body(box):
        setup = await box.prepare(plan)
        return setup, await box.exec("python -c 'import sys; print(sys.prefix)'")
    setup, res = in_box("docker", tmp_path, task_dir, body,
                        docker=docker_block(PYTHON_IMAGE))
    assert setup.ok, setup.error
    assert res.stdout.strip() == "/workspace/.venv"


def test_a_missing_image_is_said_before_any_trial():
    need(docker_missing())
    box = SimpleNamespace(docker=docker_block("local/no-such-image-here"))
    why = unavailable("docker", [box])
    assert "local/no-such-image-here" in why and "not available" in why


def test_an_unknown_driver_is_named():
    assert "no sandbox driver named 'nsjail'" in unavailable("nsjail")


@pytest.mark.slow
def test_docker_builds_a_task_dockerfile_and_mounts_at_working_dir(tmp_path, task_dir,
                                                                   monkeypatch):
    need(docker_missing())
    monkeypatch.setenv("CE_TEST_GREETING", "hello")
    need(busybox_image())
    env_dir = task_dir / "environment"
    env_dir.mkdir()
    (env_dir / "marker.txt").write_text("built by ce\n")
    (env_dir / "Dockerfile").write_text(
        f"FROM {BUSYBOX_IMAGE}\nARG GREETING\nCOPY marker.txt /opt/marker.txt\n"
        "RUN echo \"$GREETING\" > /opt/greeting.txt\n")
    build = SimpleNamespace(args={"GREETING": "${CE_TEST_GREETING}-from-host"}, secrets=[],
                            extra_args=[], buildkit=None)
    block = docker_block(None, dockerfile_path="environment/Dockerfile", build=build,
                         working_dir="/app")

    async def body(box):
        return box.inner_workspace, await box.exec(
            "cat /opt/marker.txt /opt/greeting.txt; pwd; echo made > here.txt")
    inner, res = in_box("docker", tmp_path, task_dir, body, docker=block)
    assert inner == "/app"
    assert res.stdout == "built by ce\nhello-from-host\n/app\n", res.stderr
    assert (next(tmp_path.glob("scratch-*/ws")) / "here.txt").read_text() == "made\n"


@pytest.mark.slow
def test_ce_run_refuses_a_driver_that_cannot_run_before_any_trial(tmp_path):
    import subprocess
    import sys

    (tmp_path / "t.yaml").write_text(
        "task_id: t\ndescription: d\nagent: {type: none}\n"
        "sandbox: {driver: docker, python: null, docker: {image: local/busybox}}\n"
        "success_criteria:\n  - {type: file_exists, path: x, description: d}\n")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", str(tmp_path / "t.yaml"),
                          "--runs-root", str(tmp_path / "runs")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2
    assert "driver `docker` (1 trial(s): default/t/00)" in res.stderr
    assert "nothing was run" in res.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("task.json"))


def test_the_launchers_pass_the_sdks_variables_but_no_secret_looking_one():
    """Every driver's launcher chooses the variables the agent's CLI gets with one
    fragment, by the names the redactor hides (the two launchers had their own, shorter,
    copy of the pattern: CLAUDE_CODE_*_PASSWD reached the CLI)."""
    from ce_runtime.execute.sandbox.base import launcher_names

    env = {"ANTHROPIC_API_KEY": "k", "CLAUDE_CODE_ENTRYPOINT": "sdk-py",
           "CLAUDE_AGENT_SDK_VERSION": "1", "CLAUDE_CODE_OAUTH_TOKEN": "t",
           "CLAUDE_CODE_PROXY_PASSWD": "p", "HOME": "/root"}
    scope: dict = {"os": SimpleNamespace(environ=env)}
    exec("import json, re\n" + launcher_names(["ANTHROPIC_API_KEY"]), scope)
    assert scope["names"] == ["ANTHROPIC_API_KEY", "CLAUDE_AGENT_SDK_VERSION",
                              "CLAUDE_CODE_ENTRYPOINT"]
