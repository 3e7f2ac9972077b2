"""`ce rescore`'s results directory, and what it says of the run it re-scored: the run's
state (a run cut short stays so when re-scored; trials missing or damaged make the
re-score incomplete), the suite gates that moved, and the run's parts the results link
to (plans, definitions, task files, objects) so `ce explain` and `ce rescore` work on
them. The command is cli/rescore.py."""

from __future__ import annotations

import os
import shutil


def gate_changes_of(run_dir: str, now: list, suites: set[tuple[str, str]],
                    left_out: dict[tuple[str, str], list[tuple[str, str]]] | None = None,
                    unknown: str | None = None, asked: set[tuple[str, str]] | None = None
                    ) -> tuple[list[str], dict[str, list[str]]]:
    """How the suite gates of `suites` (variant, suite id) moved from the run's run.json
    (none recorded: nothing said), and the gates not compared (VARIANT/SUITE/CRITERION:
    why trials of its suite were not re-graded, 'missing from the run', ...). A gate is
    compared only when its suite was re-graded whole: `left_out` holds, per suite, the
    trials of it that were not re-graded (why, trial id: missing from the run, a damaged
    archive, no task in TASKS); its gates are said not compared, with those trials, as
    are the gates of every suite when `unknown` says why the trials missing cannot be
    told. `asked`: the suites TASKS define (None: every suite of the run); the gates of
    other suites were not re-graded (a re-score of some TASKS): neither gone nor
    changed, nor said."""
    import json

    from ce_runtime.report.gates import gate_changes, gate_key

    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
            recorded = json.load(fh).get("suite_gates")
    except (OSError, ValueError, AttributeError):
        return [], {}
    if not isinstance(recorded, list):
        return [], {}

    def suite(gate) -> tuple | None:
        return (gate.get("variant"), gate.get("suite_id")) if isinstance(gate, dict) else None

    left_out = {k: v for k, v in (left_out or {}).items() if asked is None or k in asked}
    partial = set(left_out)
    if unknown:  # which trials are missing is not known: no suite is known whole
        partial |= suites | {suite(g) for g in recorded
                             if asked is None or suite(g) in asked}
    whole = suites - partial

    out = gate_changes([g for g in recorded if suite(g) in whole],
                       [g for g in now if suite(g) in whole])
    names = {}  # the gates of the suites not compared, the run's first, then new ones
    for g in [*recorded, *now]:
        if suite(g) in partial and (k := gate_key(g)) is not None:
            names.setdefault(k, suite(g))
    whys = {}
    for k, of in names.items():
        out.append(f"  suite gate {'/'.join(k)}: not compared: not every trial of its suite "
                   f"was re-scored ({not_regraded(left_out.get(of, []), unknown)})")
        whys['/'.join(k)] = list(dict.fromkeys(
            [why for why, _ in left_out.get(of, [])]
            + (["missing from the run"] if unknown else [])))
    return out, whys


def gate_reasons(reasons: list[str], not_compared: dict[str, list[str]]) -> list[str]:
    """The results' `exit_reasons` as a re-score says them. A gate of a suite not
    re-graded whole (`gate_changes_of`) failed over the trials that were ('suite gate X
    failed: recall.bug 0.000 < 1', its one `bug` row missing): a verdict of no suite.
    Those are said once instead, where the first was: not evaluated, and why."""
    kept, unsaid, at = [], [], None
    for reason in reasons:
        name = next((n for n in not_compared if reason.startswith(f"suite gate {n} failed:")),
                    None)
        if name is None:
            kept.append(reason)
        else:
            at = len(kept) if at is None else at
            unsaid.append(name)
    if at is None:
        return kept
    whys = "; ".join(dict.fromkeys(why for n in unsaid for why in not_compared[n]))
    one = len(unsaid) == 1
    kept.insert(at, f"suite gate{'' if one else 's'} {', '.join(unsaid)} not evaluated "
                f"(not compared, above): not every trial of "
                f"{'its suite' if one else 'their suites'} was re-scored ({whys})")
    return kept


def not_regraded(trials: list[tuple[str, str]], unknown: str | None = None) -> str:
    """The trials of a suite left out of a re-score, grouped by why ('missing from the
    run: default/triage/crash/00; damaged archive: ...'), then `unknown`."""
    by_why: dict[str, list[str]] = {}
    for why, trial in trials:
        by_why.setdefault(why, []).append(trial)
    parts = [f"{why}: {shown(sorted(ids))}" for why, ids in by_why.items()]
    return "; ".join(parts + ([unknown] if unknown else []))


