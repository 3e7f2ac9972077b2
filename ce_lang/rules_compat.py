"""Fields ce accepts from coder_eval's format and does not use: a warning where a task
sets one (CE0214), never silence. A task written for coder_eval keeps compiling, and its
author learns what ce does instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext

# path of the field -> what ce does instead
UNUSED: dict[tuple[str, ...], str] = {
    ("checker_context",): "coder_eval's routing of checker model calls; ce routes a judge "
                          "by its model's prefix and the CE_JUDGE_* variables "
                          "(docs/agents.md)",
    ("agent", "ignore_patterns"): "coder_eval's ignore patterns for judge sub-agents; what "
                                  "ce copies into the workspace is filtered by "
                                  "`sandbox.ignore_patterns`",
    ("simulation", "parallel_trials"): "ce runs a dialog's trials like any other trials: "
                                       "`ce run -j N` decides how many run at once",
}


def compat_rules(ctx: RuleContext) -> None:
    for path, instead in UNUSED.items():
        if _set(ctx, path) and ctx.written(path) and ctx.intact(path):
            ctx.diags.emit("CE0214", f"`{'.'.join(path)}` is accepted for compatibility "
                           "and has no effect in ce", ctx.key_at(path), help=instead)


def _set(ctx: RuleContext, path: tuple[str, ...]) -> bool:
    value = ctx.task
    for part in path:
        value = getattr(value, part, None)
        if value is None:
            return False
    if path == ("simulation", "parallel_trials"):
        return value is not True  # the default; setting it true changes nothing anyway
    return value not in ([], {}, ())
