"""The real engines some tests need (bubblewrap, a docker engine, local images), found or
made here. A missing engine skips its tests with the reason, except when
CE_REQUIRE_ENGINES=1 (CI sets it after installing and starting them): then a missing
engine fails the test, so nothing is skipped unnoticed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile

import pytest

BUSYBOX_IMAGE = "local/busybox"
PYTHON_IMAGE = "local/ce-python"  # Debian bookworm with python3 (.ci/run builds it)


def need(reason: str | None) -> None:
    """Skip (or, under CE_REQUIRE_ENGINES=1, fail) when `reason` says an engine is missing."""
    if reason is None:
        return
    if os.environ.get("CE_REQUIRE_ENGINES") == "1":
        pytest.fail(f"required engine missing: {reason}")
    pytest.skip(reason)


@functools.cache
def bwrap_missing() -> str | None:
    from ce_runtime.execute.sandbox.bwrap import BwrapSandbox

    return BwrapSandbox.unavailable()


@functools.cache
def docker_missing() -> str | None:
    from ce_runtime.execute.sandbox.docker import _probe

    return _probe()


def _has_image(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True,
                          timeout=60).returncode == 0


@functools.cache
def busybox_image() -> str | None:
    """A 2 MB image of the host's static busybox (none is pulled: no registry here).
    Returns why it cannot be made, or None once it exists."""
    if docker_missing():
        return docker_missing()
    if _has_image(BUSYBOX_IMAGE):
        return None
    busybox = shutil.which("busybox")
    if busybox is None:
        return "busybox is not installed (apt-get install busybox-static) for the test image"
    root = tempfile.mkdtemp(prefix="ce-busybox-")
    try:
        os.makedirs(os.path.join(root, "bin"))
        shutil.copy2(busybox, os.path.join(root, "bin", "busybox"))
        applets = subprocess.run([busybox, "--list"], capture_output=True, text=True,
                                 check=True).stdout.split()
        for applet in applets:
            if applet != "busybox":
                os.symlink("busybox", os.path.join(root, "bin", applet))
        for d in ("tmp", "etc", "proc", "sys", "dev", "root", "workspace"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        with open(os.path.join(root, "etc", "passwd"), "w") as fh:
            fh.write("root:x:0:0:root:/root:/bin/sh\n")
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        res = subprocess.run(["docker", "import", "-c", "ENV PATH=/bin", "-",
                              BUSYBOX_IMAGE], stdin=tar.stdout, capture_output=True,
                             text=True, timeout=120)
        tar.wait()
        if res.returncode != 0:
            return f"docker import of busybox failed: {res.stderr.strip()}"
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return None


@functools.cache
def python_image() -> str | None:
    if docker_missing():
        return docker_missing()
    if _has_image(PYTHON_IMAGE):
        return None
    return (f"no {PYTHON_IMAGE} image (.ci/run builds it: debootstrap bookworm with "
            "python3 and docker import)")
