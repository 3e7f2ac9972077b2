"""A host-side client of a trial's init (shim.py): runs one command inside the sandbox
with this process's own stdin, stdout and stderr, and exits as the command exits.

`python -I -S run_client.py CONTROL_SOCKET REQUEST` (supervised.SupervisedSandbox.spawn),
or loaded by path from a launcher script (`launcher`: an agent SDK that spawns its CLI
itself spawns that). It runs on the host, never inside a confinement: nothing of it is
copied into one. Stdlib only, and free of ce imports. REQUEST is shim.py's `exec`
request (JSON) with a `forward` list: variables read from this process's environment
into the command's (secrets come by environment, never by the command line).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import struct
import sys


def run_client(ctl_path: str, request: str) -> int:
    """`run_client.py CTL REQUEST`: run one command inside the sandbox with this
    process's own stdin, stdout and stderr, and exit as it exits. A library that insists
    on spawning its subprocess itself (an agent SDK) spawns this instead; killing this
    process (or SIGTERM) kills the command's process group.

    It takes a session of its own first: a library spawns it in ce's process group,
    where a SIGINT to the group (Ctrl-C in ce's terminal, or sent to a script's
    background `ce run`, which ignores it) made it kill the command behind ce's back.
    Only ce stops it, as it stops the trial."""
    with contextlib.suppress(OSError):  # (already a group's leader: spawned as one)
        os.setsid()
    message = json.loads(request)
    for name in message.pop("forward", []):  # secrets come by environment, not argv
        if name in os.environ:
            message["env"][name] = os.environ[name]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    here = os.getcwd()  # connected from its directory: a socket path has 107 bytes
    os.chdir(os.path.dirname(ctl_path) or ".")
    try:
        sock.connect(os.path.basename(ctl_path))
    finally:
        os.chdir(here)
    payload = json.dumps(message).encode()
    socket.send_fds(sock, [struct.pack(">I", len(payload)) + payload], [0, 1, 2])
    replies = sock.makefile("rb")
    first = json.loads(replies.readline() or b'{"error": "no answer"}')
    if "pid" not in first:
        sys.stderr.write(f"ce sandbox: {first.get('error')}\n")
        return 127

    def forward_kill(*_: object) -> None:
        kill = json.dumps({"op": "kill"}).encode()
        with contextlib.suppress(OSError):
            sock.sendall(struct.pack(">I", len(kill)) + kill)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward_kill)
    line = replies.readline()
    code = json.loads(line).get("exit", 1) if line else 1
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1].startswith("-"):
        sys.stderr.write("usage: run_client.py CONTROL_SOCKET REQUEST\n")
        sys.exit(2)
    sys.exit(run_client(sys.argv[1], sys.argv[2]))
