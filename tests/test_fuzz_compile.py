"""Property: no input makes the compiler raise; every diagnostic has a location or is usage.

Hypothesis mutates the bundled example tasks (drop keys, swap values for values of other
types, add unknown keys, break YAML text) and compiles the result.
"""

import contextlib
import copy
import pathlib

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ce_lang.compiler import compile_paths

TASKS = sorted(p for p in (pathlib.Path(__file__).resolve().parents[1] / "tasks").glob("*.yaml"))
EXAMPLES = [yaml.safe_load(p.read_text()) for p in TASKS]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
                    st.text(max_size=8), st.just("${row.x}"), st.just("../.."))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)


def paths_of(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths_of(v, (*prefix, i))


def apply(doc, path, op, new):
    if not path:
        return new if op == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    key = path[-1]
    if op == "delete":
        del parent[key]
    elif op == "replace":
        parent[key] = new
    elif op == "add" and isinstance(parent[key], dict):
        parent[key]["x_" + str(new)[:5]] = new
    return doc


@st.composite
def mutated(draw):
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 4))):
        paths = list(paths_of(doc))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["delete", "replace", "add"]))
        with contextlib.suppress(KeyError, IndexError, TypeError):
            doc = apply(doc, path, op, draw(values))
    text = yaml.safe_dump(doc, sort_keys=False)
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(["", ":", "- ", "\t", "{", "&a", "*b"])) \
            + text[cut:]
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(text=mutated())
def test_compiler_never_raises(tmp_path, text):
    task = tmp_path / "task.yaml"
    task.write_text(text)
    result = compile_paths([str(task)])
    for d in result.diagnostics:
        assert d.span is not None and d.span.line >= 1 and d.span.col >= 1, d
        assert d.message
    if result.errors == 0:
        assert result.trials or result.task_files == 0
