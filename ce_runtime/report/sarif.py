"""SARIF 2.1.0 for a run's failures: what GitHub code scanning (`upload-sarif`) and other
SARIF viewers show as alerts on the task files.

One result per failed criterion of a graded trial (the criteria report.md lists under
Failures: gating ones that failed, and any that failed with an error), one per ERROR
trial (with its failed criteria, if it was graded), one per trial that failed without a
failing criterion to blame (TIMEOUT and the other run limits), and one per failed suite
gate (`suite_thresholds` below their minimum over a
dataset's rows: a run that fails only there exits 1 too). A rule per criterion type
(`ce/run_command`, ...) plus `ce/trial-error`, `ce/trial-status` and `ce/suite-gate`.
level: `error` for a gating criterion, a trial error and a suite gate, `warning` for a
non-gating criterion that errored and for a run limit. The location is
the task file (relative to `base` when it is under it, else a file:// URI) and, when the
file still parses, the line of the criterion's entry under `success_criteria`
(criterion ids `c<N>` are the N-th entry); line 1 otherwise. The run's `invocations`
say whether it finished (`executionSuccessful`), and if not why.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ce_runtime.report.rundir import cwd_relative, failure_findings, task_file_path
from ce_runtime.report.text import failed_criteria, fmt_below
from ce_runtime.store.record import NOT_FAILED_STATUSES, Status, TrialRecord, as_records

if TYPE_CHECKING:
    from ce_runtime.report.gates import SuiteGate

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _criterion_lines(task_file: str | None) -> dict[int, int]:
    """{entry index: 1-based line} of the file's `success_criteria` list, {} if unknown."""
    if not task_file or not os.path.isfile(task_file):
        return {}
    try:
        import yaml

        with open(task_file, encoding="utf-8") as fh:
            node = yaml.compose(fh)
    except Exception:  # a file that no longer parses: no line, the result stays
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    for key, value in node.value:
        if getattr(key, "value", None) == "success_criteria" and \
                isinstance(value, yaml.SequenceNode):
            return {i: item.start_mark.line + 1 for i, item in enumerate(value.value)}
    return {}


def _uri(path: str | None, base: str) -> str:
    """A URI reference, percent-encoded: a space is not allowed in one and `#` or `?`
    in a file name would start a fragment or a query, naming another file."""
    from urllib.parse import quote

    if not path:
        return "unknown-task-file"
    rel = cwd_relative(path, base)
    if os.path.isabs(rel):
        return pathlib.Path(rel).as_uri()
    return quote(rel, safe="/")


def _index(criterion_id: Any) -> int | None:
    if isinstance(criterion_id, str) and criterion_id[:1] == "c" and criterion_id[1:].isdigit():
        return int(criterion_id[1:])
    return None


