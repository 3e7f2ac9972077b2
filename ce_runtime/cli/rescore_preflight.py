"""`ce rescore`'s pre-flight: a re-score that would have to ask a judge, with no judge to
ask, is refused before anything is graded (exit 2, nothing written), as `ce run`
refuses to start trials whose judges it cannot reach (run_preflight.judges).

A re-score asks a judge only for a request the run did not record (verdicts are kept by
their whole request: store/verdicts.py), or for every request with --refresh-judges.
Whether a request changed is read from the plans: each model call a criterion makes is
a plan step (`steps`: the judge kind, the rubric, the files shown and the settings, the
model among them), and what the task directory adds to the request (the reference
with `include_reference`, the `$TASK_DIR/...` files shown) is in the plan's `inputs`,
by digest. A criterion whose calls are all among the calls of the plan the trial ran
with asks what the run asked (a new threshold, weight or description, another criterion
changed): its verdicts are re-used and no judge is needed. One with a call the run did
not make needs a judge. A call whose arguments are only known while grading (a user
criterion that builds its rubric from what it read) cannot be told here: if it needs a
judge, its trial ends ERROR with the reason (no criterion result, no score), as a
grading that fails does in `ce run`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ce_runtime.cli.run_preflight import _shown

DYNAMIC = "<dynamic>"  # a step argument only known while grading (ce_lang instances)


def judges(run_dir: str, dirs: list[str], plans: dict, mode: str,
           scripted: bool) -> None:
    """Refuse (exit 2) when a trial of `dirs` would ask a judge and none is configured:
    --refresh-judges with judge criteria, or TASKS (`plans`, by (variant, task)) whose
    judge criteria ask what the trial's own plan did not."""
    if mode == "offline" or scripted:
        return
    from ce_runtime.grade.judge import judge_from_env

    if judge_from_env() is not None:
        return
    if mode == "use" and not plans and not any(_no_verdicts(run_dir, d) for d in dirs):
        return  # the same plans: every request the run asked has its verdict recorded
    from ce_runtime.grade.rescore import never_graded

    new: dict[tuple[str, str], list] = {}
    for key, plan in plans.items():
        judged = _judged(_as_json(plan)) if any(
            "model" in c.effects for c in plan.criteria) else None
        if judged:
            new[key] = judged
    if plans and not new:
        return  # no judge criterion among TASKS
    archived: dict[str, tuple[list, set] | None] = {}
    problems: dict[tuple[str, str, str, str], list[str]] = {}
    for d in dirs:
        old = _record(d)
        if old is None:
            continue  # unreadable: the re-score says it is damaged
        if never_graded(old.get("status"), old.get("criteria")):
            continue  # never graded: re-scoring keeps its ERROR and asks nothing
        plan_hash = old.get("plan_hash")
        if plan_hash not in archived:
            archived[plan_hash] = _archived(run_dir, plan_hash)
        ran = archived[plan_hash]
        if plans:
            judged = new.get((old.get("variant_id"), old.get("task_id")))
        else:
            judged = ran[0] if ran is not None else None
        if not judged:
            continue
        for cid, ctype, description, calls in judged:
            if mode == "use":
                if calls is None or ran is None or set(calls) <= ran[1]:
                    ended = _no_verdicts(run_dir, d).get(cid)
                    if ended is None:
                        continue  # asked by the run (or not known here: see above)
                    why = f"asks its judge again (the run's ended without a verdict, " \
                          f"none was recorded: {ended})"
                else:
                    why = "asks its judge what the run did not (the request changed)"
            else:
                why = "is asked again (--refresh-judges)"
            where = f"{old.get('variant_id')}/{old.get('task_id')}"
            problems.setdefault((f"{cid} {ctype}", description, where, why), []).append(
                os.path.relpath(d, run_dir))
    if not problems:
        return
    for (name, description, where, why), ids in problems.items():
        click.echo(f"ce rescore: criterion {name} of {where} ({description!r}) {why}, and "
                   f"no judge is configured ({_shown(ids)})", err=True)
    other = ", or re-score with --offline (a verdict the run did not record is then the " \
        "criterion's error)" if mode == "use" else \
        ", or re-score without --refresh-judges (the run's recorded verdicts are re-used)"
    click.echo("ce rescore: nothing was re-scored: set ANTHROPIC_API_KEY (or "
               "CE_JUDGE_API_KEY, CE_JUDGE_URL, OPENAI_API_KEY, API_BACKEND=bedrock), give "
               f"scripted verdicts with --judge-replies FILE{other}", err=True)
    sys.exit(2)


