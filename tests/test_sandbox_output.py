"""A command's stdout and stderr: pipes ce drains while the command runs, never files on
the host's disk. A flood is capped (the caller's `max_output`, and OUTPUT_HARD_CAP when
it sets none) and read on past the cap, so the command still exits 0; a process the
command leaves running with its output open does not hold `exec`; a timed-out or
cancelled command leaves no descriptor behind and closes none twice."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
from pathlib import Path

import pytest

from ce_runtime.execute.sandbox import base
from ce_runtime.execute.sandbox.base import SandboxFileError
from tests.test_sandbox_drivers import in_box

# tempdir as `ce run` starts it too ("-forked": its init forked by the run's zygote);
# docker where an engine runs (CI)
DRIVERS = ["tempdir", "tempdir-forked", "bwrap", "docker"]
FLOOD = 200_000_000


@pytest.fixture
def task_dir(tmp_path) -> Path:
    d = tmp_path / "task"
    (d / "ref").mkdir(parents=True)
    return d


@contextlib.contextmanager
def file_size_limit(nbytes: int):
    """RLIMIT_FSIZE for this process and what it starts from here (the sandbox's init,
    its commands, the docker client): writing a file past `nbytes` fails (a command gets
    SIGXFSZ). A pipe has no size: output that goes through one is not limited."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = nbytes if hard == resource.RLIM_INFINITY else min(nbytes, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_flood_of_output_is_capped_and_lands_in_no_file(driver, tmp_path, task_dir):
    """200 MB on stdout with max_output=1000: 1000 bytes kept and the rest counted, the
    command exits 0 (read to its end, no SIGPIPE), and nothing was written to a file:
    under an 8 MiB file-size limit, output spooled to a host temp file stopped the
    command at 8 MiB ("head: error writing 'standard output': File too large", exit 1),
    and `yes` filled the host's disk until its timeout."""
    limit = 8 * 1024 * 1024

    async def body(box):
        # docker: the limit once the sandbox is up (its set-up copies the uv binary, over
        # 8 MiB); the `docker exec` client started per command inherits it. The others:
        # from the start, so their init, which forks every command, has it.
        with file_size_limit(limit) if driver == "docker" else contextlib.nullcontext():
            return await box.exec(f"head -c {FLOOD} /dev/zero && echo done >&2",
                                  max_output=1000, timeout=300)
    with file_size_limit(limit) if driver != "docker" else contextlib.nullcontext():
        res = in_box(driver, tmp_path, task_dir, body)
    assert (res.exit_code, res.timed_out, res.stderr) == (0, False, "done\n"), res.stderr
    assert res.stdout == "\0" * 1000 + \
        f"\n[... truncated: {FLOOD - 1000} of {FLOOD} bytes not kept]"


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "bwrap"])
def test_without_max_output_the_hard_cap_holds(driver, tmp_path, task_dir, monkeypatch):
    """No `max_output` (or a larger one) is capped at OUTPUT_HARD_CAP, text and binary;
    reading a whole file larger than it is an error, not a silently cut file (an edit
    would write the cut file back)."""
    monkeypatch.setattr(base, "OUTPUT_HARD_CAP", 4096)

    async def body(box):
        text = await box.exec("yes | head -c 1000000")
        larger = await box.exec("yes | head -c 1000000", max_output=100_000)
        data = await box.exec("yes | head -c 1000000", binary=True)
        await box.exec("head -c 10000 /dev/zero > big.bin; printf small > small.txt")
        with pytest.raises(SandboxFileError) as big:
            await box.read_file(f"{box.inner_workspace}/big.bin")
        return text, larger, data, str(big.value), \
            await box.read_file(f"{box.inner_workspace}/small.txt"), \
            await box.read_file(f"{box.inner_workspace}/big.bin", 100)
    text, larger, data, big, small, head = in_box(driver, tmp_path, task_dir, body)
    capped = "y\n" * 2048 + "\n[... truncated: 995904 of 1000000 bytes not kept]"
    assert (text.exit_code, text.stdout) == (0, capped)
    assert larger.stdout == capped
    assert (data.exit_code, data.stdout) == (0, b"y\n" * 2048)
    assert "File too large" in big
    assert (small, head) == (b"small", b"\0" * 100)


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "tempdir-forked", "bwrap"])
def test_a_background_writer_does_not_hold_the_command(driver, tmp_path, task_dir):
    """The command ends while a process it started holds its stdout and stderr open (and
    one of them writes on): exec takes what is in the pipes and returns, long before its
    own timeout, without waiting for the pipes' end. (Not docker: `docker exec` itself
    waits for every holder of the stream, moby/moby#33039.)"""
    async def body(box):
        quiet = await asyncio.wait_for(
            box.exec("sleep 100 & echo up; echo err >&2", timeout=200), 60)
        loud = await asyncio.wait_for(
            box.exec("yes & echo up >&2", timeout=200, max_output=1000), 60)
        return quiet, loud
    quiet, loud = in_box(driver, tmp_path, task_dir, body)
    assert (quiet.exit_code, quiet.timed_out, quiet.stdout, quiet.stderr) == \
        (0, False, "up\n", "err\n")
    assert (loud.exit_code, loud.timed_out, loud.stderr) == (0, False, "up\n")
    assert len(loud.stdout) <= 1000 + 100 and set(loud.stdout[:1000]) <= {"y", "\n"}


