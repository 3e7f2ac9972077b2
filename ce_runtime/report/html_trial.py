"""One trial's detail for the HTML report, read from its trial directory: the criteria with
their evidence (evidence.json: command runs, judge rationales), the arithmetic to the
weighted score, set-up and pre/post-run command output, the trace as a timeline (turns,
tool calls and results, tokens, cost, the early-stop decision) and the workspace's files
with their diff against the template, all within a byte budget.

Nothing is graded again: the evaluation tree of a criterion (`ce explain TRIAL_DIR`) needs
a re-grade, so the page names that command instead of embedding the tree. The template is
rebuilt from the trial's plan (its starter files and template directories, once per plan);
a template that clones a repository is not rebuilt (no network, no git), and then the
files are listed without a diff.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import tempfile
from typing import Any

import msgspec

from ce_runtime.report.rundir import load_json_object, trial_dir
from ce_runtime.report.text import fmt_apart, fmt_below
from ce_runtime.store.record import InvalidRecord, TrialRecord, as_record, decode_record

HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_FILES = 200  # files listed per trial
TEXT_FILE_LIMIT = 1_000_000  # bytes read from a file to show it or diff it


def _cut(text: Any, cap: int) -> str:
    s = "" if text is None else str(text)
    if len(s) <= cap:
        return s
    return s[:cap] + f"\n… [{len(s) - cap:,} more characters not embedded in this report]"


def trial_detail(run_dir: str, rec: TrialRecord | dict[str, Any], budget: int,
                 templates: TemplateCache, raw: dict[str, Any] | None = None) -> str:
    """The trial's detail as JSON text of at most about `budget` bytes: texts are cut
    shorter until it fits (each cut says how much was left out). `raw`: its files as
    `TrialReads` read them ahead (None: read now)."""
    from ce_runtime.report.html import dumps

    rec = as_record(rec)
    raw = _read_trial(run_dir, rec, templates) if raw is None else raw
    cap = max(200, budget // 4)
    while True:
        detail = _shape(rec, raw, cap, max_events=max(20, budget // 150))
        text = dumps(detail)
        if len(text) <= budget or cap <= 100:
            return text
        cap //= 2
        budget_events = max(10, budget // 300)
        if len(raw.get("events") or ()) > budget_events:
            raw["events"] = raw["events"][:budget_events]
            raw["events_cut"] = True


def _load_record(path: str) -> tuple[TrialRecord | None, str | None]:
    """task.json as a record, else None and why (the detail shows the parquet's)."""
    try:
        with open(path, "rb") as fh:
            return decode_record(fh.read(), "task.json"), None
    except OSError:
        return None, "task.json is missing or unreadable"
    except InvalidRecord as exc:
        return None, f"task.json is unreadable ({exc.why[:200]})"


def _read_trial(run_dir: str, rec: TrialRecord, templates: TemplateCache
                ) -> dict[str, Any]:
    """Everything the detail may show, uncut."""
    from ce_runtime.execute.attempts import attempt_records

    notes: list[str] = []
    tdir = trial_dir(run_dir, rec.trial_id or "")
    if tdir is None:
        return {"notes": ["the trial directory is missing: only the parquet's results "
                          "are shown"], "task": None, "evidence": {}, "events": [],
                "files": None, "plan": templates.plan_facts(rec.plan_hash)}
    task, why = _load_record(os.path.join(tdir, "task.json"))
    if why:
        notes.append(why)
    evidence = (load_json_object(os.path.join(tdir, "evidence.json")) or {}).get(
        "criteria") or {}
    events, trace_note = _timeline(os.path.join(tdir, "trace.msgpack"))
    if trace_note:
        notes.append(trace_note)
    manifest = load_json_object(os.path.join(tdir, "workspace.json"))
    files = None
    if manifest and isinstance(manifest.get("files"), dict):
        template, why = templates.get(rec.plan_hash, task.task_dir if task else None)
        if why:
            notes.append(why)
        files = _files(manifest["files"], template, os.path.join(run_dir, "objects"))
    else:
        notes.append("workspace.json is missing or unreadable: no files to show")
    return {"notes": notes, "task": task, "evidence": evidence, "events": events,
            "files": files, "dir": os.path.relpath(tdir, run_dir),
            "plan": templates.plan_facts(rec.plan_hash),
            "attempts": attempt_records(run_dir, tdir, rec.plan_hash)}


# -- the trace ---------------------------------------------------------------------------
def _timeline(path: str) -> tuple[list[dict[str, Any]], str | None]:
    """The trace as entries: messages, tool calls with their results, usage, decisions,
    the end. A damaged trace shows its readable prefix and says so."""
    if not os.path.isfile(path):
        return [], "no trace (trace.msgpack) in the trial directory"
    from ce_runtime.trace import events as T

    note = None
    try:
        read = T.load_trace(path)
    except T.TraceDamaged as exc:
        read = T.read_trace(path)
        note = f"the trace is damaged ({exc.why} at byte {exc.offset}): its first " \
               f"{len(read.events)} events are shown"
    except OSError as exc:
        return [], f"the trace is unreadable ({exc.strerror})"
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    turn = 0
    tokens_in = tokens_out = cache_read = cache_write = 0
    cost = 0.0
    for ev in read.events:
        t = round(ev.t, 3)
        if isinstance(ev, T.TurnStart):
            turn = ev.turn
        elif isinstance(ev, T.Message):
            out.append({"t": t, "turn": turn, "k": "message", "role": ev.role,
                        "text": ev.text})
        elif isinstance(ev, T.ToolCall):
            entry = {"t": t, "turn": turn, "k": "tool", "tool": ev.tool,
                     "raw_tool": ev.raw_tool, "params": _params(ev.params)}
            calls[ev.call_id] = entry
            out.append(entry)
        elif isinstance(ev, T.ToolResult):
            entry = calls.get(ev.call_id)
            if entry is None:
                out.append({"t": t, "turn": turn, "k": "result", "status": ev.status,
                            "output": ev.output})
            else:
                entry.update(status=ev.status, output=ev.output,
                             ms=round(ev.duration_ms, 1))
        elif isinstance(ev, T.Usage):
            tokens_in += ev.input_tokens
            tokens_out += ev.output_tokens
            cache_read += ev.cache_read_tokens
            cache_write += ev.cache_creation_tokens
            cost += ev.cost_usd
            # the prompt cache's tokens too, as task.json's usage counts them
            out.append({"t": t, "turn": turn, "k": "usage", "in": ev.input_tokens,
                        "out": ev.output_tokens, "cache_read": ev.cache_read_tokens,
                        "cache_write": ev.cache_creation_tokens, "cost": ev.cost_usd,
                        "total_in": tokens_in, "total_out": tokens_out,
                        "total_cache_read": cache_read, "total_cache_write": cache_write,
                        "total_cost": round(cost, 6)})
        elif isinstance(ev, T.ModelError):
            out.append({"t": t, "turn": turn, "k": "model_error", "text": ev.summary()})
        elif isinstance(ev, T.Decision):
            out.append({"t": t, "turn": turn, "k": "decision", "criterion": ev.criterion,
                        "verdict": ev.verdict, "event": ev.event_index})
        elif isinstance(ev, T.AgentEnd):
            out.append({"t": t, "turn": turn, "k": "end", "reason": ev.reason,
                        "detail": ev.detail})
        elif isinstance(ev, T.RunEnd):
            out.append({"t": t, "turn": turn, "k": "run_end", "status": ev.status,
                        "error": ev.error})
        elif isinstance(ev, T.AgentStart):
            out.append({"t": t, "turn": turn, "k": "start", "agent": ev.agent,
                        "model": ev.model})
    return out, note


def _params(params: dict[str, Any]) -> str:
    if set(params) == {"command"} or ("command" in params and len(params) <= 2):
        return str(params.get("command"))
    try:
        return json.dumps(params, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(params)


# -- the workspace -----------------------------------------------------------------------
class TrialReads:
    """The trial directories' files as a detail reads them, read ahead: the report
    worker reads each trial's while the next trials run, and the page of the run's end
    takes them (a trial not read ahead is read then). `run_dir`: its real path, as
    RunData's."""

    BUDGET = 64_000_000  # about this many bytes of texts kept; later trials read at the end

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.templates = TemplateCache(run_dir)
        self._raw: dict[tuple[str, str | None, str | None], dict[str, Any]] = {}
        self._kept = 0

    def read_ahead(self, rec: TrialRecord) -> None:
        if self._kept >= self.BUDGET:
            return
        with contextlib.suppress(Exception):  # read again at the end (and said there)
            raw = _read_trial(self.run_dir, rec, self.templates)
            # the record's digest too: a trial run again (`--retry-errors`) is read again
            self._raw[(rec.trial_id, rec.plan_hash, rec.record_sha256)] = raw
            self._kept += _size(raw)

    def get(self, rec: TrialRecord) -> dict[str, Any] | None:
        """What `_read_trial` read ahead for `rec` (a copy: a detail cuts its timeline
        in place), else None."""
        raw = self._raw.get((rec.trial_id, rec.plan_hash, rec.record_sha256))
        return None if raw is None else dict(raw)


def _size(raw: dict[str, Any]) -> int:
    """About how many bytes `_read_trial`'s texts hold (its files' texts and diffs, its
    timeline's entries)."""
    files = raw.get("files") or ()
    return (sum(len(f.get("text") or "") + len(f.get("diff") or "") for f in files)
            + 500 * len(raw.get("events") or ()) + 1000)


class TemplateCache:
    """The template's files (path -> bytes, or None for a link) per plan, rebuilt once per
    plan hash from the plan's template sources: from the task directory while its
    template directories hold the bytes the run kept (templates/<hash>.json), else from
    the copies kept, and the panel says so (store/task_files.py)."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._cache: dict[str, tuple[dict[str, bytes | None] | None, str | None]] = {}
        self._plans: dict[str, dict[str, Any]] = {}

    def plan_facts(self, plan_hash: str | None) -> dict[str, Any]:
        """The trial's prompt and each criterion's bound arguments (from
        plans/<hash>.json; {} when it is missing or unreadable)."""
        if not plan_hash or not isinstance(plan_hash, str) or "/" in plan_hash:
            return {}
        if plan_hash not in self._plans:
            doc = load_json_object(os.path.join(self.run_dir, "plans", f"{plan_hash}.json"))
            plan = (doc or {}).get("plan")
            facts: dict[str, Any] = {}
            if isinstance(plan, dict):
                facts["prompt"] = plan.get("prompt") if isinstance(plan.get("prompt"),
                                                                  str) else None
                facts["args"] = {c.get("id"): c.get("args") for c in plan.get("criteria") or ()
                                 if isinstance(c, dict) and isinstance(c.get("args"), dict)}
                sandbox = plan.get("sandbox")
                facts["empty_template"] = (
                    (doc or {}).get("hash") == plan_hash and isinstance(sandbox, dict)
                    and all(sandbox.get(k) == [] for k in ("template_sources", "record_cli")))
            self._plans[plan_hash] = facts
        return self._plans[plan_hash]

    def get(self, plan_hash: str | None, task_dir: str | None
            ) -> tuple[dict[str, bytes | None] | None, str | None]:
        if not plan_hash:
            return None, "the trial names no plan: files are shown without a diff"
        key = f"{plan_hash}\0{task_dir}"
        if key not in self._cache and self.plan_facts(plan_hash).get("empty_template"):
            # nothing to rebuild: a workspace that started empty (no template source, no
            # recorded CLI) is all new files, without loading the plan's classes
            self._cache[key] = ({}, None)
        if key not in self._cache:
            self._cache[key] = self._build(plan_hash, task_dir or "")
        return self._cache[key]

    def _build(self, plan_hash: str, task_dir: str
               ) -> tuple[dict[str, bytes | None] | None, str | None]:
        from ce_lang.api import RepoSource
        from ce_runtime.execute.sandbox.workspace import apply_sources
        from ce_runtime.grade.rescore import load_plan_file
        from ce_runtime.store.archive import DamagedArchive
        from ce_runtime.store.task_files import template_dir_for

        try:
            plan = load_plan_file(self.run_dir, plan_hash)
        except DamagedArchive as exc:
            return None, f"template not rebuilt ({exc}): files are shown without a diff"
        if any(isinstance(s, RepoSource) for s in plan.sandbox.template_sources):
            return None, ("the template clones a repository (not rebuilt for the report): "
                          "files are shown without a diff")
        try:  # the template directories as the run kept them, when they changed since
            source_dir, notes = template_dir_for(self.run_dir, plan_hash, task_dir)
        except DamagedArchive as exc:
            return None, f"template not rebuilt ({exc}): files are shown without a diff"
        ws = tempfile.mkdtemp(prefix="ce-report-template-")
        try:
            error = apply_sources(plan, source_dir, ws, [])
            if error:
                return None, f"template not rebuilt ({error}): files are shown without a " \
                             "diff"
            return _read_tree(ws), "; ".join(notes) or None
        finally:
            shutil.rmtree(ws, ignore_errors=True)


def _read_tree(root: str) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in (".venv", "node_modules", ".git",
                                                      "__pycache__"))
        for name in sorted(names):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if os.path.islink(full):
                out[rel] = None
            elif os.path.isfile(full):
                with open(full, "rb") as fh:
                    out[rel] = fh.read(TEXT_FILE_LIMIT + 1)
    return out


def _object(objects: str, digest: Any, size: int) -> bytes | None:
    if not isinstance(digest, str) or not HEX64.fullmatch(digest) or size > TEXT_FILE_LIMIT:
        return None  # a forged manifest names nothing outside objects/
    try:
        with open(os.path.join(objects, digest[:2], digest[2:]), "rb") as fh:
            return fh.read(TEXT_FILE_LIMIT + 1)
    except OSError:
        return None


def _text(data: bytes | None) -> str | None:
    if data is None or b"\0" in data[:8192] or len(data) > TEXT_FILE_LIMIT:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _files(entries: dict[str, Any], template: dict[str, bytes | None] | None,
           objects: str) -> list[dict[str, Any]]:
    """Each file of the final workspace, with its status against the template (added,
    modified, unchanged; a template file the workspace no longer has: deleted), the text
    of added files and the unified diff of modified ones (text files only)."""
    import hashlib

    out = []
    for path in sorted(entries):
        entry = entries[path] if isinstance(entries[path], dict) else {}
        if entry.get("dir") is True:  # an empty directory the grading found: no file
            continue
        if "link" in entry:
            out.append({"path": path, "status": "link", "link": str(entry["link"])})
            continue
        size = int(entry.get("size") or 0)
        digest = entry.get("sha256")
        item: dict[str, Any] = {"path": path, "size": size}
        if digest is None and entry.get("too_large") is True:
            out.append({**item, "status": "too large: not kept", "binary": True})
            continue
        before = None if template is None else template.get(path)
        if template is None:
            item["status"] = "file"
        elif path not in template:
            item["status"] = "added"
        elif before is not None and hashlib.sha256(before).hexdigest() == digest:
            item["status"] = "unchanged"
        else:
            item["status"] = "modified"
        if item["status"] in ("added", "modified", "file"):
            now = _text(_object(objects, digest, size))
            if now is None:
                item["binary"] = True
            elif item["status"] == "modified" and _text(before) is not None:
                item["diff"] = "".join(difflib.unified_diff(
                    _text(before).splitlines(keepends=True), now.splitlines(keepends=True),
                    fromfile=f"template/{path}", tofile=f"workspace/{path}"))
            else:
                item["text"] = now
        out.append(item)
    for path in sorted(set(template or ()) - set(entries)):
        out.append({"path": path, "status": "deleted"})
    return out


# -- shaping within the budget -----------------------------------------------------------
def _shape(rec: TrialRecord, raw: dict[str, Any], cap: int, max_events: int
           ) -> dict[str, Any]:
    task: TrialRecord | None = raw.get("task")
    evidence = raw.get("evidence") or {}
    plan = raw.get("plan") or {}
    args_of = plan.get("args") or {}
    criteria = []
    for c in (task.criteria if task else None) or rec.criteria:
        items = []
        for ev in evidence.get(c.id, ()) if isinstance(evidence, dict) else ():
            if not isinstance(ev, dict):
                continue
            if ev.get("kind") == "judge":
                items.append(_judge(ev, cap))
                continue
            item = {k: (_cut(v, cap) if isinstance(v, str) and k in (
                "stdout", "stderr", "rationale", "command", "error") else v)
                for k, v in ev.items() if k not in ("request", "usage")}
            if ev.get("kind") == "found" and isinstance(ev.get("lines"), list):
                item["lines"] = [_cut(str(line), cap // 4) for line in ev["lines"][:20]]
            items.append(item)
        criteria.append({
            "id": c.id, "type": c.type, "description": c.description,
            "kind": c.kind, "score": c.score,
            "pass_threshold": c.pass_threshold, "passed": c.passed,
            # a failed score and its threshold as report.md says them (fmt_below): the
            # panel's 3 and 2 decimals read 0.8999 against 0.9 `0.900 vs 0.90`
            "below": None if c.passed or c.disabled or c.error or c.score is None
            else list(fmt_apart(c.score, c.pass_threshold)),
            "weight": c.weight, "gating": c.gating,
            "advisory": c.advisory, "disabled": c.disabled,
            "error": _cut(c.error, cap) if c.error else None,
            "outputs": {k: _cut(json.dumps(v, ensure_ascii=False, default=str), cap // 4)
                        for k, v in c.outputs.items()},
            "args": {k: _cut(json.dumps(v, ensure_ascii=False, default=str), cap // 4)
                     for k, v in (args_of.get(c.id) or {}).items()},
            "evidence": items})
    events = raw.get("events") or []
    shown = []
    for e in events[:max_events]:
        e = dict(e)
        for k in ("text", "output", "params", "detail", "error"):
            if isinstance(e.get(k), str):
                e[k] = _cut(e[k], cap // 2)
        shown.append(e)
    notes = list(raw.get("notes") or ())
    if len(events) > max_events or raw.get("events_cut"):
        notes.append(f"the timeline shows the first {len(shown)} of its events (the "
                     "report's size cap); `ce trace dump` prints them all")
    files = raw.get("files")
    shown_files = None
    if files is not None:
        shown_files = []
        for f in files[:MAX_FILES]:
            f = dict(f)
            for k in ("text", "diff"):
                if isinstance(f.get(k), str):
                    f[k] = _cut(f[k], cap)
            shown_files.append(f)
        if len(files) > MAX_FILES:
            notes.append(f"{len(files) - MAX_FILES} more files are not listed")
    commands = []
    for phase in ("pre_run", "post_run"):
        for r in getattr(task, phase) if task else ():
            commands.append({"phase": phase, "command": _cut(r.command, cap // 2),
                             "exit_code": r.exit_code, "timed_out": r.timed_out, "ok": r.ok,
                             "stdout": _cut(r.stdout, cap), "stderr": _cut(r.stderr, cap)})
    outcome = (task.agent_outcome if task else None) or rec.agent_outcome
    sandbox = task.sandbox if task else None
    return {
        "trial_id": rec.trial_id, "dir": raw.get("dir"),
        "prompt": _cut(plan.get("prompt"), cap) if plan.get("prompt") else None,
        "status": rec.status, "weighted_score": rec.weighted_score,
        "error": _cut(rec.error, cap) if rec.error else None,
        "agent": rec.agent, "model": rec.model,
        "agent_outcome": msgspec.to_builtins(outcome),
        "started_at": rec.started_at, "duration_s": rec.duration_s,
        "usage": msgspec.to_builtins(rec.usage), "expected_turns": rec.expected_turns,
        "cost_unknown": rec.cost_unknown,
        # the judges' tokens and cost, apart from the agent's (run.json's `judges` sums
        # these): None when no judge was called
        "judge_usage": msgspec.to_builtins(rec.judge_usage) if rec.judge_usage else None,
        "stopped_early": rec.stopped_early,
        "early_stop_reason": rec.early_stop_reason,
        "early_stop": msgspec.to_builtins(task.early_stop) if task else None,
        "setup": [_cut(s, 300) for s in (task.setup if task else ())][:30],
        "sandbox": {"driver": sandbox.driver, "network": sandbox.network} if sandbox else None,
        "criteria": criteria, "arithmetic": arithmetic(criteria, rec),
        "commands": commands, "timeline": shown, "files": shown_files, "notes": notes,
        # the attempts before this one (`ce run --retry-errors`), oldest first
        "attempts": [{"n": n, "dir": where, "status": a.status if a else None,
                      "error": _cut(a.error_reason, cap // 2) if a and a.error_reason
                      else None} for n, where, a in raw.get("attempts") or ()],
    }


def _judge(ev: dict[str, Any], cap: int) -> dict[str, Any]:
    """A judge's verdict as `ce explain` says it (grade/judge_evidence.py's judge_lines,
    its rationale cut to the budget): `said` is its first line (the verdict, its model,
    where it came from, tokens and cost) and the lines under it (rationale, the
    agent_judge's session with its tool calls as `items`, its last words). The verdict's
    own fields stay beside it; the session's gist and the raw answer are in `said`."""
    from ce_runtime.grade.judge_evidence import judge_lines

    rationale = _cut(ev.get("rationale"), cap) if ev.get("rationale") else ""
    head, *rest = judge_lines({**ev, "rationale": rationale}, "")
    parts: list[dict[str, Any]] = []
    for line in rest:  # two spaces: a line of its own; four: one of the session's calls
        if line.startswith("    ") and parts:
            parts[-1]["items"].append(line.strip())
        else:
            parts.append({"text": line.strip(), "items": []})
    item = {k: ev[k] for k in ("kind", "judge", "model", "score", "recorded") if k in ev}
    item["rationale"] = rationale
    if ev.get("error"):
        item["error"] = _cut(ev["error"], cap)
    item["said"] = {"head": head, "parts": parts}
    return item


def _term(score: float, threshold: float | None) -> str:
    """A criterion's score in the weighted-score line: `.3g`, or as the gate line says it
    where `.3g` would read as its threshold (2/3 against 0.6667: `0.66667`, not `0.667`
    above `0.66667 < 0.6667`), as `ce explain` does."""
    shown = f"{score:.3g}"
    if threshold is None or score == threshold or shown != f"{threshold:.3g}":
        return shown
    return fmt_apart(score, threshold)[0]


def arithmetic(criteria: list[dict[str, Any]], rec: TrialRecord) -> list[str]:
    """From the criterion scores to the weighted score and the status (as `ce explain`
    ends its tree)."""
    if not criteria:  # an ERROR before grading: no result, not "no criterion with weight"
        why = ": the trial never reached grading" if rec.weighted_score is None else ""
        return [f"no criterion was graded{why} -> {rec.status}"]
    weighted = [c for c in criteria if (c.get("weight") or 0) > 0 and not c.get("disabled")]
    lines = []
    score = rec.weighted_score
    shown = "—" if score is None else f"{score:.4g}"
    if weighted:
        terms = " + ".join(f"{c['id']} {_term(c.get('score') or 0, c.get('pass_threshold'))}"
                           f"×{c['weight']:g}" for c in weighted)
        total = sum(c["weight"] for c in weighted)
        lines.append(f"weighted score = ({terms}) / {total:g} = {shown}")
    else:
        lines.append("weighted score = 0 (no criterion with weight > 0)")
    left_out = [f"{c['id']} ({'disabled' if c.get('disabled') else 'weight 0'})"
                for c in criteria if c.get("disabled") or not c.get("weight")]
    if left_out:
        lines.append("not in the score or the gate: " + ", ".join(left_out))
    gating = [c for c in criteria if c.get("gating")]
    failed = [c for c in gating if not c.get("passed")]
    scope = "armed criteria only (stopped early)" if rec.stopped_early \
        else "every enabled criterion with weight > 0"
    if failed:
        # report.md's rule (fmt_below): `.3g` read 2/3 against 0.6667 `0.667 < 0.667`
        why = ", ".join(f"{c['id']} error" if c.get("error") else
                        f"{c['id']} {fmt_below(c.get('score') or 0, c.get('pass_threshold') or 0)}"
                        for c in failed)
        lines.append(f"gate ({scope}): {why} -> {rec.status}")
    else:
        lines.append(f"gate ({scope}): {len(gating)}/{len(gating)} passed -> {rec.status}")
    return lines
