"""Code similarity for the `reference_comparison` criterion: pure functions, score in [0, 1].

`similarity(method, agent_text, reference_text, language)` compares the agent's source
with the reference's source. Methods:

- ``ast``: `difflib.SequenceMatcher` ratio of the two sequences of AST node type names,
  taken in a deterministic pre-order traversal (`ast.iter_child_nodes` field order).
  Expression-context nodes (`Load`, `Store`, `Del`) are left out: they only restate the
  parent's role. Identifiers and literal values are not nodes, so renaming a variable
  or changing a constant does not change the sequence. Python only: when the language
  is not Python, or either text does not parse, the ``token`` method is used instead.
- ``token``: the same ratio over token types. Python text goes through `tokenize`; a
  token is named by its exact type (`NAME`, `NUMBER`, `STRING`, `LPAR`, `PLUSEQUAL`...),
  except that a keyword is named by itself (`def`, `return`; soft keywords such as
  `match` stay `NAME`) and an f-/t-string is one `STRING` whatever the Python version
  tokenizes it into. `INDENT`/`DEDENT` are kept (they are Python's block delimiters, the
  analogue of braces, and do not depend on indentation width); `NEWLINE`, `NL`,
  `COMMENT`, `ENCODING`, `ENDMARKER` and `TYPE_COMMENT` are dropped. Other text, or
  Python that `tokenize` rejects, goes through a small regex tokenizer: comments are
  dropped, a keyword is named by itself, other identifiers are `NAME`, then `NUMBER`,
  `STRING`, and each operator or punctuation mark is named by itself.
- ``complexity``: the mean closeness of three metrics, closeness = 1 − |a−b|/max(a, b)
  (1 when both are 0): cyclomatic complexity, logical lines and function count.
  For Python, computed from the AST with radon's counting rules, summed over the file:
  1 for module-level code + 1 per function + 1 per decision point (if/elif, ternary,
  for/while (+1 with an `else`), each `except` (+1 for `try ... else`), each extra
  operand of `and`/`or`, each comprehension `for` and `if`, each non-catch-all `case`);
  logical lines = statements in the AST; functions = `def` and `async def` (methods
  and nested functions included, lambdas not). Computed here rather than by radon so a
  score never depends on which optional packages are installed. Otherwise (not Python
  or not parseable) from the regex tokens: cyclomatic = 1 + function keywords + branch
  keywords and operators, logical lines = lines holding a token, functions = function
  keywords (`def`, `function`, `fn`, `func`, `fun`, `=>`).

Which reading applies is decided once for the pair, so both texts are always measured
the same way. `language` is a name or a file suffix (`"python"`, `"py"`, `".js"`); None
means "Python if both texts parse as Python, otherwise the regex tokenizer".

Guarantees: identical texts score exactly 1.0 under every method (empty and
non-Python text included); texts that differ only in whitespace or comments score 1.0
under ``ast`` and ``token``. The agent's text is SequenceMatcher's `a`, the reference's
`b`: the ratio is not symmetric in general (its longest-match search breaks ties by
position), so the argument order is part of the definition. `autojunk` is off: its
"popular element" heuristic would discard every common node type in a long file.
"""

from __future__ import annotations

import ast
import difflib
import io
import keyword
import re
import tokenize
import warnings
from collections.abc import Sequence

METHODS = ("ast", "token", "complexity")

_PYTHON_NAMES = frozenset({"python", "python3", "py", "pyw", "pyi", "py3"})

# Languages whose comments are only `//` and `/* */`; everything else unknown also
# treats `#` as a comment (Python that failed to parse, shell, Ruby, YAML...).
_SLASH_ONLY = frozenset({
    "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "c++", "cs", "csharp", "java", "js",
    "javascript", "jsx", "mjs", "cjs", "ts", "typescript", "tsx", "go", "golang", "rs",
    "rust", "swift", "kt", "kts", "kotlin", "scala", "dart", "php", "groovy", "zig",
})
# Languages whose comments are only `#` (`//` is an operator in Python).
_HASH_ONLY = frozenset({
    "sh", "bash", "zsh", "shell", "rb", "ruby", "pl", "perl", "r", "yaml", "yml", "toml",
    "cfg", "ini", "make", "makefile", "dockerfile", "cmake", "nim", "jl", "julia",
}) | _PYTHON_NAMES

