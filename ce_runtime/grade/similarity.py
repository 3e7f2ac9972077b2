"""Code similarity for the `reference_comparison` criterion: pure functions, score in [0, 1].

`similarity(method, agent_text, reference_text)` scores the agent's source against the
reference's source with coder_eval 0.12.16's definitions (written here, not imported),
which read both texts as Python whatever the files' names:

- ``ast``: `difflib.SequenceMatcher(None, agent, reference).ratio()` over the two lists
  of AST node type names in `ast.walk` order (breadth first), expression contexts
  (`Load`, `Store`, `Del`) included. Text that `ast.parse` rejects (a syntax error,
  a null byte, JavaScript...) cannot be compared: `ComparisonError`, which the
  criterion reports as score 0 with the error.
- ``token``: the same ratio over token type names from `tokenize.tokenize` on the UTF-8
  bytes, as Python 3.13 (coder_eval's interpreter) produces them: `ENCODING` first,
  generic `OP` for every operator, `NAME` for keywords, `COMMENT`, `NL`, `NEWLINE`,
  `INDENT`, `DEDENT`, `ENDMARKER` all kept, f-strings split into `FSTRING_START`,
  `FSTRING_MIDDLE`, the expressions' tokens and `FSTRING_END`. When the tokenizer
  stops on an error that `tokenize` reports as `TokenError` (an unterminated string,
  EOF inside brackets, an invalid number literal...), the tokens read so far are
  compared; an `IndentationError` or `TabError` (or an unknown coding cookie) is a
  `ComparisonError`. On Python >= 3.12 `tokenize` itself is used; on 3.11, whose
  pure-Python tokenizer differs, its tokens are translated to 3.13's (f-strings split,
  `$ ? ! \\`` as `OP`, non-ASCII as `NAME`, unterminated strings and stray backslashes
  end the tokens, null bytes end them at their line, tabs mixed inconsistently with
  spaces raise `TabError`, a whitespace-only last line is an `NL`). **ce:** remaining
  3.11 differences, all in text that is not valid Python: malformed number literals
  (`0b12`, `1__0`), a closing bracket without an opening one, `{{` inside a format
  spec, an unterminated f-string with a replacement field.
- ``complexity``: radon 6.0.1's metrics (radon's rules, computed here so no optional
  package changes a score) combined by coder_eval's formula, which rewards being no
  larger than the reference rather than being close to it:
  0.5·cc + 0.3·loc + 0.2·functions, where
  cc = max(0, 1 − min(1, agent_cc / (max(ref_cc, 1)·1.5))),
  loc = max(0, 1 − min(1, agent_loc / (max(ref_loc, 1)·1.5))),
  functions = max(0, 1 − |agent_n − ref_n| / max(ref_n, 1)).
  cc is the sum of radon's block complexities (`cc_visit`): every function and class
  at module level (inside module-level `if`/`try`/... too) and every method of those
  classes; module-level code, nested functions and classes inside functions or
  classes count for nothing. A function is 1 + the decision points of its body (not
  of its nested functions): `if`/`elif`, ternary, `for`/`while` (+1 with `else`),
  each `except` of a `try` (+1 for its `else`; `except*` counts nothing), each extra
  operand of `and`/`or`, each comprehension `for` and its `if`s, the `case`s of a
  `match` less one if any is a bare capture/`_`, and `assert` 1 (its operands are not
  looked into). A class's real complexity is 1 + its body's decision points + its
  methods'; its block complexity is that, or with methods int(real / methods) +
  (1 if more than one method). n = the number of those blocks (classes and methods
  included); loc = the number of lines (`str.splitlines`, radon's `loc`). The
  reference's metrics are computed first; text `ast.parse` rejects is a
  `ComparisonError`.

**ce:** on Python 3.11, syntax from 3.12 or later (`type X = ...`, `def f[T]()`,
f-strings reusing their quote inside a field) is not valid Python for ``ast`` and
``complexity`` (0 with an error where coder_eval, on 3.13, scores it).

**ce:** identical texts score exactly 1.0 under every method (coder_eval gives
identical code < 1 under ``complexity`` -- at most 0.8, 0.47 when it has a function --
and 0 with an error for identical text that does not parse under ``ast`` and
``complexity``, or that `tokenize` rejects under ``token``). Everything else is coder_eval's: the agent's text is
SequenceMatcher's `a`, the reference's `b` (the ratio is not symmetric), and
`autojunk` is on (in a reference of 200+ items, types occurring more than 1% + 1
times cannot start a match).
"""

