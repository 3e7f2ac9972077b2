"""Sandboxes: one protocol (`base.Sandbox`), one module per driver, found by name.

Built in: `tempdir` (isolates nothing; reaps, redacts, limits where cgroups allow),
`bwrap` (Linux namespaces through bubblewrap: the recommended driver for real agents),
`docker` (a container per trial through the docker CLI). Third-party drivers register
in the `ce.sandboxes` entry point group: a class taking a `SandboxSpec`.
"""

from __future__ import annotations

from typing import Any

from ce_runtime.execute.sandbox.base import Sandbox, SandboxError, SandboxSpec

BUILTIN = {
    "tempdir": "ce_runtime.execute.sandbox.tempdir:TempdirSandbox",
    "bwrap": "ce_runtime.execute.sandbox.bwrap:BwrapSandbox",
    "docker": "ce_runtime.execute.sandbox.docker:DockerSandbox",
}


class UnknownDriver(Exception):
    pass


def driver_class(name: str) -> Any:
    from ce_runtime.execute.registry import find

    cls = find(name, BUILTIN, "ce.sandboxes")
    if cls is None:
        raise UnknownDriver(f"no sandbox driver named {name!r} is installed (built in: "
                            f"{', '.join(sorted(BUILTIN))})")
    return cls


def open_sandbox(name: str, spec: SandboxSpec) -> Sandbox:
    return driver_class(name)(spec)


def unavailable(name: str, spec_hint: Any = None) -> str | None:
    """Why driver `name` cannot run on this machine (None: it can). Checked once before
    any trial starts."""
    try:
        cls = driver_class(name)
    except UnknownDriver as exc:
        return str(exc)
    check = getattr(cls, "unavailable", None)
    return check(spec_hint) if check is not None else None


__all__ = ["BUILTIN", "Sandbox", "SandboxError", "SandboxSpec", "UnknownDriver",
           "driver_class", "open_sandbox", "unavailable"]


def host_limits() -> dict[str, dict[str, str]]:
    """What each built-in driver can enforce on this host: {driver: {limit: how, or ""}}
    (the compiler warns about limits a task sets that would not be)."""
    from ce_runtime.execute.sandbox.cgroups import probe

    local = probe()
    docker = {"max_memory_mb": "docker --memory", "max_pids": "docker --pids-limit",
              "max_cpus": "docker --cpus"}
    return {"tempdir": local, "bwrap": local, "docker": docker}
