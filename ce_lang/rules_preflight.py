"""Pre-flight rules (issue 15): what would otherwise fail only after a sandbox is set up.

- every action of `reference.solve` and `agent.script` is one the script player knows,
  with the keys it takes (`writ:` -> did you mean `write`?), CE0219;
- a task the oracle runs (its `agent.type`, or `ce run --agent oracle`: the compiler's
  `run_agent`) has a reference the oracle can apply, CE0220;
- a task the script agent runs (`agent.type: script`, `ce run --agent script`) has an
  `agent.script` to play, CE0226.

The action table mirrors `ce_agents.script.ACTIONS` (the compiler never imports the
runtime); tests/test_preflight.py holds the two equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ce_lang.diagnostics import did_you_mean
from ce_lang.schema import criteria as C

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext

# action kind -> (required companion keys, optional companion keys)
SCRIPT_ACTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "say": ((), ()),
    "write": (("content",), ()),
    "edit": (("old", "new"), ()),
    "read": ((), ()),
    "run": ((), ("timeout",)),
    "tool": ((), ("params", "output", "status")),
    "sleep": ((), ()),
    "usage": ((), ()),
    "fail": ((), ()),
}
_GLOB = frozenset("*?[")


def preflight_rules(ctx: RuleContext) -> None:
    t = ctx.task
    if t.reference is not None and isinstance(t.reference.solve, list) \
            and ctx.intact("reference"):
        _actions(ctx, t.reference.solve, ("reference", "solve"))
    if isinstance(t.agent.script, list) and ctx.intact(("agent", "script")):
        _actions(ctx, t.agent.script, ("agent", "script"))
    if ctx.intact(("agent", "type"), "reference", "success_criteria"):  # (a default or a dropped
        _oracle(ctx)  # entry would make up the gap)
    if ctx.intact(("agent", "type"), ("agent", "script")):
        _script(ctx)


def _runs(ctx: RuleContext) -> tuple[str, str | None]:
    """The agent that runs the task (`ce run --agent X` runs every task but type-none
    ones), and that option's value."""
    kind = ctx.task.agent.type or "claude-code"
    run_agent = getattr(ctx, "run_agent", None)
    return (run_agent if run_agent and kind != "none" else kind), run_agent


def _via(ctx: RuleContext, agent: str, run_agent: str | None) -> str:
    """Where the agent running the task was chosen, as the user wrote it: `ce run
    --agent`, `ce compile --agent/--type` (its span is `<--agent>`), a `-D`, or a file."""
    source = ctx.at(("agent", "type")).file
    if run_agent == agent or source == "<--agent>":
        return f"`--agent {agent}`"
    if source.startswith("<-D"):
        return f"`-D agent.type={agent}`"
    return f"`agent.type: {agent}`"


def _script(ctx: RuleContext) -> None:
    t = ctx.task
    kind, run_agent = _runs(ctx)
    if kind != "script" or t.agent.script is not None:
        return
    via = _via(ctx, "script", run_agent)
    at = ctx.at(("agent", "type")) if t.agent.type == "script" else ctx.at(("task_id",))
    ctx.diags.emit("CE0226", f"the script agent ({via}) has no `agent.script` to play", at,
                   help="add `agent.script`: a list of actions such as `{write: FILE, "
                        "content: TEXT}`, `{run: COMMAND}`, `{say: TEXT}`")


def _actions(ctx: RuleContext, actions: list[Any], here: tuple) -> None:
    kinds = list(SCRIPT_ACTIONS)
    for i, action in enumerate(actions):
        at = (*here, i)
        if not isinstance(action, dict):
            ctx.diags.emit("CE0219", f"`{ctx.name(at)}` must be a mapping such as "
                           "`{say: TEXT}`", ctx.at(at),
                           help="an action is one of " + ", ".join(kinds))
            continue
        found = [k for k in action if k in SCRIPT_ACTIONS]
        if len(found) != 1:
            unknown = [str(k) for k in action if k not in SCRIPT_ACTIONS]
            key = unknown[0] if unknown and not found else None
            what = f"`{key}` is not an action" if key is not None else \
                "names no action" if not found else \
                "names several actions (" + ", ".join(found) + ")"
            ctx.diags.emit("CE0219", f"`{ctx.name(at)}`: {what}",
                           ctx.key_at((*at, key)) if key is not None else ctx.at(at),
                           help=(did_you_mean(key, kinds) if key is not None else None)
                           or "an action has exactly one of " + ", ".join(kinds))
            continue
        kind = found[0]
        required, optional = SCRIPT_ACTIONS[kind]
        allowed = required + optional
        for key in action:
            if key != kind and key not in allowed:
                ctx.diags.emit("CE0219", f"`{ctx.name(at)}` ({kind}): unknown key `{key}`",
                               ctx.key_at((*at, key)),
                               help=did_you_mean(str(key), list(allowed))
                               or f"{kind} takes " + (", ".join(allowed) or "nothing else"))
        missing = [k for k in required if k not in action]
        if missing:
            ctx.diags.emit("CE0219", f"`{ctx.name(at)}` ({kind}) needs "
                           + ", ".join(f"`{k}`" for k in missing), ctx.key_at((*at, kind)))


def _oracle(ctx: RuleContext) -> None:
    t = ctx.task
    kind, run_agent = _runs(ctx)
    if kind != "oracle":
        return
    why = oracle_gap(t)
    if why is None:
        return
    via = _via(ctx, "oracle", run_agent)
    at = ctx.at(("reference",)) if t.reference is not None else ctx.at(("task_id",))
    ctx.diags.emit("CE0220", f"the oracle ({via}) has nothing to apply: {why}", at,
                   help="add `reference.solve` (a shell command or script actions), a "
                        "`reference.directory`, or a reference_comparison criterion whose "
                        "`agent_file` says where `reference.file`/`code` goes")


def oracle_gap(task: Any) -> str | None:
    """Why the oracle could not apply this task's reference (None: it can), as
    ce_agents.oracle decides it at run time."""
    ref = task.reference
    if ref is None:
        return "the task has no `reference:`"
    if ref.solve is not None or ref.directory is not None:
        return None
    if ref.file is None and ref.code is None:
        return "the reference is empty"
    targets = [c.agent_file for c in task.success_criteria
               if isinstance(c, C.ReferenceComparison) and c.agent_file
               and not _GLOB & set(c.agent_file)]
    if not targets:
        return ("no reference_comparison criterion names an `agent_file` where the "
                "reference goes")
    return None