from __future__ import annotations

import ast
import difflib
import io
import sys
import tokenize
import warnings
from typing import NamedTuple

METHODS = ("ast", "token", "complexity")


class ComparisonError(ValueError):
    """The two texts cannot be compared by the method (coder_eval: score 0, an error)."""


def similarity(method: str, agent_text: str, reference_text: str) -> float:
    """Similarity of `agent_text` to `reference_text` in [0, 1] (see the module doc).

    Raises ComparisonError (a ValueError) when the method cannot compare the texts, and
    ValueError for an unknown method."""
    name = method.strip().lower() if isinstance(method, str) else method
    if name not in METHODS:
        raise ValueError(
            f"unknown comparison method {method!r}: expected one of {', '.join(METHODS)}"
        )
    if agent_text == reference_text:
        return 1.0  # ce: identical code scores 1.0 under every method
    if name == "ast":
        agent = ast_node_types(_parse(agent_text, "the agent's file"))
        reference = ast_node_types(_parse(reference_text, "the reference"))
        return _ratio(agent, reference)
    if name == "token":
        agent = python_token_types(agent_text, "the agent's file")
        reference = python_token_types(reference_text, "the reference")
        return _ratio(agent, reference)
    reference_metrics = complexity_metrics(reference_text, "the reference")
    agent_metrics = complexity_metrics(agent_text, "the agent's file")
    return complexity_score(agent_metrics, reference_metrics)


def similarity_detail(method: str, agent_text: str, reference_text: str) -> str:
    """How `similarity` came to its value, in one line (`ce explain`'s evidence)."""
    name = method.strip().lower()
    if agent_text == reference_text:
        return "the agent's file is the reference: 1.0 under every method"
    if name in ("ast", "token"):
        if name == "ast":
            agent = ast_node_types(_parse(agent_text, "the agent's file"))
            reference = ast_node_types(_parse(reference_text, "the reference"))
            what = "AST node types"
        else:
            agent = python_token_types(agent_text, "the agent's file")
            reference = python_token_types(reference_text, "the reference")
            what = "token types"
        matcher = difflib.SequenceMatcher(None, agent, reference)
        same = sum(block.size for block in matcher.get_matching_blocks())
        return (f"{what}: agent {len(agent)}, reference {len(reference)}, {same} in "
                f"matching runs: 2×{same} / {len(agent) + len(reference)} = "
                f"{matcher.ratio():.4g}")
    ref, agent_m = (complexity_metrics(reference_text, "the reference"),
                    complexity_metrics(agent_text, "the agent's file"))
    cc, loc, fn = complexity_parts(agent_m, ref)
    return (f"complexity (cyclomatic, lines, blocks): agent {agent_m.cyclomatic}, "
            f"{agent_m.lines}, {agent_m.functions}; reference {ref.cyclomatic}, {ref.lines}, "
            f"{ref.functions}: 0.5×{cc:.3g} + 0.3×{loc:.3g} + 0.2×{fn:.3g} = "
            f"{complexity_score(agent_m, ref):.4g}")


def _ratio(a: list[str], b: list[str]) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()


def _parse(text: str, what: str) -> ast.Module:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for invalid escapes etc.
            return ast.parse(text)
    except SyntaxError as exc:
        raise ComparisonError(f"{what} is not valid Python: {exc}") from exc
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ComparisonError(f"{what} cannot be parsed as Python: {exc}") from exc


# --- ast ------------------------------------------------------------------------------


def ast_node_types(tree: ast.AST) -> list[str]:
    """Node type names of `tree` in `ast.walk` (breadth-first) order, contexts included."""
    return [type(node).__name__ for node in ast.walk(tree)]


# --- token ----------------------------------------------------------------------------


