"""A finished run read back for reporting: run.json and the two parquet files, turned into
the records the renderers take (the shape of task.json, as far as the parquet keeps it).

`ce report` regenerates every report from these at any time, also for rescored results
(RUN/rescored/<time> is a run directory of its own). Nothing is re-graded: the scores are
the ones the parquet holds. What the parquet does not keep comes from run.json: the
`suite_thresholds` of each suite gate (configuration, not a result) and the run's
arguments. A path that is no run directory, or a damaged file, is `RunDirError` (one
line naming the path), never a traceback.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

from ce_runtime.report.frames import JUDGE_COLUMNS
from ce_runtime.store.record import (
    AgentOutcome,
    CriterionRecord,
    EarlyStop,
    JudgeUsage,
    Status,
    TrialRecord,
    Usage,
)

if TYPE_CHECKING:
    import polars as pl

TRIALS = "trials.parquet"
RESULTS = "results.parquet"
RUN_JSON = "run.json"

# the columns a report needs; a parquet file without them is damaged (or not ce's)
_TRIAL_COLUMNS = ("trial_id", "variant_id", "task_id", "repeat", "status", "weighted_score",
                  "stopped_early", "input_tokens", "output_tokens", "cost_usd", "turns",
                  "tool_calls")
_RESULT_COLUMNS = ("trial_id", "criterion_id", "type", "score", "passed", "gating")


class RunDirError(Exception):
    """`path` is not a run directory, or one of its files is damaged. `usage` is True when
    the path is simply not a run directory (exit 2), False for a damaged file (exit 1)."""

    def __init__(self, path: str, why: str, usage: bool = False):
        super().__init__(f"{path}: {why}")
        self.path, self.why, self.usage = path, why, usage


class RunData(NamedTuple):
    """A run directory as the reports see it (a NamedTuple, not attrs: the report worker
    loads no attrs)."""

    run_dir: str  # absolute, symlinks (runs/latest) resolved
    run_json: dict[str, Any]  # {} when the file is missing
    trials: pl.DataFrame
    results: pl.DataFrame
    records: list[TrialRecord]  # one per trial, in parquet order (as far as it keeps them)

    @property
    def run_id(self) -> str:
        return str(self.run_json.get("run_id") or os.path.basename(self.run_dir))


def resolve_run_dir(path: str) -> str:
    """`path` itself when it holds a run (run.json or trials.parquet); a directory of runs
    with a `latest` link means its latest run."""
    if not os.path.exists(path):
        raise RunDirError(path, "no such file or directory", usage=True)
    if not os.path.isdir(path):
        raise RunDirError(path, "not a directory (expected a run directory such as "
                                "runs/latest)", usage=True)
    if _is_run(path):
        return os.path.realpath(path)
    latest = os.path.join(path, "latest")
    if os.path.isdir(latest) and _is_run(latest):
        return os.path.realpath(latest)
    raise RunDirError(path, f"not a run directory (no {RUN_JSON} or {TRIALS}; a run "
                            "directory is what `ce run` writes, e.g. runs/latest)",
                      usage=True)


def _is_run(path: str) -> bool:
    return any(os.path.isfile(os.path.join(path, f)) for f in (RUN_JSON, TRIALS))


def load_run(path: str) -> RunData:
    """Read the run directory at `path` (see `resolve_run_dir`)."""
    import polars as pl

    run_dir = resolve_run_dir(path)
    run_json = _read_run_json(run_dir)
    trials_path = os.path.join(run_dir, TRIALS)
    if not os.path.isfile(trials_path):
        if run_json and not run_json.get("trials"):
            empty = pl.DataFrame()
            return RunData(run_dir, run_json, empty, empty, [])
        raise RunDirError(trials_path, "missing (the run wrote no results yet?)")
    trials = _read_parquet(trials_path, _TRIAL_COLUMNS)
    results_path = os.path.join(run_dir, RESULTS)
    if not os.path.isfile(results_path):
        raise RunDirError(results_path, "missing")
    results = _read_parquet(results_path, _RESULT_COLUMNS)
    return run_data(run_dir, trials, results, run_json)


def run_data(run_dir: str, trials: pl.DataFrame, results: pl.DataFrame,
             run_json: dict[str, Any] | None = None) -> RunData:
    """The run as `load_run` reads it, from its two frames: `ce run`'s end has them in
    memory, having just written the parquet files from them (run.json is read unless
    given)."""
    run_dir = os.path.realpath(run_dir)
    if run_json is None:
        run_json = _read_run_json(run_dir)
    records = records_from_frames(trials, results, _thresholds(run_json))
    return RunData(run_dir, run_json, trials, results, records)


def _read_run_json(run_dir: str) -> dict[str, Any]:
    path = os.path.join(run_dir, RUN_JSON)
    if not os.path.isfile(path):
        return {}
    from ce_runtime.store.archive import DamagedArchive, load_archived_json

    try:
        return load_archived_json(path)
    except DamagedArchive as exc:
        raise RunDirError(exc.path, exc.why) from None


def _read_parquet(path: str, required: tuple[str, ...]) -> pl.DataFrame:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except OSError as exc:
        raise RunDirError(path, f"unreadable ({exc.strerror or exc})") from None
    except Exception as exc:  # polars' errors for a damaged file are many types
        why = " ".join(str(exc).split())[:200]
        raise RunDirError(path, f"damaged parquet ({type(exc).__name__}: {why})") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise RunDirError(path, "not a ce results file (no column " + ", ".join(missing)
                          + ")")
    return frame


def _thresholds(run_json: dict[str, Any]) -> dict[tuple, dict[str, float]]:
    """suite_thresholds per (variant, suite, criterion), from run.json's suite gates."""
    out: dict[tuple, dict[str, float]] = {}
    for g in run_json.get("suite_gates") or ():
        if isinstance(g, dict) and isinstance(g.get("thresholds"), dict) and g["thresholds"]:
            out[(g.get("variant"), g.get("suite_id"), g.get("criterion"))] = g["thresholds"]
    return out


