"""A trial's agent phase: the request the agent gets, its model endpoint, the agent run
under the task's time, turn and budget limits (what it emits goes through `TrialSink`
to the trace, the live monitor and the budgets), then the end of the phase (what the
agent left running is killed, the files the grader trusts are checked). `execute_trial`
(trial.py) calls it between the set-up and grading."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

import attrs

from ce_lang.api import Trial, block_to_json
from ce_runtime.execute.agent_protocol import AgentOutcome, AgentRequest
from ce_runtime.grade.host import InfrastructureError
from ce_runtime.grade.monitor import LiveMonitor
from ce_runtime.store.record import MODEL_OUTAGE, Status
from ce_runtime.trace import events as T

if TYPE_CHECKING:
    from ce_runtime.execute.trial import RunContext

STOP_GRACE_S = 2.0


def budget_input_tokens(view: Any, limits: Any) -> int:
    """The input tokens the budgets count: cache reads and cache writes only when the
    task says so (`run_limits.count_cached_input` / `count_cache_creation`, as
    coder_eval): a cached prefix re-read every turn would otherwise exhaust a budget
    meant for new input."""
    return view.input_tokens \
        + (view.cache_read_tokens if limits.count_cached_input else 0) \
        + (view.cache_creation_tokens if limits.count_cache_creation else 0)


class TrialSink:
    """Everything an agent emits: to the trace file, the view, the monitor, the budgets."""

    def __init__(self, writer: T.TraceWriter, monitor: LiveMonitor, limits: Any,
                 stop: asyncio.Event, started: float, redactor: Any = None):
        self.writer = writer
        self.redactor = redactor
        self.monitor = monitor
        self.limits = limits
        self.stop = stop
        self.started = started
        self.view = monitor.builder
        self.limit_hit: str | None = None  # TIMEOUT / TOKEN_BUDGET_EXCEEDED / ...
        self.turn_started: float | None = None
        self.turns = 0
        self.agent_ended = False  # the agent wrote its AgentEnd (a killed one cannot)
        self.stop_after: str | None = None  # the call that decided a stop, still running
        # the model the agent said it runs (its AgentStart): its default when the task
        # names none, which task.json records
        self.agent_model: str | None = None
        # the turn the early stop was asked in: an agent may take more turns to stop
        # (Claude Code answers an interrupt after the model calls already on their way)
        self.stop_turn: int | None = None
        # the agent's last model call failed and nothing has answered since (an outage the
        # CLI is still retrying): a timeout then is the API's, not the agent's
        self.model_failing: T.ModelError | None = None

    def clock(self) -> float:
        return time.monotonic() - self.started

    def emit(self, event: T.Event) -> None:
        event = T.redacted(event, self.redactor)  # the trace, the view, the monitor agree
        self.writer.write(event)
        for d in self.monitor.on_event(event):
            self.writer.write(T.Decision(self.clock(), d.criterion, d.verdict, d.event_index))
        if isinstance(event, T.ModelError):
            self.model_failing = event
        elif isinstance(event, (T.Usage, T.ToolCall)) or (
                isinstance(event, T.Message) and event.role == "assistant"):
            self.model_failing = None  # the model answered
        if isinstance(event, T.AgentEnd):
            self.agent_ended = True
        elif isinstance(event, T.AgentStart):
            self.agent_model = self.agent_model or event.model
        elif isinstance(event, T.TurnStart):
            self.turns += 1
            self.turn_started = time.monotonic()
            max_turns = self.limits.max_turns
            if max_turns is not None and self.turns > max_turns:
                self._hit(Status.MAX_TURNS_EXHAUSTED)
        elif isinstance(event, T.TurnEnd):
            self.turn_started = None
        elif isinstance(event, T.Usage):
            b, lim = self.view, self.limits
            counted_input = budget_input_tokens(b, lim)
            total = counted_input + b.output_tokens
            if (lim.max_input_tokens and counted_input > lim.max_input_tokens) or (
                    lim.max_output_tokens and b.output_tokens > lim.max_output_tokens) or (
                    lim.max_total_tokens and total > lim.max_total_tokens):
                self._hit(Status.TOKEN_BUDGET_EXCEEDED)
            elif lim.max_usd and b.cost_usd > lim.max_usd:
                self._hit(Status.COST_BUDGET_EXCEEDED)
        if self.monitor.should_stop and not self.stop.is_set():
            self._stop_when_settled(event)

    def _stop_when_settled(self, event: T.Event) -> None:
        """A stop decided by a tool call waits for that call's result, so the command
        that decided it is recorded completed, not killed mid-way (task and turn
        timeouts still bound the wait, and the end of the turn ends it)."""
        if self.stop_after is None:
            if isinstance(event, T.ToolCall):
                self.stop_after = event.call_id
                return
        elif not ((isinstance(event, T.ToolResult) and event.call_id == self.stop_after)
                  or isinstance(event, T.TurnStart | T.TurnEnd | T.AgentEnd)):
            return
        self.stop_turn = self.turns
        self.stop.set()

    def _hit(self, status: str) -> None:
        if self.limit_hit is None:
            self.limit_hit = status
        self.stop.set()


async def run_agent(agent: Any, request: AgentRequest, sink: TrialSink, stop: asyncio.Event,
                     limits: Any) -> AgentOutcome:
    """The agent under task_timeout / turn_timeout; a stop request, and a timeout, get a
    grace period (the agent ends its CLI and records what it had already said: cancelled
    at once, the tool call and usage still on their way were lost), then the agent is
    cancelled (its process groups die with it)."""
    task = asyncio.ensure_future(agent.run(request, sink, stop))
    deadline = time.monotonic() + limits.task_timeout if limits.task_timeout else None
    stop_seen: float | None = None
    timed_out = False
    why = ""  # which timeout stopped the agent: the trace and the outcome say it
    outage = ""  # the timeout came while the model API was failing: an ERROR, not the agent's
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=0.05)
            now = time.monotonic()
            if not timed_out and ((deadline is not None and now > deadline) or (
                    limits.turn_timeout and sink.turn_started is not None
                    and now - sink.turn_started > limits.turn_timeout)):
                timed_out = True
                if sink.limit_hit is None:
                    why = (f"task_timeout ({limits.task_timeout:g}s)"
                           if deadline is not None and now > deadline else
                           f"turn_timeout ({limits.turn_timeout:g}s, turn {sink.turns})")
                    if sink.model_failing is not None:
                        # (TrialRecord.model_outage knows it by its first words)
                        outage = (f"{MODEL_OUTAGE}{why} was reached: "
                                  f"{sink.model_failing.summary()}")
                    sink.emit(T.Message(sink.clock(), "system",
                                        f"ce: {outage or why + ' reached'}: stopping the agent"))
                if not outage:
                    sink.limit_hit = sink.limit_hit or Status.TIMEOUT
                stop.set()
            if stop.is_set():
                stop_seen = stop_seen or now
                if now - stop_seen > STOP_GRACE_S:
                    break
    finally:  # a timeout, an ignored stop, or our own cancellation (Ctrl-C)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if outage:  # whatever the agent made of the stop: the API's failure, retryable
        return AgentOutcome("error", outage)
    if task.cancelled():
        return AgentOutcome("stopped" if sink.limit_hit is None else "killed",
                            why or sink.limit_hit or "")
    try:
        outcome = task.result()
    except Exception as exc:
        return AgentOutcome("error", f"{type(exc).__name__}: {exc}")
    if why:  # the agent only saw a stop: say which limit it was
        return attrs.evolve(outcome, detail=f"{why}; {outcome.detail}" if outcome.detail
                            else why)
    if outcome.reason == "error" and sink.model_failing is not None:
        # it gave up on a model call that kept failing (Codex after its reconnects, pi
        # after its retries): the API's failure, as at a timeout
        failed = sink.model_failing.summary()
        said = outcome.detail if outcome.detail and outcome.detail not in failed else ""
        return attrs.evolve(outcome, detail=f"{MODEL_OUTAGE}the agent gave up: {failed}"
                            + (f"; {said}" if said else ""))
    return outcome


def agent_request(trial: Trial, sandbox, agent_name: str,
             endpoint: dict[str, Any] | None = None) -> AgentRequest:
    from ce_runtime.execute.sandbox import tools

    plan = trial.plan
    agent = block_to_json(plan.agent)
    agent["type"] = agent_name
    return AgentRequest(
        trial_id=trial.trial_id, prompt=plan.prompt, workspace=sandbox.inner_workspace,
        task_dir=trial.task_dir, agent=agent,
        limits=block_to_json(plan.run_limits),
        reference=block_to_json(plan.reference) if plan.reference else None,
        criteria=[{"id": c.id, "type": c.type, "args": c.args} for c in plan.criteria],
        sandbox=sandbox, model_endpoint=endpoint,
        tools=tools.request_tools(agent_name))


def model_endpoint(trial: Trial, agent_name: str, ctx: RunContext, sandbox, notes):
    """Where the agent's model answers, and the scripted server to stop afterwards."""
    from ce_runtime.execute import credentials

    if agent_name not in credentials.MODEL_AGENTS:
        return None, None
    if not ctx.scripted_model:
        return credentials.real_endpoint(agent_name, agent=trial.plan.agent), None
    import yaml

    from ce_runtime.model_server import ModelServer, Script

    path = credentials.script_path(trial.plan.agent, trial.source, agent_name)
    with open(path, encoding="utf-8") as fh:
        try:
            data = yaml.safe_load(fh)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path} is not valid YAML: {exc}") from None
    script = Script.from_data(data, row=trial.plan.row_id, workspace=sandbox.inner_workspace,
                              where=os.path.basename(path))
    server = ModelServer(script).start()
    notes["model_server"] = {"script": path, "url": server.url}
    return {"base_url": server.url, "api_key": "scripted-no-key", "scripted": True}, server


