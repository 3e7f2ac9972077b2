"""Lark parse tree -> AST, with spans in the file the text came from.

Inline expressions live inside YAML scalars; a `Locator` maps offsets in the expression
text back to line:col in the YAML file (plain, quoted and literal block scalars alike).
"""

from __future__ import annotations

import ast as pyast
import bisect
import functools
import hashlib
import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

import attrs
import lark
from lark import Lark, Token, v_args
from lark.grammar import Rule
from lark.lexer import TerminalDef
from lark.visitors import Transformer_NonRecursive

from ce_lang import hostfs
from ce_lang.diagnostics import Diagnostics
from ce_lang.lang import ast as A
from ce_lang.lang import safecache
from ce_lang.resources import grammar_dir
from ce_lang.spans import Span

GRAMMAR_NAMES = ("criteria.lark",)


@cache
def _parser() -> Lark:
    path = os.path.join(grammar_dir(), "criteria.lark")
    text = hostfs.own_read_text(path)
    options = {"parser": "lalr", "start": ["file", "expr"], "propagate_positions": True,
               "maybe_placeholders": True}
    key = hashlib.sha256(f"{lark.__version__}\0{sorted(options.items())}\0{text}".encode())
    name = f"criteria-lark-{key.hexdigest()[:24]}.pickle"
    # Lark's saved tables are plain data: loaded with no global allowed, never Lark's own
    # `cache=`, which unpickles whatever the file holds
    cached = safecache.load(name, safecache.no_globals)
    if isinstance(cached, dict) and {"data", "memo"} <= cached.keys():
        try:
            return Lark._load_from_dict(cached["data"], cached["memo"])
        except Exception:
            pass
    parser = Lark(text, **options)
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    safecache.store(name, {"data": data, "memo": memo})
    return parser


# -- locating -----------------------------------------------------------------------------
Locator = Callable[[int, int], Span]


@functools.lru_cache(maxsize=8)
def _line_starts(text: str) -> list[int]:
    """Each line's first offset; shared by every expression of one file (a file with
    thousands of expressions is indexed once, not once per expression)."""
    return [0] + [m.end() for m in re.finditer("\n", text)]


