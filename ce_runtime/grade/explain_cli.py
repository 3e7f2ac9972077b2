"""Evidence texts of `ce explain` for recorded CLI invocations (`read_cli_log`, the
cli_called criterion): which calls a filter over them kept, and for the calls a
`cli_match` did not count, what in their arguments differs from the pattern: the verb,
the arguments after it, a flag's value.

`mismatches` says why `argv_match.argv_matches` is false, with the matcher's own parse
(`argv_match.parse`, `flag_matches`): the explanation cannot drift from the grading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ce_lang.api import Evaluator, argv_match
from ce_lang.api import ast as A
from ce_runtime.grade.interpreter import cli_call_text, regex_text

NEAR_SHOWN = 3
CALLS_SHOWN = 5
CLI_MATCH_ARGS = ("verb", "verb_any_of", "positional", "flags", "value_flags",
                  "ignore_flags")


SLACK = 0.01  # seconds: a recorded call's time is rounded to ms, the trace's clocks differ
ROUNDING = 0.001  # what the rounding alone explains: it picks among calls within SLACK


def said(call: dict[str, Any], host: Any) -> str:
    """A recorded call as `cli_call_text` says it, and the agent's tool call that ran it
    when the trace tells (its time within one call's start and result): `uip ixp fields
    delete p1` (line 3, exit 1; by call#0 Bash, turn 1, event 3)`; a call in a pipeline
    or in `sh -c '...'` is recorded as any other, and this says which command it was."""
    text = cli_call_text(call)
    ts = call.get("ts")
    trace = getattr(host, "trace", None)
    if not isinstance(ts, int | float) or trace is None or not text.endswith(")"):
        return text
    ran = [c for c in trace.tool_calls if c.started_at is not None and c.ended_at is not None
           and c.started_at - SLACK <= ts <= c.ended_at + SLACK]
    if len(ran) > 1:  # back-to-back calls (a script's steps): the one that holds ts
        ran = [c for c in ran if c.started_at - ROUNDING <= ts <= c.ended_at + ROUNDING] \
            or ran
    if not ran:
        return text
    if len(ran) > 1:  # calls that ran at once: any of them
        return text[:-1] + "; by one of " + ", ".join(f"call#{c.index}" for c in ran) + ")"
    c = ran[0]
    turn = f"turn {c.turn}, " if c.turn > 0 else ""
    return text[:-1] + f"; by call#{c.index} {c.tool}, {turn}event {c.event_index})"


def is_cli_calls(items: Any) -> bool:
    """A list of recorded invocations (`read_cli_log(...).calls`, or a filter of it)."""
    return isinstance(items, list) and bool(items) and all(
        isinstance(x, dict) and isinstance(x.get("argv"), list) for x in items)


def _flag(name: str) -> str:
    return ("--" if len(name) > 1 else "-") + name


def _show(values: list[str]) -> str:
    return ", ".join(repr(v) for v in values)


def pattern_text(spec: dict[str, Any]) -> str:
    """A match spec as the task wrote it: `verb 'ixp fields delete', positional
    ['proj-1'], --model equals 'gemini'`."""
    parts = []
    verbs = [" ".join(v) for v in spec["verbs"]]
    if verbs:
        parts.append("verb " + " or ".join(repr(v) for v in verbs))
    if spec["positional"] is not None:
        parts.append(f"positional {spec['positional']!r}")
    for name, pred in (spec["flags"] or {}).items():
        parts.append(_flag(name) + _aliases(pred) + " " + _predicate_text(pred))
    return ", ".join(parts) or "any call"


def _aliases(pred: dict[str, Any]) -> str:
    return "".join(f" (or {_flag(a)})" for a in pred["aliases"])


def _predicate_text(pred: dict[str, Any]) -> str:
    if pred["absent"]:
        return "absent"
    if pred["present"]:
        return "present"
    if pred["equals"] is not None:
        return f"equals {pred['equals']!r}"
    if pred["contains"] is not None:
        return f"contains {pred['contains']!r}"
    if pred["any_of"] is not None:
        return f"any of {pred['any_of']!r}"
    if pred["matches_regex"] is not None:
        return f"matches {regex_text(pred['matches_regex'])}"
    return "?"


def mismatches(spec: dict[str, Any], argv: list[str]) -> list[str]:
    """Why `argv` does not satisfy `spec` (empty: it does), each facet that fails:
    `its verb is 'ixp fields', not 'ixp dummy3'`, `--model is 'flash', not equals 'pro'`.
    A call whose verb differs is not held against the positional arguments after it."""
    positional, flags = argv_match.parse(spec, argv)
    why = []
    offset: int | None = 0
    if spec["verbs"]:
        hit = next((v for v in spec["verbs"] if positional[:len(v)] == list(v)), None)
        if hit is None:
            width = max(len(v) for v in spec["verbs"])
            called = " ".join(positional[:width])
            wanted = " or ".join(repr(" ".join(v)) for v in spec["verbs"])
            why.append(f"its verb is {called!r}, not {wanted}" if called
                       else f"it has no verb ({wanted} expected)")
            offset = None
        else:
            offset = len(hit)
    expected = spec["positional"]
    if offset is not None and expected is not None:
        got = positional[offset:offset + len(expected)]
        if got != list(expected):
            why.append(f"its arguments after the verb are {got!r}, not {list(expected)!r}")
    ignored = set(spec["ignore_flags"])
    for name, pred in (spec["flags"] or {}).items():
        names = (name, *pred["aliases"])
        values = [v for n in names for v in flags.get(n, [])]
        if argv_match.flag_matches(pred, values or None):
            continue
        flag = _flag(name) + _aliases(pred)
        if not pred["absent"] and any(n in ignored for n in names):
            why.append(f"{flag} is in ignore_flags: dropped before matching, never seen")
        elif pred["absent"]:
            why.append(f"{flag} was passed ({_show(values)}), and must be absent"
                       if any(values) else f"{flag} was passed, and must be absent")
        elif not values:
            why.append(f"{flag} was not passed ({_predicate_text(pred)} expected)"
                       if not pred["present"] else f"{flag} was not passed")
        else:
            why.append(f"{flag} is {_show(values)}, {_differs(pred)}")
    return why


def _differs(pred: dict[str, Any]) -> str:
    """How a passed flag's value fails its value predicate."""
    if pred["equals"] is not None:
        return f"not {pred['equals']!r}"
    if pred["contains"] is not None:
        return f"which does not contain {pred['contains']!r}"
    if pred["any_of"] is not None:
        return f"not any of {pred['any_of']!r}"
    return f"which {regex_text(str(pred['matches_regex']))} does not match"


def _verb_of(spec: dict[str, Any], argv: list[str]) -> str:
    """The first non-flag arguments of `argv`, as many as the pattern's verb has."""
    positional, _ = argv_match.parse(spec, argv)
    return " ".join(positional[:max(len(v) for v in spec["verbs"])])


def _cli_match(lam: A.Lambda) -> A.Call | None:
    """The `cli_match(...)` call in a filter's test (cli_called: `c -> cli_match(...)`)."""
    todo: list[A.Node] = [lam.body]
    while todo:
        node = todo.pop()
        if isinstance(node, A.Call) and node.func == "cli_match" and len(node.args) == 7:
            return node
        todo.extend(A.children(node))
    return None


def _spec(call: A.Call, lam: A.Lambda, item: dict[str, Any], env: dict[str, Any],
          host: Any) -> dict[str, Any] | None:
    """The match spec `call` (a cli_match) builds, evaluated as the grading did."""
    evaluator = Evaluator(host)
    try:
        args = [evaluator.eval(a, {**env, lam.param: item}) for a in call.args[1:]]
        return argv_match.match_spec(*args)
    except Exception:  # the criterion's own error says why
        return None


def cli_calls_evidence(node: A.Call, items: list[dict[str, Any]], hits: list[int],
                       result: Any, params: dict[str, Any], host: Any,
                       text: Callable[[A.Node], str], name: str | None) -> str:
    """What a filter or count over recorded calls kept, named by the `let` it is
    (`name`), in a criterion that did not pass (`result`) with how far its count is from
    min_count / max_count (`params`): ` (min_count 5: 1 too few)`. A `cli_match` test:
    `matched: 1 of 4 calls match verb 'ixp fields list', --folder equals 'Finance':
    `uip ...` (line 2, exit 0)`, and when too few matched `; not counted: `uip ...` (line
    1, exit 0): --model is 'flash', not 'pro'` for the calls that differ the least, or
    the verbs called when none has the pattern's. Another test (the tool, a rule fault):
    how many calls pass it, with the values of the parameters it reads, and the calls
    that do (the first 5)."""
    env = result.env
    least, most = params.get("min_count", 1), params.get("max_count")
    near = not result.passed and isinstance(least, int) and len(hits) < least
    many = not result.passed and isinstance(most, int) and len(hits) > most
    # (`none of 4 calls match` says itself that a min_count 1 is not met)
    bounds = f" (min_count {least}: {least - len(hits)} too few)" \
        if near and (least > 1 or hits) else \
        f" (max_count {most}: {len(hits) - most} too many)" if many else ""
    lam = node.args[1] if len(node.args) == 2 and isinstance(node.args[1], A.Lambda) \
        else None
    if lam is None:
        return ""
    label = f"{name}: " if name else ""
    total = len(items)
    kept = [items[i] for i in hits]
    shown = "; ".join(said(c, host) for c in kept[:CALLS_SHOWN]) + (
        f" and {len(kept) - CALLS_SHOWN} more" if len(kept) > CALLS_SHOWN else "")
    match = _cli_match(lam)
    spec = _spec(match, lam, items[0], env, host) if match is not None else None
    if spec is None:
        test = text(lam.body) + _where(lam, env)
        how = _how_many(len(kept), total)
        if not kept:  # which tools were called, when the test is about the tool
            return f"  [{label}{how} {test}{_tools(items) if '.tool' in test else ''}]"
        if len(kept) == total and ".fault" not in test:  # nothing tells them apart
            return f"  [{label}{how} {test}]"
        return f"  [{label}{how} {test}: {shown}]"  # which ones (each rule fault said)
    pattern = pattern_text(spec)
    head = (f"{len(kept)} of {total} calls match {pattern}{bounds}: {shown}" if kept
            else f"none of {total} calls match {pattern}{bounds}")
    missed = [c for i, c in enumerate(items) if i not in set(hits)]
    return f"  [{label}{head}{_near(spec, missed, host) if near and missed else ''}]"


def _how_many(kept: int, total: int) -> str:
    """`2 of the 4 recorded calls pass`, `none of ...`, `all ...`, `the recorded call
    passes` / `does not pass`."""
    if total == 1:
        return "the recorded call " + ("passes" if kept else "does not pass")
    some = "none of the" if not kept else "all" if kept == total else f"{kept} of the"
    return f"{some} {total} recorded calls pass"


def _where(lam: A.Lambda, env: dict[str, Any]) -> str:
    """`, where tool = 'curl'`: the values of the parameters a test reads."""
    names: dict[str, None] = {}
    todo: list[A.Node] = [lam.body]
    while todo:
        node = todo.pop(0)
        if isinstance(node, A.Name) and node.name != lam.param and node.name in env \
                and not isinstance(env[node.name], list | dict):
            names[node.name] = None
        todo.extend(A.children(node))
    return (", where " + ", ".join(f"{n} = {env[n]!r}" if env[n] is not None
                                    else f"{n} = null" for n in names)) if names else ""


def _tools(items: list[dict[str, Any]]) -> str:
    tally: dict[str, int] = {}
    for c in items:
        tally[c.get("tool") or "?"] = tally.get(c.get("tool") or "?", 0) + 1
    return " (their tools: " + ", ".join(f"{t} {n}" for t, n in tally.items()) + ")"


def _near(spec: dict[str, Any], missed: list[dict[str, Any]], host: Any) -> str:
    """`; not counted: CALL: why; ...`: of the calls with the pattern's verb, those that
    fail the fewest facets; when no call has its verb, the verbs called (a typo, a
    subcommand of another name)."""
    reasons = [(why, c) for why, c in ((mismatches(spec, c["argv"]), c) for c in missed)
               if why]
    other_verb = ("its verb is", "it has no verb")
    with_verb = [(why, c) for why, c in reasons if not why[0].startswith(other_verb)]
    if spec["verbs"] and not with_verb:
        verbs: dict[str, list[str]] = {}
        for c in missed:
            verbs.setdefault(_verb_of(spec, c["argv"]), []).append(str(c.get("line", "?")))
        shown = list(verbs.items())[:CALLS_SHOWN]
        called = "; ".join(f"{v!r} (line{'s' if len(n) > 1 else ''} {', '.join(n)})"
                           for v, n in shown)
        more = f" and {len(verbs) - len(shown)} more" if len(verbs) > len(shown) else ""
        return f"; not counted: no call has the verb; the verbs called: {called}{more}"
    with_verb.sort(key=lambda r: len(r[0]))
    near = [f"{said(c, host)}: {'; '.join(why)}" for why, c in with_verb[:NEAR_SHOWN]]
    more = f" and {len(with_verb) - NEAR_SHOWN} more" if len(with_verb) > NEAR_SHOWN else ""
    others = len(reasons) - len(with_verb)
    return "; not counted: " + "; ".join(near) + more + (
        f" ({others} other call{'s have' if others > 1 else ' has'} another verb)"
        if others else "")
