"""Loading criteria definitions: the standard library and the user's own `.ce` files."""

from __future__ import annotations

import os
from functools import cache

from ce_lang.diagnostics import Diagnostics
from ce_lang.lang.analysis import register_source
from ce_lang.lang.checker import Registry, check_module
from ce_lang.lang.parser import parse_module


def stdlib_dir() -> str:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for candidate in (os.path.join(os.path.dirname(here), "stdlib_criteria"),
                      os.path.join(here, "_data", "stdlib_criteria")):
        if os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError("ce stdlib_criteria directory not found")


def stdlib_files() -> list[str]:
    d = stdlib_dir()
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".ce"))


@cache
def _stdlib() -> tuple[Registry, tuple]:
    diags = Diagnostics()
    registry = Registry()
    for path in stdlib_files():
        load_file(path, registry, diags, origin=f"stdlib {os.path.basename(path)}")
    return registry, tuple(diags)


def stdlib_registry() -> Registry:
    """The standard library, checked once per process. Its diagnostics are bugs in ce."""
    registry, diags = _stdlib()
    if diags:
        raise RuntimeError("the standard criteria library has errors:\n"
                           + "\n".join(f"{d.span}: {d.message}" for d in diags))
    return registry


def user_registry() -> Registry:
    """A registry that starts with the standard library; user files are added to it."""
    base = stdlib_registry()
    registry = Registry()
    registry.records = dict(base.records)
    registry.record_defaults = dict(base.record_defaults)
    registry.criteria = dict(base.criteria)
    registry.origin = dict(base.origin)
    return registry


def load_file(path: str, registry: Registry, diags: Diagnostics, origin: str | None = None
              ) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        diags.emit("CE0611", f"cannot read criteria file {path!r}: {exc}", None)
        return False
    register_source(path, text)
    module = parse_module(text, path, diags)
    if module is None:
        return False
    check_module(module, registry, diags, origin or path)
    return True


