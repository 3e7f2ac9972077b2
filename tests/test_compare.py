"""`ce compare` end to end: two real runs made with the real CLI (`agent: {type: none}`
tasks whose outcome the test controls through a file the pre_run step reads), compared
through the real CLI in subprocesses.

Between run A and run B the suite changes so that:
- `flip-down` passes in A and fails in B (its gating criterion breaks): a regression;
- `flip-up` fails in A and passes in B: an improvement;
- `steady` passes in both, but its weight-0 (informational) criterion breaks in B: a
  criterion flip in a trial whose outcome did not change;
- `gone` is only in A, `new` only in B.
Every task runs 2 repeats.

`CE_UPDATE_GOLDENS=1 pytest tests/test_compare.py` rewrites tests/golden/compare_*; read
the diff: it is what a person sees after `ce compare`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.goldens import match_golden

CE = [sys.executable, "-m", "ce_runtime.cli"]
GOLDEN = Path(__file__).parent / "golden"


TASK = """\
task_id: {task_id}
description: compare fixture
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "echo {value} > value.txt && echo {note} > note.txt"
success_criteria:
  - type: run_command
    command: grep -qx 1 value.txt
    description: value.txt holds 1
  - type: file_exists
    path: value.txt
    description: value.txt exists
  - type: run_command
    command: grep -qx ok note.txt
    description: the note is ok (informational)
    weight: 0
"""


def write_suite(root: Path, values: dict[str, tuple[int, str]]) -> Path:
    suite = root / "suite"
    if suite.exists():
        for f in suite.iterdir():
            f.unlink()
    suite.mkdir(parents=True, exist_ok=True)
    for task_id, (value, note) in values.items():
        (suite / f"{task_id}.yaml").write_text(TASK.format(task_id=task_id, value=value,
                                                           note=note))
    return suite


def ce(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NO_COLOR": "1"})


def make_run(root: Path, values: dict[str, tuple[int, str]], name: str) -> Path:
    suite = write_suite(root, values)
    res = ce("run", str(suite), "--repeats", "2", "--runs-root", str(root / "runs"), cwd=root)
    assert res.returncode in (0, 1), res.stderr
    latest = (root / "runs" / "latest").resolve()
    target = root / name
    latest.rename(target)
    return target


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compare")
    a = make_run(root, {"flip-down": (1, "ok"), "flip-up": (0, "ok"), "steady": (1, "ok"),
                        "gone": (1, "ok")}, "run-a")
    b = make_run(root, {"flip-down": (0, "ok"), "flip-up": (1, "ok"), "steady": (1, "bad"),
                        "new": (1, "ok")}, "run-b")
    return root, a, b


def normalise(text: str, root: Path, a: Path, b: Path) -> str:
    ids = {json.loads((p / "run.json").read_text())["run_id"]: n
           for p, n in ((a, "RUN_A"), (b, "RUN_B"))}
    for run_id, name in ids.items():
        text = text.replace(run_id, name)
    text = text.replace(str(root), "ROOT")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00)?", "TIME", text)
    return _wall_time(text)


def _wall_time(text: str) -> str:
    """The trials' wall time (the only measured usage of these agentless runs) as WALL:
    it differs from one run to the next."""
    if text.startswith("{"):
        doc = json.loads(text)
        for m in doc["usage"]["metrics"]:
            if m["metric"] == "duration_s":
                m.update({k: "WALL" for k in ("paired_a", "paired_b", "ratio")})
                m["a"].update(mean="WALL", median="WALL")
                m["b"].update(mean="WALL", median="WALL")
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    text = re.sub(r"wall time [^|]*\|", "wall time WALL |", text)
    return re.sub(r"\| Wall time \|[^|]*\|[^|]*\|[^|]*\|", "| Wall time | WALL | WALL | WALL |",
                  text)


def check_golden(name: str, text: str) -> None:
    match_golden(GOLDEN / name, text)


@pytest.mark.slow
def test_compare_md_golden_and_exit_1_on_a_flip(runs):
    root, a, b = runs
    res = ce("compare", str(a), str(b), cwd=root)
    assert res.returncode == 1, res.stderr
    assert "REGRESSED: 2 trial(s) passed in A and fail in B" in res.stderr
    check_golden("compare_regressed.md", normalise(res.stdout, root, a, b))


@pytest.mark.slow
def test_compare_json_golden(runs):
    root, a, b = runs
    res = ce("compare", str(a), str(b), "--format", "json", cwd=root)
    assert res.returncode == 1, res.stderr
    doc = json.loads(res.stdout)
    assert doc["regressed"] is True and doc["fail_on"] == "flips"
    assert [f["task_id"] for f in doc["regressions"]] == ["flip-down", "flip-down"]
    assert [c["criterion_id"] for c in doc["regressions"][0]["criteria"]] == ["c0"]
    assert [f["task_id"] for f in doc["improvements"]] == ["flip-up", "flip-up"]
    [steady0, steady1] = doc["criterion_changes"]
    assert steady1["trial_id"] == "default/steady/01"
    assert steady0["trial_id"] == "default/steady/00" and steady0["broken"] is True
    assert steady0["criterion"]["gating"] is False
    assert doc["only_a"] == ["default/gone"] and doc["only_b"] == ["default/new"]
    # shared tasks: flip-down 1 -> 0, flip-up 0 -> 1, steady 1 -> 1
    assert doc["pass_rate"]["n_tasks"] == 3 and doc["pass_rate"]["mean_diff"] == 0.0
    assert doc["pass_rate"]["p_value"] == 1.0
    check_golden("compare_regressed.json", normalise(res.stdout, root, a, b))


@pytest.mark.slow
def test_compare_exit_0_when_nothing_regressed(runs):
    root, a, b = runs
    # a run against itself: nothing moves
    same = ce("compare", str(a), str(a), cwd=root)
    assert same.returncode == 0, same.stderr
    assert "ce compare: no regression" in same.stderr
    # a flip, but the paired drop (one task of three) is not significant
    sig = ce("compare", str(a), str(b), "--fail-on", "significant", cwd=root)
    assert sig.returncode == 0, sig.stderr
    assert "not gated: --fail-on significant" in sig.stderr
    never = ce("compare", str(a), str(b), "--fail-on", "never", "-f", "html", "-o",
               str(root / "cmp.html"), cwd=root)
    assert never.returncode == 0, never.stderr
    page = (root / "cmp.html").read_text()
    assert page.startswith("<!doctype html>") and "<style>" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "default/flip-down/00" in page


@pytest.mark.slow
def test_compare_usage_errors_exit_2_with_one_line(runs):
    root, a, _ = runs
    missing = ce("compare", str(a), str(root / "nope"), cwd=root)
    assert missing.returncode == 2
    assert missing.stderr.strip() == f"ce compare: {root / 'nope'}: no such file or directory"
    not_run = ce("compare", str(root / "suite"), str(a), cwd=root)
    assert not_run.returncode == 2
    assert len(not_run.stderr.strip().splitlines()) == 1
    assert f"{root / 'suite'}: not a run directory" in not_run.stderr
    assert "Traceback" not in not_run.stderr
    bad_option = ce("compare", str(a), str(a), "--fail-on", "sometimes", cwd=root)
    assert bad_option.returncode == 2


def test_a_nan_alpha_is_a_usage_error(tmp_path):
    # NaN passed click's (0, 1) range, and `p < nan` is never true: no drop was ever
    # significant, so --fail-on significant could not fail
    proc = ce("compare", "a", "b", "--alpha", "nan", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--alpha" in proc.stderr and "not a number" in proc.stderr


def test_a_damaged_run_json_is_not_a_clean_comparison(runs, tmp_path):
    """A run.json that is there but unreadable (cut, `[]`) is a damaged archive, exit 1
    naming it, as `ce report` exits for it: it was read as no run.json, and the gate said
    "no regression", exit 0 (then exit 2, which says "not a run directory")."""
    import shutil

    root, a, _ = runs
    for content in ("{not json", "[]"):
        bad = tmp_path / f"bad{len(content)}"
        shutil.copytree(a, bad, symlinks=True)
        (bad / "run.json").write_text(content)
        res = ce("compare", str(a), str(bad), cwd=root)
        assert res.returncode == 1, res.stderr
        assert f"{bad / 'run.json'}" in res.stderr and "damaged archive" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert ce("report", str(bad), cwd=root).returncode == 1


# ---------------------------------------------------------------------------- cut short

GATE = """\
task_id: gate
description: compare fixture, cut short
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "{sleep}echo 1 > value.txt"
success_criteria:
  - type: run_command
    command: grep -qx 1 value.txt
    description: value.txt holds 1
