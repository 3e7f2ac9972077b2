"""coder_eval 0.12.16's early stop (per-criterion `stop_early` blocks), rule by rule, with
hand-computed values: the weighted ceiling (fail-stop), recall deferral, the weighted
floor of the `on_pass: stop` subset (pass-stop), `decide_within` timeouts, latching, the
stop reasons, and the weighted armed gate of an early-stopped run.

P = a pass-capable criterion (`command_executed` min_count 1: it can only live-pass),
D = a distractor (`command_executed` max_count 0: it can only live-fail)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import yaml

from ce_lang.compiler import compile_paths
from ce_lang.lang.instances import instances_from_plan
from ce_lang.lang.stdlib import registry_for_sources
from ce_runtime.grade.host import Host
from ce_runtime.grade.interpreter import Grader
from ce_runtime.grade.monitor import LiveMonitor
from ce_runtime.trace import events as T
from ce_runtime.trace.view import build_view


def P(pattern: str, weight: float = 1, **block) -> dict:
    return {"type": "command_executed", "command_pattern": pattern, "min_count": 1,
            "weight": weight, "stop_early": block, "description": f"runs {pattern}"}


def D(pattern: str, weight: float = 1, **block) -> dict:
    return {"type": "command_executed", "command_pattern": pattern, "min_count": 0,
            "max_count": 0, "weight": weight, "stop_early": block,
            "description": f"never runs {pattern}"}


def compile_task(tmp_path, criteria: list[dict], gate: float | None = None, **limits):
    run_limits = dict(limits)
    if gate is not None:
        run_limits["stop_early_gate_threshold"] = gate
    doc = {"task_id": "t", "description": "d", "initial_prompt": "p",
           "run_limits": run_limits, "success_criteria": criteria}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = compile_paths([str(path)])
    assert not result.errors, [d.message for d in result.diagnostics]
    return result.trials[0].plan


class Run:
    """Feeds bash calls to a LiveMonitor; `stops_at` is the call number (1-based) whose
    event stopped the run, `None` if it never stopped."""

    def __init__(self, plan):
        self.plan = plan
        registry = registry_for_sources(plan.criteria_sources)
        self.monitor = LiveMonitor(plan, instances_from_plan(plan.criteria, registry))
        self.events: list[T.Event] = []
        self.calls = 0

    def emit(self, event: T.Event) -> None:
        self.events.append(event)
        self.monitor.on_event(event)

    def call(self, command: str, result: bool = True) -> Run:
        self.calls += 1
        cid = f"k{self.calls}"
        self.emit(T.ToolCall(float(self.calls), cid, "Bash", "Bash", {"command": command}))
        if result:
            self.emit(T.ToolResult(float(self.calls), cid, "ok", ""))
        return self

    @property
    def info(self):
        return self.monitor.stop_info

    def decided(self) -> dict[str, str]:
        return {a.call_id: a.decided for a in self.monitor.armed if a.decided}

    def grade(self, workspace: str):
        registry = registry_for_sources(self.plan.criteria_sources)
        return Grader(self.plan, registry).grade(
            Host(workspace=workspace, trace=build_view(self.events)),
            stopped_early=self.monitor.should_stop, armed=self.plan.early_stop.armed)


def test_the_blocks_compile_to_the_weighted_rule(tmp_path):
    plan = compile_task(tmp_path, [P("good", on_pass="stop", decide_within=4), D("bad")],
                        gate=0.5)
    es = plan.early_stop
    assert (es.enabled, es.armed, es.rule, es.gate_threshold) == (True, ("c0", "c1"),
                                                                  "weighted", 0.5)
    assert [c.arming.decide_within for c in plan.criteria] == [4, None]
    killed = compile_task(tmp_path, [D("bad")], stop_early=False)
    assert not killed.early_stop.enabled and not LiveMonitor(killed, []).active


# -- fail-stop: the weighted ceiling -----------------------------------------------------
def test_ceiling_at_the_default_threshold_any_armed_fail_stops(tmp_path):
    run = Run(compile_task(tmp_path, [D("bad1"), D("bad2", weight=3)]))
    run.call("ls").call("bad1 now")
    # ceiling = 3/4 = 0.75 < 1.0 -> stop on the second call
    assert run.info.reason == "criterion_failed" and run.info.criterion == "c0"
    assert run.info.tool_call_index == 2 and run.info.gate_threshold == 1.0


def test_ceiling_absorbs_a_low_weight_fail_until_the_gate_is_doomed(tmp_path):
    run = Run(compile_task(tmp_path, [D("bad1"), D("bad2", weight=3)], gate=0.7))
    run.call("bad1")
    # c0 failed: ceiling = 3/4 = 0.75 >= 0.7: the run goes on
    assert run.decided() == {"c0": "fail"} and run.info is None
    run.call("ls").call("bad2")
    # c1 failed too: ceiling = 0/4 = 0 < 0.7: stop, c1 decided it
    assert (run.info.reason, run.info.criterion, run.info.tool_call_index) == \
        ("criterion_failed", "c1", 3)


def test_ceiling_below_the_threshold_with_one_failure(tmp_path):
    run = Run(compile_task(tmp_path, [D("bad1", weight=1), D("bad2", weight=3)], gate=0.8))
    run.call("bad1")  # ceiling = 0.75 < 0.8
    assert run.info.reason == "criterion_failed" and run.info.tool_call_index == 1


# -- recall deferral ---------------------------------------------------------------------
def test_a_fail_stop_waits_for_every_pass_capable_criterion(tmp_path):
    run = Run(compile_task(tmp_path, [P("good"), D("bad")]))
    run.call("bad")
    # ceiling = 1/2 < 1, but c0 (pass-capable) is undecided: deferred
    assert run.decided() == {"c1": "fail"} and run.info is None
    run.call("ls")
    assert run.info is None
    run.call("good")  # c0 decides: nothing is waiting any more, the latched fail stops
    assert run.decided() == {"c0": "pass", "c1": "fail"}
    assert (run.info.reason, run.info.criterion, run.info.tool_call_index) == \
        ("criterion_failed", "c1", 3)


def test_a_deferred_fail_stop_never_fires_if_the_positive_never_decides(tmp_path):
    run = Run(compile_task(tmp_path, [P("good"), D("bad")]))
    for command in ("bad", "ls", "cat x", "pwd"):
        run.call(command)
    assert run.info is None and not run.monitor.should_stop  # runs to the cap


# -- decide_within -----------------------------------------------------------------------
def test_decide_within_is_an_effective_fail_after_n_steps(tmp_path):
    run = Run(compile_task(tmp_path, [P("good", decide_within=2)]))
    run.call("ls")
    run.call("pwd", result=False)  # step 2 in flight: not over yet
    assert run.info is None
    run.emit(T.ToolResult(2.5, "k2", "ok", ""))  # step 2 over, still undecided
    assert (run.info.reason, run.info.criterion, run.info.tool_call_index) == \
        ("decision_budget_exceeded", "c0", 2)


def test_decide_within_counts_a_step_over_when_the_next_call_begins(tmp_path):
    run = Run(compile_task(tmp_path, [P("good", decide_within=1)]))
    run.call("ls", result=False).call("pwd", result=False)  # call 1 never got a result
    assert run.info.reason == "decision_budget_exceeded" and run.info.tool_call_index == 2


def test_deciding_on_the_last_allowed_step_is_not_penalized(tmp_path):
    run = Run(compile_task(tmp_path, [P("good", decide_within=2)]))
    run.call("ls").call("good")
    run.call("more").call("and more")
    assert run.decided() == {"c0": "pass"}
    assert run.info is None  # on_pass: continue: a live pass only latches


def test_decide_within_is_inert_on_a_distractor(tmp_path):
    run = Run(compile_task(tmp_path, [D("bad", decide_within=1)]))
    run.call("ls").call("pwd").call("cat")
    assert run.info is None and run.decided() == {}


def test_a_timeout_absorbed_by_the_threshold(tmp_path):
    plan = compile_task(tmp_path, [P("good", weight=1, decide_within=1),
                                   P("fine", weight=4, on_pass="stop")], gate=0.8)
    run = Run(plan)
    run.call("ls")
    # c0 timed out: ceiling = 4/5 = 0.8, not below 0.8: absorbed; c1 still undecided
    assert run.decided() == {"c0": "fail"} and run.info is None
    run.call("fine")
    # floor of {c1} = 4/4 = 1 >= 0.8, nothing pass-capable waiting: pass-stop
    assert (run.info.reason, run.info.criterion) == ("criterion_passed", "c1")


def test_a_timeout_that_dooms_the_gate_reports_decision_budget_exceeded(tmp_path):
    run = Run(compile_task(tmp_path, [P("good", decide_within=2), D("bad")]))
    run.call("bad")  # c1 failed; deferred: c0 is pass-capable and undecided
    assert run.info is None
    run.call("ls")  # step 2 over: c0 times out; nothing is waiting; ceiling 0 < 1
    assert (run.info.reason, run.info.criterion, run.info.tool_call_index) == \
        ("decision_budget_exceeded", "c0", 2)


# -- pass-stop: the weighted floor -------------------------------------------------------
def test_floor_of_the_on_pass_stop_subset(tmp_path):
    criteria = [P("one", weight=2, on_pass="stop"), P("two", weight=1, on_pass="stop")]
    run = Run(compile_task(tmp_path, criteria, gate=0.6))
    run.call("one")  # floor = 2/3 = 0.667 >= 0.6
    assert (run.info.reason, run.info.criterion, run.info.tool_call_index) == \
        ("criterion_passed", "c0", 1)
    strict = Run(compile_task(tmp_path, criteria))
    strict.call("one")  # floor = 2/3 < 1.0
    assert strict.info is None
    strict.call("two")  # floor = 3/3
    assert (strict.info.reason, strict.info.criterion) == ("criterion_passed", "c1")


def test_a_pass_stop_waits_for_pass_capable_criteria_outside_the_subset(tmp_path):
    run = Run(compile_task(tmp_path, [P("one", on_pass="stop"), P("two")]))
    run.call("one")  # floor {c0} = 1, but c1 (on_pass: continue) is still undecided
    assert run.info is None
    run.call("two")
    assert run.info.reason == "criterion_passed" and run.info.tool_call_index == 2


def test_distractors_are_outside_the_floor_and_never_pass_stop(tmp_path):
    run = Run(compile_task(tmp_path, [P("one", on_pass="stop"), D("bad", on_pass="stop")]))
    run.call("one")  # the subset is {c0}: D can never live-pass
    assert run.info.reason == "criterion_passed"
    never = Run(compile_task(tmp_path, [P("one"), D("bad")]))
    never.call("one").call("more")  # no on_pass: stop criterion: never a pass-stop
    assert never.info is None


def test_verdicts_latch(tmp_path):
    run = Run(compile_task(tmp_path, [P("good"), D("bad", weight=9)], gate=0.05))
    run.call("good").call("good").call("bad").call("bad")
    # one decision each, never re-computed; c1's fail: ceiling = 1/10 >= 0.05: absorbed
    assert [(d.criterion, d.verdict) for d in run.monitor.decisions] == \
        [("c0", "pass"), ("c1", "fail")]
    assert run.info is None


# -- the verdict of an early-stopped run -------------------------------------------------
GATED = [P("good", weight=3, on_pass="stop"), D("bad", weight=1),
         {"type": "file_exists", "path": "report.md", "description": "not armed"}]


@pytest.mark.parametrize("gate, success", [(0.75, True), (0.8, False), (1.0, False)])
def test_an_early_stopped_run_gates_on_the_armed_weighted_rate(tmp_path, gate, success):
    run = Run(compile_task(tmp_path, GATED, gate=gate))
    run.call("bad")  # c1 fails; ceiling = 3/4; deferred (c0 undecided) in any case
    run.call("good")
    # gate 0.75: ceiling 0.75 is not below it, floor {c0} = 1: pass-stop;
    # gate 0.8 / 1.0: ceiling 0.75 is below: fail-stop (c0 decided, nothing waits)
    expected = "criterion_passed" if gate == 0.75 else "criterion_failed"
    assert run.info.reason == expected
    graded = run.grade(str(tmp_path))
    by_id = {r.id: r for r in graded.criteria}
    assert by_id["c2"].advisory and not by_id["c2"].gating  # report.md: never written
    # armed pass rate = (3·1 + 1·0) / 4 = 0.75
    assert graded.success is success
    # the weighted score keeps every weighted criterion: (3·1 + 1·0 + 1·0) / 5
    assert graded.weighted_score == pytest.approx(0.6)


def test_a_run_that_completes_gates_on_the_full_set(tmp_path):
    run = Run(compile_task(tmp_path, GATED, gate=0.5))
    run.call("good")  # floor = 1 >= 0.5 ... but suppose the agent finished first:
    events = run.events
    registry = registry_for_sources(run.plan.criteria_sources)
    graded = Grader(run.plan, registry).grade(Host(workspace=str(tmp_path),
                                                   trace=build_view(events)))
    assert graded.success is False  # report.md is missing: strict AND over every criterion
    (tmp_path / "report.md").write_text("x")
    graded = Grader(run.plan, registry).grade(Host(workspace=str(tmp_path),
                                                   trace=build_view(events)))
    assert graded.success is True


# -- end to end: the deciding command completes, the record says why ---------------------
SCRIPTED = """\
task_id: stops
description: a distractor misfires on the first command
initial_prompt: go
agent:
  type: script
  script:
    - run: echo bad; sleep 0.3; echo finished
    - run: echo never
    - write: never.txt
      content: x