def suite_of_trial(trial_id: str) -> tuple[str, str] | None:
    """(variant, suite id) of a dataset trial, from its id VARIANT/SUITE/ROW/NN (variant,
    task and row ids hold no `/`; a task without a dataset is VARIANT/TASK/NN)."""
    parts = trial_id.split("/")
    return (parts[0], parts[1]) if len(parts) == 4 else None


def lost_trials(run_dir: str, dirs: list[str]) -> tuple[list[str], int]:
    """The trials the run's results hold whose directory (or its task.json) is gone: their
    ids (when trials.parquet can say them) and how many. run.json counts the run's
    trials: only when the trial directories found are not as many is trials.parquet
    read (it needs Polars) for the ids. A trial of the run's directory that its results
    leave out (`ce run --resume` keeps a trial its tasks no longer have) is re-scored
    as found."""
    import json

    try:
        with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
            counted = json.load(fh).get("trials")
    except (OSError, ValueError, AttributeError):
        return [], 0
    if not isinstance(counted, int) or isinstance(counted, bool) or counted == len(dirs):
        return [], 0
    try:
        import polars as pl

        ids = pl.read_parquet(os.path.join(run_dir, "trials.parquet"),
                              columns=["trial_id"])["trial_id"].to_list()
    except Exception:  # no (readable) trials.parquet: the count says what it can
        return [], max(counted - len(dirs), 0)
    found = {os.path.relpath(d, run_dir).replace(os.sep, "/") for d in dirs}
    lost = sorted(i for i in ids if isinstance(i, str) and i not in found)
    return lost, len(lost)


