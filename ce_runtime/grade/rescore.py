"""Re-scoring archived trials offline: the same (or a new) plan over each trial's recorded
trace and workspace snapshot, without running the agent again.

Statuses the agent's run decided (TIMEOUT, budgets, MAX_TURNS_EXHAUSTED, an ERROR before
grading) are kept; SUCCESS / FAILURE follow the new grade. A trial graded with its own
plan uses the standard criteria the run archived (`definitions/`), so a newer ce scores
it with the definitions it ran with unless told to use today's; commands run in the
trial's own environment again (driver, venv, node packages); judge verdicts come from
the run's `judges/` store.

File criteria read the archived workspace in place (store/snapshot_view.py); a trial's
workspace is restored, and its sandbox started, only when a criterion needs them
(`RESTORED` counts restores). Criteria run as closures compiled once per plan.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any

import attrs

from ce_lang.api import SEMANTICS_VERSION, Plan, stdlib_digest
from ce_runtime.grade.criterion_match import pair_criteria
from ce_runtime.store.archive import (
    HEX64,
    DamagedArchive,
    load_archived_json,
    load_definitions,
    verified_trial_data,
)
from ce_runtime.store.record import RUN_LIMIT_STATUSES, Status
from ce_runtime.store.snapshot_view import SnapshotView
from ce_runtime.store.workspace_snapshot import restore_workspace, unshare_objects


def trial_dirs(run_dir: str) -> list[str]:
    """Every trial directory of a run (those with a task.json), sorted."""
    from ce_lang.api import RUN_LEVEL_DIRS

    out = []
    for root, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if not (root == run_dir and d in RUN_LEVEL_DIRS)
                         and not d.startswith("."))
        if "task.json" in files:
            out.append(root)
    return sorted(out)


def load_plan_file(run_dir: str, plan_hash: str) -> Plan:
    """plans/<hash>.json, checked: it must parse as a plan whose hash is its name."""
    from ce_lang.api import plan_from_json

    plan_json, _ = archived_plan_json(run_dir, plan_hash)
    try:
        return plan_from_json(plan_json)
    except Exception as exc:
        path = os.path.join(run_dir, "plans", f"{plan_hash}.json")
        raise DamagedArchive(path, f"not a plan ({type(exc).__name__}: {exc})") from None


def archived_plan_json(run_dir: str, plan_hash: str) -> tuple[Any, str]:
    """plans/<hash>.json's plan as written, checked against its name, and its hash by
    today's ce (what a trial compiled today to the same plan is named). Checked as
    written: a plan of an older ce lacks fields added since (structured with today's
    schema, their defaults would be in it), and may be named by the hash of its full
    JSON, as ce named plans before the hashed form (ce_lang/plan_identity.py)."""
    from ce_lang.api import legacy_plan_json_hash, plan_json_hash

    path = os.path.join(run_dir, "plans", f"{plan_hash}.json")
    if not HEX64.fullmatch(plan_hash):
        raise DamagedArchive(path, "not a plan hash")
    data = load_archived_json(path)
    if data.get("hash") != plan_hash:
        raise DamagedArchive(path, f"records hash {data.get('hash')!r}, not its name")
    today = plan_json_hash(data.get("plan"))
    if plan_hash != today and plan_hash != legacy_plan_json_hash(data.get("plan")):
        raise DamagedArchive(path, "the plan does not match its hash name")
    return data["plan"], today


def archived_plan(run_dir: str, plan_hash: str) -> Plan:
    """plans/<hash>.json, checked against its name (DamagedArchive if it is not)."""
    return load_plan_file(run_dir, plan_hash)


def rescore_trial(trial_dir: str, run_dir: str, plan: Plan | None = None,
                  judge: Any = None, runner_for: Any = None, *, task_dir: str | None = None,
                  verdicts: Any = None,
                  today: bool = False, used_plans: dict[str, Plan] | None = None,
                  loaded: tuple[dict[str, Any], dict[str, Any], str | None, bytes | None]
                  | None = None,
                  ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A new task.json record for one archived trial and its evidence.json (nothing on
    disk is changed).

    `plan`: a recompiled plan (graded with today's standard criteria; `task_dir`: the
    directory of the task it was compiled from, whose files its criteria read); without
    it the trial's own plan and the definitions archived with it (`today`: today's
    instead), and the task's files as the run recorded or kept them.
    `runner_for(workspace, task_dir, reference, plan)` is a context manager giving the
    sandbox that runs the criteria's commands. `verdicts`: the judge verdict store.
    `used_plans` collects the plans graded with, by hash (to archive with the results).
    `loaded`: the trial's `verified_trial_data`, when the caller read it already.
    Every archived part is checked first: DamagedArchive when one is not what was written.

    File criteria read the snapshot in place (manifest and object store); the workspace
    is restored on disk only when a criterion needs it (a command, an agent judge)."""
    from ce_runtime.grade.host import InfrastructureError
    from ce_runtime.trace.events import TraceDamaged

    old, manifest, trace, trace_data = loaded or verified_trial_data(trial_dir)
    notes: list[str] = []
    if "workspace_sha256" not in old:
        notes.append("written by an older ce: no recorded digests, the trace and workspace "
                     "manifest are not verified")
    recorded_dir = old.get("task_dir", "")
    recompiled = plan is not None
    if plan is None:
        from ce_runtime.store.task_files import task_dir_for

        plan, stdlib, graded_hash, more = _archived_grading(run_dir, old["plan_hash"], today)
        task_dir, kept = task_dir_for(run_dir, old["plan_hash"], recorded_dir)
        notes.extend(more + kept)
    else:  # a recompiled task's files are its own directory's (`task_dir`)
        stdlib, graded_hash = None, _hash(plan)
        task_dir = task_dir or recorded_dir
    if used_plans is not None:
        used_plans.setdefault(graded_hash, plan)
    if plan.semantics_version != SEMANTICS_VERSION:
        notes.append(f"planned under grading semantics v{plan.semantics_version}; this ce "
                     f"grades with v{SEMANTICS_VERSION}")
    record = dict(old)
    if recompiled and task_dir and task_dir != recorded_dir:
        record["task_dir"] = task_dir  # a recompiled task from another copy of it
    record["rescored_from"] = _relative(trial_dir, run_dir)
    record["previous"] = {"status": old.get("status"),
                          "weighted_score": old.get("weighted_score"),
                          "plan_hash": old.get("plan_hash")}
    record.pop("rescore_notes", None)
    if notes:
        record["rescore_notes"] = notes
    kept = kept_status(old.get("status"), old.get("criteria"))
    if never_graded(old.get("status"), old.get("criteria")):  # it never reached grading: nothing to re-score (no command
        if trace and trace_data is not None:  # run, no judge asked); its trace is read
            try:  # as every trial's is: a damaged one is said
                _strict_trace(trace, trace_data)
            except TraceDamaged as exc:
                raise DamagedArchive(exc.path, f"{exc.why} at byte {exc.offset}") from None
        return record, None
    objects = os.path.join(run_dir, "objects")
    # checked as a restore checks it; links out of the workspace are the agent's own
    files = SnapshotView(manifest, objects, outward_links=True)
    with contextlib.ExitStack() as stack:
        workspace = LazyWorkspace(manifest, objects, stack)
        runner = _LazyRunner(workspace, stack, runner_for, task_dir, plan) \
            if runner_for else None
        try:
            graded, host, grader = _grade(
                plan, stdlib, graded_hash, task_dir, trace, trace_data, judge,
                bool(old.get("stopped_early")), runner, verdicts, files, workspace.path)
        except TraceDamaged as exc:
            raise DamagedArchive(exc.path, f"{exc.why} at byte {exc.offset}") from None
        except InfrastructureError as exc:
            # as `ce run` records a grading that failed: ERROR, no criterion results and
            # no score. The recorded ones are `previous`, never shown as this grade's
            record.update(status=Status.ERROR.value, error=f"grading failed: {exc}",
                          success=False, criteria=[], weighted_score=None,
                          plan_hash=graded_hash)
            record.pop("judge_usage", None)
            return record, None
    from ce_runtime.grade.interpreter import criterion_records

    record["criteria"] = criterion_records(plan, graded)
    record["weighted_score"] = graded.weighted_score
    status = kept or (Status.SUCCESS if graded.success else Status.FAILURE).value
    record.update(status=status, success=status == Status.SUCCESS, plan_hash=graded_hash,
                  error=None if status != Status.ERROR else record.get("error"))
    from ce_runtime.grade.grading import evidence_of
    from ce_runtime.grade.judge_usage import trial_judge_usage

    record.pop("judge_usage", None)
    judged = trial_judge_usage(host.evidence)
    if judged is not None:
        record["judge_usage"] = judged
    return record, {"schema_version": 1,
                    "criteria": evidence_of(plan, grader.instances, graded, host)}


