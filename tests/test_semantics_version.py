"""The grading semantics, pinned per SEMANTICS_VERSION (ce_lang/plan.py).

SEMANTICS_VERSION is part of every plan's identity and must be bumped whenever ce's own
code would score the same trace and workspace differently. This test makes that rule
checkable: every case of tests/corpus/semantics/ (a task, a workspace, optionally a trace
and canned judge verdicts; the format is in that folder's README.md) is compiled and
graded, and each trial's result -- per criterion (score rounded to 12 digits, passed,
error text), the weighted score and the success, the classification labels and, for an
armed trace, the live monitor's decisions -- must equal what
tests/golden/semantics/v{SEMANTICS_VERSION}.json recorded for the same version.

- A golden is never rewritten for its version: a change in what a recorded case scores
  fails, even with CE_UPDATE_GOLDENS=1. An intended change bumps SEMANTICS_VERSION (and
  describes it in the comment there), then records the new version's golden.
- `CE_UPDATE_GOLDENS=1 pytest tests/test_semantics_version.py` records the golden of a
  version that has none, and adds cases the golden does not have yet (more coverage is
  not a semantics change) -- only while every recorded case still grades as recorded.
- A recorded case that left the corpus fails too (deleting the case a change broke would
  hide the change); retiring one is a deliberate edit of the golden.
- The standard criteria (stdlib_criteria/*.ce) are definitions, not ce's code: a plan's
  identity names them by digest and `ce rescore` grades an archived run with the copies
  archived with it. So the texts a golden was recorded with are kept next to it
  (vN.stdlib.json), and a case that grades differently with today's definitions passes
  when the recorded definitions still grade it as recorded: only ce's code is pinned.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from ce_lang.api import SEMANTICS_VERSION, program_for, stdlib_digest, stdlib_texts
from ce_lang.compiler import CompileOptions, compile_paths
from ce_lang.render import render_human
from ce_runtime.execute.sandbox.runner import local_runner
from ce_runtime.grade.grading import grade_files, reference_paths
from ce_runtime.grade.host import InfrastructureError
from ce_runtime.grade.monitor import LiveMonitor
from ce_runtime.trace import events as T

TESTS = Path(__file__).parent
CORPUS = TESTS / "corpus" / "semantics"
GOLDENS = TESTS / "golden" / "semantics"
GOLDEN = GOLDENS / f"v{SEMANTICS_VERSION}.json"
GOLDEN_STDLIB = GOLDENS / f"v{SEMANTICS_VERSION}.stdlib.json"
UPDATE = os.environ.get("CE_UPDATE_GOLDENS") == "1"
RECORD = "CE_UPDATE_GOLDENS=1 .venv/bin/pytest tests/test_semantics_version.py"

CASE_KEYS = {"about", "task", "files", "outside", "task_files", "trace", "judge",
             "stopped_early"}
CALL_KEYS = {"tool", "raw_tool", "params", "status", "output"}
# criterion types the corpus must grade at least once: every standard criterion, plus
# the types that are not definitions of stdlib_criteria/*.ce
EXTRA_TYPES = {"command_not_executed", "expr"}


# ---------------------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------------------
class CaseError(Exception):
    """The case itself is broken (unknown keys, a compile error, grading crashed)."""


def case_files() -> list[Path]:
    return sorted(CORPUS.glob("*.yml"))


def load_case(path: Path) -> dict[str, Any]:
    try:
        case = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CaseError(f"not valid YAML: {exc}") from None
    if not isinstance(case, dict) or not isinstance(case.get("task"), str):
        raise CaseError("a case is a mapping with `task` (the task YAML's text)")
    unknown = set(case) - CASE_KEYS
    if unknown:
        raise CaseError(f"unknown keys {sorted(unknown)} (known: {sorted(CASE_KEYS)})")
    for call in case.get("trace") or []:
        if not isinstance(call, dict) or "tool" not in call or set(call) - CALL_KEYS:
            raise CaseError(f"a trace entry is a mapping with `tool` and optionally "
                            f"{sorted(CALL_KEYS - {'tool'})}: {call!r}")
    return case


def write_tree(root: Path, files: dict[str, Any] | None) -> None:
    """`files`: path -> text (written byte for byte as UTF-8: CRLF stays CRLF), bytes
    (YAML !!binary), null (a directory), {content: ..., executable: true} or
    {symlink: target}."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, spec in (files or {}).items():
        path = root / rel
        if spec is None:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        executable = False
        if isinstance(spec, dict):
            if set(spec) == {"symlink"}:
                os.symlink(spec["symlink"], path)
                continue
            if "content" not in spec or set(spec) - {"content", "executable"}:
                raise CaseError(f"{rel}: a file is text, bytes, null, {{content, executable}} "
                                "or {symlink}")
            executable = bool(spec.get("executable"))
            spec = spec["content"]
        if isinstance(spec, bytes):
            path.write_bytes(spec)
        elif isinstance(spec, str):
            path.write_bytes(spec.encode("utf-8"))
        else:
            raise CaseError(f"{rel}: unexpected content {spec!r}")
        if executable:
            path.chmod(0o755)


