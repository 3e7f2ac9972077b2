"""Where ce's per-machine caches live. Not a compile input: the compiler's looks at the
host go through hostfs; this only names ce's own directory."""

from __future__ import annotations

import os


def ce_cache(*parts: str) -> str:
    """ce's per-machine cache (`$XDG_CACHE_HOME/ce`, else `~/.cache/ce`), or a path in it:
    where every cache of ce lives (compiles, the standard criteria, venv templates, the
    agent CLIs, uv's downloads), and the one directory no agent may see."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ce", *parts)