def _relative(path: str, start: str) -> str:
    """`os.path.relpath(path, start)`; a path `trial_dirs` made (`start`, a slash, plain
    names) without the two `abspath` calls."""
    if start and path.startswith(start) and path[len(start):len(start) + 1] == "/" \
            and not start.endswith("/"):
        rest = path[len(start) + 1:]
        if rest and "//" not in rest and not rest.endswith("/") and not any(
                part in (".", "..") for part in rest.split("/")):
            return rest
    return os.path.relpath(path, start)


RUN_LIMITS = frozenset(s.value for s in RUN_LIMIT_STATUSES)


def kept_status(status: str | None, criteria: Any) -> str | None:
    """The recorded status a re-grade keeps, or None (SUCCESS / FAILURE then follow the
    grade): a run limit that stopped the agent, or an ERROR: one before grading (no
    criteria recorded, `never_graded`) or the agent's own (its criteria graded what it
    left; the run ranks the agent's error above the grade, and so does a re-grade)."""
    if status in RUN_LIMITS:
        return status
    if status == Status.ERROR:
        return Status.ERROR.value
    return None


def never_graded(status: str | None, criteria: Any) -> bool:
    """An ERROR before grading (no criteria recorded): nothing to re-grade."""
    return status == Status.ERROR and not criteria