def trace_events(calls: list[dict[str, Any]]) -> list[T.Event]:
    """A trace of tool calls: each call, then its result (`status` ok by default; null
    leaves the call without a result)."""
    events: list[T.Event] = [T.RunHeader(0.0, T.SCHEMA_VERSION, "semantics", "semantics",
                                         "plan-hash", "claude-code")]
    for i, call in enumerate(calls):
        events.append(T.ToolCall(float(i), f"k{i}", call["tool"],
                                 call.get("raw_tool", call["tool"]), call.get("params") or {}))
        status = call.get("status", "ok")
        if status is not None:
            events.append(T.ToolResult(float(i), f"k{i}", status, call.get("output", "")))
    return events


class CannedJudge:
    """The case's verdicts, in call order: no model is asked."""

    def __init__(self, verdicts: list[dict[str, Any]]):
        self.verdicts = list(verdicts)

    def verdict(self, kind, rubric, files, settings, host, prompt=None):
        if not self.verdicts:
            raise InfrastructureError(f"{kind}: the case gives no (more) judge verdicts")
        return self.verdicts.pop(0)


# ---------------------------------------------------------------------------------------
# grading a case
# ---------------------------------------------------------------------------------------
def _score(value: float) -> float:
    return round(float(value), 12)


def _scrubber(roots: list[str]):
    """Error texts without the temporary paths they may name, nor what depends on the
    Python version rather than on ce."""
    tmp = {tempfile.gettempdir(), os.path.realpath(tempfile.gettempdir())}
    known = sorted({p for r in roots for p in (r, os.path.realpath(r))}, key=len, reverse=True)
    other = re.compile("(?:" + "|".join(re.escape(t) for t in sorted(tmp, key=len, reverse=True))
                       + r")/[^\s'\"]*")

    def scrub(text: str | None) -> str | None:
        if text is None:
            return None
        for path in known:
            text = text.replace(path, "<case>")
        # Python's own messages name the tokenizer's source as <tokenize> (3.11) or
        # <string> (3.12+): one record for every Python ce runs on
        text = re.sub(r"\(<(?:tokenize|string)>, line ", "(<source>, line ", text)
        return other.sub("<tmp>", text)

    return scrub