def python_token_types(text: str, what: str = "the text") -> list[str]:
    """Token type names of `text` as Python 3.13's `tokenize.tokenize` gives them (module
    doc): on a TokenError the tokens before it; ComparisonError on an indentation error."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ComparisonError(f"{what} cannot be encoded as UTF-8: {exc}") from exc
    out: list[str] = []
    try:
        if sys.version_info >= (3, 12):
            for tok in tokenize.tokenize(io.BytesIO(data).readline):
                out.append(tokenize.tok_name[tok.type])
        else:
            _Translate311(data, out).run()
    except (tokenize.TokenError, _Stop):
        pass
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        # IndentationError, TabError, an unknown or wrong coding cookie
        raise ComparisonError(f"{what} cannot be tokenized: {exc}") from exc
    except (RecursionError, MemoryError) as exc:
        raise ComparisonError(f"{what} cannot be tokenized: {exc!r}") from exc
    return out


class _Stop(Exception):
    """Where Python 3.13's tokenizer raises TokenError: the tokens so far stand."""


_STRING_PREFIXES = frozenset({"b", "r", "u", "f", "br", "rb", "fr", "rf"})
_ERROR_AS_OP = frozenset("$?!`")


class _Translate311:
    """Python 3.11's tokenize output rewritten into the token types 3.13 produces."""

    def __init__(self, data: bytes, out: list[str]):
        self.data, self.out = data, out
        text = data.decode("utf-8", errors="replace")
        nul = text.find("\x00")
        self.nul_row = None if nul < 0 else text.count("\n", 0, nul) + 1
        last = text.rsplit("\n", 1)[-1]
        self.blank_tail = bool(last) and not last.strip(" \t\f")
        self.indents = [(0, 0)]  # (col, altcol) as 3.13's tokenizer tracks them

    def run(self) -> None:
        """Append the types to `out`; _Stop or TokenError where 3.13 stops."""
        out = self.out
        prev_end, prev_string = None, ""  # the last NAME appended, to merge runs
        line_start = True
        for tok in tokenize.tokenize(io.BytesIO(self.data).readline):
            if self.nul_row is not None and tok.start[0] >= self.nul_row:
                raise _Stop
            kind, string = tok.type, tok.string
            if line_start and kind not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
                                           tokenize.DEDENT, tokenize.ENCODING,
                                           tokenize.ENDMARKER, tokenize.NEWLINE):
                self._check_indent(tok.line[:tok.start[1]])
                line_start = False
            if kind == tokenize.NEWLINE:
                line_start = True
            if kind == tokenize.ENDMARKER and self.blank_tail:
                at = len(out)
                while at and out[at - 1] == "DEDENT":
                    at -= 1
                out.insert(at, "NL")
            if string and all(ord(c) >= 128 for c in string) and kind in (
                    tokenize.ERRORTOKEN, tokenize.OP, tokenize.NAME):
                kind = tokenize.NAME
            if kind == tokenize.ERRORTOKEN:
                if string.isspace():
                    continue
                if string in ("'", '"'):
                    if out and out[-1] == "NAME" and prev_end == tok.start \
                            and prev_string.lower() in _STRING_PREFIXES:
                        out.pop()
                        if "f" in prev_string.lower():
                            out.append("FSTRING_START")
                    raise _Stop
                if string in _ERROR_AS_OP:
                    out.append("OP")
                    continue
                raise _Stop  # a stray backslash and the like
            if kind == tokenize.NAME:
                if out and out[-1] == "NAME" and prev_end == tok.start:
                    prev_string += string
                else:
                    out.append("NAME")
                    prev_string = string
                prev_end = tok.end
                continue
            if kind == tokenize.STRING and "f" in _prefix(string).lower():
                _fstring(string, out)
                continue
            out.append(tokenize.tok_name[kind])

    def _check_indent(self, indent: str) -> None:
        col = alt = 0
        for ch in indent:
            if ch == " ":
                col, alt = col + 1, alt + 1
            elif ch == "\t":
                col, alt = (col // 8 + 1) * 8, alt + 1
            elif ch == "\f":
                col = alt = 0
        top_col, top_alt = self.indents[-1]
        if col == top_col:
            if alt != top_alt:
                raise TabError("inconsistent use of tabs and spaces in indentation")
        elif col > top_col:
            if alt <= top_alt:
                raise TabError("inconsistent use of tabs and spaces in indentation")
            self.indents.append((col, alt))
        else:
            while len(self.indents) > 1 and col < self.indents[-1][0]:
                self.indents.pop()
            if col == self.indents[-1][0] and alt != self.indents[-1][1]:
                raise TabError("inconsistent use of tabs and spaces in indentation")
            # a column matching no level: 3.11's tokenize raises IndentationError itself


def _prefix(string: str) -> str:
    end = 0
    while end < len(string) and string[end] not in "'\"":
        end += 1
    return string[:end]


def _fstring(string: str, out: list[str]) -> None:
    """Append the 3.13 token types of one f-string literal (3.11 gives one STRING)."""
    prefix = _prefix(string)
    quote = string[len(prefix):len(prefix) + 3]
    if quote not in ('"""', "'''"):
        quote = quote[0]
    body = string[len(prefix) + len(quote):len(string) - len(quote)]
    out.append("FSTRING_START")
    _FString(body, "r" in prefix.lower(), out).literal()
    out.append("FSTRING_END")


class _FString:
    def __init__(self, body: str, raw: bool, out: list[str]):
        self.s, self.raw, self.out, self.i = body, raw, out, 0

    def literal(self) -> None:
        """The top-level text: FSTRING_MIDDLE pieces (split after `{{`/`}}`) and fields."""
        s, piece = self.s, ""
        while self.i < len(s):
            ch = s[self.i]
            if ch == "\\" and not self.raw:
                if s.startswith("N{", self.i + 1):
                    close = s.find("}", self.i)
                    close = len(s) - 1 if close < 0 else close
                    piece += s[self.i:close + 1]
                    self.i = close + 1
                elif self.i + 1 < len(s) and s[self.i + 1] in "{}":
                    piece += ch
                    self.i += 1
                else:
                    piece += s[self.i:self.i + 2]
                    self.i += 2
            elif ch in "{}" and s.startswith(ch * 2, self.i):
                self.out.append("FSTRING_MIDDLE")  # the piece up to and with one brace
                piece = ""
                self.i += 2
            elif ch == "{":
                if piece:
                    self.out.append("FSTRING_MIDDLE")
                piece = ""
                self.field()
            elif ch == "}":
                self.out.append("FSTRING_MIDDLE")
                raise _Stop  # f-string: single '}' is not allowed
            else:
                piece += ch
                self.i += 1
        if piece:
            self.out.append("FSTRING_MIDDLE")

    def field(self) -> None:
        """`{expr[=][!conv][:spec]}` starting at the `{`."""
        s = self.s
        self.out.append("OP")
        self.i += 1
        start, depth = self.i, 0
        while True:
            if self.i >= len(s):
                self._expression(s[start:self.i])
                raise _Stop  # f-string: expecting '}'
            ch = s[self.i]
            if ch in "'\"":
                self._skip_string()
                continue
            if ch in "([{":
                depth += 1
            elif ch in ")]}" and depth:
                depth -= 1
            elif depth == 0 and (ch in "}:" or (ch == "!" and not s.startswith("!=", self.i))):
                break
            self.i += 1
        self._expression(s[start:self.i])
        if s[self.i] == "!":
            self.out.append("OP")
            self.i += 1
            name = self.i
            while self.i < len(s) and (s[self.i].isalnum() or s[self.i] == "_"):
                self.i += 1
            if self.i > name:
                self.out.append("NAME")
            if self.i >= len(s):
                raise _Stop
        if s[self.i] == ":":
            self.out.append("OP")
            self.i += 1
            self.spec()
        if self.i >= len(s) or s[self.i] != "}":
            raise _Stop
        self.out.append("OP")
        self.i += 1

    def spec(self) -> None:
        """A format spec up to its closing `}`: MIDDLE before a nested field when
        non-empty, and always one at the end."""
        s, piece = self.s, ""
        while self.i < len(s) and s[self.i] != "}":
            if s[self.i] == "{":
                if piece:
                    self.out.append("FSTRING_MIDDLE")
                piece = ""
                self.field()
            else:
                piece += s[self.i]
                self.i += 1
        self.out.append("FSTRING_MIDDLE")

    def _skip_string(self) -> None:
        s = self.s
        quote = s[self.i:self.i + 3] if s[self.i:self.i + 3] in ('"""', "'''") else s[self.i]
        self.i += len(quote)
        while self.i < len(s) and not s.startswith(quote, self.i):
            self.i += 2 if s[self.i] == "\\" else 1
        self.i += len(quote)

    def _expression(self, expr: str) -> None:
        tokens = list(tokenize.generate_tokens(io.StringIO("(" + expr + ")").readline))
        inner: list[str] = []
        for tok in tokens[1:]:
            if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                continue
            if tok.type == tokenize.ERRORTOKEN and tok.string.isspace():
                continue
            if tok.type == tokenize.STRING and "f" in _prefix(tok.string).lower():
                _fstring(tok.string, inner)
            else:
                inner.append(tokenize.tok_name[tok.type])
        if inner and inner[-1] == "OP":
            inner.pop()  # the closing parenthesis added above
        self.out.extend(inner)


# --- complexity -----------------------------------------------------------------------


class Metrics(NamedTuple):
    """radon's numbers as coder_eval takes them: summed block complexity, `loc`, blocks."""

    cyclomatic: int
    lines: int
    functions: int


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def complexity_metrics(text: str, what: str = "the text") -> Metrics:
    tree = _parse(text, what)
    try:
        functions, classes = _blocks(tree)
        total = sum(_function_complexity(f) for f in functions)
        count = len(functions)
        for cls in classes:
            real, methods = _class_complexity(cls)
            total += real if not methods else int(real / len(methods)) + (len(methods) > 1)
            total += sum(_function_complexity(m) for m in methods)
            count += 1 + len(methods)
    except RecursionError as exc:
        raise ComparisonError(f"{what} is nested too deeply to measure") from exc
    return Metrics(total, len(text.splitlines()), count)


def complexity_parts(agent: Metrics, reference: Metrics) -> tuple[float, float, float]:
    """The closeness of the agent's cyclomatic complexity, lines and blocks to the
    reference's, each in [0, 1]."""
    ref_cc = max(reference.cyclomatic, 1)
    cc = max(0.0, 1.0 - min(1.0, agent.cyclomatic / (ref_cc * 1.5)))
    ref_loc = max(reference.lines, 1)
    loc = max(0.0, 1.0 - min(1.0, agent.lines / (ref_loc * 1.5)))
    ref_n = reference.functions
    functions = max(0.0, 1.0 - abs(agent.functions - ref_n) / max(ref_n, 1))
    return cc, loc, functions


def complexity_score(agent: Metrics, reference: Metrics) -> float:
    """coder_eval's `overall_complexity` of the agent relative to the reference."""
    cc, loc, functions = complexity_parts(agent, reference)
    return 0.5 * cc + 0.3 * loc + 0.2 * functions


def _blocks(node: ast.AST) -> tuple[list[ast.AST], list[ast.ClassDef]]:
    """The functions and classes under `node` not inside another function or class."""
    functions: list[ast.AST] = []
    classes: list[ast.ClassDef] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _DEFS):
            functions.append(child)
        elif isinstance(child, ast.ClassDef):
            classes.append(child)
        else:
            more_functions, more_classes = _blocks(child)
            functions += more_functions
            classes += more_classes
    return functions, classes