RESTORED = [0]  # workspaces restored on disk in this process (tests read it)


class LazyWorkspace:
    """A trial's workspace on disk, restored the first time something asks for it (files
    linked to the store; a command unshares them first), removed with `stack`."""

    def __init__(self, manifest: dict[str, Any], objects: str, stack: contextlib.ExitStack):
        self.manifest, self.objects, self._stack = manifest, objects, stack
        self._dir: str | None = None

    def path(self) -> str:
        if self._dir is None:
            ws = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="ce-rescore-"))
            restore_workspace(self.manifest, self.objects, ws, link_objects=True,
                              outward_links=True)
            RESTORED[0] += 1
            self._dir = ws
        return self._dir


class _LazyRunner:
    """The trial's sandbox, started at its first command (most trials run none)."""

    def __init__(self, workspace: LazyWorkspace, stack: contextlib.ExitStack,
                 runner_for: Any, task_dir: str, plan: Plan):
        self._workspace, self._stack, self._runner_for = workspace, stack, runner_for
        self._task_dir, self._plan = task_dir, plan
        self._commands: Any = None

    def run(self, command: str, timeout: int, max_output: int) -> Any:
        if self._commands is None:
            from ce_runtime.grade.grading import reference_paths
            from ce_runtime.grade.host import InfrastructureError

            ws = self._workspace.path()
            manifest = self._workspace.manifest
            try:
                self._commands = self._stack.enter_context(self._runner_for(
                    ws, self._task_dir, reference_paths(self._plan, self._task_dir),
                    self._plan, before_start=lambda: unshare_objects(manifest, ws)))
            except InfrastructureError:
                raise
            except Exception as exc:
                raise InfrastructureError(f"the sandbox did not start ({type(exc).__name__}"
                                          f": {exc})") from exc
        return self._commands.run(command, timeout, max_output)

    def cancel(self) -> None:
        if self._commands is not None:
            self._commands.cancel()


_GRADERS: dict[str, Any] = {}  # graded plan hash -> Grader over compiled closures
_JUDGE: list[Any] = []  # the judge from the environment, looked up once


def _grade(plan: Plan, stdlib: dict[str, str] | None, plan_hash: str, task_dir: str,
           trace_path: str | None, trace_data: bytes | None, judge: Any,
           stopped_early: bool, runner: Any,
           verdicts: Any, files: SnapshotView, materialize: Any) -> tuple[Any, Any, Any]:
    """`grade_files` for an archived trial: the trace strictly read, the workspace the
    snapshot view, the plan's grader (compiled closures) built once per process. The
    result, the host and the grader."""
    from ce_runtime.grade.grading import host_for
    from ce_runtime.trace.view import build_view

    view = build_view(_strict_trace(trace_path, trace_data).events) \
        if trace_path and trace_data is not None else None
    grader = _GRADERS.get(plan_hash)
    if grader is None or grader.plan is not plan:
        from ce_lang.api import program_for
        from ce_runtime.grade.compiled import compiled_grader

        if len(_GRADERS) > 64:
            _GRADERS.clear()
        program = program_for(plan, stdlib, plan_hash=plan_hash)
        grader = _GRADERS[plan_hash] = compiled_grader(plan, program)
    if judge is None:
        if not _JUDGE:
            from ce_runtime.grade.judge import judge_from_env

            _JUDGE.append(judge_from_env())
        judge = _JUDGE[0]
    host = host_for(plan, "", task_dir, view, judge, runner, verdicts)
    host.files, host.materialize = files, materialize
    stopped_early = stopped_early and bool(plan.early_stop.armed)  # else: gate on all
    from ce_runtime.grade.host import InfrastructureError

    try:
        graded = grader.grade(host, stopped_early=stopped_early, armed=plan.early_stop.armed)
    except InfrastructureError as exc:  # which criterion could not be graded, named
        current = getattr(host, "current", None)
        if current and not str(exc).startswith(f"{current} "):
            raise InfrastructureError(f"{current} {exc}") from exc
        raise
    return graded, host, grader


