"""Runtime benchmark: the trace format, the live monitor and post-hoc grading.

    .venv/bin/python bench/runtime.py [--events 1000000] [--trials 10000] [--repeat 3]
                                      [--seed 1130] [--profile] [--json] [--out DIR]

(a) trace: 1,000,000 realistic events (a Claude Code-like run: turns, assistant
    messages, tool calls with their results, usage; see `realistic_events`):
    encode (`encode_frame` + join) and the live writer (`TraceWriter.write`, one write(2)
    per event), then decode (`decode_frames` on the bytes, and `read_trace` from the
    file): events/s, bytes/event. The goal is >= 1M events/s decoding. Then what-ifs on the
    same bytes, to show where decode time goes: walking the frames without decoding,
    decoding pre-split bodies with one C-level `map`, `ToolCall.params` left undecoded
    (`msgspec.Raw`), and blocks of 4096 events as one msgpack array each (a trace
    compacted after the run), with and without undecoded params. With
    --profile, or whenever decode is below the goal, a cProfile of `decode_frames`.
(b) live monitor: a plan with 1, 4 or 16 armed criteria (command_executed,
    skill_triggered and `type: expr` ones that stay undecided, so every event evaluates
    all of them) fed a 10,000-event trace one event at a time: µs/event, and over the
    same events with nothing armed (the view alone) µs/event/criterion. Then 16 armed
    over 1k, 10k and 50k events (flat if each event costs O(1)), with µs/event of the
    first and last 10% of the events; and one armed criterion whose predicate reads the
    trace (not aggregated: the monitor re-scans the calls, cost grows with the trace).
(c) grading: 10,000 trials of one plan graded post-hoc (`Grader.grade`, as
    `ce_runtime.grade.grading.grade_files` does minus reading the trace file): trace criteria
    plus file_exists / file_contains on a small prepared workspace, a different trace per
    trial (20-120 events): trials/s, and the split between building the view and grading.
    Then a trial's criteria set-up (live monitor + grader): the first trial of a plan
    builds its program, later ones reuse it.

Every measurement runs in a FRESH subprocess (--repeat times, interleaved; the median
is reported, min alongside), with cached bytecode like bench/compile.py. The table goes
to stdout (stderr with --json) and the numbers to OUT/runtime.json (default
bench/.data/runtime.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import msgspec
from benchlib import git_rev

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
DEFAULT_DATA = os.path.join(HERE, ".data")
DECODE_GOAL = 1_000_000  # events/s

# ======================================================================================
# Realistic traces
# ======================================================================================

PROSE = ("the test fails because greet returns the name without a comma so I will fix the "
         "function and run pytest again to check that everything passes now; let me read "
         "the file first and look at how the module is imported by the tests")
WORDS = PROSE.split()
CODE = "\n".join(
    f"{i:>4}\t" + line for i, line in enumerate([
        "import os", "import sys", "from pathlib import Path", "",
        "def greet(name: str) -> str:", '    """Say hello."""', '    return f"Hello, {name}!"',
        "", "class Config:", "    def __init__(self, root: str):", "        self.root = root",
        "        self.items: dict[str, int] = {}", "", "    def load(self) -> None:",
        "        for p in Path(self.root).glob('*.toml'):", "            self.items[p.stem] = 1",
        "", "if __name__ == '__main__':", "    print(greet(sys.argv[1]))"] * 40, 1))
BASH = ["ls -la", "python -m pytest -q", "git status", "git diff --stat", "cat README.md",
        "grep -rn 'def ' src/", "pip install -e .", "bash -lc 'python --version'",
        "python app.py --name Ada", "npm test", "make lint", "find . -name '*.py'"]
TOOLS = ["Bash"] * 5 + ["Read"] * 4 + ["Edit"] * 2 + ["Write", "Grep", "Glob", "TodoWrite"]


def _text(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    out, size = [], 0
    while size < n:
        w = WORDS[rng.randrange(len(WORDS))]
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _code(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    start = rng.randrange(len(CODE) - n - 1)
    return CODE[start:start + n]


def _tool_call(rng: random.Random, t: float, cid: str):
    from ce_runtime.trace import events as T
    tool = TOOLS[rng.randrange(len(TOOLS))]
    path = f"src/module_{rng.randrange(40)}.py"
    if tool == "Bash":
        params = {"command": rng.choice(BASH), "description": _text(rng, 10, 40)}
        output = _code(rng, 0, 1500)
    elif tool == "Read":
        params = {"file_path": f"/workspace/{path}"}
        output = _code(rng, 200, 2500)
    elif tool == "Edit":
        params = {"file_path": f"/workspace/{path}", "old_string": _code(rng, 20, 200),
                  "new_string": _code(rng, 20, 250)}
        output = f"The file /workspace/{path} has been updated."
    elif tool == "Write":
        params = {"file_path": f"/workspace/{path}", "content": _code(rng, 100, 1500)}
        output = f"File created successfully at: /workspace/{path}"
    elif tool == "Grep":
        params = {"pattern": "def [a-z_]+", "path": "src", "output_mode": "content"}
        output = _code(rng, 50, 600)
    elif tool == "Glob":
        params = {"pattern": "**/*.py"}
        output = "\n".join(f"/workspace/src/module_{i}.py" for i in range(rng.randint(1, 12)))
    else:
        params = {"todos": [{"content": _text(rng, 10, 50), "status": "pending"}
                            for _ in range(rng.randint(1, 4))]}
        output = "Todos have been modified successfully."
    r = rng.random()
    status = "ok" if r < 0.9 else "error" if r < 0.98 else "denied"
    call = T.ToolCall(t, cid, tool, tool, params)
    result = T.ToolResult(t + 0.2, cid, status, output, rng.uniform(5, 3000))
    return call, result


def realistic_events(n: int, seed: int = 1130) -> list:
    """n events of a long agent run: per turn a start, an assistant message (sometimes
    two), 0-3 tool calls each with its result (a result may come after the next call),
    a usage record and an end; a run header first."""
    from ce_runtime.trace import events as T
    rng = random.Random(seed)
    events: list = [T.RunHeader(0.0, T.SCHEMA_VERSION, "bench/t/00", "bench", "h" * 16,
                                "claude-code", "claude-sonnet-4-5", 1.8e9),
                    T.AgentStart(0.0, "claude-code", "claude-sonnet-4-5")]
    t, turn, calls = 0.0, 0, 0
    while len(events) < n:
        turn += 1
        t += rng.uniform(0.5, 8.0)
        events.append(T.TurnStart(t, turn))
        events.append(T.Message(t, "assistant", _text(rng, 40, 600)))
        pending = []
        for _ in range(rng.choice((0, 1, 1, 1, 2, 2, 3))):
            call, result = _tool_call(rng, t, f"toolu_{calls:08d}")
            calls += 1
            events.append(call)
            if pending and rng.random() < 0.3:
                events.append(pending.pop())
            pending.append(result)
        events.extend(reversed(pending))
        if rng.random() < 0.1:
            events.append(T.Message(t, "user", _text(rng, 20, 200)))
        events.append(T.Usage(t, rng.randint(2000, 90000), rng.randint(20, 2000),
                              rng.randint(0, 80000), rng.randint(0, 4000),
                              rng.uniform(0.001, 0.05)))
        events.append(T.TurnEnd(t, turn))
    return events[:n]


def event_mix(events: list) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in events:
        name = type(e).__name__
        out[name] = out.get(name, 0) + 1
    return out


# ======================================================================================
# Measurements (each runs in a fresh child process)
# ======================================================================================

MEASURES: dict[str, Any] = {}


def measure(name: str):
    def register(fn):
        MEASURES[name] = fn
        return fn

    return register


def _rss_mib() -> float:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@measure("encode")
def _encode(a: dict[str, Any]) -> dict[str, Any]:
    """encode_frame + join over every event; writes the trace for the decode children."""
    from ce_runtime.trace import events as T
    events = realistic_events(a["events"], a["seed"])
    encode = T.encode_frame
    t0 = time.perf_counter()
    data = b"".join([encode(e) for e in events])
    seconds = time.perf_counter() - t0
    with open(a["trace"], "wb") as fh:
        fh.write(data)
    return {"seconds": seconds, "events": len(events), "bytes": len(data),
            "events_per_s": len(events) / seconds, "bytes_per_event": len(data) / len(events),
            "mix": event_mix(events)}


@measure("writer")
def _writer(a: dict[str, Any]) -> dict[str, Any]:
    """TraceWriter.write, as the runner appends live (unbuffered, one write per event)."""
    from ce_runtime.trace import events as T
    events = realistic_events(a["writer_events"], a["seed"])
    path = a["trace"] + ".writer"
    try:
        with T.TraceWriter(path) as w:
            write = w.write
            t0 = time.perf_counter()
            for e in events:
                write(e)
            seconds = time.perf_counter() - t0
    finally:
        os.unlink(path)
    return {"seconds": seconds, "events": len(events), "events_per_s": len(events) / seconds}


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


@measure("decode")
def _decode(a: dict[str, Any]) -> dict[str, Any]:
    from ce_runtime.trace import events as T
    data = _read_bytes(a["trace"])
    t0 = time.perf_counter()
    result = T.decode_frames(data)
    seconds = time.perf_counter() - t0
    assert not result.truncated and result.corrupt_at is None
    return {"seconds": seconds, "events": len(result.events),
            "events_per_s": len(result.events) / seconds, "mb_per_s": len(data) / seconds / 1e6}


@measure("read_trace")
def _read_trace(a: dict[str, Any]) -> dict[str, Any]:
    from ce_runtime.trace import events as T
    t0 = time.perf_counter()
    result = T.read_trace(a["trace"])
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "events": len(result.events),
            "events_per_s": len(result.events) / seconds}


def _split(data: bytes) -> tuple[list[int], list[int]]:
    from ce_runtime.trace import events as T
    unpack = T._LEN.unpack_from
    starts: list[int] = []
    ends: list[int] = []
    pos, end = 0, len(data)
    while pos < end:
        (n,) = unpack(data, pos)
        starts.append(pos + 4)
        pos += 4 + n
        ends.append(pos)
    return starts, ends


@measure("whatif_walk")
def _whatif_walk(a: dict[str, Any]) -> dict[str, Any]:
    """The frame loop of decode_frames with the decode call removed (slices kept)."""
    from ce_runtime.trace import events as T
    data = _read_bytes(a["trace"])
    unpack = T._LEN.unpack_from
    view = memoryview(data)
    t0 = time.perf_counter()
    pos, end, count = 0, len(data), 0
    while pos < end:
        (n,) = unpack(data, pos)
        view[pos + 4:pos + 4 + n]
        pos += 4 + n
        count += 1
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "events": count, "events_per_s": count / seconds}


@measure("whatif_map")
def _whatif_map(a: dict[str, Any]) -> dict[str, Any]:
    """msgspec alone: the bodies decoded by one C-level map (frames split beforehand)."""
    import gc

    from ce_runtime.trace import events as T
    data = _read_bytes(a["trace"])
    starts, ends = _split(data)
    view = memoryview(data)
    bodies = list(map(view.__getitem__, map(slice, starts, ends)))
    gc.disable()
    t0 = time.perf_counter()
    events = list(map(T._decoder.decode, bodies))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "events": len(events), "events_per_s": len(events) / seconds}


BLOCK = 4096  # events per block in the block-format what-ifs


def _lazy_union():
    """The Event union with ToolCall.params kept as msgspec.Raw (decoded on demand)."""
    from ce_runtime.trace import events as T
    class LazyToolCall(msgspec.Struct, tag="tool_call", array_like=True, gc=False,
                       omit_defaults=True):
        t: float
        call_id: str
        tool: str
        raw_tool: str
        params: msgspec.Raw = msgspec.Raw(b"\x80")

    return (T.RunHeader | T.AgentStart | T.TurnStart | T.TurnEnd | T.Message | LazyToolCall
            | T.ToolResult | T.Usage | T.Decision | T.AgentEnd | T.RunEnd)


def _blocks(a: dict[str, Any], lazy: bool) -> dict[str, Any]:
    """Blocks of BLOCK events, each one msgpack array (what a trace compacted after the run
    could store: one frame per block), one decode call per block."""
    import gc

    from ce_runtime.trace import events as T
    data = _read_bytes(a["trace"])
    starts, ends = _split(data)
    view = memoryview(data)
    blocks = []
    for i in range(0, len(starts), BLOCK):
        s, e = starts[i:i + BLOCK], ends[i:i + BLOCK]
        blocks.append(b"\xdd" + len(s).to_bytes(4, "big")
                      + b"".join(map(view.__getitem__, map(slice, s, e))))
    del view, data
    decode = msgspec.msgpack.Decoder(list[_lazy_union() if lazy else T.Event]).decode
    gc.disable()
    t0 = time.perf_counter()
    events: list = []
    extend = events.extend
    for block in blocks:
        extend(decode(block))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "events": len(events), "events_per_s": len(events) / seconds}


@measure("whatif_blocks")
def _whatif_blocks(a: dict[str, Any]) -> dict[str, Any]:
    return _blocks(a, lazy=False)


@measure("whatif_blocks_raw")
def _whatif_blocks_raw(a: dict[str, Any]) -> dict[str, Any]:
    return _blocks(a, lazy=True)


@measure("whatif_raw_params")
def _whatif_raw_params(a: dict[str, Any]) -> dict[str, Any]:
    """decode_frames' loop with ToolCall.params kept as msgspec.Raw: same bytes, a decoder
    for a variant union."""
    import gc

    from ce_runtime.trace import events as T
    decode = msgspec.msgpack.Decoder(_lazy_union()).decode
    data = _read_bytes(a["trace"])
    unpack = T._LEN.unpack_from
    view = memoryview(data)
    gc.disable()
    t0 = time.perf_counter()
    events = []
    append = events.append
    pos, end = 0, len(data)
    while pos < end:
        (n,) = unpack(data, pos)
        append(decode(view[pos + 4:pos + 4 + n]))
        pos += 4 + n
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "events": len(events), "events_per_s": len(events) / seconds}


@measure("decode_by_type")
def _decode_by_type(a: dict[str, Any]) -> dict[str, Any]:
    """µs per decode of each event type (bodies pre-split, one map per type)."""
    import gc

    from ce_runtime.trace import events as T
    data = _read_bytes(a["trace"])
    starts, ends = _split(data)
    view = memoryview(data)
    bodies = list(map(view.__getitem__, map(slice, starts, ends)))
    events = list(map(T._decoder.decode, bodies))
    by_type: dict[str, list] = {}
    for e, b in zip(events, bodies, strict=True):
        by_type.setdefault(type(e).__name__, []).append(b)
    del events
    gc.disable()
    out = {}
    for name, bs in by_type.items():
        t0 = time.perf_counter()
        decoded = list(map(T._decoder.decode, bs))
        seconds = time.perf_counter() - t0
        out[name] = {"count": len(bs), "us": seconds / len(bs) * 1e6,
                     "bytes": sum(map(len, bs)) / len(bs), "share": seconds}
        del decoded
    total = sum(v["share"] for v in out.values())
    for v in out.values():
        v["share"] = v["share"] / total
    return {"seconds": total, "types": out}


@measure("decode_profile")
def _decode_profile(a: dict[str, Any]) -> dict[str, Any]:
    import cProfile
    import pstats

    from ce_runtime.trace import events as T
    data = _read_bytes(a["trace"])
    prof = cProfile.Profile()
    prof.enable()
    T.decode_frames(data)
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = fn if file == "~" else f"{os.path.relpath(file, ROOT)}:{line}({fn})"
        rows.append({"function": where, "ncalls": nc, "tottime": tt, "cumtime": ct})
    rows.sort(key=lambda r: -r["tottime"])
    return {"seconds": sum(r["tottime"] for r in rows), "rows": rows[:8]}


# -- (b) the live monitor --------------------------------------------------------------------
# Armed criteria that stay undecided over `realistic_events` (nothing matches), so every
# event evaluates every one of them; in the order the 1/4/16 configurations take them.
ARMED = [
    ("command_executed", {"tool_name": "Bash", "command_pattern": "terraform apply",
                          "min_count": 1}, "pass"),
    ("expr", {"expr": 'count(trace.tool_calls, c -> c.tool == "Bash" and '
                      'c.matches(re"kubectl delete")) >= 2'}, "pass"),
    ("skill_triggered", {"skill_name": "pdf-forms", "expected_skill": "pdf-forms"}, "pass"),
    ("expr", {"expr": 'all(trace.tool_calls, c -> not c.matches(re"rm -rf /"))'}, "fail"),
    ("command_executed", {"command_pattern": "git push --force", "min_count": 0,
                          "max_count": 0}, "fail"),
    ("expr", {"expr": 'min(1.0, float(count(trace.tool_calls, c -> c.ok and '
                      'c.mentions("deploy.yaml"))) / 3)', "kind": "continuous",
              "pass_threshold": 1.0}, "pass"),
    ("command_executed", {"tool_name": "Bash", "command_pattern": "docker (build|run)",
                          "min_count": 2, "require_success": True}, "pass"),
    ("expr", {"expr": 'count(trace.tool_calls, c -> c.tool == "Write" and '
                      'c.mentions(".github/workflows/")) <= 2'}, "fail"),
    ("skill_triggered", {"skill_name": "uipath-agents", "expected_skill": "uipath-agents"},
     "decided"),
    ("expr", {"expr": 'exists(trace.tool_calls, c -> c.tool == "WebFetch") or '
                      'exists(trace.tool_calls, c -> c.mentions("secrets.env"))'}, "pass"),
    ("command_executed", {"tool_name": "Read", "command_pattern": "/etc/shadow",
                          "min_count": 0, "max_count": 0}, "fail"),
    ("expr", {"expr": 'count(trace.tool_calls, c -> c.matches(re"curl [^ ]+ [|] *sh")) == 0'},
     "fail"),
    ("command_executed", {"command_pattern": "cargo build", "exclude_pattern": "--release",
                          "min_count": 1}, "pass"),
    ("expr", {"expr": 'exists(trace.tool_calls, c -> c.tool == "Skill" and '
                      'c.param("skill") == "deploy")'}, "decided"),
    ("skill_triggered", {"skill_name": "date-teller", "expected_skill": ""}, "fail"),
    ("expr", {"expr": 'count(trace.tool_calls, c -> c.tool == "Edit" and '
                      'c.mentions("migrations/")) >= 1 and '
                      'count(trace.tool_calls, c -> c.matches(re"alembic upgrade")) >= 1'},
     "pass"),
]
# A predicate that reads the trace (here `trace.turns`): not a function of its call, so
# the monitor cannot keep it as a per-call aggregate and re-evaluates every call.
NOT_AGGREGATED = ("expr", {"expr": 'count(trace.tool_calls, c -> trace.turns >= 0 and '
                                   'c.matches(re"terraform destroy")) >= 1'}, "pass")


def _task_yaml(criteria: list[tuple[str, dict[str, Any], str | None]], stop_early: bool,
               extra: str = "") -> str:
    lines = ["task_id: bench", "description: runtime benchmark", "initial_prompt: go",
             "agent: {type: claude-code}", f"run_limits: {{stop_early: {str(stop_early).lower()}}}",
             extra, "success_criteria:"]
    for ctype, fields, arm in criteria:
        entry = {"type": ctype, "description": ctype, **fields}
        if arm is not None:
            entry["stop_when"] = arm
        for i, (k, v) in enumerate(entry.items()):
            lines.append(f"  {'- ' if i == 0 else '  '}{k}: {json.dumps(v)}")
    return "\n".join(line for line in lines if line) + "\n"


def _compile(text: str, directory: str):
    from ce_lang.compiler import compile_paths

    path = os.path.join(directory, "task.yaml")
    with open(path, "w") as fh:
        fh.write(text)
    result = compile_paths([path])
    errors = [d for d in result.diagnostics if d.severity == "error"]
    if errors:
        raise SystemExit("benchmark task does not compile:\n" + "\n".join(
            f"{d.code} {d.message}" for d in errors) + "\n" + text)
    return result.trials[0].plan


@measure("monitor")
def _monitor(a: dict[str, Any]) -> dict[str, Any]:
    import gc

    from ce_lang.lang.program import program_for
    from ce_runtime.grade.monitor import LiveMonitor

    armed = a["armed"]
    if a.get("not_aggregated"):
        criteria = [NOT_AGGREGATED]
    else:
        criteria = [(t, f, arm) for t, f, arm in ARMED[:max(armed, 1)]]
    with tempfile.TemporaryDirectory() as tmp:
        plan = _compile(_task_yaml(criteria, stop_early=armed > 0), tmp)
    assert len(plan.early_stop.armed) == armed, plan.early_stop
    monitor = LiveMonitor(plan, program_for(plan))  # as `ce run`: the plan's program
    events = realistic_events(a["n"], a["seed"])
    on_event = monitor.on_event
    marks = [len(events) * i // 10 for i in range(11)]
    laps = []
    gc.collect()
    t0 = time.perf_counter()
    for i in range(10):
        t = time.perf_counter()
        for e in events[marks[i]:marks[i + 1]]:
            on_event(e)
        laps.append((time.perf_counter() - t) / (marks[i + 1] - marks[i]) * 1e6)
    seconds = time.perf_counter() - t0
    if monitor.decisions:
        raise SystemExit(f"benchmark criteria decided: {monitor.decisions}")
    calls = len(monitor.builder.view.tool_calls)
    return {"seconds": seconds, "events": len(events), "tool_calls": calls,
            "us_per_event": seconds / len(events) * 1e6, "laps_us": laps,
            "aggregates": sum(len(x.aggregates) for x in monitor.armed)}


# -- (c) grading -------------------------------------------------------------------------------
GRADE_CRITERIA = [
    ("command_executed", {"tool_name": "Bash", "command_pattern": "pytest", "min_count": 1}),
    ("command_executed", {"command_pattern": "rm -rf", "min_count": 0, "max_count": 0}),
    ("skill_triggered", {"skill_name": "date-teller", "expected_skill": ""}),
    ("expr", {"expr": 'count(trace.tool_calls, c -> c.tool == "Read") >= 1 and '
                      'count(trace.tool_calls, c -> c.status == "denied") <= 1'}),
    ("expr", {"expr": 'min(1.0, float(count(trace.tool_calls, c -> c.ok)) / 10)',
              "kind": "continuous", "pass_threshold": 0.5}),
    ("file_exists", {"path": "app.py"}),
    ("file_contains", {"path": "app.py", "includes": ["def greet", "Hello, "]}),
]
WORKSPACE = {
    "app.py": 'def greet(name):\n    return f"Hello, {name}!"\n\n\nprint(greet("Ada"))\n',
    "test_app.py": "from app import greet\n\n\ndef test_greet():\n"
                   '    assert greet("Ada") == "Hello, Ada!"\n',
    "README.md": "# app\n\nSays hello.\n",
}


@measure("grade")
def _grade(a: dict[str, Any]) -> dict[str, Any]:
    import gc

    from ce_runtime.grade.grading import host_for
    from ce_runtime.grade.interpreter import Grader
    from ce_runtime.trace.view import build_view

    trials = a["trials"]
    with tempfile.TemporaryDirectory() as tmp:
        task_dir = os.path.join(tmp, "task")
        workspace = os.path.join(tmp, "workspace")
        os.makedirs(task_dir)
        os.makedirs(workspace)
        for name, text in WORKSPACE.items():
            with open(os.path.join(workspace, name), "w") as fh:
                fh.write(text)
        plan = _compile(_task_yaml([(t, f, None) for t, f in GRADE_CRITERIA], False), task_dir)
        rng = random.Random(a["seed"])
        traces = [realistic_events(rng.randint(20, 120), seed=i) for i in range(trials)]
        n_events = sum(map(len, traces))
        grader = Grader(plan)  # the plan's program, as `ce run`
        gc.collect()
        view_s = grade_s = 0.0
        passed = 0
        t0 = time.perf_counter()
        for events in traces:
            t = time.perf_counter()
            view = build_view(events)
            t2 = time.perf_counter()
            result = grader.grade(host_for(plan, workspace, task_dir, view))
            view_s += t2 - t
            grade_s += time.perf_counter() - t2
            passed += result.success
        seconds = time.perf_counter() - t0
        errors = [r.error for r in result.criteria if r.error]
        if errors:
            raise SystemExit(f"grading errors: {errors}")
    return {"seconds": seconds, "trials": trials, "events": n_events,
            "criteria": len(plan.criteria), "trials_per_s": trials / seconds,
            "ms_per_trial": seconds / trials * 1000, "view_seconds": view_s,
            "grade_seconds": grade_s, "passed": passed}


@measure("setup")
def _setup(a: dict[str, Any]) -> dict[str, Any]:
    """A trial's criteria set-up (live monitor + grader) for a plan of 16 armed and 7
    graded criteria: the first trial of the plan in a process builds its program (check,
    analyze, link); later trials find it in the per-process cache."""
    from ce_lang.lang.program import clear_programs, program_for
    from ce_runtime.grade.interpreter import Grader
    from ce_runtime.grade.monitor import LiveMonitor

    criteria = [(t, f, arm) for t, f, arm in ARMED[:16]] + \
        [(t, f, None) for t, f in GRADE_CRITERIA]
    with tempfile.TemporaryDirectory() as tmp:
        plan = _compile(_task_yaml(criteria, stop_early=True), tmp)

    def trial() -> None:
        program = program_for(plan)
        LiveMonitor(plan, program)
        Grader(plan, program=program)

    trial()  # warm: the stdlib registry, imports
    n = a["n"]
    t0 = time.perf_counter()
    for _ in range(n):
        clear_programs()
        trial()
    first = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    for _ in range(n):
        trial()
    later = (time.perf_counter() - t0) / n
    return {"seconds": first + later, "criteria": len(plan.criteria),
            "armed": len(plan.early_stop.armed), "first_ms": first * 1000,
            "later_ms": later * 1000}


# ======================================================================================
# Parent: runs, aggregation, table
# ======================================================================================

def bench_env(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(data_dir, "pycache")
    return env


def run_child(name: str, args: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--_measure", name,
           "--_args", json.dumps(args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        sys.exit(f"measurement {name} {args} failed (exit {proc.returncode}):\n"
                 f"{proc.stderr.strip()[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(runs: list[dict[str, Any]], key: str = "seconds") -> dict[str, Any]:
    """The median run (by `key`), with the min and every run's value alongside."""
    ordered = sorted(runs, key=lambda r: r[key])
    best = dict(ordered[len(ordered) // 2])
    best["min_" + key] = ordered[0][key]
    best["runs"] = [r[key] for r in runs]
    best["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    if "laps_us" in best:  # per tenth of the trace: the fastest run's (noise only adds)
        best["laps_min_us"] = [min(lap) for lap in zip(*(r["laps_us"] for r in runs),
                                                            strict=True)]
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000, help="trace events for (a)")
    ap.add_argument("--writer-events", type=int, default=200_000,
                    help="events appended by TraceWriter in (a)")
    ap.add_argument("--trials", type=int, default=10_000, help="trials graded in (c)")
    ap.add_argument("--repeat", type=int, default=3, help="fresh runs of each measurement")
    ap.add_argument("--seed", type=int, default=1130)
    ap.add_argument("--profile", action="store_true", help="profile decode_frames")
    ap.add_argument("--json", action="store_true", help="JSON to stdout, table to stderr")
    ap.add_argument("--out", help="write OUT/runtime.json (default bench/.data)")
    ap.add_argument("--_measure", help=argparse.SUPPRESS)
    ap.add_argument("--_args", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args._measure:
        out = MEASURES[args._measure](json.loads(args._args))
        out["peak_rss_mib"] = _rss_mib()
        print(json.dumps(out))
        return

    data_dir = os.path.abspath(args.out) if args.out else DEFAULT_DATA
    os.makedirs(data_dir, exist_ok=True)
    env = bench_env(data_dir)
    log = sys.stderr
    rev_start = git_rev()
    tmp = tempfile.mkdtemp(prefix="ce-bench-runtime-")
    base = {"seed": args.seed, "trace": os.path.join(tmp, "trace.bin"),
            "events": args.events, "writer_events": args.writer_events}
    rep = args.repeat
    results: dict[str, Any] = {}
    try:
        run_child("monitor", {"armed": 1, "n": 100, "seed": 1}, env)  # warm .pyc files
        print(f"(a) trace: {args.events:,} events, {rep} fresh run(s) per measurement ...",
              file=log)
        runs: dict[str, list] = {k: [] for k in ("encode", "writer", "decode", "read_trace")}
        for _ in range(rep):
            for name in runs:  # encode first: it writes the trace the others read
                runs[name].append(run_child(name, base, env))
        trace = {name: summarize(r) for name, r in runs.items()}
        whatifs = {}
        for name in ("whatif_walk", "whatif_map", "whatif_raw_params", "whatif_blocks",
                     "whatif_blocks_raw"):
            whatifs[name] = summarize([run_child(name, base, env) for _ in range(rep)])
        trace["whatif"] = whatifs
        trace["by_type"] = run_child("decode_by_type", base, env)["types"]
        if args.profile or trace["decode"]["events_per_s"] < DECODE_GOAL:
            print("    decode below the goal (or --profile): profiling decode_frames ...",
                  file=log)
            trace["profile"] = run_child("decode_profile", base, env)
        results["trace"] = trace

        print(f"(b) live monitor, {rep} fresh run(s) per configuration ...", file=log)
        configs = [(k, 10_000) for k in (0, 1, 4, 16)] + [(16, 1_000), (16, 50_000)]
        mruns: dict[str, list] = {f"{k}@{n}": [] for k, n in configs}
        nag = {f"na@{n}": [] for n in (1_000, 2_000)}
        for _ in range(rep):
            for k, n in configs:
                mruns[f"{k}@{n}"].append(run_child("monitor", {"armed": k, "n": n,
                                                                "seed": args.seed}, env))
            for n in (1_000, 2_000):
                nag[f"na@{n}"].append(run_child("monitor", {"armed": 1, "n": n,
                                                             "seed": args.seed,
                                                             "not_aggregated": True}, env))
        results["monitor"] = {key: summarize(r) for key, r in {**mruns, **nag}.items()}

        print(f"(c) grading {args.trials:,} trials, {rep} fresh run(s) ...", file=log)
        results["grade"] = summarize([run_child("grade", {"trials": args.trials,
                                                          "seed": args.seed}, env)
                                      for _ in range(rep)])
        results["setup"] = summarize([run_child("setup", {"n": 20}, env) for _ in range(rep)])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rev_end = git_rev()
    report = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "seed": args.seed,
                       "repeat": rep, "python": platform.python_version(),
                       "platform": platform.platform(terse=True), "cpus": os.cpu_count(),
                       "git": rev_start, "git_end": rev_end,
                       "msgspec": _msgspec_version()},
              **results}
    path = os.path.join(data_dir, "runtime.json")
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1)
    table = render(report)
    if args.json:
        print(table, file=sys.stderr)
        print(json.dumps(report, indent=1))
    else:
        print(table)
        print(f"\nwritten {os.path.relpath(path, ROOT)}")


