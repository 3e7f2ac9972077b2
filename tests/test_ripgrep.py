"""ce's ripgrep for OpenCode and Pi (ce_runtime/execute/sandbox/ripgrep.py): what a run
says when it cannot have one, the launcher the agents run, and the fd Pi's find tool
runs on it (ce_agents/pi.py FD). The download itself and the agents searching with it:
tests/test_agents_real.py (CI installs it with the agents)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ce_agents.cli_agent import exec_script
from ce_agents.pi import FD
from ce_runtime.execute.sandbox import ripgrep, tools

NEEDED_BY = "OpenCode's glob, grep and skill tools"


def test_no_ripgrep_anywhere_is_said_with_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(ripgrep, "VERSION", "0.0.0.dev404")  # a release pip cannot find
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # and no rg on PATH
    said = []
    with pytest.raises(ripgrep.RipgrepMissing) as err:
        ripgrep.ensure(str(tmp_path / "agent"), said.append, NEEDED_BY)
    why = str(err.value)
    assert why.startswith("OpenCode's glob, grep and skill tools need ripgrep, and pip "
                          "download ripgrep==0.0.0.dev404 failed: "), why
    assert why.endswith("install it (`apt install ripgrep`, `pip install ripgrep`) so "
                        "that `rg` is on PATH"), why
    assert said == ["installing ripgrep for OpenCode's glob, grep and skill tools: "
                    "ripgrep==0.0.0.dev404 (pip) ..."]
    assert not os.path.exists(ripgrep.bundled(str(tmp_path / "agent")))


def test_a_failed_download_falls_back_to_the_hosts_rg(tmp_path, monkeypatch):
    monkeypatch.setattr(ripgrep, "VERSION", "0.0.0.dev404")
    host = tmp_path / "bin"
    host.mkdir()
    (host / "rg").write_text("#!/bin/sh\necho host-rg \"$@\"\n")
    (host / "rg").chmod(0o755)
    monkeypatch.setenv("PATH", str(host))
    said = []
    assert ripgrep.ensure(str(tmp_path / "agent"), said.append, NEEDED_BY) == str(host / "rg")
    assert said[-1].startswith("ripgrep not installed (pip download ripgrep==0.0.0.dev404 "
                               "failed: ") and said[-1].endswith(
        f"OpenCode's glob, grep and skill tools will use the host's {host / 'rg'}"), said


def test_the_launcher_runs_rg_with_every_argument_intact(tmp_path):
    rg = tmp_path / "dir with space" / "rg"
    rg.parent.mkdir()
    rg.write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n")
    rg.chmod(0o755)
    launcher = tmp_path / "launcher"
    launcher.write_bytes(exec_script(str(rg)))
    launcher.chmod(0o755)
    out = subprocess.run([str(launcher), "--glob=*.txt", "a b", "$HOME"], capture_output=True,
                         text=True, timeout=30)
    assert out.stdout == "[--glob=*.txt]\n[a b]\n[$HOME]\n"


def test_a_wheel_without_rg_for_this_machine_is_said_and_nothing_installed(tmp_path,
                                                                           monkeypatch):
    """pip finds a ripgrep wheel (here a local one) that holds no rg: said as why, with
    no file left where ce's rg goes."""
    import zipfile

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "ripgrep-0.0.1-py3-none-any.whl", "w") as z:
        z.writestr("ripgrep-0.0.1.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: ripgrep\nVersion: 0.0.1\n")
        z.writestr("ripgrep-0.0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\n"
                   "Root-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("ripgrep-0.0.1.dist-info/RECORD", "")
    monkeypatch.setattr(ripgrep, "VERSION", "0.0.1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    dest = tmp_path / "agent" / "ce-ripgrep" / "rg"
    assert ripgrep._install(str(dest)) == \
        "ripgrep-0.0.1-py3-none-any.whl has no rg for this machine"
    assert not dest.exists() and not dest.with_name("rg.partial").exists()


def test_pi_s_fd_lists_the_files_fd_would_with_ce_s_rg(tmp_path):
    """Pi's find tool runs `fd` (Pi's own copy, else PATH's), which no registry ships: ce
    gives it one that answers Pi's fd command with ce's rg. Run as Pi runs it: the files
    the ignore files keep (.gitignore without a git repository, .git itself left out, as
    fd 9+), matched by name at any depth in any case unless the pattern has a capital
    (fd's smart case), by path below the search directory with --full-path, at most
    --max-results; a search path that is no directory fails as fd's."""
    rg = ripgrep.find(tools.agent_dir("pi"))
    if rg is None:
        pytest.skip("no rg: ce agents install pi")
    fd = tmp_path / "bin" / "fd"
    fd.parent.mkdir()
    fd.write_text(FD.replace("@RG@", rg))
    fd.chmod(0o755)
    ws = tmp_path / "ws"
    for name in ("src/found.txt", "src/sub/deep.ts", "README.TXT", ".hidden/h.txt",
                 "node_modules/m/ignored.txt", ".git/HEAD.txt", "top.txt"):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("x\n")
    (ws / ".gitignore").write_text("node_modules\n")

    def run(*args: str, path: Path = ws) -> tuple[int, set[str], str]:
        """fd's exit status, the paths it printed (below `path`), its stderr: `args` are
        Pi's options and, last, the pattern."""
        out = subprocess.run([str(fd), "--glob", "--color=never", "--hidden",
                              "--no-require-git", *args[:-1], "--", args[-1], str(path)],
                             capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
        return out.returncode, {line.removeprefix(f"{path}/") for line in
                                out.stdout.splitlines()}, out.stderr

    assert run("--max-results", "1000", "*.txt") == (
        0, {"src/found.txt", "README.TXT", ".hidden/h.txt", "top.txt"}, "")
    assert run("*.TXT") == (0, {"README.TXT"}, "")
    assert run("--full-path", "**/src/**/*.ts") == (0, {"src/sub/deep.ts"}, "")
    assert run("--full-path", f"{ws}/src/*.txt") == (0, {"src/found.txt"}, "")
    assert run("*.txt", path=ws / "src") == (0, {"found.txt"}, "")
    assert run("nothing*") == (0, set(), "")
    code, found, _ = run("--max-results", "2", "*.txt")
    assert code == 0 and len(found) == 2
    code, found, err = run("*.txt", path=ws / "absent")
    assert code == 1 and found == set() and "is not a directory" in err