def run_json_problem(run_dir: str) -> str | None:
    """What is wrong with the run's run.json (`PATH: damaged archive: why`), when it is
    there and cannot be read: run_state and lost_trials then know nothing of the run."""
    import json

    path = os.path.join(run_dir, "run.json")
    if not os.path.lexists(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        return f"{path}: damaged archive: {exc.strerror or exc}"
    except ValueError as exc:
        return f"{path}: damaged archive: not valid JSON ({exc})"
    return None if isinstance(doc, dict) else f"{path}: damaged archive: not a JSON object"


def why_lost(run_dir: str) -> str:
    """Why trials the run counts have no task.json: a run whose `ce run` never ended
    (run.json still says running: killed; interrupted) did not finish them, else they
    were lost since (a directory deleted)."""
    from ce_runtime.store.runs_root import read_run_json

    status = (read_run_json(run_dir) or {}).get("status")
    if status in ("running", "interrupted"):
        how = "was killed" if status == "running" else "was interrupted"
        return f"never finished (its `ce run` {how} before them; run.json counts them)"
    return "are missing (their directory or its task.json is gone; run.json and " \
        "trials.parquet count them)"


def ran_in(run_dir: str) -> str:
    """The run the trials of `run_dir` ran in, the one `ce run --resume` continues: the
    run itself, or for a re-score (run.json's `rescored_from`) the run it re-scored,
    followed back through re-scores of re-scores. A run.json that cannot be read ends
    the walk where it is."""
    from ce_runtime.store.runs_root import read_run_json

    here, seen = os.path.abspath(run_dir), set()
    while here not in seen:
        seen.add(here)
        args = (read_run_json(here) or {}).get("args")
        source = args.get("rescored_from") if isinstance(args, dict) else None
        if not isinstance(source, str) or not source:
            break
        here = os.path.abspath(os.path.join(here, source))
    return here


def shown(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def left_out(lost: int, damaged: int, source: str, rescore: bool = False) -> str:
    """Why a re-score is not the whole run: its trials missing (a resume of the run runs
    them again) and damaged (a resume takes them for done: not said of them). `rescore`:
    the run re-scored is a re-score of `source`, which still has them (no resume runs a
    trial it has: a re-score of it grades them)."""
    again = f" (`ce rescore {source}` re-scores them from the run they ran in)" \
        if rescore else f" (`ce run --resume {source}` runs them again)"
    if lost and damaged:
        return f"{lost} trial(s) of the run are missing{again} and {damaged} damaged, " \
            "not re-scored"
    if lost:
        return f"{lost} trial(s) of the run are missing, not re-scored{again}"
    return f"{damaged} trial(s) of the run are damaged, not re-scored"


RunState = tuple  # (status, planned trials, gate[, why the trials left out were]): _write


def run_state(run_dir: str) -> tuple[str, int | None, float | None]:
    """The run's status, planned trials (run.json) and `--min-pass-rate` gate: a run cut
    short stays so when re-scored, and is gated as it was. A run.json that cannot be read
    (a run still going, a crash) says nothing."""
    from ce_runtime.store.runs_root import read_run_json

    data = read_run_json(run_dir)
    if data is None:
        return "complete", None, None
    gate = (data.get("args") or {}).get("min_pass_rate") \
        if isinstance(data.get("args"), dict) else None
    if not isinstance(gate, int | float) or isinstance(gate, bool) or not 0 <= gate <= 1:
        gate = None
    status = data.get("status")
    planned = data.get("trials_planned")
    if status not in ("interrupted", "incomplete") or not isinstance(planned, int) \
            or isinstance(planned, bool):
        return "complete", None, gate
    return status, planned, gate


def write_results(out: str, records, run_dir: str, plans: dict, name: str, worker=None,
                  state: RunState = ("complete", None, None), ran: str | None = None
                  ) -> dict:
    """The rest of the results' run directory (the trials are written as they are
    graded): the plans graded with, the definitions, the objects (a link to the run's),
    run.json and the reports (by the report worker, or here without one). `ce explain`
    and `ce rescore` work on it. `name`: where the directory ends up (its run id);
    `state`: the re-scored run's status, planned trials and gate (`run_state`), and
    why trials of it were not re-scored when some were not (missing or damaged);
    `ran`: the run its trials ran in (`ran_in`). Returns the run summary (its `exit_code` and `exit_reasons`)."""
    from ce_runtime.store.record import as_records

    link_run_parts(out, run_dir, plans)
    records = as_records(records)  # typed once, not once per report
    run_id, source = os.path.basename(os.path.abspath(name)), os.path.abspath(run_dir)
    summary = None
    if worker is not None:
        from ce_runtime.store.report_job import RescoreReports

        summary = worker.write_reports(RescoreReports(out, run_id, source, records,
                                                      *state, ran_in=ran))
    if summary is None:
        from ce_runtime.report.run_end import write_rescore_reports

        summary = write_rescore_reports(out, records, run_id, source, *state, ran_in=ran)
    return summary


def link_run_parts(out: str, run_dir: str, plans: dict) -> None:
    from ce_lang.api import plan_to_json, stdlib_digest, stdlib_texts
    from ce_runtime.store.archive import write_definitions
    from ce_runtime.store.atomic import write_json_atomic

    objects = os.path.join(out, "objects")
    source = os.path.realpath(os.path.join(run_dir, "objects"))
    here, run = os.path.realpath(out), os.path.realpath(run_dir)
    if os.path.lexists(objects):
        pass
    elif here.startswith(run + os.sep):  # RUN/rescored/<time>: moves with the run
        os.symlink(os.path.relpath(source, here), objects)
    else:  # --out elsewhere: objects of its own (hard links where it can), since a link
        link_tree(source, objects)  # into the run broke when the run was moved or deleted
    os.makedirs(os.path.join(out, "plans"), exist_ok=True)
    for name in os.listdir(os.path.join(run_dir, "plans")):
        link_or_copy(os.path.join(run_dir, "plans", name), os.path.join(out, "plans", name))
    # the task files the archived plans read, and the template directories they copied
    for part in ("task_files", "templates"):
        kept = os.path.join(run_dir, part)
        if os.path.isdir(kept):
            os.makedirs(os.path.join(out, part), exist_ok=True)
            for name in os.listdir(kept):
                link_or_copy(os.path.join(kept, name), os.path.join(out, part, name))
    for digest, plan in plans.items():
        path = os.path.join(out, "plans", f"{digest}.json")
        if not os.path.exists(path):
            write_json_atomic(path, {"hash": digest, "plan": plan_to_json(plan)})
    defs = os.path.join(run_dir, "definitions")
    if os.path.isdir(defs):
        shutil.copytree(defs, os.path.join(out, "definitions"), dirs_exist_ok=True)
    write_definitions(out, stdlib_digest(), stdlib_texts())  # for --today and new plans


def link_tree(src: str, dst: str) -> None:
    """Every file under `src` at the same place under `dst`, by `link_or_copy`."""
    for folder, _, names in os.walk(src):
        into = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(into, exist_ok=True)
        for name in names:
            link_or_copy(os.path.join(folder, name), os.path.join(into, name))


def link_or_copy(src: str, dst: str) -> None:
    if os.path.exists(dst):
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
