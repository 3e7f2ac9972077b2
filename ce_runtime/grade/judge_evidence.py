"""A judge's evidence: what evidence.json keeps of a verdict (`judge_entry`) and how
`ce explain` says it (`judge_lines`).

The entry holds the verdict (score, rationale), where it came from (asked, or the
recorded verdict of `judges/<request>.json`), its model and usage, and for an agent_judge
the gist of its session (`session_gist`: how it ended, its turns, the tool calls it made,
its last words), so that an explanation says what the judge did and why a session that
gave no verdict gave none, without the transcript (task.json's `judge_sessions`).
"""

from __future__ import annotations

import math
import re
from typing import Any

CALLS_KEPT = 8  # the judge's tool calls kept in the gist (and how many there were)
SAID_KEPT = 300  # characters of its last words
_COPY = re.compile(r"/\S*?/sub_agent_[^/\s]+/workspace/?")  # the judge's workspace copy


def session_gist(session: Any) -> dict[str, Any] | None:
    """An agent_judge session in a few facts: `end` (finished, max_turns, timeout ...)
    and its `detail`, `turns`, `model`, `calls` (the first CALLS_KEPT as `Read
    'answer.txt' (turn 1, ok)`, workspace paths relative to the judge's copy) and
    `tool_calls` (how many), `said` (its last words, cut to SAID_KEPT characters)."""
    if not isinstance(session, dict):
        return None
    outcome = session.get("outcome") if isinstance(session.get("outcome"), dict) else {}
    transcript = [e for e in session.get("transcript") or () if isinstance(e, dict)]
    turn, turns, model = 0, 0, None
    calls: list[dict[str, Any]] = []
    status: dict[str, str] = {}
    for e in transcript:
        kind = e.get("type")
        if kind == "agent_start":
            model = e.get("model") or model
        elif kind == "turn_start":
            turn = e.get("turn") if isinstance(e.get("turn"), int) else turn + 1
            turns = max(turns, turn)
        elif kind == "tool_call":
            calls.append({"id": e.get("call_id"), "tool": str(e.get("tool") or "?"),
                          "what": _params(e.get("params")), "turn": turn})
        elif kind == "tool_result" and isinstance(e.get("call_id"), str):
            status[e["call_id"]] = str(e.get("status") or "?")
    said = str(session.get("text") or "")
    gist = {"end": str(outcome.get("reason") or "?"), "detail": str(outcome.get("detail")
                                                                     or ""),
            "turns": turns, "model": model, "tool_calls": len(calls),
            "calls": [f"{c['tool']} {c['what']} (turn {c['turn']}, "
                      f"{status.get(c['id'], 'no result')})" for c in calls[:CALLS_KEPT]],
            "said": said if len(said) <= SAID_KEPT else said[:SAID_KEPT - 3] + "..."}
    if session.get("transcript_kept") is False:  # its turns and calls are unknown
        gist.update(turns=None, tool_calls=None,
                    transcript="not kept (capture_transcript: false)")
    elif session.get("transcript_cut"):
        gist["transcript"] = str(session["transcript_cut"])
    return gist


def _params(params: Any) -> str:
    """What a judge's tool call ran or read, its workspace copy's path left out."""
    if isinstance(params, dict):
        for key in ("command", "file_path", "path", "pattern"):
            value = params.get(key)
            if isinstance(value, str) and value:
                value = _COPY.sub("", value) or "."
                return repr(value if len(value) <= 60 else value[:57] + "...")
    text = _COPY.sub("", str(params))
    return repr(text if len(text) <= 60 else text[:57] + "...")


def judge_entry(kind: str, key: str, verdict: dict[str, Any], settings: dict[str, Any],
                recorded: bool, error: str | None = None, session: Any = None,
                scrub: Any = None) -> dict[str, Any]:
    """evidence.json's entry of one judge verdict (`verdict`: the answer, asked or
    recorded; `error`: why it is no verdict), without its kind key; `scrub` takes the
    reference out of the judge's words."""
    gist = session_gist(session if session is not None else verdict.get("session"))
    if gist is not None and scrub is not None:
        gist = {**gist, "said": scrub(gist["said"]),
                "calls": [scrub(c) for c in gist["calls"]]}
    if gist is not None:  # the limits it ran under (the plan's, or the defaults)
        gist["limits"] = f"max_turns {int(settings.get('max_turns') or 50)}, turn_timeout " \
                         f"{float(settings.get('turn_timeout') or 300):g} s"
    entry: dict[str, Any] = {
        "request": key, "judge": kind,
        "model": verdict.get("model") or settings.get("model")
        or (settings.get("agent") or {}).get("model") or (gist or {}).get("model"),
        "score": verdict.get("score"), "rationale": str(verdict.get("rationale", "")),
        "recorded": recorded}
    if "answer" in verdict:
        entry["answer"] = verdict["answer"]
    entry["usage"] = verdict.get("usage") or (
        session if isinstance(session, dict) else verdict.get("session") or {}).get("usage")
    if gist is not None:
        entry["session"] = gist
    if error is not None:
        entry["error"] = error[:500]
    return entry


