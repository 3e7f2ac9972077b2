"""An output file (--junit-xml, --sarif, `ce report -o`, `ce compare -o`) must not land on
a run's archive: written atomically over run.json or a trial's task.json, it destroyed
the run it reports on without a word."""

from __future__ import annotations

import os

# a run directory's own files, at its top (the reports, report.md and the like, may be
# written again: `ce report RUN -f md -o RUN/report.md` regenerates one)
ARCHIVE_FILES = frozenset(("run.json", "run.lock", "trials.parquet", "results.parquet"))


def _inside(path: str, directory: str) -> str | None:
    rel = os.path.relpath(path, directory)
    return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def _run_above(path: str) -> str | None:
    """The run directory `path` is in (the nearest directory above it with a run.json)."""
    here = os.path.dirname(path)
    while True:
        if os.path.isfile(os.path.join(here, "run.json")):
            return here
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


# what `ce run` writes at its run directory's top besides the archive
RUN_REPORTS = frozenset(("report.md", "report.html"))


def clash(path: str, run_dir: str | None = None) -> str | None:
    """Why writing `path` would replace part of a run's archive, or None. `run_dir`: the
    run being written (`ce run`): a file of its own at the top (RUN/junit.xml) is fine,
    not one of the files the run writes there nor anything in a trial's directory."""
    target = os.path.realpath(os.path.abspath(path))
    if run_dir is not None:
        rel = _inside(target, os.path.realpath(os.path.abspath(run_dir)))
        if rel == ".":
            return "the run directory itself"
        if rel is not None and (os.sep in rel or rel in ARCHIVE_FILES | RUN_REPORTS):
            return f"a file this run writes in {run_dir} ({rel})"
    run = _run_above(target)
    if run is None:
        return None
    rel = os.path.relpath(target, run)
    if os.sep in rel or rel in ARCHIVE_FILES:
        return f"part of the run archived in {run} ({rel})"
    return None
