"""Extension points found by name: ce's built-ins first, then the entry points installed
packages register (`ce.agents`, `ce.sandboxes`)."""

from __future__ import annotations

import importlib
from typing import Any


def find(name: str, builtin: dict[str, str], group: str) -> Any | None:
    """The class registered as `name` ("module:attr" in `builtin`, or an entry point of
    `group`); None when nothing is."""
    target = builtin.get(name)
    if target is not None:
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    from importlib.metadata import entry_points

    for ep in entry_points(group=group):
        if ep.name == name:
            return ep.load()
    return None
