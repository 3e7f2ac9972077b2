"""Fuzz: whatever a task file holds, `ce compile` ends with a clear exit, in bounded time,
memory and output (issue 9).

Four Hypothesis strategies make task files: documents shaped by the task schema with
hostile values, YAML text broken at random, expressions of the criteria language built
from its grammar, and the classes of inputs that once crashed or hung the compiler
(sized by Hypothesis, up to the sizes that hurt). Each is compiled by the real CLI in a
worker process (tests/fuzz_worker.py) under an address-space limit and 10 s of CPU;
the checks: exit 0, 1 or 2 (never 3, the internal-error exit), no traceback, and
output that stays proportional to the input.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
TASK_TEXTS = [p.read_text() for p in sorted((ROOT / "tasks").glob("*.yaml"))]
TASK_DOCS = [yaml.safe_load(t) for t in TASK_TEXTS]
EXAMPLES = settings(max_examples=int(os.environ.get("CE_FUZZ_EXAMPLES", "120")),
                    deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


class Worker:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fuzz_worker.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "CE_PLAIN": "1"})

    def compile(self, cwd: pathlib.Path, *args: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"cwd": str(cwd), "args": ["compile", *args]}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the worker died (exit {self.proc.poll()})"
        return json.loads(line)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(30)


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def check(worker: Worker, tmp: pathlib.Path, text: str, files: dict[str, str] | None = None
          ) -> dict:
    """Compile `text` as task.yaml in a fresh directory (with `files` beside it)."""
    case = tmp / f"case{len(list(tmp.iterdir()))}"
    case.mkdir()
    (case / "task.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    size = len(text)
    for name, content in (files or {}).items():
        (case / name).parent.mkdir(parents=True, exist_ok=True)
        (case / name).write_text(content)
        size += len(content)
    answer = worker.compile(case, "task.yaml")
    shown = text if len(text) < 600 else text[:300] + " ... " + text[-300:]
    assert answer["problem"] is None, f"{answer['problem']}\n--- input:\n{shown}"
    assert answer["exit"] in (0, 1, 2), f"exit {answer['exit']}\n--- input:\n{shown}"
    assert answer["output"] <= 20 * size + 20_000, \
        f"{answer['output']} characters of output for {size} of input\n--- input:\n{shown}"
    return answer


# -- 1. documents shaped by the schema, with hostile values ----------------------------------
HOSTILE = st.sampled_from([
    None, True, 0, -1, 2**70, 1e308, float("nan"), "", " ", "${row.x}", "${row.", "{{", "../..",
    "/proc/self/environ", "/dev/zero", "$TASK_DIR/../../etc/passwd", "a{99999999999}",
    "(" * 1000 + "a" + ")" * 1000, "[" * 500, "x" * 5000, "9" * 5000, "\x00\x07", "é\u202e",
    "re\"(\"", "not " * 1000 + "true", "1 + " * 2000 + "1", "-" * 3000 + "1",
    "file:///etc", "ext::sh -c id", "--upload-pack=id", "ftp://x", "@" * 10,
    [], {}, [None], {"": None}, {"<<": {}}, [[[[[]]]]],
])
SCALARS = st.one_of(HOSTILE, st.integers(), st.floats(), st.text(max_size=30),
                    st.booleans(), st.none())
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


@st.composite
def schema_documents(draw) -> str:
    doc = copy.deepcopy(draw(st.sampled_from(TASK_DOCS)))
    for _ in range(draw(st.integers(1, 6))):
        path = draw(st.sampled_from(list(_paths(doc))))
        new = draw(VALUES)
        if not path:
            continue
        parent = doc
        with contextlib.suppress(KeyError, IndexError, TypeError):
            for part in path[:-1]:
                parent = parent[part]
            op = draw(st.sampled_from(["replace", "delete", "add"]))
            if op == "replace":
                parent[path[-1]] = new
            elif op == "delete":
                del parent[path[-1]]
            elif isinstance(parent[path[-1]], dict):
                parent[path[-1]][draw(st.text(max_size=10))] = new
    return yaml.safe_dump(doc, allow_unicode=True)


# -- 2. YAML text broken at random -------------------------------------------------------------
TOKENS = ["&a ", "*a", "<<: *a\n", "{", "}", "[", "]", ": ", "- ", "\t", "!!python/object ",
          "!!binary ", "? ", "|\n", ">-\n", "'", '"', "#", "%YAML 1.1\n", "---\n", "...\n",
          "\x00", "\ufeff", "\r", "  ", "\n  - ", "*b", "&b [*b]", "~", "0x", "1e999"]


@st.composite
def broken_yaml(draw) -> str:
    text = draw(st.sampled_from(TASK_TEXTS))
    for _ in range(draw(st.integers(1, 5))):
        at = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "duplicate"]))
        if op == "insert":
            token = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=4)))
            text = text[:at] + token * draw(st.sampled_from([1, 1, 2, 50])) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 40)):]
        else:
            start = text.rfind("\n", 0, at) + 1
            end = text.find("\n", at)
            line = text[start:end if end >= 0 else len(text)]
            text = text[:start] + line + "\n" + text[start:]
    return text


# -- 3. expressions of the criteria language ------------------------------------------------
NAMES = ["trace", "x", "tool_calls", "len", "count", "exists", "all", "read_text", "glob",
         "path_exists", "read_json", "min", "max", "sum", "strip", "lower", "regex", "c",
         "row", "params", "final_text", "nope"]
LEAVES = st.one_of(
    st.integers(-10, 10).map(str), st.sampled_from(["0.5", "1e400", "9" * 60, "true", "false",
                                                   "null", '"a"', "'b'", 're"a+"', 're"("',
                                                   'r"\\d"', "trace", "trace.tool_calls"]),
    st.sampled_from(NAMES))


def _grow(inner):
    return st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%", "==", "<", ">=", "!=", "and",
                                          "or", "in"]), inner).map(" ".join),
        inner.map(lambda e: f"not {e}"), inner.map(lambda e: f"-{e}"),
        inner.map(lambda e: f"({e})"),
        st.tuples(st.sampled_from(NAMES), st.lists(inner, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"),
        st.tuples(st.sampled_from(["count", "exists", "all", "map", "filter"]), inner,
                  inner).map(lambda t: f"{t[0]}({t[1]}, c -> {t[2]})"),
        st.tuples(inner, st.sampled_from(["tool", "command", "len", "x", "status"])).map(
            lambda t: f"{t[0]}.{t[1]}"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.tuples(inner, inner).map(lambda t: f'{{"k": {t[0]}, "j": {t[1]}}}'),
        st.tuples(inner, inner, inner).map(lambda t: f"if {t[0]} then {t[1]} else {t[2]}"),
    )


EXPRESSIONS = st.recursive(LEAVES, _grow, max_leaves=25)
TASK_WITH_EXPR = """task_id: fuzz
description: d
initial_prompt: go
success_criteria:
  - type: expr
    description: e
    expr: {expr}
