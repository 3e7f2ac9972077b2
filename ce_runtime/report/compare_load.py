"""A run directory read for `ce compare`: its trials and criterion results (Polars
frames), its suite gates, and the side's summary (`RunSide`: pass rate with its Wilson
interval, mean score, the ERROR and unscored trials, whether the run finished). A path
that is not a run, or a run whose files are missing or damaged, is `NotARun`."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import attrs

from ce_runtime.report.intervals import wilson

if TYPE_CHECKING:
    import polars as pl

KEY = ("variant_id", "task_id", "row_id", "repeat")  # what makes two runs' trials one


class NotARun(Exception):
    """`path` is not a run directory (`usage`: exit 2) or one of its files is missing or
    damaged (not `usage`: exit 1, as `ce report` exits for it)."""

    def __init__(self, path: str, why: str, usage: bool = True):
        super().__init__(f"{path}: {why}")
        self.path, self.usage = path, usage


@attrs.frozen
class RunSide:
    path: str
    run_id: str
    # when the run began: run.json's created_at (a resumed run's first start, as `ce runs`
    # says it), else its earliest trial's start (a re-score, a run.json without it)
    started_at: str | None
    trials: int
    graded: int
    passed: int
    pass_rate: float | None
    pass_rate_ci95: tuple[float, float] | None
    mean_score: float | None
    # run.json's `status` (None: no run.json, or one without a status) and the trials
    # the run planned (None: not recorded)
    status: str | None = None
    trials_planned: int | None = None
    # trials that ended in an ERROR, and graded trials without a score (an ERROR before
    # grading): the mean score is over the others, which must be said beside it
    errors: int = 0
    unscored: int = 0

    @property
    def unfinished(self) -> bool:
        """run.json says the run did not finish: interrupted, incomplete, failed, or
        running (still going, or killed before its end)."""
        return self.status is not None and self.status != "complete"

    def state(self) -> str | None:
        """The status of a run that did not finish, with its trials against the planned
        (`interrupted, 1 of 6 planned trial(s) ran`); None for a finished run."""
        if not self.unfinished:
            return None
        text = str(self.status)
        if self.status == "running":
            text += " (still going, or killed before its end)"
        if self.trials_planned is not None:
            text += f", {self.trials} of {self.trials_planned} planned trial(s) ran"
        return text


def load_frames(path: str) -> tuple[RunSide, pl.DataFrame, pl.DataFrame, list[Any]]:
    """(the run's side summary, trials.parquet, results.parquet, run.json's suite gates).
    A path that is not a run directory (nor a directory of runs with a `latest`) raises
    NotARun naming it (`usage`); so does a run whose files are missing or damaged (not
    `usage`)."""

    from ce_runtime.report.rundir import RunDirError, resolve_run_dir

    try:  # a directory of runs (./runs) means its latest, as for `ce report`
        path = resolve_run_dir(path)
    except RunDirError as exc:
        raise NotARun(exc.path, exc.why, usage=exc.usage) from None
    run_json: dict[str, Any] = {}
    if os.path.isfile(os.path.join(path, "run.json")):  # damaged: never read as "no run"
        from ce_runtime.store.archive import DamagedArchive, load_archived_json

        try:
            run_json = load_archived_json(os.path.join(path, "run.json"))
        except DamagedArchive as exc:
            raise NotARun(exc.path, f"damaged archive: {exc.why}", usage=False) from None
    trials_path = os.path.join(path, "trials.parquet")
    results_path = os.path.join(path, "results.parquet")
    if not os.path.isfile(trials_path):
        status = run_json.get("status")
        if run_json and run_json.get("trials") == 0 and isinstance(status, str) \
                and status != "running":
            # a run stopped before any trial finished (interrupted, incomplete, failed)
            # wrote run.json and no parquet: a run of no trials, whose status the
            # comparison says (INCOMPLETE), as `ce report` reads it (rundir.load_run)
            from ce_runtime.report.frames import results_frame, trials_frame

            trials = trials_frame([])
            gates = run_json.get("suite_gates")
            return _side(path, run_json, trials), trials, results_frame([]), \
                gates if isinstance(gates, list) else []
        raise NotARun(path, "no trials.parquet (the run graded no trial yet" + (
            f"; run.json status {status}" if isinstance(status, str) else "") + ")",
            usage=False)
    trials = _read_parquet(trials_path)
    missing = [c for c in ("trial_id", *KEY, "status", "success", "graded", "weighted_score")
               if c not in trials.columns]
    if missing:
        raise NotARun(trials_path, "not a ce results file (no column " + ", ".join(missing)
                      + ")", usage=False)
    if not os.path.isfile(results_path):  # as `ce report`: no criterion would compare
        raise NotARun(results_path, "missing (the run's criterion results)", usage=False)
    gates = run_json.get("suite_gates")
    return _side(path, run_json, trials), trials, _read_parquet(results_path), \
        gates if isinstance(gates, list) else []


def _read_parquet(path: str) -> pl.DataFrame:
    """The parquet file at `path`; a damaged one is NotARun naming it (exit 1)."""
    import polars as pl

    try:
        return pl.read_parquet(path)
    except OSError as exc:
        raise NotARun(path, f"unreadable ({exc.strerror or exc})", usage=False) from None
    except Exception as exc:  # polars raises many types for a damaged file
        raise NotARun(path, f"damaged parquet ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:160]})", usage=False) from None


def _side(path: str, run_json: dict[str, Any], trials: pl.DataFrame) -> RunSide:
    import polars as pl

    from ce_runtime.store.record import Status
    from ce_runtime.store.runs_root import utc

    row = trials.select(
        pl.len().alias("trials"), pl.col("graded").sum().alias("graded"),
        (pl.col("success") & pl.col("graded")).sum().alias("passed"),
        pl.col("weighted_score").filter(pl.col("graded")).mean().alias("mean_score"),
        (pl.col("graded") & pl.col("weighted_score").is_null()).sum().alias("unscored"),
        (pl.col("status") == Status.ERROR.value).sum().alias("errors"),
        pl.col("started_at").min().alias("started")).row(0, named=True)
    n, k = row["graded"] or 0, row["passed"] or 0
    started = row["started"]
    began = utc(run_json.get("created_at"))  # the trials of a resume began after it
    status = run_json.get("status")
    status = status if isinstance(status, str) else None
    # a finished run records trials_planned; a running one (run.json as `ce run` wrote it
    # at its start) its planned trials as `trials`
    planned = run_json.get("trials_planned" if status != "running" else "trials")
    planned = planned if isinstance(planned, int) and not isinstance(planned, bool) else None
    return RunSide(
        path=path, run_id=str(run_json.get("run_id") or os.path.basename(
            os.path.realpath(path))),
        started_at=began or (started.isoformat() if started is not None else None),
        trials=row["trials"], graded=n, passed=k,
        pass_rate=k / n if n else None, pass_rate_ci95=wilson(k, n),
        mean_score=row["mean_score"], status=status, trials_planned=planned,
        errors=row["errors"] or 0, unscored=row["unscored"] or 0)