def grade_case(case: dict[str, Any], stdlib: dict[str, str] | None = None
               ) -> list[dict[str, Any]]:
    """Each trial of the case's task (one, or one per dataset row), graded in a fresh
    workspace with today's ce: its record as the golden keeps it."""
    with tempfile.TemporaryDirectory(prefix="ce-semantics-") as tmp:
        root = Path(tmp)
        task_dir = root / "task"
        write_tree(task_dir, case.get("task_files"))
        task = task_dir / "task.yaml"
        task.write_bytes(case["task"].encode("utf-8"))
        compiled = compile_paths([str(task)], CompileOptions())
        if compiled.errors:
            raise CaseError("does not compile:\n" + render_human(compiled.diagnostics,
                                                                 compiled.sources))
        if not compiled.trials:
            raise CaseError("compiles to no trial")
        events = None
        if case.get("trace") is not None:
            events = trace_events(case["trace"])
        scrub = _scrubber([tmp])
        out = []
        for n, trial in enumerate(compiled.trials):
            trial_root = root / f"trial{n}"
            ws = trial_root / "ws"
            write_tree(ws, case.get("files"))
            write_tree(trial_root / "outside", case.get("outside"))
            try:
                out.append(_grade_trial(case, trial, str(ws), trial_root, events, stdlib,
                                        scrub))
            except CaseError:
                raise
            except Exception as exc:  # a crash is the case's failure, not a result
                raise CaseError(f"{trial.trial_id}: grading raised "
                                f"{type(exc).__name__}: {exc}") from exc
        return out


def _grade_trial(case, trial, ws, trial_root, events, stdlib, scrub) -> dict[str, Any]:
    """One trial: the live monitor over the trace (when the plan arms criteria), then
    the grade of the workspace and the trace as `ce run` would leave them."""
    plan = trial.plan
    record: dict[str, Any] = {"trial": trial.trial_id}
    stopped = case.get("stopped_early")
    if plan.early_stop.enabled and events is not None:
        monitor = LiveMonitor(plan, program_for(plan, stdlib, plan_hash=trial.plan_hash))
        for event in events:
            monitor.on_event(event)
            if monitor.should_stop:
                break
        info = monitor.stop_info
        record["live"] = {
            "decisions": [[d.criterion, d.verdict, d.event_index] for d in monitor.decisions],
            "stop": None if info is None else
            {"reason": info.reason, "criterion": info.criterion,
             "tool_call_index": info.tool_call_index, "event_index": info.event_index},
        }
        if stopped is None and info is not None:
            # the run ends where the monitor stopped it: later events never happened
            stopped = True
            events = events[:info.event_index + 1]
    trace_path = None
    if events is not None:
        trace_path = str(trial_root / "trace.msgpack")
        T.write_trace(trace_path, events)
    judge = CannedJudge(case.get("judge") or [])
    with local_runner(ws, trial.task_dir, reference_paths(plan, trial.task_dir)) as runner:
        _, graded, _, _ = grade_files(plan, trial.task_dir, ws, trace_path, judge=judge,
                                      stopped_early=bool(stopped), runner=runner,
                                      stdlib=stdlib, plan_hash=trial.plan_hash)
    criteria = []
    for r in graded.criteria:
        entry: dict[str, Any] = {"id": r.id, "score": _score(r.score), "passed": r.passed,
                                 "error": scrub(r.error)}
        if r.disabled:  # a disabled judge: not run, out of the score and the gate
            entry["disabled"] = True
        if r.advisory:  # an early-stopped trial's unarmed criterion: not gating
            entry["advisory"] = True
        labels = {k: v for k, v in r.outputs.items()
                  if isinstance(v, str | int | float | bool) or v is None}
        if labels:
            entry["outputs"] = labels
        criteria.append(entry)
    record["criteria"] = criteria
    record["weighted_score"] = _score(graded.weighted_score)
    record["success"] = graded.success
    if graded.stopped_early:
        record["stopped_early"] = True
    return record


# ---------------------------------------------------------------------------------------
# the golden
# ---------------------------------------------------------------------------------------
def _texts_digest(texts: dict[str, str]) -> str:
    h = hashlib.sha256()  # as ce_lang.plan.stdlib_digest computes it
    for name, text in sorted(texts.items()):
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()


