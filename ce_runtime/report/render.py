"""A run directory's report in one format, computed from its results (`ce report`, and
report.html at the end of `ce run`)."""

from __future__ import annotations

import json

FORMATS = ("md", "json", "junit", "html", "sarif")


def render(run: str, fmt: str) -> str:
    """The report of the run directory `run` in format `fmt` (see FORMATS)."""
    from ce_runtime import report
    from ce_runtime.report.rundir import load_run

    data = load_run(run)
    gates = report.suite_metrics(data.records)
    summary = report.summary(data.records, gates, data.run_id, data.run_json.get("args"))
    if "status" in data.run_json:  # a re-score's run.json has no trials_planned
        from ce_runtime.report.summary import with_run_state

        error, unrun = data.run_json.get("error"), data.run_json.get("unrun_trials")
        files = data.run_json.get("unrun_task_files")
        with_run_state(summary, data.run_json["status"], data.run_json.get("trials_planned"),
                       data.run_json.get("lost_trials", ()),
                       error if isinstance(error, str) else None,
                       data.run_json.get("created_at"),
                       [i for i in unrun if isinstance(i, str)]
                       if isinstance(unrun, list) else (),
                       {k: v for k, v in files.items() if isinstance(v, str)}
                       if isinstance(files, dict) else None)
    from ce_runtime.execute.attempts import retried

    if (again := retried(data.run_dir, data.records)) is not None:  # --retry-errors
        summary["retried"] = again
    return render_loaded(data, fmt, summary, gates)


def render_loaded(data, fmt: str, summary: dict, gates: list, reads=None,
                  detail_note: str | None = None) -> str:
    """`render` of a run already read (`data`: a rundir.RunData) whose summary and suite
    gates are computed: `ce run`'s end has them, and recomputing them from the parquet
    just written doubled its report time. `reads`: the HTML's trial files read ahead
    (html_trial.TrialReads). `detail_note`: the page is made without per-trial detail,
    and says this instead."""
    from ce_runtime import report

    if fmt == "md":
        return report.render_markdown(summary, data.records, gates)
    if fmt == "json":
        return json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n"
    if fmt == "junit":
        return report.render_junit(data.records, gates, summary, run_dir=data.run_dir)
    if fmt == "sarif":  # as `ce run --sarif` writes it (URIs relative to the current dir)
        from ce_lang.api import __version__
        from ce_runtime.report.sarif import render_sarif

        return render_sarif(data.records, __version__, gates=gates, run_dir=data.run_dir,
                            run_state=summary)
    from ce_runtime.report.html import page_data
    from ce_runtime.report.html_page import render_html

    return render_html(page_data(data, summary, gates, reads=reads, detail_note=detail_note))
