"""How a YAML value and a schema type are said in a diagnostic ("a string", "a list of
..."), and how to write a scalar where the schema wants a list or a mapping: the words
of validate.py's messages, apart from its walk."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal, Union

from ce_lang.spans import Path

_NoneType = type(None)


def yaml_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def describe(tp: Any) -> str:
    """A user-facing name for a schema type."""
    origin = typing.get_origin(tp)
    if tp is str:
        return "a string"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is bool:
        return "a boolean (true/false)"
    if tp is Any:
        return "any value"
    if origin in (Union, types.UnionType):
        parts = [describe(a) for a in typing.get_args(tp) if a is not _NoneType]
        return " or ".join(parts)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(tp))
    if origin is list:
        return "a list"
    if origin is dict:
        return "a mapping"
    return "a mapping"


def shape_help(value: Any, tp: Any, path: Path) -> str | None:
    """How to write a scalar where a list, a record or a criterion goes (`includes:
    "Hello"`, `patterns: ["def main"]`, `- file_exists`)."""
    if isinstance(value, dict | list) or value is None or "`" in str(value):
        return None
    if path and path[-1] == "flags" and isinstance(value, str):
        return _flags_help(value)
    if path and "timeout" in str(path[-1]) and isinstance(value, str):
        seconds = _duration_seconds(value)
        if seconds is not None:
            return f"a number of seconds: write `{path[-1]}: {seconds}` for {value.strip()}"
    shown = json.dumps(value) if isinstance(value, str) else str(value).lower() \
        if isinstance(value, bool) else str(value)
    options = [a for a in typing.get_args(tp) if a is not _NoneType] \
        if typing.get_origin(tp) in (Union, types.UnionType) else [tp]
    if any(typing.get_origin(a) is list and _holds(typing.get_args(a)[0], value)
           for a in options):
        return f"write a list: `[{shown}]`, or one `- {shown}` per line"
    record = next((getattr(a, "__ce_record__", None) for a in options
                   if getattr(a, "__ce_record__", None) is not None), None)
    if record is not None and record.fields and isinstance(value, str):
        # its first field: RegexPattern's pattern
        return f"write a mapping: `{{{next(iter(record.fields))}: {shown}}}`"
    if len(path) == 2 and path[0] == "success_criteria" and isinstance(value, str):
        return f"a criterion is a mapping: `- type: {value}`, then its fields on the " \
               "lines below (`ce criteria show TYPE` lists them)"
    return None


def _duration_seconds(text: str) -> int | None:
    """`10m`, `1h30m`, `90s`, `2.5 min` as whole seconds (timeouts are numbers of
    seconds; a duration written as in other tools is said as the number it means)."""
    import re

    m = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)\s*h(?:ours?|rs?)?)?\s*"
                     r"(?:(\d+(?:\.\d+)?)\s*m(?:in(?:utes?|s)?)?)?\s*"
                     r"(?:(\d+(?:\.\d+)?)\s*s(?:ec(?:onds?|s)?)?)?\s*", text, re.IGNORECASE)
    if m is None or not any(m.groups()):
        return None
    h, mins, s = (float(g) if g else 0.0 for g in m.groups())
    return round(h * 3600 + mins * 60 + s)


def _flags_help(text: str) -> str:
    """Regex `flags` is Python's number: `re.MULTILINE` or `re.I | re.M` written as
    names, as in Python code, is said as the number it means."""
    import re

    names = [n for n in re.split(r"[|+,\s]+", text) if n]
    flags = list(dict.fromkeys(re.RegexFlag.__members__.get(n.upper().removeprefix("RE."))
                               for n in names))
    if names and all(f is not None for f in flags):
        total = sum(int(f) for f in flags)
        parts = " + ".join(f"re.{f.name}={int(f)}" for f in flags)
        return f"flags is a number: write `flags: {total}` ({parts})"
    return "flags is a number, the sum of Python's re flags: re.IGNORECASE=2, " \
           "re.MULTILINE=8, re.DOTALL=16 (`flags: 10` for IGNORECASE and MULTILINE)"


def _holds(tp: Any, value: Any) -> bool:
    """Whether a scalar is a value of the plain type `tp` (str, int ... or a union)."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        return any(_holds(a, value) for a in typing.get_args(tp))
    if isinstance(value, bool):
        return tp is bool
    return tp in (str, int, float) and isinstance(value, tp)


def snippet(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