"""


@pytest.fixture(scope="module")
def cut_short(tmp_path_factory):
    """(root, A: a whole run of 3 trials, B: the same suite SIGTERMed once its first
    trial was done: run.json `interrupted`, 1 of 3 planned trials)."""
    import glob
    import signal
    import time

    root = tmp_path_factory.mktemp("cut")
    suite = root / "suite"
    suite.mkdir()
    (suite / "gate.yaml").write_text(GATE.format(sleep=""))
    a = ce("run", str(suite), "--repeats", "3", "-j", "1", "-q", "--run-dir", "run-a",
           cwd=root)
    assert a.returncode == 0, a.stderr
    # every trial after the first waits: the signal comes while one runs
    marker = root / "marker"
    (suite / "gate.yaml").write_text(GATE.format(
        sleep=f"if [ -e {marker} ]; then sleep 60; fi; touch {marker}; "))
    proc = subprocess.Popen([*CE, "run", str(suite), "--repeats", "3", "-j", "1", "-q",
                             "--run-dir", "run-b"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "NO_COLOR": "1"})
    deadline = time.monotonic() + 120
    while not glob.glob(str(root / "run-b" / "default" / "gate" / "*" / "task.json")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    run_b = json.loads((root / "run-b" / "run.json").read_text())
    assert (run_b["status"], run_b["trials"], run_b["trials_planned"]) == \
        ("interrupted", 1, 3), err
    return root, root / "run-a", root / "run-b"


@pytest.mark.slow
def test_an_interrupted_b_fails_the_gate_and_every_format_says_so(cut_short):
    """B SIGTERMed after 1 of its 3 trials (it passed, as in A): that was "✅ no
    regression", exit 0, B's status nowhere and its missing trials on stderr only."""
    root, a, b = cut_short
    why = "B (the candidate) did not finish: interrupted, 1 of 3 planned trial(s) ran"
    lacks = "2 trial(s) of A have no match in B (a task both ran: not compared)"
    res = ce("compare", str(a), str(b), cwd=root)
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[-1] == f"ce compare: INCOMPLETE: {why}; {lacks}"
    assert f"| Verdict | ❌ INCOMPLETE: {why}; {lacks} |" in res.stdout
    assert ("| Run status | ⚠️ A complete; B interrupted, 1 of 3 planned trial(s) ran |"
            in res.stdout)
    assert ("| Trials | A 3, B 1; 1 matched (same variant, task, row and repeat); 2 of A's "
            "without a match in B (a task both ran) |") in res.stdout
    assert "## Trials only in A, of a task both ran (no match in B; not compared)" \
        in res.stdout

    doc = json.loads(ce("compare", str(a), str(b), "-f", "json", cwd=root).stdout)
    assert (doc["a"]["status"], doc["a"]["trials_planned"]) == ("complete", 3)
    assert (doc["b"]["status"], doc["b"]["trials_planned"]) == ("interrupted", 3)
    assert doc["incomplete"] is True and doc["regressed"] is True
    assert doc["reasons"] == [why, lacks] and len(doc["unmatched_a"]) == 2

    page = root / "cut.html"
    html_res = ce("compare", str(a), str(b), "-f", "html", "-o", str(page), cwd=root)
    assert html_res.returncode == 1, html_res.stderr
    assert ('<tr><th>Run status</th><td class="bad">⚠ A complete; B interrupted, 1 of 3 '
            "planned trial(s) ran</td></tr>") in page.read_text()

    sig = ce("compare", str(a), str(b), "--fail-on", "significant", cwd=root)
    assert sig.returncode == 1 and "INCOMPLETE" in sig.stderr, sig.stderr
    # the opt-out: reported, not gated
    never = ce("compare", str(a), str(b), "--fail-on", "never", cwd=root)
    assert never.returncode == 0, never.stderr
    assert (f"ce compare: no regression: INCOMPLETE, not gated (--fail-on never): {why}, "
            f"and {lacks}") in never.stderr
    assert "| Run status | ⚠️ A complete; B interrupted" in never.stdout


