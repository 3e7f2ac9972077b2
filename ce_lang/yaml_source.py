"""YAML -> plain Python values plus a span side table keyed by document path.

PyYAML's composer (the libyaml one when available) gives nodes with marks; we build the
values ourselves so that duplicate keys, merge keys, aliases and key spans are handled
exactly once, here, and every later stage can ask "where did this value come from".
"""

from __future__ import annotations

from typing import Any

import attrs
import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ce_lang.diagnostics import Diagnostics
from ce_lang.spans import Path, Span, offset_to_line_col

try:  # the C composer is ~10x faster; fall back silently where libyaml is missing
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader

MAX_NODES = 200_000  # bounds alias expansion ("billion laughs")


# Positions are kept as plain tuples (line, col, end_line, end_col, offset, end_offset) and
# turned into `Span`s only when asked for: most nodes are never reported on.
_Pos = tuple[int, int, int, int, int, int]


@attrs.frozen
class LocatedDoc:
    """One YAML document: its value, and where every node and key sits in the file."""

    file: str
    text: str
    value: Any
    spans: dict[Path, _Pos]
    key_spans: dict[Path, _Pos]

    def span(self, path: Path) -> Span:
        """The span of `path`, or of its nearest located ancestor."""
        spans = self.spans
        for cut in range(len(path), -1, -1):
            pos = spans.get(path[:cut])
            if pos is not None:
                return Span(self.file, *pos)
        return Span.point(self.file)

    def key_span(self, path: Path) -> Span:
        pos = self.key_spans.get(path)
        return Span(self.file, *pos) if pos is not None else self.span(path)


def _pos(node: Node) -> _Pos:
    start, end = node.start_mark, node.end_mark
    return (start.line + 1, start.column + 1, end.line + 1, end.column + 1,
            start.index, end.index)


def _span(file: str, node: Node) -> Span:
    return Span(file, *_pos(node))


_SCALAR_TAGS = {
    "tag:yaml.org,2002:str": None,
    "tag:yaml.org,2002:null": "construct_yaml_null",
    "tag:yaml.org,2002:bool": "construct_yaml_bool",
    "tag:yaml.org,2002:int": "construct_yaml_int",
    "tag:yaml.org,2002:float": "construct_yaml_float",
}


