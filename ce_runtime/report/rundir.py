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

import json
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
    means its newest run (store.runs_root.newest_run: its `latest` link, else by time)."""
    if not os.path.exists(path):
        raise RunDirError(path, "no such file or directory", usage=True)
    if not os.path.isdir(path):
        raise RunDirError(path, "not a directory (expected a run directory such as "
                                "runs/latest)", usage=True)
    if _is_run(path):
        return os.path.realpath(path)
    from ce_runtime.store.runs_root import newest_run

    newest = newest_run(path)
    if newest is not None:
        return newest
    raise RunDirError(path, f"not a run directory (no {RUN_JSON} or {TRIALS}; a run "
                            "directory is what `ce run` writes, e.g. runs/latest) nor a "
                            "directory of runs", usage=True)


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
        raise _no_results(run_dir, trials_path, run_json)
    trials = _read_parquet(trials_path, _TRIAL_COLUMNS)
    results_path = os.path.join(run_dir, RESULTS)
    if not os.path.isfile(results_path):
        raise RunDirError(results_path, "missing")
    results = _read_parquet(results_path, _RESULT_COLUMNS)
    return run_data(run_dir, trials, results, run_json)


def _no_results(run_dir: str, trials_path: str, run_json: dict[str, Any]) -> RunDirError:
    """Why a run has no trials.parquet (`ce run` writes it at its end): a run whose `ce
    run` was killed (store.runs_root.run_status: run.json says running, no process holds
    its lock) did not finish, and a resume continues it; one still going has none yet."""
    from ce_runtime.store.runs_root import KILLED, run_status

    status = run_status(run_dir, run_json.get("status"))
    if status == KILLED:
        return RunDirError(run_dir, "the run did not finish: its `ce run` was killed before "
                           "its end (run.json says running, no process holds its lock), so "
                           f"it wrote no results; `ce run --resume {run_dir}` continues it")
    if status == "running":
        return RunDirError(run_dir, "the run has not finished (run.json says running): its "
                           "results are written at its end")
    return RunDirError(trials_path, "missing (the run wrote no results yet?)")


def run_data(run_dir: str, trials: pl.DataFrame, results: pl.DataFrame,
             run_json: dict[str, Any] | None = None) -> RunData:
    """The run as `load_run` reads it, from its two frames: `ce run`'s end has them in
    memory, having just written the parquet files from them (run.json is read unless
    given)."""
    run_dir = os.path.realpath(run_dir)
    if run_json is None:
        run_json = _read_run_json(run_dir)
    records = records_from_frames(trials, results, _thresholds(run_json))
    if "judge_calls" in trials.columns and "judge_agent_sessions" not in trials.columns:
        records = _with_agent_judge_sessions(run_dir, records, results)
    return RunData(run_dir, run_json, trials, results, records)


def _with_agent_judge_sessions(run_dir: str, records: list[TrialRecord],
                               results: pl.DataFrame) -> list[TrialRecord]:
    """An older ce's run (its trials.parquet has no judge_agent_sessions): its judge_*
    columns count the llm_judge calls only, its agent_judge sessions were left out. They
    are added back from each such trial's evidence.json, as today's ce counts them; a
    trial whose evidence is unreadable says its judges' cost is unknown (never $0)."""
    import polars as pl
    from msgspec.structs import replace

    from ce_runtime.grade.judge_usage import trial_judge_usage

    judged = set(results.filter(pl.col("type") == "agent_judge")["trial_id"].to_list())
    out = []
    for rec in records:
        if rec.trial_id in judged:
            evidence = _agent_judge_evidence(run_dir, rec.trial_id)
            usage = rec.judge_usage
            if evidence is None:  # the sessions' cost is not known: said, never $0
                usage = replace(usage or JudgeUsage(), cost_unknown=[
                    *(usage.cost_unknown if usage else ()), _SESSIONS_UNREADABLE])
            else:
                usage = _plus(usage, trial_judge_usage(evidence))
            rec = replace(rec, judge_usage=usage)
        out.append(rec)
    return out


_SESSIONS_UNREADABLE = ("agent_judge sessions not counted (a run by an older ce, its "
                        "evidence.json unreadable)")