def render_golden(cases: dict[str, list[dict[str, Any]]], digest: str) -> str:
    """JSON, one criterion per line: a diff of the golden reads case by case."""
    lines = ["{", f'  "semantics_version": {SEMANTICS_VERSION},',
             f'  "stdlib_digest": {json.dumps(digest)},', '  "cases": {']
    names = sorted(cases)
    for i, name in enumerate(names):
        lines.append(f"    {json.dumps(name)}: [")
        trials = cases[name]
        for j, trial in enumerate(trials):
            lines.append("      {")
            items = list(trial.items())
            for k, (key, value) in enumerate(items):
                comma = "," if k < len(items) - 1 else ""
                if key == "criteria":
                    lines.append('        "criteria": [')
                    lines += [f"          {json.dumps(c, ensure_ascii=False)}"
                              + ("," if m < len(value) - 1 else "")
                              for m, c in enumerate(value)]
                    lines.append(f"        ]{comma}")
                else:
                    lines.append(f"        {json.dumps(key)}: "
                                 f"{json.dumps(value, ensure_ascii=False)}{comma}")
            lines.append("      }" + ("," if j < len(trials) - 1 else ""))
        lines.append("    ]" + ("," if i < len(names) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def _differences(recorded: list[dict], actual: list[dict]) -> list[str]:
    """What changed in one case, criterion by criterion where the trials line up."""
    if [t.get("trial") for t in recorded] != [t.get("trial") for t in actual]:
        return [f"trials {[t.get('trial') for t in recorded]} -> "
                f"{[t.get('trial') for t in actual]}"]
    out = []
    for old, new in zip(recorded, actual, strict=True):
        where = old["trial"] + ": " if len(recorded) > 1 else ""
        old_c = {c["id"]: c for c in old.get("criteria", [])}
        new_c = {c["id"]: c for c in new.get("criteria", [])}
        for cid in sorted(set(old_c) | set(new_c), key=lambda c: (len(c), c)):
            if old_c.get(cid) != new_c.get(cid):
                out.append(f"{where}{cid}: recorded {_brief(old_c.get(cid))}, "
                           f"now {_brief(new_c.get(cid))}")
        for key in sorted((set(old) | set(new)) - {"criteria", "trial"}):
            if old.get(key) != new.get(key):
                out.append(f"{where}{key}: recorded {old.get(key)!r}, now {new.get(key)!r}")
    return out


def _brief(c: dict | None) -> str:
    if c is None:
        return "(none)"
    text = f"score {c['score']!r} passed {c['passed']} error {c['error']!r}"
    return text + (f" outputs {c['outputs']}" if "outputs" in c else "")


def _rel(path: Path) -> str:
    return os.path.relpath(path, TESTS.parent)


# ---------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------
def test_grading_is_the_recorded_semantics_version():
    actual: dict[str, list[dict[str, Any]]] = {}
    broken: list[str] = []
    cases: dict[str, dict[str, Any]] = {}
    for path in case_files():
        try:
            cases[path.stem] = load_case(path)
            actual[path.stem] = grade_case(cases[path.stem])
        except CaseError as exc:
            broken.append(f"{_rel(path)}: {exc}")
    assert not broken, "broken semantics cases (fix the case):\n" + "\n".join(broken)
    assert actual, f"no case in {_rel(CORPUS)}"

    today = stdlib_texts()
    if not GOLDEN.exists():
        if UPDATE:
            GOLDENS.mkdir(parents=True, exist_ok=True)
            GOLDEN.write_text(render_golden(actual, _texts_digest(today)), encoding="utf-8")
            GOLDEN_STDLIB.write_text(json.dumps(today, indent=1, sort_keys=True) + "\n",
                                     encoding="utf-8")
            return
        pytest.fail(f"no golden {_rel(GOLDEN)} for SEMANTICS_VERSION {SEMANTICS_VERSION}: "
                    f"record it with `{RECORD}` and review it", pytrace=False)

    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert golden.get("semantics_version") == SEMANTICS_VERSION, \
        f"{_rel(GOLDEN)} says semantics_version {golden.get('semantics_version')}"
    recorded: dict[str, list[dict]] = golden["cases"]
    changed = {name: _differences(recorded[name], result)
               for name, result in actual.items()
               if name in recorded and recorded[name] != result}
    if changed and golden.get("stdlib_digest") != stdlib_digest():
        # the standard criteria changed since the recording: a definition is not ce's
        # code, so a case the recorded definitions still grade as recorded is unchanged
        kept = json.loads(GOLDEN_STDLIB.read_text(encoding="utf-8"))
        assert _texts_digest(kept) == golden.get("stdlib_digest"), \
            f"{_rel(GOLDEN_STDLIB)} is not the standard criteria {_rel(GOLDEN)} names"
        for name in list(changed):
            try:
                again = grade_case(cases[name], stdlib=kept)
            except CaseError as exc:  # today's plan does not bind to the old definitions
                changed[name].append(f"(the standard criteria of {_rel(GOLDEN_STDLIB)} "
                                     f"cannot grade it: {exc})")
                continue
            if again == recorded[name]:
                del changed[name]
            else:  # what ce's code changed, the definitions held as recorded
                changed[name] = [*_differences(recorded[name], again),
                                 f"(graded with the standard criteria of "
                                 f"{_rel(GOLDEN_STDLIB)}: today's differ)"]
    new = sorted(name for name in actual if name not in recorded)
    gone = sorted(name for name in recorded if name not in actual)

    problems = []
    if changed:
        detail = "\n".join(f"  {name}:\n" + "\n".join(f"    {d}" for d in diffs)
                           for name, diffs in sorted(changed.items()))
        problems.append(
            f"{len(changed)} case(s) of {_rel(CORPUS)} grade differently from "
            f"{_rel(GOLDEN)}:\n{detail}\n"
            "grading changed but SEMANTICS_VERSION (ce_lang/plan.py) did not: if the change "
            "is intended, bump SEMANTICS_VERSION, describe it in the comment there, and "
            f"record tests/golden/semantics/vN.json with CE_UPDATE_GOLDENS=1 (`{RECORD}`). "
            f"{_rel(GOLDEN)} is never rewritten for its own version. (A recorded case's "
            "files are part of the record: to pin something new, add a case.)")
    if gone:
        problems.append(
            f"{_rel(GOLDEN)} records case(s) the corpus no longer has: {', '.join(gone)}. "
            f"Restore them in {_rel(CORPUS)}: deleting a case does not make its grading "
            "the same. (To retire one deliberately, delete its entry from the golden by "
            "hand, in a reviewed change.)")
    if new:
        if UPDATE and not problems:
            merged = {**recorded, **{name: actual[name] for name in new}}
            GOLDEN.write_text(render_golden(merged, golden["stdlib_digest"]),
                              encoding="utf-8")
        else:
            why = (" once the problems above are resolved (a case recorded now would "
                   "record a grading that is not this version's)") if problems else ""
            problems.append(
                f"case(s) not yet in {_rel(GOLDEN)}: {', '.join(new)}. Adding coverage is "
                f"not a semantics change: record them with `{RECORD}`{why}, and review "
                "what was recorded.")
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def test_corpus_grades_every_criterion_type():
    """Every standard criterion type (and expr, command_not_executed) is graded by a case."""
    defined = set()
    for text in stdlib_texts().values():
        defined |= set(re.findall(r"^criterion (\w+)\(", text, re.M))
    assert "file_exists" in defined and "run_command" in defined
    used = set()
    for path in case_files():
        task = yaml.safe_load(load_case(path)["task"])
        used |= {c.get("type") for c in task.get("success_criteria") or []}
    missing = sorted((defined | EXTRA_TYPES) - used)
    assert not missing, f"no case of {_rel(CORPUS)} grades {', '.join(missing)}"


def test_corpus_size():
    assert 40 <= len(case_files()) <= 120, len(case_files())