"""


def with_expression(expr: str) -> str:
    return TASK_WITH_EXPR.format(expr=json.dumps(expr))


# -- 4. the inputs that once crashed or hung the compiler, sized -------------------------------
def _task(extra: str = "", criteria: str = "  - {type: file_exists, path: a.txt, "
          "description: d}\n") -> str:
    return f"task_id: fuzz\ndescription: d\ninitial_prompt: go\n{extra}" \
           f"success_criteria:\n{criteria}"


def _expr(expr: str) -> str:
    return with_expression(expr)


def _regex(pattern: str) -> str:
    return _task(criteria=f"  - type: file_matches_regex\n    description: d\n"
                          f"    path: a.txt\n    pattern: {json.dumps(pattern)}\n")


def _jmes(expression: str) -> str:
    return _task(criteria="  - type: json_check\n    description: d\n    path: a.json\n"
                          f"    assertions:\n      - expression: {json.dumps(expression)}\n"
                          "        operator: exists\n")


def _dataset_row(row: str) -> tuple[str, dict[str, str]]:
    return (_task("dataset:\n  paths: [rows.jsonl]\n").replace("initial_prompt: go",
                                                               'initial_prompt: "${row.q}"'),
            {"rows.jsonl": '{"id": "a", "q": "x"}\n' + row + "\n"})


def _ce(body: str) -> tuple[str, dict[str, str]]:
    return (_task("criteria_files: [defs.ce]\n",
                  "  - {type: mine, description: d}\n"), {"defs.ce": body})


def known_bad(kind: str, n: int) -> tuple[str, dict[str, str]]:
    if kind == "merge_self":
        return "a: &a\n  <<: *a\n" + _task(), {}
    if kind == "merge_many":
        keys = "".join(f"  k{i}: {i}\n" for i in range(n))
        return _task("x-d: &d\n" + keys + "sandbox:\n  env:\n    <<: *d\n"), {}
    if kind == "regex_repeat":
        return _regex("a{" + "9" * min(n, 200) + "}"), {}
    if kind == "regex_groups":
        return _regex("(" * n + "a" + ")" * n), {}
    if kind == "jmes_brackets":
        return _jmes("[" * n + "a" + "]" * n), {}
    if kind == "json_literal":
        return _task(criteria="  - type: json_check\n    description: d\n    path: a.json\n"
                              "    assertions:\n      - expression: a\n"
                              f"        expected: {'[' * n}1{']' * n}\n"), {}
    if kind == "parens":
        return _expr("(" * n + "1" + ")" * n + " == 1"), {}
    if kind == "plus_chain":
        return _expr("1 + " * n + "1 == 2"), {}
    if kind == "minus_chain":
        return _expr("-" * n + "1 == 1"), {}
    if kind == "not_chain":
        return _expr("not " * n + "true"), {}
    if kind == "long_int":
        return _expr("9" * n + " > 1"), {}
    if kind == "long_string":
        return _expr('len("' + "a" * n * 10 + '") > 0'), {}
    if kind == "deep_row":
        return _dataset_row('{"id": "b", "q": ' + "[" * n + "1" + "]" * n + "}")
    if kind == "long_number_row":
        return _dataset_row('{"id": "b", "q": ' + "9" * n + "}")
    if kind == "ce_recursive":
        return _ce("criterion mine() -> binary\n  score = mine()\nend\n")
    if kind == "ce_unknown_call":
        return _ce("criterion mine() -> binary\n  score = lenn(trace.tool_calls) > 0\nend\n")
    if kind == "unknown_keys":
        return _task("".join(f"unknown_{i}: {i}\n" for i in range(n))), {}
    if kind == "long_line":
        return _task("tags: [" + ",".join(["t"] * n) + "\n"), {}
    raise AssertionError(kind)


KINDS = ["merge_self", "merge_many", "regex_repeat", "regex_groups", "jmes_brackets",
         "json_literal", "parens", "plus_chain", "minus_chain", "not_chain", "long_int",
         "long_string", "deep_row", "long_number_row", "ce_recursive", "ce_unknown_call",
         "unknown_keys", "long_line"]


# -- the tests ----------------------------------------------------------------------------------
@EXAMPLES
@given(text=schema_documents())
def test_schema_shaped_documents(worker, tmp_path_factory, text):
    check(worker, tmp_path_factory.mktemp("schema"), text)


@EXAMPLES
@given(text=broken_yaml())
def test_broken_yaml(worker, tmp_path_factory, text):
    check(worker, tmp_path_factory.mktemp("yaml"), text)


@EXAMPLES
@given(expr=EXPRESSIONS)
def test_language_expressions(worker, tmp_path_factory, expr):
    check(worker, tmp_path_factory.mktemp("expr"), with_expression(expr))


@settings(max_examples=3 * len(KINDS), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(kind=st.sampled_from(KINDS), n=st.sampled_from([1, 10, 300, 1000, 5000, 20000]))
def test_inputs_that_once_crashed_or_hung(worker, tmp_path_factory, kind, n):
    text, files = known_bad(kind, n)
    check(worker, tmp_path_factory.mktemp(kind), text, files)


@pytest.mark.parametrize("kind", KINDS)
def test_each_known_class_at_its_worst_size(worker, tmp_path, kind):
    """Every class at the size the issue reported, whatever Hypothesis drew."""
    text, files = known_bad(kind, 20000 if kind == "unknown_keys" else 5000)
    check(worker, tmp_path, text, files)
