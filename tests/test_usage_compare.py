"""What a trial cost, compared: `ce compare`'s usage section and report.md / report.html's
usage per variant (ce_runtime/report/usage.py), on real runs made by the CLI with the
`script` agent, whose `usage` actions report tokens and dollars as a real agent's events
do, and `agent: none` tasks, which measure nothing but their wall time.

Every action of a script is a turn; `write` and `run` are tool calls. So, per trial:

    run A   t1  usage 1000 in / 100 out / $0.01, write, say    3 turns, 1 tool call
            t2  write, say (no usage: tokens and cost unknown) 2 turns, 1 tool call
            t3  agent none (turns, tokens and cost unknown)
    run B   t1  usage 500 in / 60 out / $0.006, write, run, say 4 turns, 2 tool calls
            t2  usage 2000 in / 200 out / $0.02, write, say    3 turns, 1 tool call
            t3  agent none

two repeats each. The unknown values must read as unknown and move no mean: A's cost is
$0.01 over its 2 trials that have one (not $0.0033 over 6), and B ÷ A is over the trials
known in both (t1: $0.006 / $0.01 = ×0.60), never B's $0.013 over A's $0.01.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

CE = [sys.executable, "-m", "ce_runtime.cli"]

pytestmark = pytest.mark.slow


def task(task_id: str, actions: list[str] | None) -> str:
    """A task whose agent plays `actions` (None: `agent: none`; [] : the experiment's
    agent)."""
    if actions is None:
        agent = "agent: {type: none}\n"
    elif actions:
        agent = "agent:\n  type: script\n  script:\n" + "".join(f"    - {a}\n"
                                                               for a in actions)
    else:
        agent = ""
    return (f"task_id: {task_id}\ndescription: {task_id}\n"
            + ("initial_prompt: go\n" if actions is not None else "") + agent
            + "sandbox: {driver: tempdir, python: null}\nsuccess_criteria:\n"
            + "  - {type: file_exists, path: "
            + ("out.txt" if actions is not None else ".") + ", description: d}\n")


WRITE, SAY = "{write: out.txt, content: x}", "{say: done}"
RUN_A = {"t1": ["{usage: {input_tokens: 1000, output_tokens: 100, cost_usd: 0.01}}", WRITE,
                SAY],
         "t2": [WRITE, SAY], "t3": None}
RUN_B = {"t1": ["{usage: {input_tokens: 500, output_tokens: 60, cost_usd: 0.006}}", WRITE,
                "{run: 'true'}", SAY],
         "t2": ["{usage: {input_tokens: 2000, output_tokens: 200, cost_usd: 0.02}}", WRITE,
                SAY],
         "t3": None}


def ce(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([*CE, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NO_COLOR": "1"})


def make_run(root: Path, name: str, tasks: dict[str, list[str] | None],
             *extra: str) -> Path:
    suite = root / f"suite-{name}"
    suite.mkdir()
    for task_id, actions in tasks.items():
        (suite / f"{task_id}.yaml").write_text(task(task_id, actions))
    res = ce("run", str(suite), "--repeats", "2", "--runs-root", str(root / name), *extra,
             cwd=root)
    assert res.returncode == 0, res.stderr
    return (root / name / "latest").resolve()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("usage")
    return root, make_run(root, "a", RUN_A), make_run(root, "b", RUN_B)


def metrics(doc) -> dict[str, dict]:
    return {m["metric"]: m for m in doc["usage"]["metrics"]}


def test_compare_json_means_over_the_known_trials_and_b_over_a_over_both(runs):
    root, a, b = runs
    res = ce("compare", str(a), str(b), "-f", "json", cwd=root)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["usage"]["trials"] == 6
    m = metrics(doc)
    side = {k: (v["a"]["n"], v["a"]["mean"], v["b"]["n"], v["b"]["mean"])
            for k, v in m.items() if k != "duration_s"}
    assert side == {
        # t3 (agent none) measured no turn: 4 of 6 trials each
        "turns": (4, 2.5, 4, 3.5), "tool_calls": (4, 1.0, 4, 1.5),
        # A's t2 reported no token and no cost: A's means are t1's alone
        "input_tokens": (2, 1000.0, 4, 1250.0), "output_tokens": (2, 100.0, 4, 130.0),
        "cost_usd": (2, 0.01, 4, 0.013)}
    assert m["turns"]["a"]["median"] == 2.5 and m["cost_usd"]["b"]["median"] == 0.013
    paired = {k: (v["paired"], v["paired_a"], v["paired_b"], v["ratio"])
              for k, v in m.items() if k != "duration_s"}
    assert paired == {
        "turns": (4, 2.5, 3.5, pytest.approx(1.4)),
        "tool_calls": (4, 1.0, 1.5, 1.5),
        "input_tokens": (2, 1000.0, 500.0, 0.5), "output_tokens": (2, 100.0, 60.0, 0.6),
        "cost_usd": (2, 0.01, 0.006, pytest.approx(0.6))}
    wall = m["duration_s"]
    assert wall["a"]["n"] == wall["b"]["n"] == wall["paired"] == 6  # even agent none's
    assert wall["a"]["mean"] > 0 and wall["ratio"] == pytest.approx(
        wall["paired_b"] / wall["paired_a"])


def test_compare_md_and_html_show_unknown_as_unknown(runs):
    root, a, b = runs
    md = ce("compare", str(a), str(b), cwd=root)
    assert md.returncode == 0, md.stderr
    line = re.search(r"^\| Usage per trial \(mean A → B, B ÷ A\) \| (.*) \|$", md.stdout,
                     re.M).group(1)
    assert line.startswith("turns 2.5 → 3.5 ×1.40 (+40.0%) over 4 of 6; tool calls 1.0 → "
                           "1.5 ×1.50 (+50.0%) over 4 of 6; input tokens 1,000 → 500 ×0.50 "
                           "(-50.0%) over 2 of 6; output tokens 100 → 60 ×0.60 (-40.0%) over 2 of 6; cost "
                           "$0.0100 → $0.0060 ×0.60 (-40.0%) over 2 of 6; wall time ")
    rows = {r[0]: r[1:] for r in (
        [c.strip() for c in x.strip("|").split("|")] for x in md.stdout.split(
            "## Usage per trial", 1)[1].split("\n## ", 1)[0].splitlines()
        if x.startswith("| ") and not x.startswith("| Per trial"))}
    assert rows["Turns"] == ["2.5 (2.5)", "3.5 (3.5)", "×1.40 (+40.0%)", "4 / 4 / 4"]
    assert rows["Cost (USD)"] == [
        "$0.0100 ($0.0100)", "$0.0130 ($0.0130)",
        "×0.60 (-40.0%) over the 2 known in both ($0.0100 → $0.0060)", "2 / 4 / 2"]
    # B against A the other way round: A's unknown t2 cost is still no $0
    back = json.loads(ce("compare", str(b), str(a), "-f", "json", cwd=root).stdout)
    assert metrics(back)["cost_usd"]["ratio"] == pytest.approx(1 / 0.6)
    html = ce("compare", str(a), str(b), "-f", "html", cwd=root)
    assert html.returncode == 0, html.stderr
    assert "<td>×0.60 (-40.0%) over the 2 known in both ($0.0100 → $0.0060)</td>" \
        in html.stdout
    assert "<td>Turns</td><td>2.5 (2.5)</td><td>3.5 (3.5)</td>" in html.stdout


def test_agentless_runs_compare_nothing_but_their_wall_time(runs, tmp_path):
    root, a, _ = runs
    none = make_run(tmp_path, "none", {"t1": None, "t2": None, "t3": None})
    res = ce("compare", str(none), str(none), "-f", "json", cwd=root)
    m = metrics(json.loads(res.stdout))
    for k in ("turns", "tool_calls", "input_tokens", "output_tokens", "cost_usd"):
        assert m[k]["a"] == m[k]["b"] == {"n": 0, "mean": None, "median": None}, k
        assert m[k]["paired"] == 0 and m[k]["ratio"] is None
    assert m["duration_s"]["paired"] == 6 and m["duration_s"]["ratio"] == 1.0
    # A's trials that measured tokens against B's that measured none: unknown, not -100%
    res = ce("compare", str(a), str(none), cwd=root)
    assert "| Cost (USD) | $0.0100 ($0.0100) | — | — | 2 / 0 / 0 |" in res.stdout


def test_cost_informs_and_never_changes_the_verdict(runs):
    """B costs and takes more: no regression (exit 0), said as before."""
    root, a, b = runs
    res = ce("compare", str(a), str(b), "--fail-on", "flips", cwd=root)
    assert res.returncode == 0
    assert res.stderr.strip().endswith("ce compare: no regression")


# ---------------------------------------------------------------------------- report


# the variants' scripts; `env` names its agent (none), which it keeps under each
EXPERIMENT = """\
experiment_id: usage-ab
defaults:
  agent: {type: script}
