"""`criterion_changes` (the lines `ce rescore` prints under a trial) skips criteria whose
verdict cannot have changed without spelling both verdicts out; it must print exactly
what spelling them out prints."""

from __future__ import annotations

import random

from ce_runtime.grade.criterion_match import pair_criteria
from ce_runtime.grade.rescore import _verdict, criterion_changes


def _reference(old, new):
    """The lines as they were made: both verdicts spelled out for every criterion."""
    pairs, gone = pair_criteria(old or [], new)
    out = []
    for c, was in pairs:
        if was is None:
            out.append(f"{c['id']} {c['type']}: new criterion, {_verdict(c)}")
            continue
        if _verdict(was) != _verdict(c) or was.get("error") != c.get("error"):
            why = f" ({c['error']})" if c.get("error") else ""
            # the same verdict, two errors: the recorded one is said too
            then = f" ({was['error']})" if was.get("error") and c.get("error") \
                and _verdict(was) == _verdict(c) else ""
            moved = f" (recorded as {was['id']})" if was["id"] != c["id"] else ""
            out.append(f"{c['id']} {c['type']}{moved}: recorded {_verdict(was)}{then}, now "
                       f"{_verdict(c)}{why}")
    out += [f"{c['id']} {c['type']}: no longer a criterion" for c in gone]
    return out


SCORES = [None, 0, 1, 1.0, True, False, 0.0, 0.5, 0.5004, 0.5001, float("nan"), 1e20, 10 ** 20,
          "x"]
ERRORS = [None, "", "boom", "other"]
PASSED = [None, True, False, 0, 1]


def _criterion(rng, i):
    c = {"id": f"c{i}", "type": rng.choice(["file_exists", "json_check"])}
    for key, values in (("score", SCORES), ("error", ERRORS), ("passed", PASSED)):
        if rng.random() < 0.9:
            c[key] = rng.choice(values)
    return c


def test_the_printed_changes_are_both_verdicts_compared():
    rng = random.Random(14)
    printed = 0
    for _ in range(5000):
        old = [_criterion(rng, i) for i in rng.sample(range(6), rng.randint(0, 5))]
        new = [dict(c) for c in old if rng.random() < 0.9]
        for c in new:
            if rng.random() < 0.5:
                c.update(_criterion(rng, int(c["id"][1:])))
        new += [_criterion(rng, i) for i in range(6, 6 + rng.randint(0, 1))]
        got = criterion_changes(old, new)
        assert got == _reference(old, new), (old, new)
        printed += bool(got)
    assert 500 < printed < 5000  # both kinds of trial were seen
    assert criterion_changes(None, []) == []


def _c(i, kind, description, score, passed=None):
    return {"id": f"c{i}", "type": kind, "description": description, "score": score,
            "passed": score >= 0.5 if passed is None else passed, "error": None}


def test_a_criterion_removed_before_others_is_not_compared_with_its_successor():
    """Removing c1 makes the recorded c2 the new c1: each is set against itself, not
    against whatever held its index in the run."""
    old = [_c(0, "file_exists", "out exists", 1), _c(1, "file_matches_regex", "coin", 0),
           _c(2, "json_check", "json", 0.5), _c(3, "run_command", "runs", 0)]
    new = [_c(0, "file_exists", "out exists", 1), _c(1, "json_check", "json", 0.5),
           _c(2, "run_command", "runs", 1), _c(3, "file_contains", "has name", 0)]
    assert criterion_changes(old, new) == [
        "c2 run_command (recorded as c3): recorded 0 fail, now 1 pass",
        "c3 file_contains: new criterion, 0 fail",
        "c1 file_matches_regex: no longer a criterion",
    ]


def test_a_criterion_whose_description_was_edited_in_place_is_still_itself():
    old = [_c(0, "file_exists", "out exists", 1), _c(1, "json_check", "json", 1)]
    new = [_c(0, "file_exists", "out.txt exists", 0), _c(1, "json_check", "json", 1)]
    assert criterion_changes(old, new) == ["c0 file_exists: recorded 1 pass, now 0 fail"]


def test_a_trials_relative_name_is_relpaths():
    import itertools
    import os

    from ce_runtime.grade.rescore import _relative

    starts = ["runs/latest", "/tmp/run", "a/..", "./r", "r/", "/", "x/../y", "r//s", "."]
    rests = ["default/t/00", "t", "a/./b", "a/../b", "a//b", "", "a/", "..", "."]
    def outcome(fn, path, start):
        try:
            return fn(path, start)
        except ValueError as exc:
            return str(exc)

    for start, rest in itertools.product(starts, rests):
        for path in (start + "/" + rest, start + rest, rest):
            assert outcome(_relative, path, start) == outcome(os.path.relpath, path, start)


def _gate(criterion, passed, thresholds=None, **metrics):
    return {"variant": "default", "suite_id": "words", "criterion": criterion,
            "passed": passed, "metrics": metrics, "failed": [],
            "thresholds": {"pass_rate": 0.3} if thresholds is None else thresholds}


