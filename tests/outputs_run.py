"""The run tests/test_outputs_agree.py checks, and how the test reads its outputs.

`make_outputs(root)`: the bundled example tasks (tests/test_run_e2e.py's TASKS) run
offline under two variants and two repeats: agentless ones, the real Claude Code CLI
against its scripted model (`--scripted-model`), `judged.yaml` graded with scripted
verdicts (`--judge-replies`), a dataset (`--sample 3`), an early stop; plus a failing
trial whose session is mostly prompt-cache reads and whose judges report cache tokens
(one judge's model has no rate), an ERROR and a TIMEOUT trial. JUnit and SARIF files
too. The readers below parse each output with no help from ce's own code: what they
find must be what task.json and run.json say.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest

from tests.test_run_e2e import TASKS, ce

CACHED = """\
task_id: cached
description: a Claude Code session mostly read from the prompt cache; a judge fails it
initial_prompt: Write notes.txt.
agent: {type: claude-code, allowed_tools: [Bash], model_script: cached.model.yaml}
run_limits: {expected_turns: 2}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: notes.txt, description: notes.txt exists, weight: 3}
  - {type: file_contains, path: notes.txt, includes: [complete],
     description: the notes are complete}
  - {type: llm_judge, description: the notes are clear, weight: 0.5,
     prompt: Are the notes in notes.txt clear?, files: [notes.txt]}
  - {type: llm_judge, description: a judge with no rate, weight: 0,
     prompt: Is notes.txt in a mystery style?, files: [notes.txt],
     model: anthropic.claude-mystery-9}
  - {type: expr, kind: continuous, weight: 0, description: fails with an error,
     expr: '1.0 / (len(trace.tool_calls) - len(trace.tool_calls))'}
"""
CACHED_MODEL = """\
steps:
  - tool: Bash
    input: {command: "echo draft > notes.txt", description: write}
    usage: {input_tokens: 1000, cache_read_input_tokens: 4000,
            cache_creation_input_tokens: 300, output_tokens: 40}
  - text: done
    usage: {input_tokens: 1100, cache_read_input_tokens: 500, output_tokens: 10}
"""
ERRORED = """\
task_id: errored
description: its set-up fails, so the trial is an ERROR
initial_prompt: go
agent: {type: script, script: [{write: never.txt, content: x}]}
sandbox: {python: null}
pre_run: [{command: 'echo set-up; exit 3'}]
success_criteria:
  - {type: file_exists, path: never.txt, description: never written}
"""
SLOW = """\
task_id: slow
description: outlives its task_timeout
initial_prompt: go
agent: {type: script, script: [{usage: {input_tokens: 70, output_tokens: 7}}, {sleep: 30}]}
run_limits: {task_timeout: 2}
sandbox: {python: null}
success_criteria:
  - {type: file_exists, path: never.txt, description: never written}
"""
REPLIES = """\
judge:
  - match: "You are reviewing text_utils.py"
    score: 1.0
    rationale: the reference itself
    usage: {input_tokens: 900, output_tokens: 120}
  - match: "Are the notes in notes.txt clear"
    score: 0.5
    rationale: terse
    usage: {input_tokens: 1000, output_tokens: 200, cache_read_input_tokens: 2000,
            cache_creation_input_tokens: 400}
  - match: "mystery style"
    score: 1.0
    usage: {input_tokens: 500, output_tokens: 100}
  - score: 0.0
    rationale: no scripted verdict
"""
EXPERIMENT = """\
experiment_id: outputs-ab
description: the same tasks twice, the second with a notes file in the template
variants:
  - variant_id: plain
  - variant_id: with-notes
    template_sources:
      - type: starter_files
        files: [{path: NOTES.md, content: "# notes\\n"}]
