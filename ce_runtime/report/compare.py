"""Two runs of the same tasks compared: what regressed and what improved (data only;
`ce_runtime/report/compare_load.py` reads the runs, `ce_runtime/report/compare_render.py`
renders the comparison, `ce compare` is the command).

Matching: a trial of run A and one of run B are the same trial when they have the same
variant, task id, dataset row and repeat; a criterion result of matched trials as `ce
rescore` matches a re-graded one (grade/criterion_match.py: the same id, type and
description; else moved, the same type and description; else the same id and type).
A task (variant, task id, row) present in one run only is listed, never compared.

What is measured (B against A, differences are B - A):

- flips: matched trials that succeeded in A and not in B (regressions), or the reverse
  (improvements); matched criterion results whose `passed` went True -> False (broken)
  or False -> True (fixed), gating or not (the gating flag is shown);
- per run: pass rate with its Wilson 95% interval and mean score (the run's definitions,
  `ce_runtime.report`);
- the paired deltas over the tasks both runs graded (per task: pass rate over its
  repeats, and mean score): mean difference, 95% paired bootstrap interval, sign-flip
  p-value (`ce_runtime/report/stats.py`), overall and per variant;
- per task: pass rate of each run with the difference's Newcombe 95% interval (the
  hybrid Wilson score interval for two independent proportions, his method 10) and the
  mean scores;
- per run, what a trial cost over the matched trials both graded (mean and median turns,
  tool calls, tokens, USD, wall time; unknown never 0) and B's ratio (report/usage.py):
  an ERROR trial is graded (any status but NOT_GRADED), so the section says how many of
  them each run has there and how many never reached grading;
- the dataset suite gates (run.json's `suite_gates` of each run, matched by variant,
  suite and criterion): each run's verdict and the metrics side by side (accuracy and
  F1s, or pass rate and mean score, and those the thresholds name;
  `gates.compare_gates`).

Regression rule (`regressed`): `flips` (the default) -> any regression flip, a suite
gate that passed in A and fails in B, or a significant drop; `significant` -> a
significant drop or such a gate (a gate is the suite's own minimum, which `ce run`
exits 1 on, never one trial's noise); `never` -> never. A drop is
significant when the paired mean pass-rate difference is negative and its two-sided
sign-flip p-value is below `alpha` (0.05). Two runs with no trial and no task in common
fail the gate too (`nothing_compared`), and so does a B (the candidate) that is not a whole
run (`incomplete`: its run.json status is not `complete`, i.e. interrupted, incomplete,
failed, or running (still going or killed), or it lacks trials A has of a task both ran),
unless `never`: the trials it lacks are no evidence either way. An A (the baseline) that
did not finish is said, not gated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from ce_runtime.grade.criterion_match import pair_criteria
from ce_runtime.report.compare_load import KEY, RunSide, load_frames
from ce_runtime.report.frames import EPSILON
from ce_runtime.report.gates import GateChange, compare_gates
from ce_runtime.report.intervals import newcombe
from ce_runtime.report.stats import PairedComparison, paired_stats
from ce_runtime.report.usage import UsageComparison, compare_usage

if TYPE_CHECKING:
    import polars as pl

FAIL_ON = ("flips", "significant", "never")
ALPHA = 0.05


@attrs.frozen
class CriterionFlip:
    criterion_id: str  # B's
    type: str | None
    description: str | None
    gating: bool
    score_a: float | None
    score_b: float | None
    criterion_id_a: str | None = None  # A's id, when it moved (one removed before it)

    @property
    def label(self) -> str:
        """'c1 file_exists', and A's id when it moved ('c1 file_exists (c2 in A)')."""
        text = f"{self.criterion_id} {self.type or ''}".strip()
        return text + (f" ({self.criterion_id_a} in A)" if self.criterion_id_a else "")


@attrs.frozen
class TrialFlip:
    """A matched trial whose success changed; `criteria` are its criteria that flipped the
    same way (broken for a regression, fixed for an improvement)."""

    trial_id: str
    variant_id: str
    task_id: str
    repeat: int
    status_a: str
    status_b: str
    score_a: float | None
    score_b: float | None
    criteria: tuple[CriterionFlip, ...]


