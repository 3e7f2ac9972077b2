"""`driver: tempdir`: the workspace is a temporary directory and commands run as you.

It isolates nothing. The agent can read and write every file you can, reach the
network and your loopback services, signal your processes (ce included) and read
/proc. What it does do: commands get a private HOME and TMPDIR and an environment
without your variables (no key of yours reaches the agent through its environment);
the task directory and the reference are never named to the agent (TASK_DIR and
REFERENCE_DIR exist for grader commands only); everything the trial started, daemons
that `setsid` included, is killed at the end (ce's init is their child subreaper);
`sandbox.limits` are enforced through control groups where the host lets ce make them;
secrets are redacted from what ce writes; files the grader trusts are checked before
grading. Use `bwrap` (or `docker`) for an agent you do not trust: every real agent.
"""

from __future__ import annotations

import os

from ce_runtime.execute.sandbox.base import GRADER, SandboxSpec, host_env_passthrough
from ce_runtime.execute.sandbox.supervised import SHIM, SupervisedSandbox


class TempdirSandbox(SupervisedSandbox):
    driver = "tempdir"

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        self.home = os.path.join(spec.scratch, "home")
        self.tmp = os.path.join(spec.scratch, "tmp")
        os.makedirs(self.home, exist_ok=True)
        os.makedirs(self.tmp, exist_ok=True)

    def launch_argv(self, python: str) -> list[str]:
        return [python, "-I", "-S", SHIM, self.inner_ctl()]

    def isolation(self) -> str:
        return ("none: the agent runs as you, with your files, network and processes "
                "(private HOME and TMPDIR, a clean environment, every process reaped)")

    def network_note(self) -> str:
        return "host (tempdir cannot restrict the network)"

    def base_env(self, view: str) -> dict[str, str]:
        env = host_env_passthrough(self.spec.env_passthrough)
        env.update({"HOME": self.home, "TMPDIR": self.tmp, "PATH": os.environ.get(
            "PATH", "/usr/local/bin:/usr/bin:/bin"), "SHELL": "/bin/sh"})
        for name in ("USER", "LOGNAME"):
            if name in os.environ:
                env[name] = os.environ[name]
        if view == GRADER:
            env["TASK_DIR"] = self.spec.task_dir
            if self.spec.reference:
                first = self.spec.reference[0]
                env["REFERENCE_DIR"] = first if os.path.isdir(first) else \
                    os.path.dirname(first)
        return env