variants:
  - variant_id: big
    agent:
      script:
        - {usage: {input_tokens: 1000, output_tokens: 100, cost_usd: 0.01}}
        - {write: out.txt, content: x}
        - {say: done}
  - variant_id: small
    agent:
      script:
        - {usage: {input_tokens: 400, output_tokens: 80, cost_usd: 0.004}}
        - {write: out.txt, content: x}
        - {run: 'true'}
        - {say: done}
"""


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("usage-ab")
    (root / "exp.yaml").write_text(EXPERIMENT)
    return make_run(root, "x", {"work": [], "env": None}, "-e", str(root / "exp.yaml"))


def test_run_json_has_each_variants_usage_and_its_ratio_to_the_baseline(experiment):
    run = json.loads((experiment / "run.json").read_text())
    big, small = (run["variants"][v]["per_trial"] for v in ("big", "small"))
    # over each variant's 4 graded trials, none of them an ERROR
    for pt in (big, small):
        assert (pt.pop("trials"), pt.pop("errors"), pt.pop("before_grading")) == (4, 0, 0)
    # `env` (agent none) measured its wall time only: 2 of each variant's 4 trials
    assert {k: (v["n"], v["mean"]) for k, v in big.items() if k != "duration_s"} == {
        "turns": (2, 3.0), "tool_calls": (2, 1.0), "input_tokens": (2, 1000.0),
        "output_tokens": (2, 100.0), "cost_usd": (2, 0.01)}
    assert {k: (v["n"], v["mean"]) for k, v in small.items() if k != "duration_s"} == {
        "turns": (2, 4.0), "tool_calls": (2, 2.0), "input_tokens": (2, 400.0),
        "output_tokens": (2, 80.0), "cost_usd": (2, 0.004)}
    assert big["duration_s"]["n"] == small["duration_s"]["n"] == 4
    [c] = run["comparison"]
    pt = c["per_trial"]
    assert (pt["trials"], pt["errors"], pt["before_grading"], pt["baseline_errors"],
            pt["baseline_before_grading"]) == (4, 0, 0, 0, 0)
    assert {k: (pt[k]["paired"], pt[k]["ratio"]) for k in (
        "turns", "tool_calls", "input_tokens", "output_tokens", "cost_usd")} == {
        "turns": (2, pytest.approx(4 / 3)), "tool_calls": (2, 2.0),
        "input_tokens": (2, 0.4), "output_tokens": (2, 0.8), "cost_usd": (2, 0.4)}


def test_report_md_and_html_show_the_same_usage_cells(experiment):
    md = (experiment / "report.md").read_text()
    part = md.split("### Usage per trial", 1)[1].split("\n### ", 1)[0]
    rows = [[c.strip() for c in x.strip("|").split("|")] for x in part.splitlines()
            if x.startswith("| `")]
    k = ", known for 2 of 4"  # `env` measured none of them
    assert [r[:7] for r in rows] == [
        ["`big`", "4", "3.0 (3.0)" + k, "1.0 (1.0)" + k, "1,000 (1,000)" + k,
         "100 (100)" + k, "$0.0100 ($0.0100)" + k],
        ["`small`", "4", "4.0 (4.0)" + k, "2.0 (2.0)" + k, "400 (400)" + k, "80 (80)" + k,
         "$0.0040 ($0.0040)" + k],
        ["`small`", "4", "×1.33 (+33.3%) over 2", "×2.00 (+100.0%) over 2",
         "×0.40 (-60.0%) over 2", "×0.80 (-20.0%) over 2", "×0.40 (-60.0%) over 2"]]
    assert rows[2][6] == "×0.40 (-60.0%) over 2"  # cost: the small model's 40%
    assert re.fullmatch(r"\d+\.\d\ds \(\d+\.\d\ds\)", rows[0][7])  # wall: all 4 known
    html = (experiment / "report.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="ce-data">(.*?)'
                                r"</script>", html, re.S).group(1))
    shown = [[f"`{r[0]}`", *r[1:]] for _, _, table in data["usage_tables"] for r in table]
    assert shown == rows


# ---------------------------------------------------------------------------- ERROR trials


def erroring(task_id: str, setup: int, last: str) -> str:
    """A script task whose set-up exits `setup` (1: an ERROR before grading) and whose
    agent's last action is `last` (`{fail: ...}`: an ERROR that reached grading)."""
    return (f"task_id: {task_id}\ndescription: {task_id}\ninitial_prompt: go\nagent:\n"
            f"  type: script\n  script:\n    - {WRITE}\n    - {last}\n"
            "sandbox: {driver: tempdir, python: null}\n"
            f"pre_run:\n  - command: 'exit {setup}'\n    fail_on_error: true\n"
            "success_criteria:\n  - {type: file_exists, path: out.txt, description: d}\n")