_PY_DROPPED = frozenset(
    getattr(tokenize, name)
    for name in ("NEWLINE", "NL", "COMMENT", "ENCODING", "ENDMARKER", "TYPE_COMMENT")
    if hasattr(tokenize, name)
)
_PY_STRING_START = frozenset(
    getattr(tokenize, name) for name in ("FSTRING_START", "TSTRING_START")
    if hasattr(tokenize, name)
)
_PY_STRING_END = frozenset(
    getattr(tokenize, name) for name in ("FSTRING_END", "TSTRING_END")
    if hasattr(tokenize, name)
)

_GENERIC_KEYWORDS = frozenset(["abstract", "and", "as", "assert", "async", "await", "break", "case", "catch", "class", "const", "continue", "def", "default", "defer", "del", "delete", "do", "elif", "else", "enum", "except", "export", "extends", "final", "finally", "fn", "for", "from", "fun", "func", "function", "global", "go", "goto", "if", "impl", "implements", "import", "in", "instanceof", "interface", "is", "lambda", "let", "loop", "match", "mod", "module", "mut", "namespace", "new", "nonlocal", "not", "of", "or", "package", "pass", "private", "protected", "pub", "public", "raise", "return", "select", "static", "struct", "super", "switch", "this", "throw", "throws", "trait", "try", "type", "typeof", "use", "var", "void", "where", "while", "with", "yield", "None", "True", "False", "null", "nil", "true", "false", "undefined", "self"])
_GENERIC_FUNCTIONS = frozenset({"def", "function", "fn", "func", "fun", "=>"})
_GENERIC_DECISIONS = frozenset({
    "if", "elif", "for", "while", "case", "catch", "except", "and", "or", "&&", "||", "?",
})

_STRING = r"""(?:[rRbBuUfF]{0,2}(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|`(?:[^`\\]|\\.)*`)"""
_OPERATORS = sorted(
    [">>>=", "<<=", ">>=", "**=", "//=", "...", "===", "!==", ">>>", "=>", "->", "::", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "**", "//", "<<", ">>", "?.", "??", ":=", "|>", "<-"],
    key=len, reverse=True,
)
_PUNCT = "|".join(re.escape(op) for op in _OPERATORS) + r"|[^\s\w]"


def _generic_regex(comments: str) -> re.Pattern[str]:
    return re.compile(
        rf"(?P<comment>{comments})|(?P<string>{_STRING})"
        r"|(?P<number>(?:\d|\.\d)[\w.]*)|(?P<name>[^\W\d][\w$]*|\$[\w$]*)"
        rf"|(?P<punct>{_PUNCT})"
    )


_SLASH_COMMENTS = r"//[^\n]*|/\*[\s\S]*?(?:\*/|\Z)"
_HASH_COMMENTS = r"\#[^\n]*"
_REGEX_SLASH = _generic_regex(_SLASH_COMMENTS)
_REGEX_HASH = _generic_regex(_HASH_COMMENTS)
_REGEX_BOTH = _generic_regex(f"{_SLASH_COMMENTS}|{_HASH_COMMENTS}")


def similarity(
    method: str, agent_text: str, reference_text: str, language: str | None = None
) -> float:
    """Similarity of `agent_text` to `reference_text` in [0, 1] (see the module doc)."""
    name = method.strip().lower() if isinstance(method, str) else method
    if name not in METHODS:
        raise ValueError(
            f"unknown comparison method {method!r}: expected one of {', '.join(METHODS)}"
        )
    if agent_text == reference_text:
        return 1.0
    lang = _normalize_language(language)
    agent, reference = _strip_bom(agent_text), _strip_bom(reference_text)
    if name == "ast":
        score = _ast_similarity(agent, reference, lang)
    elif name == "token":
        score = _token_similarity(agent, reference, lang)
    else:
        score = _complexity_similarity(agent, reference, lang)
    return min(1.0, max(0.0, score))


# --- shared ---------------------------------------------------------------------------


def _normalize_language(language: str | None) -> str | None:
    if language is None:
        return None
    lang = language.strip().lower().lstrip(".")
    if lang in _PYTHON_NAMES:
        return "python"
    return lang or None


def _strip_bom(text: str) -> str:
    return text[1:] if text.startswith("\ufeff") else text


def _ratio(a: Sequence[str], b: Sequence[str]) -> float:
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _closeness(a: float, b: float) -> float:
    high = max(a, b)
    return 1.0 if high == 0 else 1.0 - abs(a - b) / high


