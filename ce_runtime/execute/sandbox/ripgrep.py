"""ripgrep for OpenCode and Pi. OpenCode's glob and grep tools (and its skill tool, which
lists a skill's files) run `rg`. OpenCode takes the one on PATH, else its own copy in its
cache directory ($XDG_CACHE_HOME/opencode/bin), else downloads one from GitHub at the
first search: in ce's sandbox (no network but the model's) that download fails, and
every glob and grep call answered "ripgrep execution failed", measured with OpenCode
1.18.33 on a machine without `rg`. An agent benchmarked with its search tools broken
scores lower than it is. Pi's grep tool is the same (its copy in $PI_CODING_AGENT_DIR/bin
first, then PATH; offline it downloads none: "ripgrep (rg) is not available and could
not be downloaded"), and its find tool runs fd, which ce gives it on this rg
(ce_agents/pi.py).

So ce installs a pinned ripgrep beside each of them (the `ripgrep` wheel from PyPI,
through pip and its configured index: nothing else of the network is needed); the
adapter gets its path (AgentRequest.tools["rg"]) and puts a launcher of it where the
agent looks for its own copy (ce_agents.cli_agent.exec_script).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable

PACKAGE, VERSION = "ripgrep", "14.1.0"
DOWNLOAD_TIMEOUT = 600


def bundled(agent_dir: str) -> str:
    """Where ce keeps the rg it installs for the agent in `agent_dir`."""
    return os.path.join(agent_dir, "ce-ripgrep", "rg")


def find(agent_dir: str) -> str | None:
    """The rg the agent gets: ce's (pinned), else the host's on PATH; None: neither."""
    path = bundled(agent_dir)
    return path if os.access(path, os.X_OK) else shutil.which("rg")


def ensure(agent_dir: str, say: Callable[[str], None], needed_by: str) -> str:
    """The rg for the agent in `agent_dir`, installed first when there is none (the
    caller holds the install lock); `needed_by` says what runs it ("OpenCode's glob, grep
    and skill tools"). A failed install is an error only when the host has no rg on PATH
    either."""
    path = bundled(agent_dir)
    if os.access(path, os.X_OK):
        return path
    say(f"installing ripgrep for {needed_by}: {PACKAGE}=={VERSION} (pip) ...")
    why = _install(path)
    if why is None:
        return path
    host = shutil.which("rg")
    if host is not None:
        say(f"ripgrep not installed ({why}); {needed_by} will use the host's {host}")
        return host
    raise RipgrepMissing(
        f"{needed_by} need ripgrep, and {why}: install it "
        "(`apt install ripgrep`, `pip install ripgrep`) so that `rg` is on PATH")


class RipgrepMissing(Exception):
    pass


def _install(dest: str) -> str | None:
    """Download the wheel with pip and keep its `rg`; why it failed, or None."""
    with tempfile.TemporaryDirectory(prefix="ce-ripgrep-") as tmp:
        try:
            res = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--no-deps",
                 "--disable-pip-version-check", "-q", "-d", tmp, f"{PACKAGE}=={VERSION}"],
                capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT,
                stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"pip download {PACKAGE}=={VERSION} timed out"
        if res.returncode != 0:
            tail = " ".join((res.stderr or res.stdout).split())[-400:]
            return f"pip download {PACKAGE}=={VERSION} failed: {tail or 'no output'}"
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if not wheels:
            return f"pip download {PACKAGE}=={VERSION} saved no wheel"
        try:
            with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as wheel:
                member = next((m for m in wheel.namelist()
                               if m.endswith(".data/scripts/rg")), None)
                if member is None:
                    return f"{wheels[0]} has no rg for this machine"
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                staging = dest + ".partial"
                with wheel.open(member) as src, open(staging, "wb") as out:
                    shutil.copyfileobj(src, out)
            os.chmod(staging, 0o755)
            os.replace(staging, dest)
        except (zipfile.BadZipFile, OSError) as exc:  # a damaged download, a full disk
            return f"{wheels[0]} could not be unpacked ({exc})"
    return None