def test_the_usage_section_says_which_error_trials_its_means_are_over(tmp_path):
    """A's `crashed` (the agent ended in an error, then was graded) and `broken` (its
    set-up failed: never graded) are ERROR trials, which count as graded (any status but
    NOT_GRADED): the section said 'over the 3 matched trial(s) both runs graded', as if
    every one had been."""
    runs = {}
    for name, (setup, last) in {"a": (1, "{fail: boom}"), "b": (0, SAY)}.items():
        suite = tmp_path / f"suite-{name}"
        suite.mkdir()
        for task_id, text in (("fine", erroring("fine", 0, SAY)),
                              ("crashed", erroring("crashed", 0, last)),
                              ("broken", erroring("broken", setup, SAY))):
            (suite / f"{task_id}.yaml").write_text(text)
        ce("run", str(suite), "--run-dir", str(tmp_path / name), "-q", cwd=tmp_path)
        runs[name] = str(tmp_path / name)
    md = ce("compare", runs["a"], runs["b"], cwd=tmp_path)
    assert md.returncode == 0, md.stderr
    assert "| Trials | A 3 (2 ERROR), B 3; 3 matched" in md.stdout
    assert ("## Usage per trial (over the 3 matched trial(s) both runs graded or ended in "
            "an ERROR (A's 2 ERROR trial(s), 1 of which never reached grading); — unknown"
            in md.stdout)
    doc = json.loads(ce("compare", runs["a"], runs["b"], "-f", "json", cwd=tmp_path).stdout)
    u = doc["usage"]
    assert (u["trials"], u["errors_a"], u["before_grading_a"], u["errors_b"],
            u["before_grading_b"]) == (3, 2, 1, 0, 0)
    # both runs the other way round, and B against itself: no ERROR, the plain words
    back = ce("compare", runs["b"], runs["a"], cwd=tmp_path).stdout
    assert "(B's 2 ERROR trial(s), 1 of which never reached grading)" in back
    same = ce("compare", runs["b"], runs["b"], cwd=tmp_path).stdout
    assert "## Usage per trial (over the 3 matched trial(s) both runs graded; " in same