def _parse_python(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for invalid escapes etc.
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _python_trees(agent: str, reference: str, lang: str | None):
    """Both ASTs when the pair is read as Python, else None."""
    if lang not in (None, "python"):
        return None
    a = _parse_python(agent)
    if a is None:
        return None
    b = _parse_python(reference)
    return None if b is None else (a, b)


# --- ast ------------------------------------------------------------------------------


def ast_node_types(tree: ast.AST) -> list[str]:
    """Node type names of `tree` in pre-order, expression contexts left out."""
    out: list[str] = []
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.expr_context):
            continue
        out.append(type(node).__name__)
        children = list(ast.iter_child_nodes(node))
        stack.extend(reversed(children))
    return out


def _ast_similarity(agent: str, reference: str, lang: str | None) -> float:
    trees = _python_trees(agent, reference, lang)
    if trees is None:
        return _token_similarity(agent, reference, lang)
    return _ratio(ast_node_types(trees[0]), ast_node_types(trees[1]))


# --- token ----------------------------------------------------------------------------


def python_token_types(text: str) -> list[str] | None:
    """Token type names of Python `text` (module doc), or None if `tokenize` rejects it."""
    out: list[str] = []
    depth = 0  # nesting of f-/t-strings (Python >= 3.12 splits them into parts)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _PY_STRING_START:
                if depth == 0:
                    out.append("STRING")
                depth += 1
            elif tok.type in _PY_STRING_END:
                depth -= 1
            elif depth or tok.type in _PY_DROPPED:
                continue
            elif tok.type == tokenize.ERRORTOKEN or (
                    tok.type == tokenize.OP and tok.exact_type == tokenize.OP):
                # not Python: 3.11 reports an ERRORTOKEN, 3.13 an OP no operator maps to
                return None
            elif tok.type == tokenize.NAME and keyword.iskeyword(tok.string):
                out.append(tok.string)
            else:
                out.append(tokenize.tok_name[tok.exact_type])
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return out


def generic_tokens(text: str, language: str | None = None) -> list[tuple[str, int]]:
    """(token class, line number) pairs from the regex tokenizer; comments dropped."""
    if language in _SLASH_ONLY:
        regex = _REGEX_SLASH
    elif language in _HASH_ONLY:
        regex = _REGEX_HASH
    else:
        regex = _REGEX_BOTH
    out: list[tuple[str, int]] = []
    line, pos = 1, 0
    for match in regex.finditer(text):
        line += text.count("\n", pos, match.start())
        pos = match.start()
        kind = match.lastgroup
        if kind == "comment":
            continue
        value = match.group()
        if kind == "name":
            cls = value if value in _GENERIC_KEYWORDS else "NAME"
        elif kind == "punct":
            cls = value
        else:
            cls = "NUMBER" if kind == "number" else "STRING"
        out.append((cls, line))
    return out


def _token_similarity(agent: str, reference: str, lang: str | None) -> float:
    python = lang == "python" or (lang is None and _python_trees(agent, reference, lang))
    if python:
        a = python_token_types(agent)
        b = python_token_types(reference) if a is not None else None
        if a is not None and b is not None:
            return _ratio(a, b)
    return _ratio(
        [cls for cls, _ in generic_tokens(agent, lang)],
        [cls for cls, _ in generic_tokens(reference, lang)],
    )


# --- complexity -----------------------------------------------------------------------


def python_metrics(tree: ast.AST) -> tuple[int, int, int]:
    """(cyclomatic complexity, logical lines, function count) of a parsed module."""
    functions = statements = decisions = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            statements += 1
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions += 1
        elif isinstance(node, ast.If | ast.IfExp):
            decisions += 1
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            decisions += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)):
            decisions += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            decisions += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            decisions += 1 + len(node.ifs)
        elif isinstance(node, ast.Match):
            catch_all = any(
                isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None
                for case in node.cases
            )
            decisions += max(0, len(node.cases) - catch_all)
    return 1 + functions + decisions, statements, functions


def generic_metrics(text: str, language: str | None = None) -> tuple[int, int, int]:
    """(cyclomatic complexity, logical lines, function count) from the regex tokens."""
    tokens = generic_tokens(text, language)
    functions = sum(cls in _GENERIC_FUNCTIONS for cls, _ in tokens)
    decisions = sum(cls in _GENERIC_DECISIONS for cls, _ in tokens)
    lines = len({line for _, line in tokens})
    return 1 + functions + decisions, lines, functions


def _complexity_similarity(agent: str, reference: str, lang: str | None) -> float:
    trees = _python_trees(agent, reference, lang)
    if trees is None:
        a, b = generic_metrics(agent, lang), generic_metrics(reference, lang)
    else:
        a, b = python_metrics(trees[0]), python_metrics(trees[1])
    return sum(_closeness(x, y) for x, y in zip(a, b, strict=True)) / 3
