"""Where the shipped data lives: `grammar/` and `stdlib_criteria/` in a source checkout,
`ce_lang/_data/...` in an installed wheel."""

from __future__ import annotations

import os

from ce_lang import hostfs

_HERE = os.path.dirname(os.path.abspath(__file__))


def data_dir(name: str) -> str:
    for candidate in (os.path.join(os.path.dirname(_HERE), name),
                      os.path.join(_HERE, "_data", name)):
        if hostfs.own_isdir(candidate):
            return candidate
    raise FileNotFoundError(f"ce data directory {name!r} not found")


def grammar_dir() -> str:
    return data_dir("grammar")


def stdlib_dir() -> str:
    return data_dir("stdlib_criteria")