ERROR_EXPERIMENT = f"""\
experiment_id: usage-errors
defaults:
  agent: {{type: script}}
variants:
  - variant_id: steady
    agent:
      script: [{WRITE}, {SAY}]
  - variant_id: crashy
    agent:
      script: [{WRITE}, {{fail: boom}}]
"""


def test_report_md_says_which_error_trials_each_variants_usage_is_over(tmp_path):
    """Each variant's usage means are over its graded trials, and graded is any status
    but NOT_GRADED: `broken` (its set-up fails: never graded) is an ERROR trial in both
    variants, and crashy's `fine` too (its agent fails, then it is graded). report.md
    said 'over each variant's graded trials', as if every one had been; it says how many
    trials, how many of them ERROR and how many never reached grading, of each variant
    and of each side of the pairs against the baseline; report.html shows the same
    cells, run.json has the counts."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "fine.yaml").write_text(task("fine", []))
    (suite / "broken.yaml").write_text(erroring("broken", 1, SAY))
    (tmp_path / "exp.yaml").write_text(ERROR_EXPERIMENT)
    res = ce("run", str(suite), "-e", str(tmp_path / "exp.yaml"), "--run-dir",
             str(tmp_path / "run"), "-q", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    counts = ("trials", "errors", "before_grading")
    assert [tuple(run["variants"][v]["per_trial"][k] for k in counts)
            for v in ("steady", "crashy")] == [(2, 1, 1), (2, 2, 1)]
    [c] = run["comparison"]
    assert tuple(c["per_trial"][k] for k in (*counts, "baseline_errors",
                                             "baseline_before_grading")) == (2, 2, 1, 1, 1)

    md = (tmp_path / "run" / "report.md").read_text()
    part = md.split("### Usage per trial", 1)[1].split("\n### ", 1)[0]
    assert ("over each variant's graded trials: any status but NOT_GRADED, so the ERROR "
            "ones too (Trials: how many, how many of them ERROR and how many never reached "
            "grading)") in part
    assert ("over the trials both graded (same task, row and repeat; the ERROR ones too: "
            "Paired trials says how many, of which side, and how many never reached "
            "grading)") in part
    rows = [[c.strip() for c in x.strip("|").split("|")] for x in part.splitlines()
            if x.startswith("| `")]
    assert [r[:2] for r in rows] == [
        ["`steady`", "2 (1 ERROR, 1 never reached grading)"],
        ["`crashy`", "2 (2 ERROR, 1 never reached grading)"],
        ["`crashy`", "2 (baseline: 1 ERROR, 1 never reached grading; "
                     "variant: 2 ERROR, 1 never reached grading)"]]
    html = (tmp_path / "run" / "report.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="ce-data">(.*?)'
                                r"</script>", html, re.S).group(1))
    assert [[f"`{r[0]}`", *r[1:]] for _, _, t in data["usage_tables"] for r in t] == rows
    assert [title for title, _, _ in data["usage_tables"]] == [
        line.removesuffix(":") for line in part.splitlines()
        if line.startswith(("Mean (median)", "Against the baseline"))]