def judge_lines(ev: dict[str, Any], indent: str) -> list[str]:
    """`ce explain`'s lines for one judge entry: the verdict (and the score it gave, when
    that was clamped into [0, 1]), where it came from, its tokens; then the
    rationale, the agent_judge's session, and the judge's own words when they hold no
    verdict (what it answered instead)."""
    raw = ev.get("score")
    model = f", {ev['model']}" if ev.get("model") else ""
    if raw is None:
        said = "no verdict"
    elif isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        said = f"score {raw!r}, not a number"
    elif not 0 <= raw <= 1:
        said = f"score {raw:g}, clamped to {min(1.0, max(0.0, raw)):g}"
    else:
        said = f"score {raw:g}"
    request = str(ev.get("request", ""))
    if ev.get("from_run"):
        source = ("the run's session: a judge that ended without a verdict is not "
                  "recorded, and explain asks no judge (`ce rescore` asks it again)")
    elif ev.get("recorded"):
        source = f"recorded {'verdict' if raw is not None else 'answer'} " \
                 f"judges/{request}.json"
    else:
        source = f"asked (request {request[:12]})"
    line = f"{indent}judge ({ev.get('judge', 'judge')}{model}): {said}; {source}"
    usage = ev.get("usage") or {}
    if usage:
        cost = usage.get("cost_usd")
        line += (f"; {usage.get('input_tokens', 0)} in + {usage.get('output_tokens', 0)} "
                 "out tokens" + (f", ${cost:.4g}" if isinstance(cost, int | float) and cost
                                 else ""))
    lines = [line]
    if ev.get("rationale"):
        lines.append(f"{indent}  rationale: {ev['rationale']}")
    gist = ev.get("session")
    if isinstance(gist, dict):
        limits = f" ({gist['limits']})" if gist.get("limits") else ""
        lines.append(f"{indent}  session{limits}: {_ended(gist)}")
        for call in gist.get("calls") or ():
            lines.append(f"{indent}    {call}")
        more = int(gist.get("tool_calls") or 0) - len(gist.get("calls") or ())
        if more > 0:
            lines.append(f"{indent}    and {more} more tool call(s)")
        if gist.get("transcript"):
            lines.append(f"{indent}  transcript: {gist['transcript']}")
    if raw is None or ev.get("error"):
        words = gist.get("said") if isinstance(gist, dict) else ev.get("answer")
        if words is not None:
            none = "none (stopped before it answered)" if isinstance(gist, dict) and \
                gist.get("end") == "timeout" else "none (it said nothing after its tool calls)"
            lines.append(f"{indent}  its last words: {words!r}" if words
                         else f"{indent}  its last words: {none}")
    return lines


def _ended(gist: dict[str, Any]) -> str:
    """`finished after 2 turns, 1 tool call:` / `timeout (past 20 s) in turn 1, ...`."""
    end, turns, n = gist.get("end"), gist.get("turns"), gist.get("tool_calls") or 0
    if turns is None:  # no transcript to count them in
        return {"max_turns": "stopped at max_turns", "timeout": "stopped at turn_timeout"
                }.get(str(end), str(end)) + " (its turns and tool calls are not known)"
    how = {"finished": f"finished after {turns} turn{'s' if turns != 1 else ''}",
           "max_turns": f"stopped at max_turns after {turns} turn{'s' if turns != 1 else ''}",
           "timeout": f"stopped at turn_timeout ({gist.get('detail') or 'timed out'}) in "
                      f"turn {turns}"}.get(str(end), f"ended with {end}"
                                           + (f" ({gist['detail']})" if gist.get("detail")
                                              else "") + f" after {turns} turn(s)")
    return how + (f", {n} tool call{'s' if n != 1 else ''}:" if n else ", no tool call")
