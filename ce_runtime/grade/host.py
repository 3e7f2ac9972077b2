"""What criteria reach outside the language: the workspace, commands, judges.

The interpreter's `Host`: each effectful builtin declared in `ce_lang.lang.builtins` is a
method here. Semantics follow SEMANTICS.md: paths relative to the workspace, a literal
existing path wins, otherwise a glob (files only, sorted, inside the workspace, ignore
patterns apply); reads need exactly one match and valid UTF-8, and see line ends as
Python's text mode does (CRLF and CR read as LF).

Re-scoring reads an archived workspace in place (`files`: store.snapshot_view, the
manifest and object store answering as the restored directory would); the workspace is
restored on disk (`materialize`) only for what needs it: a command, an agent judge, or
a question only the disk can answer (the builtin is then asked again, of the disk).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import attrs

from ce_lang.api import CriterionError, TraceView, read_regular
from ce_runtime.store.archive import FileTooLarge, check_size
from ce_runtime.store.snapshot_view import NeedsWorkspace


class InfrastructureError(Exception):
    """The harness could not grade (judge transport down, sandbox gone): the trial is ERROR."""


class SourceText(str):
    """File text that remembers where it came from (for evidence: path and positions)."""

    path: str

    def __new__(cls, text: str, path: str) -> SourceText:
        obj = super().__new__(cls, text)
        obj.path = path
        return obj


@attrs.frozen
class CommandRecord:
    command: str
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: float


@attrs.define
class Host:
    workspace: str
    task_dir: str = ""
    ignore_patterns: tuple[str, ...] = ()
    reference_file: str | None = None  # absolute path of a single-file reference
    reference_code: str | None = None
    reference_dir: str | None = None
    trace: TraceView | None = None
    judge: Any = None  # a judge transport: .verdict(kind, rubric, files, settings) -> dict
    # runs criteria commands in the trial's sandbox: .run(command, timeout, max_output)
    # -> exit_code/stdout/stderr/timed_out/duration_ms, and .cancel() from another thread
    runner: Any = None
    commands: list[CommandRecord] = attrs.field(factory=list)
    judge_sessions: list[dict[str, Any]] = attrs.field(factory=list)  # agent_judge runs
    verdicts: Any = None  # store.verdicts.VerdictStore: recorded judge verdicts
    current: str | None = None  # the criterion being graded (its evidence is filed under it)
    evidence: dict[str, list[dict[str, Any]]] = attrs.field(factory=dict)
    reads: list[str] = attrs.field(factory=list)
    # what the criteria found in the live workspace (literal paths, glob matches): the
    # trial's snapshot keeps them where it would skip them (store/workspace_snapshot.py), so a
    # re-grade of the archive finds them too
    found: set[str] = attrs.field(factory=set)
    # An archived workspace read in place (store.snapshot_view.SnapshotView), with
    # `materialize() -> directory` restoring it on disk when a criterion needs the real
    # one (a command, an agent judge, a question the snapshot cannot answer exactly).
    # The answers are the restored directory's; `workspace` is set when restored.
    files: Any = None
    materialize: Any = None
    _step_cache: dict = attrs.field(factory=dict)
    _resolved_root: Path | None = None  # the workspace, resolved once per grading

    def cancel(self) -> None:
        """Kill the commands running now and refuse to start more: the trial was
        interrupted, its grading (in another thread) must not run on to a slow command's
        timeout in a workspace about to be removed."""
        if self.runner is not None:
            self.runner.cancel()

    def call(self, name: str, args: list[Any]) -> Any:
        method = getattr(self, "b_" + name, None)
        if method is None:
            raise InfrastructureError(f"builtin `{name}` has no implementation in this host")
        key = (name, repr(args))
        if name in _CACHEABLE and key in self._step_cache:  # shared workspace reads
            return self._step_cache[key]
        if self.files is None:
            value = method(*args)
        else:
            reads = len(self.reads)
            try:
                value = method(*args)
            except NeedsWorkspace:  # before any effect: ask the restored directory
                del self.reads[reads:]
                self.use_workspace()
                value = method(*args)
        if name in _CACHEABLE:
            self._step_cache[key] = value
        elif name in ("run", "uipath_eval"):
            self._step_cache.clear()  # a command may change what later reads see
        return value

    # -- paths -------------------------------------------------------------------------------
    def use_workspace(self) -> str:
        """The workspace on disk (an archived one is restored now, once)."""
        if self.files is not None:
            if self.materialize is None:
                raise InfrastructureError("this archived workspace cannot be restored here")
            self.workspace = self.materialize()
            self.files = None
            self._resolved_root = None
        return self.workspace

    def _root(self) -> Path:
        if self.files is not None:
            self.use_workspace()
        if self._resolved_root is None:
            self._resolved_root = Path(self.workspace).resolve()
        return self._resolved_root

    def _inside(self, p: Path) -> bool:
        root = self._root()
        try:
            p.resolve().relative_to(root)
        except ValueError:
            return False
        return True

    def _ignored(self, rel: str, named: frozenset[str] = frozenset()) -> bool:
        """`named`: segments the glob spells literally: an opt-in (`dist/**/*.js` grades
        dist even though `dist` is an ignore pattern)."""
        return any(fnmatch.fnmatch(part, pat) for part in rel.split("/") if part not in named
                   for pat in self.ignore_patterns)

    def matches(self, pattern: str) -> list[str]:
        """Workspace-relative matches: the literal path if it exists, else the glob's files
        (`same_glob`: one meaning whatever Python runs ce)."""
        if os.path.isabs(pattern):
            raise CriterionError(f"path {pattern!r} must be relative to the workspace")
        files = self.files
        if files is not None:  # the archived snapshot, answering as the disk would
            if files.lexists(pattern):
                if not files.inside(pattern):
                    raise CriterionError(f"path {pattern!r} resolves outside the workspace")
                return [pattern]
            try:
                found = sorted(files.glob(same_glob(pattern)))
            except (ValueError, NotImplementedError) as exc:
                raise CriterionError(f"invalid glob {pattern!r}: {exc}") from exc
            return self._not_ignored(pattern, found)
        root = self._root()
        literal = root / pattern
        if os.path.lexists(literal):
            if not self._inside(literal):
                raise CriterionError(f"path {pattern!r} resolves outside the workspace")
            self.found.add(os.path.normpath(pattern).replace(os.sep, "/"))
            return [pattern]
        try:
            found = sorted(
                str(p.relative_to(root)).replace(os.sep, "/")
                for p in root.glob(same_glob(pattern))
                if p.is_file() and self._inside(p))
        except (ValueError, NotImplementedError) as exc:
            raise CriterionError(f"invalid glob {pattern!r}: {exc}") from exc
        found = self._not_ignored(pattern, found)
        self.found.update(found)
        return found

    def _not_ignored(self, pattern: str, found: list[str]) -> list[str]:
        named = frozenset(seg for seg in pattern.replace(os.sep, "/").split("/")
                          if seg and not any(ch in seg for ch in "*?["))
        return [f for f in found if not self._ignored(f, named)]

    def b_path_exists(self, pattern: str) -> bool:
        return bool(self.matches(pattern))

    def b_glob(self, pattern: str) -> list[str]:
        return self.matches(pattern)

    def _one(self, pattern: str) -> str | None:
        found = self.matches(pattern)
        if not found:
            return None
        if len(found) > 1:
            shown = ", ".join(found[:5]) + (" ..." if len(found) > 5 else "")
            raise CriterionError(f"{pattern!r} matches {len(found)} files ({shown}); a read "
                                 "needs exactly one")
        return found[0]

    def b_read_text(self, pattern: str) -> str | None:
        rel = self._one(pattern)
        if rel is None:
            return None
        if self.files is not None:
            if self.files.is_dir(rel):
                raise CriterionError(f"{rel} is a directory, not a file")
            self.reads.append(rel)
            try:
                data = self.files.read(rel)
            except OSError as exc:  # FileTooLarge: a file the snapshot did not keep
                raise CriterionError(f"cannot read {rel}: {exc.strerror}") from exc
        else:
            full = self._root() / rel
            if full.is_dir():
                raise CriterionError(f"{rel} is a directory, not a file")
            self.reads.append(rel)
            try:  # the agent wrote the workspace: a FIFO there must not block grading
                check_size(os.stat(full).st_size)  # as the snapshot keeps it (a rescore)
                data = read_regular(str(full))
            except OSError as exc:
                raise CriterionError(f"cannot read {rel}: {exc.strerror}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CriterionError(f"{rel} is not valid UTF-8 (byte {exc.start})") from exc
        # Python's text mode (universal newlines), as coder_eval reads: a file written
        # with CRLF line ends matches `line$` and "a\nb" as the same file with LF does.
        return SourceText(_universal_newlines(text), rel)

    def b_read_json(self, pattern: str) -> dict[str, Any]:
        # Several matches, invalid UTF-8 or a path outside the workspace are errors of the
        # criterion (as for every content read); only a missing file or invalid JSON is
        # an ordinary "not ok" document (score 0, no error).
        text = self.b_read_text(pattern)
        if text is None:
            return {"ok": False, "value": None, "error": f"{pattern} not found"}
        try:
            return {"ok": True, "value": json.loads(text), "error": None}
        except json.JSONDecodeError as exc:
            return {"ok": False, "value": None,
                    "error": f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"}

    def b_read_cli_log(self, path: str) -> dict[str, Any]:
        """A JSON Lines invocation log (what `record_cli` shims write). A log that cannot
        be trusted is an `error`, not a criterion error: a missing log (the shim never
        ran or wrote elsewhere), a write the shim could not make (its `.error` sentinel),
        or a record that is not an object with an `argv` list of strings (it might be
        the very call a `max_count: 0` guard forbids)."""
        text = self.b_read_text(path)
        calls: list[dict[str, Any]] = []
        if text is None:
            return {"error": f"invocation log {path!r} does not exist", "calls": calls}
        sentinel = self.matches(path + ".error") if not _has_glob(path) else []
        if sentinel:
            dropped = self._read_bytes(sentinel[0]).decode(
                "utf-8", errors="replace").splitlines()
            return {"error": f"the recorder could not write {len(dropped)} record(s) to "
                             f"{path!r}: the log is incomplete", "calls": calls}
        bad: list[int] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                bad.append(number)
                continue
            argv = rec.get("argv") if isinstance(rec, dict) else None
            if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
                bad.append(number)
                continue
            fault = rec.get("sidecar_error") or rec.get("rule_error")
            calls.append({
                "tool": rec["tool"] if isinstance(rec.get("tool"), str) else "",
                "argv": argv,
                "exit": _int_or_none(rec.get("exit")),
                "rule": _int_or_none(rec.get("rule")),
                "fault": None if fault is None else str(fault),
                "line": number,  # and when it was made (evidence: which tool call ran it)
                "ts": rec["ts"] if isinstance(rec.get("ts"), int | float)
                and not isinstance(rec.get("ts"), bool) else None})
        error = None
        if bad:
            where = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
            error = (f"{path}: {len(bad)} unusable record(s) (line {where}): not a JSON "
                     "object with an `argv` list of strings")
        return {"error": error, "calls": calls}

    def b_schema_valid(self, doc: Any, schema_path: str) -> bool:
        return self.schema_problem(doc, schema_path) is None

    def schema_problem(self, doc: Any, schema_path: str) -> str | None:
        """Why `doc` fails the JSON Schema (its best-matching error, and where in the
        document), or None when it is valid: `ce explain` and report.html say it."""
        import jsonschema

        if schema_path.startswith("$TASK_DIR/"):
            full = Path(self.task_dir) / schema_path[len("$TASK_DIR/"):]
        else:
            rel = self._one(schema_path)
            if rel is None:
                raise CriterionError(f"JSON Schema {schema_path!r} not found")
            full = rel
        try:
            raw = read_regular(str(full)) if isinstance(full, Path) \
                else self._read_bytes(full)
            schema = json.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CriterionError(f"cannot load JSON Schema {schema_path!r}: {exc}") from exc
        try:
            jsonschema.validate(doc, schema)
        except jsonschema.ValidationError as exc:
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                            for p in exc.absolute_path)
            return exc.message[:300] + (f" (at ${where})" if where else "")
        except jsonschema.SchemaError as exc:
            raise CriterionError(f"invalid JSON Schema {schema_path!r}: {exc.message}") from exc
        return None

    def b_similarity(self, method: str, agent_file: str, reference_file: str | None) -> float:
        from ce_runtime.grade.similarity import similarity

        agent = self.b_read_text(agent_file)
        if agent is None:
            raise CriterionError(f"{agent_file} not found")
        reference = self.reference_text(reference_file)
        if not reference:  # coder_eval raises (a task-definition error); never a score
            raise CriterionError("the reference file is empty: there is nothing to compare with")
        try:  # both texts are read as Python whatever the file names, as in coder_eval
            return similarity(method, str(agent), reference)
        except ValueError as exc:  # ComparisonError: coder_eval's score 0 with an error
            raise CriterionError(str(exc)) from exc

    def reference_text(self, reference_file: str | None) -> str:
        if self.reference_code is not None:
            return self.reference_code
        path = self.reference_file
        if self.reference_dir is not None:
            if reference_file is None:
                raise CriterionError("the reference is a directory: set reference_file")
            path = os.path.join(self.reference_dir, reference_file)
        if path is None:
            raise CriterionError("the task has no reference")
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CriterionError(f"cannot read the reference {path}: {exc}") from exc

    # -- commands ----------------------------------------------------------------------------
    def b_run(self, command: str, timeout: int) -> dict[str, Any]:
        """In the trial's sandbox, grader view (TASK_DIR and REFERENCE_DIR set); its process
        group is killed on timeout, and what it leaves running dies with the sandbox."""
        if self.runner is None:
            raise InfrastructureError(f"no sandbox to run `{command}` in")
        self.use_workspace()
        res = self.runner.run(command, timeout, _MAX_OUTPUT)  # InfrastructureError if lost
        # the streams as Python's text mode reads them (CRLF and CR as LF), as coder_eval
        # captures them: `ok$` matches a Windows-style `ok\r\n`
        rec = CommandRecord(command, res.exit_code, _universal_newlines(res.stdout),
                            _universal_newlines(res.stderr), res.timed_out, res.duration_ms)
        self.commands.append(rec)
        self._file("command", {"command": command, "exit_code": rec.exit_code,
                               "stdout": _capped(rec.stdout), "stderr": _capped(rec.stderr),
                               "timed_out": rec.timed_out})
        return {"exit_code": rec.exit_code, "stdout": rec.stdout, "stderr": rec.stderr,
                "timed_out": rec.timed_out}

    def b_uipath_eval(self, agent: str, eval_set: str, thresholds: dict[str, float]) -> float:
        """`uipath eval AGENT EVAL_SET --no-report --output-file F` in the workspace (the
        CLI comes from the task's own Python packages); score = thresholds met / listed.
        The output is either UiPath's `evaluationSetResults` (each evaluator's mean score,
        and `*` for the mean over evaluators) or a flat {metric: value} object."""
        import shlex
        import uuid

        self.use_workspace()
        resolved = os.path.join(self.task_dir, eval_set) if self.task_dir else eval_set
        target = resolved if os.path.exists(resolved) else eval_set
        out_name = f".ce-uipath-eval-{uuid.uuid4().hex[:8]}.json"
        result = self.b_run(f"uipath eval {shlex.quote(agent)} {shlex.quote(target)} "
                            f"--no-report --output-file {out_name}", 1800)
        if result["exit_code"] != 0:
            missing = result["exit_code"] == 127 or "command not found" in result["stderr"]
            hint = " (the `uipath` CLI is not installed in the sandbox: add `uipath` to " \
                   "sandbox.python.env_packages)" if missing else ""
            raise CriterionError(f"`uipath eval` exited {result['exit_code']}{hint}: "
                                 f"{result['stderr'][-500:]}")
        out_path = self._root() / out_name
        try:
            data = json.loads(read_regular(str(out_path)).decode("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CriterionError(f"cannot read the `uipath eval` output: {exc}") from exc
        finally:
            with contextlib.suppress(OSError):
                out_path.unlink()
        if not isinstance(data, dict):
            raise CriterionError("the `uipath eval` output is not a JSON object")
        metrics = _uipath_metrics(data)
        values = {name: metrics.get(name) if isinstance(metrics.get(name), int | float)
                  and not isinstance(metrics.get(name), bool) else None
                  for name in thresholds}
        # what each threshold was held against (`ce explain`'s evidence)
        self._file("metrics", {"command": f"uipath eval {agent} {eval_set}", "values": values,
                               "thresholds": dict(thresholds)})
        met = sum(1 for name, minimum in thresholds.items()
                  if values[name] is not None and values[name] >= minimum)
        return met / len(thresholds) if thresholds else 1.0

    # -- judges ------------------------------------------------------------------------------
    def b_llm_judge(self, rubric: str, files: list[str], settings: dict[str, Any]) -> dict:
        return self._judge("llm_judge", rubric, files, settings)

    def b_agent_judge(self, rubric: str, files: list[str], settings: dict[str, Any]) -> dict:
        self.use_workspace()  # it reads (a copy of) the workspace itself
        return self._judge("agent_judge", rubric, files, settings)

    def _file(self, what: str, record: dict[str, Any]) -> None:
        if self.current is not None:
            self.evidence.setdefault(self.current, []).append({"kind": what, **record})

    def _judge(self, kind: str, rubric: str, files: list[str], settings: dict) -> dict:
        from ce_runtime.grade.judge import build_prompt, workspace_digest
        from ce_runtime.grade.judge_evidence import judge_entry
        from ce_runtime.store.verdicts import request_key

        prompt = build_prompt(rubric, files, settings, self)
        request = {"kind": kind, "prompt": prompt,
                   "settings": {k: v for k, v in settings.items()
                                if k not in ("capture_transcript", "max_transcript_chars")}}
        if kind == "agent_judge":  # it reads the workspace itself
            request["workspace"] = workspace_digest(self.workspace)
        key = request_key(request)
        recorded = self.verdicts.get(key) if self.verdicts is not None else None
        if recorded is not None:
            verdict = recorded
        elif self.verdicts is not None and self.verdicts.mode == "offline":
            ran = self.verdicts.unanswered.get(key)
            if ran is not None and ran.get("error"):  # the run's judge gave none
                self._file("judge", {**ran, "from_run": True})
                raise CriterionError(str(ran["error"]))
            raise CriterionError(f"{kind}: no recorded verdict for this request, and judges "
                                 "are offline")
        elif self.judge is None:
            raise InfrastructureError(f"{kind}: no judge transport is configured (set an API "
                                      "key or a judge endpoint)")
        else:
            sessions = len(self.judge_sessions)
            if self.verdicts is not None:
                self.verdicts.asked += 1
            try:
                verdict = dict(self.judge.verdict(kind, rubric, files, settings, self,
                                                  prompt=prompt))
            except CriterionError as exc:
                if len(self.judge_sessions) > sessions:  # it ran, and was paid for
                    self._file("judge", judge_entry(kind, key, {}, settings, False, str(exc),
                                                    self.judge_sessions[-1], self.scrub))
                raise
            if len(self.judge_sessions) > sessions:  # an agent_judge's transcript and usage
                verdict["session"] = self.judge_sessions[-1]
            for said in ("rationale", "answer"):
                if said in verdict:
                    verdict[said] = self.scrub(str(verdict[said]))
            if self.verdicts is not None:
                # every answer is kept, one that is no verdict (no JSON, no numeric score)
                # too: a re-score gives its error again, where asking again would give
                # another answer, and offline an ERROR (--refresh-judges asks again)
                self.verdicts.put(key, verdict)
        unusable = _unusable(verdict)
        self._file("judge", judge_entry(
            kind, key, {**verdict, "rationale": self.scrub(str(verdict.get("rationale", "")))},
            settings, recorded is not None, unusable, scrub=self.scrub))
        if unusable is not None:
            raise CriterionError(unusable)
        raw = verdict.get("score") if isinstance(verdict, dict) else None
        score = _verdict_score(raw)
        if score is None:
            raise CriterionError(f"{kind}: the verdict has no numeric score"
                                 + ("" if raw is None else f" ({str(raw)[:40]!r})"))
        return {"score": min(1.0, max(0.0, score)),
                "rationale": self.scrub(str(verdict.get("rationale", "")))}

    def scrub(self, text: str) -> str:
        """A judge that quotes the reference must not leak it into stored results."""
        try:
            reference = self.reference_text(None)
        except CriterionError:
            return text
        for line in {ln.strip() for ln in reference.splitlines() if len(ln.strip()) >= 12}:
            text = text.replace(line, "[reference scrubbed]")
        return text

    def _read_bytes(self, rel: str) -> bytes:
        """A matched file's bytes; where the read fails, the disk's own error (it names
        the path, so an archived snapshot defers to the restored directory)."""
        if self.files is not None:
            try:
                return self.files.read(rel)
            except FileTooLarge:
                raise
            except OSError:
                raise NeedsWorkspace(rel) from None
        full = str(self._root() / rel)
        check_size(os.stat(full).st_size)
        return read_regular(full)


def _unusable(verdict: Any) -> str | None:
    """Why a judge's answer is no verdict (its text held no JSON object with a `score`:
    judge.parse_verdict), or None."""
    if isinstance(verdict, dict) and "score" not in verdict and \
            isinstance(verdict.get("error"), str):
        return verdict["error"]
    return None


def _verdict_score(value: Any) -> float | None:
    """A judge verdict's score as a number, or None: a number or a numeric string (as
    coder_eval coerces it, "0.8" is 0.8); never a boolean, never NaN or an infinity
    (`Infinity` and `1e999` parse as JSON: clamped they would be a full score)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _universal_newlines(text: str) -> str:
    """CRLF and lone CR as LF: what Python's text mode (newline=None) reads."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def same_glob(pattern: str) -> str:
    """The pattern spelled so that pathlib gives every Python (3.11 to 3.13) Python 3.13's
    answer, which coder_eval (3.13) gets: a trailing `**` matches the files below it
    (3.11/3.12 read it as directories only, so a criterion on `src/**` never matched a
    file), and `**` inside a name is `*` (an error on 3.11/3.12). Without this the same
    trial scored differently under different interpreters."""
    parts = [p if p == "**" or "**" not in p else re.sub(r"\*{2,}", "*", p)
             for p in pattern.split("/")]
    if parts[-1] == "**":
        parts.append("*")
    return "/".join(parts)


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def _uipath_metrics(data: dict[str, Any]) -> dict[str, Any]:
    runs = data.get("evaluationSetResults")
    if not runs:
        return data
    by_evaluator: dict[str, list[float]] = {}
    for evaluation in runs:
        for run in evaluation.get("evaluationRunResults", []) or []:
            evaluator = run.get("evaluatorId")
            if not evaluator:
                continue
            score = (run.get("result") or {}).get("score", 0.0)
            ok = isinstance(score, int | float) and not isinstance(score, bool)
            by_evaluator.setdefault(evaluator, []).append(float(score) if ok else 0.0)
    metrics: dict[str, Any] = {k: sum(v) / len(v) for k, v in by_evaluator.items()}
    metrics["*"] = sum(metrics.values()) / len(metrics) if metrics else 0.0
    return metrics


_MAX_OUTPUT = 1 << 20  # per stream, for grading
EVIDENCE_CHARS = 4000  # of each command stream kept in a trial's results


def _capped(text: str) -> str:
    if len(text) <= EVIDENCE_CHARS:
        return text
    half = EVIDENCE_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters not kept ...]\n{text[-half:]}"
_CACHEABLE = frozenset({"path_exists", "glob", "read_text", "read_json", "schema_valid",
                        "read_cli_log"})

