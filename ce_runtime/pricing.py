"""What a model's tokens cost, for agents whose CLI counts tokens but names no price
(codex, openai; opencode and pi, whose price comes from the configuration ce writes
them): ce's rate card of list prices, and the user's own rates
(`agent.pricing`, model id -> USD per million tokens) over it.

A model on neither has no rate: its cost is unknown, and ce says so (the trial's
`cost_unknown`, the reports, and `ce run` refuses a `max_usd` it could not enforce); it
is never counted as a silent $0.

Token buckets are ce's (`trace.events.Usage`): `input` is new input only; reads from and
writes to the prompt cache are billed at their own rates. OpenAI's `input_tokens` /
`prompt_tokens` include both cached parts; an agent subtracts them before pricing.

Lookup takes the usual spellings of one model id (any case, a provider prefix such as
`openai/`, `openrouter/anthropic/`, `anthropic.`, a Bedrock region, a dated or Bedrock
version suffix, `claude-sonnet-4.5` for `claude-sonnet-4-5`) and nothing looser: no
prefix matching, so `gpt-5.5-pro` never prices as `gpt-5.5`, nor `gpt-4.1-mini` as
`gpt-4.1`.

Rates, USD per million tokens, with where they were read:
- Anthropic and OpenAI gpt-5.x-codex, gpt-5.4 and later: the reference implementation's
  card (coder_eval's pricing.py, "re-verified 2026-10-07" against platform.claude.com
  and developers.openai.com), taken 2026-12-01.
- OpenAI gpt-5 / 5.1 / 5.2 base, mini, nano and pro, gpt-4.1, gpt-4o and the o-series:
  OpenAI's list prices as published tables quoted them in 2026 (not read from OpenAI's
  page by us), taken 2026-12-01. OpenAI bills a cache write as input before gpt-5.6.
Flat rates: long-context surcharges (gpt-5.5 past 272K input) and batch or priority
tiers are not modelled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs


@attrs.frozen
class Rates:
    """One model's prices, USD per million tokens."""

    input: float  # new input (not from the cache)
    output: float  # output, reasoning included
    cache_read: float  # input read from the prompt cache
    cache_write: float  # input written to the prompt cache

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """USD for these tokens."""
        return (input_tokens * self.input + output_tokens * self.output
                + cache_read_tokens * self.cache_read
                + cache_write_tokens * self.cache_write) / 1_000_000


def _r(input: float, output: float, cache_read: float, cache_write: float | None = None
       ) -> Rates:
    return Rates(input, output, cache_read, input if cache_write is None else cache_write)


