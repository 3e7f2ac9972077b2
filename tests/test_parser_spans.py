"""Every expression node spans exactly its source text: a group's parentheses included,
so a chain that ends in a group ends at its `)` (carets, explain and the generated
reference show the text as written)."""

import pytest

from ce_lang.diagnostics import Diagnostics
from ce_lang.lang import ast as A
from ce_lang.lang.parser import file_locator, parse_expression

CASES = ['count(trace.tool_calls, c -> c.tool == "Bash") >= (1 + 2)', "(a + b)", "f(x)",
         "x and (y or z)", "not (a)", "[1, (2)]", "-(x)", "((a))", "a[(0)]", "(a).b"]


def _nodes(node):
    yield node
    for field in getattr(type(node), "__attrs_attrs__", ()):
        value = getattr(node, field.name)
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, A.Node):
                yield from _nodes(item)


@pytest.mark.parametrize("text", CASES)
def test_the_root_spans_the_whole_expression(text):
    node = parse_expression(text, file_locator("f", text), Diagnostics())
    assert text[node.span.offset:node.span.end_offset] == text


@pytest.mark.parametrize("text", CASES)
def test_every_node_spans_balanced_text(text):
    root = parse_expression(text, file_locator("f", text), Diagnostics())
    for node in _nodes(root):
        part = text[node.span.offset:node.span.end_offset]
        assert part.count("(") == part.count(")"), (type(node).__name__, part)
