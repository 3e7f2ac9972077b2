"""Every criterion type against SEMANTICS.md ("Criteria" and "Scoring"), end to end.

Each test writes a task YAML and a workspace (and, for trace criteria, a trace) under
tmp_path, compiles the task with `compile_paths` and grades it with `grade_files`: the
same path `ce explain` and the runner take. Scores are asserted exactly as the semantics
define them.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from ce_lang.compiler import CompileOptions, compile_paths
from ce_lang.render import render_human
from ce_runtime.execute.sandbox.runner import local_runner
from ce_runtime.grade.grading import grade_files, reference_paths
from ce_runtime.grade.host import InfrastructureError
from ce_runtime.grade.interpreter import CriterionResult, GradeResult
from ce_runtime.trace import events as T

HEAD = """\
task_id: semantics
description: criteria semantics fixture
initial_prompt: do the task
"""

Call = tuple  # (tool, params) or (tool, params, status); status None = no result event


class Graded:
    def __init__(self, result: GradeResult, host: Any):
        self.result = result
        self.host = host

    def __getitem__(self, cid: str) -> CriterionResult:
        return next(r for r in self.result.criteria if r.id == cid)

    @property
    def scores(self) -> list[float]:
        return [r.score for r in self.result.criteria]

    @property
    def errors(self) -> list[str | None]:
        return [r.error for r in self.result.criteria]


class Fixture:
    """A task directory, a workspace and (optionally) a trace under tmp_path."""

    def __init__(self, root: Path):
        self.root = root
        self.task_dir = root / "task"
        self.ws = root / "ws"
        self.task_dir.mkdir(parents=True)
        self.ws.mkdir()
        self.trace_path: str | None = None

    def files(self, files: dict[str, str | bytes | None]) -> Fixture:
        """Workspace files; None makes a directory."""
        for rel, content in files.items():
            path = self.ws / rel
            if content is None:
                path.mkdir(parents=True, exist_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        return self

    def task_file(self, rel: str, content: str) -> Fixture:
        path = self.task_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        return self

    def calls(self, *calls: Call) -> Fixture:
        events: list[T.Event] = [T.RunHeader(0.0, 1, "trial", "semantics", "hash", "claude-code")]
        for i, call in enumerate(calls):
            tool, params, status = (*call, "ok")[:3] if len(call) == 2 else call
            events.append(T.ToolCall(float(i), f"k{i}", tool, tool, params))
            if status is not None:
                events.append(T.ToolResult(float(i), f"k{i}", status))
        self.trace_path = str(self.root / "run.trace")
        T.write_trace(self.trace_path, events)
        return self

    def write_task(self, criteria: str, extra: str = "") -> str:
        body = HEAD + textwrap.dedent(extra) + "success_criteria:\n" + textwrap.indent(
            textwrap.dedent(criteria).strip("\n"), "  ") + "\n"
        path = self.task_dir / "task.yaml"
        path.write_text(body)
        return str(path)

    def compile(self, criteria: str, extra: str = "", overrides: tuple[str, ...] = ()):
        return compile_paths([self.write_task(criteria, extra)],
                             CompileOptions(overrides=overrides))

    def trials(self, criteria: str, extra: str = "", overrides: tuple[str, ...] = ()):
        result = self.compile(criteria, extra, overrides)
        assert not result.errors, render_human(result.diagnostics, result.sources)
        return result.trials

    def grade_plan(self, trial, plan=None, judge=None, stopped_early=False) -> Graded:
        plan = plan or trial.plan
        with local_runner(str(self.ws), trial.task_dir,
                          reference_paths(plan, trial.task_dir)) as runner:
            _, result, host, _ = grade_files(plan, trial.task_dir, str(self.ws),
                                             self.trace_path, judge=judge,
                                             stopped_early=stopped_early, runner=runner)
        return Graded(result, host)

    def grade(self, criteria: str, extra: str = "", overrides: tuple[str, ...] = (),
              row: int = 0, judge=None, stopped_early=False) -> Graded:
        trial = self.trials(criteria, extra, overrides)[row]
        return self.grade_plan(trial, judge=judge, stopped_early=stopped_early)

    def errors(self, criteria: str, extra: str = "") -> list[str]:
        result = self.compile(criteria, extra)
        return [f"{d.code} {d.message}" for d in result.diagnostics if d.severity == "error"]


@pytest.fixture
def fx(tmp_path) -> Fixture:
    return Fixture(tmp_path)


def with_args(trial, index: int, **args):
    """The trial's plan with criterion `index` given other arguments: how a value the
    compiler rejects (an invalid regex) reaches the runtime, as from an edited plan file."""
    plan = trial.plan
    call = plan.criteria[index]
    criteria = list(plan.criteria)
    criteria[index] = attrs.evolve(call, args={**call.args, **args})
    return attrs.evolve(plan, criteria=criteria)


# ---------------------------------------------------------------------------------------
# paths: literal first, then glob (files only, sorted, inside, ignore patterns)
# ---------------------------------------------------------------------------------------
class TestPaths:
    def test_file_exists_literal_missing_and_directory(self, fx):
        fx.files({"app.py": "x", "pkg/sub": None})
        g = fx.grade("""
            - {type: file_exists, path: app.py, description: literal}
            - {type: file_exists, path: nope.py, description: missing}
            - {type: file_exists, path: pkg/sub, description: a directory counts}
            - {type: file_exists, path: pkg, description: a directory counts}
        """)
        assert g.scores == [1.0, 0.0, 1.0, 1.0]
        assert g.errors == [None] * 4

    @pytest.mark.parametrize("files, expected", [
        ({}, 0.0),
        ({"src/a.py": "x"}, 1.0),
        ({"src/a.py": "x", "src/b.py": "y"}, 1.0),  # existence needs >= 1 match
    ])
    def test_file_exists_glob_matching_0_1_2(self, fx, files, expected):
        fx.files({"src/data": None, **files})
        g = fx.grade("- {type: file_exists, path: 'src/*.py', description: glob}")
        assert g.scores == [expected]
        assert g.errors == [None]

    def test_glob_matches_files_only(self, fx):
        fx.files({"out/dir.json": None})  # a directory named like the glob
        g = fx.grade("- {type: file_exists, path: 'out/*.json', description: files only}")
        assert g.scores == [0.0]

    # every criterion that reads a file's content needs exactly one match
    READERS = {
        "file_contains": "{type: file_contains, description: d, path: '%s', includes: [x]}",
        "file_check": "{type: file_check, description: d, path: '%s', includes: [x]}",
        "file_matches_regex": "{type: file_matches_regex, description: d, path: '%s', pattern: x}",
        "json_check": "{type: json_check, description: d, path: '%s'}",
        "classification_match": "{type: classification_match, description: d, path: '%s', expected_label: x,"
                                " allowed_labels: [x, y]}",
    }

    @pytest.mark.parametrize("kind", sorted(READERS))
    def test_content_read_glob_matching_0_1_2(self, fx, kind):
        entry = "- " + self.READERS[kind] % "*.txt"
        content = '"x"' if kind == "json_check" else "x"
        fx.files({"one/a.txt": content, "two/a.txt": content, "two/b.txt": content})

        zero = Fixture(fx.root / "zero")
        zero.files({"a.md": content})
        g0 = zero.grade(entry)
        assert g0.scores == [0.0] and g0.errors == [None]  # no match: missing, not an error

        g1 = fx.grade(entry.replace("*.txt", "one/*.txt"))
        assert g1.scores == [1.0] and g1.errors == [None]

        g2 = fx.grade(entry.replace("*.txt", "two/*.txt"))
        assert g2.scores == [0.0]
        assert g2.errors[0] is not None and "matches 2 files" in g2.errors[0]
        assert "two/a.txt, two/b.txt" in g2.errors[0]  # sorted

    @pytest.mark.parametrize("kind", sorted(READERS))
    def test_a_directory_read_is_an_error_that_says_so(self, fx, kind):
        # as coder_eval (its read fails); was a silent 0 explained as "no such file"
        fx.files({"report.txt": None})
        g = fx.grade("- " + self.READERS[kind] % "report.txt")
        assert g.scores == [0.0]
        assert g.errors == ["report.txt is a directory, not a file"]

    @pytest.mark.parametrize("kind", sorted(READERS))
    def test_invalid_utf8_is_an_error(self, fx, kind):
        fx.files({"bad.txt": b"ok \xff\xfe not utf-8"})
        g = fx.grade("- " + self.READERS[kind] % "bad.txt")
        assert g.scores == [0.0]
        assert "not valid UTF-8" in (g.errors[0] or "")

    def test_line_ends_read_as_python_text_mode(self, fx):
        # CRLF and lone CR read as LF (coder_eval reads with Path.read_text): the same
        # file written on Windows scores the same
        fx.files({"crlf.txt": b"hello\r\nworld\r\n", "cr.txt": b"a\rb",
                  "label.txt": b"bug\r\n"})
        g = fx.grade(r"""
            - {type: file_matches_regex, path: crlf.txt, pattern: 'hello$', flags: 8, description: d}
            - {type: file_matches_regex, path: crlf.txt, pattern: 'world$', description: d}
            - {type: file_contains, path: crlf.txt, includes: ["hello\nworld"], description: d}
            - {type: file_check, path: cr.txt, includes: ["a\nb"], excludes: ["\r"], description: d}
            - {type: classification_match, path: label.txt, expected_label: bug,
               allowed_labels: [bug, feature], description: d}
        """)
        assert g.scores == [1.0] * 5
        assert g.errors == [None] * 5

    def test_ignore_patterns_apply_to_globs_not_to_literal_paths(self, fx):
        fx.files({"src/main.py": "main", ".venv/lib/site.py": "x",
                  "node_modules/m/index.py": "x", "__pycache__/c.py": "x"})
        g = fx.grade("""
            - {type: file_contains, path: '**/*.py', includes: [main], description: one match}
            - {type: file_exists, path: .venv/lib/site.py, description: a literal path wins}
        """)
        assert g.scores == [1.0, 1.0]
        assert g.errors == [None, None]

    def test_paths_never_leave_the_workspace(self, fx):
        outside = fx.root / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text("secret")
        os.symlink(outside, fx.ws / "link")
        os.symlink(outside / "secret.txt", fx.ws / "secret.txt")
        g = fx.grade("""
            - {type: file_contains, path: secret.txt, includes: [secret], description: link}
            - {type: file_exists, path: 'link/*.txt', description: glob through a link}
        """)
        assert g.scores == [0.0, 0.0]
        assert "resolves outside the workspace" in (g.errors[0] or "")
        assert g.errors[1] is None

    def test_literal_path_outside_is_a_compile_error(self, fx):
        errors = fx.errors("""
            - {type: file_exists, path: ../x.txt, description: escapes}
            - {type: file_exists, path: /etc/passwd, description: absolute}
        """)
        assert len(errors) == 2 and all(e.startswith("CE0206") for e in errors)


# ---------------------------------------------------------------------------------------
# file_contains
# ---------------------------------------------------------------------------------------
class TestFileContains:
    TEXT = "import os\nprint('Hello')\n# TODO\n"

    @pytest.mark.parametrize("args, expected", [
        ("includes: [import os, Hello, logging]", 2 / 3),
        ("includes: [hello]", 0.0),  # case-sensitive
        ("excludes: [TODO, FIXME]", 0.5),  # only excludes: 1 - present/len
        ("excludes: [FIXME]", 1.0),
        ("includes: [import os, logging], excludes: [TODO, FIXME]", (0.5 + 0.5) / 2),
        ("includes: [Hello], excludes: [TODO]", (1.0 + 0.0) / 2),
        ("{}", 1.0),  # neither list
        ("includes: [], excludes: []", 1.0),  # empty lists are not active
    ])
    def test_scores(self, fx, args, expected):
        fx.files({"app.py": self.TEXT})
        args = "" if args == "{}" else ", " + args
        g = fx.grade(f"- {{type: file_contains, path: app.py{args}, description: d}}")
        assert g.scores == [pytest.approx(expected, abs=1e-12)]
        assert g.errors == [None]

    @pytest.mark.parametrize("args", ["includes: [x]", "excludes: [x]", "{}"])
    def test_missing_file_scores_0_whatever_the_lists(self, fx, args):
        args = "" if args == "{}" else ", " + args
        g = fx.grade(f"- {{type: file_contains, path: nope.py{args}, description: d}}")
        assert g.scores == [0.0]
        assert g.errors == [None]


# ---------------------------------------------------------------------------------------
# file_check
# ---------------------------------------------------------------------------------------
class TestFileCheck:
    TEXT = "def main():\n    return 1\nimport os\n"

    @pytest.mark.parametrize("args, expected", [
        ("", 1.0),  # no sub-checks: existence only
        ("includes: [def main, argparse]", 0.5),
        ("excludes: [import os]", 0.0),
        ("patterns: [{pattern: 'def main\\(.*\\):'}]", 1.0),
        ("patterns: [{pattern: 'import os', must_match: false}]", 0.0),  # inverted
        ("patterns: [{pattern: '^IMPORT OS$', flags: 10}]", 1.0),  # IGNORECASE | MULTILINE
        ("patterns: [{pattern: '^import os$'}]", 0.0),  # no MULTILINE: ^ is the start
        ("includes: [def main, argparse], excludes: [import os, sys],"
         " patterns: [{pattern: 'return \\d'}, {pattern: 'class', must_match: true}]",
         (0.5 + 0.5 + 0.5) / 3),
        ("includes: [def main], patterns: [{pattern: 'os', must_match: false}]",
         (1.0 + 0.0) / 2),
    ])
    def test_scores(self, fx, args, expected):
        fx.files({"main.py": self.TEXT})
        args = ", " + args if args else ""
        g = fx.grade(f"- {{type: file_check, path: main.py{args}, description: d}}")
        assert g.scores == [pytest.approx(expected, abs=1e-12)]
        assert g.errors == [None]

    def test_missing_file_scores_0(self, fx):
        g = fx.grade("""
            - {type: file_check, path: main.py, description: existence only}
            - {type: file_check, path: main.py, excludes: [x], description: excludes only}
        """)
        assert g.scores == [0.0, 0.0]

    def test_existence_only_is_file_exists(self, fx):
        # no sub-checks: nothing is read (the guide: "equivalent to file_exists"), so a
        # directory, a binary file and a glob matching two files all exist
        fx.files({"pkg/a.py": "x", "pkg/b.py": "y", "logo.png": b"\x89PNG\xff\xfe"})
        g = fx.grade("""
            - {type: file_check, path: pkg, description: a directory}
            - {type: file_check, path: logo.png, description: not UTF-8}
            - {type: file_check, path: 'pkg/*.py', description: two matches}
            - {type: file_check, path: 'pkg/*.js', description: none}
            - {type: file_check, path: logo.png, includes: [PNG], description: read}
        """)
        assert g.scores == [1.0, 1.0, 1.0, 0.0, 0.0]
        assert g.errors[:4] == [None] * 4
        assert "not valid UTF-8" in (g.errors[4] or "")  # a sub-check reads the file

    def test_literal_invalid_pattern_is_a_compile_error(self, fx):
        errors = fx.errors("- {type: file_check, path: a, patterns: [{pattern: '('}], "
                           "description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0111")

    def test_invalid_pattern_at_run_time_fails_that_pattern_only(self, fx):
        fx.files({"main.py": self.TEXT})
        trial = fx.trials("""
            - type: file_check
              path: main.py
              patterns: [{pattern: placeholder}, {pattern: 'def main'}]
              description: one pattern is replaced by an invalid one
        """)[0]
        for must_match in (True, False):  # invalid fails either way
            plan = with_args(trial, 0, patterns=[
                {"pattern": "([", "must_match": must_match, "flags": 0},
                {"pattern": "def main", "must_match": True, "flags": 0}])
            g = fx.grade_plan(trial, plan)
            assert g.scores == [0.5]
            assert g.errors == [None]


# ---------------------------------------------------------------------------------------
# file_matches_regex
# ---------------------------------------------------------------------------------------
class TestFileMatchesRegex:
    TEXT = "API_KEY = 'abc'\nDEBUG = True\n"

    @pytest.mark.parametrize("args, expected", [
        ("pattern: 'DEBUG = True'", 1.0),
        ("pattern: 'DEBUG = False'", 0.0),
        ("pattern: 'DEBUG = True', must_match: false", 0.0),
        ("pattern: 'DEBUG = False', must_match: false", 1.0),
        ("pattern: '^DEBUG'", 0.0),  # re.search without flags: ^ is the start of the file
        ("pattern: '^DEBUG', flags: 8", 1.0),  # MULTILINE
        ("pattern: 'api_key', flags: 2", 1.0),  # IGNORECASE
        ("pattern: \"abc'.DEBUG\"", 0.0),  # . does not match a newline without DOTALL
        ("pattern: \"abc'.DEBUG\", flags: 16", 1.0),  # DOTALL
    ])
    def test_scores(self, fx, args, expected):
        fx.files({"config.py": self.TEXT})
        g = fx.grade(f"- {{type: file_matches_regex, path: config.py, {args}, description: d}}")
        assert g.scores == [expected]
        assert g.errors == [None]

    @pytest.mark.parametrize("flags, matches", [
        (0, True),  # \w is Unicode
        (256, False),  # re.ASCII (the `regex` engine reads 256 as VERSION1)
        (256 | 2, False),
        (128, True),  # re.DEBUG: only prints, changes nothing (regex reads 128 as ASCII)
        (1024 | 2048 | 4096 | 65536, True),  # no meaning to `re`, ignored as re does
    ])
    def test_flags_mean_what_python_re_means(self, fx, flags, matches, capfd):
        fx.files({"name.txt": "café"})
        g = fx.grade(f"""
            - {{type: file_matches_regex, path: name.txt, pattern: '^\\w+$', flags: {flags},
               description: d}}
            - type: file_check
              path: name.txt
              patterns: [{{pattern: '^\\w+$', flags: {flags}}}]
              description: d
        """)
        assert g.errors == [None, None]
        assert g.scores == [float(matches)] * 2
        assert "LITERAL" not in capfd.readouterr().out  # re.DEBUG's dump

    def test_missing_file_scores_0(self, fx):
        g = fx.grade("- {type: file_matches_regex, path: c.py, pattern: x, must_match: false, "
                     "description: d}")
        assert g.scores == [0.0] and g.errors == [None]

    def test_literal_invalid_pattern_is_a_compile_error(self, fx):
        errors = fx.errors("- {type: file_matches_regex, path: a, pattern: '(', description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0111")

    def test_dataset_row_invalid_pattern_is_a_compile_error(self, fx):
        errors = fx.errors(
            "- {type: file_matches_regex, path: a, pattern: '${row.p}', description: d}",
            extra="dataset: {rows: [{id: r1, p: '(['}]}\n")
        assert len(errors) == 1 and errors[0].startswith("CE0111")

    def test_invalid_pattern_at_run_time_scores_0_with_error(self, fx):
        fx.files({"config.py": self.TEXT})
        trial = fx.trials("- {type: file_matches_regex, path: config.py, pattern: DEBUG, "
                          "must_match: false, description: d}")[0]
        g = fx.grade_plan(trial, with_args(trial, 0, pattern="(["))
        assert g.scores == [0.0]
        assert "invalid regular expression" in (g.errors[0] or "")
        assert g["c0"].passed is False


# ---------------------------------------------------------------------------------------
# json_check
# ---------------------------------------------------------------------------------------
DOC = {"status": "success", "count": 3, "ratio": 1.0, "flag": True, "none": None,
       "zero": 0, "empty": "", "falsy": False, "items": [1, 2, "x"], "meta": {"version": "1.2.3"},
       "results": [{"name": "a", "active": True}, {"name": "b", "active": False}],
       "date": "2024-01-02T10:00:00"}


class TestJsonCheck:
    @pytest.mark.parametrize("expression, operator, expected, passes", [
        ("status", "equals", "success", True),
        ("status", "equals", "Success", False),
        ("count", "equals", 3.0, True),  # numbers compare by value
        ("ratio", "equals", 1, True),
        ("flag", "equals", 1, False),  # a bool is not a number
        ("count", "equals", True, False),
        ("items", "equals", [1, 2, "x"], True),
        ("status", "not_equals", "failure", True),
        ("count", "not_equals", 3, False),
        ("none", "not_equals", 1, True),
        ("status", "contains", "succ", True),  # substring
        ("items", "contains", 2, True),  # list membership
        ("items", "contains", 5, False),
        ("meta", "contains", "version", True),  # object key
        ("meta", "contains", "1.2.3", False),  # ... not value
        ("count", "contains", 3, False),
        ("count", "gt", 2, True), ("count", "gt", 3, False),
        ("count", "gte", 3, True), ("count", "lt", 3, False),
        ("count", "lte", 3, True), ("ratio", "lt", 1.5, True),
        ("length(results)", "gte", 2, True),
        ("flag", "gt", 0, False),  # a bool is not a number
        ("status", "gt", 0, False),
        ("missing", "lt", 1, False),
        # two strings compare in code point order (ISO dates as dates), as coder_eval
        ("meta.version", "gt", "1.2.0", True), ("meta.version", "lte", "1.10", False),
        ("date", "gte", "2024-01-01", True), ("date", "lt", "2024-01-02T00:00:00", False),
        ("status", "gte", "success", True), ("count", "gt", "2", False),  # text vs number
        ("items", "gt", "a", False),
        ("status", "type", "string", True), ("count", "type", "number", True),
        ("ratio", "type", "number", True), ("flag", "type", "number", False),
        ("flag", "type", "boolean", True), ("count", "type", "boolean", False),
        ("items", "type", "array", True), ("meta", "type", "object", True),
        ("items", "type", "object", False), ("none", "type", "null", True),
        ("missing", "type", "null", True),  # JMESPath: a missing key is null too
        ("zero", "type", "null", False),
        ("meta.version", "regex", "^\\d+\\.\\d+\\.\\d+$", True),
        ("status", "regex", "^fail", False),
        ("count", "regex", "3", False),  # regex applies to strings only
        ("status", "exists", None, True),
        ("zero", "exists", None, True), ("empty", "exists", None, True),
        ("falsy", "exists", None, True),
        ("none", "exists", None, False),  # JSON null counts as absent
        ("missing", "exists", None, False),
        ("results[?active].name", "exists", None, True),
        ("results[0].name", "equals", "a", True),
    ])
    def test_operators(self, fx, expression, operator, expected, passes):
        fx.files({"report.json": json.dumps(DOC)})
        a = {"expression": expression, "operator": operator}
        if operator != "exists":
            a["expected"] = expected
        g = fx.grade(f"- {{type: json_check, path: report.json, assertions: [{json.dumps(a)}],"
                     " description: d}")
        assert g.scores == [1.0 if passes else 0.0]
        assert g.errors == [None]

    def test_explicit_null_expected_compares_with_null(self, fx):
        # `expected` is required except for exists; writing `expected: null` is a value:
        # equals null holds for a JSON null (and for a missing key, which JMESPath reads
        # as null); leaving `expected` out is the error.
        assert fx.errors("- {type: json_check, path: r.json, assertions: "
                         "[{expression: none, operator: equals, expected: null}], "
                         "description: d}") == []
        errors = fx.errors("- {type: json_check, path: r.json, assertions: "
                           "[{expression: none, operator: equals}], description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0102")

    def test_assertions_score_passed_over_total(self, fx):
        fx.files({"report.json": json.dumps(DOC)})
        g = fx.grade("""
            - type: json_check
              path: report.json
              assertions:
                - {expression: status, expected: success}
                - {expression: "length(results)", operator: gte, expected: 3}
                - {expression: none, operator: exists}
              description: d
        """)
        assert g.scores == [pytest.approx(1 / 3, abs=1e-12)]

    def test_an_expression_failing_on_this_document_fails_its_assertion_only(self, fx):
        # length() of a number or of a missing key is a JMESPath type error: that
        # assertion fails, the others still count (coder_eval: 1/2 and 1/3)
        fx.files({"report.json": json.dumps(DOC)})
        g = fx.grade("""
            - type: json_check
              path: report.json
              assertions:
                - {expression: "length(missing)", operator: gte, expected: 1}
                - {expression: status, expected: success}
              description: d
            - type: json_check
              path: report.json
              assertions:
                - {expression: "length(count)", expected: 1}
                - {expression: "sort(items)", operator: exists}
                - {expression: count, expected: 3}
              description: d
        """)
        assert g.scores == [0.5, pytest.approx(1 / 3, abs=1e-12)]
        assert g.errors == [None, None]

    def test_unknown_jmespath_function_or_arity_is_a_compile_error(self, fx):
        errors = fx.errors("""
            - type: json_check
              path: r.json
              assertions:
                - {expression: "lenght(items)", operator: exists}
                - {expression: "results[?starts_with(name)].name", operator: exists}
                - {expression: "not_null()", operator: exists}
                - {expression: "merge(a, b, c) | max_by(@, &x)", operator: exists}
              description: d
        """)
        assert len(errors) == 3 and all(e.startswith("CE0111") for e in errors)
        assert "unknown function lenght()" in errors[0]
        assert "starts_with() takes 2 arguments, given 1" in errors[1]
        assert "not_null() takes at least 1 argument, given 0" in errors[2]

    def test_no_checks_missing_and_invalid_json(self, fx):
        fx.files({"ok.json": "[]", "bad.json": "{'single': quotes}"})
        g = fx.grade("""
            - {type: json_check, path: ok.json, description: 'valid JSON, no checks'}
            - {type: json_check, path: bad.json, description: invalid JSON}
            - {type: json_check, path: nope.json, description: missing}
            - {type: json_check, path: nope.json, assertions: [{expression: a, operator: exists}],
               description: missing with assertions}
        """)
        assert g.scores == [1.0, 0.0, 0.0, 0.0]
        assert g.errors == [None] * 4  # not errors: ordinary failures

    SCHEMA = json.dumps({"type": "object", "required": ["status", "count"],
                         "properties": {"count": {"type": "integer"}}})

    def test_schema_binary_and_mean_with_assertions(self, fx):
        fx.files({"good.json": json.dumps(DOC), "bad.json": json.dumps({"status": "success"}),
                  "schemas/s.json": self.SCHEMA})
        fx.task_file("schemas/host.json", self.SCHEMA)
        half = ("[{expression: status, expected: success}, "
                "{expression: status, expected: nope}]")
        g = fx.grade(f"""
            - {{type: json_check, path: good.json, json_schema: schemas/s.json, description: a}}
            - {{type: json_check, path: good.json, json_schema: schemas/s.json,
               assertions: {half}, description: b}}
            - {{type: json_check, path: bad.json, json_schema: schemas/s.json,
               assertions: [{{expression: status, expected: success}}], description: c}}
            - {{type: json_check, path: good.json, json_schema: $TASK_DIR/schemas/host.json,
               description: d}}
            - {{type: json_check, path: bad.json, json_schema: $TASK_DIR/schemas/host.json,
               description: e}}
        """)
        # schema alone; mean(schema 1, assertions 0.5); a failing schema zeroes everything
        assert g.scores == [1.0, 0.75, 0.0, 1.0, 0.0]
        assert g.errors == [None] * 5

    def test_missing_schema_file_is_an_error(self, fx):
        fx.files({"good.json": json.dumps(DOC)})
        g = fx.grade("- {type: json_check, path: good.json, json_schema: nope.json, "
                     "description: d}")
        assert g.scores == [0.0]
        assert "not found" in (g.errors[0] or "")


# ---------------------------------------------------------------------------------------
# run_command
# ---------------------------------------------------------------------------------------
class TestRunCommand:
    @pytest.mark.parametrize("args, expected", [
        ("command: 'true'", 1.0),
        ("command: 'exit 3'", 0.0),
        ("command: 'exit 3', expected_exit_code: 3", 1.0),
        ("command: 'true', expected_exit_code: 1", 0.0),
        # exact: both sides stripped, then equal
        ("command: 'echo \"  hi there  \"', expected_stdout: ' hi there\n'", 1.0),
        ("command: 'echo hi there', expected_stdout: 'hi'", 0.0),
        ("command: 'echo hi; exit 1', expected_stdout: 'hi'", 0.0),  # exit code still counts
        # contains: stripped substring
        ("command: 'echo say hi there', expected_stdout: ' hi ', stdout_match: contains", 1.0),
        ("command: 'echo say hi', expected_stdout: 'bye', stdout_match: contains", 0.0),
        # regex: re.search on the raw stdout, no flags
        ("command: 'printf \"ab\\n\"', expected_stdout: 'b$', stdout_match: regex", 1.0),
        ("command: 'printf \"a\\nb\\n\"', expected_stdout: '^b$', stdout_match: regex", 0.0),
        ("command: 'printf \"a\\nb\\n\"', expected_stdout: '(?m)^b$', stdout_match: regex", 1.0),
        ("command: 'echo \"  x\"', expected_stdout: '^  x', stdout_match: regex", 1.0),  # raw
        # stdout read as Python's text mode reads it (coder_eval's text=True): CRLF is LF
        ("command: 'printf \"ok\\r\\n\"', expected_stdout: '^ok$', stdout_match: regex", 1.0),
        ("command: 'printf \"a\\r\\nb\\rc\"', expected_stdout: \"a\\nb\\nc\"", 1.0),
    ])
    def test_exit_code_and_stdout(self, fx, args, expected):
        g = fx.grade(f"- {{type: run_command, {args}, description: d}}")
        assert g.scores == [expected]
        assert g.errors == [None]

    @pytest.mark.parametrize("stdout, expected", [
        ("0.75", 0.75),
        ("1.5", 1.0),  # clamped
        ("-3", 0.0),  # clamped
        ("1", 1.0),
        ("0.25\\n0.9", 0.25),  # the first line
        ("\\n\\n  0.4  \\n", 0.4),  # stripped first
        ("abc", 0.0),  # not a number
        ("nan", 0.0),
        ("inf", 0.0),
        ("", 0.0),
    ])
    def test_score_from_stdout(self, fx, stdout, expected):
        g = fx.grade(f"- {{type: run_command, command: 'printf \"{stdout}\"', "
                     "score_from_stdout: true, description: d}")
        assert g.scores == [expected]
        assert g.errors == [None]

    def test_score_from_stdout_is_a_fraction_and_says_so(self, fx):
        """`run_command` is declared binary; with score_from_stdout its bound score is
        stdout's number, so its kind (explain, the reports) is fraction; the others of
        the same definition stay binary."""
        g = fx.grade("""
            - {type: run_command, command: 'echo 0.25', score_from_stdout: true,
               description: scored}
            - {type: run_command, command: 'echo 0.25', description: exit code}
            - {type: run_command, command: 'echo 0.25', expected_stdout: '0.25',
               description: stdout}
            - {type: file_exists, path: nothing.txt, description: binary as declared}
        """)
        assert g.scores == [0.25, 1.0, 1.0, 0.0]
        assert [r.kind for r in g.result.criteria] == ["fraction", "binary", "binary",
                                                        "binary"]

    def test_score_from_stdout_needs_the_expected_exit_code(self, fx):
        g = fx.grade("""
            - {type: run_command, command: 'echo 0.5; exit 1', score_from_stdout: true,
               description: wrong exit}
            - {type: run_command, command: 'echo 0.5; exit 1', score_from_stdout: true,
               expected_exit_code: 1, description: expected exit}
        """)
        assert g.scores == [0.0, 0.5]

    def test_score_from_stdout_excludes_expected_stdout(self, fx):
        errors = fx.errors("- {type: run_command, command: 'echo 1', score_from_stdout: true, "
                           "expected_stdout: '1', description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0109")

    def test_timeout_scores_0_and_kills_the_process_group(self, fx):
        started = time.monotonic()
        g = fx.grade("""
            - {type: run_command, command: 'sleep 60 & echo $! > bg.pid; echo started; sleep 60',
               timeout: 1, description: times out}
            - {type: run_command, command: 'sleep 60', timeout: 1, expected_exit_code: -1,
               description: a timeout scores 0 even when -1 is the expected exit code}
        """)
        assert time.monotonic() - started < 20, "the grader waited for the command"
        assert g.scores == [0.0, 0.0]
        assert g.errors == [None, None]
        for record in g.host.commands:  # noted: the command's record says it timed out
            assert record.timed_out and record.exit_code == -1
        assert "started" in g.host.commands[0].stdout  # output before the timeout is kept
        bg = int((fx.ws / "bg.pid").read_text())
        assert _gone(bg), f"background process {bg} survived the timeout"

    def test_timeout_with_score_from_stdout_scores_0(self, fx):
        g = fx.grade("- {type: run_command, command: 'echo 1; sleep 60', timeout: 1, "
                     "score_from_stdout: true, description: d}")
        assert g.scores == [0.0]

    def test_environment_and_cwd(self, fx):
        tool = fx.ws / ".venv" / "bin" / "ce-probe-tool"
        tool.parent.mkdir(parents=True)
        tool.write_text("#!/bin/sh\necho from-venv\n")
        tool.chmod(0o755)
        (fx.ws / "node_modules" / ".bin").mkdir(parents=True)
        g = fx.grade("""
            - {type: run_command, command: 'ce-probe-tool', expected_stdout: from-venv,
               description: the workspace venv is first on PATH}
            - {type: run_command, command: 'echo "$PATH" | cut -d: -f1-2 > path.txt; pwd -P > cwd.txt;
                 echo "$TASK_DIR" > task_dir.txt; echo "$VIRTUAL_ENV" > venv.txt;
                 env > env.txt', description: environment}
        """)
        assert g.scores == [1.0, 1.0]
        ws = os.path.realpath(fx.ws)
        assert (fx.ws / "path.txt").read_text().strip() == \
            f"{ws}/.venv/bin:{ws}/node_modules/.bin"
        assert (fx.ws / "cwd.txt").read_text().strip() == ws
        assert (fx.ws / "task_dir.txt").read_text().strip() == str(fx.task_dir)
        assert (fx.ws / "venv.txt").read_text().strip() == f"{ws}/.venv"
        assert "\nREFERENCE_DIR=" not in "\n" + (fx.ws / "env.txt").read_text()  # no reference

    def test_reference_dir_is_set_with_a_reference(self, fx):
        fx.task_file("ref/solution.py", "x = 1\n")
        g = fx.grade("- {type: run_command, command: 'cat \"$REFERENCE_DIR/solution.py\"', "
                     "expected_stdout: 'x = 1', description: d}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [1.0]

    def test_later_reads_see_what_a_command_wrote(self, fx):
        g = fx.grade("""
            - {type: file_exists, path: made.txt, description: before}
            - {type: run_command, command: 'echo made > made.txt', description: writes}
            - {type: file_contains, path: made.txt, includes: [made], description: after}
        """)
        assert g.scores == [0.0, 1.0, 1.0]


def _gone(pid: int, wait: float = 5.0) -> bool:
    """The process no longer runs (exited, or a zombie waiting for its reaper)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------
# reference_comparison
# ---------------------------------------------------------------------------------------
REF = "def fib(n):\n    if n <= 1:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"
OTHER = ("def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
         "    return a\n")


class TestReferenceComparison:
    @pytest.mark.parametrize("method", ["ast", "token", "complexity"])
    @pytest.mark.parametrize("reference", ["file", "code", "directory"])
    def test_identical_code_scores_1_under_every_method(self, fx, method, reference):
        fx.files({"solution.py": REF})
        fx.task_file("ref/solution.py", REF)
        extra = {"file": "reference: {file: ref/solution.py}\n",
                 "code": "reference:\n  code: |\n" + textwrap.indent(REF, "    "),
                 "directory": "reference: {directory: ref}\n"}[reference]
        ref_file = ", reference_file: solution.py" if reference == "directory" else ""
        g = fx.grade(f"- {{type: reference_comparison, agent_file: solution.py{ref_file}, "
                     f"comparison_method: {method}, description: d}}", extra=extra)
        assert g.scores == [1.0]
        assert g.errors == [None]

    @pytest.mark.parametrize("method", ["ast", "token", "complexity"])
    def test_different_code_scores_the_similarity(self, fx, method):
        from ce_runtime.grade.similarity import similarity

        fx.files({"solution.py": OTHER})
        fx.task_file("ref/solution.py", REF)
        g = fx.grade(f"- {{type: reference_comparison, agent_file: solution.py, "
                     f"comparison_method: {method}, similarity_threshold: 0.5, description: d}}",
                     extra="reference: {file: ref/solution.py}\n")
        expected = similarity(method, OTHER, REF)
        assert 0.0 < expected < 1.0
        assert g.scores == [expected]
        assert g["c0"].pass_threshold == 0.5  # the similarity threshold is the threshold
        assert g["c0"].passed is (expected >= 0.5)

    # coder_eval 0.12.16's numbers (tests/test_similarity.py GOLDEN): a threshold
    # calibrated on coder_eval decides the same way in ce.
    @pytest.mark.parametrize("agent, method, expected, passed", [
        ("def add(a, b):\n    x = a + b\n    return x\n", "ast", 0.827586, True),
        ("def add(a, b):\n    x = a + b\n    return x\n", "token", 0.9, True),
        ("def add(a, b):\n    return sum([a, b])\n", "ast", 0.740741, False),
        ("def add(a, b, c=0):\n    return a + b + c\n", "ast", 0.8, True),  # 24/30: >=
        ("def add(a, b):\n    x = a + b\n    y = x\n    return y\n", "ast", 0.705882, False),
        ("def add(a, b):\n    x = a + b\n    y = x\n    return y\n", "token", 0.818182, True),
    ])
    def test_verdict_at_0_8_is_coder_evals(self, fx, agent, method, expected, passed):
        add = "def add(a, b):\n    return a + b\n"
        fx.files({"solution.py": agent})
        fx.task_file("ref/solution.py", add)
        g = fx.grade(f"- {{type: reference_comparison, agent_file: solution.py, "
                     f"comparison_method: {method}, similarity_threshold: 0.8, "
                     f"description: d}}", extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [pytest.approx(expected, abs=5e-7)]
        assert g.errors == [None]
        assert g["c0"].passed is passed

    @pytest.mark.parametrize("name, text, method", [
        ("solution.py", "def add(a, b)\n    return a + b\n", "ast"),
        ("solution.py", "def add(a, b)\n    return a + b\n", "complexity"),
        ("solution.py", "def add(a, b):\n        x = a\n    return x + b\n", "token"),
        ("solution.js", "function add(a, b) {\n  return a + b;\n}\n", "ast"),
    ])
    def test_code_the_method_cannot_read_is_0_with_error(self, fx, name, text, method):
        fx.files({name: text})
        fx.task_file("ref/solution.py", REF)
        g = fx.grade(f"- {{type: reference_comparison, agent_file: {name}, "
                     f"comparison_method: {method}, description: d}}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [0.0]
        assert "agent's file" in (g.errors[0] or "")

    def test_javascript_under_token_is_read_as_python_tokens(self, fx):
        # coder_eval tokenizes any file as Python: 0.810811 against `return a + b` code
        fx.files({"solution.js": "function add(a, b) {\n  return a + b;\n}\n"})
        fx.task_file("ref/solution.py", "def add(a, b):\n    return a + b\n")
        g = fx.grade("- {type: reference_comparison, agent_file: solution.js, "
                     "comparison_method: token, description: d}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [pytest.approx(0.810811, abs=5e-7)]
        assert g.errors == [None]

    def test_empty_reference_is_an_error(self, fx):
        fx.files({"solution.py": REF})
        fx.task_file("ref/solution.py", "")
        g = fx.grade("- {type: reference_comparison, agent_file: solution.py, description: d}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [0.0]
        assert "reference file is empty" in (g.errors[0] or "")

    def test_threshold_is_similarity_threshold(self, fx):
        fx.files({"solution.py": OTHER})
        fx.task_file("ref/solution.py", REF)
        g = fx.grade("- {type: reference_comparison, agent_file: solution.py, "
                     "similarity_threshold: 0.99, description: d}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g["c0"].pass_threshold == 0.99 and not g["c0"].passed

    def test_missing_agent_file_is_0_with_error(self, fx):
        fx.task_file("ref/solution.py", REF)
        g = fx.grade("- {type: reference_comparison, agent_file: solution.py, description: d}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [0.0]
        assert "solution.py" in (g.errors[0] or "")

    def test_agent_file_glob_needs_one_match(self, fx):
        fx.files({"a/s.py": REF, "b/s.py": REF})
        fx.task_file("ref/solution.py", REF)
        g = fx.grade("- {type: reference_comparison, agent_file: '*/s.py', description: d}",
                     extra="reference: {file: ref/solution.py}\n")
        assert g.scores == [0.0]
        assert "matches 2 files" in (g.errors[0] or "")


# ---------------------------------------------------------------------------------------
# command_executed / command_not_executed
# ---------------------------------------------------------------------------------------
CALLS = (
    ("Bash", {"command": "bash -lc 'curl -s http://wttr.in/Paris'"}, "ok"),
    ("Bash", {"command": "curl -s wttr.in/Oslo"}, "error"),
    ("Bash", {"command": "ls -la"}, "ok"),
    ("Read", {"file_path": "notes/curl.md"}, "ok"),
    ("Write", {"file_path": "a.sh", "content": "line one\ncurl x"}, None),  # unresolved
    ("bash", {"command": "curl lowercase-tool"}, "ok"),
)


class TestCommandExecuted:
    @pytest.mark.parametrize("args, expected", [
        # shell-wrapped commands match in their unwrapped form
        ("tool_name: Bash, command_pattern: '^curl'", 1.0),
        ("tool_name: Bash, command_pattern: '^curl', min_count: 3", 2 / 3),
        ("tool_name: Bash, command_pattern: '^bash -lc'", 1.0),  # ... and in the raw form
        ("tool_name: Bash, command_pattern: '^curl', min_count: 2, require_success: true",
         0.5),
        ("tool_name: bash, command_pattern: '^curl', min_count: 2", 0.5),  # exact tool name
        ("tool_name: Bash, command_pattern: 'wttr', exclude_pattern: 'Oslo', min_count: 2",
         0.5),
        # no tool_name: any tool; non-shell tools match their JSON parameters
        ("command_pattern: 'curl', min_count: 5", 1.0),
        ("command_pattern: 'curl', min_count: 6", 5 / 6),
        ("command_pattern: 'notes/curl\\.md'", 1.0),
        ("command_pattern: 'one.curl'", 0.0),  # JSON-escaped newline: no raw newline
        ("tool_name: Read", 1.0),
        ("min_count: 12", 0.5),  # every call matches
        ("tool_name: Grep", 0.0),
        ("tool_name: Grep, min_count: 0", 1.0),  # min_count 0 without max_count: 1
        # max_count: a window, binary
        ("tool_name: Bash, command_pattern: '^curl', max_count: 2", 1.0),
        ("tool_name: Bash, command_pattern: '^curl', max_count: 1", 0.0),
        ("tool_name: Bash, command_pattern: '^curl', min_count: 3, max_count: 5", 0.0),
        ("tool_name: Bash, command_pattern: '^curl', min_count: 0, max_count: 0", 0.0),
        ("tool_name: Bash, command_pattern: 'rm -rf', min_count: 0, max_count: 0", 1.0),
    ])
    def test_scores(self, fx, args, expected):
        fx.calls(*CALLS)
        g = fx.grade(f"- {{type: command_executed, {args}, description: d}}")
        assert g.scores == [pytest.approx(expected, abs=1e-12)]
        assert g.errors == [None]

    def test_patterns_are_dotall(self, fx):
        fx.calls(("Bash", {"command": "echo start\ncurl x"}, "ok"))
        g = fx.grade("- {type: command_executed, command_pattern: 'start.curl', "
                     "description: d}")
        assert g.scores == [1.0]

    def test_json_parameters_as_coder_eval_writes_them(self, fx):
        # in the agent's key order (file_path before content), json.dumps' separators;
        # non-ASCII matches escaped (coder_eval's form) and as written
        fx.calls(("Write", {"file_path": "notes.md", "content": "TODO café"}, "ok"))
        g = fx.grade(r"""
            - {type: command_executed, command_pattern: 'notes\.md.*TODO', description: order}
            - {type: command_executed, command_pattern: '"file_path": "notes\.md", "content"',
               description: separators}
            - {type: command_executed, command_pattern: 'caf\\u00e9', description: escaped}
            - {type: command_executed, command_pattern: 'café', description: as written}
        """)
        assert g.scores == [1.0] * 4

    @pytest.mark.parametrize("wrapper", [
        "bash -lc 'curl x'", 'sh -c "curl x"', "/bin/zsh -lc 'curl x'",
        "bash -l -c 'curl x'", "bash -ic 'curl x'", "ksh -c 'curl x'",  # as coder_eval
        "bash -lic 'curl x'", "dash -c 'curl x'",
        "bash -lc \"bash -c 'curl x'\"",
        "c'u'rl \"x\"", "bash -lc \"c'u'rl x\"",  # quote-obfuscated: the normalized form
    ])
    def test_shell_wrappers_are_unwrapped(self, fx, wrapper):
        fx.calls(("Bash", {"command": wrapper}, "ok"))
        g = fx.grade("- {type: command_executed, tool_name: Bash, command_pattern: '^curl x$',"
                     " description: d}")
        assert g.scores == [1.0]

    def test_command_not_executed_is_min_0_max_0(self, fx):
        fx.calls(*CALLS)
        g = fx.grade("""
            - {type: command_not_executed, tool_name: Bash, command_pattern: 'rm -rf',
               description: never ran}
            - {type: command_not_executed, tool_name: Bash, command_pattern: '^curl',
               description: ran twice}
            - {type: command_not_executed, command_pattern: '^ls', description: wrapper-free}
        """)
        assert g.scores == [1.0, 0.0, 0.0]
        assert [r.kind for r in g.result.criteria] == ["fraction"] * 3

    def test_without_a_trace_it_is_an_error(self, fx):
        g = fx.grade("- {type: command_executed, tool_name: Bash, description: d}")
        assert g.scores == [0.0]
        assert "trace" in (g.errors[0] or "")

    def test_min_count_above_max_count_is_a_compile_error(self, fx):
        errors = fx.errors("- {type: command_executed, min_count: 3, max_count: 1, "
                           "description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0111")

    def test_agent_none_rejects_trace_criteria(self, fx):
        errors = fx.errors("- {type: command_executed, tool_name: Bash, description: d}",
                           extra="agent: {type: none}\n")
        # (HEAD's initial_prompt is rejected too with type none: look for the criterion)
        assert any("command_executed" in e or "trace" in e for e in errors), errors


# ---------------------------------------------------------------------------------------
# commands_efficiency
# ---------------------------------------------------------------------------------------
class TestCommandsEfficiency:
    @pytest.mark.parametrize("n_calls, expected_commands, expected", [
        (6, 3, 0.5),
        (3, 3, 1.0),
        (1, 3, 1.0),  # fewer than expected: expected / max(actual, expected) = 1
        (4, 3, 0.75),
    ])
    def test_scores(self, fx, n_calls, expected_commands, expected):
        calls = [("Bash", {"command": f"step {i}"}, "error" if i % 2 else "ok")
                 for i in range(n_calls)]  # every call counts, failed ones too
        fx.calls(*calls)
        g = fx.grade(f"- {{type: commands_efficiency, expected_commands: {expected_commands},"
                     " description: d}")
        assert g.scores == [expected]
        assert g["c0"].kind == "continuous"

    def test_no_call_at_all_scores_0(self, fx):
        fx.calls()
        g = fx.grade("- {type: commands_efficiency, expected_commands: 3, description: d}")
        assert g.scores == [0.0]
        assert g.errors == [None]

    def test_defaults_to_the_tasks_expected_commands(self, fx):
        fx.calls(*[("Read", {"file_path": f"f{i}"}) for i in range(8)])
        g = fx.grade("- {type: commands_efficiency, description: d}",
                     extra="expected_commands: 2\n")
        assert g.scores == [0.25]

    def test_needs_an_expected_count(self, fx):
        errors = fx.errors("- {type: commands_efficiency, description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0102")


# ---------------------------------------------------------------------------------------
# skill_triggered
# ---------------------------------------------------------------------------------------
class TestSkillTriggered:
    @pytest.mark.parametrize("calls, skill, expected_skill, score, observed", [
        ([("Skill", {"skill": "pdf"})], "pdf", "pdf", 1.0, "yes"),
        ([("Skill", {"skill": "my-plugin:pdf"})], "pdf", "pdf", 1.0, "yes"),  # prefix
        ([("Read", {"file_path": "/ws/.claude/skills/pdf/SKILL.md"})], "pdf", "pdf", 1.0,
         "yes"),
        ([("Bash", {"command": "cat .agents/skills/pdf/SKILL.md"})], "pdf", "pdf", 1.0, "yes"),
        ([("Read", {"file_path": "skills/pdf-extra/SKILL.md"})], "pdf", "pdf", 0.0, "no"),
        ([("Skill", {"skill": "docx"})], "pdf", "pdf", 0.0, "no"),
        ([], "pdf", "pdf", 0.0, "no"),
        ([], "pdf", "", 1.0, "no"),  # negative row: not firing is right
        ([("Skill", {"skill": "pdf"})], "pdf", "", 0.0, "yes"),
        ([("Skill", {"skill": "pdf"})], "pdf", "docx", 0.0, "yes"),
    ])
    def test_scores_and_labels(self, fx, calls, skill, expected_skill, score, observed):
        fx.calls(*calls)
        g = fx.grade(f"- {{type: skill_triggered, skill_name: {skill}, "
                     f"expected_skill: '{expected_skill}', description: d}}")
        r = g["c0"]
        assert (r.score, r.kind) == (score, "classification")
        assert r.outputs == {"observed": observed,
                             "expected": "yes" if expected_skill == skill else "no"}

    def test_dataset_rows(self, fx):
        fx.calls(("Skill", {"skill": "pdf"}))
        extra = """\
            dataset:
              rows:
                - {id: pos, expected_skill: pdf}
                - {id: neg, expected_skill: ""}
        """
        entry = "- {type: skill_triggered, skill_name: pdf, expected_skill: '${row.expected_skill}',"\
                " description: d}"
        trials = fx.trials(entry, extra)
        assert [t.trial_id.split("/")[-2] for t in trials] == ["pos", "neg"]
        pos, neg = (fx.grade_plan(t)["c0"] for t in trials)
        assert (pos.score, pos.outputs) == (1.0, {"observed": "yes", "expected": "yes"})
        assert (neg.score, neg.outputs) == (0.0, {"observed": "yes", "expected": "no"})


# ---------------------------------------------------------------------------------------
# classification_match
# ---------------------------------------------------------------------------------------
class TestClassificationMatch:
    @pytest.mark.parametrize("content, expected_label, case_sensitive, score, observed", [
        ("bug", "bug", False, 1.0, "bug"),
        ("  BUG \n", "bug", False, 1.0, "bug"),  # stripped, case-insensitive
        ("Bug", "bug", True, 0.0, "(other)"),
        ("feature", "bug", False, 0.0, "feature"),
        ("question", "bug", False, 0.0, "(other)"),
        ("bug feature", "bug", False, 0.0, "(other)"),
        ("", "bug", False, 0.0, "(none)"),
        (" \n\t", "bug", False, 0.0, "(none)"),
        (None, "bug", False, 0.0, "(none)"),  # missing file
        ("Feature", "FEATURE", False, 1.0, "feature"),  # expected canonicalized too
    ])
    def test_labels(self, fx, content, expected_label, case_sensitive, score, observed):
        if content is not None:
            fx.files({"label.txt": content})
        g = fx.grade(f"- {{type: classification_match, path: label.txt, "
                     f"expected_label: {expected_label}, allowed_labels: [bug, feature], "
                     f"case_sensitive: {str(case_sensitive).lower()}, description: d}}")
        r = g["c0"]
        assert (r.score, r.error, r.kind) == (score, None, "classification")
        assert r.outputs["observed"] == observed
        assert r.outputs["expected"] == expected_label.lower()

    def test_expected_label_must_be_allowed(self, fx):
        errors = fx.errors("- {type: classification_match, path: l.txt, expected_label: x, "
                           "allowed_labels: [bug, feature], description: d}")
        assert len(errors) == 1 and errors[0].startswith("CE0111")

    def test_dataset_rows(self, fx):
        fx.files({"label.txt": "feature\n"})
        extra = """\
            dataset:
              rows:
                - {id: r1, label: feature}
                - {id: r2, label: bug}
        """
        trials = fx.trials("- {type: classification_match, path: label.txt, "
                           "expected_label: '${row.label}', allowed_labels: [bug, feature], "
                           "description: d}", extra)
        scores = [fx.grade_plan(t).scores[0] for t in trials]
        assert scores == [1.0, 0.0]


# ---------------------------------------------------------------------------------------
# type: expr and user criteria (criteria_files)
# ---------------------------------------------------------------------------------------
class TestExpr:
    def test_boolean_and_numeric_expressions(self, fx):
        fx.files({"notes.md": "done\n"}).calls(("Bash", {"command": "rm -rf build"}),
                                               ("Read", {"file_path": "a"}))
        g = fx.grade("""
            - {type: expr, expr: 'path_exists("notes.md")', description: bool true}
            - {type: expr, expr: '"todo" in or_else(read_text("notes.md"), "")',
               description: bool false}
            - {type: expr, kind: continuous, expr: 'min(1.0, 1.0 / len(trace.tool_calls))',
               description: number}
            - {type: expr, expr: 'count(trace.tool_calls, c -> c.matches(re"rm -rf")) == 0',
               description: never rm -rf}
            - {type: expr, kind: continuous, expr: '2.5', description: clamped}
        """)
        assert g.scores == [1.0, 0.0, 0.5, 0.0, 1.0]
        assert [r.kind for r in g.result.criteria][:2] == ["binary", "binary"]

    def test_a_runtime_error_scores_0_with_the_error(self, fx):
        fx.files({"pattern.txt": "(["})
        g = fx.grade("""
            - {type: expr, expr: 'search("abc", or_else(read_text("pattern.txt"), ""), 0)',
               description: pattern from the workspace}
            - {type: expr, expr: 'try_search("abc", or_else(read_text("pattern.txt"), ""), 0)
               == null', description: try_search gives null}
        """)
        assert g.scores == [0.0, 1.0]
        assert "invalid regular expression" in (g.errors[0] or "")
        assert g.errors[1] is None

    def test_user_criterion_from_criteria_files(self, fx):
        fx.task_file("checks.ce", textwrap.dedent('''\
            criterion short_file(
                path: path "the file",
                max_chars: int = 10 "characters allowed (stripped)",
            ) -> fraction
            """Full marks up to max_chars characters; proportionally less beyond."""
              let text = read_text(path)
              score = if text == null then 0.0
                      else min(1.0, float(max_chars) / max(len(strip(text)), 1))
            end

            criterion used_tool(tool: str "tool name", at_least: int = 1 "calls") -> fraction
            """Calls of `tool` / at_least, capped at 1."""
              score = min(1.0, float(count(trace.tool_calls, c -> c.tool == tool))
                               / max(at_least, 1))
            end
        '''))
        fx.files({"a.py": "  0123456789abcdefghij\n"}).calls(("Bash", {"command": "x"}))
        g = fx.grade("""
            - {type: short_file, path: a.py, description: default}
            - {type: short_file, path: a.py, max_chars: 40, description: more}
            - {type: short_file, path: b.py, description: missing}
            - {type: used_tool, tool: Bash, at_least: 4, description: user trace criterion}
            - {type: used_tool, tool: Bash, description: default at_least}
        """, extra="criteria_files: [checks.ce]\n")
        assert g.scores == [0.5, 1.0, 0.0, 0.25, 1.0]
        assert g.errors == [None] * 5
        assert [r.kind for r in g.result.criteria] == ["fraction"] * 5

    def test_user_criterion_is_checked_at_compile_time(self, fx):
        fx.task_file("checks.ce", textwrap.dedent('''\
            criterion needs_int(n: int "a number") -> binary
            """n is positive."""
              score = n > 0
            end
        '''))
        errors = fx.errors("- {type: needs_int, n: many, description: d}",
                           extra="criteria_files: [checks.ce]\n")
        assert errors == ["CE0103 `n` expects an integer, found a string"]


# ---------------------------------------------------------------------------------------
# scoring: weighted score, gate, weight 0, disabled judges, errors
# ---------------------------------------------------------------------------------------
class FakeJudge:
    def __init__(self, verdict: dict | None = None):
        self.calls: list[tuple[str, str]] = []
        self.verdict_value = verdict if verdict is not None else {"score": 0.8,
                                                                 "rationale": "fine"}

    def verdict(self, kind, rubric, files, settings, host, prompt=None):
        self.calls.append((kind, rubric))
        return self.verdict_value


class TestScoring:
    def test_weighted_score_and_gate(self, fx):
        fx.files({"a.txt": "hello"})
        g = fx.grade("""
            - {type: file_exists, path: a.txt, weight: 2, description: passes}
            - {type: file_contains, path: a.txt, includes: [hello, world], weight: 1,
               description: half}
            - {type: file_exists, path: b.txt, weight: 0.5, description: fails}
        """)
        assert g.scores == [1.0, 0.5, 0.0]
        assert g.result.weighted_score == pytest.approx((2 * 1 + 1 * 0.5 + 0.5 * 0) / 3.5)
        assert g.result.success is False
        assert [r.passed for r in g.result.criteria] == [True, False, False]

    def test_pass_threshold_is_inclusive(self, fx):
        fx.files({"a.txt": "hello"})
        g = fx.grade("""
            - {type: file_contains, path: a.txt, includes: [hello, world], pass_threshold: 0.5,
               description: 0.5 >= 0.5}
        """)
        assert g.scores == [0.5] and g.result.success

    def test_weight_0_is_reported_not_gating_not_weighted(self, fx):
        fx.files({"a.txt": "hello"})
        g = fx.grade("""
            - {type: file_exists, path: a.txt, description: gating}
            - {type: file_exists, path: b.txt, weight: 0, description: informational}
            - {type: file_contains, path: a.txt, includes: [hello], weight: 0, description: info}
        """)
        info = g["c1"]
        assert (info.score, info.passed, info.gating, info.weight) == (0.0, False, False, 0.0)
        assert g["c2"].score == 1.0 and not g["c2"].gating
        assert g.result.weighted_score == 1.0  # c1's 0 does not count
        assert g.result.success is True  # nor does its failure

    def test_all_weights_0(self, fx):
        g = fx.grade("- {type: file_exists, path: b.txt, weight: 0, description: d}")
        assert g.result.weighted_score == 0.0
        assert g.result.success is True  # no gating criterion

    def test_an_error_scores_0_and_fails_the_gate(self, fx):
        fx.files({"a/x.txt": "x", "b/x.txt": "x"})
        g = fx.grade("""
            - {type: file_contains, path: '*/x.txt', includes: [x], pass_threshold: 0,
               description: ambiguous}
        """)
        r = g["c0"]
        assert (r.score, r.passed) == (0.0, False)  # an error never passes, even at 0
        assert r.error and g.result.success is False

    @pytest.mark.parametrize("kind", ["llm_judge", "agent_judge"])
    def test_disabled_judge_is_not_run_and_excluded(self, fx, kind):
        fx.files({"a.txt": "hello"})
        judge = FakeJudge({"score": 0.0})
        g = fx.grade(f"""
            - {{type: file_exists, path: a.txt, description: passes}}
            - {{type: {kind}, prompt: grade it, enabled: false, weight: 5, description: disabled}}
        """, judge=judge)
        r = g["c1"]
        assert judge.calls == []  # the model is never called
        assert r.disabled and not r.gating and r.error is None
        assert g.result.weighted_score == 1.0  # coder_eval would count it as 1.0 x 5
        assert g.result.success is True

    def test_disabled_judge_needs_no_judge_transport(self, fx):
        g = fx.grade("- {type: llm_judge, prompt: grade it, enabled: false, description: d}")
        assert g["c0"].disabled
        assert g.result.weighted_score == 0.0 and g.result.success is True

    def test_enabled_judge(self, fx):
        judge = FakeJudge({"score": 0.8, "rationale": "fine"})
        g = fx.grade("""
            - {type: llm_judge, prompt: grade it, description: default threshold 0.7}
            - {type: llm_judge, prompt: strict, pass_threshold: 0.9, description: strict}
        """, judge=judge)
        assert g.scores == [0.8, 0.8]
        assert [r.pass_threshold for r in g.result.criteria] == [0.7, 0.9]
        assert [r.passed for r in g.result.criteria] == [True, False]
        assert [c[1] for c in judge.calls] == ["grade it", "strict"]

    @pytest.mark.parametrize("verdict", [{"rationale": "no score"}, {"score": "high"},
                                         {"score": True}, {"score": float("nan")},
                                         {"score": float("inf")}, {"score": "Infinity"},
                                         {"score": None}, {"score": [1]}])
    def test_judge_verdict_without_a_score_is_0_with_error(self, fx, verdict):
        # the guide: non-numeric or non-finite -> 0 with an error (an infinity is not
        # clamped to a full score)
        g = fx.grade("- {type: llm_judge, prompt: p, description: d}",
                     judge=FakeJudge(verdict))
        assert g.scores == [0.0] and "no numeric score" in (g.errors[0] or "")

    def test_judge_score_coercible_to_a_number_counts(self, fx):
        # the guide: only a score "not coercible to float" is an error (coder_eval: 0.8)
        g = fx.grade("- {type: llm_judge, prompt: p, description: d}",
                     judge=FakeJudge({"score": " 0.8 ", "rationale": "r"}))
        assert g.scores == [0.8] and g.errors == [None]

    def test_judge_score_is_clamped(self, fx):
        g = fx.grade("- {type: llm_judge, prompt: p, description: d}",
                     judge=FakeJudge({"score": 7}))
        assert g.scores == [1.0]

    def test_no_judge_transport_is_an_infrastructure_failure(self, fx):
        with pytest.raises(InfrastructureError):
            fx.grade("- {type: llm_judge, prompt: p, description: d}")

    def test_stopped_early_gates_on_armed_criteria_only(self, fx):
        fx.calls(("Bash", {"command": "curl x"}))
        # the trial's record says it stopped early (task.json `stopped_early`)
        g = fx.grade("""
            - {type: command_executed, command_pattern: curl, stop_when: pass, description: armed}
            - {type: file_exists, path: never.txt, description: not armed}
        """, extra="run_limits: {stop_early: true}\n", stopped_early=True)
        assert g.result.stopped_early
        assert g["c1"].advisory and not g["c1"].gating
        assert g.result.success is True  # gated on c0 only
        assert g.result.weighted_score == 0.5  # advisory criteria still count in the score


def test_judge_rationale_never_stores_the_reference(tmp_path):
    from ce_runtime.grade.host import Host

    class Quoting:
        def verdict(self, kind, rubric, files, settings, host, prompt=None):
            return {"score": 0.9, "rationale": "matches `return fibonacci(n - 1) + x` well"}

    host = Host(str(tmp_path), reference_code="def f(n):\n    return fibonacci(n - 1) + x\n",
                judge=Quoting())
    verdict = host.b_llm_judge("grade", [], {})
    assert "fibonacci" not in verdict["rationale"] and "[reference scrubbed]" in \
        verdict["rationale"]


def test_judge_prompt_shows_a_reference_directory(tmp_path):
    from ce_runtime.grade.host import Host
    from ce_runtime.grade.judge import build_prompt

    ref = tmp_path / "ref"
    (ref / "pkg").mkdir(parents=True)
    (ref / "pkg" / "a.py").write_text("A = 1\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    host = Host(str(ws), reference_dir=str(ref))
    prompt = build_prompt("grade it", [], {"include_reference": True}, host)
    assert "## pkg/a.py" in prompt and "A = 1" in prompt
    assert "Reference solution" not in build_prompt("grade it", [], {}, host)


UIPATH_FAKE = """#!/bin/sh
# a stand-in `uipath` CLI: writes the output file `uipath eval` would write
while [ $# -gt 0 ]; do
  if [ "$1" = "--output-file" ]; then out="$2"; fi
  shift
done
cat > "$out" <<'JSON'
{"evaluationSetResults": [
  {"evaluationRunResults": [
    {"evaluatorId": "exact", "result": {"score": 1.0}},
    {"evaluatorId": "judge", "result": {"score": 0.5}}]},
  {"evaluationRunResults": [
    {"evaluatorId": "exact", "result": {"score": 0.0}},
    {"evaluatorId": "judge", "result": {"score": "error"}}]}]}
JSON
"""


def test_uipath_eval_scores_thresholds_met(fx):
    fake = fx.ws / ".venv" / "bin" / "uipath"
    fake.parent.mkdir(parents=True)
    fake.write_text(UIPATH_FAKE)
    fake.chmod(0o755)
    # exact: mean(1, 0) = 0.5; judge: mean(0.5, 0 for the error) = 0.25; `*` = 0.375
    g = fx.grade("""
        - type: uipath_eval
          agent_name: my-agent
          eval_set: regression-v1
          thresholds: {exact: 0.5, judge: 0.3, "*": 0.3}
          description: evals
    """)
    assert g.scores == [pytest.approx(2 / 3)]
    assert not list(fx.ws.glob(".ce-uipath-eval-*"))  # its output file is cleaned up


def test_uipath_eval_without_the_cli_is_a_criterion_error(fx):
    g = fx.grade("""
        - {type: uipath_eval, agent_name: a, eval_set: s, thresholds: {x: 0.5}, description: d}
    """)
    assert g.scores == [0.0]
    assert "not installed in the sandbox" in g.result.criteria[0].error


class TestRecordShorthand:
    """`record Check(...) shorthand text`: a bare string where a Check is expected is
    {text: ...} with the other fields' defaults; a mapping is still the whole record."""

    CE = '''
record Check(
    text: str "the text",
    times: int = 1 "at least this many times",
) shorthand text

criterion notes_mention(checks: list[Check] "what the notes must mention") -> fraction
  let notes = or_else(read_text("notes.md"), "")
  score = float(count(checks, c -> c.text in notes and c.times >= 1)) / len(checks)
end
'''

    def test_a_bare_string_is_the_record_with_defaults(self, fx):
        fx.task_file("checks.ce", self.CE)
        fx.files({"notes.md": "alpha and gamma"})
        extra = "criteria_files: [checks.ce]\n"
        trial = fx.trials("- {type: notes_mention, description: d, checks: "
                          "[alpha, {text: beta, times: 2}, {text: gamma, times: 0}]}",
                          extra)[0]
        assert trial.plan.criteria[0].args["checks"] == [
            "alpha", {"text": "beta", "times": 2}, {"text": "gamma", "times": 0}]
        g = fx.grade_plan(trial)
        # alpha (times 1 by default) holds; beta is missing; gamma's times 0 fails c.times >= 1
        assert g.scores == [pytest.approx(1 / 3)]
        assert g.errors == [None]

    def test_cli_called_flags_take_a_bare_string(self, fx):
        trial = fx.trials("- {type: cli_called, description: d, verb: 'ixp list', "
                          "flags: {name: json, yes: {present: true}}}")[0]
        flags = trial.plan.criteria[0].args["flags"]
        assert flags["name"]["equals"] == "json" and flags["name"]["present"] is False
        assert flags["yes"]["present"] is True and flags["yes"]["equals"] is None
