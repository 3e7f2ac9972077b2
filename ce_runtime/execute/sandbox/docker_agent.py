"""What an agent's own CLI needs from a docker container (mixed into DockerSandbox): its
executable made visible in the container, a launcher the agent's SDK spawns as the CLI,
the model endpoint forwarded in, and spawned commands that die in the container when
they are killed.

The host's CLI (the one claude-agent-sdk bundles; a native npm agent such as Codex's) is
linked into the read-only /run/ce/bin: the image needs the libraries it links (glibc for
Claude Code's; Codex's is static). The model endpoint: ce's forwarder (the shim, run by
the image's python3) listens on the container's 127.0.0.1:MODEL_PORT and connects to a
unix socket in /run/ce, which ce relays to the model server on the host: the container
reaches its model and nothing else of the host, whatever its network.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

from ce_runtime.execute.sandbox.base import SandboxError, launcher_names

INNER_CE = "/run/ce"  # read-only: the shim (model forwarding), uv, agents' executables
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MODEL_PORT = 8080
FORWARDER_READY_S = 30.0
# a host executable that runs an agent's CLI in the container with its own stdio (the
# SDK spawns it as the CLI): `docker exec -i`, the variables named in `forward` (and the
# SDK's CLAUDE_CODE_* / CLAUDE_AGENT_SDK* ones that do not look like secrets) passed by
# name from the launcher's environment, so no value handed over at spawn sits in a file
# or on a command line; in a session of its own, as every docker client ce starts (see
# run_client.run_client: a SIGINT to ce's process group must not end the agent)
LAUNCHER = """#!{python} -IS
import json, os, re, sys
args, at = json.loads({args}), {at}
{names}args[at:at] = [a for name in names for a in ("-e", name)]
try:
    os.setsid()
except OSError:
    pass
