"""How the sandbox's init starts a command: posix_spawn when it can, a fork when it sets
rlimits or the command does not start. Either way the command gets the same process:
its own session, only its three descriptors, the same signal dispositions (ignored,
blocked), its cwd, and `argv[0]` looked up on the PATH of its own environment."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from pathlib import Path

import pytest

from ce_runtime.execute.sandbox import open_sandbox
from ce_runtime.execute.sandbox.base import SandboxSpec
from ce_runtime.execute.sandbox.tempdir import close_warm_inits
from tests.test_sandbox_drivers import in_box as drivers_in_box

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# what a command reports about its own process
PROBE = """\
import os
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
fds = [fd for fd in range(3, 256) if is_open(fd)]
stat = open('/proc/self/stat').read().rsplit(')', 1)[1].split()
status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines())
print(fds, int(stat[3]) == os.getpid(), status['SigIgn'].strip(), status['SigBlk'].strip(),
      os.getcwd())
"""


def in_box(tmp_path, body, warm: bool = True):
    """`body(box)` in a tempdir sandbox (test_sandbox_drivers' harness), its init from the
    zygote when `warm`."""
    task = tmp_path / "task"
    (task / "ref").mkdir(parents=True, exist_ok=True)
    return drivers_in_box("tempdir", tmp_path, task, body, warm=warm)


# glibc's own signals (32 and 33): posix_spawn sets them to their defaults in the command;
# a fork keeps the init's disposition, which is "ignored" whenever ce itself was started
# by a posix_spawn (glibc leaves them ignored in what it spawns: CI's Python 3.13 pytest
# workers are), and Python cannot set them back (sigaction refuses them). glibc installs its handlers for both itself when a
# program needs them, so the difference is not one a command can notice.
GLIBC_INTERNAL = (1 << 31) | (1 << 32)


def _without_glibc_internal(text: str) -> str:
    """`text` with signals 32 and 33 cleared from every signal mask in it."""
    return re.sub(r"\b[0-9a-f]{16}\b",
                  lambda m: f"{int(m[0], 16) & ~GLIBC_INTERNAL:016x}", text)


def probe_argv() -> list[str]:
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", PROBE]


@pytest.mark.parametrize("warm", [True, False])
def test_spawned_and_forked_commands_get_the_same_process(tmp_path, warm):
    async def body(box):
        sub = os.path.join(box.workspace, "sub")
        os.makedirs(sub)
        spawned = await box.exec(probe_argv(), cwd=sub)
        sh_spawned = await box.exec("grep -E '^Sig(Ign|Blk)' /proc/self/status")
        # several at once: none sees another's descriptors
        many = await asyncio.gather(*(box.exec(probe_argv(), cwd=sub) for _ in range(4)))
        box._rlimits = lambda: {"NOFILE": 200}  # rlimits: the init forks
        forked = await box.exec(probe_argv(), cwd=sub)
        sh_forked = await box.exec("grep -E '^Sig(Ign|Blk)' /proc/self/status")
        init_cwd = os.readlink(f"/proc/{box.init.pid}/cwd")
        return spawned, forked, many, sh_spawned, sh_forked, init_cwd

    spawned, forked, many, sh_spawned, sh_forked, init_cwd = in_box(tmp_path, body, warm)
    assert spawned.exit_code == 0, spawned.stderr
    assert forked.exit_code == 0, forked.stderr
    assert _without_glibc_internal(spawned.stdout) == _without_glibc_internal(forked.stdout)
    fds, leader, ignored, blocked, cwd = spawned.stdout.rsplit(" ", 4)
    assert not int(ignored, 16) & GLIBC_INTERNAL  # spawned: glibc's signals at default
    assert fds == "[]" and leader == "True"  # stdio only; its own session
    assert cwd.strip().endswith("/sub") and int(blocked, 16) == 0
    assert all(r.stdout == spawned.stdout for r in many)
    # a shell, which ignores nothing itself: the same dispositions either way, SIGPIPE
    # at its default
    assert _without_glibc_internal(sh_spawned.stdout) == \
        _without_glibc_internal(sh_forked.stdout) and sh_spawned.stdout.count("Sig") == 2
    ignored = int(sh_spawned.stdout.split("SigIgn:")[1].split()[0], 16)
    assert not ignored & (1 << 12)
    assert not init_cwd.endswith("/sub")  # the init keeps its own directory


def test_argv0_is_looked_up_on_the_commands_own_path(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "ce-probe-tool").write_text("#!/bin/sh\necho wrong\n")  # not executable
    (tools / "ce-probe-tool").write_text("#!/bin/sh\necho found \"$1\"\n")
    (tools / "ce-probe-tool").chmod(0o755)

    async def body(box):
        env = {"PATH": f"{blocked}:{tools}:/usr/bin:/bin"}
        found = await box.exec(["ce-probe-tool", "arg"], env=env)
        missing = await box.exec(["ce-no-such-tool"], env=env)
        return found, missing

    found, missing = in_box(tmp_path, body)
    assert (found.exit_code, found.stdout) == (0, "found arg\n")
    assert missing.exit_code == 127
    assert "cannot start ce-no-such-tool" in missing.stderr


def test_a_missing_cwd_is_reported_by_the_command(tmp_path):
    async def body(box):
        return await box.exec(["/bin/true"], cwd=os.path.join(box.workspace, "gone"))

    out = in_box(tmp_path, body)
    assert out.exit_code == 127 and "cannot start /bin/true" in out.stderr


def _group(pgid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[2]) == pgid and stat[0] != "Z":
                out.append(int(entry))
    return out


def test_the_zygotes_spare_init_serves_the_next_trial_and_dies_with_it(tmp_path):
    from ce_runtime.execute.sandbox.tempdir import zygote

    async def main():
        seen = []
        for i in range(3):
            scratch = tmp_path / f"scratch-{i}"
            scratch.mkdir()
            box = open_sandbox("tempdir", SandboxSpec("t/00", str(scratch), str(tmp_path),
                                                      warm=True))
            await box.start()
            try:
                out = await box.exec("echo $$")
                pid = box.init.pid
                sid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
                seen.append((pid, sid, out.exit_code))
            finally:
                await box.teardown()
            assert box.init.returncode is not None  # reaped by the zygote, reported
        zyg = zygote().proc.pid
        for _ in range(200):  # the next spare, forked while the last trial ran
            if len(_group(zyg)) >= 2:
                break
            await asyncio.sleep(0.01)
        spare = [p for p in _group(zyg) if p != zyg]
        await close_warm_inits()
        return seen, spare

    seen, spare = asyncio.run(main())
    assert len({pid for pid, _, _ in seen}) == 3  # a fresh init per trial
    assert all(sid == pid and code == 0 for pid, sid, code in seen)  # own session
    assert len(spare) == 1
    for _ in range(200):
        if not alive(spare[0]):
            break
        time.sleep(0.01)
    assert not alive(spare[0])


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
