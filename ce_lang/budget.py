"""CE0222: a `run_limits.max_usd` that `ce run` cannot enforce, said where it was set.

Whether ce can price an agent's spending is the runtime's to say (its adapters, the
one `--agent` chose, and its rate card: `ce_runtime.pricing`); where the budget, the
model and the agent were set is the compiler's (`Trial.places`, `Trial.lineage`). So
`ce run`'s pre-flight decides which trials are refused, and this module points at the
`max_usd` they share, with where their model and agent came from when set in another
file (an experiment's variant, `-D`, `--model`) or by `--agent`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ce_lang.diagnostics import Diagnostic
from ce_lang.plan import Trial

BUDGET = "run_limits.max_usd"


def budget_places(trial: Trial) -> tuple[Any, ...]:
    """What one CE0222 is about: trials alike in it share one diagnostic."""
    return tuple(trial.places.get(k) for k in (BUDGET, "agent.model", "agent.type"))


def unenforceable_budget(trials: Sequence[Trial], message: str, run_agent: str | None
                         ) -> Diagnostic:
    """CE0222 at the `max_usd` of `trials` (alike by `budget_places`); `message` says
    why, from the runtime; `run_agent`: `ce run --agent`, which replaced their agent."""
    first = trials[0]
    budget = first.places.get(BUDGET)
    notes = []
    for key, what in (("agent.model", "the model"), ("agent.type", "the agent")):
        where = first.places.get(key)
        if key == "agent.type" and run_agent:
            notes.append(f"the agent is `{run_agent}`, set by `ce run --agent {run_agent}`")
        elif where is not None and (budget is None or where.file != budget.file):
            notes.append(f"{what} is set at {where} ({first.lineage[key]})")
    return Diagnostic("CE0222", "error", message, budget,
                      help="give the model a rate (`agent.pricing`), or remove `max_usd`",
                      notes=tuple(notes))