@pytest.mark.slow
def test_an_interrupted_a_is_said_not_gated(cut_short):
    root, a, b = cut_short
    res = ce("compare", str(b), str(a), cwd=root)  # the baseline is the cut-short run
    assert res.returncode == 0, res.stderr
    line = ("no regression: A (the baseline) did not finish: interrupted, 1 of 3 planned "
            "trial(s) ran")
    assert res.stderr.splitlines()[-1] == f"ce compare: {line}"
    assert f"| Verdict | ✅ {line} |" in res.stdout
    assert ("| Run status | ⚠️ A interrupted, 1 of 3 planned trial(s) ran; B complete |"
            in res.stdout)
    # a whole run against itself says no status
    same = ce("compare", str(a), str(a), cwd=root)
    assert same.returncode == 0 and "Run status" not in same.stdout, same.stderr


@pytest.mark.slow
def test_a_damaged_or_missing_results_file_exits_1_as_ce_report_does(cut_short, tmp_path):
    """A damaged trials.parquet was exit 2 from `ce compare` (its help: "not a run
    directory") and exit 1 from `ce report`. A path that is no run stays 2."""
    import shutil

    root, a, _ = cut_short
    for name in ("trials.parquet", "results.parquet"):
        bad = tmp_path / name.split(".")[0]
        shutil.copytree(a, bad, symlinks=True)
        data = (bad / name).read_bytes()
        (bad / name).write_bytes(data[:len(data) // 2])  # cut short
        for args in ((str(a), str(bad)), (str(bad), str(a))):
            res = ce("compare", *args, cwd=root)
            assert res.returncode == 1, res.stderr
            assert res.stderr.startswith(f"ce compare: {bad / name}: damaged parquet ("), \
                res.stderr
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert ce("report", str(bad), cwd=root).returncode == 1
    # results.parquet gone: compared no criterion and passed; `ce report` refused it
    gone = tmp_path / "no_results"
    shutil.copytree(a, gone, symlinks=True)
    os.unlink(gone / "results.parquet")
    res = ce("compare", str(a), str(gone), cwd=root)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip() == (f"ce compare: {gone / 'results.parquet'}: missing (the "
                                  "run's criterion results)")
    assert ce("report", str(gone), cwd=root).returncode == 1
    # a run that wrote no results yet (run.json only: `ce run` at its start) is a run
    # directory, not a usage error
    started = tmp_path / "started"
    started.mkdir()
    (started / "run.json").write_text(json.dumps({"run_id": "x", "status": "running",
                                                  "trials": 3}))
    res = ce("compare", str(a), str(started), cwd=root)
    assert res.returncode == 1, res.stderr
    assert res.stderr.strip() == (f"ce compare: {started}: no trials.parquet (the run "
                                  "graded no trial yet; run.json status running)")
    assert ce("compare", str(a), str(tmp_path / "nope"), cwd=root).returncode == 2


@pytest.mark.slow
def test_a_b_stopped_before_any_trial_finished_is_compared_and_fails_the_gate(cut_short):
    """A run SIGTERMed in its first trial writes run.json (`interrupted`, 0 trials) and no
    parquet: `ce compare A B` was an error naming the missing trials.parquet, with no
    report and exit 1 even under `--fail-on never`, where README's INCOMPLETE B is a
    report, exit 1, and only reported under never. `ce report B` reads it already."""
    import signal
    import time

    root, a, _ = cut_short
    suite = root / "suite-c"
    suite.mkdir()
    started = root / "started-c"
    (suite / "gate.yaml").write_text(GATE.format(sleep=f"touch {started}; sleep 60; "))
    proc = subprocess.Popen([*CE, "run", str(suite), "--repeats", "3", "-q", "--run-dir",
                             "run-c"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    c = root / "run-c"
    run_c = json.loads((c / "run.json").read_text())
    assert (run_c["status"], run_c["trials"], run_c["trials_planned"]) == \
        ("interrupted", 0, 3), err
    assert not (c / "trials.parquet").exists()

    why = "B (the candidate) did not finish: interrupted, 0 of 3 planned trial(s) ran"
    res = ce("compare", str(a), str(c), cwd=root)
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[-1].endswith(why), res.stderr
    assert "| Run status | ⚠️ A complete; B interrupted, 0 of 3 planned trial(s) ran |" \
        in res.stdout
    assert "| Trials | A 3, B 0; 0 matched" in res.stdout
    doc = json.loads(ce("compare", str(a), str(c), "-f", "json", cwd=root).stdout)
    assert (doc["b"]["status"], doc["b"]["trials"], doc["b"]["trials_planned"]) == \
        ("interrupted", 0, 3)
    assert doc["incomplete"] is True and doc["regressed"] is True
    never = ce("compare", str(a), str(c), "--fail-on", "never", cwd=root)
    assert never.returncode == 0, never.stderr
    assert f"INCOMPLETE, not gated (--fail-on never): {why}" in never.stderr
    # as the baseline: said, and nothing of A to compare against
    swapped = ce("compare", str(c), str(a), cwd=root)
    assert "| Run status | ⚠️ A interrupted, 0 of 3 planned trial(s) ran; B complete |" \
        in swapped.stdout, swapped.stderr


# ---------------------------------------------------------------------------- in process


def _trials(run: str, outcomes: dict[str, list[bool]]):
    from ce_runtime.report.frames import trials_frame

    return trials_frame([
        {"trial_id": f"v/{t}/{r:02d}", "variant_id": "v", "task_id": t, "row_id": None,
         "repeat": r, "status": "SUCCESS" if ok else "FAILURE", "weighted_score": float(ok),
         "criteria": []}
        for t, oks in outcomes.items() for i, ok in enumerate(oks)
        for r in [i + (10 if run == "b" else 0)]])  # B's repeats never match A's


def _compare(a, b, alpha=0.05, status_a=None, status_b=None, planned=None):
    import polars as pl

    from ce_runtime.report.compare import RunSide, compare_frames

    empty = pl.DataFrame()

    def side(frame, status):
        return RunSide("p", "r", None, frame.height, 0, 0, None, None, None, status=status,
                       trials_planned=planned)

    return compare_frames(side(a, status_a), a, empty, side(b, status_b), b, empty,
                          alpha=alpha)


def test_runs_with_nothing_in_common_fail_the_gate():
    # a baseline run without -e (variant `default`) against a run with an experiment's
    # variants shares no trial and no task: that was "no regression", exit 0
    import polars as pl

    from ce_runtime.report.compare_render import verdict

    a = _trials("a", {"t1": [True], "t2": [False]})
    b = _trials("b", {"t1": [True]}).with_columns(variant_id=pl.lit("other"))
    c = _compare(a, b)
    assert c.matched_trials == 0 and c.pass_rate.n_tasks == 0 and c.nothing_compared
    assert c.regressed("flips") and c.regressed("significant") and not c.regressed("never")
    why = ("no trial or task of B is one of A's (same variant, task and row): nothing was "
           "compared")
    assert c.reasons("flips") == [why] and c.to_dict()["regressed"] is True
    assert verdict(c, "significant") == (True, f"NOT COMPARED: {why}")
    # paired tasks on unmatched repeats are compared (see the next test): not this
    assert not _compare(a, _trials("b", {"t1": [True]})).nothing_compared


def _dropped(tasks: list[str]):
    """(A, B): A one passing trial per task; B the same trial (matched, passing still) and
    one more repeat, failing: no flip, no trial of A lacking, each task -50 pp."""
    import polars as pl

    passing = _trials("a", {t: [True] for t in tasks})
    return passing, pl.concat([passing, _trials("b", {t: [False] for t in tasks})])


def test_a_significant_drop_without_a_matched_flip():
    # six tasks, each with a pass in A, the same pass and a failure in B: no flip, but
    # every paired difference is -0.5: sign-flip p = 2 / 2^6 = 0.03125 < 0.05
    tasks = [f"t{i}" for i in range(6)]
    c = _compare(*_dropped(tasks))
    assert c.matched_trials == 6 and not c.regressions and not c.incomplete
    assert c.pass_rate.p_value == 2 / 64 and c.pass_rate.mean_diff == -0.5
    assert c.significant_drop
    assert c.regressed("flips") and c.regressed("significant") and not c.regressed("never")
    assert c.reasons("significant") == [
        "pass rate dropped 50.0 pp over 6 paired task(s), p = 0.0312 < 0.05"]
    # five tasks are not enough: 2 / 32 = 0.0625
    c5 = _compare(*_dropped(tasks[:5]))
    assert c5.pass_rate.p_value == 2 / 32 and not c5.regressed("flips")
    assert _compare(*_dropped(tasks[:5]), alpha=0.1).regressed("significant")


def test_wilson_and_newcombe_by_hand():
    from ce_runtime.report.intervals import newcombe, wilson

    # Wilson for 2/2: z^2 = 3.8415; centre (1 + 0.9604) / 2.9207 = 0.6712,
    # half-width 1.96 * sqrt(3.8415 / 16) / 2.9207 = 0.3288 -> [0.3424, 1]
    low, high = wilson(2, 2)
    assert low == pytest.approx(0.3424, abs=1e-4) and high == 1.0
    assert wilson(0, 2) == pytest.approx((0.0, 1 - 0.3424), abs=1e-4)
    assert wilson(0, 0) is None
    # Newcombe for 0/2 - 2/2: d = -1, low = -1 - 0, high = -1 + sqrt(2 * 0.6576^2)
    lo, hi = newcombe(2, 2, 0, 2)
    assert lo == -1.0 and hi == pytest.approx(-1 + (2 * 0.6576 ** 2) ** 0.5, abs=1e-4)


def test_a_b_lacking_trials_of_a_is_incomplete_whatever_its_status():
    # B "complete" (a re-score without a lost trial, fewer --repeats) but with 1 of the
    # 3 repeats A has of t1: the 2 others are no evidence either way
    from ce_runtime.report.compare_render import verdict

    a = _trials("a", {"t1": [True, True, False], "t2": [True]})
    b = _trials("a", {"t1": [True], "t2": [True]})  # the same repeats: they match
    c = _compare(a, b, status_a="complete", status_b="complete")
    assert c.unmatched_a == ("v/t1/01", "v/t1/02") and not c.b.unfinished
    assert not c.regressions and not c.significant_drop and c.incomplete
    lacks = "2 trial(s) of A have no match in B (a task both ran: not compared)"
    assert c.regressed("flips") and c.regressed("significant") and not c.regressed("never")
    assert c.reasons("flips") == [lacks] and c.reasons("never") == []
    assert verdict(c, "flips") == (True, f"INCOMPLETE: {lacks}")
    assert verdict(c, "never") == (
        False, f"no regression: INCOMPLETE, not gated (--fail-on never): {lacks}")
    assert c.to_dict()["incomplete"] is True
    # B with trials A lacks (A's repeats not run) is no gap in the candidate
    swapped = _compare(b, a, status_a="complete", status_b="complete")
    assert swapped.unmatched_b and not swapped.incomplete and not swapped.regressed()


def test_a_b_that_did_not_finish_fails_the_gate_a_baseline_that_did_not_is_said():
    from ce_runtime.report.compare_render import render_md, verdict

    t = _trials("a", {"t1": [True]})
    for status in ("interrupted", "incomplete", "failed", "running"):
        c = _compare(t, t, status_a="complete", status_b=status, planned=4)
        assert c.matched_trials == 1 and not c.unmatched_a and c.incomplete
        state = status + (" (still going, or killed before its end)"
                          if status == "running" else "") + ", 1 of 4 planned trial(s) ran"
        assert c.b.state() == state
        why = f"B (the candidate) did not finish: {state}"
        assert c.regressed("significant") and not c.regressed("never")
        assert verdict(c, "flips") == (True, f"INCOMPLETE: {why}")
        assert f"| Run status | ⚠️ A complete; B {state} |" in render_md(c, "flips")
    # a regression too: REGRESSED leads, the cut-short B is still said
    c = _compare(t, _trials("a", {"t1": [False]}), status_b="interrupted", planned=4)
    assert verdict(c, "flips") == (True, "REGRESSED: 1 trial(s) passed in A and fail in B; "
                                         "B (the candidate) did not finish: interrupted, "
                                         "1 of 4 planned trial(s) ran")
    # the baseline cut short: said on the verdict line and in the report, not gated
    c = _compare(t, t, status_a="interrupted", status_b="complete", planned=4)
    assert not c.incomplete and not c.regressed("flips")
    assert verdict(c, "flips") == (False, "no regression: A (the baseline) did not "
                                          "finish: interrupted, 1 of 4 planned trial(s) ran")
    # a run.json without a status (an older ce's) is not taken for a cut-short run, and
    # a report of two finished runs has no "Run status"
    for status in (None, "complete"):
        c = _compare(t, t, status_a=status, status_b=status)
        assert not c.incomplete and not c.regressed("flips")
        assert "Run status" not in render_md(c, "flips")


def test_a_criterion_is_matched_only_with_the_same_one_not_its_index():
    # a criterion inserted first in B's task shifts the ids: B's c0 is another criterion
    # than A's c0, and the report said "c0 b exists: passed -> failed" and "c1 a exists:
    # failed -> passed" of criteria that never flipped
    from ce_runtime.report.compare import RunSide, compare_frames
    from ce_runtime.report.frames import results_frame, trials_frame

    def crit(cid, ctype, desc, ok):
        return {"id": cid, "type": ctype, "description": desc, "score": float(ok),
                "pass_threshold": 0.9, "passed": ok, "weight": 1.0, "gating": True}

    def rec(criteria):
        return {"trial_id": "v/t/00", "variant_id": "v", "task_id": "t", "row_id": None,
                "repeat": 0, "status": "FAILURE", "weighted_score": 0.5,
                "criteria": criteria}

    a = rec([crit("c0", "file_exists", "a exists", True),
             crit("c1", "file_contains", "says bye", False)])
    b = rec([crit("c0", "file_exists", "b exists", False),
             crit("c1", "file_exists", "a exists", True),
             crit("c2", "file_contains", "says bye", False)])
    side = RunSide("p", "r", None, 1, 0, 0, None, None, None)
    c = compare_frames(side, trials_frame([a]), results_frame([a]),
                       side, trials_frame([b]), results_frame([b]))
    assert c.criterion_changes == ()
    # the same criterion under its id still flips
    b2 = rec([crit("c0", "file_exists", "a exists", False),
              crit("c1", "file_contains", "says bye", False)])
    c = compare_frames(side, trials_frame([a]), results_frame([a]),
                       side, trials_frame([b2]), results_frame([b2]))
    assert [(x.criterion.criterion_id, x.broken) for x in c.criterion_changes] == \
        [("c0", True)]


def test_a_criterion_that_moved_or_was_reworded_still_flips_as_rescore_pairs_it():
    # t: c0 removed from B's task, so A's c1 is B's c0 (it moved); u: c1's description
    # edited. Paired by id, type and description, each was "removed" and "added": t's
    # regression named no criterion, u's flip was not reported at all
    from ce_runtime.report.compare import RunSide, compare_frames
    from ce_runtime.report.compare_render import render_md
    from ce_runtime.report.frames import results_frame, trials_frame

    def crit(cid, ctype, desc, ok, weight=1.0):
        return {"id": cid, "type": ctype, "description": desc, "score": float(ok),
                "pass_threshold": 0.9, "passed": ok, "weight": weight, "gating": weight > 0}

    def rec(trial, ok, criteria):
        return {"trial_id": f"v/{trial}/00", "variant_id": "v", "task_id": trial,
                "row_id": None, "repeat": 0, "status": "SUCCESS" if ok else "FAILURE",
                "weighted_score": float(ok), "criteria": criteria}

    a = [rec("t", True, [crit("c0", "file_exists", "a exists", True),
                         crit("c1", "file_contains", "says bye", True)]),
         rec("u", True, [crit("c0", "file_exists", "a exists", True),
                         crit("c1", "run_command", "runs", False, 0.0)])]
    b = [rec("t", False, [crit("c0", "file_contains", "says bye", False)]),
         rec("u", True, [crit("c0", "file_exists", "a exists", True),
                         crit("c1", "run_command", "runs at all", True, 0.0)])]
    side = RunSide("p", "r", None, 2, 0, 0, None, None, None)
    c = compare_frames(side, trials_frame(a), results_frame(a),
                       side, trials_frame(b), results_frame(b))
    [flip] = c.regressions
    assert [(x.criterion_id, x.criterion_id_a, x.type) for x in flip.criteria] == \
        [("c0", "c1", "file_contains")]
    assert [(ch.trial_id, ch.criterion.criterion_id, ch.criterion.criterion_id_a,
             ch.criterion.description, ch.broken) for ch in c.criterion_changes] == \
        [("v/u/00", "c1", None, "runs at all", False)]
    md = render_md(c, "flips")
    assert "| v/t/00 | SUCCESS → FAILURE | 1.00 → 0.00 | c0 file_contains (c1 in A) |" in md
    assert "| v/u/00 | c1 run_command: runs at all | no | no → yes | 0.00 → 1.00 |" in md
    assert c.to_dict()["regressions"][0]["criteria"][0]["criterion_id_a"] == "c1"


def test_markdown_cells_show_the_runs_text_escaped_as_report_md_does():
    # a description with a tag, a link and an escape sequence went into the markdown as
    # written: rendered on a CI job's summary page, acted on by a terminal
    from ce_runtime.report.compare import RunSide, compare_frames
    from ce_runtime.report.compare_render import render_md
    from ce_runtime.report.frames import results_frame, trials_frame

    desc = "<img src=x onerror=alert(1)> see [here](https://evil.example) \x1b[2J\u202e|"

    def rec(ok):
        return {"trial_id": "v/t/00", "variant_id": "v", "task_id": "t", "row_id": None,
                "repeat": 0, "status": "SUCCESS", "weighted_score": 1.0,
                "criteria": [{"id": "c0", "type": "run_command", "description": desc,
                              "score": float(ok), "pass_threshold": 0.9, "passed": ok,
                              "weight": 0.0, "gating": False}]}

    side = RunSide("p", "r", None, 1, 0, 0, None, None, None)
    c = compare_frames(side, trials_frame([rec(True)]), results_frame([rec(True)]),
                       side, trials_frame([rec(False)]), results_frame([rec(False)]))
    md = render_md(c, "flips")
    assert ("| v/t/00 | c0 run_command: &lt;img src=x onerror=alert(1)> see "
            "[here]\\(https://evil.example) \\x1b[2J\\u202e\\| | no | yes → no |") in md
    assert "<img" not in md and "](" not in md and "\x1b" not in md
    assert "sign-flip p < 0.05" in md  # a `<` that opens no tag stays as it is


# ---------------------------------------------------------------------------- suite gates

LABELS = """\
task_id: labels
description: compare fixture, a classification suite whose answers the run sets
initial_prompt: "Label: ${{row.text}}"
dataset:
  rows:
    - {{id: r1, text: crash, label: bug, answer: bug}}
    - {{id: r2, text: dark mode, label: feature, answer: {r2}}}
    - {{id: r3, text: how to install, label: question, answer: {r3}}}
    - {{id: r4, text: segfault, label: bug, answer: bug}}
agent: {{type: claude-code}}
reference:
  solve:
    - {{write: label.txt, content: "${{row.answer}}"}}
sandbox: {{driver: tempdir, python: null}}
success_criteria:
  - type: classification_match
    path: label.txt
    expected_label: "${{row.label}}"
    allowed_labels: [bug, feature, question]
    description: the issue is labelled
    pass_threshold: 0
    suite_thresholds: {{accuracy: 0.75}}
"""


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """(root, A, B): the oracle answers each row's `answer`: A all four right (accuracy
    1.0), B two wrong (0.5, below the gate's 0.75). `pass_threshold: 0`: every trial
    succeeds in both, so the gate is the only thing that moved."""
    root = tmp_path_factory.mktemp("gates")
    for name, (r2, r3) in (("a", ("feature", "question")), ("b", ("bug", "bug"))):
        suite = root / f"suite-{name}"
        suite.mkdir()
        (suite / "labels.yaml").write_text(LABELS.format(r2=r2, r3=r3))
        res = ce("run", str(suite), "--agent", "oracle", "-q", "--run-dir", f"run-{name}",
                 cwd=root)
        assert res.returncode == (0 if name == "a" else 1), res.stderr
    return root, root / "run-a", root / "run-b"


GATE_FAILED = ("1 suite gate(s) passed in A and fail in B: default/labels/c0 "
               "(accuracy 0.500 < 0.75)")


@pytest.mark.slow
def test_a_suite_gate_that_fails_in_b_is_a_regression_in_every_format(labelled):
    """A dataset's gate (accuracy >= 0.75) passed in A and fails in B, every trial a
    success in both: `ce compare` said "no regression", exit 0, with no accuracy or F1
    anywhere and no gate."""
    root, a, b = labelled
    res = ce("compare", str(a), str(b), cwd=root)
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines()[-1] == f"ce compare: REGRESSED: {GATE_FAILED}"
    assert f"| Verdict | ❌ REGRESSED: {GATE_FAILED} |" in res.stdout
    assert "| Flips | 0 trial(s) pass → fail, 0 fail → pass; 0 other criterion flip(s) |" \
        in res.stdout
    assert "| Suite gates | 1 in both runs: 1 passed → failed, 0 failed → passed |" \
        in res.stdout
    section = res.stdout.split("## Suite gates", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    assert rows == [
        "| default/labels/c0 classification_match | passed → failed ✗ | accuracy | 1.000 | "
        "0.500 | -0.500 | 0.75 ✗ |",
        "|  |  | macro_f1 | 1.000 | 0.222 | -0.778 | — |",
        "|  |  | weighted_f1 | 1.000 | 0.333 | -0.667 | — |",
        "|  |  | micro_f1 | 1.000 | 0.500 | -0.500 | — |"]
    doc = json.loads(ce("compare", str(a), str(b), "-f", "json", cwd=root).stdout)
    assert doc["regressed"] is True and doc["reasons"] == [GATE_FAILED]
    [gate] = doc["gates"]
    assert (gate["variant"], gate["suite_id"], gate["criterion"], gate["verdict_a"],
            gate["verdict_b"], gate["regressed"]) == (
        "default", "labels", "c0", "passed", "failed", True)
    assert gate["metrics"][0] == {"metric": "accuracy", "a": 1.0, "b": 0.5, "diff": -0.5,
                                  "minimum": 0.75, "failed_b": True}
    page = ce("compare", str(a), str(b), "-f", "html", cwd=root).stdout
    assert "<h2>Suite gates (dataset suite_thresholds" in page
    assert "<td>passed → failed ✗</td><td>accuracy</td><td>1.000</td><td>0.500</td>" \
        "<td>-0.500</td><td>0.75 ✗</td>" in page
    # the gate is the suite's own minimum: a regression under `significant` too ...
    sig = ce("compare", str(a), str(b), "--fail-on", "significant", cwd=root)
    assert sig.returncode == 1 and GATE_FAILED in sig.stderr
    # ... not under `never`, which still says it
    never = ce("compare", str(a), str(b), "--fail-on", "never", cwd=root)
    assert never.returncode == 0, never.stderr
    assert "1 suite gate(s) passed in A and fail in B (not gated: --fail-on never)" \
        in never.stderr
    # the other way round, the gate is fixed: no regression
    back = ce("compare", str(b), str(a), cwd=root)
    assert back.returncode == 0, back.stderr
    assert back.stderr.splitlines()[-1] == "ce compare: no regression: 1 suite gate(s) fixed"


def test_suite_gates_are_matched_by_variant_suite_and_criterion():
    """Only a gate both runs have can regress: one only in A (a suite B did not run) or
    only in B is listed; a dataset criterion without thresholds shows its metrics and
    decides nothing."""
    from ce_runtime.report.gates import compare_gates

    def gate(suite, passed, thresholds, **metrics):
        return {"variant": "v", "suite_id": suite, "criterion": "c0", "kind": "score",
                "criterion_type": "run_command", "metrics": metrics, "passed": passed,
                "thresholds": thresholds, "failed": [] if passed else list(thresholds)}

    a = [gate("kept", True, {"pass_rate": 0.8}, pass_rate=0.9, mean_score=0.9),
         gate("gone", True, {"pass_rate": 0.8}, pass_rate=1.0, mean_score=1.0),
         gate("free", True, {}, pass_rate=1.0, mean_score=1.0)]
    b = [gate("new", False, {"mean": 0.5}, pass_rate=0.0, mean_score=0.0, mean=0.0),
         gate("free", True, {}, pass_rate=0.0, mean_score=0.0),
         gate("kept", False, {"pass_rate": 0.95}, pass_rate=0.9, mean_score=0.9)]
    by = {g.suite_id: g for g in compare_gates(a, b)}
    assert list(by) == ["new", "free", "kept", "gone"]  # B's order, then A's own
    assert [(s, g.verdict_a, g.verdict_b, g.regressed) for s, g in by.items()] == [
        ("new", None, "failed", False), ("free", "no thresholds", "no thresholds", False),
        ("kept", "passed", "failed", True), ("gone", "passed", None, False)]
    # B raised the minimum: the same pass rate fails it, B's minimum shown
    kept = {m.metric: m for m in by["kept"].metrics}
    assert list(kept) == ["pass_rate", "mean_score"]
    assert (kept["pass_rate"].diff, kept["pass_rate"].minimum, kept["pass_rate"].failed_b) \
        == (0.0, 0.95, True)
    assert [m.metric for m in by["new"].metrics] == ["pass_rate", "mean_score", "mean"]
    assert by["gone"].metrics[0].minimum == 0.8 and by["gone"].metrics[0].b is None
    assert compare_gates([{"variant": 1}, "junk"], None) == []  # a damaged run.json


ERRORING = """\
task_id: {task_id}
description: compare fixture whose set-up can fail
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "exit {setup}"
    fail_on_error: true
  - command: "echo {value} > value.txt"
success_criteria:
  - type: run_command
    command: grep -qx 1 value.txt
    description: value.txt holds 1
  - type: file_exists
    path: value.txt
    description: value.txt exists
"""


def test_trials_that_error_without_a_score_in_b_are_said_not_taken_for_a_better_score(
        tmp_path):
    """B's `broken` task ERRORs in its set-up (no score) where A's failed with 0.50: the
    report said B's mean score 1.00 against A's 0.75 (over the trials with a score, not
    said), "2 of 2 shared task(s) unchanged", and no ERROR anywhere."""
    runs = {}
    for name, setup in (("a", 0), ("b", 1)):
        suite = tmp_path / f"suite-{name}"
        suite.mkdir()
        for task_id, value, fails in (("fine", 1, 0), ("broken", 0, setup)):
            (suite / f"{task_id}.yaml").write_text(ERRORING.format(
                task_id=task_id, value=value, setup=fails))
        res = ce("run", str(suite), "--repeats", "2", "--run-dir", str(tmp_path / name),
                 cwd=tmp_path)
        assert res.returncode == 1, res.stderr
        runs[name] = tmp_path / name
    res = ce("compare", str(runs["a"]), str(runs["b"]), cwd=tmp_path)
    assert res.returncode == 0, res.stderr  # no trial passed in A and fails in B
    rows = dict(re.findall(r"^\| ([^|]+) \| ([^|]+) \|$", res.stdout, re.M))
    assert rows["Trials"] == ("A 4, B 4 (2 ERROR); 4 matched (same variant, task, row and "
                              "repeat)")
    assert rows["Mean score"] == ("A 0.75; B 1.00 (over 2 of 4 graded trials: 2 without a "
                                  "score)")
    assert "| default | broken | 2 / 2 | 0.0% → 0.0% | ±0.0 pp |" in res.stdout
    assert "| 0.50 → — | — |" in res.stdout
    assert "(1 of 2 shared task(s) unchanged;" in res.stdout
    doc = json.loads(ce("compare", str(runs["a"]), str(runs["b"]), "-f", "json",
                        cwd=tmp_path).stdout)
    assert (doc["a"]["errors"], doc["a"]["unscored"]) == (0, 0)
    assert (doc["b"]["errors"], doc["b"]["unscored"]) == (2, 2)


def test_too_few_paired_tasks_for_a_significant_drop_is_said():
    # five tasks, each -50 pp: the smallest p a sign-flip test can give over 5 paired
    # tasks is 2 / 2^5 = 0.0625, so --fail-on significant could never trip on a drop, and
    # the report did not say so (a 3-task A/B gated on it passed whatever B did)
    from ce_runtime.report.compare_render import render_md

    tasks = [f"t{i}" for i in range(6)]
    c5 = _compare(*_dropped(tasks[:5]))
    note = ("| Significance | with 5 paired task(s) no pass-rate drop can reach p < 0.05 "
            "(the smallest possible p is 0.0625): the significant-drop rule cannot fire |")
    assert note in render_md(c5, "significant") and note in render_md(c5, "flips")
    assert "Significance" not in render_md(c5, "never")
    assert "Significance" not in render_md(_compare(*_dropped(tasks)), "significant")
    # at --alpha 0.1, 0.0625 can be reached
    assert "Significance" not in render_md(_compare(*_dropped(tasks[:5]), alpha=0.1),
                                           "significant")