def open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["tempdir", "tempdir-forked", "bwrap"])
def test_a_timed_out_or_cancelled_flood_closes_its_descriptors_once(driver, tmp_path,
                                                                    task_dir):
    """`yes` cancelled at each of exec's first steps (Ctrl-C, SIGTERM: the request still
    on its way), then while it runs, then timed out: each time
    CancelledError (or a result), never an OSError of a descriptor closed twice; no
    callback error; the descriptors a task beside it opens at every step of the loop (they
    take the numbers exec frees at once) all still open and still ours afterwards; and at
    the end the process holds exactly the descriptors it held before."""
    async def body(box):
        loop = asyncio.get_running_loop()
        problems: list = []
        loop.set_exception_handler(lambda _loop, ctx: problems.append(ctx))
        await box.exec("true")  # the sandbox's own descriptors are all open by now
        before = open_fds()
        devnull = os.stat(os.devnull)
        mistaken = []

        async def occupy(held: list[int], stop: asyncio.Event) -> None:
            while not stop.is_set() and len(held) < 300:
                held.append(os.open(os.devnull, os.O_RDONLY))
                await asyncio.sleep(0)

        def still_ours(fd: int) -> bool:
            try:
                st = os.fstat(fd)
            except OSError:
                return False
            return (st.st_dev, st.st_ino) == (devnull.st_dev, devnull.st_ino)
        running = Path(box.workspace) / "running"
        for steps in [*range(8), "running", "running"]:
            with contextlib.suppress(FileNotFoundError):
                running.unlink()
            held: list[int] = []
            stop = asyncio.Event()
            occupier = asyncio.ensure_future(occupy(held, stop))
            task = asyncio.ensure_future(box.exec("touch running; exec yes", max_output=100,
                                                  timeout=200))
            if steps == "running":  # started, and flooding its pipe
                for _ in range(2000):
                    if running.exists():
                        break
                    await asyncio.sleep(0.01)
                assert running.exists()
                await asyncio.sleep(0.1)
            for _ in range(0 if steps == "running" else steps):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            for _ in range(5):  # what a transport closes, it closes in a callback
                await asyncio.sleep(0)
            stop.set()
            await occupier
            if not all(still_ours(fd) for fd in held):
                mistaken.append(steps)
            for fd in held:
                with contextlib.suppress(OSError):
                    os.close(fd)
        timed = await box.exec("yes", max_output=100, timeout=1)
        for _ in range(100):  # the last connections close in callbacks
            if open_fds() == before:
                break
            await asyncio.sleep(0.05)
        return problems, mistaken, timed, open_fds() - before, before - open_fds()
    problems, mistaken, timed, leaked, lost = in_box(driver, tmp_path, task_dir, body)
    assert problems == [] and mistaken == []
    assert (leaked, lost) == (set(), set())
    assert timed.timed_out and timed.exit_code == -1
    assert timed.stdout.startswith("y\n" * 50) and "bytes not kept]" in timed.stdout