#              input   output  cache read  cache write (default: as input)
CARD: Mapping[str, Rates] = MappingProxyType({
    # Anthropic: a cache write costs 1.25x input; a read 0.1x (Fable 5.1: 0.025x,
    # Opus 5.5 and Sonnet 5.5: 0.05x)
    "claude-fable-5-1": _r(10.00, 50.00, 0.25, 12.50),
    "claude-fable-5": _r(10.00, 50.00, 1.00, 12.50),
    "claude-opus-5-5": _r(4.00, 20.00, 0.20, 5.00),
    "claude-opus-5": _r(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-8": _r(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-7": _r(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-6": _r(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-5": _r(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-1": _r(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4": _r(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-5-5": _r(2.00, 10.00, 0.10, 2.50),
    "claude-sonnet-5": _r(2.00, 10.00, 0.20, 2.50),
    "claude-sonnet-4-6": _r(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4-5": _r(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4": _r(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-5-5": _r(0.10, 0.50, 0.01, 0.125),  # prompts to 100K (5x beyond)
    "claude-haiku-4-5": _r(1.00, 5.00, 0.10, 1.25),
    "claude-haiku-3-5": _r(0.80, 4.00, 0.08, 1.00),
    "claude-3-5-haiku": _r(0.80, 4.00, 0.08, 1.00),
    "claude-3-7-sonnet": _r(3.00, 15.00, 0.30, 3.75),
    "claude-3-5-sonnet": _r(3.00, 15.00, 0.30, 3.75),
    "claude-3-opus": _r(15.00, 75.00, 1.50, 18.75),
    "claude-3-sonnet": _r(3.00, 15.00, 0.30, 3.75),
    "claude-3-haiku": _r(0.25, 1.25, 0.03, 0.30),
    # OpenAI: gpt-6 and gpt-5.6
    "gpt-6-astra": _r(10.00, 50.00, 1.00, 12.50),
    "gpt-6.1-sol": _r(2.00, 10.00, 0.10, 2.50),
    "gpt-6-sol": _r(2.00, 10.00, 0.20, 2.50),
    "gpt-6-luna": _r(0.10, 0.50, 0.01, 0.125),
    "gpt-5.6-sol": _r(4.00, 20.00, 0.40, 5.00),  # an offer said to end 2026-11-21: check
    "gpt-5.6-terra": _r(2.00, 12.00, 0.20, 2.50),
    "gpt-5.6-luna": _r(0.20, 1.20, 0.02, 0.25),
    # gpt-5.5 and earlier (pro tiers: no cache discount)
    "gpt-5.5": _r(5.00, 30.00, 0.50),
    "gpt-5.5-pro": _r(30.00, 180.00, 30.00),
    "gpt-5.4": _r(2.50, 15.00, 0.25),
    "gpt-5.4-pro": _r(30.00, 180.00, 30.00),
    "gpt-5.4-mini": _r(0.75, 4.50, 0.075),
    "gpt-5.4-nano": _r(0.20, 1.25, 0.02),
    "gpt-5.3-codex": _r(1.75, 14.00, 0.175),
    "gpt-5.2-codex": _r(1.75, 14.00, 0.175),
    "gpt-5.2": _r(1.75, 14.00, 0.175),
    "gpt-5.1-codex-max": _r(1.25, 10.00, 0.125),
    "gpt-5.1-codex": _r(1.25, 10.00, 0.125),
    "gpt-5.1-codex-mini": _r(0.25, 2.00, 0.025),
    "gpt-5.1": _r(1.25, 10.00, 0.125),
    "gpt-5-codex": _r(1.25, 10.00, 0.125),
    "gpt-5": _r(1.25, 10.00, 0.125),
    "gpt-5-mini": _r(0.25, 2.00, 0.025),
    "gpt-5-nano": _r(0.05, 0.40, 0.005),
    "gpt-5-pro": _r(15.00, 120.00, 15.00),
    "codex-mini-latest": _r(1.50, 6.00, 0.375),
    # gpt-4.1 and gpt-4o (cache reads at 0.25x and 0.5x input)
    "gpt-4.1": _r(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _r(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _r(0.10, 0.40, 0.025),
    "gpt-4o": _r(2.50, 10.00, 1.25),
    "gpt-4o-2024-05-13": _r(5.00, 15.00, 5.00),  # the first gpt-4o snapshot's own price
    "gpt-4o-mini": _r(0.15, 0.60, 0.075),
    # o-series
    "o1": _r(15.00, 60.00, 7.50),
    "o1-mini": _r(1.10, 4.40, 0.55),
    "o3": _r(2.00, 8.00, 0.50),
    "o3-pro": _r(20.00, 80.00, 20.00),
    "o3-mini": _r(1.10, 4.40, 0.55),
    "o4-mini": _r(1.10, 4.40, 0.275),
})

_ROUTES = ("openrouter/", "openai/", "anthropic/", "azure/", "bedrock/", "vertex_ai/")
_REGIONS = ("us.", "eu.", "apac.", "global.")
_VENDORS = ("anthropic.", "openai.")
_BEDROCK_VERSION = re.compile(r"-v\d+(:\d+)?$")
_DATE = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_CLAUDE_DOT = re.compile(r"(?<=\d)\.(?=\d)")


def spellings(model: str) -> list[str]:
    """The keys a model id may be priced under, most exact first: the id made bare (its
    case, provider prefix and Bedrock version dropped), then without its date."""
    key = model.strip().lower()
    while key.startswith(_ROUTES):
        key = key.split("/", 1)[1]
    for prefix in _REGIONS:
        if key.startswith(prefix) and key[len(prefix):].startswith(_VENDORS):
            key = key[len(prefix):]
    for prefix in _VENDORS:
        if key.startswith(prefix):
            key = key[len(prefix):]
    key = _BEDROCK_VERSION.sub("", key).replace("@", "-")  # Vertex: claude-x@20250929
    if key.startswith("claude-"):
        key = _CLAUDE_DOT.sub("-", key)  # OpenRouter: claude-sonnet-4.5
    undated = _DATE.sub("", key)
    return [key] if undated == key else [key, undated]


def lookup(model: str, own: Mapping[str, Rates] | None = None) -> Rates | None:
    """The rates of `model`: the user's (`own`, keyed by any spelling) before the card's;
    None when neither has them."""
    keys = spellings(model)
    if own:
        mine = {spellings(name)[0]: rates for name, rates in own.items()}
        for key in keys:
            if key in mine:
                return mine[key]
    for key in keys:
        if key in CARD:
            return CARD[key]
    return None


def own_rates(pricing: Mapping[str, Any] | None) -> dict[str, Rates]:
    """`agent.pricing` (plain data, as an agent gets it) as Rates; a cache rate not given
    is the input rate."""
    out: dict[str, Rates] = {}
    for model, r in (pricing or {}).items():
        if not isinstance(r, Mapping):
            continue
        rate_in = float(r["input"])
        out[str(model)] = Rates(
            rate_in, float(r["output"]),
            rate_in if r.get("cache_read") is None else float(r["cache_read"]),
            rate_in if r.get("cache_write") is None else float(r["cache_write"]))
    return out


def agent_rates(agent: Mapping[str, Any], default_model: str) -> tuple[str, Rates | None]:
    """(the model an agent runs, its rates or None), from its `agent:` block."""
    model = str(agent.get("model") or default_model)
    return model, lookup(model, own_rates(agent.get("pricing")))


def unpriced(agent: Any, config: Mapping[str, Any]) -> str | None:
    """Why ce cannot price what `agent` spends with this `agent:` block (None: it can, or
    the agent reports its own cost). `agent` is ce's adapter: `priced_by_ce` marks the
    ones whose tokens ce prices, `default_model` the model they run without one."""
    if not getattr(agent, "priced_by_ce", False):
        return None
    model, rates = agent_rates(config, agent.default_model)
    if rates is not None:
        return None
    return (f"model {model!r} has no rate on ce's rate card (set one with "
            f"`agent.pricing: {{{model}: {{input: USD, output: USD}}}}`, per million tokens)")
