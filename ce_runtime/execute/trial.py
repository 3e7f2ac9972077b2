"""One trial, start to end, in its sandbox: start, set-up, pre_run, the agent under its
limits (with the live monitor), the end of the agent (what it left running is killed),
the integrity check, grading, post_run, workspace snapshot, teardown, and `task.json`
written last (its presence is what marks a trial finished, for `ce run --resume`)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import shutil
import tempfile
import threading
import time
from typing import Any

import attrs

from ce_lang.api import (
    RECORD_CLI_DIR,
    Trial,
    block_to_json,
    program_for,
)
from ce_runtime import pricing
from ce_runtime.execute.agent_phase import TrialSink, agent_phase, grading_check, model_endpoint
from ce_runtime.execute.agent_protocol import AgentOutcome
from ce_runtime.grade.host import InfrastructureError
from ce_runtime.grade.monitor import LiveMonitor
from ce_runtime.store.archive import write_trial_files
from ce_runtime.store.record import EarlyStop, Status
from ce_runtime.store.workspace_snapshot import keep_found, snapshot_workspace
from ce_runtime.trace import events as T


class TrialLost(Exception):
    """The trial's directory vanished under it: nothing of the trial can be kept."""


@attrs.frozen
class RunContext:
    run_dir: str
    objects: str
    work_root: str
    uv_cache: str | None = None
    agent_override: str | None = None
    hidden: tuple[str, ...] = ()  # host paths no agent may see (run dir, task dirs, caches)
    redactor: Any = None  # store.redact.Redactor: secrets out of everything written
    scripted_model: bool = False  # agents talk to a server replaying the task's session
    # more directories ce writes while the trial runs: a remote trial's run directory is
    # a scratch one, and the driver writes the real one (and its parent, the runs)
    writes: tuple[str, ...] = ()
    discard: Any = None  # deletes a trial's scratch (default: at once, in the loop)


def trial_dir_of(run_dir: str, trial: Trial) -> str:
    return os.path.join(run_dir, trial.variant_id, *trial.plan.task_id.split("/"),
                        f"{trial.repeat:02d}")