def simulator_endpoint(endpoint: dict[str, Any] | None) -> dict[str, Any]:
    """The simulated user talks Messages API: the scripted server (it speaks it too), or
    Anthropic with ce's credentials."""
    if endpoint and endpoint.get("scripted"):
        return endpoint
    from ce_runtime.execute import credentials

    return credentials.real_endpoint("claude-code") or {}


async def agent_phase(agent, trial: Trial, sandbox, agent_name: str, sink: TrialSink,
                       stop: asyncio.Event, notes: dict[str, Any], trusted,
                       endpoint: dict[str, Any] | None = None, checker=None
                       ) -> tuple[AgentOutcome, str | None]:
    """The agent, then the end of its phase: what it left running is killed, and the files
    the grader trusts are checked (an error when the agent changed one)."""
    from ce_runtime.execute import integrity

    request = agent_request(trial, sandbox, agent_name, endpoint)
    sim = trial.plan.simulation
    if sim is not None and sim.enabled:
        if not getattr(agent, "dialog", False):
            return AgentOutcome("error", f"the {agent_name} agent cannot hold a simulated "
                                "dialog (claude-code and openai can)"), None
        from ce_runtime.execute.dialog import Dialog

        dialog = Dialog(sim, simulator_endpoint(endpoint), request.prompt or "", sink,
                        checker)
        dialog.user_said(request.prompt or "")
        request = attrs.evolve(request, dialog=dialog)
        notes["dialog"] = dialog
    if getattr(agent, "starts_nothing", False):  # `none`: its events, and nothing to undo
        return await run_agent(agent, request, sink, stop, trial.plan.run_limits), None
    await sandbox.agent_starts(trusted=bool(getattr(agent, "trusted", False)))
    try:
        outcome = await run_agent(agent, request, sink, stop, trial.plan.run_limits)
    except BaseException:  # interrupted: end the phase, but let the interruption through
        with contextlib.suppress(Exception):
            await sandbox.agent_ended()
        raise
    left = await sandbox.agent_ended()
    if left:
        notes["agent_left_running"] = left
        sink.emit(T.Message(sink.clock(), "system",
                            "ce: the agent left processes running; killed: "
                            + ", ".join(left[:20])))
    changed = await asyncio.to_thread(integrity.check, trusted)
    if changed:
        notes["integrity"] = changed
        return outcome, (f"integrity: {changed[0]}" + (f" (and {len(changed) - 1} more)"
                         if len(changed) > 1 else "") + "; not graded")
    return outcome, None


def grading_check(trial: Trial, sandbox, sink: TrialSink, program):
    """Grades the trial as it stands (a dialog's per-turn check): True when it passes."""
    async def check() -> bool:
        from ce_runtime.execute.sandbox.runner import SandboxRunner
        from ce_runtime.grade.grading import host_for
        from ce_runtime.grade.interpreter import Grader
        from ce_runtime.grade.judge import judge_from_env

        plan = trial.plan
        host = host_for(plan, sandbox.workspace, trial.task_dir, sink.view.view,
                        judge_from_env(), SandboxRunner(sandbox, asyncio.get_running_loop()))
        try:
            graded = await asyncio.to_thread(Grader(plan, program=program).grade, host, False,
                                             ())
        except InfrastructureError:
            return False
        return graded.success
    return check
