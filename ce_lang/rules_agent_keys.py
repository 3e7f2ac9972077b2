"""Agent keys the task's agent type never reads (`agent: {type: none, script: [...]}`):
a warning at the key (CE0214), as for `agent.model` on an agent that calls no model;
they were accepted and silently ignored; likewise the run limits an agentless task sets.
And where a layer above the task chose the agent type, the note that says so
(`type_notes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ce_lang.schema.agent import BUILTIN_AGENT_TYPES, READ_BY

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext


def agent_key_rules(ctx: RuleContext) -> None:
    a = ctx.task.agent
    kind = a.type or "claude-code"
    if kind not in BUILTIN_AGENT_TYPES or not ctx.intact(("agent", "type")):
        return  # a plugin's type may read any key; an unknown one is reported apart
    # `ce run --agent X` or `-D agent.type=X` over a suite is deliberate: the task's keys
    # are for the agent it names (CE0214 on `agent.model` stays quiet too)
    if ctx.run_agent or ctx.key_at(("agent", "type")).file.startswith("<-"):
        return
    # nor is an experiment's (an A/B of agent types over tasks that set keys for each:
    # each variant's agent ignores the others' by design)
    layer = ctx.layer_of(("agent", "type"))
    if layer is not None and layer.startswith(("variant ", "experiment ")):
        return
    for key, readers in READ_BY.items():
        path = ("agent", key)
        if kind in readers or getattr(a, key) is None or not ctx.written(path) \
                or not ctx.intact(path):
            continue
        names = [f"`{r}`" for r in readers]
        who = names[0] + " agent reads" if len(names) == 1 else \
            ", ".join(names[:-1]) + f" and {names[-1]} agents read"
        ctx.diags.emit("CE0214", f"`agent.{key}` has no effect on the `{kind}` agent: only "
                       f"the {who} it", ctx.key_at(path),
                       help=f"set `agent.type` to {' or '.join(names)}, or remove "
                       f"`agent.{key}`")


# the limits only an agent's run reads: an agentless task's trial has no agent phase
AGENT_LIMITS = ("max_turns", "expected_turns", "turn_timeout", "task_timeout",
                "max_input_tokens", "max_output_tokens", "max_total_tokens", "max_usd",
                "count_cached_input", "count_cache_creation")


def agentless_limit_rules(ctx: RuleContext) -> None:
    """`run_limits` an `agent: {type: none}` task sets in its own file (CE0214): no agent
    runs, so none is enforced, and its trials are left out of the within-expected-turns
    metric (they took no turns). A limit from a layer above (suite or experiment
    defaults) is for the suite's agent tasks: not said."""
    if (ctx.task.agent.type or "claude-code") != "none" or not ctx.intact(("agent", "type")) \
            or ctx.layer_of(("agent", "type")) not in (None, "task"):
        return
    for key in AGENT_LIMITS:
        path = ("run_limits", key)
        if ctx.layer_of(path) not in (None, "task") or not ctx.written(path) \
                or not ctx.intact(path) or getattr(ctx.task.run_limits, key) in (None, False):
            continue
        ctx.diags.emit("CE0214", f"`run_limits.{key}` has no effect on an "
                       "`agent: {type: none}` task: no agent runs", ctx.key_at(path),
                       help=f"remove `run_limits.{key}`, or pick a real agent type")


def type_notes(ctx: RuleContext) -> tuple[str, ...]:
    """A note naming the layer that chose `agent.type` when it is not the task file: a
    variant's `agent: {type: ...}` is over the task's (docs/experiments.md, Layers), so it
    turns an agentless task into one that needs a prompt, and the error at the task's
    `task_id` did not say why."""
    layer = ctx.layer_of(("agent", "type"))
    if layer is None or layer in ("task", "built-in defaults"):
        return ()
    kind = ctx.task.agent.type or "claude-code"
    if layer.startswith("variant "):
        layer = f"the variant `{layer.removeprefix('variant ')}`"
    elif layer.startswith("experiment "):
        layer = f"`{layer}`"
    else:
        layer = f"the {layer}"
    return (f"`agent.type: {kind}` comes from {layer} ({ctx.key_at(('agent', 'type'))}), "
            "which is over the task file's own `agent.type`, `none` included (layers: "
            "docs/experiments.md)",)
