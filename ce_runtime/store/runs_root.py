"""A directory of runs (`runs/`): its runs in the order they began, and the newest.

Every command that takes a directory of runs for "its latest run" (report, compare,
explain, rescore, run --resume) and `ce runs`' listing agree through this module: the
`latest` link when it names a run (ce run keeps it), else the run that began last, by
run.json's created_at, then by id. A new run's id sorts by when it was made, to the
millisecond (`new_run_id`), so runs of the same second are ordered too. A run whose
`ce run` was killed is told from one still going by its lock (`run_status`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets

LATEST = "latest"
LOCK_FILE = "run.lock"  # flock'd by the `ce run` writing the run (execute.suite.lock_run_dir)
_RUN_ID_TIME = re.compile(r"(\d{8})-(\d{6})")


def new_run_id(now: dt.datetime | None = None) -> str:
    """`YYYYmmdd-HHMMSS-mmmx`: local time, milliseconds and one random hex digit (two runs
    of the same millisecond differ by it; the caller retries on a collision)."""
    now = now or dt.datetime.now()
    return f"{now:%Y%m%d-%H%M%S}-{now.microsecond // 1000:03d}{secrets.token_hex(1)[0]}"


def is_run(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "run.json"))


def runs_in(root: str) -> list[str]:
    """The runs directly under `root` (links such as `latest` skipped), newest first."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    paths = [os.path.join(root, n) for n in names]
    runs = [p for p in paths if not os.path.islink(p) and os.path.isdir(p) and is_run(p)]
    return sorted(runs, key=lambda p: order_key(p, read_run_json(p)), reverse=True)


def newest_run(root: str) -> str | None:
    """The run `root/latest` names, else the newest run under `root`; None when none."""
    latest = os.path.join(root, LATEST)
    if os.path.isdir(latest) and is_run(latest):
        return os.path.realpath(latest)
    runs = runs_in(root)
    return os.path.realpath(runs[0]) if runs else None


def read_run_json(path: str) -> dict | None:
    """run.json of the run at `path` as a dict; None when unreadable or not an object."""
    try:
        with open(os.path.join(path, "run.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def run_id_of(path: str, doc: dict | None) -> str:
    return str((doc or {}).get("run_id") or os.path.basename(path))


def started_at(path: str, doc: dict | None) -> str | None:
    """When the run began, as UTC ISO text (so that times sort as text): run.json's
    created_at, else the time in its id, else run.json's modification time."""
    return (utc((doc or {}).get("created_at")) or _id_time(run_id_of(path, doc))
            or _file_time(os.path.join(path, "run.json")))


def order_key(path: str, doc: dict | None) -> tuple[str, str]:
    return started_at(path, doc) or "", run_id_of(path, doc)


def utc(t: object) -> str | None:
    """An ISO time as UTC (`...+00:00`, to the second); None when it is none."""
    if not isinstance(t, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(t)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return parsed.astimezone(dt.UTC).isoformat(timespec="seconds")


def _id_time(run_id: str) -> str | None:
    m = _RUN_ID_TIME.match(run_id)
    if not m:
        return None
    try:
        t = dt.datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S")
    except ValueError:
        return None
    return utc(t.astimezone().isoformat())


def _file_time(path: str) -> str | None:
    try:
        return dt.datetime.fromtimestamp(os.path.getmtime(path), dt.UTC) \
            .isoformat(timespec="seconds")
    except OSError:
        return None


KILLED = "killed"


def run_status(path: str, status: object) -> str | None:
    """run.json's status, except that a `running` run whose lock no process holds was
    killed (the kernel drops an flock when its holder dies, however it dies). A lock
    taken on another host, or none at all, leaves `running`: flock says nothing there.
    `ce runs` lists it; `ce report` of a killed run says how to continue it."""
    if not isinstance(status, str):
        return None
    if status != "running":
        return status
    import fcntl
    import socket

    try:
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return status
    try:
        holder = json.loads(os.pread(fd, 4096, 0) or b"{}")
        if not isinstance(holder, dict) or holder.get("host") != socket.gethostname():
            return status
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except (OSError, ValueError):
        return status  # held (BlockingIOError), or unreadable: say what run.json says
    finally:
        os.close(fd)
    return KILLED
