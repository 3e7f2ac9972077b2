"""`driver: docker`: one container per trial, through the docker CLI.

The container runs the task's image (`sandbox.docker.image`, or one built from
`dockerfile_path`) with no capability, `no-new-privileges`, an init that reaps, the
workspace bind-mounted at `/workspace` (or `docker.working_dir`), no network unless the
task asks (`network: full` / `docker.network: bridge`), and `sandbox.limits` as
`--memory`, `--pids-limit` and `--cpus`. Nothing of the host is mounted but the
workspace and, for grader commands, the task directory and the reference, behind a
directory that is unreadable while the agent runs (as under bwrap). Host variables reach
the container only by name through `docker.env_passthrough` / `env_passthrough_extra`
(or `sandbox.env_passthrough`), never a secret-looking one.

Set-up: template sources are copied on the host into the bind-mounted workspace; the
venv is made inside the container with the host's `uv` binary (mounted read-only: the
image needs glibc and python3); a container that must stay offline is started on the
bridge network for set-up and disconnected before pre_run. Every command is `docker
exec`; a timed-out or cancelled one is killed with its process group inside the
container; teardown removes the container and everything in it. An agent's own CLI
(Claude Code, Codex) runs in the container too: docker_agent.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

from ce_runtime.execute.sandbox.base import (
    AGENT,
    GRADER,
    INNER_GRADER,
    CommandOutput,
    Enforcement,
    ExecResult,
    FileOps,
    SandboxError,
    SandboxSpec,
    agent_path,
    grader_mounts,
    grader_reference_dir,
    host_env_passthrough,
    shell_argv,
)
from ce_runtime.execute.sandbox.docker_agent import (
    BASE_PATH,
    INNER_CE,
    AgentOps,
    docker_bin,
    place,
)

DEFAULT_IMAGE = "python:3.12-slim"
INNER_WORKSPACE = "/workspace"
PIDS = "/tmp/.ce-pids"
KEEPER = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"
DOCKER_TIMEOUT = 120


@functools.cache
def _probe() -> str | None:
    docker = docker_bin()
    if docker is None:
        return "the docker CLI is not installed"
    try:
        res = subprocess.run([docker, "version", "--format", "{{.Server.Version}}"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"docker does not answer: {exc}"
    if res.returncode != 0 or not res.stdout.strip():
        why = (res.stderr.strip().splitlines() or ["no server version"])[-1]
        return f"no docker engine answers ({why}); start dockerd or set DOCKER_HOST"
    return None


_BUILD_LOCK = threading.Lock()
_BUILT: dict[tuple[str, str], str] = {}


class DockerSandbox(AgentOps, FileOps):
    driver = "docker"

    @staticmethod
    def unavailable(boxes=None) -> str | None:
        why = _probe()
        if why or not boxes:
            return why
        missing = set()
        for box in boxes:
            cfg = box.docker
            if cfg is not None and cfg.dockerfile_path:
                continue  # built before its trial
            image = (cfg.image if cfg is not None and cfg.image else DEFAULT_IMAGE)
            res = subprocess.run([docker_bin(), "image", "inspect", image],
                                 capture_output=True, text=True, timeout=60)
            if res.returncode != 0:
                missing.add(image)
        if missing:
            return (f"image(s) not available locally: {', '.join(sorted(missing))} (ce does "
                    "not pull: `docker pull` or `docker build` them first)")
        return None

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        cfg = spec.docker
        self.cfg = cfg
        self.workspace = spec.workspace or os.path.join(spec.scratch, "ws")
        self.inner_workspace = (cfg.working_dir if cfg is not None and cfg.working_dir
                                else INNER_WORKSPACE)
        self.grader_dir = os.path.join(spec.scratch, "grader")
        self.ce_dir = os.path.join(spec.scratch, "ce")
        for d in (self.workspace, os.path.join(self.grader_dir, "task"), self.ce_dir):
            os.makedirs(d, exist_ok=True)
        self.name = f"ce-{os.getpid()}-{os.urandom(4).hex()}"
        self.container: str | None = None
        self._ids = 0
        self._before_agent: set[int] = set()
        self._base: set[int] = set()  # host pids of the container's own processes
        self._refs = grader_mounts(spec, self.grader_dir)
        self._model_server: asyncio.AbstractServer | None = None
        self._forwarder: asyncio.subprocess.Process | None = None
        self.enforcement = self._enforcement()

    # -- facts --------------------------------------------------------------------------
    def _enforcement(self) -> Enforcement:
        lim = self.spec.limits
        applied = {}
        if lim.memory_mb is not None:
            applied["max_memory_mb"] = "docker --memory"
        if lim.pids is not None:
            applied["max_pids"] = "docker --pids-limit"
        if lim.cpus is not None:
            applied["max_cpus"] = "docker --cpus"
        missing = ("max_disk_mb: not enforced by the docker driver",) \
            if lim.disk_mb is not None else ()
        net = {"none": "none (--network none)", "full": "bridge (full network)",
               "model": "model endpoint only (forwarded by ce)"}[self.spec.network]
        return Enforcement("docker", f"container ({self.image_hint()}): no capabilities, "
                           "no-new-privileges, only the workspace mounted", net, applied,
                           missing)

    def image_hint(self) -> str:
        if self.cfg is not None and self.cfg.dockerfile_path:
            return f"built from {self.cfg.dockerfile_path}"
        return self.cfg.image if self.cfg is not None and self.cfg.image else DEFAULT_IMAGE

    # -- docker CLI ---------------------------------------------------------------------
    async def _docker(self, *args: str, timeout: float = DOCKER_TIMEOUT,
                      stdin: bytes | None = None, check: bool = True) -> tuple[int, str, str]:
        docker = docker_bin()
        if docker is None:
            raise SandboxError("the docker CLI is not installed")
        proc = await asyncio.create_subprocess_exec(
            docker, *args, stdin=asyncio.subprocess.PIPE if stdin is not None else
            asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise SandboxError(f"`docker {args[0]}` timed out after {timeout:g} s") from None
        text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        if check and proc.returncode != 0:
            raise SandboxError(f"`docker {' '.join(args[:2])}` failed: "
                               f"{text_err.strip()[-1500:] or text_out.strip()[-500:]}")
        return proc.returncode or 0, text_out, text_err

    async def _image(self) -> str:
        cfg = self.cfg
        if cfg is None or not cfg.dockerfile_path:
            return cfg.image if cfg is not None and cfg.image else DEFAULT_IMAGE
        dockerfile = os.path.normpath(os.path.join(self.spec.task_dir, cfg.dockerfile_path))
        digest = _file_digest(dockerfile)
        key = (dockerfile, digest)
        with _BUILD_LOCK:
            if key in _BUILT:
                return _BUILT[key]
        tag = f"ce-task-{re.sub(r'[^a-z0-9_.-]', '-', os.path.basename(os.path.dirname(dockerfile)).lower())}:{digest[:12]}"
        args = ["build", "-f", dockerfile, "-t", tag]
        for k, v in sorted(cfg.build.args.items()):
            args += ["--build-arg", f"{k}={os.path.expandvars(v)}"]
        for s in cfg.build.secrets:
            args += ["--secret", s]
        args += list(cfg.build.extra_args)
        args.append(os.path.dirname(dockerfile))
        env_note = ""
        if cfg.build.buildkit is not None:
            os.environ["DOCKER_BUILDKIT"] = "1" if cfg.build.buildkit else "0"
            env_note = f" (DOCKER_BUILDKIT={os.environ['DOCKER_BUILDKIT']})"
        try:
            await self._docker(*args, timeout=1800)
        except SandboxError as exc:
            raise SandboxError(f"building {cfg.dockerfile_path}{env_note}: {exc}") from None
        with _BUILD_LOCK:
            _BUILT[key] = tag
        return tag

    # -- life cycle ---------------------------------------------------------------------
    async def start(self) -> None:
        why = _probe()
        if why:
            raise SandboxError(why)
        image = await self._image()
        from ce_runtime.execute.sandbox.supervised import SHIM

        shutil.copyfile(SHIM, os.path.join(self.ce_dir, "shim.py"))
        uv = _uv()
        if uv:
            place(uv, os.path.join(self.ce_dir, "uv"), self.spec.host_files)
        network = "bridge" if self.spec.network == "full" or self.spec.setup_network \
            else "none"
        args = ["run", "-d", "--name", self.name, "--init", "--label", f"ce.pid={os.getpid()}",
                "--network", network, "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--hostname", "ce-sandbox",
                "--user", f"{os.getuid()}:{os.getgid()}",
                "-v", f"{self.workspace}:{self.inner_workspace}",
                "-v", f"{self.grader_dir}:{INNER_GRADER}:ro",
                "-v", f"{self.spec.task_dir or self.grader_dir}:{INNER_GRADER}/task:ro",
                "-v", f"{self.ce_dir}:{INNER_CE}:ro",
                "-w", self.inner_workspace]
        for host, inner in self._refs:
            args += ["-v", f"{host}:{inner}:ro"]
        from ce_runtime.execute.sandbox.tools import cache_root

        if os.path.isdir(cache_root()):  # the npm agents ce installed, where the host has them
            args += ["-v", f"{cache_root()}:{cache_root()}:ro"]
        for mount in (self.cfg.extra_mounts if self.cfg is not None else ()):
            args += ["-v", mount]
        lim = self.spec.limits
        if lim.memory_mb is not None:
            args += ["--memory", f"{lim.memory_mb}m", "--memory-swap", f"{lim.memory_mb}m"]
        if lim.pids is not None:
            args += ["--pids-limit", str(lim.pids)]
        if lim.cpus is not None:
            args += ["--cpus", str(lim.cpus)]
        if network == "bridge":
            args += ["--add-host", "host.docker.internal:host-gateway"]
        args += [image, "sh", "-c", KEEPER]
        _, out, _ = await self._docker(*args)
        self.container = out.strip() or self.name
        await self._docker("exec", self.name, "mkdir", "-p", PIDS, "/tmp/home")
        self._base = set(await self._pids())  # its init, the keep-alive loop, its sleep

    async def prepare(self, plan: Any, cancel: threading.Event | None = None,
                      sources: bool = True):
        """Template sources on the host; the venv and node packages in the container."""
        from ce_runtime.execute.sandbox.workspace import SetupResult, apply_sources

        started = time.monotonic()
        log: list[str] = []
        interpreter = await self._python3() if sources and plan.sandbox.record_cli else None
        error = await asyncio.to_thread(apply_sources, plan, self.spec.task_dir,
                                        self.workspace, log, interpreter) if sources else None
        if error is None:
            error = await self._environments(plan, log)
        if self.spec.network != "full" and self.spec.setup_network:
            # online for the package downloads only: offline from pre_run on
            code, _, err = await self._docker("network", "disconnect", "-f", "bridge",
                                              self.name, check=False)
            if code != 0 and error is None:
                error = f"cannot take the container offline after set-up: {err.strip()}"
        return SetupResult(error is None, error, log, (time.monotonic() - started) * 1000)

    async def _python3(self) -> str:
        """The image's python3 (it runs the `record_cli` shims), as an absolute path: an
        `env python3` shebang would search the agent's PATH, mocks first."""
        res = await self.exec(["sh", "-c", "command -v python3"], timeout=60, view=GRADER,
                              env={"PATH": BASE_PATH, "HOME": "/tmp/home"})
        found = res.stdout.strip()
        return f"{found} -I" if res.exit_code == 0 and found.startswith("/") \
            else "/usr/bin/env python3"

    async def _environments(self, plan: Any, log: list[str]) -> str | None:
        python = plan.sandbox.python
        node = plan.sandbox.node
        if python is None and not (node is not None and node.env_packages):
            return None
        if python is not None:
            venv = f"{self.inner_workspace}/.venv"
            if os.path.lexists(os.path.join(self.workspace, ".venv")):
                shutil.rmtree(os.path.join(self.workspace, ".venv"), ignore_errors=True)
                log.append("python: replaced an existing .venv")
            res = await self.exec([f"{INNER_CE}/uv", "venv", "--quiet", "--python", "python3",
                                   venv], timeout=300, view=GRADER,
                                  env={"PATH": BASE_PATH, "HOME": "/tmp/home",
                                       "UV_LINK_MODE": "copy"})
            if res.exit_code != 0:
                return ("sandbox.python: uv venv in the container failed (the image needs "
                        f"python3 and glibc; or set `python: null`): "
                        f"{(res.stderr or res.stdout).strip()[-1500:]}")
            log.append("python: created .venv (in the container)")
            if python.env_packages:
                res = await self.exec([f"{INNER_CE}/uv", "pip", "install", "--python",
                                       f"{venv}/bin/python", *python.env_packages],
                                      timeout=900, view=GRADER,
                                      env={"PATH": BASE_PATH, "HOME": "/tmp/home",
                                           "UV_LINK_MODE": "copy",
                                           "UV_CACHE_DIR": "/tmp/uv-cache"})
                if res.exit_code != 0:
                    return (f"sandbox.python: uv pip install {' '.join(python.env_packages)}"
                            f" failed: {(res.stderr or res.stdout).strip()[-1500:]}")
                log.append(f"python: installed {' '.join(python.env_packages)}")
        if node is not None and node.env_packages:
            res = await self.exec(["npm", "install", "--prefix", self.inner_workspace,
                                   "--no-audit", "--no-fund", *node.env_packages],
                                  timeout=900, view=GRADER)
            if res.exit_code != 0:
                return (f"sandbox.node: npm install failed (the image needs npm): "
                        f"{(res.stderr or res.stdout).strip()[-1500:]}")
            log.append(f"node: installed {' '.join(node.env_packages)}")
        return None

    # -- environment --------------------------------------------------------------------
    def env(self, view: str = AGENT) -> dict[str, str]:
        names = list(self.spec.env_passthrough)
        if self.cfg is not None:
            names += list(self.cfg.env_passthrough or ()) + list(self.cfg.env_passthrough_extra)
        env = host_env_passthrough(names)
        ws = self.inner_workspace
        env.update({"HOME": "/tmp/home", "TMPDIR": "/tmp",
                    "PATH": agent_path(self.spec, ws,
                                       f"{ws}/.venv/bin:{ws}/node_modules/.bin:{BASE_PATH}",
                                       view)})
        if os.path.isdir(os.path.join(self.workspace, ".venv")):
            env["VIRTUAL_ENV"] = f"{ws}/.venv"
        if view == GRADER:
            env["TASK_DIR"] = f"{INNER_GRADER}/task"
            ref = grader_reference_dir(self.spec)
            if ref:
                env["REFERENCE_DIR"] = ref
        env.update(self.spec.env)
        return env

    # -- commands -----------------------------------------------------------------------
    def _exec_args(self, argv: list[str], cwd: str | None, env: dict[str, str],
                   interactive: bool) -> tuple[list[str], str]:
        self._ids += 1
        ident = f"{self._ids}"
        args = ["exec"] + (["-i"] if interactive else []) + ["-w", cwd or self.inner_workspace]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        # the command records its pid (a session leader in the container) so a timeout
        # can kill its whole group from a second exec
        args += [self.name, "/bin/sh", "-c", f'echo $$ > {PIDS}/{ident}; exec "$@"', "sh",
                 *argv]
        return args, ident

    async def exec(self, argv: Sequence[str] | str, *, cwd: str | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   max_output: int | None = None, stdin: bytes | None = None,
                   view: str = AGENT, binary: bool = False) -> ExecResult:
        started = time.monotonic()
        args, ident = self._exec_args(shell_argv(argv), cwd,
                                      env if env is not None else self.env(view),
                                      stdin is not None)
        with CommandOutput(max_output) as output:
            try:
                proc = await asyncio.create_subprocess_exec(
                    docker_bin() or "docker", *args,
                    stdin=asyncio.subprocess.PIPE if stdin is not None else
                    asyncio.subprocess.DEVNULL, stdout=output.write_ends[0],
                    stderr=output.write_ends[1], start_new_session=True)
            finally:  # the docker client has its copies
                output.release_write_ends()
            timed_out = False
            try:
                if stdin is not None:
                    proc.stdin.write(stdin)
                    with contextlib.suppress(ConnectionError):
                        await proc.stdin.drain()
                    proc.stdin.close()
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                timed_out = True
                await self._kill_exec(ident, proc)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._kill_exec(ident, proc))
                raise
            output.collect()
            stdout, stderr = output.result(binary)
        code = proc.returncode if proc.returncode is not None else -1
        if code == 126 and "executable file not found" in stderr:
            code = 127
        return ExecResult(-1 if timed_out else code, stdout, stderr, timed_out,
                          (time.monotonic() - started) * 1000)

    async def _kill_exec(self, ident: str, proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(SandboxError):
            await self._docker("exec", self.name, "sh", "-c", _kill_script(ident, "KILL"),
                               timeout=30, check=False)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()

    async def spawn(self, argv: Sequence[str], *, cwd: str | None = None,
                    env: dict[str, str] | None = None, view: str = AGENT,
                    secrets: dict[str, str] | None = None) -> asyncio.subprocess.Process:
        args, ident = self._exec_args(list(argv), cwd,
                                      env if env is not None else self.env(view), True)
        if secrets:  # `-e NAME`: docker takes the value from its own environment
            at = args.index(self.name)
            args[at:at] = [a for name in sorted(secrets) for a in ("-e", name)]
        proc = await asyncio.create_subprocess_exec(
            docker_bin() or "docker", *args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(secrets or {})}, start_new_session=True)
        from ce_runtime.execute.sandbox.docker_agent import InContainer

        return InContainer(proc, self, ident)  # type: ignore[return-value]

    async def _signal_exec(self, ident: str, sig: str) -> None:
        """Signal the process group of the command `ident` started, in the container."""
        with contextlib.suppress(SandboxError):
            await self._docker("exec", self.name, "sh", "-c", _kill_script(ident, sig),
                               timeout=30, check=False)

    # -- phases -------------------------------------------------------------------------
    async def _pids(self) -> dict[int, str]:
        """Host pid -> name of every process in the container. Read from the host (`docker
        top`): inside, a fork loop at the pids limit leaves no room for one more process."""
        _, out, _ = await self._docker("top", self.name, "-eo", "pid,comm", check=False)
        found = {}
        for line in out.splitlines()[1:]:
            pid, _, name = line.strip().partition(" ")
            if pid.isdigit():
                found[int(pid)] = name.strip()
        return found

    async def agent_starts(self, trusted: bool = False) -> None:
        if not trusted:
            os.chmod(self.grader_dir, 0)
        self._before_agent = set(await self._pids())

    async def agent_ended(self) -> list[str]:
        left = {p: n for p, n in (await self._pids()).items() if p not in self._before_agent}
        self._kill(left)
        os.chmod(self.grader_dir, 0o755)
        return [f"{n} (pid {p} on the host)" for p, n in sorted(left.items())]

    def _kill(self, pids: dict[int, str]) -> None:
        for _ in range(20):  # freeze, then kill: a fork loop cannot outrun it
            live = [p for p in pids if _alive(p)]
            if not live:
                return
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for pid in live:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
            time.sleep(0.01)

    async def teardown(self) -> list[str]:
        killed: list[str] = []
        await self._stop_forwarding()
        if self.container is not None:
            with contextlib.suppress(SandboxError):
                killed = [f"{n} (pid {p} on the host)"
                          for p, n in sorted((await self._pids()).items())
                          if p not in self._base]
            with contextlib.suppress(SandboxError):
                await self._docker("rm", "-f", self.name, check=False)
            self.container = None
        with contextlib.suppress(OSError):
            os.chmod(self.grader_dir, 0o755)
        return killed

    def oom_killed(self) -> bool:
        return False

def _kill_script(ident: str, sig: str) -> str:
    """Signal the command `ident` started and its process group. No `kill --`: dash, the
    `sh` of Debian images, takes `--` for a number and signals nothing."""
    return (f'p=$(cat {PIDS}/{ident} 2>/dev/null) || exit 0; '
            f'kill -{sig} -"$p" 2>/dev/null; kill -{sig} "$p" 2>/dev/null; true')


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _file_digest(path: str) -> str:
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError as exc:
        raise SandboxError(f"cannot read the Dockerfile {path}: {exc.strerror}") from None


def _uv() -> str | None:
    try:
        from ce_runtime.execute.sandbox.workspace import _uv_bin

        return _uv_bin()
    except Exception:
        return None