@attrs.frozen
class CriterionChange:
    """A criterion that flipped in a trial whose success did not (still failing, or a
    non-gating criterion in a passing trial)."""

    trial_id: str
    criterion: CriterionFlip
    broken: bool


@attrs.frozen
class TaskDelta:
    variant_id: str
    task_id: str
    trials_a: int
    trials_b: int
    passed_a: int
    passed_b: int
    rate_a: float | None
    rate_b: float | None
    rate_diff: float | None
    rate_diff_ci95: tuple[float, float] | None
    score_a: float | None
    score_b: float | None
    score_diff: float | None


@attrs.frozen
class RunComparison:
    a: RunSide
    b: RunSide
    matched_trials: int
    regressions: tuple[TrialFlip, ...]
    improvements: tuple[TrialFlip, ...]
    criterion_changes: tuple[CriterionChange, ...]
    pass_rate: PairedComparison
    score: PairedComparison
    by_variant: tuple[tuple[str, PairedComparison, PairedComparison], ...]
    tasks: tuple[TaskDelta, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    alpha: float = ALPHA
    # trials of a task both runs have that one of them lacks (a repeat not run, a trial
    # directory lost before a re-score): not compared, named (`ce compare` says so)
    unmatched_a: tuple[str, ...] = ()
    unmatched_b: tuple[str, ...] = ()
    gates: tuple[GateChange, ...] = ()  # the suite gates of both runs, matched
    usage: UsageComparison | None = None  # informs; never part of the verdict

    @property
    def gate_regressions(self) -> tuple[GateChange, ...]:
        """The suite gates that passed in A and fail in B."""
        return tuple(g for g in self.gates if g.regressed)

    @property
    def significant_drop(self) -> bool:
        p = self.pass_rate
        return (p.mean_diff is not None and p.mean_diff < -EPSILON
                and p.p_value is not None and p.p_value < self.alpha)

    @property
    def nothing_compared(self) -> bool:
        """No trial and no task of B is one of A's (another experiment's variants, another
        suite): no evidence either way, which a gate must not take for a pass."""
        return self.matched_trials == 0 and self.pass_rate.n_tasks == 0

    @property
    def incomplete(self) -> bool:
        """B (the candidate) is not a whole run: its run.json says it did not finish, or
        it lacks trials A has of a task both ran (`unmatched_a`). What it did not run is
        no evidence either way, which a gate must not take for a pass (an interrupted B
        with one trial of six passing was "no regression", exit 0)."""
        return self.b.unfinished or bool(self.unmatched_a)

    def dropped(self, fail_on: str = "flips") -> bool:
        """A regression of the outcomes by `fail_on` (a flip, a significant drop)."""
        if fail_on not in FAIL_ON:
            raise ValueError(f"fail_on must be one of {FAIL_ON}, not {fail_on!r}")
        if fail_on == "never":
            return False
        if fail_on == "significant":
            return self.significant_drop or bool(self.gate_regressions)
        return bool(self.regressions) or bool(self.gate_regressions) or self.significant_drop

    def regressed(self, fail_on: str = "flips") -> bool:
        """The gate fails (`ce compare` exits 1): a regression by `fail_on`, or, unless
        `never`, nothing compared or an incomplete B."""
        if self.dropped(fail_on):
            return True
        return fail_on != "never" and (self.nothing_compared or self.incomplete)

    def incomplete_reasons(self) -> list[str]:
        """What makes B incomplete, one line each (empty when it is whole)."""
        out = []
        if self.b.unfinished:
            out.append(f"B (the candidate) did not finish: {self.b.state()}")
        if self.unmatched_a:
            out.append(f"{len(self.unmatched_a)} trial(s) of A have no match in B (a task "
                       "both ran: not compared)")
        return out

    def reasons(self, fail_on: str = "flips") -> list[str]:
        """Why `regressed(fail_on)` is True, one line each (empty when it is not): nothing
        compared, the outcomes' regression, then what B lacks."""
        out = []
        if fail_on != "never" and self.nothing_compared:
            out.append("no trial or task of B is one of A's (same variant, task and row): "
                       "nothing was compared")
        if fail_on == "flips" and self.regressions:
            out.append(f"{len(self.regressions)} trial(s) passed in A and fail in B")
        if fail_on in ("flips", "significant") and self.gate_regressions:
            out.append(f"{len(self.gate_regressions)} suite gate(s) passed in A and fail "
                       "in B: " + ", ".join(gate_failure(g) for g in self.gate_regressions))
        if fail_on in ("flips", "significant") and self.significant_drop:
            p = self.pass_rate
            out.append(f"pass rate dropped {100 * -p.mean_diff:.1f} pp over {p.n_tasks} "
                       f"paired task(s), p = {p.p_value:.3g} < {self.alpha:g}")
        if fail_on != "never":
            out += self.incomplete_reasons()
        return out

    def to_dict(self, fail_on: str = "flips") -> dict[str, Any]:
        d = attrs.asdict(self, recurse=True, value_serializer=_serialize)
        d["pass_rate"] = self.pass_rate.to_dict()
        d["score"] = self.score.to_dict()
        d["by_variant"] = [{"variant": v, "pass_rate": r.to_dict(), "score": s.to_dict()}
                           for v, r, s in self.by_variant]
        d["gates"] = [{**msgspec.to_builtins(g), "regressed": g.regressed, "fixed": g.fixed}
                      for g in self.gates]
        d["significant_drop"] = self.significant_drop
        d["incomplete"] = self.incomplete
        d["fail_on"] = fail_on
        d["regressed"] = self.regressed(fail_on)
        d["reasons"] = self.reasons(fail_on)
        return d


def gate_failure(g: GateChange) -> str:
    """A gate that fails in B, with each metric below its minimum ('default/labels/c0
    (accuracy 0.500 < 0.75)')."""
    from ce_runtime.report.text import fmt_metric

    below = [f"{m.metric} {fmt_metric(m.b)} < {m.minimum:g}" for m in g.metrics
             if m.failed_b and m.minimum is not None]
    return g.name + (f" ({', '.join(below)})" if below else "")


def _serialize(_inst, _field, value):
    if isinstance(value, msgspec.Struct):  # report/usage.py's (the report worker's kind)
        return msgspec.to_builtins(value)
    return list(value) if isinstance(value, tuple) else value


# ---------------------------------------------------------------------------- comparison


def compare_runs(path_a: str, path_b: str, *, seed: int = 0, resamples: int | None = None,
                 alpha: float = ALPHA) -> RunComparison:
    """Load both runs and compare them (see the module docstring)."""
    side_a, trials_a, results_a, gates_a = load_frames(path_a)
    side_b, trials_b, results_b, gates_b = load_frames(path_b)
    return compare_frames(side_a, trials_a, results_a, side_b, trials_b, results_b,
                          seed=seed, resamples=resamples, alpha=alpha, gates_a=gates_a,
                          gates_b=gates_b)


def compare_frames(side_a: RunSide, trials_a: pl.DataFrame, results_a: pl.DataFrame,
                   side_b: RunSide, trials_b: pl.DataFrame, results_b: pl.DataFrame, *,
                   seed: int = 0, resamples: int | None = None,
                   alpha: float = ALPHA, gates_a: list[Any] = (),
                   gates_b: list[Any] = ()) -> RunComparison:
    """`gates_a`, `gates_b`: each run's suite gates as its run.json records them."""
    import polars as pl

    from ce_runtime.report.stats import RESAMPLES

    resamples = resamples or RESAMPLES
    cols = ["trial_id", *KEY, "status", "success", "graded", "weighted_score"]
    ta = _keyed(trials_a.select(cols))
    tb = _keyed(trials_b.select(cols))
    matched = ta.join(tb, on=list(KEY), suffix="_b", nulls_equal=True)
    crit = _criterion_flips(results_a, results_b)

    def flips(cond: pl.Expr, broken: bool) -> tuple[TrialFlip, ...]:
        rows = matched.filter(cond).sort(list(KEY))
        out = []
        for r in rows.iter_rows(named=True):
            key = tuple(r[k] for k in KEY)
            cs = tuple(c for c, b in crit.get(key, ()) if b == broken)
            out.append(TrialFlip(r["trial_id_b"], r["variant_id"], r["task_id"],
                                 r["repeat"], r["status"], r["status_b"],
                                 r["weighted_score"], r["weighted_score_b"], cs))
        return tuple(out)

    regressions = flips(pl.col("success") & ~pl.col("success_b"), True)
    improvements = flips(~pl.col("success") & pl.col("success_b"), False)
    flipped = {(f.variant_id, f.task_id, f.repeat) for f in regressions + improvements}
    changes = []
    ids = {tuple(r[k] for k in KEY): r["trial_id_b"]
           for r in matched.select(*KEY, "trial_id_b").iter_rows(named=True)}
    for key, items in sorted(crit.items(), key=lambda kv: _sort_key(kv[0])):
        if (key[0], key[1], key[3]) in flipped or key not in ids:
            continue
        changes += [CriterionChange(ids[key], c, b) for c, b in items]

    per_a, per_b = _per_task(ta), _per_task(tb)
    tasks_a, tasks_b = set(per_a), set(per_b)
    shared = sorted(tasks_a & tasks_b, key=_sort_key)

    def paired(keys, metric: str) -> PairedComparison:
        rows = [(_task_label(k, True), per_a[k][metric], per_b[k][metric]) for k in keys
                if per_a[k][metric] is not None and per_b[k][metric] is not None]
        return paired_stats(rows, side_a.run_id, side_b.run_id, metric=metric, seed=seed,
                            resamples=resamples)

    variants = sorted({k[0] for k in shared})
    by_variant = tuple((v, paired([k for k in shared if k[0] == v], "pass_rate"),
                        paired([k for k in shared if k[0] == v], "score"))
                       for v in variants) if len(variants) > 1 else ()
    tasks = tuple(_task_delta(k, per_a[k], per_b[k]) for k in shared)
    return RunComparison(
        a=side_a, b=side_b, matched_trials=matched.height, regressions=regressions,
        improvements=improvements, criterion_changes=tuple(changes),
        pass_rate=paired(shared, "pass_rate"), score=paired(shared, "score"),
        by_variant=by_variant, tasks=tasks,
        only_a=tuple(_task_label(k, True) for k in sorted(tasks_a - tasks_b, key=_sort_key)),
        only_b=tuple(_task_label(k, True) for k in sorted(tasks_b - tasks_a, key=_sort_key)),
        alpha=alpha, unmatched_a=_unmatched(ta, tb, tasks_a & tasks_b),
        unmatched_b=_unmatched(tb, ta, tasks_a & tasks_b),
        gates=tuple(compare_gates(list(gates_a), list(gates_b))),
        usage=compare_usage(trials_a, trials_b, KEY))


def _unmatched(mine: pl.DataFrame, theirs: pl.DataFrame, shared: set) -> tuple[str, ...]:
    """The trial ids of `mine` whose task both runs have and that `theirs` has no trial
    to match (same variant, task, row and repeat)."""
    rows = mine.join(theirs.select(list(KEY)), on=list(KEY), how="anti", nulls_equal=True)
    found = [(_sort_key(tuple(r[k] for k in KEY)), r["trial_id"])
             for r in rows.iter_rows(named=True) if (r["variant_id"], r["task_id"],
                                                     r["row_id"]) in shared]
    return tuple(trial_id for _, trial_id in sorted(found))


def _keyed(frame: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    return frame.with_columns(pl.col("row_id").fill_null(""),
                              pl.col("success").fill_null(False),
                              pl.col("graded").fill_null(False))


def _sort_key(key: tuple) -> tuple:
    return tuple("" if v is None else v for v in key)


def _task_label(key: tuple, with_variant: bool = False) -> str:
    variant, task, row = key[0], key[1], key[2]
    label = task if not row or task.endswith(f"/{row}") else f"{task}/{row}"
    return f"{variant}/{label}" if with_variant else label


def _per_task(trials: pl.DataFrame) -> dict[tuple, dict[str, Any]]:
    """{(variant, task, row): {n, graded, passed, pass_rate, score}}: the pass rate over
    the task's graded trials, the mean score over those with a score."""
    import polars as pl

    out = trials.group_by("variant_id", "task_id", "row_id").agg(
        pl.len().alias("n"), pl.col("graded").sum().alias("graded"),
        (pl.col("success") & pl.col("graded")).sum().alias("passed"),
        pl.col("weighted_score").filter(pl.col("graded")).mean().alias("score"))
    res = {}
    for r in out.iter_rows(named=True):
        g = r["graded"]
        res[(r["variant_id"], r["task_id"], r["row_id"])] = {
            **r, "pass_rate": r["passed"] / g if g else None}
    return res


def _by_trial(results: pl.DataFrame) -> dict[tuple, list[dict[str, Any]]]:
    """Each trial's criterion results, in order, as `pair_criteria` takes them."""
    out: dict[tuple, list[dict[str, Any]]] = {}
    for r in results.iter_rows(named=True):
        r["id"] = r["criterion_id"]
        out.setdefault(tuple(r[k] for k in KEY), []).append(r)
    return out


def _task_delta(key: tuple, a: dict[str, Any], b: dict[str, Any]) -> TaskDelta:
    def diff(name: str) -> float | None:
        return None if a[name] is None or b[name] is None else b[name] - a[name]

    return TaskDelta(
        variant_id=key[0], task_id=_task_label(key), trials_a=a["n"], trials_b=b["n"],
        passed_a=a["passed"], passed_b=b["passed"], rate_a=a["pass_rate"],
        rate_b=b["pass_rate"], rate_diff=diff("pass_rate"),
        rate_diff_ci95=newcombe(a["passed"], a["graded"], b["passed"], b["graded"]),
        score_a=a["score"], score_b=b["score"], score_diff=diff("score"))


def _criterion_flips(results_a: pl.DataFrame, results_b: pl.DataFrame,
                     ) -> dict[tuple, list[tuple[CriterionFlip, bool]]]:
    """{trial key: [(criterion flip, broken?)]} for matched criterion results whose
    `passed` changed (disabled results left out). Matched as `pair_criteria` matches
    them: an id is the criterion's index, so by id alone one inserted or removed in B's
    task paired each later id with another criterion (flips that never happened), and
    by id, type and description a criterion that moved was removed and added (its flips
    not reported)."""
    import polars as pl

    cols = [*KEY, "criterion_id", "type", "description", "passed", "score", "gating",
            "disabled"]

    def prep(frame: pl.DataFrame) -> pl.DataFrame:
        have = [c for c in cols if c in frame.columns]
        f = frame.select(have)
        for c in cols:
            if c not in f.columns:
                f = f.with_columns(pl.lit(None).alias(c))
        return f.with_columns(pl.col("row_id").fill_null(""),
                              pl.col("disabled").fill_null(False))

    a, b = prep(results_a), prep(results_b)
    if not a.height or not b.height:
        return {}
    rows_a, rows_b = _by_trial(a), _by_trial(b)
    out: dict[tuple, list[tuple[CriterionFlip, bool]]] = {}
    for key in sorted(rows_a.keys() & rows_b.keys(), key=_sort_key):
        pairs, _ = pair_criteria(rows_a[key], rows_b[key])
        for now, was in pairs:
            if was is None or was["disabled"] or now["disabled"] \
                    or bool(was["passed"]) == bool(now["passed"]):
                continue
            flip = CriterionFlip(now["id"], now["type"], now["description"],
                                 bool(now["gating"] if now["gating"] is not None
                                      else was["gating"]), was["score"], now["score"],
                                 was["id"] if was["id"] != now["id"] else None)
            out.setdefault(key, []).append((flip, bool(was["passed"])))
    return out
