"""Claude Code's permission rules in a spelling it does not know: `agent.allowed_tools`
and `disallowed_tools` (the task's agent, an agent_judge's) name tools case-sensitively,
so `write` or `bash(git *)` approves or denies nothing, said nowhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ce_lang.rules_paths import emit_for_rows
from ce_lang.schema import criteria as C
from ce_lang.spans import Path
from ce_lang.tool_names import canonical_spelling

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext


def permission_tool_rules(ctx: RuleContext) -> None:
    kind = ctx.task.agent.type or "claude-code"
    runs = ctx.run_agent if ctx.run_agent and kind != "none" else kind
    if runs == "claude-code" and ctx.intact(("agent", "type")):
        _rules(ctx, ctx.task.agent, ("agent",))
    for i, c in enumerate(ctx.task.success_criteria):
        if isinstance(c, C.AgentJudge) and c.agent is not None:
            _rules(ctx, c.agent, ("success_criteria", i, "agent"))


def _rules(ctx: RuleContext, agent: Any, at: Path) -> None:
    for field, verb in (("allowed_tools", "approves"), ("disallowed_tools", "denies")):
        if not ctx.intact((*at, field)):
            continue
        for j, entry in enumerate(getattr(agent, field, None) or ()):
            if not isinstance(entry, str):
                continue
            base, paren, rest = entry.partition("(")
            name = base.strip()
            canon = canonical_spelling(name)
            if canon is None or canon.lower() != name.lower():
                continue  # another agent's name for a tool is no likely slip here
            emit_for_rows(ctx, "CE0229", f"Claude Code has no tool `{name}` (tool names are "
                          f"case-sensitive): `{entry}` {verb} nothing", (*at, field, j),
                          f"did you mean `{canon}{paren}{rest}`?")
