"""`ce explain`'s last lines (grade/explain.py's arithmetic): each criterion's score in
the weighted-score line reads as the gate line says it, told apart from its pass
threshold, and the armed weighted score of an early stop apart from its gate.

`.3g` read 0.7996 against a threshold of 0.8 `c0 0.8×1` above `c0 0.7996 < 0.8`, and
2/3 armed against stop_early_gate_threshold 0.6667 `0.6667 < ... 0.6667`.
"""

from __future__ import annotations

from ce_runtime.grade.explain import arithmetic
from ce_runtime.grade.interpreter import CriterionResult, GradeResult


def _criterion(cid: str, score: float, threshold: float, passed: bool | None = None,
               weight: float = 1.0) -> CriterionResult:
    passed = score >= threshold if passed is None else passed
    return CriterionResult(
        id=cid, type="expr", description=cid, kind="continuous",
        score=score, pass_threshold=threshold, passed=passed, weight=weight, gating=True,
        advisory=False, error=None, outputs={}, values={}, matched={}, duration_ms=0.0)


def test_a_score_near_its_threshold_reads_apart_from_it_as_in_the_gate_line():
    criteria = [_criterion("c0", 0.7996, 0.8), _criterion("c1", 0.8, 0.8),
                _criterion("c2", 1 / 3, 0.9), _criterion("c3", 1.0, 0.9, weight=2)]
    score = (0.7996 + 0.8 + 1 / 3 + 2.0) / 5
    lines = arithmetic(GradeResult(criteria, score, False, False))
    assert lines == [
        f"weighted score = (c0 0.7996×1 + c1 0.8×1 + c2 0.333×1 + c3 1×2) / 5 = {score:.4g}",
        "gate (every enabled criterion with weight > 0): c0 0.7996 < 0.8, c2 0.333 < 0.9"
        " -> FAILURE"]


def test_an_early_stops_armed_score_reads_apart_from_its_gate():
    criteria = [_criterion("c0", 1.0, 1.0), _criterion("c1", 1.0, 1.0),
                _criterion("c2", 0.0, 1.0)]
    lines = arithmetic(GradeResult(criteria, 2 / 3, False, True), weighted_gate=0.6667)
    assert lines[-1] == ("gate (armed criteria only, stopped early; weighted): (c0 1×1 + "
                         "c1 1×1 + c2 0×1) / 3 = 0.66667 < stop_early_gate_threshold "
                         "0.6667 -> FAILURE")
    # apart already: as before (4 significant digits, the gate as it was written)
    lines = arithmetic(GradeResult(criteria, 2 / 3, False, True), weighted_gate=0.75)
    assert lines[-1].endswith("/ 3 = 0.6667 < stop_early_gate_threshold 0.75 -> FAILURE")
