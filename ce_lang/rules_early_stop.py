"""Early-stop arming (`stop_when`, coder_eval's `stop_early` blocks, the master switch
`run_limits.stop_early`): which criteria may stop a run, and which arming can never fire
(the criterion's decidability, `inst.decision`, says whether it can pass or fail live)."""

from __future__ import annotations

from ce_lang.rule_context import RowProblem, RuleContext, agent_type
from ce_lang.schema import criteria as C
from ce_lang.spans import Span


def early_stop_rules(ctx: RuleContext) -> None:
    t, d = ctx.task, ctx.diags
    master = t.run_limits.stop_early
    none_agent = agent_type(t) == "none"
    sim_on = t.simulation is not None and t.simulation.enabled
    forms = {("stop_when" if c.stop_when is not None else "stop_early"): i
             for i, c in enumerate(t.success_criteria)
             if c.stop_when is not None or c.stop_early is not None}
    if len(forms) == 2 and forms["stop_when"] != forms["stop_early"]:
        later = max(forms.values())
        field = "stop_when" if forms["stop_when"] == later else "stop_early"
        d.emit("CE0109", "a task arms its criteria with `stop_when` (and `run_limits.stop_early: "
               "true`) or with coder_eval's `stop_early` blocks, not both: their stop rules "
               "differ", ctx.key_at(("success_criteria", later, field)),
               help="use one form for every armed criterion of the task")
    gate_path = ("run_limits", "stop_early_gate_threshold")
    if not ctx.intact("success_criteria"):
        pass  # a dropped entry may have the block the threshold applies to
    elif "stop_early" in forms and master is not False:
        if t.run_limits.stop_early_gate_threshold <= 0:
            d.emit("CE0104", "`stop_early_gate_threshold` must be > 0 on a task with a "
                   "`stop_early` block (at 0 every early-stopped run would pass)",
                   ctx.at(gate_path))
    elif t.run_limits.stop_early_gate_threshold != 1.0:  # set, and nothing it applies to
        d.emit("CE0214", "`stop_early_gate_threshold` has no effect: no criterion has a "
               "`stop_early` block" + (" (`run_limits.stop_early: false` disarms them)"
                                        if "stop_early" in forms else ""),
               ctx.key_at(gate_path))
    for i, c in enumerate(t.success_criteria):
        here = ("success_criteria", i)
        if c.stop_when is not None and c.stop_early is not None:
            d.emit("CE0109", "`stop_when` and the legacy `stop_early` block exclude each other",
                   ctx.key_at((*here, "stop_early")))
        field = "stop_when" if c.stop_when is not None else (
            "stop_early" if c.stop_early is not None else None)
        if field is None:
            continue
        at = ctx.key_at((*here, field))
        if none_agent or sim_on:
            why = "an `agent: {type: none}` task has no agent trace" if none_agent else \
                "early stop is not available with an enabled simulation"
            d.emit("CE0211", f"`{field}` cannot be armed here: {why}", at)
        elif c.weight == 0:
            d.emit("CE0211", f"`{field}` on a weight-0 criterion: informational criteria never "
                   "gate, so they cannot stop a run", at)
        elif field == "stop_early":
            _check_legacy_block(c, i, at, master, ctx)
        elif field == "stop_when":
            if master is not True:
                d.emit("CE0210", "`stop_when` is inert: `run_limits.stop_early` is not true", at,
                       help="set `run_limits: {stop_early: true}` to enable early stop")
            _check_polarity(c, i, c.stop_when, ctx.at((*here, "stop_when")), ctx)


def _because(d) -> str:
    return f" ({'; '.join(d.folded)})" if d.folded else ""


def _check_legacy_block(c: C.CriterionBase, index: int, at: Span, master: bool | None,
                        ctx: RuleContext) -> None:
    """coder_eval's block: only on live-observable criteria; an unreachable trigger is inert."""
    if master is False:
        ctx.diags.emit("CE0214", "the `stop_early` block is inert: `run_limits.stop_early: false` "
                       "vetoes early stop", at)
        return
    inst = ctx.instance(index)
    if inst is None:
        return
    d = inst.decision
    if not (d.can_pass or d.can_fail):
        ctx.diags.emit("CE0211", f"a `stop_early` block cannot arm this criterion: {c.type} "
                       f"{d.why}{_because(d)}", at)
    elif not d.can_fail and not (c.stop_early is not None and (
            c.stop_early.on_pass == "stop" or c.stop_early.decide_within is not None)):
        ctx.diags.emit("CE0214", f"the `stop_early` block can never trigger: {c.type} {d.why}"
                       f"{_because(d)}", at,
                       help="use `stop_when: pass` with `run_limits.stop_early: true`")


def _check_polarity(c: C.CriterionBase, index: int, polarity: str, at: Span,
                    ctx: RuleContext) -> None:
    inst = ctx.instance(index)
    if inst is None:
        return
    d = inst.decision
    can_pass, can_fail = d.can_pass, d.can_fail
    ok = {"pass": can_pass, "fail": can_fail, "decided": can_pass or can_fail}[polarity]
    if ok:
        return
    help_ = "use `stop_when: decided`" if (can_pass or can_fail) else None
    message = f"`stop_when: {polarity}` can never trigger: {c.type} {d.why}{_because(d)}"
    if ctx.has_dataset and isinstance(c, C.SkillTriggered):
        ctx.row_problems.append(RowProblem("CE0211", message, at, help_, ctx.row_id))
    else:
        ctx.diags.emit("CE0211", message, at, help=help_)
