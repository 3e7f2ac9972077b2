"""Re-scoring archived trials offline: the same (or a new) plan over each trial's recorded
trace and workspace snapshot, without running the agent again.

Statuses the agent's run decided (TIMEOUT, budgets, MAX_TURNS_EXHAUSTED, an ERROR before
grading) are kept; SUCCESS / FAILURE follow the new grade.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

from ce_lang.api import Plan, plan_from_json
from ce_runtime.store.archive import load_json, restore_workspace

RUN_STATUSES = ("TIMEOUT", "MAX_TURNS_EXHAUSTED", "TOKEN_BUDGET_EXCEEDED",
                "COST_BUDGET_EXCEEDED")


def trial_dirs(run_dir: str) -> list[str]:
    """Every trial directory of a run (those with a task.json), sorted."""
    out = []
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if d not in ("plans", "objects", "rescored") and
                         not d.startswith("."))
        if "task.json" in files:
            out.append(root)
    return sorted(out)


def rescore_trial(trial_dir: str, run_dir: str, plan: Plan | None = None,
                  judge: Any = None, runner_for: Any = None) -> dict[str, Any]:
    """A new task.json record for one archived trial (nothing on disk is changed).
    `runner_for(workspace, task_dir, reference)` is a context manager giving the
    sandbox that runs the criteria's commands (the caller chooses the driver)."""
    from ce_runtime.grade.grading import grade_files, reference_paths
    from ce_runtime.grade.host import InfrastructureError

    old = load_json(os.path.join(trial_dir, "task.json"))
    if plan is None:
        plan = plan_from_json(load_json(os.path.join(run_dir, "plans",
                                                     f"{old['plan_hash']}.json"))["plan"])
    trace = os.path.join(trial_dir, "trace.msgpack")
    manifest = load_json(os.path.join(trial_dir, "workspace.json"))
    record = dict(old)
    record["rescored_from"] = os.path.relpath(trial_dir, run_dir)
    record["previous"] = {"status": old.get("status"),
                          "weighted_score": old.get("weighted_score")}
    with tempfile.TemporaryDirectory(prefix="ce-rescore-") as ws:
        restore_workspace(manifest, os.path.join(run_dir, "objects"), ws)
        task_dir = old.get("task_dir", "")
        runner = runner_for(ws, task_dir, reference_paths(plan, task_dir)) if runner_for \
            else contextlib.nullcontext()
        try:
            with runner as commands:
                _, graded, _, _ = grade_files(plan, task_dir, ws,
                                              trace if os.path.isfile(trace) else None, judge,
                                              bool(old.get("stopped_early")), commands)
        except InfrastructureError as exc:
            record.update(status="ERROR", error=f"grading failed: {exc}", success=False)
            return record
    if old.get("status") == "ERROR" and not old.get("criteria"):
        return record  # it never reached grading: nothing to re-score
    from ce_runtime.grade.interpreter import criterion_records

    record["criteria"] = criterion_records(plan, graded)
    record["weighted_score"] = graded.weighted_score
    status = old.get("status")
    if status not in RUN_STATUSES:
        status = "SUCCESS" if graded.success else "FAILURE"
    record.update(status=status, success=status == "SUCCESS", plan_hash=_hash(plan),
                  error=None if status != "ERROR" else record.get("error"))
    return record


def _hash(plan: Plan) -> str:
    from ce_lang.api import plan_hash

    return plan_hash(plan)
