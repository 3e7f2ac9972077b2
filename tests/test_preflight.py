"""Pre-flight (issue 15): everything knowable before a trial starts is said by `ce compile`
and by `ce run` before any sandbox is set up, with nothing run and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CE = [sys.executable, "-m", "ce_runtime.cli"]


def ce(*args, cwd=None, env=None, drop=()):
    full = {**os.environ, "CE_PLAIN": "1", **(env or {})}
    for name in drop:
        full.pop(name, None)
    return subprocess.run([*CE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full, timeout=600)


def test_script_actions_mirror_the_script_player():
    from ce_agents.script import ACTIONS
    from ce_lang.rules_preflight import SCRIPT_ACTIONS

    assert SCRIPT_ACTIONS == ACTIONS
