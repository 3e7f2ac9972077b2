"""Behaviour of ce_runtime.grade.similarity, the scores behind reference_comparison.

The GOLDEN table holds coder_eval 0.12.16's own numbers: its scoring functions run by
its interpreter (Python 3.13) on exactly these pairs, called as its checker calls them
(a reference comparison failing with an exception is its score 0 with an error: ERROR).
ce must reproduce them, except where the module doc says **ce:** (identical texts).
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ce_runtime.grade.similarity import (
    METHODS,
    ComparisonError,
    ast_node_types,
    complexity_metrics,
    python_token_types,
    similarity,
)

ADD = "def add(a, b):\n    return a + b\n"
TOTAL = ("def total(items):\n    result = 0\n    for item in items:\n        if item > 0:\n"
         "            result += item\n    return result\n")
CLASS = ("class Stack:\n    def __init__(self):\n        self.items = []\n\n"
         "    def push(self, x):\n        self.items.append(x)\n\n"
         "    def pop(self):\n        if not self.items:\n            raise IndexError('empty')\n"
         "        return self.items.pop()\n")
NESTED = ("def outer(xs):\n    def keep(x):\n        return x > 0 and x % 2 == 0\n"
          "    return [x for x in xs if keep(x)]\n")
COMPREHENSIONS = ("def squares(xs):\n    return [x * x for x in xs if x]\n\n"
                  "def table(xs):\n    return {x: [y for y in range(x)] for x in xs}\n")
TRY = ("def load(path):\n    try:\n        with open(path) as fh:\n            return fh.read()\n"
       "    except FileNotFoundError:\n        return None\n    except OSError as exc:\n"
       "        raise RuntimeError(path) from exc\n")
MATCH = ("def kind(v):\n    match v:\n        case 0:\n            return 'zero'\n"
         "        case [x, *_]:\n            return 'list'\n        case {'k': k}:\n"
         "            return 'dict'\n        case _:\n            return 'other'\n")
FSTRING = "def show(name, n):\n    return f'{name!r}: {n:>{8}}'\n"
LONG = "".join(TOTAL.replace("total", f"total{i}") for i in range(12))
JS = "function add(a, b) {\n  return a + b;\n}\n"

PAIRS = {  # id: (agent text, reference text)
    "identical": (ADD, ADD),
    "identical-class": (CLASS, CLASS),
    "temp-variable": ("def add(a, b):\n    x = a + b\n    return x\n", ADD),
    "renamed": (TOTAL.replace("items", "values").replace("item", "v").replace("result", "acc"),
                TOTAL),
    "reordered": ("def f(a, b):\n    y = b * 2\n    x = a + 1\n    return x, y\n",
                  "def f(a, b):\n    x = a + 1\n    y = b * 2\n    return x, y\n"),
    "extra-statements": (TOTAL.replace("    return result\n", "    print(result)\n"
                                       "    assert result >= 0\n    return result\n"), TOTAL),
    "docstring-added": (TOTAL.replace("def total(items):\n",
                                      'def total(items):\n    """Sum the positives."""\n'),
                        TOTAL),
    "empty-agent": ("", ADD),
    "blank-agent": ("\n\n", ADD),
    "comment-only-agent": ("# TODO\n", ADD),
    "comments-added": ("# header\n" + TOTAL.replace("result = 0\n", "result = 0  # start\n"),
                       TOTAL),
    "reindented": (TOTAL.replace("    ", "  "), TOTAL),
    "blank-lines": (TOTAL.replace("\n    return", "\n\n\n    return"), TOTAL),
    "unparseable-agent": ("def add(a, b)\n    return a + b\n", ADD),
    "unterminated-string": ("def add(a, b):\n    return 'a + b\n", ADD),
    "bad-indent": ("def add(a, b):\n        x = a\n    return x + b\n", ADD),
    "javascript": (JS, ADD),
    "javascript-both": (JS.replace("a + b", "b + a"), JS),
    "class": (CLASS.replace("raise IndexError('empty')", "return None"), CLASS),
    "class-vs-function": (CLASS, ADD),
    "nested-function": (NESTED, "def outer(xs):\n    return [x for x in xs if x > 0 and "
                                "x % 2 == 0]\n"),
    "comprehension-vs-loop": ("def squares(xs):\n    out = []\n    for x in xs:\n        if x:\n"
                              "            out.append(x * x)\n    return out\n", COMPREHENSIONS),
    "try-except": (TRY.replace("    except OSError as exc:\n        raise RuntimeError(path) "
                               "from exc\n", ""), TRY),
    "match-vs-if": ("def kind(v):\n    if v == 0:\n        return 'zero'\n    if isinstance(v, "
                    "list):\n        return 'list'\n    if isinstance(v, dict):\n        return "
                    "'dict'\n    return 'other'\n", MATCH),
    "match-edited": (MATCH.replace("        case _:\n            return 'other'\n", ""), MATCH),
    "fstring": (FSTRING, "def show(name, n):\n    return repr(name) + ': ' + format(n, '>8')\n"),
    "smaller-than-reference": ("def total(items):\n    return sum(i for i in items if i > 0)\n",
                               TOTAL),
    "identical-long": (LONG, LONG),
    "long-near-copy": (LONG.replace("            result += item\n", "            result -= item\n",
                                    1).replace("    return result\n",
                                               "    print(result)\n    return result\n", 2),
                       LONG),
    "larger-than-reference": (TOTAL + "\n\n" + TOTAL.replace("total", "total2") + "\n\n" + CLASS,
                              TOTAL),
}

ERROR = "ERROR"
GOLDEN = [  # id, ast, token, complexity: coder_eval 0.12.16 on Python 3.13
    # **ce:** identical texts score 1.0; coder_eval's complexity is 0.466667 for these three
    ("identical", 1.0, 1.0, 1.0),
    ("identical-class", 1.0, 1.0, 1.0),
    ("identical-long", 1.0, 1.0, 1.0),
    ("temp-variable", 0.827586, 0.900000, 0.366667),
    ("renamed", 1.000000, 1.000000, 0.466667),
    ("reordered", 0.928571, 1.000000, 0.466667),
    ("extra-statements", 0.823529, 0.883721, 0.288889),
    ("docstring-added", 0.965517, 0.974359, 0.433333),
    ("empty-agent", 0.153846, 0.200000, 0.800000),
    ("blank-agent", 0.153846, 0.181818, 0.600000),
    ("comment-only-agent", 0.153846, 0.181818, 0.700000),
    ("comments-added", 1.000000, 0.962025, 0.433333),
    ("reindented", 1.000000, 1.000000, 0.466667),
    ("blank-lines", 1.000000, 0.974359, 0.400000),
    ("unparseable-agent", ERROR, 0.971429, ERROR),
    ("unterminated-string", ERROR, 0.800000, ERROR),
    ("bad-indent", ERROR, ERROR, ERROR),
    ("javascript", ERROR, 0.810811, ERROR),
    ("javascript-both", ERROR, 1.000000, ERROR),
    ("class", 0.926316, 0.980645, 0.466667),
    ("class-vs-function", 0.327869, 0.371134, 0.000000),
    ("nested-function", 0.676923, 0.693333, 0.450000),
    ("comprehension-vs-loop", 0.432432, 0.750000, 0.493333),
    ("try-except", 0.819672, 0.843137, 0.627778),
    ("match-vs-if", 0.387097, 0.782609, 0.506667),
    ("match-edited", 0.923077, 0.921739, 0.506667),
    ("fstring", 0.550000, 0.700000, 0.466667),
    ("smaller-than-reference", 0.571429, 0.730159, 0.600000),
    ("long-near-copy", 0.048338, 0.908884, 0.461111),  # autojunk, as in coder_eval
    ("larger-than-reference", 0.427481, 0.393782, 0.000000),
]

CASES = [(pid, method, expected) for pid, *row in GOLDEN
         for method, expected in zip(METHODS, row, strict=True)]


def test_golden_table_covers_every_pair():
    assert sorted(pid for pid, *_ in GOLDEN) == sorted(PAIRS)


@pytest.mark.parametrize("pid, method, expected", CASES,
                         ids=[f"{pid}-{method}" for pid, method, _ in CASES])
def test_scores_match_coder_eval(pid, method, expected):
    agent, reference = PAIRS[pid]
    if expected == ERROR:
        with pytest.raises(ComparisonError):
            similarity(method, agent, reference)
    else:
        assert similarity(method, agent, reference) == pytest.approx(expected, abs=5e-7)


# --- identical code (**ce:**) -----------------------------------------------------------

SAMPLES = {
    "empty": "",
    "blank": "\n\n   \n",
    "python": TOTAL,
    "syntax-error": "def f(:\n    return 1\n",
    "bad-indent": "if x:\n        a\n    b\n",
    "javascript": JS,
    "null-byte": "x = 1\x00\n",
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sample", list(SAMPLES), ids=list(SAMPLES))
def test_identical_text_scores_one(sample, method):
    text = SAMPLES[sample]
    assert similarity(method, text, text) == 1.0


def test_identical_code_is_where_ce_departs_from_coder_eval_complexity():
    # coder_eval: 0.5·(1 − 2/3) + 0.3·(1 − 2/3) + 0.2 = 0.4667 for identical code with a
    # function; the same code one blank line longer is scored by coder_eval's formula.
    assert similarity("complexity", ADD, ADD) == 1.0
    assert similarity("complexity", ADD + "\n", ADD) == pytest.approx(0.5 / 3 + 0.3 * 0.0 + 0.2)


# --- what the methods see ------------------------------------------------------------------


def test_ast_node_types_are_breadth_first_with_contexts():
    tree = ast.parse("x = f(1)\n")
    assert ast_node_types(tree) == ["Module", "Assign", "Name", "Call", "Store", "Name",
                                    "Constant", "Load"]


# Python 3.13's tokenize, as coder_eval sees it (on 3.11 ce translates its tokenizer's).
TOKENS = {
    "x = 1": "ENCODING NAME OP NUMBER NEWLINE ENDMARKER",
    "": "ENCODING ENDMARKER",
    "if x:\n    y  # c\n": "ENCODING NAME NAME OP NEWLINE INDENT NAME COMMENT NEWLINE DEDENT "
                           "ENDMARKER",
    "x = 1\n   ": "ENCODING NAME OP NUMBER NEWLINE NL ENDMARKER",
    "x = f'a{b}c'\n": "ENCODING NAME OP FSTRING_START FSTRING_MIDDLE OP NAME OP FSTRING_MIDDLE "
                      "FSTRING_END NEWLINE ENDMARKER",
    "x = f'{b!r:>{w}}'\n": "ENCODING NAME OP FSTRING_START OP NAME OP NAME OP FSTRING_MIDDLE OP "
                           "NAME OP FSTRING_MIDDLE OP FSTRING_END NEWLINE ENDMARKER",
    "x = f'a{{b}}c'\n": "ENCODING NAME OP FSTRING_START FSTRING_MIDDLE FSTRING_MIDDLE "
                        "FSTRING_MIDDLE FSTRING_END NEWLINE ENDMARKER",
    "x = f'{x=}' f'{d[\"k\"]}'\n": "ENCODING NAME OP FSTRING_START OP NAME OP OP FSTRING_END "
                                   "FSTRING_START OP NAME OP STRING OP OP FSTRING_END NEWLINE "
                                   "ENDMARKER",
    "x = f'''{\na\n}'''\n": "ENCODING NAME OP FSTRING_START OP NL NAME NL OP FSTRING_END "
                            "NEWLINE ENDMARKER",
    "x = f'\\N{DASH}{x}'\n": "ENCODING NAME OP FSTRING_START FSTRING_MIDDLE OP NAME OP "
                             "FSTRING_END NEWLINE ENDMARKER",
    "if (a === b && !c) { x++; }\n": "ENCODING NAME OP NAME OP OP NAME OP OP OP NAME OP OP NAME "
                                     "OP OP OP OP NEWLINE ENDMARKER",
    "const s = `t${x}`;\n": "ENCODING NAME NAME OP OP NAME OP OP NAME OP OP OP NEWLINE ENDMARKER",
    "x€y = 1\n": "ENCODING NAME OP NUMBER NEWLINE ENDMARKER",
    # the tokenizer stops: the tokens so far are compared
    "// don't do this\nlet x = 1;\n": "ENCODING OP NAME",
    "x = b'abc\n": "ENCODING NAME OP",
    "x = f'abc\n": "ENCODING NAME OP FSTRING_START",
    "x = 1\ny = 2\x00\n": "ENCODING NAME OP NUMBER NEWLINE",
    "f(a,\n b\n": "ENCODING NAME OP NAME OP NL NAME NL",
    "a \\ b\n": "ENCODING NAME",
}


@pytest.mark.parametrize("text", list(TOKENS))
def test_token_types_are_python_3_13s(text):
    assert python_token_types(text) == TOKENS[text].split()


@pytest.mark.parametrize("text", [
    "def f():\n    x\n  y\n",  # IndentationError
    "if x:\n\ty\n        z\n",  # TabError (3.11's tokenize accepts it; 3.13's does not)
    "if x:\n    a\n\tb\n",
])
def test_indentation_errors_are_comparison_errors(text):
    with pytest.raises(ComparisonError):
        python_token_types(text)
    with pytest.raises(ComparisonError, match="agent's file"):
        similarity("token", text, ADD)


# radon 6.0.1's cc_visit (sum of block complexities, block count) and raw loc
METRICS = {
    "": (0, 0, 0),
    "x = [i for i in y if i]\nif x:\n    pass\n": (0, 3, 0),  # module code counts nothing
    ("class A:\n    x = [i for i in y if i]\n    def a(self):\n        assert x and y\n"
     "        if a or b or c: pass\n    def b(self):\n        def inner():\n"
     "            if q: pass\n        class I:\n            def z(self): pass\n"
     "        return lambda: 1 if x else 2\n    class Inner:\n        def c(self): pass\n"
     "    if cond:\n        def d(self):\n            while x: pass\n            else: pass\n"):
        (15, 17, 4),
    ("match x:\n    case 1: pass\n    case y: pass\ndef f(v):\n    match v:\n"
     "        case [a, *rest] if a: return 1\n        case {'k': 1} | None: return 2\n"
     "        case _ if v: return 3\n    try:\n        pass\n    except* ValueError:\n"
     "        pass\n    try:\n        pass\n    except A: pass\n    except B: pass\n"
     "    else: pass\n    finally: pass\n"): (6, 18, 1),
    ("if x:\n    def f(): pass\n    class C: pass\nelse:\n    async def g():\n"
     "        async for i in x:\n            pass\n        async with y: pass\n"
     "        return {k: v for k, v in z if k if v}\n"): (7, 9, 3),
    "class E: pass\nclass F:\n    def only(self):\n        if a: pass\n        if b: pass\n":
        (8, 5, 3),
}


@pytest.mark.parametrize("text", list(METRICS))
def test_complexity_metrics_are_radons(text):
    assert tuple(complexity_metrics(text)) == METRICS[text]


def test_complexity_rewards_smaller_code_as_coder_eval_does():
    # Not closeness: an empty file against a one-function reference scores 0.8
    # (cc 0 and 0 lines are "simpler"; only the function count is off).
    assert similarity("complexity", "", ADD) == pytest.approx(0.8)
    assert similarity("complexity", "", ADD) > similarity("complexity", ADD + "\n", ADD)


def test_reference_is_measured_first():
    with pytest.raises(ComparisonError, match="the reference"):
        similarity("complexity", "def (", "def (:")


# --- arguments ------------------------------------------------------------------------------


def test_unknown_method_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"unknown comparison method 'levenshtein'.*ast, "
                                         r"token, complexity"):
        similarity("levenshtein", "x", "x")


def test_argument_order_is_part_of_the_definition():
    # SequenceMatcher's ratio is not symmetric (its longest-match search breaks ties by
    # position): the agent's text is always `a`.
    agent, reference = PAIRS["comprehension-vs-loop"]
    assert similarity("ast", agent, reference) != similarity("ast", reference, agent)


# --- properties --------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "count", "items", "value", "total", "x1"])
NUMBERS = st.integers(min_value=0, max_value=99)


@st.composite
def statements(draw, depth=0):
    kinds = ["assign", "augassign", "call", "return", "fstring"]
    if depth < 2:
        kinds += ["if", "for", "while", "def", "try"]
    kind = draw(st.sampled_from(kinds))
    name, other, num = draw(NAMES), draw(NAMES), draw(NUMBERS)
    if kind == "assign":
        return [f"{name} = {other} + {num}"]
    if kind == "augassign":
        return [f"{name} += {draw(st.sampled_from(['1', other, repr(str(num))]))}"]
    if kind == "call":
        return [f"print({name}, {num})"]
    if kind == "fstring":
        return [f"{name} = f'<{{{other}!r:>{{{num}}}}}{{{{x}}}}>'"]
    if kind == "return":
        return [f"return {name} if {other} else {num}"]
    body = [
        "    " + line
        for _ in range(draw(st.integers(min_value=1, max_value=3)))
        for line in draw(statements(depth + 1))
    ]
    header = {
        "if": f"if {name} > {num}:",
        "for": f"for {name} in range({num}):",
        "while": f"while {name} and {other}:",
        "def": f"def {name}({other}):",
        "try": "try:",
    }[kind]
    tail = ["except ValueError:", "    pass"] if kind == "try" else []
    return [header, *body, *tail]


@st.composite
def programs(draw):
    lines = [
        line
        for _ in range(draw(st.integers(min_value=0, max_value=5)))
        for line in draw(statements())
    ]
    return "".join(line + "\n" for line in lines)


@settings(max_examples=150, deadline=None)
@given(programs(), programs())
def test_scores_are_in_unit_interval(a, b):
    for method in METHODS:
        assert 0.0 <= similarity(method, a, b) <= 1.0
        assert similarity(method, a, a) == 1.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120), st.text(max_size=120))
def test_any_text_scores_in_unit_interval_or_is_a_comparison_error(a, b):
    for method in METHODS:
        try:
            score = similarity(method, a, b)
        except ComparisonError:
            continue
        assert 0.0 <= score <= 1.0
        assert similarity(method, a, a) == 1.0
