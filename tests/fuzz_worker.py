"""A `ce compile` worker for the bounded fuzz test (tests/test_fuzz_bounded.py).

Reads one JSON request per line on stdin ({"cwd": DIR, "args": [...]}) and runs the
real CLI in this process for each, under the bounds the fuzz test checks: an address
space limit (RLIMIT_AS, so a runaway allocation is a MemoryError here, not the
machine's), HANG_S seconds of CPU time (ITIMER_VIRTUAL: the issue's 10 s, counted in
this process's own CPU so a loaded CI machine cannot trip it) and BLOCKED_S of wall time
for a hang that burns no CPU (a blocking read). Hang checks, not speed targets.
Answers one JSON line per request: exit code, output size, and what went wrong.
Running in one process keeps the fuzz fast (no interpreter start per example).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys

HANG_S = 10  # CPU seconds
BLOCKED_S = 120  # wall seconds
MEMORY_LIMIT = 3 * 1024**3


class Hang(BaseException):
    pass


def _alarm(_signum, _frame):
    raise Hang


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGVTALRM, _alarm)
    from click.testing import CliRunner

    from ce_runtime.cli import main as ce

    runner = CliRunner()
    for line in sys.stdin:
        request = json.loads(line)
        os.chdir(request["cwd"])
        answer: dict = {"exit": None, "output": 0, "problem": None}
        signal.alarm(BLOCKED_S)
        signal.setitimer(signal.ITIMER_VIRTUAL, HANG_S)
        try:
            result = runner.invoke(ce, request["args"], catch_exceptions=True)
            answer["exit"] = result.exit_code
            out = result.output
            answer["output"] = len(out)
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                answer["problem"] = f"exception {type(result.exception).__name__}: " \
                                    f"{result.exception}"[:500]
            elif "internal error" in out or "Traceback" in out:
                answer["problem"] = "internal error: " + out[-500:]
        except Hang:
            answer["problem"] = f"still running after {HANG_S} s of CPU or {BLOCKED_S} s"
        except MemoryError:
            answer["problem"] = f"ran out of its {MEMORY_LIMIT >> 30} GiB address space"
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            signal.alarm(0)
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
