"""Suite gates (`suite_thresholds`, on a criterion or at the top level): which metrics
exist for the criterion they gate (classification metrics per label, score metrics,
coder_eval's baseline statistics) and the ranges their minimums may take."""

from __future__ import annotations

from ce_lang.diagnostics import did_you_mean
from ce_lang.rule_context import RuleContext
from ce_lang.schema import criteria as C
from ce_lang.spans import Path

CLASSIFICATION_METRICS = ("accuracy", "macro_f1", "weighted_f1", "micro_f1", "f1.macro")
SCORE_METRICS = ("pass_rate", "mean_score")
# coder_eval's statistics of any criterion's scores over the suite (report/gates.py)
BASELINE_METRICS = ("count", "mean", "median", "std", "min", "max", "completion_rate")


def suite_rules(ctx: RuleContext) -> None:
    t, d = ctx.task, ctx.diags
    classification = [(i, c) for i, c in enumerate(t.success_criteria)
                      if c.RESULT == "classification"]
    entries: list[tuple[Path, dict[str, float], C.CriterionBase | None]] = []
    for i, c in enumerate(t.success_criteria):
        if c.suite_thresholds:
            entries.append((("success_criteria", i, "suite_thresholds"), c.suite_thresholds, c))
    if t.suite_thresholds and ctx.intact("success_criteria"):  # (else: which one is it?)
        owner = classification[0][1] if len(classification) == 1 else None
        if len(classification) != 1:
            d.emit("CE0212", "top-level `suite_thresholds` apply to the task's classification "
                   f"criterion, but the task has {len(classification)}",
                   ctx.key_at(("suite_thresholds",)),
                   help="put `suite_thresholds` on the criterion they gate")
        if owner is not None and owner.suite_thresholds:
            d.emit("CE0212", "`suite_thresholds` both at the top level and on the "
                   "classification criterion they gate", ctx.key_at(("suite_thresholds",)),
                   help="keep one of them: the criterion's own is the clearer place")
        entries.append((("suite_thresholds",), t.suite_thresholds, owner))
    for path, thresholds, owner in entries:
        if not ctx.has_dataset:
            d.emit("CE0212", "`suite_thresholds` need a `dataset:` (they gate metrics over rows)",
                   ctx.key_at(path))
            continue
        if owner is not None and owner.weight == 0:
            d.emit("CE0212", "`suite_thresholds` on a weight-0 (informational) criterion",
                   ctx.key_at(path))
        valid = _metric_names(owner)
        for name, minimum in thresholds.items():
            at = ctx.key_at((*path, name))
            if not _metric_ok(name, owner):
                d.emit("CE0212", f"unknown suite metric `{name}`"
                       + (f" for {owner.type}" if owner is not None else ""), at,
                       help=did_you_mean(name, valid) or "known: " + ", ".join(valid))
            if name == "count":  # a number of results, as coder_eval's count metric
                if minimum < 0:
                    d.emit("CE0104", f"suite threshold `count` (a number of results) must be "
                           f"at least 0, found {minimum}", ctx.at((*path, name)))
            elif not 0 <= minimum <= 1:
                d.emit("CE0104", f"suite threshold `{name}` must be in [0, 1], found {minimum}",
                       ctx.at((*path, name)))


def _labels(c: C.CriterionBase | None) -> list[str] | None:
    if isinstance(c, C.SkillTriggered):
        return ["yes", "no"]
    if isinstance(c, C.ClassificationMatch):
        return [*c.allowed_labels, "(none)", "(other)"]
    return None


def _metric_names(c: C.CriterionBase | None) -> list[str]:
    labels = _labels(c)
    if c is not None and labels is None:
        return [*SCORE_METRICS, *BASELINE_METRICS]
    names = [*CLASSIFICATION_METRICS, *BASELINE_METRICS]
    for lab in labels or ["yes", "no"]:
        names += [f"precision.{lab}", f"recall.{lab}", f"f1.{lab}"]
    return names


def _metric_ok(name: str, c: C.CriterionBase | None) -> bool:
    if name in BASELINE_METRICS:
        return True
    labels = _labels(c)
    if c is not None and labels is None:
        return name in SCORE_METRICS
    if name in CLASSIFICATION_METRICS:
        return True
    kind, _, label = name.partition(".")
    if kind not in ("precision", "recall", "f1") or not label:
        return False
    # the label as allowed_labels spell it: the gate's metrics are keyed by that spelling
    # (a case-insensitive match reports `Positive` for "positive"), so `recall.positive`
    # would be a metric that never exists, 0.0, failing the gate
    return labels is None or label in labels