def _decisions(node: ast.AST) -> int:
    """radon's decision points in `node` and below, not inside functions or classes."""
    if isinstance(node, (*_DEFS, ast.ClassDef)):
        return 0
    if isinstance(node, ast.Assert):
        return 1
    name = type(node).__name__
    if name == "Try":  # not TryStar: radon counts `except*` handlers for nothing
        count = len(node.handlers) + bool(node.orelse)
    elif isinstance(node, ast.BoolOp):
        count = len(node.values) - 1
    elif isinstance(node, (ast.If, ast.IfExp)):
        count = 1
    elif isinstance(node, ast.Match):
        catch_all = any(getattr(case.pattern, "pattern", False) is None
                        for case in node.cases)
        count = max(0, len(node.cases) - catch_all)
    elif name in ("For", "While", "AsyncFor"):
        count = 1 + bool(node.orelse)
    elif isinstance(node, ast.comprehension):
        count = 1 + len(node.ifs)
    else:
        count = 0
    return count + sum(_decisions(child) for child in ast.iter_child_nodes(node))


def _function_complexity(node: ast.AST) -> int:
    return 1 + sum(_decisions(child) for child in node.body)


def _class_complexity(node: ast.ClassDef) -> tuple[int, list[ast.AST]]:
    """(radon's real complexity, the methods) of a class."""
    real, methods = 1, []
    for child in node.body:
        if isinstance(child, _DEFS):
            found = [child]
        elif isinstance(child, ast.ClassDef):
            found = []
        else:
            found = _blocks(child)[0]
            real += _decisions(child)
        methods += found
        real += sum(_function_complexity(f) for f in found)
    return real, methods
