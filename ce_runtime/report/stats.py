"""Paired A/B statistics between two variants on the same tasks.

`paired_comparison(trials, a, b)` matches the tasks both variants ran (by task id and
dataset row), reduces each side to one number per task (the mean weighted score over its
graded repeats, or its pass rate) and reports, for the differences d = b - a:

- the mean difference with a **paired bootstrap percentile interval** (95%): the n
  per-task differences are resampled with replacement `resamples` times from a
  `random.Random(seed)`, so a report is the same every time it is made (beyond 1,000
  tasks fewer resamples, at least 1,000, so that resamples x n <= 5 million; the count
  used is in the result);
- a two-sided **sign-flip permutation test** p-value (the paired randomisation test of
  Fisher / Pitman): under "no difference" each d_i is as likely to be -d_i, so the
  p-value is the share of the 2^n sign assignments whose |sum| is at least the observed
  |sum|. It is computed *exactly* by building the distribution of the signed sum
  (possible whenever it has at most `EXACT_LIMIT` distinct values and takes at most
  `EXACT_WORK` steps: always for n <= 16, and for differences on a small rational grid,
  such as pass rates over a few repeats, for hundreds of tasks, computed in integers);
  otherwise by Monte Carlo with `resamples` seeded sign draws,
  p = (1 + extreme) / (1 + resamples). `test` says which;
- `significant`: the interval excludes 0 and p < 1 - confidence (both: a one-task or
  constant difference has a point interval, never evidence on its own);
- wins / losses / ties: tasks where b is above / below / within 1e-9 of a;
- the most divergent tasks, by |d|, largest first.

The per-task reduction is done by Polars (imported inside the functions so `ce --help`
stays fast); the resampling is pure Python (no numpy or scipy dependency).
The per-task values follow the run's definitions (`ce_runtime.report`): the score is the
mean weighted_score over the task's graded trials that have one, so a task whose trials
all ended in ERROR before grading has no score and is left out of the score pairing (its
pass rate, 0, still counts in the pass-rate pairing).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Literal

import attrs

from ce_runtime.report.frames import EPSILON

if TYPE_CHECKING:
    import polars as pl

Metric = Literal["score", "pass_rate"]
RESAMPLES = 5000
RESAMPLE_WORK = 5_000_000  # resamples x tasks drawn at most (see effective_resamples)
MIN_RESAMPLES = 1000
EXACT_LIMIT = 1 << 16  # distinct sums the exact test will hold
EXACT_WORK = 2_000_000  # and the steps it will take to build them
CONFIDENCE = 0.95
TOP = 5
GRID_DENOMINATOR = 840  # lcm(1..8): means over up to 8 repeats stay rational
_KEY_DIGITS = 9  # sums are rounded to this many decimals to merge float noise
_BITS = bytes.maketrans(b"01", b"\x00\x01")


@attrs.frozen
class PairedComparison:
    """B against A over the tasks both ran. Differences are b - a; `wins` counts tasks
    where B scored higher. Means and interval bounds are None when no task is shared."""

    variant_a: str
    variant_b: str
    metric: str
    n_tasks: int
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    test: str
    wins: int
    losses: int
    ties: int
    most_divergent: tuple[tuple[str, float, float], ...]
    resamples: int
    seed: int
    confidence: float = CONFIDENCE

    @property
    def significant(self) -> bool:
        """The interval excludes 0 (at `confidence`) and the sign-flip p-value is below
        1 - confidence. The percentile interval alone is not enough: over one task, or
        tasks that all moved by the same amount, it is a single point that excludes 0
        however few tasks there are (one task down by 1.0 has the interval [-1, -1]
        but p = 1)."""
        return (self.ci_low is not None and self.ci_high is not None
                and (self.ci_low > EPSILON or self.ci_high < -EPSILON)
                and self.p_value is not None and self.p_value < 1 - self.confidence)

    def to_dict(self) -> dict[str, object]:
        d = attrs.asdict(self)
        d["most_divergent"] = [{"task": t, "a": a, "b": b, "diff": b - a}
                               for t, a, b in self.most_divergent]
        d["significant"] = self.significant
        return d


def per_task_scores(trials: pl.DataFrame | pl.LazyFrame, variant: str,
                    metric: Metric = "score") -> dict[tuple[str, str], float]:
    """{(task_id, row_id or ""): value} for one variant's graded trials; value is the mean
    weighted score over those that have one, or the pass rate, over the task's repeats.
    A task with no score at all is absent from the score metric."""
    import polars as pl

    lf = trials.lazy() if isinstance(trials, pl.DataFrame) else trials
    value = (pl.col("success").cast(pl.Float64) if metric == "pass_rate"
             else pl.col("weighted_score"))
    if metric not in ("score", "pass_rate"):
        raise ValueError(f"metric must be 'score' or 'pass_rate', not {metric!r}")
    out = (lf.filter(pl.col("graded") & (pl.col("variant_id") == variant))
           .with_columns(pl.col("row_id").fill_null(""))
           .group_by("task_id", "row_id").agg(value.mean().alias("v"))
           .collect())
    return {(t, r): v for t, r, v in out.iter_rows() if v is not None}


def paired_comparison(trials: pl.DataFrame | pl.LazyFrame, variant_a: str, variant_b: str,
                      *, seed: int = 0, resamples: int = RESAMPLES, metric: Metric = "score",
                      top: int = TOP) -> PairedComparison:
    """Compare `variant_b` with `variant_a` over the tasks both have graded trials for.

    `trials` is `trials_frame(...)` (or trials.parquet read back). See the module
    docstring for the statistics; `seed` and `resamples` fix the bootstrap and, when the
    exact test is out of reach, the Monte Carlo sign-flip test.
    """
    a = per_task_scores(trials, variant_a, metric)
    b = per_task_scores(trials, variant_b, metric)
    rows = [(_label(k), a[k], b[k]) for k in sorted(a.keys() & b.keys())]
    return paired_stats(rows, variant_a, variant_b, metric=metric, seed=seed,
                        resamples=resamples, top=top)


def _label(key: tuple[str, str]) -> str:
    task, row = key
    # dataset trials' task ids already end in /<row>
    return task if not row or task.endswith(f"/{row}") else f"{task}/{row}"


def paired_stats(rows: Sequence[tuple[str, float, float]], label_a: str, label_b: str, *,
                 metric: str = "score", seed: int = 0, resamples: int = RESAMPLES,
                 top: int = TOP) -> PairedComparison:
    """The statistics over already-paired (task, a, b) rows (one per task)."""
    n = len(rows)
    diffs = [b - a for _, a, b in rows]
    wins = sum(d > EPSILON for d in diffs)
    losses = sum(d < -EPSILON for d in diffs)
    divergent = sorted((r for r, d in zip(rows, diffs, strict=True) if abs(d) > EPSILON),
                       key=lambda r: (-abs(r[2] - r[1]), r[0]))[:top]
    if not n:
        return PairedComparison(label_a, label_b, metric, 0, None, None, None, None, None,
                                None, "none", 0, 0, 0, (), resamples, seed)
    resamples = effective_resamples(resamples, n)
    rng = random.Random(seed)
    low, high = bootstrap_interval(diffs, rng, resamples)
    p, test = sign_flip_p_value(diffs, rng, resamples)
    return PairedComparison(
        label_a, label_b, metric, n,
        mean_a=math.fsum(a for _, a, _ in rows) / n,
        mean_b=math.fsum(b for _, _, b in rows) / n,
        mean_diff=math.fsum(diffs) / n, ci_low=low, ci_high=high, p_value=p, test=test,
        wins=wins, losses=losses, ties=n - wins - losses,
        most_divergent=tuple((t, a, b) for t, a, b in divergent),
        resamples=resamples, seed=seed)


def effective_resamples(resamples: int, n: int) -> int:
    """`resamples`, cut so that resamples x n stays within RESAMPLE_WORK draws (but never
    below MIN_RESAMPLES): a report of thousands of tasks stays a matter of seconds."""
    return min(resamples, max(MIN_RESAMPLES, RESAMPLE_WORK // max(n, 1)))


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default, Hyndman-Fan type 7)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_interval(diffs: Sequence[float], rng: random.Random, resamples: int,
                       confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of the mean of `diffs` resampled with replacement."""
    n = len(diffs)
    if len(set(diffs)) == 1:
        return diffs[0], diffs[0]
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    return quantile(means, tail), quantile(means, 1 - tail)


