"""Confidence intervals for proportions (a run's pass rate, the difference of two runs'
pass rates on a task): closed forms, no dependency."""

from __future__ import annotations

import math

WILSON_Z = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(k: int, n: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """Wilson score interval for k successes in n trials."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the bounds are exactly 0 for k = 0 and 1 for k = n; in floats they came out a
    # hair off (5.6e-17 for 0/3, 0.9999999999999999 for 10/10)
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return low, high


def newcombe(k_a: int, n_a: int, k_b: int, n_b: int) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval (method 10) for p_b - p_a."""
    ia, ib = wilson(k_a, n_a), wilson(k_b, n_b)
    if ia is None or ib is None:
        return None
    pa, pb = k_a / n_a, k_b / n_b
    d = pb - pa
    low = d - math.sqrt((pb - ib[0]) ** 2 + (ia[1] - pa) ** 2)
    high = d + math.sqrt((ib[1] - pb) ** 2 + (pa - ia[0]) ** 2)
    return max(-1.0, low), min(1.0, high)