os.execv({docker!r}, [{docker!r}, *args, *sys.argv[1:]])
"""


def docker_bin() -> str | None:
    return shutil.which("docker")


def place(host_path: str, dest: str, cache: str | None) -> None:
    """`host_path` at `dest` (in a directory mounted read-only in the container): a hard
    link, or, from another file system, a hard link to one copy made in `cache` for the
    whole run: Claude Code's CLI is 400 MB and uv 38 MB, and a copy per trial filled a
    tmpfs /tmp at -j 8."""
    real = os.path.realpath(host_path)
    try:
        os.link(real, dest)
        return
    except OSError:
        if cache is None:
            shutil.copy2(real, dest)
            return
    st = os.stat(real)
    os.makedirs(cache, exist_ok=True)
    copy = os.path.join(cache, f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}-"
                               f"{os.path.basename(real)}")
    if not os.path.exists(copy):
        part = f"{copy}.{os.getpid()}-{os.urandom(4).hex()}.part"
        shutil.copy2(real, part)
        os.replace(part, copy)  # trials racing for it each rename a whole copy
    try:
        os.link(copy, dest)
    except OSError:  # no hard links on this file system
        shutil.copy2(copy, dest)


class AgentOps:
    """DockerSandbox's side for agents (uses its name, spec, ce_dir, _exec_args, _python3
    and _pids; the forwarder is ce's, spared when the agent's processes are killed)."""

    def launcher(self, argv: Sequence[str], env: dict[str, str], forward: Sequence[str] = (),
                 cwd: str | None = None) -> str:
        """A host executable running `argv + its own arguments` in the container with its
        own stdio (see supervised.launcher). argv[0], a host executable (the CLI the SDK
        bundles), is made visible at /run/ce/bin: the image needs the libraries it links
        (glibc for Claude Code's)."""
        inner = [self._expose(argv[0]), *argv[1:]]
        args, _ = self._exec_args(inner, cwd, env, True)
        path = os.path.join(self.spec.scratch, f"launch-{os.urandom(4).hex()}")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(LAUNCHER.format(python=os.path.realpath(sys.executable),
                                     args=json.dumps(json.dumps(args)),
                                     at=args.index(self.name),
                                     names=launcher_names(forward),
                                     docker=docker_bin() or "docker"))
        os.chmod(path, 0o700)
        return path

    def _expose(self, host_path: str) -> str:
        """A host file, linked (or copied) into the read-only /run/ce/bin."""
        bin_dir = os.path.join(self.ce_dir, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        dest = os.path.join(bin_dir, f"{len(os.listdir(bin_dir))}-{os.path.basename(host_path)}")
        place(host_path, dest, self.spec.host_files)
        return f"{INNER_CE}/bin/{os.path.basename(dest)}"

    def program(self, host_path: str) -> str:
        """A host executable as the container runs it (an interpreter an agent's CLI
        needs that the image may lack: node for pi), under /run/ce/bin."""
        return self._expose(host_path)

    def share(self, host_path: str) -> str:
        """A copy of a host file or directory the agent may read (plugins), as the
        container sees it (under the read-only /run/ce)."""
        shared = os.path.join(self.ce_dir, "shared")
        os.makedirs(shared, exist_ok=True)
        name = f"{len(os.listdir(shared))}-{os.path.basename(host_path)}"
        if os.path.isdir(host_path):
            shutil.copytree(host_path, os.path.join(shared, name), symlinks=True)
        else:
            shutil.copy2(host_path, os.path.join(shared, name))
        return f"{INNER_CE}/shared/{name}"

    async def route_model(self, host: str, port: int) -> str:
        """The container's 127.0.0.1:MODEL_PORT, forwarded (by the shim, run by the
        image's python3) to a unix socket in /run/ce that ce relays to host:port: the
        container reaches its model and nothing else of the host, whatever its network."""
        if self.spec.network == "none":
            raise SandboxError("the agent needs its model endpoint, and `sandbox.network` "
                               "is none: set it to `model`")
        if self._forwarder is None:
            from ce_runtime.execute.sandbox.model_route import serve_unix_to_tcp

            sock = os.path.join(self.ce_dir, "model.sock")
            self._model_server = await serve_unix_to_tcp(sock, host, port)
            python = (await self._python3()).split()[0]
            if not python.startswith("/"):
                raise SandboxError("the model endpoint is forwarded into the container by "
                                   "ce's forwarder, which needs python3 in the image")
            before = set(await self._pids())
            args, _ = self._exec_args([python, "-I", f"{INNER_CE}/shim.py", "--forward",
                                       str(MODEL_PORT), f"{INNER_CE}/model.sock"], None,
                                      {"PATH": BASE_PATH}, False)
            self._forwarder = await asyncio.create_subprocess_exec(
                docker_bin() or "docker", *args, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True)
            try:
                line = await asyncio.wait_for(self._forwarder.stdout.readline(),
                                              FORWARDER_READY_S)
            except TimeoutError:
                line = b""
            if line.strip() != b"ready":
                err = b""
                with contextlib.suppress(TimeoutError):
                    err = await asyncio.wait_for(self._forwarder.stderr.read(), 5)
                await self._stop_forwarding()
                raise SandboxError("ce's model forwarder did not start in the container: "
                                   f"{err.decode('utf-8', 'replace').strip()[-500:]}")
            # ce's, not the agent's: spared when the agent's processes are killed
            forwarder = set(await self._pids()) - before
            self._base |= forwarder
            self._before_agent |= forwarder
        return f"http://127.0.0.1:{MODEL_PORT}"

    async def _stop_forwarding(self) -> None:
        if self._forwarder is not None:
            with contextlib.suppress(ProcessLookupError):
                self._forwarder.kill()
            await self._forwarder.wait()
            self._forwarder = None
        if self._model_server is not None:
            self._model_server.close()
            self._model_server = None


class InContainer:
    """A spawned command: the `docker exec` client's process, whose terminate and kill
    reach the command in the container too (the client's death alone leaves it running
    there, to be counted among what the agent left behind)."""

    def __init__(self, proc: asyncio.subprocess.Process, box: Any, ident: str):
        self._proc, self._box, self._ident = proc, box, ident
        self._signals: set[asyncio.Future] = set()

    def __getattr__(self, name: str) -> Any:  # stdin, stdout, wait(), returncode, pid ...
        return getattr(self._proc, name)

    def terminate(self) -> None:
        self._send("TERM")

    def kill(self) -> None:
        self._send("KILL")

    def _send(self, sig: str) -> None:
        if self._proc.returncode is not None:
            raise ProcessLookupError
        task = asyncio.ensure_future(self._signal(sig))
        self._signals.add(task)  # kept until done
        task.add_done_callback(self._signals.discard)

    async def _signal(self, sig: str) -> None:
        await self._box._signal_exec(self._ident, sig)
        with contextlib.suppress(ProcessLookupError):  # whatever became of the command
            self._proc.kill()