async def finish_despite_cancels(work: Any) -> None:
    """Run `work` to its end even if this task is cancelled again meanwhile (a second
    Ctrl-C, a run shutting down): a teardown cut short leaves processes behind. Its own
    errors are swallowed (the trial is ending anyway); a cancellation received while
    waiting is raised once the work is done."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
        except Exception:
            break
    if not task.cancelled():
        task.exception()  # retrieved: an error in a teardown is not "never retrieved"
    if cancelled:
        raise asyncio.CancelledError


def _empty(workspace: str) -> None:
    """A workspace as a set-up that never ran leaves it (its sandbox did not start)."""
    with contextlib.suppress(OSError), os.scandir(workspace) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def sandbox_spec(trial: Trial, ctx: RunContext, scratch: str, agent_name: str = "none"):
    spec = spec_for_plan(trial.plan, trial.task_dir, scratch, trial_id=trial.trial_id,
                         hidden=(*tuple(ctx.hidden), ctx.run_dir, ctx.work_root),
                         uv_cache=ctx.uv_cache, agent_name=agent_name, warm=True)
    return attrs.evolve(spec, host_files=os.path.join(ctx.work_root, ".ce-host-files"))


def spec_for_plan(plan, task_dir: str, scratch: str, *, trial_id: str = "regrade",
                  hidden: tuple[str, ...] = (), uv_cache: str | None = None,
                  agent_name: str = "none", warm: bool = False,
                  workspace: str | None = None):
    """The sandbox a plan asks for (a trial's, or the same again to re-grade it)."""
    from ce_runtime.execute.sandbox.base import Limits, SandboxSpec
    from ce_runtime.grade.grading import reference_paths

    box = plan.sandbox
    lim = box.limits
    return SandboxSpec(
        trial_id=trial_id, scratch=scratch, task_dir=task_dir,
        reference=reference_paths(plan, task_dir), hidden=hidden,
        network=network_of(box, agent_name),
        limits=Limits(lim.max_memory_mb, lim.max_pids, lim.max_cpus, lim.max_disk_mb,
                      lim.timeout),
        env=dict(box.env), env_passthrough=tuple(box.env_passthrough),
        docker=box.docker, uv_cache=uv_cache,
        setup_network=bool((box.python is not None and box.python.env_packages)
                           or (box.node is not None and box.node.env_packages)),
        warm=warm, tools=_tool_dirs(agent_name), workspace=workspace,
        mock_path_dirs=tuple(box.mock_path_dirs),
        record_cli=RECORD_CLI_DIR if box.record_cli else None)


def _tool_dirs(agent_name: str) -> tuple[str, ...]:
    from ce_runtime.execute.sandbox import tools

    return (tools.agent_dir(agent_name),) if agent_name in tools.NPM_AGENTS else ()


def network_of(box, agent_name: str = "none") -> str:
    """ce's `sandbox.network`, else coder_eval's `docker.network`, else what the agent
    needs: its model endpoint only for an agent that calls a model, nothing otherwise."""
    from ce_runtime.execute.credentials import MODEL_AGENTS

    if box.network:
        return box.network
    if box.docker is not None and box.docker.network:
        return {"bridge": "full", "none": "none"}[box.docker.network]
    return "model" if agent_name in MODEL_AGENTS else "none"


def _budget_spent(sink):
    """What the scripted model server asks before answering a step (from its thread): the
    trial's spent budget, once ce has stopped the agent for it."""
    budgets = (Status.COST_BUDGET_EXCEEDED, Status.TOKEN_BUDGET_EXCEEDED)

    def spent() -> str | None:
        hit = sink.limit_hit
        return f"ce: this trial's budget is spent ({hit}); no more model calls" \
            if hit in budgets else None
    return spent


def _past_the_script(server) -> int:
    """The agent's model calls the scripted server answered past the script's last step
    (with END_TEXT): a script too short for the session the agent held."""
    end = len(server.script.steps)
    return sum(1 for e in server.log if e["step"] is not None and e["step"] >= end
               and e["api"] != "simulated-user" and "refused" not in e)


def _status(error: str | None, outcome: AgentOutcome | None, limit: str | None,
            success: bool | None) -> Status:
    if error is not None:
        return Status.ERROR
    if limit is not None:
        return Status(limit)
    if outcome is not None and outcome.reason == "error":
        return Status.ERROR
    if outcome is not None and outcome.reason == "max_turns":
        return Status.MAX_TURNS_EXHAUSTED
    if success is None:
        return Status.NOT_GRADED
    return Status.SUCCESS if success else Status.FAILURE


async def execute_trial(trial: Trial, ctx: RunContext) -> dict[str, Any]:
    from ce_runtime.execute import integrity
    from ce_runtime.execute.agents import UnknownAgent, load_agent
    from ce_runtime.execute.sandbox import SandboxError, UnknownDriver, open_sandbox
    from ce_runtime.execute.sandbox.runner import SandboxRunner
    from ce_runtime.execute.task_commands import run_commands
    from ce_runtime.grade.grading import evidence_of, host_for
    from ce_runtime.grade.interpreter import Grader

    plan = trial.plan
    tdir = trial_dir_of(ctx.run_dir, trial)
    os.makedirs(tdir, exist_ok=True)
    for stale in ("task.json", "trace.msgpack", "workspace.json", "evidence.json"):
        path = os.path.join(tdir, stale)
        if os.path.exists(path):
            os.unlink(path)
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    started_wall = time.time()  # the same instant: a trace time t is started_wall + t
    scratch = tempfile.mkdtemp(prefix="ce-trial-", dir=ctx.work_root)
    agent_name = plan.agent.type or "claude-code"
    if ctx.agent_override and agent_name != "none":
        agent_name = ctx.agent_override
    error: str | None = None
    outcome: AgentOutcome | None = None
    pre: list = []
    post: list = []
    graded = None
    host = None  # the grading's host, once graded: what its criteria found is kept
    sandbox = None
    notes: dict[str, Any] = {}
    evidence: dict[str, Any] | None = None  # evidence.json: what grading ran and asked
    # checked, analyzed and linked once per plan in this process: the monitor, the
    # dialog's per-turn check and the grader share it
    program = program_for(plan, plan_hash=trial.plan_hash)
    monitor = LiveMonitor(plan, program)
    stop = asyncio.Event()
    writer = T.TraceWriter(os.path.join(tdir, "trace.msgpack"))
    sink = TrialSink(writer, monitor, plan.run_limits, stop, started, ctx.redactor)
    try:
        sink.emit(T.RunHeader(0.0, T.SCHEMA_VERSION, trial.trial_id, plan.task_id,
                              trial.plan_hash, agent_name, plan.agent.model, started_wall))
        cancel_setup = threading.Event()
        try:
            sandbox = open_sandbox(plan.sandbox.driver, sandbox_spec(trial, ctx, scratch,
                                                                    agent_name))
            if getattr(sandbox, "prepare_overlaps_start", False):
                sandbox.begin_start()  # its init is being made while the host sets up
                setup = await sandbox.prepare(plan, cancel_setup)
                try:
                    await sandbox.start()
                except SandboxError:  # no sandbox: as if its set-up never ran
                    await asyncio.to_thread(_empty, sandbox.workspace)
                    raise
                notes["sandbox"] = sandbox.enforcement.as_record()
            else:
                await sandbox.start()
                notes["sandbox"] = sandbox.enforcement.as_record()
                setup = await sandbox.prepare(plan, cancel_setup)
        except asyncio.CancelledError:  # interrupted: the worker's command dies now
            cancel_setup.set()
            raise
        except (SandboxError, UnknownDriver) as exc:
            error = f"sandbox: {exc}"
        else:
            notes["setup"] = setup.log
            if not setup.ok:
                error = f"sandbox set-up failed: {setup.error}"
        if error is None and plan.pre_run:
            pre = await run_commands(plan.pre_run, sandbox, "pre_run")
            failed = [c for c in pre if c.failed]
            if failed:
                error = f"pre_run command failed: {failed[0].command!r} (exit " \
                        f"{failed[0].exit_code})"
        agent = None
        if error is None:
            try:
                agent = load_agent(agent_name)
            except UnknownAgent as exc:
                error = str(exc)
        trusted = None
        if error is None and not getattr(agent, "starts_nothing", False):
            trusted = await asyncio.to_thread(
                integrity.baseline, sandbox.workspace, tuple(plan.sandbox.protected),
                trial.task_dir, (ctx.run_dir, os.path.dirname(ctx.run_dir), ctx.work_root,
                                 tempfile.gettempdir(), *ctx.writes))
        if error is None:
            notes["cost_unknown"] = pricing.unpriced(agent, block_to_json(plan.agent))
            try:
                endpoint, model_server = model_endpoint(trial, agent_name, ctx, sandbox,
                                                        notes)
            except (OSError, ValueError) as exc:  # a missing or malformed script
                error = f"scripted model: {exc}"
            else:
                if model_server is not None:
                    model_server.spent = _budget_spent(sink)
                try:
                    outcome, error = await agent_phase(
                        agent, trial, sandbox, agent_name, sink, stop, notes, trusted,
                        endpoint, grading_check(trial, sandbox, sink, program))
                except SandboxError as exc:  # e.g. the agent killed the sandbox's init
                    error = f"the sandbox was lost while the agent ran: {exc}"
                finally:
                    if model_server is not None:
                        notes["model_server"]["calls"] = sum(
                            1 for e in model_server.log if e["step"] is not None
                            and e["api"] != "simulated-user" and "refused" not in e)
                        refused = sum(1 for e in model_server.log if "refused" in e)
                        if refused:
                            notes["model_server"]["refused"] = refused
                        past = _past_the_script(model_server)
                        if past:
                            from ce_runtime.model_server.script import END_TEXT

                            notes["model_server"]["past_end"] = past
                            sink.emit(T.Message(
                                sink.clock(), "system",
                                f"ce: the agent made {past} model call(s) past the last "
                                f"step of its scripted session; each was answered "
                                f"{END_TEXT!r}"))
                        notes["model_server"]["requests"] = len(model_server.log)
                        # the models the agent's calls asked for (side requests too)
                        notes["model_server"]["models"] = list(dict.fromkeys(
                            str(e["model"]) for e in model_server.log
                            if e["model"] is not None and e["api"] != "simulated-user"))
                        model_server.stop()
            if outcome is not None and not sink.agent_ended:
                sink.emit(T.AgentEnd(sink.clock(), outcome.reason, outcome.detail))
        manifest = None
        if sandbox is not None:
            # the workspace as the agent left it, before a criterion's command can change
            # it (`echo new > x.txt`, a build): the archive a re-grade reads is what the
            # grading read (what the grading found in skipped directories is added below)
            manifest = await asyncio.to_thread(sandbox.snapshot, ctx.objects)
        if error is None:
            from ce_runtime.grade.judge import judge_from_env
            from ce_runtime.store.verdicts import VerdictStore

            runner = SandboxRunner(sandbox, asyncio.get_running_loop())
            host = host_for(plan, sandbox.workspace, trial.task_dir, sink.view.view,
                            judge_from_env(), runner,
                            VerdictStore(os.path.join(ctx.run_dir, "judges"),
                                         redact=ctx.redactor.value if ctx.redactor else None))
            grader = Grader(plan, program=program)
            try:
                graded = await asyncio.to_thread(
                    grader.grade, host, monitor.should_stop, plan.early_stop.armed)
            except InfrastructureError as exc:
                error = f"grading failed: {exc}"
            except asyncio.CancelledError:  # interrupted: kill the criterion's command now
                host.cancel()
                raise
            finally:
                evidence = {"schema_version": 1, "criteria": host.evidence}
                if host.judge_sessions:
                    notes["judge_sessions"] = host.judge_sessions
            if error is None:
                evidence["criteria"] = evidence_of(plan, grader.instances, graded, host)
            from ce_runtime.grade.judge_usage import trial_judge_usage

            notes["judge_usage"] = trial_judge_usage(host.evidence)
        if sandbox is not None and getattr(sandbox, "oom_killed", lambda: False)():
            notes["oom_killed"] = True
        status = _status(error, outcome, sink.limit_hit, graded.success if graded else None)
        sink.emit(T.RunEnd(sink.clock(), status, error))
        writer.close()
        if sandbox is not None:
            if host is not None and host.found:
                manifest = await asyncio.to_thread(
                    keep_found, sandbox.workspace, ctx.objects, manifest, sorted(host.found))
            # after the snapshot: the archive is the workspace the criteria graded, so a
            # post_run clean-up (`rm -rf node_modules`) cannot change what rescore sees
            if plan.post_run and error is None:
                post = await run_commands(plan.post_run, sandbox, "post_run")
        else:  # the sandbox never came up: an empty workspace
            os.makedirs(os.path.join(scratch, "ws"), exist_ok=True)
            manifest = await asyncio.to_thread(snapshot_workspace,
                                               os.path.join(scratch, "ws"), ctx.objects)
        if sandbox is not None:
            killed = await sandbox.teardown()
            sandbox = None
            if killed:
                notes["teardown_killed"] = killed
        record = _record(trial, agent_name, status, error, outcome, graded, sink, monitor,
                         started_at, time.monotonic() - started, pre, post, notes)
        if ctx.redactor:
            record = ctx.redactor.value(record)
            evidence = ctx.redactor.value(evidence) if evidence is not None else None
        if not writer.still_in_place():
            raise TrialLost(f"{tdir} was deleted or replaced while the trial ran: its trace "
                            "is lost, so nothing of the trial was kept (`ce run --resume` "
                            "runs it again)")
        write_trial_files(tdir, record, manifest, evidence)
        return record
    finally:
        writer.close()
        try:
            if sandbox is not None:  # interrupted or failed: nothing it started survives
                await finish_despite_cancels(sandbox.teardown())
        finally:
            if ctx.discard is not None:
                ctx.discard(scratch)
            else:
                shutil.rmtree(scratch, ignore_errors=True)


def _early_stop_record(plan, monitor: LiveMonitor, sink: TrialSink) -> EarlyStop | None:
    """coder_eval's EarlyStopInfo: present iff the run was stopped early."""
    info = monitor.stop_info
    if info is None:
        return None
    call = next(c for c in plan.criteria if c.id == info.criterion)
    max_turns = plan.run_limits.max_turns
    turn = sink.stop_turn if sink.stop_turn is not None else sink.turns
    return EarlyStop(
        reason=info.reason, deciding_criterion=info.criterion,
        deciding_criterion_type=call.type, deciding_criterion_description=call.description,
        armed_criteria=list(info.armed), tool_call_index=info.tool_call_index,
        turn_index=turn,
        turns_remaining_at_stop=max(0, max_turns - turn) if max_turns else None,
        gate_threshold=info.gate_threshold, rule=plan.early_stop.rule)


def _record(trial: Trial, agent: str, status: Status, error: str | None,
            outcome: AgentOutcome | None, graded, sink: TrialSink, monitor: LiveMonitor,
            started_at: str, duration: float, pre: list, post: list,
            notes: dict[str, Any]) -> dict[str, Any]:
    """The trial's TrialRecord, as task.json's JSON object (the redactor and the archive
    take JSON-like data)."""
    plan = trial.plan
    view = sink.view
    from ce_runtime.grade.interpreter import criterion_records
    from ce_runtime.store import record as rec

    criteria = criterion_records(plan, graded) if graded is not None else []
    return rec.record_dict(rec.TrialRecord(
        schema_version=1, trial_id=trial.trial_id, variant_id=trial.variant_id,
        experiment_id=trial.experiment_id, task_id=plan.task_id,
        suite_id=plan.suite_id, row_id=plan.row_id, repeat=trial.repeat,
        tags=list(plan.tags), task_file=trial.source, task_dir=trial.task_dir,
        plan_hash=trial.plan_hash, agent=agent, model=plan.agent.model or sink.agent_model,
        status=status, stopped_early=monitor.should_stop,
        early_stop_reason=monitor.stop_reason,
        early_stop=_early_stop_record(plan, monitor, sink),
        monitor_gave_up=monitor.gave_up,
        weighted_score=graded.weighted_score if graded else None,
        success=status == Status.SUCCESS, started_at=started_at,
        duration_s=round(duration, 3),
        agent_outcome=rec.AgentOutcome(reason=outcome.reason, detail=outcome.detail)
        if outcome else None,
        usage=rec.Usage(input_tokens=view.input_tokens, output_tokens=view.output_tokens,
                        cache_read_tokens=view.cache_read_tokens,
                        cache_write_tokens=view.cache_creation_tokens,
                        cost_usd=view.cost_usd, turns=view.view.turns,
                        tool_calls=len(view.view.tool_calls)),
        cost_unknown=notes.get("cost_unknown"),
        judge_usage=rec.JudgeUsage(**notes["judge_usage"]) if notes.get("judge_usage")
        else None,
        # no agent ran (`none`): no turns to hold to a budget, so none to count in the
        # within-expected-turns metric (its 0 turns were "within" any budget)
        expected_turns=plan.run_limits.expected_turns if agent != "none" else None,
        criteria=[rec.CriterionRecord(**c) for c in criteria], error=error,
        pre_run=[rec.CommandRecord(**attrs.asdict(c)) for c in pre],
        post_run=[rec.CommandRecord(**attrs.asdict(c)) for c in post],
        sandbox=rec.SandboxNote(**notes["sandbox"]) if notes.get("sandbox") else None,
        setup=notes.get("setup", []),
        agent_left_running=notes.get("agent_left_running", []),
        teardown_killed=notes.get("teardown_killed", []),
        oom_killed=bool(notes.get("oom_killed")),
        integrity=notes.get("integrity", []),
        model_server=notes.get("model_server"),
        judge_sessions=notes.get("judge_sessions", []),
        dialog=notes["dialog"].record() if notes.get("dialog") else None,
    ))
