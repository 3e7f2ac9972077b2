"""coder_eval forms ce deliberately does not implement: vendor agents and judges bound to
one company's services. A task using one gets CE0113, which says so, instead of an
"unknown type" with a did-you-mean pointing at an unrelated name."""

from __future__ import annotations

AGENT_TYPES = {
    "antigravity": "Google's Antigravity (Gemini) agent, through Google's own client",
    "delegate": "UiPath Autopilot's Delegate agent, whose reasoning runs in UiPath's backend",
}

CRITERION_TYPES = {
    "system_one_judge": "a grade from a TypeSafe System One model (`jev`) answering typed "
                        "rubric questions",
}


def message(kind: str, name: str, what: str) -> str:
    return (f"`{name}` is a coder_eval {kind} that ce does not implement ({what}); "
            "run this task with coder_eval, or use one ce provides")