"""
ZERO_USAGE = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0,
              "cache_write_tokens": 0, "cost_usd": 0.0, "turns": 0, "tool_calls": 0}
JUDGE_KEYS = ("calls", "agent_sessions", "recorded", "input_tokens", "output_tokens",
              "cache_read_tokens", "cache_write_tokens", "cost_usd")


@dataclass(frozen=True)
class Outputs:
    """One run directory and what the command that wrote it printed."""
    run_dir: str
    stdout: str
    stderr: str
    exit_code: int
    junit: str | None  # the --junit-xml file (`ce rescore` writes none)

    def read(self, name: str) -> str:
        with open(os.path.join(self.run_dir, name), encoding="utf-8") as fh:
            return fh.read()

    def records(self) -> dict[str, dict]:
        """trial_id -> task.json (a re-score's own results, under rescored/, left out)."""
        out = {}
        for path in glob.glob(os.path.join(self.run_dir, "**", "task.json"), recursive=True):
            if os.path.relpath(path, self.run_dir).split(os.sep)[0] == "rescored":
                continue
            with open(path, encoding="utf-8") as fh:
                record = json.load(fh)
            assert record["trial_id"] not in out, record["trial_id"]
            out[record["trial_id"]] = record
        return out


def make_outputs(root) -> Outputs:
    """The run, under the directory `root` (a pathlib.Path)."""
    shutil.copytree(TASKS, root / "tasks")
    for name, text in (("cached.yaml", CACHED), ("cached.model.yaml", CACHED_MODEL),
                       ("errored.yaml", ERRORED), ("slow.yaml", SLOW)):
        (root / "tasks" / name).write_text(text)
    (root / "replies.yaml").write_text(REPLIES)
    (root / "ab.yaml").write_text(EXPERIMENT)
    res = ce("run", "tasks", "-e", "ab.yaml", "--repeats", "2", "--sample", "3",
             "--scripted-model", "--judge-replies", "replies.yaml", "-j", "2",
             "--run-dir", "run", "--junit-xml", "junit.xml", "--sarif", "run.sarif",
             cwd=str(root), timeout=900)
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr[-3000:]
    return Outputs(str(root / "run"), res.stdout, res.stderr, res.returncode,
                   str(root / "junit.xml"))


def rescore(made: Outputs) -> Outputs:
    """`ce rescore` of the run: its results directory, a run directory of its own."""
    res = ce("rescore", made.run_dir, cwd=os.path.dirname(made.run_dir), timeout=900)
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr[-3000:]
    where = re.search(r"; results: (.*)$", res.stdout, re.M).group(1)
    return Outputs(where, res.stdout, res.stderr, res.returncode, None)


# -- what the record says, the test's own reading of it ------------------------------------
def usage_of(rec: dict) -> dict:
    return {**ZERO_USAGE, **(rec.get("usage") or {})}


def failed_ids(rec: dict) -> list[str]:
    """The criteria a report names as a trial's failures: enabled, not passed, and gated
    or in error."""
    return [c["id"] for c in rec["criteria"] if not c["disabled"] and not c["passed"]
            and (c["gating"] or c["error"])]


def graded(rec: dict) -> bool:
    return rec["status"] != "NOT_GRADED"


def money(v: float | None) -> str:
    return "—" if v is None else f"${v:.4f}"


def known_cost(rec: dict) -> float | None:
    """A trial's cost, None when unknown: its model has no rate (`cost_unknown`) or it
    reported none ($0: no agent, the oracle, a script without a `usage` action)."""
    cost = usage_of(rec)["cost_usd"]
    return cost if not rec.get("cost_unknown") and cost > 0 else None


def known_tokens(rec: dict) -> bool:
    """Whether a trial's tokens are known: it reported some (new input, output, cache
    reads or writes); none from no agent, the oracle, a script without `usage`."""
    use = usage_of(rec)
    return any(use[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                "cache_write_tokens"))


def known_turns(rec: dict) -> bool:
    """Whether a trial's turns and tool calls are known: an agent other than `none` ran
    to an outcome, or it reported tokens or a cost."""
    ran = rec.get("agent") not in (None, "none") and rec.get("agent_outcome") is not None
    return ran or known_tokens(rec) or known_cost(rec) is not None


def tokens_total(block: dict, recs: list[dict]) -> str:
    """A run's tokens as report.md and report.html show them: over the trials that
    reported some, over how many when not all, "—" when none did."""
    known = sum(known_tokens(r) for r in recs)
    if not known:
        return "—"
    tok = block["tokens"]
    text = f"{tok['input']:,} in / {tok['output']:,} out"
    if tok["cache_read"] or tok["cache_write"]:
        text += f" / {tok['cache_read']:,} cache read / {tok['cache_write']:,} cache write"
    return text + (f" over {known} of {len(recs)} trial(s)" if known < len(recs) else "")


def cost_total(block: dict, recs: list[dict], none: str = "—") -> str:
    """A run's or variant's cost as report.md and report.html show it (without why some
    trials are unpriced): the sum over the trials of known cost, over how many when not
    all, `none` when none is known."""
    known = sum(known_cost(r) is not None for r in recs)
    if not known:
        return none
    return money(block["cost_usd"]) + (f" over {known} of {len(recs)} trial(s)"
                                       if known < len(recs) else "")


def two(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def totals(recs: list[dict]) -> dict:
    """run.json's aggregates, computed here from the task.json records."""
    scored = [r["weighted_score"] for r in recs if graded(r) and r["weighted_score"] is not None]
    n = sum(graded(r) for r in recs)
    ok = sum(r["status"] == "SUCCESS" for r in recs)
    use = [usage_of(r) for r in recs]
    budgeted = [r for r in recs if r.get("expected_turns") is not None and graded(r)]
    per_task = defaultdict(list)
    for r in recs:
        if graded(r):
            per_task[(r["variant_id"], r["task_id"])].append(r["status"] == "SUCCESS")
    return {
        "trials": len(recs), "by_status": dict(Counter(r["status"] for r in recs)),
        "graded": n, "passed": ok, "pass_rate": ok / n if n else None,
        "mean_score": sum(scored) / len(scored) if scored else None,
        "stopped_early": sum(bool(r.get("stopped_early")) for r in recs),
        "turns_avoided": _turns_avoided(recs),
        "tokens": {"input": sum(u["input_tokens"] for u in use),
                   "output": sum(u["output_tokens"] for u in use),
                   "total": sum(u["input_tokens"] + u["output_tokens"] for u in use),
                   "cache_read": sum(u["cache_read_tokens"] for u in use),
                   "cache_write": sum(u["cache_write_tokens"] for u in use)},
        "cost_usd": sum(u["cost_usd"] for u in use),
        "cost_known_trials": sum(known_cost(r) is not None for r in recs),
        "tokens_known_trials": sum(known_tokens(r) for r in recs),
        "duration_s": sum(r.get("duration_s") or 0.0 for r in recs),
        "turns": sum(u["turns"] for u in use), "tool_calls": sum(u["tool_calls"] for u in use),
        "within_expected_turns": {
            "budgeted": len(budgeted),
            "within": sum(r["status"] == "SUCCESS" and usage_of(r)["tool_calls"] + 1
                          <= 1.5 * r["expected_turns"] for r in budgeted)},
        "pass_at_k": {"tasks": len(per_task),
                      "passed": sum(any(v) for v in per_task.values()),
                      "passed_all": sum(all(v) for v in per_task.values())},
        "judges": {k: sum((r.get("judge_usage") or {}).get(k) or 0 for r in recs)
                   for k in JUDGE_KEYS},
    }


def _turns_avoided(recs: list[dict]) -> dict | None:
    """What the early stops saved at most: each stop's turns_remaining_at_stop."""
    left = [(r.get("early_stop") or {}).get("turns_remaining_at_stop") for r in recs]
    left = [n for n in left if n is not None]
    return {"at_most": sum(left), "trials": len(left)} if left else None


def assert_block(block: dict, recs: list[dict]) -> None:
    want = totals(recs)
    assert block.get("turns_avoided") == want["turns_avoided"]
    for key in ("trials", "by_status", "graded", "passed", "stopped_early", "tokens",
                "turns", "tool_calls"):
        assert block[key] == want[key], key
    for key in ("pass_rate", "mean_score"):
        assert block[key] == pytest.approx(want[key], abs=1e-12), key
    assert block["cost_usd"] == pytest.approx(want["cost_usd"], abs=1e-9)
    assert block["cost_known_trials"] == want["cost_known_trials"]
    assert block["tokens_known_trials"] == want["tokens_known_trials"]
    assert block["duration_s"] == pytest.approx(want["duration_s"], abs=1e-6)
    wet = block["within_expected_turns"]
    assert {k: wet[k] for k in ("budgeted", "within")} == want["within_expected_turns"]
    pak = block["pass_at_k"]
    assert {k: pak[k] for k in ("tasks", "passed", "passed_all")} == want["pass_at_k"]
    judges = block.get("judges")
    if not any(want["judges"].values()):
        assert judges is None
    else:
        assert {k: judges[k] for k in JUDGE_KEYS if k != "cost_usd"} == \
            {k: v for k, v in want["judges"].items() if k != "cost_usd"}
        assert judges["cost_usd"] == pytest.approx(want["judges"]["cost_usd"], abs=1e-9)
        assert judges["trials"] == sum(1 for r in recs if r.get("judge_usage"))


# -- readers of the outputs --------------------------------------------------------------
def cells(line: str) -> list[str]:
    """A markdown table row's cells (an escaped `\\|` stays in its cell)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def counted(text: str) -> dict[str, int]:
    """"44 SUCCESS, 4 ERROR" as {status: count} (the places list them in their own order)."""
    return {status: int(n) for n, status in (part.split() for part in text.split(", "))}


def md_trial_rows(text: str) -> dict[tuple, dict[str, str]]:
    """(variant, task, repeat) -> the cells of its row in the variant's trial table."""
    rows, variant, head = {}, None, None
    for line in text.splitlines():
        if line.startswith("## "):
            found = re.fullmatch(r"## Variant `(.*)`", line)
            variant, head = (found.group(1) if found else None), None
        elif variant and line.startswith("| Task |"):
            head = cells(line)
        elif variant and head and line.startswith("|") and not line.startswith("|---"):
            row = dict(zip(head, cells(line), strict=True))
            key = (variant, row["Task"].strip("`"), int(row["Repeat"]))
            assert key not in rows, key
            rows[key] = row
        elif not line.strip():
            head = None
    return rows


def md_run_table(text: str) -> dict[str, str]:
    start = text.index("| Run | |")
    table = text[start:text.index("\n\n", start)].splitlines()[2:]
    return dict(cells(line) for line in table)


def html_data(page: str, element: str = "ce-data") -> dict:
    found = re.search(rf'<script type="application/json" id="{element}">(.*?)</script>',
                      page, re.S)
    return json.loads(found.group(1))


def junit_cases(path: str) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(path).getroot()
    return {(suite.get("name"), case.get("name")): case
            for suite in root.iter("testsuite") for case in suite.iter("testcase")}
