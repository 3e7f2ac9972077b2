"""An agent_judge's session: the claude-code adapter, in a sandbox of its own around a
copy of the workspace, exactly as a trial's agent runs (the same CLI, launcher, trace
events), so the judge is confined like the agent it grades and its transcript and usage
are kept with the trial's results."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from typing import Any

from ce_runtime.execute.agent_protocol import AgentRequest
from ce_runtime.execute.sandbox.base import SandboxSpec
from ce_runtime.trace import events as T

JUDGE_SYSTEM = ("You are a strict grader with tools, working in a copy of the workspace "
                "under evaluation. Use the tools to check what the instructions ask, then "
                'end with one JSON object: {"score": <number between 0 and 1>, '
                '"rationale": "<why>"}.')
DEFAULT_TOOLS = ["Read", "Grep", "Glob", "Bash"]


class _Collect:
    def __init__(self) -> None:
        self.events: list[T.Event] = []
        self.started = time.monotonic()

    def clock(self) -> float:
        return time.monotonic() - self.started

    def emit(self, event: T.Event) -> None:
        self.events.append(event)


class JudgeTimeout(TimeoutError):
    """The judge ran past its `turn_timeout`; `session` is what it did and spent so far."""

    def __init__(self, session: dict[str, Any]):
        super().__init__("the judge session timed out")
        self.session = session


async def judge_session(driver: str, work: str, prompt: str, agent: dict[str, Any],
                        endpoint: dict[str, Any], max_turns: int, timeout: float
                        ) -> dict[str, Any]:
    """{"text": the judge's last words, "outcome", "usage", "transcript"}; raises
    JudgeTimeout past `timeout` (the CLI and everything it started are killed)."""
    from ce_runtime.execute.agents import load_agent
    from ce_runtime.execute.sandbox import open_sandbox

    tools = [str(t) for t in agent.get("allowed_tools") or DEFAULT_TOOLS]
    config = {**agent, "type": "claude-code", "allowed_tools": tools,
              "setting_sources": [],  # the security floor: nothing planted loads
              "system_prompt": JUDGE_SYSTEM, "system_prompt_mode": "replace",
              "sdk_options": {**(agent.get("sdk_options") or {}), "tools": tools},
              "permission_mode": agent.get("permission_mode") or "acceptEdits"}
    scratch = tempfile.mkdtemp(prefix="ce-judge-")
    box = open_sandbox(driver, SandboxSpec("judge", scratch, "", workspace=work,
                                           network="model"))
    sink = _Collect()
    try:
        await box.start()
        request = AgentRequest(trial_id="judge", prompt=prompt,
                               workspace=box.inner_workspace, task_dir="", agent=config,
                               limits={"max_turns": max_turns}, sandbox=box,
                               model_endpoint=endpoint)
        await box.agent_starts()
        try:
            outcome = await asyncio.wait_for(load_agent("claude-code").run(
                request, sink, asyncio.Event()), timeout)
        except TimeoutError:
            raise JudgeTimeout(_session(sink, "timeout", f"past {timeout:g} s")) from None
        finally:
            with contextlib.suppress(Exception):
                await box.agent_ended()
    finally:
        with contextlib.suppress(Exception):
            await box.teardown()
        shutil.rmtree(scratch, ignore_errors=True)
    return _session(sink, outcome.reason, outcome.detail)


def _session(sink: _Collect, reason: str, detail: str) -> dict[str, Any]:
    texts = [e.text for e in sink.events if isinstance(e, T.Message) and e.role == "assistant"]
    usage = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
             "cache_write_tokens": 0, "cost_usd": 0.0}
    for e in sink.events:  # in judge_usage's buckets: it counts the session's spending
        if isinstance(e, T.Usage):
            usage["input_tokens"] += e.input_tokens
            usage["output_tokens"] += e.output_tokens
            usage["cache_read_tokens"] += e.cache_read_tokens
            usage["cache_write_tokens"] += e.cache_creation_tokens
            usage["cost_usd"] += e.cost_usd
    return {"text": texts[-1] if texts else "", "outcome": {"reason": reason, "detail": detail},
            "usage": usage, "transcript": [T.event_to_dict(e) for e in sink.events]}
