"""What a plan will compute, before any run (`ce explain TASK.yaml`): per criterion its
kind, weight, threshold and gating, the arguments that differ from its definition's
defaults, its effects, what it can decide live, its arming, whether it re-scores offline,
and the plan steps it runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ce_lang.api import (
    CriterionCall,
    Plan,
    Regex,
    Registry,
    program_for,
    registry_for_sources,
    rescore_offline,
)
from ce_lang.api import ast as A
from ce_runtime.grade.explain import INDENT, MISSING, chosen, item_text
from ce_runtime.grade.interpreter import is_disabled, regex_text, show_value


def explain_plan(plan: Plan, trial_id: str | None = None, only: str | Sequence[str] | None = None) -> str:
    """`only`: just the criteria `--criterion` names (and no closing score line)."""
    out = [f"task {plan.task_id}" + (f"  (trial {trial_id})" if trial_id else "")]
    es = plan.early_stop
    registry: Registry | None
    try:
        registry = program_for(plan).registry
    except ValueError:  # a criterion that does not bind: the definitions may still load
        try:
            registry = registry_for_sources(plan.criteria_sources)
        except ValueError:
            registry = None
    out.append("early stop: " + (f"on, armed {', '.join(es.armed)}" if es.enabled else "off"))
    for i, c in enumerate(plan.criteria):
        if not chosen(only, c.id, i, c.type):
            continue
        out.append("")
        gate = ("disabled (enabled: false): never run, not in the score or the gate"
                if is_disabled(c) else "gating" if c.gating
                else "informational (weight 0)" if c.weight == 0 else "not gating")
        out.append(f"{c.id} {c.type}: {c.description}")
        out.append(f"{INDENT}{c.result_kind}; weight {c.weight:g}; threshold "
                   f"{c.pass_threshold:g}; {gate}")
        if c.definition == "expr":
            out.append(f"{INDENT}expression: {' '.join(str(c.args.get('expr')).split())}")
        regexes = _regex_params(c, registry)
        args = ", ".join(f"{k}={_arg_text(v, k in regexes)}"
                         for k, v in _shown_args(c, registry))
        if args:
            out.append(f"{INDENT}arguments: {args}")
        out.append(f"{INDENT}effects: {', '.join(c.effects) or 'pure'}")
        decide = ("pass and fail" if c.can_decide_pass and c.can_decide_fail else "pass"
                  if c.can_decide_pass else "fail" if c.can_decide_fail else "nothing")
        out.append(f"{INDENT}live: can decide {decide}"
                   + (f" ({c.decidability})" if decide == "nothing" else ""))
        if c.arming is not None:
            out.append(f"{INDENT}armed: stop_when {c.arming.polarity} ({c.arming.source})")
        out.append(f"{INDENT}offline re-scoring: "
                   + ("yes" if c.offline else rescore_offline(frozenset({"model"}))))
        steps = [] if is_disabled(c) else [s for s in plan.steps if s.id in c.steps]
        for s in steps:
            shared = f", shared with {', '.join(u for u in s.used_by if u != c.id)}" \
                if len(s.used_by) > 1 else ""
            args_text = ", ".join(show_value(a, 40) for a in s.args)
            out.append(f"{INDENT}step {s.id}: {s.func}({args_text}) [{s.effect}, epoch "
                       f"{s.epoch}{shared}]")
    if only is not None:
        return "\n".join(out) + "\n"
    gating = [c for c in plan.criteria if c.gating]
    out.append("")
    out.append(f"score: weighted mean over {len(gating)} criteria with weight > 0; success "
               "when every one of them reaches its threshold")
    return "\n".join(out) + "\n"


def explain_plan_json(plan: Plan, trial_id: str | None = None, only: str | Sequence[str] | None = None
                      ) -> dict[str, Any]:
    """`explain_plan`'s facts as data (`ce explain TASK -f json`); `only` as there."""
    es = plan.early_stop
    return {
        "task_id": plan.task_id, "trial_id": trial_id,
        "early_stop": {"enabled": es.enabled, "armed": list(es.armed)},
        "criteria": [{
            "id": c.id, "type": c.type, "description": c.description,
            "kind": c.result_kind, "weight": c.weight, "pass_threshold": c.pass_threshold,
            "gating": c.gating, "disabled": is_disabled(c), "args": c.args,
            "effects": list(c.effects), "can_decide_pass": c.can_decide_pass,
            "can_decide_fail": c.can_decide_fail, "decidability": c.decidability,
            "armed": None if c.arming is None else c.arming.polarity,
            "offline": c.offline}
            for i, c in enumerate(plan.criteria) if chosen(only, c.id, i, c.type)]}


def _shown_args(c: CriterionCall, registry: Registry | None) -> list[tuple[str, Any]]:
    """The arguments that say something: those not at their definition's default (with no
    definition at hand: those that are not empty)."""
    checked = registry.criteria.get(c.definition or c.type) if registry is not None else None
    defaults = {name: _literal(node) for name, node in checked.defaults.items()} \
        if checked is not None else {}
    out = []
    for k, v in c.args.items():
        if c.definition == "expr" and k in ("expr", "kind"):
            continue
        if k in defaults:
            if _same(v, defaults[k]):
                continue
        elif checked is None and (v is None or v is False or v == [] or v == {}):
            continue
        out.append((k, v))
    return out


def _regex_params(c: CriterionCall, registry: Registry | None) -> set[str]:
    """The parameters that are regexes, spelled `re"..."` as the tree's evidence spells
    them: of type regex (command_pattern), or a str the definition only searches with
    (file_matches_regex's pattern; not run_command's expected_stdout, also compared)."""
    checked = registry.criteria.get(c.definition or c.type) if registry is not None else None
    if checked is None:
        return set()
    defn = checked.defn
    roots = [let.expr for let in (*defn.lets, *defn.outputs)] + \
        ([defn.score] if defn.score is not None else [])
    searched, other = set(), set()
    for root in roots:
        for node in A.walk(root):
            for i, child in enumerate(A.children(node)):
                if not isinstance(child, A.Name):
                    continue
                if isinstance(node, A.Call) and node.func in ("search", "try_search") \
                        and i == 1:
                    searched.add(child.name)
                elif not (isinstance(node, A.Binary) and node.op in ("==", "!=")
                          and any(isinstance(x, A.Lit) and x.value is None
                                  for x in (node.left, node.right))):
                    other.add(child.name)
    return {name for name, t in checked.params.items()
            if t.name == "regex" or (name in searched and name not in other)}


def _literal(node: A.Node) -> Any:
    if isinstance(node, A.Lit):
        return node.value.pattern if isinstance(node.value, Regex) else node.value
    if isinstance(node, A.ListLit):
        items = [_literal(n) for n in node.items]
        return MISSING if any(i is MISSING for i in items) else items
    if isinstance(node, A.MapLit) and not node.values:
        return {}
    return MISSING


def _same(a: Any, b: Any) -> bool:
    return b is not MISSING and a == b and isinstance(a, bool) == isinstance(b, bool)


def _arg_text(value: Any, regex: bool = False) -> str:
    if regex and isinstance(value, str):
        return regex_text(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "[" + "; ".join(item_text(v, MISSING) for v in value) + "]"
    return show_value(value, 40)
