"""The run's end: run.json's summary, trials.parquet and results.parquet, report.md,
report.html and JUnit, written from the trial records (and a re-score's: the same but
JUnit).

`ce run` has a report worker (ce_runtime/cli/report_worker.py) do this: a process started
with the run, which imports Polars while the trials run. Without one (it could not start,
it died, or CE_REPORT_WORKER=0) `ce run` calls `write_run_reports` itself, so both write
the same files the same way."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

# a re-score's report.html holds each trial's detail up to this many trials: reading the
# trials' files for it costs ~0.8 ms a trial, about what re-grading one costs (bench/README,
# rescore's ninth pass), and `ce rescore`'s 1,000 trials/s would halve at 10,000 trials
RESCORE_DETAIL_TRIALS = 1_000

class PreparedReports(NamedTuple):
    """Every report file of a run's end, made but not yet written: the report worker
    makes them as the last trial finishes, while `ce run` ends its pool, and writes them
    once `ce run` sends the end it expected (`inputs`)."""

    # (run_dir, run_id, config, total, interrupted, junit_xml, lost, error, unrun,
    # unrun_files as sorted pairs)
    inputs: tuple
    records: list
    summary: dict[str, Any]
    run_json: bytes
    parquet: tuple[bytes, bytes] | None  # trials.parquet, results.parquet (no records: none)
    markdown: bytes
    html: bytes | str | None  # the page, or the warning said instead of writing it
    junit: bytes | None
    # what failed while making the files after run.json (a bug in ce): raised once the
    # files made before it are written, as a run's end that writes each file as it is
    # made would leave them (run.json first: the results are never lost to a report)
    failure: Exception | None = None


def write_run_reports(run_dir: str, run_id: str, config: dict[str, Any], records: list,
                      total: int, interrupted: bool, junit_xml: str | None,
                      lost: list[dict[str, Any]], error: str | None = None,
                      unrun: Sequence[str] = (),
                      unrun_files: dict[str, str] | None = None) -> dict[str, Any]:
    """Every report file of the run; run.json's summary (what `ce run` prints from).
    `error`: what left trials unrun besides a signal (an executor that did not start);
    `unrun`: the ids of the planned trials that did not run, `unrun_files` their task
    files (summary.with_run_state)."""
    return write_prepared(prepare_run_reports(run_dir, run_id, config, records, total,
                                              interrupted, junit_xml, lost, error,
                                              unrun=unrun, unrun_files=unrun_files))


def prepare_run_reports(run_dir: str, run_id: str, config: dict[str, Any], records: list,
                        total: int, interrupted: bool, junit_xml: str | None,
                        lost: list[dict[str, Any]], error: str | None = None,
                        reads: Any = None, unrun: Sequence[str] = (),
                        unrun_files: dict[str, str] | None = None) -> PreparedReports:
    """`write_run_reports`' files, made in memory: report.html from run.json as it will
    be read back once written (`reads`: its trials' files read ahead, an
    html_trial.TrialReads)."""
    from ce_runtime import report
    from ce_runtime.report.summary import with_run_state
    from ce_runtime.store.run_json import run_json_bytes

    gates = report.suite_metrics(records)
    summary = report.summary(records, gates, run_id, config)
    status = "interrupted" if interrupted else \
        "incomplete" if lost or len(records) < total else "complete"
    with_run_state(summary, status, total, lost, error, _created_at(run_dir), unrun,
                   unrun_files)
    from ce_runtime.execute.attempts import retried

    if (again := retried(run_dir, records)) is not None:  # `ce run --retry-errors`
        summary["retried"] = again
    run_json = run_json_bytes(summary)
    parquet = markdown = html = junit = failure = None
    try:
        if records:
            from ce_runtime.report import frames

            parquet = (frames.parquet_bytes(frames.trials_frame(records)),
                       frames.parquet_bytes(frames.results_frame(records)))
        markdown = report.render_markdown(summary, records, gates).encode()
        if records:
            html = _html(run_dir, (records, gates, summary), run_json, reads)
        if junit_xml:
            junit = report.render_junit(records, gates, summary, run_dir).encode()
    except Exception as exc:
        failure = exc
    return PreparedReports((run_dir, run_id, config, total, interrupted, junit_xml, lost,
                            error, tuple(unrun), tuple(sorted((unrun_files or {}).items()))),
                           records, summary, run_json, parquet, markdown, html,
                           junit, failure)


def write_prepared(prepared: PreparedReports) -> dict[str, Any]:
    """The files `prepare_run_reports` made, written in the order (and with the failures)
    of a run's end: run.json first and durably; a report.html that could not be made or
    written is said, the run goes on; any other failed write raises its OSError, and a
    failure while making them (a bug) is raised once the files made before it are."""
    from ce_runtime.store.atomic import write_bytes_atomic
    from ce_runtime.store.run_json import RUN_JSON

    run_dir, junit_xml = prepared.inputs[0], prepared.inputs[5]
    write_bytes_atomic(os.path.join(run_dir, RUN_JSON), prepared.run_json, durable=True)
    if prepared.parquet is not None:
        for name, data in zip(("trials.parquet", "results.parquet"), prepared.parquet,
                              strict=True):
            write_bytes_atomic(os.path.join(run_dir, name), data)
    if prepared.markdown is not None:
        write_bytes_atomic(os.path.join(run_dir, "report.md"), prepared.markdown)
    if prepared.html is not None:
        _write_page(run_dir, prepared.html)
    if junit_xml and prepared.junit is not None:
        os.makedirs(os.path.dirname(os.path.abspath(junit_xml)), exist_ok=True)
        write_bytes_atomic(junit_xml, prepared.junit)
    if prepared.failure is not None:
        raise prepared.failure
    return prepared.summary


def _created_at(run_dir: str) -> str | None:
    """When the run began, as the run.json written at its start says (the summary
    replacing it kept no time: `ce runs` then listed the run as started when it ended)."""
    import json

    try:
        with open(os.path.join(run_dir, "run.json"), "rb") as fh:
            value = json.load(fh).get("created_at")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def write_rescore_reports(out: str, records: list, run_id: str, rescored_from: str,
                          status: str = "complete", planned: int | None = None,
                          min_pass_rate: float | None = None, error: str | None = None,
                          ran_in: str | None = None) -> dict[str, Any]:
    """A re-score's run.json, parquet files, report.md and report.html (as `ce run`
    writes them: one that could not be made is said, the re-score goes on); run.json's
    summary. `status`,
    `planned` and `min_pass_rate`: the re-scored run's own (interrupted or incomplete: not
    a pass; its `--min-pass-rate` gate). `error`: why trials of it were not re-scored.
    `ran_in`: the run the trials ran in, when `rescored_from` is a re-score of it (the
    run a resume continues: a re-score is no `ce run` directory)."""
    from ce_runtime import report
    from ce_runtime.report.summary import with_run_state
    from ce_runtime.store.atomic import write_bytes_atomic, write_json_atomic

    gates = report.suite_metrics(records)
    config: dict[str, Any] = {"rescored_from": rescored_from}
    if ran_in is not None and ran_in != rescored_from:
        config["ran_in"] = ran_in
    if min_pass_rate is not None:
        config["min_pass_rate"] = min_pass_rate
    summary = report.summary(records, gates, run_id, config)
    with_run_state(summary, status, planned, error=error)
    write_json_atomic(os.path.join(out, "run.json"), summary)
    if records:
        report.write_parquet(out, records)
    write_bytes_atomic(os.path.join(out, "report.md"),
                       report.render_markdown(summary, records, gates).encode())
    if records:
        note = None if len(records) <= RESCORE_DETAIL_TRIALS else (
            f"A re-score of {len(records):,} trials: its page leaves each trial's detail "
            f"out (reading {len(records):,} trials' files would take about as long as "
            f"re-grading them). `ce report {out} -f html` makes the page with it; "
            f"`ce explain {out}/TRIAL` explains one trial.")
        write_html(out, (records, gates, summary), detail_note=note)
    return summary


def write_html(run_dir: str, computed: tuple | None = None,
               detail_note: str | None = None) -> None:
    """report.html beside report.md, made as `ce report RUN -f html` makes it: from the
    run's files, or from `computed` (records, gates, summary) just written, reshaped as
    `ce report` reads them back (the same page, tested; `detail_note`: without the
    trials' detail, saying this). A failure is said and the run goes on: the results are
    all written by now."""
    _write_page(run_dir, _html(run_dir, computed, detail_note=detail_note))


def _write_page(run_dir: str, page: bytes | str) -> None:
    """report.html written, or the warning `_html` made instead of it said (as one
    whose write failed is: the run goes on)."""
    from ce_runtime.store.atomic import write_bytes_atomic

    if isinstance(page, str):
        _warn(page)
        return
    try:
        write_bytes_atomic(os.path.join(run_dir, "report.html"), page)
    except OSError as exc:
        _warn(f"warning: report.html not written ({exc})")


def _html(run_dir: str, computed: tuple | None = None, run_json: bytes | None = None,
          reads: Any = None, detail_note: str | None = None) -> bytes | str:
    """report.html's bytes (see `write_html`; `run_json`: run.json's bytes, as they are
    or will be written), or the warning to say instead."""
    from ce_runtime.report import frames
    from ce_runtime.report.render import render, render_loaded
    from ce_runtime.report.rundir import RunDirError, run_data

    try:
        if computed is None:
            return render(run_dir, "html").encode()
        records, gates, summary = computed
        read_back = run_data(run_dir, frames.trials_frame(records),
                             frames.results_frame(records), _read_back(run_dir, run_json))
        return render_loaded(read_back, "html", summary, gates, reads, detail_note).encode()
    except (RunDirError, OSError) as exc:
        return f"warning: report.html not written ({exc})"
    except Exception as exc:  # a bug in the HTML report must not cost the run its exit
        if os.environ.get("CE_DEBUG"):
            raise
        return (f"warning: report.html not written: a bug in ce ({type(exc).__name__}: "
                f"{exc}); `ce report {run_dir} -f html` retries it")


def _read_back(run_dir: str, run_json: bytes | None) -> dict[str, Any] | None:
    """run.json as `ce report` reads it back (None: from the file)."""
    if run_json is None:
        return None
    from ce_runtime.report.rundir import RunDirError
    from ce_runtime.store.archive import DamagedArchive, load_archived_json

    path = os.path.join(os.path.realpath(run_dir), "run.json")
    try:
        return load_archived_json(path, run_json)
    except DamagedArchive as exc:
        raise RunDirError(exc.path, exc.why) from None


def warm_up() -> None:
    """The report of one made-up trial, in memory only: the first call of each step
    (Polars' query engine, the parquet writer, the page's renderer) costs ~15 ms more
    than the next; the report worker pays it while the trials run, not at the run's end."""
    from ce_runtime import report
    from ce_runtime.report import frames
    from ce_runtime.report.html import page_data
    from ce_runtime.report.html_page import render_html
    from ce_runtime.report.rundir import RunData, records_from_frames
    from ce_runtime.store.record import CriterionRecord, Status, TrialRecord

    records = [TrialRecord(
        trial_id="warm-up", variant_id="default", task_id="warm-up", status=Status.SUCCESS,
        success=True, weighted_score=1.0, duration_s=0.0,
        criteria=[CriterionRecord(id="c0", type="file_exists", kind="binary", score=1.0,
                                  pass_threshold=0.9, passed=True, weight=1.0,
                                  gating=True)])]
    gates = report.suite_metrics(records)
    summary = report.summary(records, gates, "warm-up", {})
    report.render_markdown(summary, records, gates)
    trials, results = frames.trials_frame(records), frames.results_frame(records)
    frames.parquet_bytes(trials)
    frames.parquet_bytes(results)
    data = RunData("", {}, trials, results, records_from_frames(trials, results))
    render_html(page_data(data, summary, gates, details=False))


def _warn(message: str) -> None:
    """A line on stderr (not click: the report worker never loads it)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