def render_sarif(records: Sequence[TrialRecord | dict[str, Any]], tool_version: str,
                 base: str | None = None, gates: Sequence[SuiteGate] | None = None,
                 run_dir: str | None = None, run_state: dict[str, Any] | None = None
                 ) -> str:
    """The SARIF document for `records` (task.json-shaped, as `ce run` and `ce report`
    hold them). `base`: the directory URIs are relative to (default: the current one).
    `gates`: the suite gates (default: computed from `records`). `run_dir`: the run they
    are read from, where each task file's directory is recorded
    (`rundir.task_file_path`). `run_state`: run.json (or the summary `ce report` made
    of it), whose `status` says whether the run finished (`invocation`)."""
    base = os.path.abspath(base or os.getcwd())
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    lines_cache: dict[str, dict[int, int]] = {}
    paths: dict[str | None, str | None] = {}

    def rule(rule_id: str, text: str) -> int:
        if rule_id not in rules:
            rules[rule_id] = {"id": rule_id, "shortDescription": {"text": text}}
        return list(rules).index(rule_id)

    def add(rec: TrialRecord, rule_id: str, rule_text: str, level: str, message: str,
            key: str, criterion_id: Any = None,
            properties: dict[str, Any] | None = None) -> None:
        if rec.task_file not in paths:
            paths[rec.task_file] = task_file_path(rec.task_file, rec.trial_id, run_dir)
        task_file = paths[rec.task_file]
        if task_file not in lines_cache:
            lines_cache[task_file] = _criterion_lines(task_file)
        idx = _index(criterion_id)
        line = lines_cache[task_file].get(idx, 1) if idx is not None else 1
        results.append({
            "ruleId": rule_id, "ruleIndex": rule(rule_id, rule_text), "level": level,
            "message": {"text": message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": _uri(task_file, base)},
                "region": {"startLine": line}}}],
            "partialFingerprints": {"ceTrialCriterion/v1": key},
            "properties": properties or {
                "trial_id": rec.trial_id, "variant_id": rec.variant_id,
                "task_id": rec.task_id, "status": str(rec.status),
                "weighted_score": rec.weighted_score},
        })

    for rec in as_records(records):
        status = rec.status
        if status in NOT_FAILED_STATUSES and not failed_criteria(rec):
            continue
        trial = rec.trial_id
        failures = failed_criteria(rec)
        found = failure_findings(run_dir, trial) if failures else {}
        for c in failures:
            ctype = c.type or "criterion"
            text = (f"{trial}: criterion {c.id} {ctype}"
                    + (f" ({c.description})" if c.description else "")
                    + f" scored {fmt_below(c.score, c.pass_threshold)}")
            if c.error:
                text += f"; error: {c.error}"
            if found.get(c.id):  # what the grader found, as the alert's reason
                text += ": " + "; ".join(found[c.id])
            add(rec, f"ce/{ctype}", f"A {ctype} criterion failed", "error"
                if c.gating else "warning", text, f"{trial}#{c.id}", c.id)
        if status == Status.ERROR:  # why, as report.md and JUnit say it (the agent's end)
            # also beside its failed criteria: an agent that crashed after writing files
            # is graded, and its criteria alone said nothing of the crash
            why = rec.error_reason
            add(rec, "ce/trial-error", "A trial ended in an error", "error",
                f"{trial}: {Status.ERROR}" + (f": {why}" if why else ""), f"{trial}#error")
        elif failures or status in NOT_FAILED_STATUSES:
            continue
        else:
            outcome = rec.agent_outcome
            detail = (outcome.detail or outcome.reason) if outcome is not None else ""
            add(rec, "ce/trial-status", "A trial stopped at a run limit or failed", "warning",
                f"{trial}: {status}" + (f" ({detail})" if detail else ""), f"{trial}#status")
    from ce_runtime.report.gates import below_text, suite_metrics

    if gates is None:
        gates = suite_metrics(records)
    by_suite = {(r.variant_id, r.suite_id): r for r in as_records(records) if r.suite_id}
    for g in gates:
        rec = by_suite.get((g.variant, g.suite_id))
        if g.passed or rec is None:
            continue
        add(rec, "ce/suite-gate", "A suite gate (suite_thresholds) failed", "error",
            f"suite gate {g.name} failed: {below_text(g)}", f"{g.name}#suite-gate", g.criterion,
            {"variant_id": g.variant, "suite_id": g.suite_id, "criterion_id": g.criterion,
             "failed": list(g.failed), "metrics": dict(g.metrics)})
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ce", "version": tool_version,
                                "rules": list(rules.values())}},
            "results": results,
            **({"invocations": [invocation(run_state)]}
               if run_state and run_state.get("status") else {}),
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def invocation(run_state: dict[str, Any]) -> dict[str, Any]:
    """SARIF's `invocation` of the run (2.1.0, 3.20): `executionSuccessful` true for a
    run whose every planned trial ran (run.json `complete`: its trials may have failed,
    which its results say), false with the reason as an error notification otherwise
    (interrupted by Ctrl-C or SIGTERM, an executor that did not start, a lost trial):
    its results are then those of the trials that ran, and a consumer must not take
    them for the run's (SARIF's appendix on detecting incomplete result sets)."""
    status = run_state.get("status")
    if status == "complete":
        return {"executionSuccessful": True}
    reasons = [r for r in run_state.get("exit_reasons") or () if isinstance(r, str)]
    error = run_state.get("error")
    why = reasons[0] if status in ("interrupted", "incomplete") and reasons else \
        error if isinstance(error, str) and error else f"the run is {status}"
    return {"executionSuccessful": False, "toolExecutionNotifications": [{
        "level": "error", "message": {"text": why},
        "descriptor": {"id": f"ce/run-{status}"}}]}


def write_run_sarif(run_dir: str, path: str) -> int:
    """SARIF of the run at `run_dir` (read back from its parquet) written to `path`;
    the number of results."""
    from ce_lang.api import __version__
    from ce_runtime.report.rundir import load_run
    from ce_runtime.store.atomic import write_bytes_atomic

    data = load_run(run_dir)
    text = render_sarif(data.records, __version__, run_dir=data.run_dir,
                        run_state=data.run_json)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_bytes_atomic(path, text.encode())
    return len(json.loads(text)["runs"][0]["results"])


def sarif_after_run(run_dir: str, path: str, quiet: bool = False) -> None:
    """`ce run --sarif PATH`: write it once the run is finished; a file that cannot be
    written, or a run that cannot be read back, is one line on stderr and exit 1. The
    line saying it was written is progress: not with -q."""
    import sys

    import click

    from ce_runtime.report.rundir import RunDirError

    try:
        n = write_run_sarif(run_dir, path)
    except RunDirError as exc:
        click.echo(f"ce run: no SARIF written: {exc}", err=True)
        sys.exit(1)
    except OSError as exc:
        click.echo(f"ce run: cannot write {path}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    if not quiet:
        click.echo(f"SARIF: {path} ({n} result(s))", err=True)
