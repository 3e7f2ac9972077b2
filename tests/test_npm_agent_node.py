"""An npm agent whose binary is a node script (pi, opencode) needs node on PATH: without it
`ce run` is refused before any trial, naming it. Each trial ended ERROR ('pi exited 127:
... node: No such file') instead. codex runs its native program and needs no node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ce_runtime.execute.sandbox import tools

ROOT = Path(__file__).resolve().parent.parent


def test_a_node_script_agent_needs_node_a_native_one_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    native = tools.NATIVE["codex"].get(os.uname().machine)
    if native is not None:  # the machine codex ships a program for: it is installed
        program = Path(tools.agent_dir("codex")) / "node_modules" / native
        program.parent.mkdir(parents=True)
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert tools.node_missing("pi") == (
        "the pi agent runs on node, and there is no `node` on PATH (install Node.js, or "
        "put it on PATH)")
    assert tools.node_missing("opencode") is not None
    if native is not None:
        assert tools.node_missing("codex") is None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "node").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "node").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert tools.node_missing("pi") is None


@pytest.mark.slow  # installs pi from npm when it is not installed yet
def test_ce_run_refuses_a_pi_run_without_node_before_any_trial(tmp_path):
    """Through `ce run`'s preflight (the agent installed already, as `ce agents install`
    leaves it; with none installed the install itself says node and npm are needed)."""
    if not tools.installed("pi"):
        tools.install("pi")
    for name in ("hello_world.yaml", "hello_world.pi.model.yaml"):
        (tmp_path / name).write_text((ROOT / "tasks" / name).read_text())
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "hello_world.yaml",
                          "--agent", "pi", "--scripted-model", "--runs-root", "runs"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "ce run: the pi agent runs on node, and there is no `node` on PATH (install " \
        "Node.js, or put it on PATH) (1 trial(s): default/hello_world/00)" in res.stderr
    assert "nothing was run" in res.stderr and not (tmp_path / "runs").exists()