def _agent_judge_evidence(run_dir: str, trial_id: str) -> dict[str, list] | None:
    """The trial's agent_judge entries in its evidence.json (None: unreadable)."""
    tdir = trial_dir(run_dir, trial_id)
    evidence = load_json_object(os.path.join(tdir, "evidence.json")) if tdir else None
    criteria = (evidence or {}).get("criteria")
    if not isinstance(criteria, dict):
        return None
    return {k: [e for e in v if isinstance(e, dict) and e.get("judge") == "agent_judge"]
            for k, v in criteria.items() if isinstance(v, list)}


def _plus(usage: JudgeUsage | None, sessions: dict[str, Any] | None) -> JudgeUsage | None:
    """The llm_judge calls' usage with the agent_judge sessions' added."""
    if sessions is None:
        return usage
    base = usage or JudgeUsage()
    summed = {k: getattr(base, k) + sessions[k] for k in JudgeUsage.__struct_fields__
              if k not in ("agent_sessions", "cost_unknown")}
    summed["cost_usd"] = round(summed["cost_usd"], 9)
    return JudgeUsage(**summed, agent_sessions=sessions["agent_sessions"],
                      cost_unknown=[*base.cost_unknown, *(
                          w for w in sessions["cost_unknown"] if w not in base.cost_unknown)])


def trial_dir(run_dir: str, trial_id: str) -> str | None:
    """A trial's directory in the run directory (None: missing, or a trial id that
    would lead outside it)."""
    path = os.path.realpath(os.path.join(run_dir, *str(trial_id).split("/")))
    root = os.path.realpath(run_dir)
    if not path.startswith(root + os.sep) or not os.path.isdir(path):
        return None
    return path


FINDINGS_SHOWN = 3  # lines per criterion a CI report (JUnit, SARIF) quotes
FINDING_CHARS = 300  # and characters per line


def failure_findings(run_dir: str | None, trial_id: str) -> dict[str, list[str]]:
    """What the grader found for each failed criterion of a trial (evidence.json's
    `found` lines: "'out.txt' matches nothing", "$ make test: exit 2; stdout: ..."), a
    few lines each, cut: CI reports quote them, so a failure says why where it is read
    (a JUnit failure said only "score 0.00 < 0.90"). {} when the run or its evidence
    is missing or unreadable."""
    tdir = trial_dir(run_dir, trial_id) if run_dir else None
    evidence = load_json_object(os.path.join(tdir, "evidence.json")) if tdir else None
    criteria = (evidence or {}).get("criteria")
    out: dict[str, list[str]] = {}
    for cid, entries in (criteria.items() if isinstance(criteria, dict) else ()):
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict) and entry.get("kind") == "found" and \
                    isinstance(entry.get("lines"), list):
                lines = [" ".join(str(x).split()) for x in entry["lines"]]
                out.setdefault(str(cid), []).extend(
                    x if len(x) <= FINDING_CHARS else x[:FINDING_CHARS - 3] + "..."
                    for x in lines if x)
    return {cid: lines[:FINDINGS_SHOWN] + ([f"(and {len(lines) - FINDINGS_SHOWN} more)"]
                                         if len(lines) > FINDINGS_SHOWN else [])
            for cid, lines in out.items()}


def task_file_path(task_file: str | None, trial_id: str, run_dir: str | None) -> str | None:
    """A trial's task file. Recorded as given to `ce run` (relative to the directory it
    ran in), so a report made elsewhere named another file: with the run directory, it
    is the task directory the trial's task.json records joined with the file's name (as
    the compiler made it). The SARIF's locations and the JUnit's `file` take it."""
    if not task_file or os.path.isabs(task_file) or not run_dir:
        return task_file
    tdir = trial_dir(run_dir, trial_id)
    task_dir = (load_json_object(os.path.join(tdir, "task.json")) or {}).get("task_dir") \
        if tdir else None
    if not isinstance(task_dir, str) or not os.path.isabs(task_dir):
        return task_file
    return os.path.join(task_dir, os.path.basename(task_file))


def cwd_relative(path: str, base: str | None = None) -> str:
    """`path` relative to `base` (the current directory) with `/` between its parts when
    it is under it (as CI services link a file of the checkout), else absolute."""
    full = os.path.abspath(path)
    try:
        rel = os.path.relpath(full, os.path.abspath(base or os.getcwd()))
    except ValueError:  # another drive
        return full
    if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        return full
    return rel.replace(os.sep, "/")


def load_json_object(path: str) -> dict[str, Any] | None:
    """A JSON object from a file, None when it is missing, unreadable or not an object."""
    try:
        with open(path, "rb") as fh:
            value = json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


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
