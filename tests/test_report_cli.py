"""`ce report`: every report regenerated from a run directory's parquet, on a real run.

The run (tests/report_run.py: two variants, a classification suite with wrong answers, an
early stop, a failing file check) is made once by the CLI. The markdown and JSON reports
are pinned as goldens with the run-specific values (run id, paths, times) normalised:
`CE_UPDATE_GOLDENS=1 pytest tests/test_report_cli.py` rewrites tests/golden/report_run.*;
read the diff.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.report_run import CE, CONFUSION, make_run

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("CE_UPDATE_GOLDENS") == "1"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("report-cli"))


def ce_report(*args, cwd=None):
    return subprocess.run([*CE, "report", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden {name}: run with CE_UPDATE_GOLDENS=1 and read it"
    assert text == path.read_text(encoding="utf-8")


def normalise_md(text: str, run_id: str) -> str:
    text = text.replace(run_id, "RUN_ID")
    text = re.sub(r"\| Trial time \| [^|(]+\(", "| Trial time | T (", text)
    # the usage tables' last column is the trials' wall time: WALL
    out, in_usage = [], False
    for line in text.split("\n"):
        if line.startswith(("| Variant | Trials | Turns |", "| Variant | Paired trials |")):
            in_usage = True
        elif not line.startswith("|"):
            in_usage = False
        elif in_usage and not line.startswith("|---"):
            line = line[:line.rstrip(" |").rindex("|")] + "| WALL |"
        out.append(line)
    return "\n".join(out)


def normalise_json(doc, run_dir: str):
    root = os.path.dirname(os.path.dirname(run_dir))  # the tmp dir the tasks are in

    def walk(v, key=None):
        if key == "duration_s" and isinstance(v, dict):  # usage per trial: its means
            return {k: 0.0 if isinstance(x, float) else x for k, x in v.items()}
        if isinstance(v, dict):
            return {k: walk(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if key == "duration_s" and isinstance(v, int | float):
            return 0.0
        if key == "run_id":
            return "RUN_ID"
        if key == "created_at":
            return "TIME"
        if isinstance(v, str) and root in v:
            return v.replace(root, "TMP")
        return v

    doc = walk(doc)
    # the run's own arguments change whenever `ce run` gains an option: not the report's
    doc["args"] = {k: doc["args"].get(k) for k in ("agent_type", "experiment", "paths")}
    return doc


def rounded(v):
    """Floats to 9 digits: Polars' parallel group-by sums in any order (1e-16 noise)."""
    if isinstance(v, dict):
        return {k: rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [rounded(x) for x in v]
    return round(v, 9) if isinstance(v, float) else v


def test_md_is_report_md(run_dir):
    """Regenerated from the parquet, report.md comes out as `ce run` wrote it."""
    res = ce_report(run_dir)
    assert res.returncode == 0, res.stderr
    assert res.stdout == Path(run_dir, "report.md").read_text(encoding="utf-8")


def test_md_golden(run_dir):
    res = ce_report(run_dir, "--format", "md")
    assert res.returncode == 0, res.stderr
    _golden("report_run.md", normalise_md(res.stdout, os.path.basename(run_dir)))


def test_json_is_run_json(run_dir):
    res = ce_report(run_dir, "-f", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert rounded(doc) == rounded(json.loads(Path(run_dir, "run.json").read_text("utf-8")))
    gate = next(g for g in doc["suite_gates"] if g["variant"] == "plain")
    cells = {(e, o): gate["confusion"][i][j] for i, e in enumerate(gate["labels"])
             for j, o in enumerate(gate["labels"])}
    assert cells == CONFUSION


def test_json_golden(run_dir):
    res = ce_report(run_dir, "-f", "json")
    assert res.returncode == 0, res.stderr
    doc = rounded(normalise_json(json.loads(res.stdout), run_dir))
    _golden("report_run.json", json.dumps(doc, indent=2, sort_keys=True) + "\n")


def test_junit_and_output_file(run_dir, tmp_path):
    out = tmp_path / "deep" / "junit.xml"
    res = ce_report(run_dir, "-f", "junit", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout == "" and str(out) in res.stderr
    root = ET.parse(out).getroot()
    assert root.get("tests") == str(16 + 2)  # 16 trials and 2 thresholded suite gates
    assert {s.get("name") for s in root.iter("testsuite")} == {"plain", "with-notes"}


def test_runs_directory_means_its_latest(run_dir):
    runs = os.path.dirname(run_dir)
    res = ce_report(runs)
    assert res.returncode == 0, res.stderr
    assert res.stdout == Path(run_dir, "report.md").read_text(encoding="utf-8")
    assert f"ce report: {runs} is a directory of runs; using the latest, " \
           f"{os.path.realpath(run_dir)}" in res.stderr  # said, not silent
    assert "directory of runs" not in ce_report(run_dir).stderr  # a run itself: nothing


def test_html_is_self_contained(run_dir, tmp_path):
    out = tmp_path / "r.html"
    res = ce_report(run_dir, "-f", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    html = out.read_text(encoding="utf-8")
    written = Path(run_dir, "report.html").read_text(encoding="utf-8")  # by ce run
    assert len(re.findall(r'<script type="application/json" id="ce-d\d+">', written)) == 16
    # nothing fetched at view time: no src/href to anything, no URL but the SVG namespace
    assert not re.search(r"""\b(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {"http://www.w3.org/2000/svg"}
    details = re.findall(r'<script type="application/json" id="ce-d(\d+)">', html)
    assert len(details) == 16


def test_run_page_is_the_report_page(run_dir, tmp_path):
    """`ce run` makes report.html from the records in memory (reshaped as the parquet
    reads back, its summary and gates not recomputed): byte for byte the page `ce report`
    makes from the files, on a run with variants, a suite, gates and an early stop."""
    out = tmp_path / "r.html"
    res = ce_report(run_dir, "-f", "html", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == Path(run_dir, "report.html").read_bytes()


@pytest.mark.parametrize("worker", ["1", "0"])
def test_rescored_results(run_dir, tmp_path, worker):
    """The re-scored results are a run directory of their own: reported the same way,
    and written with report.html beside report.md as `ce run` writes them (a re-score
    wrote report.md only), by the report worker or without one: the page `ce report -f
    html` makes of the results, byte for byte (made while they were staged, under
    another name)."""
    out = tmp_path / "rescored"
    res = subprocess.run([*CE, "rescore", run_dir, "--out", str(out)], capture_output=True,
                         text=True, timeout=300,
                         env={**os.environ, "CE_REPORT_WORKER": worker})
    assert res.returncode in (0, 1), res.stderr
    assert "report.html" not in res.stderr  # no warning that it was not written
    md = ce_report(str(out))
    assert md.returncode == 0, md.stderr
    assert md.stdout == (out / "report.md").read_text(encoding="utf-8")
    html = ce_report(str(out), "-f", "html", "-o", str(tmp_path / "r.html"))
    assert html.returncode == 0, html.stderr
    assert (out / "report.html").read_bytes() == (tmp_path / "r.html").read_bytes()
    page = (out / "report.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<script type="application/json" id="ce-d\d+">', page)) == 16


def test_a_big_rescore_page_leaves_the_trials_detail_out(run_dir, tmp_path, monkeypatch):
    """Past RESCORE_DETAIL_TRIALS trials a re-score's page holds the tables and summaries
    but no trial's detail (reading every trial's files for it cost as much as re-grading
    them: ce rescore's 1,000 trials/s halved at 10,000), and says where to get it."""
    import glob

    from ce_runtime.report import run_end
    from ce_runtime.store.record import read_record

    out = tmp_path / "out"
    shutil.copytree(run_dir, out, symlinks=True)
    records = [read_record(os.path.dirname(p))
               for p in sorted(glob.glob(str(out / "**" / "task.json"), recursive=True))]
    assert len(records) == 16
    monkeypatch.setattr(run_end, "RESCORE_DETAIL_TRIALS", 15)
    run_end.write_rescore_reports(str(out), records, "out", str(run_dir))
    page = (out / "report.html").read_text(encoding="utf-8")
    assert not re.findall(r'<script type="application/json" id="ce-d\d+">', page)
    assert '"detail_note":"A re-score of 16 trials: its page leaves each trial\'s detail ' \
           'out' in page and f"`ce report {out} -f html` makes the page with it" in page
    assert all(f'["{r.trial_id}",' in page for r in records)  # every trial's row
    monkeypatch.setattr(run_end, "RESCORE_DETAIL_TRIALS", 16)
    run_end.write_rescore_reports(str(out), records, "out", str(run_dir))
    page = (out / "report.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<script type="application/json" id="ce-d\d+">', page)) == 16
    assert '"detail_note":null' in page


def _one_line_error(res, code: int, path: str) -> None:
    assert res.returncode == code, (res.returncode, res.stderr)
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("ce report: ") and path in lines[0]


def test_not_a_run_directory(tmp_path):
    _one_line_error(ce_report(str(tmp_path)), 2, str(tmp_path))
    missing = str(tmp_path / "nope")
    _one_line_error(ce_report(missing), 2, missing)
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    _one_line_error(ce_report(str(a_file)), 2, str(a_file))


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "not_ce"])
def test_damaged_parquet(run_dir, tmp_path, damage):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    target = copy / ("results.parquet" if damage == "not_ce" else "trials.parquet")
    data = target.read_bytes()
    if damage == "truncated":
        target.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        target.write_bytes(b"PAR1" + os.urandom(300) + b"PAR1")
    elif damage == "empty":
        target.write_bytes(b"")
    else:  # a valid parquet file that is not ce's results
        shutil.copy(copy / "trials.parquet", target)
    for fmt in ("md", "html"):
        _one_line_error(ce_report(str(copy), "-f", fmt), 1, str(target))


def test_an_older_parquet_without_the_early_stop_columns_still_reports(run_dir, tmp_path):
    """trials.parquet before `early_stop` and `turns_remaining_at_stop` were kept: the
    early stops are reported as before, without the turns they saved (not known)."""
    import polars as pl

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    trials = pl.read_parquet(copy / "trials.parquet")
    assert trials["turns_remaining_at_stop"].drop_nulls().to_list() == [99, 99]
    trials.drop("early_stop", "turns_remaining_at_stop").write_parquet(
        copy / "trials.parquet")
    res = ce_report(str(copy))
    assert res.returncode == 0, res.stderr
    assert "| Stopped early | 2 trial(s) |" in res.stdout
    assert "stopped early (every armed criterion decided pass); it was gated" in res.stdout
    assert "avoided" not in res.stdout
    summary = json.loads(ce_report(str(copy), "-f", "json").stdout)
    assert summary["stopped_early"] == 2 and "turns_avoided" not in summary


def test_damaged_or_missing_parts(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    (copy / "run.json").write_text("{not json")
    _one_line_error(ce_report(str(copy)), 1, str(copy / "run.json"))
    (copy / "run.json").write_text("{}")
    (copy / "results.parquet").unlink()
    _one_line_error(ce_report(str(copy)), 1, str(copy / "results.parquet"))


def test_damaged_trial_files_still_report(run_dir, tmp_path):
    """The HTML's per-trial detail is best effort: a damaged trace or a missing trial
    directory is said in that trial's panel, the report is still written."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    trace = copy / "plain" / "files" / "00" / "trace.msgpack"
    trace.write_bytes(trace.read_bytes()[:-7])
    shutil.rmtree(copy / "with-notes" / "early")
    odd = copy / "plain" / "early" / "00" / "task.json"
    odd.write_text(json.dumps({**json.loads(odd.read_text()), "criteria": {"c0": 1}}))
    res = ce_report(str(copy), "-f", "html")
    assert res.returncode == 0, res.stderr
    assert "the trace is damaged" in res.stdout
    assert "the trial directory is missing" in res.stdout
    # a task.json of the wrong shape is not a trial record: said, the parquet's shown
    assert "task.json is unreadable (Expected `array`, got `object` - at `$.criteria`)" \
        in res.stdout


def test_detail_is_capped(run_dir):
    """A tiny budget: every text is cut (and says so) and the detail fits."""
    from ce_runtime.report.html_trial import TemplateCache, trial_detail
    from ce_runtime.report.rundir import load_run

    data = load_run(run_dir)
    rec = next(r for r in data.records if r.trial_id == "plain/files/00")
    full = json.loads(trial_detail(data.run_dir, rec, 200_000, TemplateCache(data.run_dir)))
    assert [f["status"] for f in full["files"]] == ["unchanged", "modified"]
    assert "+status: ok" in full["files"][1]["diff"]
    small = trial_detail(data.run_dir, rec, 2_000, TemplateCache(data.run_dir))
    # ~3 KB: the texts cut to the budget, plus the structure and the short evidence
    # lines (why c2 failed) that are kept whole
    assert len(small) < len(json.dumps(full)) and len(small) < 3_300
    assert "not embedded in this report" in small


def test_an_empty_template_is_known_without_rebuilding_it(run_dir):
    """A plan without template sources or recorded CLIs starts from an empty workspace:
    the report says so without loading the plan, and gets what the rebuild gets."""
    from ce_runtime.report.html_trial import TemplateCache
    from ce_runtime.report.rundir import load_run

    data = load_run(run_dir)
    cache = TemplateCache(data.run_dir)
    empty = 0
    for rec in data.records:
        got = cache.get(rec.plan_hash, rec.task_dir)
        assert got == cache._build(rec.plan_hash, rec.task_dir or ""), rec.trial_id
        empty += bool(cache.plan_facts(rec.plan_hash).get("empty_template"))
    assert 0 < empty < len(data.records)  # both kinds are in the fixture's run


def test_forged_manifest_reads_nothing_outside_objects(run_dir, tmp_path):
    """workspace.json is archive data: a `sha256` that is a path (objects/../..//secret)
    never brings a file from outside objects/ into the report."""
    import uuid

    secret = f"/tmp/ce-secret-{uuid.uuid4().hex[:8]}.txt"
    Path(secret).write_text("TOP-SECRET-VALUE\n")
    try:
        forged = ".." + "/" * (63 - len(secret)) + secret.lstrip("/")
        assert len(forged) == 64 and os.path.realpath(
            os.path.join(run_dir, "objects", forged[:2], forged[2:])) == secret
        copy = tmp_path / "run"
        shutil.copytree(run_dir, copy, symlinks=True)
        manifest = copy / "plain" / "files" / "00" / "workspace.json"
        doc = json.loads(manifest.read_text())
        doc["files"]["stolen.txt"] = {"sha256": forged, "size": 17, "mode": 0o644}
        manifest.write_text(json.dumps(doc))
        res = ce_report(str(copy), "-f", "html")
        assert res.returncode == 0, res.stderr
        assert "stolen.txt" in res.stdout and "TOP-SECRET-VALUE" not in res.stdout
    finally:
        os.unlink(secret)


def test_judge_rationale_in_the_trial_detail(tmp_path):
    """The bundled judged example (a scripted judge): its verdict's rationale is in the
    trial's detail, under the llm_judge criterion."""
    root = Path(__file__).resolve().parent.parent
    runs = tmp_path / "runs"
    res = subprocess.run([*CE, "run", str(root / "tasks" / "judged.yaml"), "--agent", "oracle",
                          "--judge-replies", str(root / "tasks" / "judged.replies.yaml"),
                          "--runs-root", str(runs)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "CE_PLAIN": "1"})
    assert res.returncode in (0, 1), res.stderr[-2000:]
    html = (runs / "latest" / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'<script type="application/json" id="ce-d0">(.*?)</script>', html)
    detail = json.loads(blob.group(1))
    judged = [ev for c in detail["criteria"] for ev in c["evidence"] if ev["kind"] == "judge"]
    assert judged and all(ev["rationale"] for ev in judged)


def test_a_bug_in_the_html_costs_ce_run_only_the_page(tmp_path, monkeypatch, capsys):
    """ce run writes report.html last; a bug there is a warning, not the run's exit 3."""
    import ce_runtime.report.render as cli_report
    from ce_runtime.report import run_end

    def broken(run, fmt):
        raise ValueError("boom")

    monkeypatch.setattr(cli_report, "render", broken)
    monkeypatch.delenv("CE_DEBUG", raising=False)
    run_end.write_html(str(tmp_path))
    err = capsys.readouterr().err
    assert "report.html not written: a bug in ce (ValueError: boom)" in err
    assert not (tmp_path / "report.html").exists()


UNSCORED = """\
task_id: some_error
description: the second of three repeats fails its pre_run (an ERROR before grading)
agent: {{type: none}}
sandbox: {{driver: tempdir, python: null}}
pre_run:
  - command: "echo x >> {count} && test $(wc -l < {count}) -ne 2 && touch done.txt"
success_criteria:
  - {{type: file_exists, path: done.txt, description: done}}
"""


def test_a_mean_score_that_leaves_trials_out_says_so(tmp_path):
    """An ERROR before grading has no score: the mean (1.00) is over the others, while
    the pass rate counts it (2/3). The report said `Mean score | 1.00` alone."""
    (tmp_path / "t.yaml").write_text(UNSCORED.format(count=tmp_path / "count"))
    res = subprocess.run([*CE, "run", "t.yaml", "--repeats", "3", "--run-dir", "run"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 1, res.stderr
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert (run["graded"], run["passed"], run["mean_score"], run["unscored"]) == (3, 2, 1.0, 1)
    md = (tmp_path / "run" / "report.md").read_text()
    assert "| Mean score | 1.00 (over 2 of 3 graded trials: 1 without a score) |" in md
    html = (tmp_path / "run" / "report.html").read_text()
    assert '"unscored":1' in html.replace(" ", "")