class _Builder:
    def __init__(self, file: str, diags: Diagnostics):
        self.file = file
        self.diags = diags
        self.spans: dict[Path, _Pos] = {}
        self.key_spans: dict[Path, _Pos] = {}
        self.constructor = SafeConstructor()
        self.nodes = 0
        self.active: set[int] = set()
        # spans set while a `<<` source is built, so the merged keys copy theirs without
        # scanning the tables (a merge of thousands of keys stays linear)
        self.recording: list[list[tuple[bool, Path, _Pos]]] = []

    def _set_span(self, is_key: bool, path: Path, pos: _Pos) -> None:
        (self.key_spans if is_key else self.spans)[path] = pos
        for rec in self.recording:
            rec.append((is_key, path, pos))

    def build(self, node: Node, path: Path) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooLarge(node)
        self._set_span(False, path, _pos(node))
        if isinstance(node, ScalarNode):
            return self.scalar(node)
        if id(node) in self.active:
            self.diags.emit("CE0005", "recursive alias", _span(self.file, node))
            return None
        self.active.add(id(node))
        try:
            if isinstance(node, SequenceNode):
                return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
            return self.mapping(node, path)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode) -> Any:
        method = _SCALAR_TAGS.get(node.tag, "other")
        if method is None:
            return node.value
        try:
            if method == "other":  # timestamps, binary, custom tags: keep the source text
                if node.tag.startswith("tag:yaml.org,2002:"):
                    return node.value
                self.diags.emit(
                    "CE0005", f"unsupported YAML tag `{node.tag}`", _span(self.file, node)
                )
                return node.value
            return getattr(self.constructor, method)(node)
        except (ConstructorError, ValueError):
            return node.value

    def mapping(self, node: MappingNode, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_seen: dict[str, _Pos] = {}
        merged: list[tuple[str, Any, list[tuple[bool, Path, _Pos]]]] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged.extend(self.merge_sources(value_node, path))
                continue
            if not isinstance(key_node, ScalarNode):
                self.diags.emit(
                    "CE0005", "mapping keys must be plain scalars", _span(self.file, key_node)
                )
                continue
            key = key_node.value
            key_pos = _pos(key_node)
            if key in first_seen:
                prev = first_seen[key]
                self.diags.emit(
                    "CE0003", f"duplicate key `{key}`", Span(self.file, *key_pos),
                    notes=(f"first defined at {self.file}:{prev[0]}:{prev[1]}",),
                )
                continue
            first_seen[key] = key_pos
            self._set_span(True, (*path, key), key_pos)
            out[key] = self.build(value_node, (*path, key))
        for key, value, spans in merged:  # explicit keys win over `<<` merges
            if key not in out:
                out[key] = value
                for is_key, rest, pos in spans:
                    self._set_span(is_key, (*path, key, *rest), pos)
        return out

    def merge_sources(self, node: Node, path: Path
                      ) -> list[tuple[str, Any, list[tuple[bool, Path, _Pos]]]]:
        """Each merged key with its value and the spans under it (relative paths)."""
        sources = node.value if isinstance(node, SequenceNode) else [node]
        entries: list[tuple[str, Any, list[tuple[bool, Path, _Pos]]]] = []
        for i, source in enumerate(sources):
            if not isinstance(source, MappingNode):
                self.diags.emit(
                    "CE0005", "`<<` merge expects a mapping or a list of mappings",
                    _span(self.file, source),
                )
                continue
            tmp_path = (*path, f"<<{i}")
            recorded: list[tuple[bool, Path, _Pos]] = []
            self.recording.append(recorded)
            try:
                value = self.build(source, tmp_path)
            finally:
                self.recording.pop()
            if value is None:  # a mapping merging itself: reported as a recursive alias
                continue
            n = len(tmp_path)
            by_key: dict[Any, list[tuple[bool, Path, _Pos]]] = {}
            for is_key, p, pos in recorded:
                if len(p) > n:
                    by_key.setdefault(p[n], []).append((is_key, p[n + 1:], pos))
            entries.extend((k, v, by_key.get(k, [])) for k, v in value.items())
        return entries


class _TooLarge(Exception):
    def __init__(self, node: Node):
        self.node = node


MAX_FILE_BYTES = 2 * 1024 * 1024  # a task is text a person writes; data has datasets


def parse_yaml(text: str, file: str, diags: Diagnostics) -> LocatedDoc | None:
    """Parse one YAML document; None (with diagnostics) when it cannot be used at all.
    A file over MAX_FILE_BYTES is refused before parsing (a 12 MB list took 7 s and
    500 MB to parse)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        diags.emit("CE0007", f"the file is {size / 1048576:.1f} MiB; task and experiment "
                   f"files are limited to {MAX_FILE_BYTES // 1048576} MiB",
                   Span.point(file),
                   help="move large data into a dataset file (JSONL/CSV/YAML rows) or a "
                        "prompt file the task names")
        return None
    try:
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.composer.ComposerError as exc:
        if "expected a single document" in str(exc):
            mark = exc.problem_mark
            diags.emit(
                "CE0005", "a task file holds one YAML document, found several",
                Span.point(file, mark.line + 1, mark.column + 1) if mark else Span.point(file),
            )
            return None
        return _syntax_error(exc, file, diags, text)
    except yaml.MarkedYAMLError as exc:
        return _syntax_error(exc, file, diags, text)
    except yaml.reader.ReaderError as exc:  # control characters, bad encoding
        line, col = offset_to_line_col(text, exc.position)
        char = exc.character
        code = f"#x{ord(char) if isinstance(char, str) else char:04x}"
        diags.emit("CE0002", f"unacceptable character {code}: control characters are not "
                   "allowed", Span(file, line, col, line, col + 1, exc.position,
                                           exc.position + 1))
        return None
    except yaml.YAMLError as exc:
        diags.emit("CE0002", f"YAML error: {str(exc).splitlines()[0]}", Span.point(file))
        return None
    if root is None:
        diags.emit("CE0004", "the file is empty; expected a mapping", Span.point(file))
        return None
    builder = _Builder(file, diags)
    before = len(diags)
    try:
        value = builder.build(root, ())
    except _TooLarge as exc:
        diags.emit(
            "CE0005", f"document expands to more than {MAX_NODES} nodes (alias bomb?)",
            _span(file, exc.node),
        )
        return None
    if any(d.code == "CE0005" for d in diags[before:]):
        return None  # a structure we refuse to interpret: don't pile follow-on errors on it
    return LocatedDoc(file, text, value, builder.spans, builder.key_spans)


def _syntax_error(exc: yaml.MarkedYAMLError, file: str, diags: Diagnostics,
                  text: str) -> None:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or "invalid YAML"
    context = f" ({exc.context})" if exc.context else ""
    span = (
        Span(file, mark.line + 1, mark.column + 1, mark.line + 1, mark.column + 2,
             mark.index, mark.index + 1)
        if mark else Span.point(file)
    )
    notes = ()
    if exc.context_mark and exc.problem_mark and exc.context_mark.line != exc.problem_mark.line:
        cm = exc.context_mark
        notes = (f"{exc.context} at {file}:{cm.line + 1}:{cm.column + 1}",)
        context = ""
    help = None
    if mark and text[mark.index:mark.index + 1] == "\t":
        # PyYAML's words for a tab-indented line ("found character that cannot start
        # any token while scanning for the next token") do not say it is a tab, and the
        # echoed source line shows the tab as a space.
        problem, context, notes = "a tab character here: YAML indents with spaces only", "", ()
        help = "replace the tab with spaces"
    diags.emit("CE0002", f"{problem}{context}", span, help=help, notes=notes)
    return None


TASK_KEYS = ("task_id", "success_criteria", "initial_prompt", "initial_prompt_file")
EXPERIMENT_KEYS = ("experiment_id", "variants")


# the top-level keys of a scripted model session or a `--judge-replies` file (the
# model server's Script.from_data reads these, and refuses any other key)
SCRIPT_KEYS = frozenset({"steps", "rows", "judge", "agent_judge", "user_turns"})


def document_kind(value: dict[str, Any]) -> str | None:
    """Which ce document a YAML mapping is: "task", "experiment", "model_script" (a
    scripted model session or judge replies: read through a task, never compiled), or
    None (a template's YAML, a fixture: a directory's are skipped, a file named on the
    command line is compiled as a task and says what it lacks)."""
    if any(k in value for k in EXPERIMENT_KEYS):
        return "experiment"
    if any(k in value for k in TASK_KEYS):
        return "task"
    if value and set(value) <= SCRIPT_KEYS:
        return "model_script"
    return None
