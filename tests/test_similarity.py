"""Behaviour of ce_runtime.grade.similarity, the scores behind reference_comparison."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ce_runtime.grade.similarity import (
    METHODS,
    ast_node_types,
    generic_tokens,
    python_metrics,
    python_token_types,
    similarity,
)

REFERENCE = """\
def total(items):
    result = 0
    for item in items:
        if item > 0:
            result += item
    return result
"""

# Same structure, other names, plus a docstring: what a near-copy looks like.
NEAR_COPY = '''\
def total(values):
    """Sum the positives."""
    acc = 0
    for v in values:
        if v > 0:
            acc += v
    return acc
'''

# Solves the same problem another way: a class, a lambda, no explicit loop.
DIFFERENT = """\
class Summer:
    def __init__(self, items):
        self.items = list(items)

    def positives(self):
        return filter(lambda x: x > 0, self.items)

    def total(self):
        return sum(self.positives())


def total(items):
    return Summer(items).total()
"""

JAVASCRIPT = """\
// Sum the positives.
function total(items) {
  let result = 0;
  for (const item of items) {
    if (item > 0) { result += item; } /* keep */
  }
  return result > 0 ? `${result}` : "none";
}
"""

SAMPLES = {
    "empty": "",
    "blank": "\n\n   \n",
    "comment-only": "# nothing here\n",
    "python": REFERENCE,
    "python-class": DIFFERENT,
    "syntax-error": "def f(:\n    return 1\n",
    "untokenizable": 'x = """never closed\n',
    "javascript": JAVASCRIPT,
    "prose": "This is not code at all: just words, commas; and 3.5 numbers!\n",
    "unicode": "naïve = '日本'  # ünïcode\n",
    "bom": "\ufeffx = 1\n",
    "null-byte": "x = 1\x00\n",
}


# --- identical code ----------------------------------------------------------------