def sign_flip_p_value(diffs: Sequence[float], rng: random.Random,
                      resamples: int) -> tuple[float, str]:
    """Two-sided paired sign-flip test of mean(diffs) == 0: (p, "exact" | "monte-carlo")."""
    nonzero = [d for d in diffs if abs(d) > EPSILON]
    if not nonzero:
        return 1.0, "exact"
    grid = _on_grid(nonzero)
    if grid is not None:  # rational differences (pass rates, simple scores): integers
        values = [abs(k) for k in grid]
        observed: float = abs(sum(grid))
    else:
        values = [abs(d) for d in nonzero]
        observed = abs(math.fsum(nonzero)) - EPSILON * len(nonzero)
    total = sum(values)
    flipped = _flipped_sum_distribution(values)
    if flipped is not None:
        # a sign assignment that flips magnitudes summing to t has sum total - 2t
        extreme = sum(c for t, c in flipped.items() if abs(total - 2 * t) >= observed)
        return extreme / (1 << len(values)), "exact"
    extreme = 0
    n = len(values)
    for _ in range(resamples):
        # n random bits as bytes 0/1 selecting the flipped magnitudes (all in C)
        flips = format(rng.getrandbits(n), f"0{n}b").encode().translate(_BITS)
        t = sum(itertools.compress(values, flips))
        extreme += abs(total - 2 * t) >= observed
    return (1 + extreme) / (1 + resamples), "monte-carlo"


