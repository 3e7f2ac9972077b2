"""CE0227: a variable a task passes through to its sandbox (`sandbox.env_passthrough`,
`sandbox.docker.env_passthrough` / `env_passthrough_extra`) whose name looks like a
secret. ce never passes such a variable (secret_names.py): the task would run without
it, not a word said, and fail in a way that points elsewhere (a clone without its token
asks for a password)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ce_lang.secret_names import SECRET_NAME

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext

PASS_THROUGH = (("sandbox", "env_passthrough"), ("sandbox", "docker", "env_passthrough"),
                ("sandbox", "docker", "env_passthrough_extra"))


def passthrough_rules(ctx: RuleContext) -> None:
    sandbox = ctx.task.sandbox
    lists = {PASS_THROUGH[0]: sandbox.env_passthrough}
    if sandbox.docker is not None:
        lists[PASS_THROUGH[1]] = sandbox.docker.env_passthrough or []
        lists[PASS_THROUGH[2]] = sandbox.docker.env_passthrough_extra
    for field, names in lists.items():
        if not ctx.intact(field) or not ctx.written(field):
            continue
        for i, name in enumerate(names):
            path = (*field, i)
            hit = SECRET_NAME.search(name) if isinstance(name, str) else None
            if hit is None:
                continue
            ctx.diags.emit(
                "CE0227", f"`{name}` is never passed to the sandbox: its name looks like a "
                f"secret (`{hit.group(0)}`), and ce keeps such variables out of every "
                "sandbox", ctx.at(path),
                help="an agent's own credentials reach it through its adapter; a value "
                     "the task's commands need that is no secret can go in `sandbox.env`, "
                     "or pass it under a name that does not look like one")