@pytest.mark.parametrize("language", [None, "python", "js"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sample", list(SAMPLES), ids=list(SAMPLES))
def test_identical_code_scores_one(sample, method, language):
    text = SAMPLES[sample]
    assert similarity(method, text, text, language) == 1.0


@pytest.mark.parametrize("language", [None, "python", "js"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sample", list(SAMPLES), ids=list(SAMPLES))
def test_identical_code_scores_one_without_the_text_shortcut(sample, method, language):
    # A trailing newline makes the texts differ, so the real comparison runs; it
    # changes no node, no kept token and no metric.
    text = SAMPLES[sample]
    assert similarity(method, text, text + "\n", language) == 1.0


# --- whitespace and comments ---------------------------------------------------------

REFORMATTED = """\
# A different header comment.

def total(items):  # trailing comment
  result = 0

  for item in items:   # two-space indentation now
    if item > \\
            0:
      result += item
  return result
"""


@pytest.mark.parametrize("language", [None, "python"])
@pytest.mark.parametrize("method", ["ast", "token"])
def test_whitespace_and_comment_changes_score_one_for_python(method, language):
    assert similarity(method, REFORMATTED, REFERENCE, language) == 1.0


@pytest.mark.parametrize("language", [None, "js", ".js", "javascript"])
@pytest.mark.parametrize("method", ["ast", "token"])
def test_whitespace_and_comment_changes_score_one_for_javascript(method, language):
    reformatted = (
        JAVASCRIPT.replace("// Sum the positives.", "/* other\n   comment */")
        .replace("/* keep */", "// gone")
        .replace("  ", "\t")
    )
    assert similarity(method, reformatted, JAVASCRIPT, language) == 1.0


@pytest.mark.parametrize("method", ["ast", "token"])
def test_comment_changes_score_one_for_broken_python(method):
    broken = 'def f(:\n    return 1  # one\n"""unterminated\n'
    edited = 'def f(:\n    # new comment\n    return 1\n"""unterminated\n'
    assert similarity(method, edited, broken) == 1.0
    assert similarity(method, edited, broken, "python") == 1.0


# --- what the methods see --------------------------------------------------------------


def test_renaming_identifiers_keeps_ast_and_token_at_one():
    # Names are not AST nodes and every identifier is the token type NAME, so a pure
    # rename is invisible to both methods (and to complexity).
    renamed = REFERENCE.replace("total", "add_up").replace("items", "xs").replace(
        "result", "acc").replace("item", "x")
    for method in METHODS:
        assert similarity(method, renamed, REFERENCE) == 1.0


def test_literal_kind_is_seen_by_token_but_not_by_ast():
    # Every literal is an ast.Constant, but a STRING token is not a NUMBER token.
    assert similarity("ast", "x = 'zero'\n", "x = 0\n") == 1.0
    assert similarity("token", "x = 'zero'\n", "x = 0\n") < 1.0


def test_redundant_parentheses_are_seen_by_token_but_not_by_ast():
    assert similarity("ast", "y = (a + b)\n", "y = a + b\n") == 1.0
    assert similarity("token", "y = (a + b)\n", "y = a + b\n") < 1.0


def test_operators_are_seen_by_ast_and_token():
    for method in ("ast", "token"):
        assert similarity(method, "y = a * b\n", "y = a + b\n") < 1.0


@pytest.mark.parametrize("method", METHODS)
def test_structurally_different_solution_scores_below_near_copy(method):
    near = similarity(method, NEAR_COPY, REFERENCE)
    different = similarity(method, DIFFERENT, REFERENCE)
    assert 0.0 < different < near < 1.0


def test_ast_node_types_are_pre_order_without_contexts():
    tree = ast.parse("x = f(1)\n")
    assert ast_node_types(tree) == ["Module", "Assign", "Name", "Call", "Name", "Constant"]


def test_python_tokens_name_keywords_and_exact_operators():
    assert python_token_types("if x:\n    y += 1  # c\n") == [
        "if", "NAME", "COLON", "INDENT", "NAME", "PLUSEQUAL", "NUMBER", "DEDENT",
    ]


def test_fstring_is_one_string_token_on_every_python_version():
    assert python_token_types('s = f"a{b!r:>{w}}c" + "d"\n') == [
        "NAME", "EQUAL", "STRING", "PLUS", "STRING",
    ]


def test_python_tokenizer_rejects_error_tokens():
    assert python_token_types("a = $b\n") is None
    assert python_token_types('x = """open\n') is None


def test_generic_tokenizer_classes_and_comment_styles():
    classes = [cls for cls, _ in generic_tokens("if (x >= 10) { s = 'a // b'; } // c", "js")]
    assert classes == ["if", "(", "NAME", ">=", "NUMBER", ")", "{", "NAME", "=", "STRING",
                       ";", "}"]
    # `//` is floor division for Python-like text and `#` is not a comment in C-like text.
    assert "//" in [cls for cls, _ in generic_tokens("a // b", "python")]
    assert "#" in [cls for cls, _ in generic_tokens("#include <x.h>", "c")]


@pytest.mark.parametrize("agent, reference, language", [
    (JAVASCRIPT, JAVASCRIPT.replace("+=", "-="), "js"),
    ("def f(:\n  pass\n", "def g(:\n  return 1\n", None),
    ("x = 1\n", "def f(:\n", "python"),
])
def test_ast_falls_back_to_token_when_not_python(agent, reference, language):
    assert similarity("ast", agent, reference, language) == similarity(
        "token", agent, reference, language)


# --- complexity ---------------------------------------------------------------------------

BRANCHY = """\
def f(x):
    if x and y or z:
        return 1
    for i in x:
        pass
    else:
        pass
    try:
        pass
    except A:
        pass
    except B:
        pass
    else:
        pass
"""


def test_python_metrics_follow_radon_counting_rules():
    # Totals cross-checked against radon 6.0.1 (module complexity + every block).
    assert python_metrics(ast.parse(BRANCHY)) == (10, 11, 1)
    module = "x = [i for i in y if i if i > 2]\nz = 1 if x else 2\n" \
             "match x:\n    case 1: pass\n    case 2: pass\n    case _: pass\n"
    assert python_metrics(ast.parse(module)) == (7, 6, 0)
    nested = "def g():\n    def h():\n        if a: pass\n    if b: pass\n" \
             "class C:\n    def m(self):\n        while x: pass\n"
    assert python_metrics(ast.parse(nested)) == (7, 10, 3)


def test_complexity_reacts_to_added_branches():
    one = REFERENCE.replace("            result += item\n",
                            "            result += item\n        elif item < -10:\n"
                            "            result -= 1\n")
    two = one.replace("        elif item < -10:\n",
                      "        elif item < -100:\n            pass\n        elif item < -10:\n")
    base = similarity("complexity", REFERENCE, REFERENCE + "\n")
    first = similarity("complexity", one, REFERENCE)
    second = similarity("complexity", two, REFERENCE)
    assert base == 1.0 > first > second > 0.0


def test_complexity_of_non_python_uses_generic_metrics():
    more = JAVASCRIPT.replace("return result", "if (result > 9 && ok) { log(); }\n  return result")
    assert similarity("complexity", more, JAVASCRIPT, "js") < 1.0
    assert similarity("complexity", JAVASCRIPT + "\n\n", JAVASCRIPT, "js") == 1.0


def test_complexity_of_empty_against_code_is_low_but_defined():
    score = similarity("complexity", "", REFERENCE)
    assert 0.0 <= score < 0.5


# --- arguments ------------------------------------------------------------------------------


def test_unknown_method_is_a_clear_value_error():
    with pytest.raises(ValueError, match=r"unknown comparison method 'levenshtein'.*ast, "
                                         r"token, complexity"):
        similarity("levenshtein", "x", "x")


def test_method_name_is_case_insensitive():
    assert similarity(" AST ", REFERENCE, NEAR_COPY) == similarity("ast", REFERENCE, NEAR_COPY)


def test_argument_order_is_part_of_the_definition():
    # SequenceMatcher's ratio is not symmetric (ties in its longest-match search break
    # by position): the agent's text is always `a`. Complexity is symmetric.
    assert similarity("ast", DIFFERENT, REFERENCE) != similarity("ast", REFERENCE, DIFFERENT)
    assert similarity("complexity", DIFFERENT, REFERENCE) == similarity(
        "complexity", REFERENCE, DIFFERENT)


# --- properties --------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "count", "items", "value", "total", "x1"])
NUMBERS = st.integers(min_value=0, max_value=99)


@st.composite
def statements(draw, depth=0):
    kinds = ["assign", "augassign", "call", "return"]
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


def _reformat(program: str) -> str:
    """Same tokens and tree: wider indentation, blank lines, comments everywhere."""
    out = ["# header comment\n"]
    for line in program.splitlines():
        stripped = line.lstrip(" ")
        indent = (len(line) - len(stripped)) // 4
        out.append("\t" * indent + stripped + "   # note\n\n")
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(programs())
def test_program_compared_with_itself_scores_one(program):
    for method in METHODS:
        assert similarity(method, program, program) == 1.0
        assert similarity(method, program, program + "\n\n") == 1.0


@settings(max_examples=150, deadline=None)
@given(programs())
def test_reformatted_program_scores_one_for_ast_and_token(program):
    ast.parse(_reformat(program))  # the template really produces Python
    for method in ("ast", "token"):
        assert similarity(method, _reformat(program), program) == 1.0


@settings(max_examples=150, deadline=None)
@given(programs(), programs())
def test_scores_are_in_unit_interval_and_complexity_is_symmetric(a, b):
    for method in METHODS:
        assert 0.0 <= similarity(method, a, b) <= 1.0
    assert similarity("complexity", a, b) == similarity("complexity", b, a)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120), st.text(max_size=120),
       st.sampled_from([None, "python", "js", "rb", "unknown"]))
def test_any_text_scores_in_unit_interval(a, b, language):
    for method in METHODS:
        score = similarity(method, a, b, language)
        assert 0.0 <= score <= 1.0
        assert similarity(method, a, a, language) == 1.0
