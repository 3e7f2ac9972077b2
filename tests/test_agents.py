"""The built-in agents `none`, `script` and `oracle`, run against a real temporary
workspace and an event-collecting sink: exact trace events, files written, commands run,
stop requests, max_turns, and cancellation (process groups die with the agent)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest

from ce_agents.none import NoneAgent
from ce_agents.oracle import OracleAgent
from ce_agents.script import OUTPUT_LIMIT, ScriptAgent
from ce_runtime.execute.agent_protocol import AgentOutcome, AgentRequest
from ce_runtime.execute.agents import load_agent
from ce_runtime.execute.sandbox import open_sandbox
from ce_runtime.execute.sandbox.base import SandboxSpec
from ce_runtime.trace import events as T

ROOT = Path(__file__).resolve().parent.parent


class Sink:
    """Collects events; the clock ticks 1 ms per call. `on_emit` lets a test react to
    an event (set the stop signal, as the live monitor does)."""

    def __init__(self, on_emit=None):
        self.events: list[T.Event] = []
        self.on_emit = on_emit
        self._t = 0.0

    def emit(self, event: T.Event) -> None:
        self.events.append(event)
        if self.on_emit is not None:
            self.on_emit(event)

    def clock(self) -> float:
        self._t += 0.001
        return self._t


def shape(e: T.Event) -> tuple:
    """The parts of an event the tests compare exactly (outputs are checked apart)."""
    if isinstance(e, T.AgentStart):
        return ("agent_start", e.agent)
    if isinstance(e, T.TurnStart | T.TurnEnd):
        return (type(e).__struct_config__.tag, e.turn)
    if isinstance(e, T.Message):
        return ("message", e.role, e.text)
    if isinstance(e, T.ToolCall):
        assert e.raw_tool == e.tool
        return ("call", e.call_id, e.tool, e.params)
    if isinstance(e, T.ToolResult):
        return ("result", e.call_id, e.status)
    if isinstance(e, T.Usage):
        return ("usage", e.input_tokens, e.output_tokens, e.cost_usd)
    if isinstance(e, T.AgentEnd):
        return ("agent_end", e.reason, e.detail)
    raise AssertionError(f"unexpected event {e!r}")


def results(sink: Sink) -> list[T.ToolResult]:
    return [e for e in sink.events if isinstance(e, T.ToolResult)]


@pytest.fixture
def ws(tmp_path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def task_dir(tmp_path) -> Path:
    path = tmp_path / "task"
    path.mkdir()
    return path


class LazySandbox:
    """A tempdir sandbox around `ws`, started on first use in the running loop (tests
    build requests before their loop exists); `stop_all` ends every one of them."""

    started: list = []
    scratches: list = []  # made for every request, started or not: all are removed

    def __init__(self, ws: Path, task_dir: Path, env: dict[str, str] | None):
        scratch = tempfile.mkdtemp(prefix="ce-test-")  # short: the init's unix socket
        LazySandbox.scratches.append(scratch)
        self.spec = SandboxSpec("t/00", scratch, str(task_dir),
                                env=dict(env or {}), workspace=str(ws))
        self.inner_workspace = str(ws)
        self.workspace = str(ws)
        self._box = None

    async def _get(self):
        if self._box is None:
            self._box = open_sandbox("tempdir", self.spec)
            await self._box.start()
            LazySandbox.started.append(self._box)
        return self._box

    def __getattr__(self, name):
        async def call(*args, **kwargs):
            return await getattr(await self._get(), name)(*args, **kwargs)
        return call

    @classmethod
    async def teardown_all(cls) -> None:
        for box in list(cls.started):
            await box.teardown()

    @classmethod
    def stop_all(cls) -> None:
        for box in cls.started:
            if box.init is not None and box.init.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(box.init.pid, signal.SIGKILL)
        for scratch in cls.scratches:
            shutil.rmtree(scratch, ignore_errors=True)
        cls.started.clear()
        cls.scratches.clear()


@pytest.fixture(autouse=True)
def _sandboxes_end():
    yield
    LazySandbox.stop_all()


def request(ws: Path, task_dir: Path | None = None, *, script=None, limits=None,
            reference=None, criteria=None, env=None) -> AgentRequest:
    agent = {"type": "script", "model": None}
    if script is not None:
        agent["script"] = script
    return AgentRequest(trial_id="t/00", prompt="do it", workspace=str(ws),
                        task_dir=str(task_dir or ws), agent=agent, limits=limits or {},
                        reference=reference, criteria=criteria or [],
                        sandbox=LazySandbox(ws, task_dir or ws, env))


async def torn_down(coro):
    try:
        return await coro
    finally:
        await LazySandbox.teardown_all()


def play(agent, req: AgentRequest, sink: Sink | None = None,
         stop: asyncio.Event | None = None) -> tuple[AgentOutcome, Sink]:
    """As a trial runs it: the agent, then the end of the agent phase."""
    sink = sink or Sink()

    async def main():
        await req.sandbox.agent_starts()
        try:
            return await agent.run(req, sink, stop or asyncio.Event())
        finally:
            await req.sandbox.agent_ended()
            await req.sandbox.teardown()

    return asyncio.run(main()), sink


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie nobody reaped yet (PID 1 of a container may not reap) is dead too
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone_soon(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


async def wait_for_file(path: Path, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


# -- registry and import rules --------------------------------------------------------------
@pytest.mark.parametrize("name, cls", [("none", NoneAgent), ("oracle", OracleAgent),
                                       ("script", ScriptAgent)])
def test_registry_loads_builtin_agents(name, cls):
    agent = load_agent(name)
    assert isinstance(agent, cls) and agent.name == name


# -- none -------------------------------------------------------------------------------------
def test_none_agent_starts_and_finishes(ws):
    outcome, sink = play(NoneAgent(), request(ws))
    assert outcome == AgentOutcome("finished")
    assert [shape(e) for e in sink.events] == [("agent_start", "none"),
                                                ("agent_end", "finished", "")]
    assert list(ws.iterdir()) == []


# -- script: actions ----------------------------------------------------------------------
def test_script_replays_every_kind_of_action(ws):
    (ws / "notes.txt").write_text("keep\n")
    script = [
        {"say": "I will write hello.py in {workspace}"},
        {"write": "pkg/hello.py", "content": "print('hello')\nprint('hello')\n"},
        {"edit": "pkg/hello.py", "old": "hello", "new": "bye"},
        {"read": "{workspace}/notes.txt"},
        {"tool": "Skill", "params": {"skill": "pdf"}, "output": "Launching skill: pdf"},
        {"usage": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01}},
    ]
    outcome, sink = play(ScriptAgent(), request(ws, script=script))
    assert outcome == AgentOutcome("finished")
    hello = str(ws / "pkg" / "hello.py")
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "script"),
        ("turn_start", 1), ("message", "assistant", f"I will write hello.py in {ws}"),
        ("turn_end", 1),
        ("turn_start", 2),
        ("call", "call_1", "Write",
         {"file_path": hello, "content": "print('hello')\nprint('hello')\n"}),
        ("result", "call_1", "ok"), ("turn_end", 2),
        ("turn_start", 3),
        ("call", "call_2", "Edit",
         {"file_path": hello, "old_string": "hello", "new_string": "bye"}),
        ("result", "call_2", "ok"), ("turn_end", 3),
        ("turn_start", 4), ("call", "call_3", "Read", {"file_path": str(ws / "notes.txt")}),
        ("result", "call_3", "ok"), ("turn_end", 4),
        ("turn_start", 5), ("call", "call_4", "Skill", {"skill": "pdf"}),
        ("result", "call_4", "ok"), ("turn_end", 5),
        ("turn_start", 6), ("usage", 100, 20, 0.01), ("turn_end", 6),
        ("agent_end", "finished", ""),
    ]
    # the first occurrence only is replaced
    assert (ws / "pkg" / "hello.py").read_text() == "print('bye')\nprint('hello')\n"
    out = [r.output for r in results(sink)]
    assert out[0] == f"File created successfully at: {hello}"
    assert out[2] == "keep\n" and out[3] == "Launching skill: pdf"
    times = [e.t for e in sink.events]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_write_overwrites_and_keeps_content_exactly(ws):
    (ws / "a.txt").write_text("old")
    outcome, sink = play(ScriptAgent(), request(ws, script=[
        {"write": "a.txt", "content": "line1\r\nline2 {x} {workspace}"}]))
    assert outcome.reason == "finished"
    assert (ws / "a.txt").read_bytes() == f"line1\r\nline2 {{x}} {ws}".encode()
    assert results(sink)[0].output == f"The file {ws / 'a.txt'} has been updated."


@pytest.mark.parametrize("action, message", [
    ({"edit": "a.txt", "old": "absent", "new": "x"}, "String to replace not found"),
    ({"edit": "missing.txt", "old": "a", "new": "x"}, "No such file"),
    ({"read": "missing.txt"}, "No such file"),
    ({"write": "a.txt/inside", "content": "x"}, "Error writing"),
])
def test_file_actions_that_fail_give_error_results_and_the_script_goes_on(ws, action, message):
    (ws / "a.txt").write_text("text")
    outcome, sink = play(ScriptAgent(), request(ws, script=[action, {"say": "next"}]))
    assert outcome.reason == "finished"
    [res] = results(sink)
    assert res.status == "error" and message in res.output
    assert (ws / "a.txt").read_text() == "text"
    assert shape(sink.events[-2]) == ("turn_end", 2)


def test_tool_action_with_an_error_status_runs_nothing(ws):
    outcome, sink = play(ScriptAgent(), request(ws, script=[
        {"tool": "mcp__db__query", "params": {"sql": "select 1"}, "status": "denied"},
        {"tool": "TodoWrite"}]))
    assert outcome.reason == "finished"
    assert [shape(e) for e in sink.events if isinstance(e, T.ToolCall | T.ToolResult)] == [
        ("call", "call_1", "mcp__db__query", {"sql": "select 1"}),
        ("result", "call_1", "denied"),
        ("call", "call_2", "TodoWrite", {}), ("result", "call_2", "ok")]


# -- script: commands ----------------------------------------------------------------------
def test_run_records_exit_status_output_and_duration(ws):
    env = {"CE_AGENT_TEST": "from-the-sandbox"}
    outcome, sink = play(ScriptAgent(), request(ws, env=env, script=[
        {"run": "pwd; echo $CE_AGENT_TEST; echo made > made.txt"},
        {"run": "echo partial; echo broken >&2; exit 3"},
        {"run": "sleep 5", "timeout": 0.2},
    ]))
    assert outcome.reason == "finished"
    calls = [shape(e) for e in sink.events if isinstance(e, T.ToolCall)]
    assert calls == [
        ("call", "call_1", "Bash", {"command": "pwd; echo $CE_AGENT_TEST; echo made > made.txt"}),
        ("call", "call_2", "Bash", {"command": "echo partial; echo broken >&2; exit 3"}),
        ("call", "call_3", "Bash", {"command": "sleep 5"})]
    ok, failed, timed_out = results(sink)
    assert (ok.status, ok.output) == ("ok", f"{ws}\nfrom-the-sandbox\n")
    assert (ws / "made.txt").read_text() == "made\n"
    assert (failed.status, failed.output) == ("error", "partial\nbroken\n[exit code 3]")
    assert timed_out.status == "error" and timed_out.output == "[timed out after 0.2 s]"
    assert 150 < timed_out.duration_ms < 4000
    assert all(r.duration_ms > 0 for r in (ok, failed))


def test_what_a_command_leaves_running_lives_until_the_agent_returns(ws):
    seen = {}

    def on_emit(e):  # during the next action, the daemon still runs
        if isinstance(e, T.Message):
            seen["pid"] = int((ws / "pid").read_text())
            seen["alive"] = alive(seen["pid"])

    outcome, sink = play(ScriptAgent(), request(ws, script=[
        {"run": "sleep 30 > /dev/null 2>&1 & echo $! > pid"}, {"say": "server is up"}]),
        Sink(on_emit))
    assert outcome.reason == "finished" and results(sink)[0].status == "ok"
    assert seen["alive"] is True
    assert gone_soon(seen["pid"])


def test_long_outputs_are_truncated_head_and_tail(ws):
    outcome, sink = play(ScriptAgent(), request(ws, script=[
        {"run": "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END"}]))
    assert outcome.reason == "finished"
    [res] = results(sink)
    assert len(res.output) < OUTPUT_LIMIT + 100
    assert res.output.startswith("START\n") and res.output.endswith("END\n")
    assert "characters truncated" in res.output


# -- script: errors, limits, stop -----------------------------------------------------------
def test_fail_ends_the_run_with_an_error(ws):
    outcome, sink = play(ScriptAgent(), request(ws, script=[
        {"say": "trying"}, {"fail": "gave up"}, {"write": "never.txt", "content": ""}]))
    assert outcome == AgentOutcome("error", "gave up")
    assert [shape(e) for e in sink.events][-3:] == [
        ("turn_start", 2), ("turn_end", 2), ("agent_end", "error", "gave up")]
    assert not (ws / "never.txt").exists()


@pytest.mark.parametrize("script, detail", [
    ([{"say": "ok"}, {"wirte": "a.py", "content": ""}],
     "unknown script action 2 (keys: wirte, content)"),
    ([{"say": "a", "run": "b"}], "ambiguous script action 1"),
    ([{"write": "a.py", "contents": "x"}], "script action 1 (write): unknown key(s) contents"),
    ([{"edit": "a.py", "old": "x"}], "script action 1 (edit): missing new"),
    ([{"run": "true", "timeout": -1}], "`timeout` must be a positive number"),
    ([{"sleep": "1"}], "`sleep` must be a number"),
    ([{"tool": "X", "status": "fine"}], "`status` must be one of ok, error"),
    ([{"usage": {"tokens": 3}}], "unknown usage field(s) tokens"),
    (["say hi"], "script action 1 must be a mapping"),
    ({"say": "hi"}, "script must be a list of actions"),
])
def test_malformed_scripts_fail_before_any_turn(ws, script, detail):
    outcome, sink = play(ScriptAgent(), request(ws, script=script))
    assert outcome.reason == "error" and detail in outcome.detail, outcome.detail
    assert [shape(e) for e in sink.events] == [("agent_start", "script"),
                                                ("agent_end", "error", outcome.detail)]


def test_script_agent_without_a_script_is_an_error(ws):
    outcome, _ = play(ScriptAgent(), request(ws))
    assert outcome.reason == "error" and "agent.script" in outcome.detail


def test_empty_script_finishes_without_turns(ws):
    outcome, sink = play(ScriptAgent(), request(ws, script=[]))
    assert outcome.reason == "finished" and len(sink.events) == 2


@pytest.mark.parametrize("n_actions, reason, turns", [(3, "max_turns", 2), (2, "finished", 2)])
def test_max_turns_ends_the_replay(ws, n_actions, reason, turns):
    script = [{"say": f"turn {i}"} for i in range(n_actions)]
    outcome, sink = play(ScriptAgent(), request(ws, script=script, limits={"max_turns": 2}))
    assert outcome.reason == reason
    assert [e.turn for e in sink.events if isinstance(e, T.TurnStart)] == list(range(1, turns + 1))
    assert shape(sink.events[-1])[:2] == ("agent_end", reason)


def test_stop_is_honoured_between_actions(ws):
    stop = asyncio.Event()

    def on_emit(e):  # the live monitor decides on the first tool result
        if isinstance(e, T.ToolResult):
            stop.set()

    outcome, sink = play(ScriptAgent(), request(ws, script=[
        {"tool": "Bash", "params": {"command": "rm -rf /"}}, {"say": "never said"}]),
        Sink(on_emit), stop)
    assert outcome == AgentOutcome("stopped")
    assert [shape(e) for e in sink.events][-3:] == [
        ("result", "call_1", "ok"), ("turn_end", 1), ("agent_end", "stopped", "")]


def test_a_stop_before_the_start_runs_nothing(ws):
    stop = asyncio.Event()
    stop.set()
    outcome, sink = play(ScriptAgent(), request(ws, script=[{"write": "a", "content": ""}]),
                         stop=stop)
    assert outcome.reason == "stopped" and not (ws / "a").exists()
    assert [shape(e) for e in sink.events] == [("agent_start", "script"),
                                                ("agent_end", "stopped", "")]


def test_stop_interrupts_a_sleep(ws):
    async def main():
        stop, sink = asyncio.Event(), Sink()
        asyncio.get_running_loop().call_later(0.1, stop.set)
        started = time.monotonic()
        outcome = await ScriptAgent().run(
            request(ws, script=[{"sleep": 30}, {"say": "never"}]), sink, stop)
        return outcome, sink, time.monotonic() - started

    outcome, sink, took = asyncio.run(torn_down(main()))
    assert outcome.reason == "stopped" and took < 5
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "script"), ("turn_start", 1), ("turn_end", 1),
        ("agent_end", "stopped", "")]


def test_stop_interrupts_a_running_command_and_kills_its_group(ws):
    async def main():
        stop, sink = asyncio.Event(), Sink()
        run = asyncio.ensure_future(ScriptAgent().run(request(ws, script=[
            {"run": "sleep 30 & echo $! > pid; wait"}]), sink, stop))
        pid = int(await wait_for_file(ws / "pid"))
        stop.set()
        return await asyncio.wait_for(run, 10), sink, pid

    outcome, sink, pid = asyncio.run(torn_down(main()))
    assert outcome.reason == "stopped"
    [res] = results(sink)
    assert res.status == "error" and "Interrupted" in res.output
    assert gone_soon(pid)


def test_cancelling_a_sleep_leaves_the_turn_open(ws):
    async def main():
        sink = Sink()
        run = asyncio.ensure_future(ScriptAgent().run(
            request(ws, script=[{"say": "a"}, {"sleep": 30}]), sink, asyncio.Event()))
        await asyncio.sleep(0.1)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return sink

    sink = asyncio.run(torn_down(main()))
    # killed mid-turn: no TurnEnd, no AgentEnd (the runner records how the agent ended)
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "script"), ("turn_start", 1), ("message", "assistant", "a"),
        ("turn_end", 1), ("turn_start", 2)]


def test_cancelling_a_running_command_kills_its_process_group(ws):
    async def main():
        sink = Sink()
        run = asyncio.ensure_future(ScriptAgent().run(request(ws, script=[
            {"run": "sleep 30 & echo $! > pid; wait"}]), sink, asyncio.Event()))
        pid = int(await wait_for_file(ws / "pid"))
        assert alive(pid)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return sink, pid

    sink, pid = asyncio.run(torn_down(main()))
    assert gone_soon(pid)
    assert results(sink) == []  # the call never got a result: it stays unresolved


# -- oracle --------------------------------------------------------------------------------
def comparison(cid: str, agent_file: str, reference_file: str | None = None) -> dict:
    args = {"agent_file": agent_file, "comparison_method": "ast", "similarity_threshold": 0.8,
            "reference_file": reference_file}
    return {"id": cid, "type": "reference_comparison", "args": args}


def test_oracle_copies_a_reference_directory_one_write_per_file(ws, task_dir):
    ref = task_dir / "reference"
    (ref / "pkg").mkdir(parents=True)
    (ref / "pkg" / "__pycache__").mkdir()
    (ref / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0")
    (ref / "pkg" / "mod.py").write_text("X = 1\n")
    (ref / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ref / "run.sh").chmod(0o755)
    (ref / "logo.bin").write_bytes(b"\xff\xfe\x00binary")
    outcome, sink = play(OracleAgent(), request(
        ws, task_dir, reference={"directory": "reference", "file": None, "code": None,
                                 "solve": None}))
    assert outcome == AgentOutcome("finished")
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "oracle"), ("turn_start", 1),
        ("call", "call_1", "Write", {"file_path": str(ws / "logo.bin"),
                                     "content": "<binary file, 9 bytes>"}),
        ("result", "call_1", "ok"),
        ("call", "call_2", "Write", {"file_path": str(ws / "run.sh"),
                                     "content": "#!/bin/sh\necho hi\n"}),
        ("result", "call_2", "ok"),
        ("call", "call_3", "Write", {"file_path": str(ws / "pkg" / "mod.py"),
                                     "content": "X = 1\n"}),
        ("result", "call_3", "ok"),
        ("turn_end", 1), ("agent_end", "finished", "")]
    assert (ws / "logo.bin").read_bytes() == b"\xff\xfe\x00binary"
    assert (ws / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert stat.S_IMODE((ws / "run.sh").stat().st_mode) == 0o755
    assert not (ws / "pkg" / "__pycache__").exists()


def test_oracle_directory_also_fills_each_comparisons_agent_file(ws, task_dir):
    (task_dir / "ref").mkdir()
    (task_dir / "ref" / "solution.py").write_text("def f():\n    return 1\n")
    outcome, sink = play(OracleAgent(), request(
        ws, task_dir, reference={"directory": "ref"},
        criteria=[comparison("c0", "src/answer.py", "solution.py"),
                  comparison("c1", "solution.py", "solution.py")]))
    assert outcome.reason == "finished"
    written = [e.params["file_path"] for e in sink.events if isinstance(e, T.ToolCall)]
    assert written == [str(ws / "solution.py"), str(ws / "src" / "answer.py")]
    assert (ws / "src" / "answer.py").read_text() == "def f():\n    return 1\n"


@pytest.mark.parametrize("kind", ["file", "code"])
def test_oracle_writes_a_file_or_code_reference_at_each_agent_file(ws, task_dir, kind):
    code = "def add(a, b):\n    return a + b\n"
    (task_dir / "reference").mkdir()
    (task_dir / "reference" / "solution.py").write_text(code)
    reference = {"file": "reference/solution.py"} if kind == "file" else {"code": code}
    criteria = [comparison("c0", "calc.py"), {"id": "c1", "type": "file_exists", "args": {}},
                comparison("c2", "src/*.py"), comparison("c3", "./calc.py")]
    outcome, sink = play(OracleAgent(), request(ws, task_dir, reference=reference,
                                                criteria=criteria))
    assert outcome == AgentOutcome("finished")
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "oracle"),
        ("message", "system", "oracle: c2: agent_file src/*.py is a glob, not a single place: "
                              "the reference is not written there"),
        ("turn_start", 1),
        ("call", "call_1", "Write", {"file_path": str(ws / "calc.py"), "content": code}),
        ("result", "call_1", "ok"), ("turn_end", 1), ("agent_end", "finished", "")]
    assert (ws / "calc.py").read_text() == code


def test_oracle_without_a_place_for_the_reference_fails_clearly(ws, task_dir):
    outcome, sink = play(OracleAgent(), request(
        ws, task_dir, reference={"code": "x = 1\n"}, criteria=[comparison("c0", "*.py")]))
    assert outcome.reason == "error"
    assert "nothing to apply" in outcome.detail and "reference.solve" in outcome.detail
    assert not [e for e in sink.events if isinstance(e, T.TurnStart)]


def test_oracle_runs_a_solve_command_as_a_bash_turn(ws, task_dir):
    (task_dir / "gen.sh").write_text("echo generated > out.txt\n")
    outcome, sink = play(OracleAgent(), request(
        ws, task_dir, reference={"solve": "sh $TASK_DIR/gen.sh && cat out.txt"}))
    assert outcome == AgentOutcome("finished")
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "oracle"), ("turn_start", 1),
        ("call", "call_1", "Bash", {"command": "sh $TASK_DIR/gen.sh && cat out.txt"}),
        ("result", "call_1", "ok"), ("turn_end", 1), ("agent_end", "finished", "")]
    assert results(sink)[0].output == "generated\n"


def test_oracle_solve_command_that_fails_is_an_error(ws, task_dir):
    outcome, sink = play(OracleAgent(), request(ws, task_dir, reference={"solve": "exit 4"}))
    assert outcome.reason == "error" and "exited with 4" in outcome.detail
    assert results(sink)[0].status == "error"


def test_oracle_replays_solve_actions_like_the_script_agent(ws, task_dir):
    solve = [{"write": "{workspace}/app.py", "content": "print(1)\n"},
             {"run": "python3 app.py"}, {"say": "done"}]
    outcome, sink = play(OracleAgent(), request(ws, task_dir, reference={"solve": solve}))
    assert outcome == AgentOutcome("finished")
    assert [shape(e) for e in sink.events] == [
        ("agent_start", "oracle"),
        ("turn_start", 1),
        ("call", "call_1", "Write", {"file_path": str(ws / "app.py"), "content": "print(1)\n"}),
        ("result", "call_1", "ok"), ("turn_end", 1),
        ("turn_start", 2), ("call", "call_2", "Bash", {"command": "python3 app.py"}),
        ("result", "call_2", "ok"), ("turn_end", 2),
        ("turn_start", 3), ("message", "assistant", "done"), ("turn_end", 3),
        ("agent_end", "finished", "")]
    assert results(sink)[1].output == "1\n"


def test_oracle_writes_the_reference_then_runs_solve(ws, task_dir):
    outcome, sink = play(OracleAgent(), request(
        ws, task_dir, reference={"code": "print(2)\n", "solve": "python3 main.py"},
        criteria=[comparison("c0", "main.py")]))
    assert outcome.reason == "finished"
    assert [e.tool for e in sink.events if isinstance(e, T.ToolCall)] == ["Write", "Bash"]
    assert [e.turn for e in sink.events if isinstance(e, T.TurnStart)] == [1, 2]
    assert results(sink)[1].output == "2\n"


def test_oracle_solve_actions_are_checked(ws, task_dir):
    outcome, _ = play(OracleAgent(), request(ws, task_dir, reference={"solve": [{"bogus": 1}]}))
    assert outcome.reason == "error"
    assert "unknown reference.solve action 1 (keys: bogus)" in outcome.detail


@pytest.mark.parametrize("reference", [
    None, {"file": None, "code": None, "directory": None, "solve": None}])
def test_oracle_without_a_reference_is_an_error(ws, reference):
    outcome, sink = play(OracleAgent(), request(ws, reference=reference))
    assert outcome == AgentOutcome("error", "the task has no reference solution for the oracle")
    assert [shape(e) for e in sink.events] == [("agent_start", "oracle"),
                                                ("agent_end", "error", outcome.detail)]


@pytest.mark.parametrize("reference, detail", [
    ({"file": "missing.py"}, "cannot read reference.file"),
    ({"directory": "nowhere"}, "reference.directory nowhere is not a directory"),
])
def test_oracle_with_a_missing_reference_is_an_error(ws, task_dir, reference, detail):
    outcome, _ = play(OracleAgent(), request(ws, task_dir, reference=reference,
                                             criteria=[comparison("c0", "a.py")]))
    assert outcome.reason == "error" and detail in outcome.detail


def test_oracle_respects_max_turns(ws, task_dir):
    outcome, sink = play(OracleAgent(), request(
        ws, task_dir, limits={"max_turns": 1}, reference={"code": "x = 1\n", "solve": "true"},
        criteria=[comparison("c0", "a.py")]))
    assert outcome.reason == "max_turns"
    assert [e.tool for e in sink.events if isinstance(e, T.ToolCall)] == ["Write"]