def _no_verdicts(run_dir: str, trial_dir: str) -> dict[str, str]:
    """The trial's judges that ended without a verdict in the run (a turn_timeout, a
    crash: its evidence.json's judge entry has an `error`, and the run recorded nothing
    under its request), by criterion id, with why: a re-score asks them again."""
    try:
        with open(os.path.join(trial_dir, "evidence.json"), encoding="utf-8") as fh:
            criteria = json.load(fh).get("criteria")
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for cid, entries in criteria.items() if isinstance(criteria, dict) else ():
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, dict) and e.get("kind") == "judge" and e.get("error") \
                    and not e.get("recorded") and isinstance(e.get("request"), str) \
                    and not os.path.exists(os.path.join(run_dir, "judges",
                                                        f"{e['request']}.json")):
                out[cid] = str(e["error"])
    return out


def _record(trial_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(trial_dir, "task.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _archived(run_dir: str, plan_hash: Any) -> tuple[list, set] | None:
    """A trial's own plan: its judge criteria and every model call it makes."""
    from ce_runtime.grade.rescore import archived_plan_json
    from ce_runtime.store.archive import DamagedArchive

    if not isinstance(plan_hash, str):
        return None
    try:
        plan = archived_plan_json(run_dir, plan_hash)[0]
    except DamagedArchive:
        return None  # the re-score says so
    if not isinstance(plan, dict):
        return None
    judged = _judged(plan)
    return judged, {call for *_, calls in judged for call in calls or ()}


def _as_json(plan: Any) -> dict[str, Any]:
    """What `_judged` reads of a compiled plan, spelled as its plan file spells it
    (plan_to_json, without converting the whole plan)."""
    import attrs

    from ce_lang.api import block_to_json

    return {"steps": [attrs.asdict(s) for s in plan.steps],
            "criteria": [{"id": c.id, "type": c.type, "description": c.description,
                          "effects": list(c.effects), "args": c.args, "steps": c.steps}
                         for c in plan.criteria],
            "reference": None if plan.reference is None else block_to_json(plan.reference),
            "inputs": dict(plan.inputs)}


def _judged(plan: dict[str, Any]) -> list[tuple[str, str, str, tuple[str, ...] | None]]:
    """The plan's enabled criteria that call a model: (id, type, description, their model
    calls, each the JSON of what decides its request; None: not known before grading)."""
    steps = {s.get("id"): s for s in plan.get("steps") or () if isinstance(s, dict)}
    out = []
    for c in plan.get("criteria") or ():
        if not isinstance(c, dict) or "model" not in (c.get("effects") or ()):
            continue
        if (c.get("args") or {}).get("enabled", True) is False:
            continue
        calls = [steps[s] for s in c.get("steps") or () if s in steps
                 and steps[s].get("effect") == "model"]
        known: tuple[str, ...] | None = tuple(_call(plan, s) for s in calls)
        if not calls or any(DYNAMIC in call for call in known or ()):
            known = None
        out.append((str(c.get("id")), str(c.get("type")), str(c.get("description") or ""),
                    known))
    return out


def _call(plan: dict[str, Any], step: dict[str, Any]) -> str:
    """What decides a model call's request, besides the trial's own workspace and trace:
    the call (kind, rubric, files, settings) and the task directory's files it shows."""
    args = list(step.get("args") or ())
    files = args[1] if len(args) > 1 and isinstance(args[1], list) else []
    settings = args[2] if len(args) > 2 and isinstance(args[2], dict) else {}
    names = [f[len("$TASK_DIR/"):] for f in files
             if isinstance(f, str) and f.startswith("$TASK_DIR/")]
    reference = None
    if settings.get("include_reference"):
        reference = plan.get("reference")
        if isinstance(reference, dict):
            names += [reference.get(k) for k in ("file", "directory")
                      if isinstance(reference.get(k), str)]
    inputs = plan.get("inputs") if isinstance(plan.get("inputs"), dict) else {}
    shown = {k: v for k, v in inputs.items()
             if any(k == n or k.startswith(n.rstrip("/") + "/") for n in names)}
    return json.dumps([step.get("func"), args, shown,
                       reference.get("code") if isinstance(reference, dict) else None],
                      sort_keys=True, default=str)
