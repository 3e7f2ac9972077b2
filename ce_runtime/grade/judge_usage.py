"""What the judges cost. An llm_judge call: its tokens as the API reported them, priced
with ce's rate card (`ce_runtime.pricing`; a task's `agent.pricing` prices its agent,
never its judges). An agent_judge session: its tokens and the cost its Claude Code CLI
reckoned (`judge_sessions`, the claude-code adapter's own figure, as for an agent), a
session that ended without a verdict included: it was spent.

One call's usage is kept in ce's buckets (`input` new input only, `cache_read`,
`cache_write`, `output`) with the verdict in `judges/<key>.json` and in evidence.json
(the criterion's judge entry, `usage` and `model`). A trial's total is task.json's
`judge_usage`, apart from the agent's `usage`: grading never spends the agent's
`max_usd`. A judge model without a rate leaves its tokens out of `cost_usd` and is
named in `cost_unknown` (never counted as $0).

A verdict reused from the cache (`ce rescore`, a repeat whose request is identical) is
reported at the cost recorded when it was asked for: `judge_usage` is what the verdicts
a trial was graded with cost, once paid, and `recorded` counts the ones that were not
asked for again. So a rescore reproduces the run's figures, and a run total counts a
verdict shared by two of its trials in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

BUCKETS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _int(value: Any) -> int:
    try:
        return max(int(value or 0), 0)
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float:
    try:
        return max(float(value or 0.0), 0.0)
    except (TypeError, ValueError):
        return 0.0


def from_anthropic(reply: Mapping[str, Any]) -> dict[str, int] | None:
    """A Messages reply's `usage` (Anthropic and Bedrock): `input_tokens` is new input
    already. None when the reply reports none."""
    u = reply.get("usage")
    if not isinstance(u, Mapping):
        return None
    return {"input_tokens": _int(u.get("input_tokens")),
            "output_tokens": _int(u.get("output_tokens")),
            "cache_read_tokens": _int(u.get("cache_read_input_tokens")),
            "cache_write_tokens": _int(u.get("cache_creation_input_tokens"))}


def from_openai(usage: Any) -> dict[str, int] | None:
    """A Chat Completions `usage` (a dict or the openai package's object): its
    `prompt_tokens` include the cached part (`prompt_tokens_details.cached_tokens`),
    taken out of new input; OpenAI reports no cache write."""
    if usage is None:
        return None

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    details = get(usage, "prompt_tokens_details")
    cached = _int(get(details, "cached_tokens")) if details is not None else 0
    return {"input_tokens": max(_int(get(usage, "prompt_tokens")) - cached, 0),
            "output_tokens": _int(get(usage, "completion_tokens")),
            "cache_read_tokens": cached, "cache_write_tokens": 0}


def _judge_entries(criteria: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    for entries in criteria.values():
        if isinstance(entries, list):
            for e in entries:
                if isinstance(e, Mapping) and e.get("kind") == "judge" \
                        and e.get("judge") in ("llm_judge", "agent_judge"):
                    yield e


def trial_judge_usage(criteria: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """task.json's `judge_usage` from evidence.json's `criteria` (None: no judge was
    called). `calls` verdicts (llm_judge calls and agent_judge sessions), `agent_sessions`
    of them agent_judge's, `recorded` of them reused from the cache, `unmetered` of them
    without a recorded usage (a verdict cached by an older ce: its tokens are not known,
    and its cost is unknown), the tokens, `cost_usd` of the priced ones and
    `cost_unknown` (the models without a rate, and why)."""
    out: dict[str, Any] = {"calls": 0, "agent_sessions": 0, "recorded": 0, "unmetered": 0,
                           **dict.fromkeys(BUCKETS, 0), "cost_usd": 0.0}
    unknown: list[str] = []
    for e in _judge_entries(criteria or {}):
        out["calls"] += 1
        session = e.get("judge") == "agent_judge"
        out["agent_sessions"] += session
        out["recorded"] += bool(e.get("recorded"))
        usage = e.get("usage")
        if not isinstance(usage, Mapping):
            out["unmetered"] += 1
            continue
        tokens = {k: _int(usage.get(k)) for k in BUCKETS}
        for k in BUCKETS:
            out[k] += tokens[k]
        if session:  # the claude-code adapter's: each call priced as it streamed (ce's
            # rate card), and what the CLI's last message counted beyond that
            cost = _float(usage.get("cost_usd"))
            out["cost_usd"] += cost
            if not cost and any(tokens.values()):  # a model off the card, stopped early
                why = "an agent_judge session ended before its CLI reckoned its cost"
                if why not in unknown:
                    unknown.append(why)
            continue
        from ce_runtime.pricing import lookup  # not for agent_judge only (no attrs loaded)

        model = str(e.get("model") or "")
        rates = lookup(model) if model else None
        if rates is None:
            why = f"judge model {model or '(not recorded)'!r} has no rate on ce's rate card"
            if why not in unknown:
                unknown.append(why)
            continue
        out["cost_usd"] += rates.cost(tokens["input_tokens"], tokens["output_tokens"],
                                      tokens["cache_read_tokens"],
                                      tokens["cache_write_tokens"])
    if not out["calls"]:
        return None
    if out["unmetered"]:
        unknown.append(f"{out['unmetered']} verdict(s) recorded without their usage")
    out["cost_usd"] = round(out["cost_usd"], 9)
    out["cost_unknown"] = unknown
    return out


def total(usages: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """run.json's `judges` over trials' `judge_usage` (None: no trial called a judge):
    the sums, `trials` with judge calls and `cost_unknown` {trials, why} when some
    trial's judge cost is unknown (its cost is then a lower bound)."""
    out: dict[str, Any] = {"trials": 0, "calls": 0, "agent_sessions": 0, "recorded": 0,
                           **dict.fromkeys(BUCKETS, 0), "cost_usd": 0.0}
    unknown_trials, why = 0, []
    for u in usages:
        if not u:
            continue
        out["trials"] += 1
        for k in ("calls", "agent_sessions", "recorded", *BUCKETS):
            out[k] += _int(u.get(k))
        out["cost_usd"] += float(u.get("cost_usd") or 0.0)
        if u.get("cost_unknown"):
            unknown_trials += 1
            why += [w for w in u["cost_unknown"] if w not in why]
    if not out["trials"]:
        return None
    out["cost_usd"] = round(out["cost_usd"], 9)
    out["total_tokens"] = sum(out[k] for k in BUCKETS)
    if unknown_trials:
        out["cost_unknown"] = {"trials": unknown_trials, "why": why}
    return out