def _msgspec_version() -> str:
    return msgspec.__version__


def render(r: dict[str, Any]) -> str:
    m, tr, mon, g = r["meta"], r["trace"], r["monitor"], r["grade"]
    out = []
    if m["git"] != m["git_end"]:
        out.append(f"WARNING: the sources changed during the run ({m['git']} -> "
                   f"{m['git_end']}): measurements may mix revisions\n")
    out.append(f"ce runtime benchmark, {m['date']}, {m['cpus']} CPUs, Python {m['python']}, "
               f"msgspec {m['msgspec']}, git {m['git']}; median of {m['repeat']} fresh "
               "process(es), fastest in brackets")
    enc = tr["encode"]
    mix = ", ".join(f"{k} {v / enc['events']:.0%}" for k, v in
                    sorted(enc["mix"].items(), key=lambda kv: -kv[1]))
    out += ["", f"(a) trace: {enc['events']:,} events, {enc['bytes'] / 1e6:.0f} MB, "
                f"{enc['bytes_per_event']:.0f} bytes/event",
            f"    mix: {mix}",
            f"    {'measurement':<52}{'events/s':>10}{'(best)':>9}{'ns/event':>10}"]

    def row(label: str, x: dict[str, Any], note: str = "") -> None:
        rate = x["events"] / x["seconds"]
        out.append(f"    {label:<52}{rate / 1e6:>9.2f}M{x['events'] / x['min_seconds'] / 1e6:>8.2f}M"
                   f"{1e9 / rate:>10.0f}  {note}".rstrip())

    row("encode: encode_frame + join", enc)
    row(f"write: TraceWriter.write ({tr['writer']['events']:,} events)", tr["writer"],
        "one write(2) per event")
    dec = tr["decode"]
    goal = "meets" if dec["events_per_s"] >= DECODE_GOAL else "BELOW"
    row("decode: decode_frames(bytes)", dec, f"{goal} the 1M/s goal (median); "
        f"{dec['mb_per_s']:.0f} MB/s; peak RSS {dec['peak_rss_mib']:.0f} MiB")
    row("decode: read_trace(path) (file read included)", tr["read_trace"])
    out.append("    what-ifs on the same bytes (where decode time goes):")
    w = tr["whatif"]
    row("  frame loop only, no msgspec decode", w["whatif_walk"])
    row("  msgspec only: pre-split bodies, list(map(decode))", w["whatif_map"])
    row("  decode_frames loop, ToolCall.params as msgspec.Raw", w["whatif_raw_params"])
    row(f"  blocks of {BLOCK} events, one decode per block", w["whatif_blocks"])
    row(f"  blocks of {BLOCK} events, ToolCall.params as Raw", w["whatif_blocks_raw"])
    out.append("    decode by event type (msgspec only, µs per event, mean size, share of "
               "the decode time):")
    types = [f"{k} {v['us']:.2f} µs {v['bytes']:.0f} B {v['share']:.0%}"
             for k, v in sorted(tr["by_type"].items(), key=lambda kv: -kv[1]["share"])
             if v["count"] > 1]
    for i in range(0, len(types), 3):
        out.append("      " + "; ".join(types[i:i + 3]))
    if "profile" in tr:
        out.append("    cProfile of decode_frames (tottime; the profiler adds per-call cost):")
        for p in tr["profile"]["rows"][:5]:
            out.append(f"      {p['ncalls']:>9} calls {p['tottime']:>8.3f} s  {p['function']}")

    base = mon["0@10000"]["us_per_event"]
    out += ["", "(b) live monitor: LiveMonitor.on_event, realistic trace, armed criteria "
                "kept undecided",
            "    (first/last 10%: µs/event over the first and the last tenth of the events, "
            "fastest run)",
            f"    {'configuration':<44}{'µs/event':>10}{'(min)':>8}{'µs/ev/crit':>12}"
            f"{'first 10%':>11}{'last 10%':>10}"]
    for key, label in [("0@10000", "nothing armed (the view alone), 10k events"),
                       ("1@10000", "1 armed, 10k events"), ("4@10000", "4 armed, 10k events"),
                       ("16@10000", "16 armed, 10k events"), ("16@1000", "16 armed, 1k events"),
                       ("16@50000", "16 armed, 50k events"),
                       ("na@1000", "1 armed, predicate reads the trace, 1k events"),
                       ("na@2000", "1 armed, predicate reads the trace, 2k events")]:
        x = mon[key]
        k = 0 if key.startswith("0@") else 1 if key.startswith("na") else int(key.split("@")[0])
        per = f"{(x['us_per_event'] - base) / k:>12.2f}" if k else f"{'':>12}"
        out.append(f"    {label:<44}{x['us_per_event']:>10.2f}"
                   f"{x['min_seconds'] / x['events'] * 1e6:>8.2f}{per}"
                   f"{x['laps_min_us'][0]:>11.2f}{x['laps_min_us'][-1]:>10.2f}")
    out.append(f"    ({mon['16@10000']['aggregates']} incremental aggregates for 16 armed; "
               f"{mon['16@10000']['tool_calls']:,} tool calls in 10k events)")

    out += ["", f"(c) grading: {g['trials']:,} trials x {g['criteria']} criteria "
                f"({g['events']:,} events, 20-120 per trace), Grader.grade post-hoc",
            f"    {g['trials_per_s']:,.0f} trials/s (median; {g['trials'] / g['min_seconds']:,.0f}"
            f" best), {g['ms_per_trial']:.3f} ms/trial: view {g['view_seconds']:.2f} s, "
            f"grade {g['grade_seconds']:.2f} s; {g['passed']:,} trials passed; peak RSS "
            f"{g['peak_rss_mib']:.0f} MiB"]
    su = r.get("setup")
    if su is not None:
        out += [f"    per-trial set-up (monitor + grader), {su['criteria']} criteria, "
                f"{su['armed']} armed: first trial of the plan {su['first_ms']:.1f} ms (builds "
                f"the program), later trials {su['later_ms']:.2f} ms (cached)"]
    return "\n".join(out)


if __name__ == "__main__":
    main()
