"""The installed `ce` script (`ce_runtime.cli.entry`) ends with `os._exit` once the
command is done: nothing a command wrote, printed or registered may be lost by that."""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from ce_runtime.cli import main

ENV = {**os.environ, "NO_COLOR": "1", "CE_PLAIN": "1"}


def _entry(code: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, env=ENV, timeout=120, **kw)


def test_piped_output_is_complete_and_equal_to_the_ordinary_exits():
    argv = [sys.executable, "-m", "ce_runtime.cli", "criteria", "show", "file_contains"]
    fast = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=120)
    slow = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**ENV, "CE_SLOW_EXIT": "1"})
    in_process = CliRunner().invoke(main, argv[3:], env={"NO_COLOR": "1"})
    assert fast.returncode == slow.returncode == in_process.exit_code == 0
    assert fast.stdout == slow.stdout and fast.stdout.count("\n") > 20
    assert "file_contains" in in_process.output


def test_exit_status_is_the_commands(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile",
                              str(tmp_path / "nope.yaml")], capture_output=True, text=True,
                             env=ENV, timeout=120)
    assert missing.returncode == 2 and "CE0006" in missing.stderr


def test_atexit_handlers_run_and_a_text_exit_is_printed(tmp_path):
    marker = tmp_path / "atexit-ran"
    proc = _entry("import atexit, sys\n"
                  "path = sys.argv[1]\n"
                  "atexit.register(lambda: open(path, 'w').write('ran'))\n"
                  "import ce_runtime.cli as cli\n"
                  "def boom():\n"
                  "    print('partial line without newline', end='')\n"
                  "    sys.exit('boom: a message')\n"
                  "cli.main.callback = boom\n"
                  "sys.argv = ['ce', 'runs']\n"
                  "cli.entry()\n", str(marker))
    assert marker.read_text() == "ran"
    assert proc.stdout == "partial line without newline"  # flushed before os._exit
    assert proc.returncode == 1 and "boom: a message" in proc.stderr


def test_a_running_non_daemon_thread_is_waited_for(tmp_path):
    marker = tmp_path / "thread-done"
    proc = _entry("import sys, threading, time\n"
                  "path = sys.argv[1]\n"
                  "def late():\n"
                  "    time.sleep(0.3)\n"
                  "    open(path, 'w').write('done')\n"
                  "threading.Thread(target=late).start()\n"
                  "import ce_runtime.cli as cli\n"
                  "sys.argv = ['ce', '--version']\n"
                  "cli.entry()\n", str(marker))
    assert proc.returncode == 0 and "ce, version" in proc.stdout
    assert marker.read_text() == "done"
