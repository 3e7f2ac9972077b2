"""Evidence texts of `ce explain` for what a criterion read outside files: a tool call
(which one, its turn and trace event), the calls a count left out for one reason only,
a command's output and the metrics of a `uipath eval`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ce_lang.api import Evaluator, ToolCallView, unwrap_shell
from ce_lang.api import ast as A

PATH_PARAMS = ("file_path", "path", "notebook_path", "skill", "pattern", "url")
NEAR_SHOWN = 3
CALLS_SHOWN = 5


def call_text(call: ToolCallView) -> str:
    """`call#1 Bash 'curl wttr.in/Oslo' (turn 3, event 10, error)`: its place among the
    tool calls (from 0), what it ran or names, its turn (from 1), its index in the trace
    (`ce trace dump`'s line, from 0) and how it ended."""
    if call.command:
        unwrapped = unwrap_shell(call.command)
        also = f" -> {unwrapped[:50]!r}" if unwrapped != call.command else ""
        what = f"{call.command[:50]!r}{also}"
    else:
        what = _call_params(call.params)
    turn = f"turn {call.turn}, " if call.turn > 0 else ""
    return f"call#{call.index} {call.tool} {what} ({turn}event {call.event_index}, " \
           f"{call.status})"


def _call_params(params: Any) -> str:
    """A call that is no shell command, by what names its target: `file_path=.../a.py`
    (its end: a sandbox's path starts with the same long scratch directory), else its
    parameters' first 50 characters, which for an Edit were `{'replace_all': False,
    'file_path': '/tmp/ce-run-1` and named no file."""
    if isinstance(params, dict):
        for key in PATH_PARAMS:
            value = params.get(key)
            if isinstance(value, str) and value:
                shown = value if len(value) <= 50 else "..." + value[-47:]
                return f"{key}={shown!r}"
    return repr(str(params)[:50])


def _conjuncts(node: A.Node, op: str = "and") -> list[A.Node]:
    if isinstance(node, A.Binary) and node.op == op:
        return _conjuncts(node.left, op) + _conjuncts(node.right, op)
    return [node]


def _searches(node: A.Node) -> bool:
    """The part tests what the call says (a regex over its command or parameters)."""
    if (isinstance(node, A.Method) and node.name == "matches") or \
            (isinstance(node, A.Call) and node.func in ("search", "try_search")):
        return True
    return any(_searches(child) for child in A.children(node))


def near_misses(node: A.Call, calls: list[ToolCallView], hits: list[int],
                env: dict[str, Any], host: Any, text: Callable[[A.Node], str]) -> str:
    """`; not counted: call#0 Bash 'curl ...' (turn 1, event 2, error): (not
    require_success or c.ok) is false`: the calls a count over the trace's tool calls
    left out for one part of its test only (the agent ran curl, and it failed), which
    `none of 3 calls match` left the reader to find. Only for a test that is an `and`
    of parts (or an `or` of such tests: skill_triggered's Skill call that named another
    skill), and a part other than its regex: every call a pattern does not match is no
    near miss. A part that cannot be evaluated on its own leaves its call out. An
    `exists` that found its call has none."""
    lam = node.args[1] if len(node.args) == 2 else None
    if not isinstance(lam, A.Lambda) or (node.func == "exists" and hits):
        return ""
    tests = [parts for parts in (_conjuncts(alt) for alt in _conjuncts(lam.body, "or"))
             if len(parts) >= 2]
    evaluator = Evaluator(host)
    counted = set(hits)
    near = []
    for call in calls:
        if call.index in counted:
            continue
        for parts in tests:
            try:
                failed = [part for part in parts
                          if evaluator.eval(part, {**env, lam.param: call}) is not True]
            except Exception:  # a part that needs an earlier one (`x != null and x.y`)
                continue
            if len(failed) == 1 and not _searches(failed[0]):
                near.append(f"{call_text(call)}: {text(failed[0])} is false")
                break
    if not near:
        return ""
    more = f" and {len(near) - NEAR_SHOWN} more" if len(near) > NEAR_SHOWN else ""
    return "; not counted: " + "; ".join(near[:NEAR_SHOWN]) + more


def counted_calls(calls: list[ToolCallView], budget: Any) -> str:
    """What a count of every tool call counted (commands_efficiency's `len(trace.
    tool_calls)`, shown `= 12` and nothing else): `12 tool calls against expected_commands
    5 (7 over): Bash 9, Read 3; call#0 Bash 'ls' (turn 1, event 2, ok); ... and 7 more`,
    the budget when the criterion has one."""
    n = len(calls)
    text = f"{n} tool call{'' if n == 1 else 's'}"
    if isinstance(budget, int) and not isinstance(budget, bool):
        text += f" against expected_commands {budget}" + (
            f" ({n - budget} over)" if n > budget else "")
    if not calls:
        return f"  [{text}]"
    tally: dict[str, int] = {}
    for call in calls:
        tally[call.tool] = tally.get(call.tool, 0) + 1
    tools = ", ".join(f"{tool} {k}" for tool, k in
                      sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))
    more = f" and {n - CALLS_SHOWN} more" if n > CALLS_SHOWN else ""
    return f"  [{text}: {tools}; " + "; ".join(call_text(c) for c in calls[:CALLS_SHOWN]) \
        + more + "]"


def output_gist(text: Any, limit: int = 80) -> str:
    """A command's output in one evidence line: its lines kept apart (`'Hello\\nextra'`,
    as `expected_stdout` compares them, not `'Hello extra'`), and when it is long, its
    start and its end: a traceback's or a test run's last line says why it failed, its
    first 60 characters (`Traceback (most recent call last): File "<string>"`) never."""
    lines = [" ".join(line.split()) for line in str(text or "").splitlines()]
    gist = "\n".join(line for line in lines if line)
    if len(gist) <= limit:
        return gist
    head = limit // 3
    return gist[:head] + " ... " + gist[-(limit - head):]


def metrics_evidence(entries: Any) -> str:
    """Each threshold of a `uipath eval` against the metric it read: `f1 0.5 < 0.75: no`,
    `precision not in the output: no`."""
    rec = next((e for e in entries if e.get("kind") == "metrics"), None)
    if rec is None:
        return ""
    parts = []
    for name, minimum in rec["thresholds"].items():
        got = rec["values"].get(name)
        if got is None:
            parts.append(f"{name} not in the output: no")
        else:
            parts.append(f"{name} {got:g} {'>=' if got >= minimum else '<'} {minimum:g}: "
                         f"{'yes' if got >= minimum else 'no'}")
    met = sum(part.endswith("yes") for part in parts)
    return f"  [{rec['command']}: {met}/{len(parts)} thresholds met: " + "; ".join(parts) + "]"