sandbox: {python: null}
run_limits: {stop_early_gate_threshold: 1.0, max_turns: 10}
success_criteria:
  - type: command_executed
    command_pattern: "echo bad"
    min_count: 0
    max_count: 0
    stop_early: {}
    description: never echoes bad
  - type: file_exists
    path: never.txt
    description: not armed
"""


@pytest.mark.slow
def test_a_stopped_run_records_the_deciding_command_completed(tmp_path):
    (tmp_path / "t.yaml").write_text(SCRIPTED)
    res = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "run", "t.yaml",
                          "--runs-root", "runs"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 1, res.stderr
    tdir = tmp_path / "runs" / "latest" / "default" / "stops" / "00"
    rec = json.loads((tdir / "task.json").read_text())
    assert rec["stopped_early"] is True and rec["status"] == "FAILURE"
    assert rec["early_stop_reason"] == "criterion_failed"
    es = rec["early_stop"]
    assert (es["reason"], es["deciding_criterion"], es["deciding_criterion_type"],
            es["armed_criteria"], es["tool_call_index"], es["gate_threshold"]) == \
        ("criterion_failed", "c0", "command_executed", ["c0"], 1, 1.0)
    assert es["turns_remaining_at_stop"] is not None
    events = T.read_trace(str(tdir / "trace.msgpack")).events
    results = [e for e in events if isinstance(e, T.ToolResult)]
    calls = [e for e in events if isinstance(e, T.ToolCall)]
    assert len(calls) == 1  # nothing after the deciding command
    assert results and results[0].status == "ok" and "finished" in results[0].output
    assert not os.path.exists(tdir / "never.txt")


def test_the_sink_waits_for_the_deciding_calls_result(tmp_path):
    from ce_runtime.execute.agent_phase import TrialSink

    plan = compile_task(tmp_path, [D("bad")])
    registry = registry_for_sources(plan.criteria_sources)
    monitor = LiveMonitor(plan, instances_from_plan(plan.criteria, registry))
    writer = T.TraceWriter(str(tmp_path / "trace.msgpack"))
    stop = asyncio.Event()
    sink = TrialSink(writer, monitor, plan.run_limits, stop, 0.0)
    sink.emit(T.ToolCall(1.0, "a", "Bash", "Bash", {"command": "bad"}))
    assert monitor.should_stop and not stop.is_set()  # decided; the command still runs
    sink.emit(T.ToolCall(1.1, "b", "Read", "Read", {"file_path": "x"}))  # a batched call
    sink.emit(T.ToolResult(1.2, "b", "ok", ""))
    assert not stop.is_set()
    sink.emit(T.ToolResult(1.5, "a", "ok", "done"))
    assert stop.is_set()
    writer.close()