def records_from_frames(trials: pl.DataFrame, results: pl.DataFrame,
                        thresholds: dict[tuple, dict[str, float]] | None = None,
                        ) -> list[TrialRecord]:
    """Records (the fields the reports read), one per trial row. Reshaping only: every
    number is the parquet's."""
    thresholds = thresholds or {}
    criteria: dict[str, list[CriterionRecord]] = {}
    cols = set(results.columns)
    for r in results.iter_rows(named=True):
        outputs = {k: r[k] for k in ("observed", "expected") if k in cols and r[k] is not None}
        key = (r.get("variant_id"), r.get("suite_id"), r.get("criterion_id"))
        criteria.setdefault(r["trial_id"], []).append(CriterionRecord(
            id=r["criterion_id"], type=r["type"], description=r.get("description"),
            kind=r.get("kind"), score=r["score"],
            pass_threshold=r.get("pass_threshold"), passed=bool(r["passed"]),
            weight=r.get("weight"), gating=bool(r["gating"]),
            advisory=bool(r.get("advisory")), disabled=bool(r.get("disabled")),
            error=r.get("error"), outputs=outputs,
            suite_thresholds=thresholds.get(key) if r.get("suite_id") else None))
    records = []
    for t in trials.iter_rows(named=True):
        started = t.get("started_at")
        reason = t.get("outcome_reason")
        records.append(TrialRecord(
            trial_id=t["trial_id"], variant_id=t["variant_id"],
            experiment_id=t.get("experiment_id"), task_id=t["task_id"],
            suite_id=t.get("suite_id"), row_id=t.get("row_id"),
            repeat=t["repeat"], tags=t.get("tags") or [],
            task_file=t.get("task_file"), plan_hash=t.get("plan_hash"),
            agent=t.get("agent"), model=t.get("model"), status=t["status"],
            success=t["status"] == Status.SUCCESS,
            stopped_early=bool(t["stopped_early"]),
            early_stop_reason=t.get("early_stop_reason"),
            early_stop=_early_stop(t.get("early_stop")),
            weighted_score=t["weighted_score"],
            started_at=started.isoformat() if started is not None else None,
            duration_s=t.get("duration_s"),
            agent_outcome=None if reason is None else AgentOutcome(
                reason=reason, detail=t.get("outcome_detail") or ""),
            usage=Usage(input_tokens=t["input_tokens"], output_tokens=t["output_tokens"],
                        # none in an older ce's parquet
                        cache_read_tokens=t.get("cache_read_tokens") or 0,
                        cache_write_tokens=t.get("cache_write_tokens") or 0,
                        cost_usd=t["cost_usd"], turns=t["turns"], tool_calls=t["tool_calls"]),
            cost_unknown=t.get("cost_unknown"),
            expected_turns=t.get("expected_turns"),
            judge_usage=_judge_usage(t),
            criteria=criteria.get(t["trial_id"], []),
            error=t.get("error"),
        ))
    return records


def _early_stop(value: dict[str, Any] | None) -> EarlyStop | None:
    """task.json's early_stop from its struct column (none in an older ce's parquet)."""
    if value is None:
        return None
    fields = {k: value[k] for k in EarlyStop.__struct_fields__ if k in value}
    return EarlyStop(**{**fields, "armed_criteria": list(fields.get("armed_criteria") or [])})


def _judge_usage(t: dict[str, Any]) -> JudgeUsage | None:
    """task.json's judge_usage from its flat columns (none in an older ce's parquet;
    judge_agent_sessions not before agent_judge sessions were counted)."""
    if t.get("judge_calls") is None:
        return None
    return JudgeUsage(**{k[len("judge_"):]: t.get(k, 0) for k in JUDGE_COLUMNS
                         if k != "judge_cost_unknown"},
                      cost_unknown=list(t.get("judge_cost_unknown") or []))