def _on_grid(diffs: Sequence[float]) -> list[int] | None:
    """The differences as integers on a common grid 1/L (each within 1e-9 of a fraction
    with denominator <= GRID_DENOMINATOR, L their lcm <= GRID_DENOMINATOR), else None."""
    fracs = [Fraction(d).limit_denominator(GRID_DENOMINATOR) for d in diffs]
    if any(abs(float(f) - d) > EPSILON for f, d in zip(fracs, diffs, strict=True)):
        return None
    lcm = math.lcm(*(f.denominator for f in fracs))
    if lcm > GRID_DENOMINATOR:
        return None
    return [int(f * lcm) for f in fracs]


def _flipped_sum_distribution(values: Sequence[float]) -> dict[float, int] | None:
    """{t: number of subsets of `values` summing to t}, or None when out of reach (more
    than EXACT_LIMIT distinct sums, or more than EXACT_WORK steps). Equal magnitudes are
    taken together (j of m flipped in C(m, j) ways), so pass-rate differences over a few
    repeats stay exact for hundreds of tasks."""
    groups = Counter(v if isinstance(v, int) else round(v, _KEY_DIGITS) for v in values)
    if _surely_out_of_reach(sorted(groups.items())):
        return None
    dist: dict[float, int] = {0: 1}
    work = 0
    for v, m in sorted(groups.items()):
        work += len(dist) * (m + 1)
        if work > EXACT_WORK:
            return None
        ways = [math.comb(m, j) for j in range(m + 1)]
        nxt: dict[float, int] = {}
        for s, c in dist.items():
            for j, w in enumerate(ways):
                t = s + j * v
                t = t if isinstance(t, int) else round(t, _KEY_DIGITS)
                nxt[t] = nxt.get(t, 0) + c * w
        if len(nxt) > EXACT_LIMIT:
            return None
        dist = nxt
    return dist


def _surely_out_of_reach(groups: Sequence[tuple[float, int]]) -> bool:
    """True when the loop above is bound to give up: a lower bound of its work or of
    the final number of sums already passes the limit. Adding the j·v (0 <= j <= m) of a
    new magnitude to s distinct sums makes at least s + m distinct sums (|A + B| >=
    |A| + |B| - 1), so after the groups so far there are at least 1 + their count.
    Without it a large group (tens of thousands of equal pass-rate differences) was
    enumerated with its huge binomial coefficients before the next group gave up:
    minutes for 100,000 tasks, for the same None."""
    work = 0
    size = 1
    for _, m in groups:
        work += size * (m + 1)
        size += m
        if work > EXACT_WORK or size > EXACT_LIMIT:
            return True
    return False