def test_gate_changes_mark_a_flip_and_show_moved_metrics_only():
    from ce_runtime.report.gates import gate_changes

    old = [_gate("c0", True, pass_rate=0.5), _gate("c1", True, pass_rate=1.0),
           _gate("c2", False, pass_rate=0.25), _gate("gone", True, pass_rate=1.0)]
    new = [_gate("c0", False, pass_rate=0.25), _gate("c1", True, pass_rate=0.75),
           _gate("c2", False, pass_rate=0.25), _gate("c3", True, pass_rate=1.0)]
    assert gate_changes(old, new) == [
        "* suite gate default/words/c0: passed -> failed (pass_rate 0.500 -> 0.250)",
        "  suite gate default/words/c1: passed (pass_rate 1.000 -> 0.750)",
        "* suite gate default/words/c3: new, passed",
        "* suite gate default/words/gone: no longer a gate (was passed)"]
    assert gate_changes(old, old) == []
    # a run.json of another shape (hand-edited, an older ce) costs nothing but the lines
    assert gate_changes([{"variant": 1}, "x", None], new[:1]) == [
        "* suite gate default/words/c0: new, failed"]


def test_gate_changes_name_macro_f1_once():
    """`f1.macro` is the metrics' alias of macro_f1 (a threshold may name either): a
    moved macro F1 is one metric, listed twice only when a threshold names the alias."""
    from ce_runtime.report.gates import gate_changes

    old = [_gate("c0", True, accuracy=1.0, macro_f1=1.0, **{"f1.macro": 1.0})]
    new = [_gate("c0", True, accuracy=0.875, macro_f1=0.873, **{"f1.macro": 0.873})]
    assert gate_changes(old, new) == [
        "  suite gate default/words/c0: passed (accuracy 1.000 -> 0.875, "
        "macro_f1 1.000 -> 0.873)"]
    new[0]["thresholds"] = {"f1.macro": 0.5}
    assert gate_changes(old, new) == [
        "  suite gate default/words/c0: passed (accuracy 1.000 -> 0.875, "
        "macro_f1 1.000 -> 0.873, f1.macro 1.000 -> 0.873)"]


def test_a_dataset_criterion_without_thresholds_is_no_gate_that_flips():
    """Its metrics are kept as a gate's are (passed, with nothing to check): added,
    removed or moved, it is listed unmarked and says `no thresholds`, not `passed`; only
    thresholds given to it later can flip it."""
    from ce_runtime.report.gates import gate_changes

    plain = _gate("c5", True, thresholds={}, pass_rate=1.0)
    assert gate_changes([], [plain]) == ["  suite gate default/words/c5: new, no thresholds"]
    assert gate_changes([plain], []) == ["  suite gate default/words/c5: no longer there"]
    assert gate_changes([plain], [dict(plain, metrics={"pass_rate": 0.5})]) == [
        "  suite gate default/words/c5: no thresholds (pass_rate 1.000 -> 0.500)"]
    gated = _gate("c5", False, thresholds={"pass_rate": 0.6}, pass_rate=0.5)
    assert gate_changes([plain], [gated]) == [
        "* suite gate default/words/c5: no thresholds -> failed (pass_rate 1.000 -> 0.500)"]


DATASET_TASK = """\
task_id: words
description: pre_run writes a word; each row expects one
dataset:
  rows:
    - {id: r1, word: alpha}
    - {id: r2, word: beta}
    - {id: r3, word: THIRD}
    - {id: r4, word: gamma}
agent: {type: none}
sandbox: {driver: tempdir, python: null}
pre_run:
  - command: "printf alpha > word.txt"
success_criteria:
  - type: file_contains
    path: word.txt
    includes: ["${row.word}"]
    description: the word is the row's
    suite_thresholds: {pass_rate: 0.5}
"""


def test_rescore_says_which_suite_gate_flipped(tmp_path):
    """A row changed in TASKS (its expected word) moves the dataset's gate below its
    threshold: the re-score prints the gate's flip, marked, and counts it in the summary
    line; a re-score with the run's own plans prints no gate."""
    import json
    import subprocess
    import sys

    def ce(*args):
        return subprocess.run([sys.executable, "-m", "ce_runtime.cli", *args],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**__import__("os").environ, "CE_PLAIN": "1"})

    (tmp_path / "words.yaml").write_text(DATASET_TASK.replace("THIRD", "alpha"))
    run = ce("run", "words.yaml", "-q", "--run-dir", "run")
    assert run.returncode == 1, run.stderr  # two rows fail; the gate (2 of 4) passes
    gates = json.loads((tmp_path / "run" / "run.json").read_text())["suite_gates"]
    assert [(g["passed"], g["metrics"]["pass_rate"]) for g in gates] == [(True, 0.5)]

    same = ce("rescore", "run", "-q")
    assert "suite gate" not in same.stdout, same.stdout

    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "words.yaml").write_text(DATASET_TASK.replace("THIRD", "beta"))
    moved = ce("rescore", "run", "tasks", "-q")
    name = gates[0]["variant"] + "/" + gates[0]["suite_id"] + "/" + gates[0]["criterion"]
    flip = (f"* suite gate {name}: passed -> failed (pass_rate 0.500 -> 0.250, "
            "mean_score 0.500 -> 0.250)")
    assert flip in moved.stdout.splitlines(), moved.stdout
    assert "; 1 suite gate(s) changed verdict;" in moved.stdout, moved.stdout
    assert moved.returncode == 1
