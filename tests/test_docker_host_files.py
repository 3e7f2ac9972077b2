"""Host files a container needs (an agent's CLI: Claude Code's is 400 MB; uv: 38 MB)
reach its read-only /run/ce as hard links; from another file system, as hard links to
one copy made for the whole run, not a copy per trial."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile

import pytest

from ce_runtime.execute.sandbox import open_sandbox
from ce_runtime.execute.sandbox.docker_agent import place
from tests.engines import PYTHON_IMAGE, need, python_image
from tests.test_sandbox_drivers import docker_block

SHM = "/dev/shm"


@pytest.fixture
def other_fs(tmp_path):
    """A directory on another file system than tmp_path (tmpfs), removed after."""
    if not os.path.isdir(SHM) or os.stat(SHM).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip(f"{SHM} is not another file system than {tmp_path} here")
    path = tempfile.mkdtemp(prefix="ce-test-fs-", dir=SHM)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_same_file_system_is_a_hard_link_and_no_copy(tmp_path):
    src = tmp_path / "cli"
    src.write_bytes(b"x" * 1000)
    for n in range(3):
        place(str(src), str(tmp_path / f"dest{n}"), str(tmp_path / "cache"))
    assert os.stat(src).st_nlink == 4
    assert not (tmp_path / "cache").exists()


def test_another_file_system_copies_once_for_all_trials(tmp_path, other_fs):
    src = tmp_path / "cli"
    src.write_bytes(b"y" * 100_000)
    cache = os.path.join(other_fs, "run", ".ce-host-files")
    dests = []
    for n in range(3):
        trial = os.path.join(other_fs, "run", f"trial{n}", "ce", "bin")
        os.makedirs(trial)
        dests.append(os.path.join(trial, "0-cli"))
        place(str(src), dests[-1], cache)
    copies = os.listdir(cache)
    assert len(copies) == 1, copies
    inodes = {os.stat(d).st_ino for d in dests}
    assert inodes == {os.stat(os.path.join(cache, copies[0])).st_ino}
    assert os.stat(dests[0]).st_nlink == 4  # the run's copy and the three trials'
    with open(dests[2], "rb") as fh:
        assert fh.read() == src.read_bytes()
    assert os.stat(src).st_nlink == 1


def test_another_file_system_without_a_run_copies(tmp_path, other_fs):
    src = tmp_path / "cli"
    src.write_bytes(b"z" * 10)
    place(str(src), os.path.join(other_fs, "a"), None)
    place(str(src), os.path.join(other_fs, "b"), None)
    assert os.stat(os.path.join(other_fs, "a")).st_ino != os.stat(
        os.path.join(other_fs, "b")).st_ino


@pytest.mark.slow
def test_containers_of_a_run_share_one_copy_of_uv(other_fs, tmp_path):
    need(python_image())
    host_files = os.path.join(other_fs, ".ce-host-files")

    async def main():
        seen = []
        for n in range(2):
            scratch = os.path.join(other_fs, f"trial{n}")
            os.makedirs(scratch)
            from ce_runtime.execute.sandbox.base import SandboxSpec

            box = open_sandbox("docker", SandboxSpec(
                f"t/{n:02d}", scratch, str(tmp_path), docker=docker_block(PYTHON_IMAGE),
                host_files=host_files))
            await box.start()
            try:
                result = await box.exec(["/run/ce/uv", "--version"])
                seen.append((result.exit_code, result.stdout,
                             os.stat(os.path.join(scratch, "ce", "uv")).st_ino))
            finally:
                await box.teardown()
        return seen

    seen = asyncio.run(main())
    assert all(code == 0 and out.startswith("uv ") for code, out, _ in seen), seen
    assert len({ino for *_, ino in seen}) == 1
    assert len(os.listdir(host_files)) == 1
