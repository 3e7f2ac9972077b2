"""Grading a plan from files: the trace on disk, the workspace directory, the task dir."""

from __future__ import annotations

import os

from ce_lang.api import Plan, program_for
from ce_runtime.grade.host import Host
from ce_runtime.grade.interpreter import Grader, GradeResult
from ce_runtime.trace.events import TraceReadResult, load_trace, read_trace
from ce_runtime.trace.view import build_view


def reference_paths(plan: Plan, task_dir: str) -> tuple[str, ...]:
    """Host paths of the task's reference (file and directory), for sandboxes to hide."""
    ref = plan.reference
    if ref is None:
        return ()
    return tuple(os.path.normpath(os.path.join(task_dir, p))
                 for p in (ref.directory, ref.file) if p)


def host_for(plan: Plan, workspace: str, task_dir: str, trace_view=None, judge=None,
             runner=None, verdicts=None) -> Host:
    ref = plan.reference
    ref_file = ref_dir = ref_code = None
    if ref is not None:
        ref_code = ref.code
        if ref.file:
            ref_file = os.path.normpath(os.path.join(task_dir, ref.file))
        if ref.directory:
            ref_dir = os.path.normpath(os.path.join(task_dir, ref.directory))
    return Host(workspace=workspace, task_dir=task_dir,
                ignore_patterns=tuple(plan.ignore_patterns), reference_file=ref_file,
                reference_code=ref_code, reference_dir=ref_dir, trace=trace_view, judge=judge,
                runner=runner, verdicts=verdicts)


def evidence_of(plan: Plan, instances: list, result: GradeResult, host: Host) -> dict:
    """evidence.json's `criteria` for a graded trial, as the run and a rescore both keep
    it: the host's (commands, judges) and, for each criterion that did not pass, the
    lines `ce explain` prints first (the explainer is loaded only then)."""
    if all(c.passed or c.disabled for c in result.criteria):
        return host.evidence
    from ce_runtime.grade.explain import failure_evidence, with_failure_evidence

    return with_failure_evidence(host.evidence,
                                 failure_evidence(plan, instances, result, host))


def grade_files(plan: Plan, task_dir: str, workspace: str, trace_path: str | None,
                judge=None, stopped_early: bool = False, runner=None,
                stdlib: dict[str, str] | None = None, verdicts=None, *,
                strict_trace: bool = False, plan_hash: str | None = None,
                ) -> tuple[Grader, GradeResult, Host, TraceReadResult | None]:
    """`stopped_early`: the trial was stopped by its armed criteria (from its task.json),
    so it is gated on those only. `stdlib`: the archived standard criteria the plan was
    compiled against (default: today's). The plan's program is built once per process:
    re-grading N trials of one plan checks its criteria once. `strict_trace` (archived
    trials): a damaged frame raises TraceDamaged; else the readable prefix is graded and
    the result says what was ignored (a trace a crashed run left)."""
    read = (load_trace if strict_trace else read_trace)(trace_path) if trace_path else None
    view = build_view(read.events) if read is not None else None
    stopped_early = stopped_early and bool(plan.early_stop.armed)  # else: gate on all
    grader = Grader(plan, program=program_for(plan, stdlib, plan_hash=plan_hash))
    if judge is None:
        from ce_runtime.grade.judge import judge_from_env

        judge = judge_from_env()
    host = host_for(plan, workspace, task_dir, view, judge, runner, verdicts)
    result = grader.grade(host, stopped_early=stopped_early, armed=plan.early_stop.armed)
    return grader, result, host, read
