"""JUnit XML for CI: a testsuite per variant, a testcase per trial, per thresholded
suite gate and per variant's `--min-pass-rate` gate.

A testcase names its task file (`file`, as pytest's xunit1 family does: GitLab links the
test to it; Jenkins ignores it): a trial's, run or not (an unrun trial's is the one the
run planned it from, run.json's `unrun_task_files`), and a suite gate's (its suite's
task file). The `--min-pass-rate` gate has none: it is a verdict on all of a variant's
trials, of every task file, so no one file is its place (nor is the run-level error's,
a run that did not run every planned trial)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from ce_runtime.report.frames import Records
from ce_runtime.report.gates import SuiteGate, below_text
from ce_runtime.report.rundir import cwd_relative, failure_findings, task_file_path
from ce_runtime.report.text import failed_criteria, fmt_below, fmt_metric, fmt_score
from ce_runtime.store.record import CriterionRecord, Status, TrialRecord, as_records

_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: Any) -> str:
    """Text XML 1.0 can carry (terminal escapes and other control characters dropped)."""
    return _XML_INVALID.sub("", "" if text is None else str(text))


def _criterion_text(c: CriterionRecord, found: Sequence[str] = ()) -> str:
    line = f"{c.id} {c.type}: score {fmt_below(c.score, c.pass_threshold)}"
    if c.description:
        line += f" ({c.description})"
    if c.error:
        line += f"\n  error: {c.error}"
    return line + "".join(f"\n  {x}" for x in found)  # what the grader found


def _outcome(tc: Any, tag: str, message: str, detail: str = "", **attrs: str) -> None:
    """The testcase's `<failure>`, `<error>` or `<skipped>`: `message` in the attribute
    (Jenkins' "Error Message") and as the first line of the text, the detail beneath it.
    GitLab's test report shows the text alone: an element with only the attribute (an
    ERROR trial, a gate, a skipped trial) was shown there with no reason at all."""
    import xml.etree.ElementTree as ET

    el = ET.SubElement(tc, tag, **attrs, message=_x(message))
    el.text = _x(message + (f"\n{detail}" if detail else ""))


def _earlier_attempts(tc: Any, status: str, attempts: Sequence[dict[str, Any]]
                      ) -> list[str]:
    """A trial run again after an ERROR (`ce run --retry-errors`, run.json's `retried`):
    each earlier attempt as Maven Surefire's rerun convention has it (`flakyError` when
    the latest attempt succeeded, else `rerunError`: CI test reports show such a test
    as flaky), and a line for the testcase's system-out. Without them a trial that
    ERRORed and then passed looked like any pass."""
    import xml.etree.ElementTree as ET

    tag = "flakyError" if status == Status.SUCCESS else "rerunError"
    for a in attempts:
        ET.SubElement(tc, tag, type=_x(a.get("status") or Status.ERROR.value), message=_x(
            f"attempt {a.get('n')}: {a.get('error') or a.get('status')}"))
    if not attempts:
        return []
    return [f"ran again after an ERROR: this is attempt {len(attempts) + 1}; the earlier "
            f"attempts are kept in RUN/{os.path.dirname(str(attempts[0].get('dir') or 'attempts'))}/"]


def render_junit(records: Records, gates: Sequence[SuiteGate],
                 summary: dict[str, Any] | None = None, run_dir: str | None = None) -> str:
    """JUnit XML: a testsuite per variant, a testcase per trial (failure for a failed
    verdict or a run limit, error for ERROR, skipped for NOT_GRADED) and one per suite
    gate with thresholds (classname `suite.<suite_id>`, name `VARIANT/SUITE/CRITERION
    suite_thresholds`). With the run's `summary`, one per variant for `--min-pass-rate`
    (classname `gate`, name `VARIANT/--min-pass-rate RATE`), and a run
    that did not run every planned trial (Ctrl-C, a lost executor) adds a testcase in
    error in a testsuite `(run)`, and a skipped testcase for each trial that did not run
    (its `unrun_trials`), in its variant's testsuite: without them the file listed the
    trials that ran, all green, and nothing of the others. With `run_dir`, a failed
    criterion's text quotes what the grader found (`rundir.failure_findings`) and each
    trial's and gate's testcase names its task file (`file`: the module's note); an
    unrun trial's names the one its `unrun_task_files` gives."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="ce")
    suites: dict[str, ET.Element] = {}
    counts: dict[str, dict[str, float]] = {}

    def suite(variant: str) -> ET.Element:
        if variant not in suites:
            suites[variant] = ET.SubElement(root, "testsuite", name=_x(variant))
            counts[variant] = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0,
                               "time": 0.0}
        return suites[variant]

    retried = ((summary or {}).get("retried") or {}).get("by_trial") or {}
    files: dict[str | None, dict[str, str]] = {}

    def file_of(rec: TrialRecord) -> dict[str, str]:
        """The testcase's `file`: the task file, relative to the current directory as
        the SARIF's URIs are (GitLab links the test to it; Jenkins ignores it)."""
        if rec.task_file not in files:
            path = task_file_path(rec.task_file, rec.trial_id, run_dir)
            files[rec.task_file] = {"file": _x(cwd_relative(path))} if path else {}
        return files[rec.task_file]

    for rec in as_records(records):
        variant = rec.variant_id or "default"
        ts = suite(variant)
        c = counts[variant]
        duration = float(rec.duration_s or 0.0)
        c["tests"] += 1
        c["time"] += duration
        tc = ET.SubElement(ts, "testcase", classname=_x(rec.task_id),
                           name=_x(rec.trial_id), **file_of(rec), time=f"{duration:.3f}")
        status = rec.status
        failures = failed_criteria(rec)
        found = failure_findings(run_dir, rec.trial_id) if failures else {}
        body = "\n".join(_criterion_text(f, found.get(f.id, ())) for f in failures)
        if status == Status.NOT_GRADED:
            c["skipped"] += 1
            _outcome(tc, "skipped", "not graded")
        elif status == Status.ERROR:
            c["errors"] += 1
            outcome = rec.agent_outcome
            message = rec.error_reason if rec.model_outage else rec.error or (
                f"agent {outcome.reason}: {outcome.detail or ''}".rstrip(": ")
                if outcome is not None and outcome.reason else "trial error")
            _outcome(tc, "error", message, body, type=Status.ERROR.value)
        elif status != Status.SUCCESS:  # a failed verdict, a run limit (or a status unknown)
            c["failures"] += 1
            outcome = rec.agent_outcome
            limit = (f"{outcome.reason}: {outcome.detail}".rstrip(": ")
                     if outcome is not None and outcome.reason and status != Status.FAILURE
                     else None)  # which run limit stopped it
            summary_line = f"{status}: " + (", ".join(str(f.id) for f in failures)
                                            or rec.error or limit or "no criterion failed")
            _outcome(tc, "failure", summary_line, body, type=_x(status))
        notes = _earlier_attempts(tc, status, retried.get(rec.trial_id) or ())
        if rec.stopped_early:
            notes.append(f"stopped early ({rec.early_stop_reason or 'decided'}); "
                         "non-armed criteria are advisory, not gated")
        notes.append(f"status {status}, weighted score {fmt_score(rec.weighted_score)}")
        ET.SubElement(tc, "system-out").text = _x("\n".join(notes))

    state = (summary or {}).get("status")
    if state in ("interrupted", "incomplete"):
        why = summary.get("error") or f"the run was {state}"
        unrun_files = summary.get("unrun_task_files") or {}
        for trial_id in summary.get("unrun_trials") or ():
            variant, task = _variant_and_task(trial_id)
            ts = suite(variant)
            counts[variant]["tests"] += 1
            counts[variant]["skipped"] += 1
            path = unrun_files.get(trial_id.rpartition("/")[0])
            tc = ET.SubElement(ts, "testcase", classname=_x(task), name=_x(trial_id),
                               **({"file": _x(cwd_relative(path))} if path else {}),
                               time="0.000")
            _outcome(tc, "skipped", f"not run: {why} (`ce run --resume RUN` runs it)")

    by_suite = {(r.variant_id, r.suite_id): r for r in as_records(records) if r.suite_id}
    for g in gates:
        if not g.thresholds:
            continue  # metrics only, nothing to pass or fail
        rec = by_suite.get((g.variant, g.suite_id))
        ts = suite(g.variant)
        c = counts[g.variant]
        c["tests"] += 1
        # the variant leads the name, as in a trial's: Jenkins knows a test by classname
        # and name, and every variant has the same gate
        tc = ET.SubElement(ts, "testcase", classname=_x(f"suite.{g.suite_id}"),
                           name=_x(f"{g.name} suite_thresholds"),
                           **(file_of(rec) if rec is not None else {}), time="0.000")
        if not g.passed:
            c["failures"] += 1
            _outcome(tc, "failure", below_text(g), type="SUITE_GATE")
        shown = {k: v for k, v in g.metrics.items() if k != "f1.macro"}
        ET.SubElement(tc, "system-out").text = _x(
            "\n".join(f"{k} = {fmt_metric(v)}" for k, v in shown.items()))

    rate = (summary or {}).get("min_pass_rate")
    gated = (summary or {}).get("variants") or {} if rate is not None else {}
    for variant, v in gated.items():
        # `--min-pass-rate` decides the exit status: without its testcase a CI test
        # report showed failed trials and no reason why the run passed or failed
        ts = suite(variant)
        c = counts[variant]
        c["tests"] += 1
        ok, n = (v.get("by_status") or {}).get(Status.SUCCESS.value, 0), v.get("trials") or 0
        tc = ET.SubElement(ts, "testcase", classname="gate",
                           name=_x(f"{variant}/--min-pass-rate {rate:g}"), time="0.000")
        share = f"{ok} of {n} trial(s) succeeded ({100 * ok / n if n else 0:.1f}%)"
        if n and ok / n < rate:
            c["failures"] += 1
            _outcome(tc, "failure", f"{share}, below --min-pass-rate {rate:g}",
                     type="MIN_PASS_RATE")
        else:
            ET.SubElement(tc, "system-out").text = share

    if state in ("interrupted", "incomplete"):
        run = "(run)"  # no variant id has parentheses
        suite(run)
        counts[run]["tests"] += 1
        counts[run]["errors"] += 1
        tc = ET.SubElement(suites[run], "testcase", classname="run",
                           name="every planned trial ran", time="0.000")
        reasons = summary.get("exit_reasons") or [f"the run was {state}"]
        _outcome(tc, "error", reasons[0], "\n".join(reasons[1:]), type=state.upper())

    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for variant, ts in suites.items():
        c = counts[variant]
        for k in ("tests", "failures", "errors", "skipped"):
            ts.set(k, str(int(c[k])))
            total[k] += c[k]
        ts.set("time", f"{c['time']:.3f}")
        total["time"] += c["time"]
    for k in ("tests", "failures", "errors", "skipped"):
        root.set(k, str(int(total[k])))
    root.set("time", f"{total['time']:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def _variant_and_task(trial_id: str) -> tuple[str, str]:
    """A trial id's variant and task (`VARIANT/TASK[/ROW]/NN`, ce_lang's Trial), as its
    record would have them."""
    variant, _, rest = trial_id.partition("/")
    task = rest.rpartition("/")[0] or rest
    return (variant, task) if rest else ("default", trial_id)


def junit_counts(path: str) -> str:
    """What a written JUnit file holds, for the line `ce run --junit-xml` prints: its
    root's counts (the first element only: the file is not read whole)."""
    import xml.etree.ElementTree as ET

    with open(path, "rb") as fh:
        _, root = next(ET.iterparse(fh, events=("start",)))
    counts = [f"{root.get('tests', '0')} test(s)"]
    counts += [f"{root.get(k)} {word}" for k, word in (
        ("failures", "failure(s)"), ("errors", "error(s)"), ("skipped", "skipped"))
        if root.get(k, "0") != "0"]
    return ", ".join(counts)
