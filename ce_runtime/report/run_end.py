"""The run's end: run.json's summary, trials.parquet and results.parquet, report.md,
report.html and JUnit, written from the trial records (and a re-score's: run.json, the
parquet files and report.md).

`ce run` has a report worker (ce_runtime/cli/report_worker.py) do this: a process started
with the run, which imports Polars while the trials run. Without one (it could not start,
it died, or CE_REPORT_WORKER=0) `ce run` calls `write_run_reports` itself, so both write
the same files the same way."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any


def write_run_reports(run_dir: str, run_id: str, config: dict[str, Any], records: list,
                      total: int, interrupted: bool, junit_xml: str | None,
                      lost: list[dict[str, Any]], error: str | None = None
                      ) -> dict[str, Any]:
    """Every report file of the run; run.json's summary (what `ce run` prints from).
    `error`: what left trials unrun besides a signal (an executor that did not start)."""
    from ce_runtime import report
    from ce_runtime.report.summary import with_run_state
    from ce_runtime.store.atomic import write_bytes_atomic
    from ce_runtime.store.run_json import write_run_json

    gates = report.suite_metrics(records)
    summary = report.summary(records, gates, run_id, config)
    status = "interrupted" if interrupted else \
        "incomplete" if lost or len(records) < total else "complete"
    with_run_state(summary, status, total, lost, error, _created_at(run_dir))
    write_run_json(run_dir, summary)
    if records:
        report.write_parquet(run_dir, records)
    write_bytes_atomic(os.path.join(run_dir, "report.md"),
                       report.render_markdown(summary, records, gates).encode())
    if records:
        write_html(run_dir, (records, gates, summary))
    if junit_xml:
        os.makedirs(os.path.dirname(os.path.abspath(junit_xml)), exist_ok=True)
        write_bytes_atomic(junit_xml, report.render_junit(records, gates, summary).encode())
    return summary


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
                          min_pass_rate: float | None = None) -> dict[str, Any]:
    """A re-score's run.json, parquet files and report.md; run.json's summary. `status`,
    `planned` and `min_pass_rate`: the re-scored run's own (interrupted or incomplete: not
    a pass; its `--min-pass-rate` gate)."""
    from ce_runtime import report
    from ce_runtime.report.summary import with_run_state
    from ce_runtime.store.atomic import write_bytes_atomic, write_json_atomic

    gates = report.suite_metrics(records)
    config: dict[str, Any] = {"rescored_from": rescored_from}
    if min_pass_rate is not None:
        config["min_pass_rate"] = min_pass_rate
    summary = report.summary(records, gates, run_id, config)
    with_run_state(summary, status, planned)
    write_json_atomic(os.path.join(out, "run.json"), summary)
    if records:
        report.write_parquet(out, records)
    write_bytes_atomic(os.path.join(out, "report.md"),
                       report.render_markdown(summary, records, gates).encode())
    return summary


def write_html(run_dir: str, computed: tuple | None = None) -> None:
    """report.html beside report.md, made as `ce report RUN -f html` makes it: from the
    run's files, or from `computed` (records, gates, summary) just written, reshaped as
    `ce report` reads them back (the same page, tested). A failure is said and the run
    goes on: the results are all written by now."""
    from ce_runtime.report import frames
    from ce_runtime.report.render import render, render_loaded
    from ce_runtime.report.rundir import RunDirError, run_data
    from ce_runtime.store.atomic import write_bytes_atomic

    path = os.path.join(run_dir, "report.html")
    try:
        if computed is None:
            page = render(run_dir, "html")
        else:
            records, gates, summary = computed
            read_back = run_data(run_dir, frames.trials_frame(records),
                                 frames.results_frame(records))
            page = render_loaded(read_back, "html", summary, gates)
        write_bytes_atomic(path, page.encode())
    except (RunDirError, OSError) as exc:
        _warn(f"warning: report.html not written ({exc})")
    except Exception as exc:  # a bug in the HTML report must not cost the run its exit
        if os.environ.get("CE_DEBUG"):
            raise
        _warn(f"warning: report.html not written: a bug in ce ({type(exc).__name__}: "
              f"{exc}); `ce report {run_dir} -f html` retries it")


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