def file_locator(file: str, text: str) -> Locator:
    starts = _line_starts(text)

    def at(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    def locate(start: int, end: int) -> Span:
        l1, c1 = at(start)
        l2, c2 = at(max(end, start))
        return Span(file, l1, c1, l2, c2 if end > start else c1 + 1, start, end)

    return locate


def scalar_locator(value: str, scalar: Span, source: str | None) -> Locator:
    """Map offsets in a YAML scalar's value to the file.

    Walks the value and the scalar's source text side by side: a value character is found
    at the next equal source character (skipping quotes' escapes and line folding), and
    whitespace in the value matches any run of whitespace in the source (folded `>`
    scalars, multi-line plain scalars, indentation of `|` blocks). A value that cannot be
    aligned (it was substituted from a dataset row) maps to the scalar's own span.
    """
    if source is None or scalar.offset < 0:
        return lambda s, e: scalar
    end = scalar.end_offset if scalar.end_offset > 0 else len(source)
    positions: list[int] = []
    pos = scalar.offset
    wildcard_until: str | None = None  # inside a `${row.key}`: its value stands in
    token_start = scalar.offset
    next_row = source.find("${row.", pos, end)  # kept ahead of `pos`: one scan in all
    for ch in value:
        if wildcard_until is not None:
            if ch != wildcard_until:
                positions.append(token_start)
                continue
            wildcard_until = None
        if 0 <= next_row < pos:
            next_row = source.find("${row.", pos, end)
        if next_row >= 0 and (next_row == pos or source.find(ch, pos, end) > next_row):
            start = next_row
            close = source.find("}", start, end)
            if close > 0:
                token_start, pos = start, close + 1
                following = source[pos] if pos < end else ""
                if ch != following or not following:
                    wildcard_until = following or None
                    positions.append(token_start)
                    if wildcard_until is None:
                        wildcard_until = "\0"
                    continue
        if ch.isspace():
            while pos < end and source[pos] in "\"'|>-+0123456789" and not positions:
                pos += 1  # block indicators before the first character
            positions.append(min(pos, end))
            while pos < end and source[pos].isspace():
                pos += 1
            continue
        found = source.find(ch, pos, end)
        if found < 0:
            return lambda s, e: scalar
        positions.append(found)
        pos = found + 1
    positions.append(min(pos, end))
    file_loc = file_locator(scalar.file, source)

    def to_file(offset: int) -> int:
        return positions[max(0, min(offset, len(positions) - 1))]

    return lambda s, e: file_loc(to_file(s), max(to_file(s) + 1, to_file(e - 1) + 1)
                                 if e > s else to_file(s))


# -- parse tree -> AST ------------------------------------------------------------------------
class _ToAst(Transformer_NonRecursive):
    def __init__(self, locate: Locator):
        super().__init__()
        self.locate = locate
        self.next_id = 0

    def span(self, meta_or_token) -> Span:
        if isinstance(meta_or_token, Token):
            return self.locate(meta_or_token.start_pos, meta_or_token.end_pos)
        return self.locate(meta_or_token.start_pos, meta_or_token.end_pos)

    def nid(self) -> int:
        self.next_id += 1
        return self.next_id

    # literals
    @v_args(meta=True)
    def number(self, meta, items):
        text = str(items[0])
        if re.fullmatch(r"\d+", text):
            if len(text) > MAX_DIGITS:
                raise _TooLong(self.span(meta))
            return A.Lit(self.nid(), self.span(meta), int(text), "int")
        return A.Lit(self.nid(), self.span(meta), float(text), "float")

    @v_args(meta=True)
    def string(self, meta, items):
        return A.Lit(self.nid(), self.span(meta), _unquote(str(items[0])), "str")

    @v_args(meta=True)
    def raw_string(self, meta, items):
        return A.Lit(self.nid(), self.span(meta), str(items[0])[2:-1], "str")

    @v_args(meta=True)
    def regex(self, meta, items):
        body = str(items[0])[2:]
        return A.Lit(self.nid(), self.span(meta), _unquote(body, raw=True), "regex")

    @v_args(meta=True)
    def true(self, meta, _):
        return A.Lit(self.nid(), self.span(meta), True, "bool")

    @v_args(meta=True)
    def false(self, meta, _):
        return A.Lit(self.nid(), self.span(meta), False, "bool")

    @v_args(meta=True)
    def null(self, meta, _):
        return A.Lit(self.nid(), self.span(meta), None, "null")

    @v_args(meta=True)
    def name(self, meta, items):
        return A.Name(self.nid(), self.span(meta), str(items[0]))

    # compound
    @v_args(meta=True)
    def member(self, meta, items):
        return A.Member(self.nid(), self.span(meta), items[0], str(items[1]),
                        self.span(items[1]))

    @v_args(meta=True)
    def method(self, meta, items):
        return A.Method(self.nid(), self.span(meta), items[0], str(items[1]),
                        tuple(items[2] or ()), self.span(items[1]))

    @v_args(meta=True)
    def index(self, meta, items):
        return A.Index(self.nid(), self.span(meta), items[0], items[1])

    @v_args(meta=True)
    def call(self, meta, items):
        return A.Call(self.nid(), self.span(meta), str(items[0]), tuple(items[1] or ()))

    def args(self, items):
        return list(items)

    @v_args(meta=True)
    def lambda_(self, meta, items):
        return A.Lambda(self.nid(), self.span(meta), str(items[0]), items[1])

    @v_args(meta=True)
    def list(self, meta, items):
        return A.ListLit(self.nid(), self.span(meta), tuple(i for i in items if i is not None))

    @v_args(meta=True)
    def map(self, meta, items):
        entries = [i for i in items if i is not None]
        return A.MapLit(self.nid(), self.span(meta), tuple(k for k, _ in entries),
                        tuple(v for _, v in entries))

    def entry(self, items):
        key = str(items[0])
        return (_unquote(key) if key[:1] in "\"'" else key), items[1]

    @v_args(meta=True)
    def cond(self, meta, items):
        return A.Cond(self.nid(), self.span(meta), *items)

    @v_args(meta=True)
    def not_(self, meta, items):
        return A.Unary(self.nid(), self.span(meta), "not", items[0])

    @v_args(meta=True)
    def paren(self, meta, items):
        """`(e)` is `e`, spanning its parentheses: a chain ending in a group (`a >= (b)`)
        then ends at its `)`, and a caret under `(b + c)` covers the group."""
        return attrs.evolve(items[0], span=self.span(meta))

    @v_args(meta=True)
    def neg(self, meta, items):
        return A.Unary(self.nid(), self.span(meta), "-", items[0])

    def _chain(self, meta, items, op=None):
        if len(items) == 1:
            return items[0]
        left = items[0]
        rest = items[1:]
        if op is not None:  # and/or: operands only
            for right in rest:
                left = A.Binary(self.nid(), _join(left.span, right.span), op, left, right)
            return left
        for i in range(0, len(rest), 2):
            sym, right = str(rest[i]), rest[i + 1]
            left = A.Binary(self.nid(), _join(left.span, right.span), sym, left, right)
        return left

    @v_args(meta=True)
    def or_(self, meta, items):
        return self._chain(meta, items, "or")

    @v_args(meta=True)
    def and_(self, meta, items):
        return self._chain(meta, items, "and")

    @v_args(meta=True)
    def compare(self, meta, items):
        items = [i for i in items if i is not None]
        return self._chain(meta, items)

    @v_args(meta=True)
    def arith(self, meta, items):
        return self._chain(meta, items)

    # definitions
    @v_args(meta=True)
    def type(self, meta, items):
        name = str(items[0])
        args = tuple(i for i in items[1:] if isinstance(i, A.TypeExpr))
        optional = any(isinstance(i, Token) and i.type == "OPTIONAL" for i in items[1:])
        return A.TypeExpr(name, args, optional, self.span(meta))

    @v_args(meta=True)
    def param(self, meta, items):
        name, type_, default, doc = items
        return A.Param(str(name), type_, default, _unquote(str(doc)) if doc else "",
                       self.span(meta))

    @v_args(meta=True)
    def let_stmt(self, meta, items):
        return ("let", A.Let(str(items[0]), items[1], self.span(meta)))

    @v_args(meta=True)
    def score_stmt(self, meta, items):
        return ("score", A.Let("score", items[0], self.span(meta)))

    @v_args(meta=True)
    def output_stmt(self, meta, items):
        return ("output", A.Let(str(items[0]), items[1], self.span(meta)))

    @v_args(meta=True)
    def require_stmt(self, meta, items):
        kind, cond, message, help_ = items
        return ("require", A.Require(str(kind) if kind is not None else "invalid", cond,
                                     _unquote(str(message)), self.span(meta),
                                     self.span(kind) if kind is not None else None,
                                     _unquote(str(help_)) if help_ is not None else None))

    @v_args(meta=True)
    def record_def(self, meta, items):
        name, *rest = items
        params = tuple(p for p in rest if isinstance(p, A.Param))
        doc = next((t for t in rest if isinstance(t, Token) and t.type == "DOC"), None)
        requires = tuple(r for kind, r in (x for x in rest if isinstance(x, tuple))
                         if kind == "require")
        short = next((r for kind, r in (x for x in rest if isinstance(x, tuple))
                      if kind == "shorthand"), None)
        return A.RecordDef(str(name), params, _doc(doc), self.span(meta), requires,
                           shorthand=str(short) if short is not None else None,
                           shorthand_span=self.span(short) if short is not None else None)

    def shorthand(self, items):
        return ("shorthand", items[0])


def _join(a: Span, b: Span) -> Span:
    return Span(a.file, a.line, a.col, b.end_line, b.end_col, a.offset, b.end_offset)


def _unquote(text: str, raw: bool = False) -> str:
    if raw:
        quote = text[0]
        body = text[1:-1]
        return body.replace("\\" + quote, quote)
    try:
        return pyast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text[1:-1]


def _doc(token) -> str:
    if not token:
        return ""
    import textwrap

    return textwrap.dedent(str(token)[3:-3]).strip()


# Lark names the rule `lambda`; Python can't: map it.
setattr(_ToAst, "lambda", _ToAst.lambda_)


# -- entry points ---------------------------------------------------------------------------
MAX_DEPTH = 200  # nesting levels of one expression (CE0612)
MAX_DIGITS = 4000  # digits of a number literal (Python's int() refuses past 4300)


def parse_expression(text: str, locate: Locator, diags: Diagnostics) -> A.Node | None:
    try:
        tree = _parser().parse(text, start="expr")
    except lark.exceptions.UnexpectedInput as exc:
        _syntax_error(exc, text, locate, diags)
        return None
    return _bounded(lambda: _ToAst(locate).transform(tree), locate(0, len(text)), diags)


def _bounded(build: Callable[[], Any], whole: Span, diags: Diagnostics) -> Any:
    """Build an AST from a parse tree, within the limits every later pass (checker,
    analysis, evaluator: all recursive) relies on; past them, CE0612 and no AST."""
    try:
        node = build()
    except RecursionError:
        node = None
    except lark.exceptions.VisitError as exc:
        if not isinstance(exc.orig_exc, RecursionError | _TooLong):
            raise
        if isinstance(exc.orig_exc, _TooLong):
            diags.emit("CE0612", f"a number literal with more than {MAX_DIGITS} digits",
                       exc.orig_exc.span)
            return None
        node = None
    if node is None or _too_deep(node):
        diags.emit("CE0612", f"this expression nests more than {MAX_DEPTH} levels deep",
                   whole, help="split it into `let`s")
        return None
    return node


class _TooLong(Exception):
    def __init__(self, span: Span):
        self.span = span


def _too_deep(root: Any) -> bool:
    """Deeper than MAX_DEPTH, measured without recursion (a module's criteria too)."""
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(node, A.Node):
            stack.extend((c, depth + 1) for c in A.children(node))
        elif isinstance(node, A.Module):
            for d in (*node.records, *node.criteria):
                stack.append((d, depth))
        elif isinstance(node, A.CriterionDef):
            roots = [node.score, *(x.expr for x in (*node.lets, *node.outputs)),
                     *(r.cond for r in node.requires),
                     *(p.default for p in node.params if p.default is not None)]
            stack.extend((r, depth) for r in roots if r is not None)
        elif isinstance(node, A.RecordDef):
            stack.extend((r.cond, depth) for r in node.requires)
            stack.extend((p.default, depth) for p in node.fields if p.default is not None)
    return False


def parse_module(text: str, file: str, diags: Diagnostics) -> A.Module | None:
    locate = file_locator(file, text)
    try:
        tree = _parser().parse(text, start="file")
    except lark.exceptions.UnexpectedInput as exc:
        _syntax_error(exc, text, locate, diags)
        return None
    builder = _ToAst(locate)

    def build() -> A.Module:
        records, criteria = [], []
        for item in tree.children:
            if item.data == "record_def":
                meta = item.meta
                records.append(attrs.evolve(builder.transform(item),
                                            source=text[meta.start_pos:meta.end_pos]))
            else:
                criteria.append(_criterion(builder, item, text))
        return A.Module(file, tuple(records), tuple(criteria))

    return _bounded(build, locate(0, min(len(text), 1)), diags)


def _criterion(builder: _ToAst, tree, text: str) -> A.CriterionDef:
    items = tree.children
    name = str(items[0])
    params, result, doc, stmts = [], None, "", []
    result_span = None
    for item in items[1:]:
        if isinstance(item, lark.Tree) and item.data == "param":
            params.append(builder.transform(item))
        elif isinstance(item, Token) and item.type == "NAME":
            result = item
            result_span = builder.span(item)
        elif isinstance(item, Token) and item.type == "DOC":
            doc = _doc(item)
        elif isinstance(item, lark.Tree):
            stmts.append(builder.transform(item))
    lets = tuple(s for kind, s in stmts if kind == "let")
    scores = [s for kind, s in stmts if kind == "score"]
    outputs = tuple(s for kind, s in stmts if kind == "output")
    requires = tuple(s for kind, s in stmts if kind == "require")
    meta = tree.meta
    source = text[meta.start_pos:meta.end_pos]
    return A.CriterionDef(
        name, tuple(params), str(result), doc, lets,
        scores[0].expr if scores else None, outputs, builder.span(meta), source, result_span,
        requires)


def _syntax_error(exc: lark.exceptions.UnexpectedInput, text: str, locate: Locator,
                  diags: Diagnostics) -> None:
    pos = getattr(exc, "pos_in_stream", None)
    if pos is None:
        pos = len(text)
    if isinstance(exc, lark.exceptions.UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            what = "unexpected end of input"
            pos = len(text.rstrip())
        else:
            what = f"unexpected {token.value!r}"
            pos = token.start_pos if token.start_pos is not None else pos
        expected = sorted({_pretty(t) for t in exc.expected})
    elif isinstance(exc, lark.exceptions.UnexpectedCharacters):
        what = f"unexpected character {text[pos]!r}" if pos < len(text) else "unexpected end"
        expected = sorted({_pretty(t) for t in (exc.allowed or ())})
    else:
        what, expected = "unexpected end of input", []
    help_ = None
    token_text = getattr(getattr(exc, "token", None), "value", None) or (
        text[pos:pos + 2] if pos < len(text) else "")
    for wrong, right in (("&&", "and"), ("||", "or"), ("=", "=="), ("!", "not")):
        if str(token_text).startswith(wrong) and not str(token_text).startswith(right):
            diags.emit("CE0601", f"syntax error: unexpected {wrong!r}", locate(pos, pos + 1),
                       help=f"write `{right}`" + (" to compare" if right == "==" else ""))
            return
    if "a name" in expected and "a number" in expected:
        expected = ["an expression", *(e for e in expected if e in ("`)`", "`]`", "`}`"))]
    if expected and len(expected) <= 8:
        help_ = "expected " + ", ".join(expected)
    diags.emit("CE0601", f"syntax error: {what}", locate(pos, pos + 1), help=help_)


_TOKEN_NAMES = {
    "NAME": "a name", "NUMBER": "a number", "STRING": "a string", "RAW_STRING": "a raw string",
    "REGEX": "a regex", "LPAR": "`(`", "RPAR": "`)`", "LSQB": "`[`", "RSQB": "`]`",
    "LBRACE": "`{`", "RBRACE": "`}`", "COMMA": "`,`", "COLON": "`:`", "DOT": "`.`",
    "EQUAL": "`=`", "COMP_OP": "a comparison", "ADD_OP": "`+`/`-`", "MUL_OP": "`*`/`/`/`%`",
    "MINUS": "`-`", "DOC": "a docstring", "OPTIONAL": "`?`", "$END": "end of input",
}


def _pretty(token: str) -> str:
    if token in _TOKEN_NAMES:
        return _TOKEN_NAMES[token]
    try:
        pattern = _parser().get_terminal(token).pattern
    except (KeyError, AttributeError):
        pattern = None
    if pattern is not None and type(pattern).__name__ == "PatternStr":
        return f"`{pattern.value}`"
    if token.isupper():
        return f"`{token.lower()}`"
    return token
