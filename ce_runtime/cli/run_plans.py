"""`ce run`'s compile, through the compile cache (ce_lang/compile_cache.py).

`ce compile` caches what a compile printed; `ce run` caches what it needs: the trials
(their plans), the diagnostics and the sources they point into, pickled, and each
plan's file for the run directory (plans/<hash>.json, whose encoding costs as much as
the compile). A hit re-checks
every file, listing, glob and setting the compile consulted, exactly as `ce compile`'s
does, then loads them without importing the compiler (~0.1 s of imports, plus the compile
itself). The cache is off with CE_NO_COMPILE_CACHE=1.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, NamedTuple

# the pickled objects' shape is ce_lang's (in every key); this module decides what is
# kept, and the suite's plan_file_bytes how a plan file is spelled
_CODE = (os.path.abspath(__file__),
         os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "execute", "suite.py"))


class CompiledRun(NamedTuple):
    """What `ce run` uses of a CompileResult (whose class lives in the compiler)."""

    trials: list
    diagnostics: list
    sources: dict[str, str]
    errors: int
    warnings: int
    plan_files: dict[str, bytes]  # plans/<hash>.json's bytes (suite.plan_file_bytes)


def compile_for_run(paths: tuple[str, ...], options: dict[str, Any],
                    cached: bool = True) -> CompiledRun:
    """compile_paths(paths, CompileOptions(**options)) with the host's limits probed only
    when a task sets one; from the cache when nothing it consulted changed (and `cached`:
    `ce run --no-cache`)."""
    from ce_lang.api import compile_cache as cache
    from ce_runtime.execute.sandbox import host_limits

    if not cached or cache.disabled_by_env():
        return _compile(paths, options, host_limits)
    key = cache.make_key(("run", tuple(paths), tuple(sorted(options.items()))), _CODE)
    hit = cache.lookup(key, {"host_limits": host_limits})
    if hit is not None:
        try:
            return CompiledRun(*pickle.loads(hit[0][0]))
        except Exception:  # an entry this ce cannot load: compile
            pass
    from ce_runtime.cli.compile import WarningsSeen

    with cache.recording() as recorder, WarningsSeen() as warned:
        compiled = _compile(paths, options, host_limits)
    if not warned.seen:  # a Python warning went to stderr: a hit would not show it
        try:
            blob = pickle.dumps(tuple(compiled), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # something not picklable: not cached
            return compiled
        cache.store(key, recorder, [blob], 0)
    return compiled


def _compile(paths, options: dict[str, Any], host_limits) -> CompiledRun:
    from ce_lang.api import CompileOptions, compile_paths
    from ce_runtime.execute.suite import plan_file_bytes

    result = compile_paths(paths, CompileOptions(host_limits=host_limits, **options))
    plans = {t.plan_hash: t.plan for t in result.trials}
    return CompiledRun(result.trials, result.diagnostics, result.sources, result.errors,
                       result.warnings,
                       {h: plan_file_bytes(h, plan) for h, plan in plans.items()})