_ARCHIVED: dict[tuple, tuple] = {}  # (run, plan hash, today, plan file identity) -> below


def _archived_grading(run_dir: str, plan_hash: str, today: bool
                      ) -> tuple[Plan, dict[str, str] | None, str, list[str]]:
    """A trial's archived plan, the definitions to grade it with, the hash it is graded
    under, and what to say about them: loaded and checked once per plan in a process
    (a run of 10,000 trials has a handful of plans)."""
    path = os.path.join(run_dir, "plans", f"{plan_hash}.json")
    try:
        st = os.stat(path)
        identity = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        identity = None  # archived_plan says what is wrong
    key = (os.path.abspath(run_dir), plan_hash, today, identity)
    hit = _ARCHIVED.get(key)
    if hit is not None:
        return hit
    plan = archived_plan(run_dir, plan_hash)
    stdlib, notes = None, []
    if not today:
        stdlib = load_definitions(run_dir, plan.stdlib_digest) if plan.stdlib_digest \
            else None
        if stdlib is None:
            notes.append("the run kept no standard criteria; graded with today's")
    if stdlib is None:  # today's definitions: the plan's identity says so
        plan = attrs.evolve(plan, stdlib_digest=stdlib_digest())
    # graded as archived: the archived plan's own name (its hash by today's schema
    # differs once a field was added since); with today's definitions, a new identity
    hit = (plan, stdlib, plan_hash if stdlib is not None else _hash(plan), notes)
    if len(_ARCHIVED) > 256:
        _ARCHIVED.clear()
    _ARCHIVED[key] = hit
    return hit


def _strict_trace(path: str, data: bytes) -> Any:
    """`load_trace` of bytes read already (when verified)."""
    from ce_runtime.trace.events import decode_frames, strict_frames

    return strict_frames(path, decode_frames(data))


def criterion_changes(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    """Where a re-grade differs from the recorded grade, criterion by criterion, with
    both results ('c1 run_command: recorded 1 pass, now 0 fail (exit 127: ...)'). Each new
    criterion is set against the recorded one it is (`pair_criteria`), not the one at its
    index."""
    pairs, gone = pair_criteria(old or [], new)
    out = []
    for c, was in pairs:
        if was is None:
            out.append(f"{c['id']} {c['type']}: new criterion, {_verdict(c)}")
            continue
        error = c.get("error")
        if was.get("error") == error and was.get("score") == c.get("score") \
                and bool(was.get("passed")) == bool(c.get("passed")):
            continue  # the same verdict (the usual case: no verdict spelled out)
        if _verdict(was) != _verdict(c) or was.get("error") != error:
            why = f" ({error})" if error else ""
            # two errors that score alike differ in their reasons: both are said
            then = f" ({was['error']})" if was.get("error") and error \
                and _verdict(was) == _verdict(c) else ""
            moved = f" (recorded as {was['id']})" if was["id"] != c["id"] else ""
            out.append(f"{c['id']} {c['type']}{moved}: recorded {_verdict(was)}{then}, now "
                       f"{_verdict(c)}{why}")
    out += [f"{c['id']} {c['type']}: no longer a criterion" for c in gone]
    return out


def _verdict(c: dict[str, Any]) -> str:
    score = c.get("score")
    word = "error" if c.get("error") else ("pass" if c.get("passed") else "fail")
    return f"{score:.3g} {word}" if isinstance(score, int | float) else word


def _hash(plan: Plan) -> str:
    from ce_lang.api import plan_hash

    return plan_hash(plan)
