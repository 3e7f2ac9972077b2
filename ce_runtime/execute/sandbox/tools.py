"""Agent CLIs from npm, installed by ce into its cache (pinned versions) and made visible,
read-only, inside the sandboxes that run them.

    ~/.cache/ce/agents/<name>-<version>/node_modules/.bin/<bin>

Installed on first use (a progress line says so) or by `ce agents install`; a missing
node/npm, or a package that cannot be installed, is reported before any trial starts.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable

# agent type -> (npm package, pinned version, the binary it installs)
NPM_AGENTS: dict[str, tuple[str, str, str]] = {
    "codex": ("@openai/codex", "0.171.0", "codex"),
    "opencode": ("opencode-ai", "1.18.33", "opencode"),
    "pi": ("@mariozechner/pi-coding-agent", "0.73.1", "pi"),
}
INSTALL_TIMEOUT = 900
# agents whose tools run ripgrep, and download it when it is missing (sandbox/ripgrep.py):
# agent -> what runs it
NEEDS_RIPGREP: dict[str, str] = {"opencode": "OpenCode's glob, grep and skill tools",
                                 "pi": "Pi's grep and find tools"}
# agents whose npm binary is a node launcher of a native program shipped for the
# machine: the program itself runs where there is no node (a docker image) and spares a
# process everywhere. machine -> its path under node_modules
NATIVE: dict[str, dict[str, str]] = {
    "codex": {"x86_64": "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
              "aarch64": "@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/"
                         "codex"},
}


class ToolError(Exception):
    pass


def cache_root() -> str:
    from ce_lang.api import ce_cache

    return ce_cache("agents")


def agent_dir(name: str) -> str:
    version = NPM_AGENTS[name][1]
    return os.path.join(cache_root(), f"{name}-{version}")


def binary(name: str) -> str:
    return os.path.join(agent_dir(name), "node_modules", ".bin", NPM_AGENTS[name][2])


def executable(name: str) -> str:
    """What runs the agent: the native program its package ships for this machine, if
    any (see NATIVE), else its npm binary."""
    native = NATIVE.get(name, {}).get(os.uname().machine)
    if native is not None:
        path = os.path.join(agent_dir(name), "node_modules", native)
        if os.access(path, os.X_OK):
            return path
    return binary(name)


def request_tools(name: str) -> dict[str, str]:
    """What the agent's adapter is given (AgentRequest.tools): its CLI, and the helper
    programs its tools run (OpenCode's and Pi's `rg`, ripgrep.py), as host paths."""
    if name not in NPM_AGENTS:
        return {}
    out = {name: executable(name)}
    if name in NEEDS_RIPGREP:
        from ce_runtime.execute.sandbox import ripgrep

        rg = ripgrep.find(agent_dir(name))
        if rg is not None:
            out["rg"] = rg
    return out


def node_missing(name: str) -> str | None:
    """Why the installed agent cannot start on this machine: an npm binary (no native
    program for it) is a node script, and without node on PATH each trial ended ERROR
    ('pi exited 127: ... node: No such file') instead of the run being refused."""
    if executable(name) != binary(name) or shutil.which("node") is not None:
        return None
    return (f"the {name} agent runs on node, and there is no `node` on PATH (install "
            "Node.js, or put it on PATH)")


def installed(name: str) -> str | None:
    path = binary(name)
    return path if os.path.exists(path) else None


def install(name: str, say: Callable[[str], None] = lambda _: None) -> str:
    """The agent's binary, installed first if it is not (one installer at a time)."""
    if name not in NPM_AGENTS:
        raise ToolError(f"{name} is not an npm agent (those are: {', '.join(NPM_AGENTS)})")
    package, version, _ = NPM_AGENTS[name]
    if installed(name) and _extras_ready(name):
        return binary(name)
    os.makedirs(cache_root(), exist_ok=True)
    with open(os.path.join(cache_root(), ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed(name):
            _npm_install(name, say)
        if name in NEEDS_RIPGREP:
            from ce_runtime.execute.sandbox import ripgrep

            try:
                ripgrep.ensure(agent_dir(name), say, NEEDS_RIPGREP[name])
            except ripgrep.RipgrepMissing as exc:
                raise ToolError(str(exc)) from None
    if not installed(name):
        raise ToolError(f"{package}@{version} installed no `{NPM_AGENTS[name][2]}` binary")
    return binary(name)


def _extras_ready(name: str) -> bool:
    """What the agent needs besides its package is there (OpenCode, Pi: an rg)."""
    if name not in NEEDS_RIPGREP:
        return True
    from ce_runtime.execute.sandbox import ripgrep

    return ripgrep.find(agent_dir(name)) is not None


def _npm_install(name: str, say: Callable[[str], None]) -> None:
    """npm installs the agent's pinned package into its directory (under the lock)."""
    package, version, _ = NPM_AGENTS[name]
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise ToolError(f"the {name} agent needs node and npm on PATH (to install "
                        f"{package}@{version})")
    target = agent_dir(name)
    staging = target + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    say(f"installing the {name} agent: {package}@{version} (npm) into {target} ...")
    try:
        res = subprocess.run([npm, "install", "--prefix", staging, "--no-audit",
                              "--no-fund", "--loglevel=error", f"{package}@{version}"],
                             capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ToolError(f"npm install {package}@{version} timed out") from None
    if res.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = (res.stderr or res.stdout).strip()[-1500:]
        raise ToolError(f"npm install {package}@{version} failed: {tail}")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
