"""Sandbox set-up and pre_run / post_run commands, on real files and processes."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from ce_lang.compiler import compile_paths
from ce_lang.schema.task import PostRunCommand, PreRunCommand
from ce_runtime.execute.sandbox import open_sandbox
from ce_runtime.execute.sandbox.base import AGENT, GRADER, SandboxSpec
from ce_runtime.execute.sandbox.workspace import REPO_DIR, prepare_workspace
from ce_runtime.execute.task_commands import OUTPUT_LIMIT, run_commands

BASE = """\
task_id: t
description: d
initial_prompt: p
success_criteria:
  - type: file_exists
    description: x exists
    path: x
"""


def compile_plan(task_dir, body: str):
    path = task_dir / "task.yaml"
    path.write_text(BASE + textwrap.dedent(body))
    result = compile_paths([str(path)])
    errors = [(d.code, d.message) for d in result.diagnostics if d.severity == "error"]
    assert not errors, errors
    return result.trials[0].plan


def put(base, rel: str, text: str = "", mode: int | None = None):
    path = base / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    return path


def files_under(root) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.add(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return out


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "task"
    d.mkdir()
    return d


@pytest.fixture
def ws(tmp_path):
    return tmp_path / "ws"


def setup_ok(plan, task_dir, ws, **kw):
    res = prepare_workspace(plan, str(task_dir), str(ws), **kw)
    assert res.ok, res.error
    assert res.error is None and res.duration_ms >= 0
    return res


# -- template sources --------------------------------------------------------------------
def git(cwd, *args):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def origin(tmp_path):
    """A local repository with two commits: `first` has v1 of app.py, HEAD has v2."""
    repo = tmp_path / "origin"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    put(repo, "app.py", "v1\n")
    put(repo, "shared.txt", "from repo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    first = git(repo, "rev-parse", "HEAD")
    put(repo, "app.py", "v2\n")
    put(repo, "later.txt", "added later\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two")
    return repo, first


def test_repo_clone_at_commit(task_dir, ws, origin):
    repo, first = origin
    plan = compile_plan(task_dir, f"""
        sandbox:
          python: null
          template_sources:
            - type: repo
              url: {repo}
              commit: {first}
        """)
    res = setup_ok(plan, task_dir, ws)
    clone = ws / REPO_DIR
    assert (clone / "app.py").read_text() == "v1\n"
    assert not (clone / "later.txt").exists()
    assert git(clone, "rev-parse", "HEAD") == first  # .git kept: git works in the clone
    assert any(line.startswith("repo: cloned") and first[:12] in line for line in res.log)


def test_repo_without_commit(task_dir, ws, origin):
    repo, _ = origin  # (a file:// URL is refused: CE0218, tests/test_paths_confined.py)
    plan = compile_plan(task_dir, f"""
        sandbox:
          python: null
          template_sources:
            - {{type: repo, url: "{repo}"}}
        """)
    setup_ok(plan, task_dir, ws)
    assert (ws / REPO_DIR / "app.py").read_text() == "v2\n"


def test_repo_relative_path_resolves_against_the_task_dir(task_dir, ws, origin):
    del origin  # the fixture made ../origin next to the task dir
    plan = compile_plan(task_dir, """
        sandbox:
          python: null
          template_sources:
            - {type: repo, url: ../origin}
        """)
    setup_ok(plan, task_dir, ws)
    assert (ws / REPO_DIR / "later.txt").exists()


def test_repo_failures_name_the_source_and_command(task_dir, ws, origin, tmp_path):
    repo, _ = origin
    plan = compile_plan(task_dir, f"""
        sandbox:
          python: null
          template_sources:
            - {{type: repo, url: {repo}, commit: deadbeefdeadbeef}}
        """)
    res = prepare_workspace(plan, str(task_dir), str(ws))
    assert not res.ok
    assert res.error.startswith("template_sources[0] (repo): git checkout deadbeefdeadbeef")
    assert "failed (exit" in res.error and "deadbeefdeadbeef" in res.error.split("\n", 1)[1]

    plan = compile_plan(task_dir, f"""
        sandbox:
          python: null
          template_sources:
            - {{type: repo, url: {tmp_path / "nowhere"}}}
        """)
    res = prepare_workspace(plan, str(task_dir), str(tmp_path / "ws2"))
    assert not res.ok and "git clone" in res.error and "nowhere" in res.error


def test_sources_apply_in_order_last_writer_wins(task_dir, ws, origin):
    repo, _ = origin
    put(task_dir, "base/shared.txt", "from base\n")
    put(task_dir, "base/only_base.txt", "base\n")
    put(task_dir, "base/sub/deep.txt", "deep\n")
    put(task_dir, "over/shared.txt", "from over\n")
    put(task_dir, "over/sub", "now a file\n")  # a file replaces the directory
    plan = compile_plan(task_dir, f"""
        sandbox:
          python: null
          template_sources:
            - {{type: repo, url: {repo}}}
            - {{type: template_dir, path: base, mount_point: {REPO_DIR}}}
            - {{type: template_dir, path: over, mount_point: {REPO_DIR}}}
            - type: starter_files
              files:
                - {{path: {REPO_DIR}/only_base.txt, content: "from starter"}}
                - {{path: notes/new/README.md, content: "é\\n"}}
            - {{type: template_dir, path: base, mount_point: elsewhere/x}}
        """)
    res = setup_ok(plan, task_dir, ws)
    r = ws / REPO_DIR
    assert (r / "shared.txt").read_text() == "from over\n"  # repo < base < over
    assert (r / "app.py").read_text() == "v2\n"  # the repo's other files stay
    assert (r / "only_base.txt").read_text() == "from starter"
    assert (r / "sub").is_file() and (r / "sub").read_text() == "now a file\n"
    assert (ws / "notes/new/README.md").read_bytes() == "é\n".encode()
    assert (ws / "elsewhere/x/sub/deep.txt").read_text() == "deep\n"
    assert [line.split(":")[0] for line in res.log] == [
        "repo", "template_dir", "template_dir", "starter_files", "template_dir"]


def test_a_directory_replaces_a_file_and_starter_files_replace_symlinks(task_dir, ws,
                                                                       tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    put(task_dir, "one/lib", "a file first\n")
    (task_dir / "one").joinpath("link").symlink_to(outside)  # a symlink to a directory
    put(task_dir, "two/lib/mod.py", "x = 1\n")
    plan = compile_plan(task_dir, """
        sandbox:
          python: null
          template_sources:
            - {type: template_dir, path: one}
            - {type: template_dir, path: two}
            - type: starter_files
              files: [{path: link/escape.txt, content: "no"}]
        """)
    setup_ok(plan, task_dir, ws)
    assert (ws / "lib/mod.py").read_text() == "x = 1\n"
    assert (ws / "link").is_dir() and not (ws / "link").is_symlink()
    assert (ws / "link/escape.txt").read_text() == "no"
    assert list(outside.iterdir()) == []  # nothing written through the symlink


def test_ignore_patterns_and_negation(task_dir, ws):
    tpl = task_dir / "tpl"
    for rel in ("src/app.py", "dist/bundle.js", "node_modules/m/index.js",
                "src/__pycache__/app.cpython-311.pyc", "keep.bak", "build/out.o",
                ".git/HEAD", "pkg/mod.pyc", "README.md"):
        put(tpl, rel, rel)
    plan = compile_plan(task_dir, """
        sandbox:
          python: null
          ignore_patterns: ["!dist", "*.bak"]
          template_sources:
            - {type: template_dir, path: tpl}
        """)
    setup_ok(plan, task_dir, ws)
    assert files_under(ws) == {"src/app.py", "dist/bundle.js", "README.md"}


def test_include_patterns_re_include_ignored_paths(task_dir, ws):
    tpl = task_dir / "tpl"
    for rel in ("src/app.py", "tools/a/dist/x.js", "tools/b/dist/y.js", "dist/top.js",
                "node_modules/m/index.js", "node_modules/m/keep.d.ts", "lib.pyc"):
        put(tpl, rel, rel)
    plan = compile_plan(task_dir, """
        sandbox:
          python: null
          template_sources:
            - type: template_dir
              path: tpl
              include_patterns: ["tools/*/dist", "*.d.ts", "./lib.pyc"]
        """)
    setup_ok(plan, task_dir, ws)
    assert files_under(ws) == {"src/app.py", "tools/a/dist/x.js", "tools/b/dist/y.js",
                               "node_modules/m/keep.d.ts", "lib.pyc"}


def test_file_modes_and_symlinks_preserved(task_dir, ws):
    tpl = task_dir / "tpl"
    put(tpl, "run.sh", "#!/bin/sh\necho ok\n", mode=0o755)
    put(tpl, "secret.txt", "s", mode=0o600)
    put(tpl, "ro.txt", "r", mode=0o444)
    (tpl / "alias.sh").symlink_to("run.sh")
    plan = compile_plan(task_dir, """
        sandbox:
          python: null
          template_sources:
            - {type: template_dir, path: tpl}
            - {type: template_dir, path: tpl}
        """)
    res = setup_ok(plan, task_dir, ws)  # applied twice: read-only files are replaced too
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((ws / "secret.txt").stat().st_mode) == 0o600
    assert stat.S_IMODE((ws / "ro.txt").stat().st_mode) == 0o444
    assert os.readlink(ws / "alias.sh") == "run.sh"
    assert "4 replaced" in res.log[1]


def test_missing_template_dir_is_an_error_not_an_exception(task_dir, ws):
    (task_dir / "tpl").mkdir()
    plan = compile_plan(task_dir, """
        sandbox:
          python: null
          template_sources:
            - {type: starter_files, files: [{path: a.txt, content: a}]}
            - {type: template_dir, path: tpl}
        """)
    shutil.rmtree(task_dir / "tpl")  # gone after compiling
    res = prepare_workspace(plan, str(task_dir), str(ws))
    assert not res.ok
    assert res.error.startswith("template_sources[1] (template_dir): template directory 'tpl'")
    assert res.log == ["starter_files: 1 files"]


# -- python / node -----------------------------------------------------------------------
def test_python_venv_created_without_packages(task_dir, ws, tmp_path):
    plan = compile_plan(task_dir, "")  # default sandbox: a venv, no packages
    res = setup_ok(plan, task_dir, ws, uv_cache=str(tmp_path / "uvcache"))
    py = ws / ".venv" / "bin" / "python"
    assert py.exists()
    out = subprocess.run([str(py), "-c", "import sys; print(sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.realpath(out) == os.path.realpath(ws / ".venv")
    assert any(line.startswith("python: created .venv") for line in res.log)


def test_python_null_skips_the_venv(task_dir, ws):
    plan = compile_plan(task_dir, "sandbox: {python: null}\n")
    res = setup_ok(plan, task_dir, ws)
    assert not (ws / ".venv").exists() and res.log == []


def test_a_templates_venv_is_replaced(task_dir, ws):
    plan = compile_plan(task_dir, """
        sandbox:
          template_sources:
            - {type: starter_files, files: [{path: .venv/junk, content: x}]}
        """)
    res = setup_ok(plan, task_dir, ws)
    assert not (ws / ".venv/junk").exists() and (ws / ".venv/bin/python").exists()
    assert "python: replaced an existing .venv" in res.log


@pytest.mark.slow
def test_python_packages_installed_with_uv(task_dir, ws, tmp_path):
    plan = compile_plan(task_dir, "sandbox: {python: {env_packages: [six==1.16.0]}}\n")
    res = setup_ok(plan, task_dir, ws, uv_cache=str(tmp_path / "uvcache"))
    out = subprocess.run([str(ws / ".venv/bin/python"), "-c",
                          "import six; print(six.__version__)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "1.16.0"
    assert any("six==1.16.0" in line for line in res.log if line.startswith("python: installed"))
    assert os.listdir(tmp_path / "uvcache")  # the shared cache was used


def test_python_install_failure_reports_the_command(task_dir, ws, tmp_path):
    plan = compile_plan(task_dir, f"""
        sandbox: {{python: {{env_packages: ["{tmp_path / 'no-such-dir'}"]}}}}
        """)
    res = prepare_workspace(plan, str(task_dir), str(ws), uv_cache=str(tmp_path / "uvc"))
    assert not res.ok
    assert res.error.startswith("sandbox.python: uv pip install")
    assert "failed (exit" in res.error


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
def test_node_packages_installed_locally(task_dir, ws, tmp_path):
    pkg = tmp_path / "hello-bin"
    put(pkg, "package.json", '{"name": "hello-bin", "version": "1.0.0", '
                             '"bin": {"hello-bin": "cli.js"}}')
    put(pkg, "cli.js", "#!/usr/bin/env node\nconsole.log('hello from node')\n", mode=0o755)
    plan = compile_plan(task_dir, f"""
        sandbox:
          python: null
          node: {{env_packages: ["{pkg}"]}}
        """)
    res = setup_ok(plan, task_dir, ws)
    assert (ws / "node_modules/.bin/hello-bin").exists()
    assert res.log[-1].startswith("node: installed")
    out = in_sandbox(ws, task_dir, lambda sb: sb.exec("hello-bin"))
    assert out.stdout.strip() == "hello from node"


# -- environment -------------------------------------------------------------------------
def in_sandbox(ws, task_dir, body, reference=(), driver="tempdir"):
    """`body(sandbox)` (a coroutine) in a started tempdir sandbox around `ws`."""
    async def main():
        scratch = ws.parent / f"scratch-{os.urandom(3).hex()}"
        scratch.mkdir()
        sb = open_sandbox(driver, SandboxSpec("t", str(scratch), str(task_dir),
                                              reference=tuple(reference),
                                              workspace=str(ws)))
        await sb.start()
        try:
            return await body(sb)
        finally:
            await sb.teardown()
    ws.mkdir(exist_ok=True)
    return asyncio.run(main())


def test_grader_env_has_the_venv_first_task_dir_and_reference(task_dir, ws, monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/some/other/venv")
    put(task_dir, "ref/solution.py", "x = 1\n")
    plan = compile_plan(task_dir, """
        reference: {directory: ref}
        """)
    setup_ok(plan, task_dir, ws)

    async def body(sb):
        return sb.env(GRADER), await sb.exec(
            "python -c 'import sys; print(sys.prefix)'", view=GRADER)
    env, out = in_sandbox(ws, task_dir, body, reference=[str(task_dir / "ref")])
    root = str(ws)
    path = env["PATH"].split(os.pathsep)
    assert path[:2] == [os.path.join(root, ".venv", "bin"),
                        os.path.join(root, "node_modules", ".bin")]
    assert env["VIRTUAL_ENV"] == os.path.join(root, ".venv")
    assert env["TASK_DIR"] == str(task_dir)
    assert env["REFERENCE_DIR"] == os.path.normpath(task_dir / "ref")
    assert os.path.realpath(out.stdout.strip()) == os.path.realpath(ws / ".venv")


def test_agent_env_names_neither_the_task_dir_nor_the_reference(task_dir, ws, monkeypatch):
    monkeypatch.setenv("VIRTUAL_ENV", "/some/other/venv")
    monkeypatch.setenv("CE_TEST_API_KEY", "sk-planted-0123456789")
    plan = compile_plan(task_dir, "sandbox: {python: null}\n")
    setup_ok(plan, task_dir, ws)

    async def body(sb):
        return sb.env(AGENT), (await sb.exec("env", view=AGENT)).stdout
    env, shown = in_sandbox(ws, task_dir, body, reference=[str(task_dir)])
    assert "VIRTUAL_ENV" not in env and "REFERENCE_DIR" not in env
    assert "TASK_DIR" not in env and "TASK_DIR=" not in shown
    assert "sk-planted" not in shown and "CE_TEST_API_KEY" not in shown
    assert env["HOME"] != os.path.expanduser("~")  # a private home


# -- pre_run / post_run ------------------------------------------------------------------
def pre(command: str, **kw) -> PreRunCommand:
    return PreRunCommand(command=command, **kw)


def post(command: str, **kw) -> PostRunCommand:
    return PostRunCommand(command=command, **kw)


def run(commands, ws, phase, env=None, then=None):
    """Run the commands in a tempdir sandbox around `ws`; `then(outcomes)` runs before
    the sandbox is torn down."""
    async def body(sb):
        if env:
            sb.spec.env.update(env)
        out = await run_commands(commands, sb, phase)
        if then is not None:
            then(out)
        return out
    return in_sandbox(ws, ws.parent, body)


def test_pre_run_stops_at_the_first_failure_with_fail_on_error(ws):
    out = run([pre("echo one > one.txt"),
               pre("echo oops >&2; exit 3"),
               pre("touch never.txt")], ws, "pre_run")
    assert [(o.command, o.exit_code, o.failed, o.ok) for o in out] == [
        ("echo one > one.txt", 0, False, True),
        ("echo oops >&2; exit 3", 3, True, False)]
    assert out[1].stderr == "oops\n" and out[1].fail_on_error
    assert (ws / "one.txt").read_text() == "one\n"  # cwd is the workspace
    assert not (ws / "never.txt").exists()


def test_pre_run_fail_on_error_false_continues(ws):
    out = run([pre("exit 1", fail_on_error=False),
               pre("echo next")], ws, "pre_run")
    assert [(o.exit_code, o.failed, o.ok, o.fail_on_error) for o in out] == [
        (1, False, False, False), (0, False, True, True)]
    assert out[1].stdout == "next\n"


def test_post_run_runs_everything_and_never_fails(ws):
    out = run([post("exit 2"), post("echo $PHASE_VAR"),
               post("false")], ws, "post_run", env={"PHASE_VAR": "seen"})
    assert [(o.exit_code, o.failed, o.ok) for o in out] == [
        (2, False, False), (0, False, True), (1, False, False)]
    assert out[1].stdout == "seen\n"


def test_bad_phase_is_a_programming_error(ws):
    with pytest.raises(ValueError):
        run([post("true")], ws, "during")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except FileNotFoundError:
        return False


def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_timeout_kills_the_whole_group(ws):
    started = time.monotonic()
    out = run([pre("sleep 60 & echo $! > child.pid; echo started; wait",
                             timeout=1),
               pre("touch never.txt")], ws, "pre_run")
    assert time.monotonic() - started < 10
    assert len(out) == 1
    o = out[0]
    assert o.timed_out and o.exit_code == -1 and o.failed and not o.ok
    assert o.stdout == "started\n"  # what it wrote before the kill is kept
    pid = int((ws / "child.pid").read_text())
    assert wait_dead(pid), "the timed-out command's child survived"
    assert not (ws / "never.txt").exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_background_daemon_does_not_hang_the_command(ws):
    started = time.monotonic()
    seen = []
    out = run([pre("sleep 30 & echo $! > daemon.pid; echo up", timeout=20),
               pre("echo after")], ws, "pre_run",
              then=lambda _: seen.append(alive(int((ws / "daemon.pid").read_text()))))
    assert time.monotonic() - started < 5  # not the daemon's 30 s, nor the 20 s timeout
    assert [(o.exit_code, o.timed_out, o.stdout) for o in out] == [
        (0, False, "up\n"), (0, False, "after\n")]
    assert seen == [True]  # the daemon keeps running for the agent ...
    assert wait_dead(int((ws / "daemon.pid").read_text()))  # ... until the teardown


def test_outputs_truncated_at_100_kb(ws):
    script = ("import sys; sys.stdout.write('o' * 250000); "
              "sys.stderr.write('é' * 100000)")
    out = run([post(f"{sys.executable} -c \"{script}\"")], ws, "post_run")
    o = out[0]
    assert o.exit_code == 0
    assert o.stdout.startswith("o" * OUTPUT_LIMIT)
    assert o.stdout[OUTPUT_LIMIT:] == (
        f"\n[... truncated: {250000 - OUTPUT_LIMIT} of 250000 bytes not kept]")
    head, note = o.stderr.split("\n[... truncated: ")
    assert len(head.encode()) <= OUTPUT_LIMIT + 3 and head.startswith("é" * 1000)
    assert note == f"{200000 - OUTPUT_LIMIT} of 200000 bytes not kept]"


def test_small_outputs_are_untouched(ws):
    out = run([post("printf 'a\\nb'; printf 'c' >&2")], ws, "post_run")
    assert (out[0].stdout, out[0].stderr) == ("a\nb", "c")


def test_a_missing_workspace_is_a_failed_command_not_an_exception(tmp_path):
    ws = tmp_path / "ws"

    async def body(sb):
        shutil.rmtree(ws)
        return await run_commands([pre("true"), pre("true")], sb, "pre_run")
    out = in_sandbox(ws, tmp_path, body)
    assert len(out) == 1 and out[0].exit_code == 127 and out[0].failed
    assert "cannot start /bin/sh" in out[0].stderr


def test_shim_help_is_usage_not_a_socket(tmp_path):
    """`shim.py --help` says how it is called; it made a socket named `--help` in the
    working directory before."""
    from ce_runtime.execute.sandbox.supervised import SHIM

    proc = subprocess.run([sys.executable, SHIM, "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: shim.py")
    assert list(tmp_path.iterdir()) == []


def test_the_zygote_runs_alone_by_path_and_loads_the_shim_beside_it(tmp_path):
    """zygote.py is started as `python -I -S zygote.py SOCKET` (no script directory on
    sys.path, no site-packages): it loads shim.py by path, nothing of ce; `--help` is
    its usage, not a socket."""
    from ce_runtime.execute.sandbox.tempdir import ZYGOTE

    probe = ("import runpy, sys\n"
             f"sys.argv = [{ZYGOTE!r}, '--help']\n"
             "try:\n"
             f"    runpy.run_path({ZYGOTE!r}, run_name='__main__')\n"
             "except SystemExit as done:\n"
             "    print(done.code, sorted(m for m in sys.modules if m.startswith('ce')))\n")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", probe], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == "2 ['ce_shim']", proc.stderr
    assert proc.stderr.startswith("usage: zygote.py")
    assert list(tmp_path.iterdir()) == []


def test_the_run_client_runs_alone_by_path(tmp_path):
    """run_client.py runs as `python -I -S run_client.py SOCKET REQUEST` on the host:
    nothing of ce loaded; a wrong call is its usage, exit 2, never a socket."""
    from ce_runtime.execute.sandbox.supervised import RUN_CLIENT

    proc = subprocess.run([sys.executable, "-I", "-S", RUN_CLIENT, "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: run_client.py")
    assert list(tmp_path.iterdir()) == []


def test_a_fork_cancelled_while_its_pipe_opens_closes_the_pipe_once(tmp_path):
    """SIGTERM or Ctrl-C cancels a trial while the zygote's answer pipe is being wired up:
    the pipe's transport closes it, and nothing else closes that descriptor (it did: an
    'OSError: [Errno 9] Bad file descriptor' traceback in the run's output, or worse a
    descriptor opened meanwhile closed under its owner)."""
    import asyncio

    from ce_runtime.execute.sandbox.tempdir import _Zygote

    async def scenario():
        loop = asyncio.get_running_loop()
        problems = []
        loop.set_exception_handler(lambda _loop, ctx: problems.append(ctx))
        zygote = _Zygote()
        try:
            zygote.prestart(str(tmp_path))
            await zygote.starting
            requested = zygote.request(str(tmp_path / "ctl.sock"))
            read_end = requested[0]
            task = asyncio.ensure_future(zygote.fork(str(tmp_path / "ctl.sock"),
                                                     str(tmp_path), requested))
            await asyncio.sleep(0)  # inside connect_read_pipe, awaiting its transport
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # a descriptor opened now may take the number the pipe had
            reused = os.open(os.devnull, os.O_RDONLY)
            for _ in range(5):  # the transport's close runs in a callback
                await asyncio.sleep(0)
            alive = True
            try:
                os.fstat(reused)
            except OSError:
                alive = False
            os.close(reused) if alive else None
        finally:
            await zygote.close()
        return problems, alive, reused == read_end

    problems, alive, same_number = asyncio.run(scenario())
    assert problems == []
    assert alive, f"a descriptor opened after the cancel was closed (same number: {same_number})"
