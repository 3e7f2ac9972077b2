from ce_lang.diagnostics import Diagnostics
from ce_lang.yaml_source import parse_yaml


def parse(text):
    diags = Diagnostics()
    doc = parse_yaml(text, "f.yaml", diags)
    return doc, diags


def at(span):
    return (span.line, span.col)


def test_block_and_flow_spans():
    doc, diags = parse("a:\n  b: [1, {c: x}]\n  d: 'q'\n")
    assert not diags
    assert at(doc.span(("a", "b", 1, "c"))) == (2, 14)
    assert at(doc.key_span(("a", "d"))) == (3, 3)
    assert at(doc.span(("a", "d"))) == (3, 6)
    assert doc.value == {"a": {"b": [1, {"c": "x"}], "d": "q"}}


def test_multiline_strings_keep_their_start():
    doc, _ = parse("p: |\n  line one\n  line two\nq: >\n  folded\n  text\nr: \"two\n  lines\"\n")
    assert doc.value["p"] == "line one\nline two\n"
    assert doc.value["q"] == "folded text\n"
    assert doc.value["r"] == "two lines"
    assert at(doc.span(("p",))) == (1, 4)
    assert at(doc.span(("r",))) == (7, 4)
    assert doc.span(("r",)).end_line == 8


def test_anchors_aliases_and_merge_keys():
    doc, diags = parse("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nsame: *b\n")
    assert not diags
    assert doc.value["use"] == {"x": 1, "y": 3}
    assert doc.value["same"] == {"x": 1, "y": 2}
    # merged keys point at the anchor's definition, explicit keys at themselves
    assert at(doc.span(("use", "x"))) == (1, 14)
    assert at(doc.span(("use", "y"))) == (4, 6)


def test_duplicate_keys_are_errors_with_both_locations():
    _, diags = parse("a: 1\nb: 2\na: 3\n")
    (d,) = diags
    assert (d.code, at(d.span)) == ("CE0003", (3, 1))
    assert d.notes == ("first defined at f.yaml:1:1",)


def test_several_duplicate_keys_in_one_file():
    _, diags = parse("a: 1\na: 2\nm:\n  k: 1\n  k: 2\n")
    assert [(d.code, at(d.span)) for d in diags] == [("CE0003", (2, 1)), ("CE0003", (5, 3))]


def test_syntax_error_location():
    doc, diags = parse("a: [1, 2\nb: 3\n")
    assert doc is None
    (d,) = diags
    assert d.code == "CE0002"
    assert at(d.span) == (2, 2)


def test_keys_are_never_booleans():
    doc, _ = parse("on: 1\nyes: 2\n")
    assert doc.value == {"on": 1, "yes": 2}


def test_recursive_alias_is_rejected():
    _doc, diags = parse("a: &x [1, *x]\n")
    assert [d.code for d in diags] == ["CE0005"]


def test_alias_bomb_is_bounded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    doc, diags = parse("\n".join(lines) + "\n")
    assert doc is None and diags[0].code == "CE0005"


def test_several_documents_and_empty_file():
    assert parse("a: 1\n---\nb: 2\n")[1][0].code == "CE0005"
    assert parse("")[1][0].code == "CE0004"
    assert parse("# only a comment\n")[1][0].code == "CE0004"
