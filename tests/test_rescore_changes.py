"""`criterion_changes` (the lines `ce rescore` prints under a trial) skips criteria whose
verdict cannot have changed without spelling both verdicts out; it must print exactly
what spelling them out prints."""

from __future__ import annotations

import random

from ce_runtime.grade.rescore import _verdict, criterion_changes


def _reference(old, new):
    """The lines as they were made: both verdicts spelled out for every criterion."""
    before = {c["id"]: c for c in old or []}
    out = []
    for c in new:
        was = before.get(c["id"])
        if was is None:
            out.append(f"{c['id']} {c['type']}: new criterion, {_verdict(c)}")
            continue
        if _verdict(was) != _verdict(c) or was.get("error") != c.get("error"):
            why = f" ({c['error']})" if c.get("error") else ""
            out.append(f"{c['id']} {c['type']}: recorded {_verdict(was)}, now "
                       f"{_verdict(c)}{why}")
    out += [f"{i} {c['type']}: no longer a criterion" for i, c in before.items()
            if i not in {c["id"] for c in new}]
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
