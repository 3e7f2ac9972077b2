"""Rules that span several fields of a resolved task (one resolved trial at a time).

Each rule reads the structured `TaskSpec` and reports at the spans of the fields it
names; the merged config knows which file and layer every path came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from ce_lang.diagnostics import did_you_mean
from ce_lang.rule_context import RuleContext, agent_type
from ce_lang.rules_agent_keys import agent_key_rules, agentless_limit_rules, type_notes
from ce_lang.rules_cli import record_cli_rules
from ce_lang.rules_compat import compat_rules
from ce_lang.rules_criterion import constraint_rules, criterion_rules
from ce_lang.rules_early_stop import early_stop_rules
from ce_lang.rules_env import passthrough_rules
from ce_lang.rules_paths import (
    emit_for_rows,
    host_path_rules,
    reference_file_rule,
    repo_rules,
)
from ce_lang.rules_preflight import preflight_rules
from ce_lang.rules_skills import skill_rules
from ce_lang.rules_suite import suite_rules
from ce_lang.rules_tools import permission_tool_rules
from ce_lang.schema import criteria as C
from ce_lang.schema.agent import BUILTIN_AGENT_TYPES, MODEL_FREE, PRICED_BY_CE
from ce_lang.schema.sdk_options import MANAGED, PASS_THROUGH
from ce_lang.schema.task import TAG_PATTERN, RepoSource
from ce_lang.spans import Path, format_path
from ce_lang.validate import check_workspace_path

TAG_RE = re.compile(TAG_PATTERN)
REFERENCE_TOKEN = re.compile(r"\$\{?REFERENCE_DIR\b")


def check_task(ctx: RuleContext) -> None:
    ctx = _hold_unknown_agent(ctx)
    for rule in RULES:
        if ctx.intact(*READS.get(rule, ())):
            rule(ctx)


def _hold_unknown_agent(ctx: RuleContext) -> RuleContext:
    """An unknown `agent.type` is reported once, then held like a dropped field: what
    follows from the type (does the task need a prompt, may it simulate a user, stop
    early) is unknown, so the rules that read it report nothing more."""
    kind = ctx.task.agent.type
    if kind is None or kind in ctx.agent_types or not ctx.intact(("agent", "type")):
        return ctx
    ctx.diags.emit("CE0105", f"unknown agent type `{kind}`", ctx.at(("agent", "type")),
                   help=did_you_mean(kind, ctx.agent_types)
                   or "known: " + ", ".join(ctx.agent_types))
    return attrs.evolve(ctx, broken=ctx.broken | {("agent", "type")})


def prompt_rules(ctx: RuleContext) -> None:
    t, d = ctx.task, ctx.diags
    sim_on = t.simulation is not None and t.simulation.enabled
    prompts = ctx.intact("initial_prompt", "initial_prompt_file")
    if t.initial_prompt is not None and t.initial_prompt_file is not None:
        d.emit("CE0109", "`initial_prompt` and `initial_prompt_file` exclude each other",
               ctx.key_at(("initial_prompt_file",)), help="keep one of them")
    if not ctx.intact(("agent", "type")):
        return  # whether the task needs a prompt at all is unknown
    if agent_type(t) == "none":
        for f in ("initial_prompt", "initial_prompt_file"):
            if getattr(t, f) is not None:
                d.emit("CE0202", f"an `agent: {{type: none}}` task must not set `{f}` "
                       "(no agent runs to read it)", ctx.key_at((f,)),
                       help="remove the prompt, or pick a real agent type")
        if sim_on:
            d.emit("CE0205", "an `agent: {type: none}` task cannot enable `simulation`",
                   ctx.key_at(("simulation", "enabled")))
    elif t.initial_prompt is None and t.initial_prompt_file is None and not sim_on \
            and prompts and ctx.intact(("simulation", "enabled")) \
            and not _refused(ctx, ("initial_prompt_file",)):
        d.emit("CE0201", "the task has no prompt: set `initial_prompt` or `initial_prompt_file`",
               ctx.at(("task_id",)),
               notes=("a prompt may be omitted only with `agent: {type: none}` or an enabled "
                      "`simulation`", *type_notes(ctx)))
    elif t.initial_prompt is not None and not t.initial_prompt.strip():
        # on a dataset task `${row.KEY}` may blank it: said once, naming the rows
        emit_for_rows(ctx, "CE0110", "`initial_prompt` is blank", ("initial_prompt",))


def _refused(ctx: RuleContext, path: Path) -> bool:
    """The path field was written but refused (outside the suite root, a FIFO ...): the
    walker dropped it and reported why, so its absence is no second error."""
    name = f"`{format_path(path)}`:"
    return any(d.code in ("CE0216", "CE0217") and d.message.startswith(name)
               for d in ctx.diags)


def tag_rules(ctx: RuleContext) -> None:
    for i, tag in enumerate(ctx.task.tags):
        if not TAG_RE.fullmatch(tag):
            fixed = re.sub(r"[^a-z0-9:]+", "-", tag.lower()).strip("-")
            ctx.diags.emit("CE0203", f"tag {tag!r} is not lowercase kebab-case (optionally "
                           "`key:value`)", ctx.at(("tags", i)),
                           help=f"try `{fixed}`" if TAG_RE.fullmatch(fixed) else None)


def agent_rules(ctx: RuleContext) -> None:
    a, d = ctx.task.agent, ctx.diags
    kind = agent_type(ctx.task)
    if not ctx.intact(("agent", "type")):  # the default, or an unknown type, stands in
        kind = ""
    if a.sdk_options and kind in ctx.agent_types:
        if kind != "claude-code":
            d.emit("CE0112", f"`agent.sdk_options` only applies to claude-code, not `{kind}`",
                   ctx.key_at(("agent", "sdk_options")))
        else:
            for key in a.sdk_options:
                at = ctx.key_at(("agent", "sdk_options", key))
                if key in MANAGED:
                    d.emit("CE0112", f"`sdk_options.{key}` is managed by ce and cannot be passed "
                           "through", at, help=_managed_help(key))
                elif key not in PASS_THROUGH:
                    d.emit("CE0112", f"`sdk_options.{key}` is not a ClaudeAgentOptions field", at,
                           help=did_you_mean(key, sorted(PASS_THROUGH)))
    if a.system_prompt is not None and a.system_prompt_file is not None:
        d.emit("CE0109", "`system_prompt` and `system_prompt_file` exclude each other",
               ctx.key_at(("agent", "system_prompt_file")))
    runs = ctx.run_agent if ctx.run_agent and kind != "none" else kind
    if a.pricing and runs in BUILTIN_AGENT_TYPES and runs not in PRICED_BY_CE \
            and ctx.written(("agent", "pricing")):
        why = "it reports its own cost" if runs == "claude-code" \
            else "it calls no model"
        d.emit("CE0214", f"`agent.pricing` has no effect on the `{runs}` agent: {why}",
               ctx.key_at(("agent", "pricing")),
               help="ce prices the tokens of " + ", ".join(PRICED_BY_CE) + " only")
    chosen_here = not ctx.run_agent and not ctx.key_at(("agent", "type")).file.startswith("<-")
    if a.model and kind in MODEL_FREE and kind != "none" and chosen_here \
            and ctx.written(("agent", "model")):
        # an A/B of models over a task whose agent calls none compares nothing (`--agent
        # oracle` / `-D agent.type=...` over model tasks is deliberate; agentless tasks
        # sit in any suite)
        d.emit("CE0214", f"`agent.model: {a.model}` has no effect on the `{kind}` agent: it "
               "calls no model", ctx.key_at(("agent", "model")),
               help="set `agent.type` to an agent that calls a model (claude-code, codex, "
               "...), or remove `agent.model`")


def _managed_help(key: str) -> str:
    where = {"model": "agent.model", "allowed_tools": "agent.allowed_tools",
             "disallowed_tools": "agent.disallowed_tools", "max_turns": "run_limits.max_turns",
             "permission_mode": "agent.permission_mode", "max_budget_usd": "run_limits.max_usd",
             "system_prompt": "agent.system_prompt", "setting_sources": "agent.setting_sources",
             "plugins": "agent.plugins"}.get(key)
    return f"set `{where}` instead" if where else "ce sets it for every run"


def sandbox_rules(ctx: RuleContext) -> None:
    """Each check reads its own fields of the block: a broken one (reported, a default
    standing in) holds only the checks that read it."""
    sb, d = ctx.task.sandbox, ctx.diags
    for i, src in enumerate(sb.template_sources if _sandbox_intact(ctx, "template_sources")
                            else ()):
        if isinstance(src, RepoSource) and i > 0:
            d.emit("CE0208", "a `repo` template source must come first",
                   ctx.at(("sandbox", "template_sources", i, "type")),
                   notes=("it clones into an empty workspace; sources after it add files",))
    for i, pat in enumerate(sb.ignore_patterns if _sandbox_intact(ctx, "ignore_patterns")
                            else ()):
        if not pat.strip() or pat.strip() == "!":
            d.emit("CE0110", "empty ignore pattern", ctx.at(("sandbox", "ignore_patterns", i)))
    for i, pat in enumerate(sb.protected if _sandbox_intact(ctx, "protected") else ()):
        check_workspace_path(pat, ctx.at(("sandbox", "protected", i)), "protected", d)
    if _sandbox_intact(ctx, "record_cli"):
        record_cli_rules(ctx)
    _enforcement_rules(ctx)


def _sandbox_intact(ctx: RuleContext, *fields: str) -> bool:
    return ctx.intact(*(("sandbox", *f.split(".")) for f in fields))


def _enforcement_rules(ctx: RuleContext) -> None:
    """Settings this host would silently drop are said out loud (CE0215)."""
    sb, d = ctx.task.sandbox, ctx.diags
    if sb.limits.max_disk_mb is not None and _sandbox_intact(ctx, "limits.max_disk_mb"):
        d.emit("CE0215", "`max_disk_mb` is not enforced by any driver yet",
               ctx.at(("sandbox", "limits", "max_disk_mb")),
               help="the trial records it as not enforced; remove it to silence this")
    if sb.driver == "tempdir" and sb.network in ("none", "model") \
            and _sandbox_intact(ctx, "driver", "network"):
        d.emit("CE0215", f"`network: {sb.network}` cannot be enforced by `driver: tempdir` "
               "(the agent shares your network)", ctx.at(("sandbox", "network")),
               help="use `driver: bwrap` (or docker) to restrict the network")
    wanted = [limit for limit in ("max_memory_mb", "max_pids", "max_cpus")
              if getattr(sb.limits, limit) is not None
              and _sandbox_intact(ctx, "driver", f"limits.{limit}")]
    if not wanted:
        return  # the host is probed only for a task that sets a limit
    host = ctx.host_limits() if callable(ctx.host_limits) else ctx.host_limits
    facts = (host or {}).get(sb.driver)
    if facts is None:
        return
    for limit in wanted:
        if not facts.get(limit):
            d.emit("CE0215", f"`{limit}` cannot be enforced by `driver: {sb.driver}` on this "
                   "host (no writable control group)", ctx.at(("sandbox", "limits", limit)),
                   help="the trial runs without it and records that; use `driver: docker`, "
                        "or give ce a delegated cgroup")


def reference_rules(ctx: RuleContext) -> None:
    """A broken field of the block is None here (reported): it counts as not given, and
    "needs one of them" is said only when none was broken."""
    t, d = ctx.task, ctx.diags
    ref = t.reference
    if ref is None and not ctx.intact("reference"):
        return  # the block itself is broken (reported): whether there is one is unknown
    if ref is not None:
        given = [f for f in ("file", "code", "directory") if getattr(ref, f) is not None]
        if not given and ref.solve is not None:
            given = ["solve"]  # only a way to solve it (the oracle's), nothing to compare
        if len(given) > 1:
            d.emit("CE0109", f"`reference` takes one of file, code or directory; found "
                   f"{', '.join(given)}", ctx.key_at(("reference", given[1])))
        elif not given and ctx.intact("reference"):
            d.emit("CE0102", "`reference` needs `file`, `code` or `directory`",
                   ctx.at(("reference",)))
    for i, c in enumerate(t.success_criteria):
        here = ("success_criteria", i)
        if isinstance(c, C.ReferenceComparison):
            if ref is None:
                d.emit("CE0209", "reference_comparison needs a task-level `reference:`",
                       ctx.at((*here, "type")))
            elif ref.directory is not None and c.reference_file is None:
                d.emit("CE0102", "reference_comparison needs `reference_file` when the "
                       "reference is a directory", ctx.at(here))
            elif ref.directory is not None and c.reference_file is not None:
                reference_file_rule(ctx, (*here, "reference_file"), c.reference_file,
                                    ref.directory)
        elif ref is None:
            if getattr(c, "include_reference", False):
                d.emit("CE0214", "`include_reference: true` has no effect: the task has no "
                       "`reference:`", ctx.key_at((*here, "include_reference")))
            texts: list[tuple[Path, str]] = []
            if isinstance(c, C.RunCommand):
                texts.append(((*here, "command"), c.command))
            if isinstance(c, C.LlmJudge | C.AgentJudge):
                texts.extend(((*here, "files", j), f) for j, f in enumerate(c.files))
            for path, text in texts:
                if REFERENCE_TOKEN.search(text):
                    d.emit("CE0209", "uses $REFERENCE_DIR but the task has no `reference:`",
                           ctx.at(path))


# rejected in an agentless task although they read no trace: the guide names them with
# the trajectory criteria ("criteria that inspect the agent trajectory (command_executed,
# skill_triggered, reference_comparison, commands_efficiency) are rejected")
AGENT_WORK_ONLY = ("reference_comparison",)


def criteria_rules(ctx: RuleContext) -> None:
    t, d = ctx.task, ctx.diags
    none_agent = agent_type(t) == "none" and ctx.intact(("agent", "type"))
    for i, c in enumerate(t.success_criteria):
        inst = ctx.instance(i)
        if none_agent and inst is not None and "trace" in inst.effects:
            d.emit("CE0204", f"`{c.type}` reads the agent's trace, but an `agent: {{type: none}}` "
                   "task runs no agent", ctx.at(("success_criteria", i, "type")),
                   help="use agent-independent criteria (run_command, file_check, json_check, ...)")
        elif none_agent and c.type in AGENT_WORK_ONLY:
            d.emit("CE0204", f"`{c.type}` grades an agent's solution against the reference, but "
                   "an `agent: {type: none}` task runs no agent",
                   ctx.at(("success_criteria", i, "type")),
                   help="compare files with run_command (e.g. `diff -q`) or file_check")
        criterion_rules(ctx, i, c)
    informational = [c.weight == 0 or getattr(c, "enabled", True) is False
                     for c in t.success_criteria]
    suite_gated = bool(t.suite_thresholds) or any(getattr(c, "suite_thresholds", None)
                                                  for c in t.success_criteria)
    if informational and all(informational) and not suite_gated \
            and ctx.intact("success_criteria"):
        d.emit("CE0214", "no criterion gates the trial: each has weight 0 or is disabled, "
               "so every trial succeeds, with a weighted score of 0",
               ctx.key_at(("success_criteria",)),
               help="give the criteria that decide success a weight > 0")




# (a part, the whole it belongs to, the unit): the whole stops a trial no later than a
# part larger than it would (a turn runs inside the trial; input and output tokens each
# count toward the total), so such a part can never fire
NESTED_LIMITS = (("turn_timeout", "task_timeout", "s"),
                 ("max_input_tokens", "max_total_tokens", "tokens"),
                 ("max_output_tokens", "max_total_tokens", "tokens"))


def nested_limit_rules(ctx: RuleContext) -> None:
    """CE0223: a per-turn or partial limit the user set above its whole (the whole's
    built-in default included) is said, with what ends the trial instead."""
    limits = ctx.task.run_limits
    for part, whole, unit in NESTED_LIMITS:
        part_path, whole_path = ("run_limits", part), ("run_limits", whole)
        value, bound = getattr(limits, part), getattr(limits, whole)
        if value is None or bound is None or value <= bound or not ctx.written(part_path) \
                or not ctx.intact(part_path, whole_path):
            continue
        default = "" if ctx.written(whole_path) else ", the built-in default"
        if unit == "s":
            message = (f"`run_limits.{part}` ({value} s) is longer than "
                       f"`run_limits.{whole}` ({bound} s{default}): it can never fire; a "
                       f"turn still running at {bound} s ends with the trial (TIMEOUT)")
        else:
            message = (f"`run_limits.{part}` ({value}) is above `run_limits.{whole}` "
                       f"({bound}): it can never fire; the trial ends "
                       f"TOKEN_BUDGET_EXCEEDED at {bound} total tokens first")
        ctx.diags.emit("CE0223", message, ctx.key_at(part_path),
                       help=f"lower `{part}` below {bound}, raise `{whole}`, or "
                            f"remove `{part}`")


def command_timeout_rules(ctx: RuleContext) -> None:
    """CE0223: a command's own timeout above `sandbox.limits.timeout` (the built-in 300 s
    included), which cuts every task command at its value: said where it is written."""
    cap = ctx.task.sandbox.limits.timeout
    written_cap = ctx.written(("sandbox", "limits", "timeout"))
    where = "" if written_cap else ", the built-in default"
    own = [(("pre_run", i, "timeout"), cmd.timeout) for i, cmd in enumerate(ctx.task.pre_run)]
    own += [(("post_run", i, "timeout"), cmd.timeout)
            for i, cmd in enumerate(ctx.task.post_run)]
    own += [(("success_criteria", i, "timeout"), getattr(c, "timeout", None))
            for i, c in enumerate(ctx.task.success_criteria) if c.type == "run_command"]
    for path, value in own:
        if not isinstance(value, int | float) or value <= cap or not ctx.written(path) \
                or not ctx.intact(path, ("sandbox", "limits", "timeout")):
            continue
        ctx.diags.emit(
            "CE0223", f"`{ctx.name(path)}` ({value:g} s) is longer than "
            f"`sandbox.limits.timeout` ({cap} s{where}): the command is stopped at {cap} s",
            ctx.key_at(path), help=f"raise `sandbox.limits.timeout` to {value:g}, or lower "
                                   "the command's timeout")


def simulation_rules(ctx: RuleContext) -> None:
    s = ctx.task.simulation
    if s is not None and s.stop_on_criteria_pass and s.check_criteria == "end_of_dialog":
        ctx.diags.emit("CE0109", "`stop_on_criteria_pass: true` needs `check_criteria: "
                       "every_turn` or `both`", ctx.key_at(("simulation", "stop_on_criteria_pass")))




# the top-level fields a rule reads (besides each criterion entry): it does not run when
# one is broken (`RuleContext.broken`). Rules not listed check what they read themselves.
READS: dict[Callable[[RuleContext], None], tuple[str | Path, ...]] = {
    tag_rules: ("tags",),
    early_stop_rules: (("run_limits", "stop_early"), ("run_limits", "stop_early_gate_threshold"),
                       ("agent", "type"), ("simulation", "enabled")),
    simulation_rules: (("simulation", "stop_on_criteria_pass"),
                       ("simulation", "check_criteria")),
    repo_rules: (("sandbox", "template_sources"),),
}

RULES = (constraint_rules, prompt_rules, tag_rules, agent_rules, agent_key_rules,
         agentless_limit_rules, sandbox_rules,
         reference_rules, criteria_rules,
         early_stop_rules, nested_limit_rules, command_timeout_rules, simulation_rules,
         suite_rules, host_path_rules,
         repo_rules, preflight_rules, compat_rules, passthrough_rules, permission_tool_rules,
         skill_rules)
