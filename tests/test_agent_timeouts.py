"""run_agent under task_timeout / turn_timeout: a TIMEOUT says which timeout stopped the
agent, in the trace (a system message when it fires) and in the agent's outcome (which
task.json, report.md, JUnit and SARIF show); an agent only sees a stop."""

from __future__ import annotations

import asyncio
import types

import pytest

from ce_runtime.execute.agent_phase import run_agent
from ce_runtime.execute.agent_protocol import AgentOutcome
from ce_runtime.store.record import Status
from ce_runtime.trace import events as T


class Sink:
    """What run_agent reads of a TrialSink: the open turn, the limit hit, the trace."""

    def __init__(self):
        self.events: list[T.Event] = []
        self.limit_hit: str | None = None
        self.turn_started: float | None = None
        self.turns = 0
        self.model_failing: T.ModelError | None = None  # (TrialSink: set by a ModelError)

    def clock(self) -> float:
        return 0.0

    def emit(self, event: T.Event) -> None:
        self.events.append(event)


class Hangs:
    """Opens a turn, then waits for the stop (as a CLI waiting on its model does)."""

    def __init__(self, ignore_stop: bool = False):
        self.ignore_stop = ignore_stop

    async def run(self, request, sink, stop):
        import time

        sink.turns, sink.turn_started = 1, time.monotonic()
        while self.ignore_stop or not stop.is_set():
            await asyncio.sleep(0.01)
        return AgentOutcome("stopped", "session s1, 1 turns")


def limits(**kw):
    return types.SimpleNamespace(**{"task_timeout": None, "turn_timeout": None, **kw})


@pytest.mark.parametrize("kw, why", [
    ({"turn_timeout": 0.2}, "turn_timeout (0.2s, turn 1)"),
    ({"task_timeout": 0.2}, "task_timeout (0.2s)"),
])
def test_a_timeout_says_which_one_fired(kw, why):
    sink, stop = Sink(), asyncio.Event()
    outcome = asyncio.run(run_agent(Hangs(), None, sink, stop, limits(**kw)))
    assert sink.limit_hit == Status.TIMEOUT
    assert outcome == AgentOutcome("stopped", f"{why}; session s1, 1 turns")
    assert [(e.role, e.text) for e in sink.events if isinstance(e, T.Message)] == [
        ("system", f"ce: {why} reached: stopping the agent")]


def test_an_agent_killed_after_its_timeout_names_the_timeout(monkeypatch):
    monkeypatch.setattr("ce_runtime.execute.agent_phase.STOP_GRACE_S", 0.1)
    sink, stop = Sink(), asyncio.Event()
    outcome = asyncio.run(run_agent(Hangs(ignore_stop=True), None, sink, stop,
                                    limits(task_timeout=0.2)))
    assert outcome == AgentOutcome("killed", "task_timeout (0.2s)")


def test_a_budget_stop_is_not_called_a_timeout():
    """A stop for a spent budget that then outlives the task_timeout stays the budget's."""
    sink, stop = Sink(), asyncio.Event()
    sink.limit_hit = Status.TOKEN_BUDGET_EXCEEDED

    class Slow(Hangs):
        async def run(self, request, sink, stop):
            await asyncio.sleep(0.4)
            return AgentOutcome("stopped", "session s1")

    outcome = asyncio.run(run_agent(Slow(), None, sink, stop, limits(task_timeout=0.1)))
    assert outcome == AgentOutcome("stopped", "session s1")
    assert sink.limit_hit == Status.TOKEN_BUDGET_EXCEEDED and sink.events == []


def test_a_timeout_while_the_model_call_fails_is_the_apis_error():
    """The agent's last model call failed and nothing answered since (TrialSink's
    `model_failing`): the timeout is an outage, an ERROR that says so, not a TIMEOUT
    (tests/test_model_outage.py runs it with the real CLIs)."""
    sink, stop = Sink(), asyncio.Event()
    sink.model_failing = T.ModelError(1.0, "overloaded", 529, 3, 10)
    outcome = asyncio.run(run_agent(Hangs(), None, sink, stop, limits(task_timeout=0.2)))
    said = "the model API was failing when task_timeout (0.2s) was reached: 529 " \
        "overloaded (attempt 3 of 10)"
    assert outcome == AgentOutcome("error", said) and sink.limit_hit is None
    assert [e.text for e in sink.events if isinstance(e, T.Message)] == [
        f"ce: {said}: stopping the agent"]


def test_an_agent_giving_up_on_a_failing_model_call_is_the_apis_error():
    sink, stop = Sink(), asyncio.Event()
    sink.model_failing = T.ModelError(1.0, "503 unavailable")

    class GivesUp(Hangs):
        async def run(self, request, sink, stop):
            return AgentOutcome("error", "503 unavailable")

    outcome = asyncio.run(run_agent(GivesUp(), None, sink, stop, limits(task_timeout=5)))
    assert outcome == AgentOutcome("error", "the model API was failing when the agent "
                                   "gave up: 503 unavailable")  # (said once)
    sink.model_failing = T.ModelError(1.0, "overloaded", 529, 5, 5)
    outcome = asyncio.run(run_agent(GivesUp(), None, sink, asyncio.Event(),
                                    limits(task_timeout=5)))
    assert outcome == AgentOutcome("error", "the model API was failing when the agent "
                                   "gave up: 529 overloaded (attempt 5 of 5); 503 unavailable")
