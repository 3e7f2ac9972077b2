"""The compiler as the runtime sees it: every name `ce_runtime` and `ce_agents` use.

The runtime imports `ce_lang` only through this module, so the compiler's internals can
move without touching the runtime, and private names never leak across the boundary
(an import-hygiene test holds it). Names load lazily (PEP 562): `from ce_lang.api
import Plan` imports the plan module and nothing else, so `ce compile` pays only for
what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> module that defines it ("" after the module: the module itself)
_EXPORTS: dict[str, str] = {
    "__version__": "ce_lang",
    "ce_cache": "ce_lang.caches",
    # front end
    "CompileOptions": "ce_lang.compiler",
    "compile_cache": "ce_lang.compile_cache",
    "compile_paths": "ce_lang.compiler",
    "Diagnostics": "ce_lang.diagnostics",
    "did_you_mean": "ce_lang.diagnostics",
    "CODES": "ce_lang.codes",
    "RUN_LEVEL_DIRS": "ce_lang.experiment",
    "ignored_by": "ce_lang.paths",
    "included_by": "ce_lang.paths",
    "render_human": "ce_lang.render",
    "budget_places": "ce_lang.budget",
    "unenforceable_budget": "ce_lang.budget",
    "render_json": "ce_lang.render",
    "render_sarif": "ce_lang.render",
    "converter": "ce_lang.convert",
    "SCRIPT_KEYS": "ce_lang.yaml_source",
    # plans
    "Plan": "ce_lang.plan",
    "Trial": "ce_lang.plan",
    "CriterionCall": "ce_lang.plan",
    "plan_hash": "ce_lang.plan",
    "plan_json_hash": "ce_lang.plan",
    "legacy_plan_json_hash": "ce_lang.plan",
    "plan_to_json": "ce_lang.plan",
    "block_to_json": "ce_lang.plan",
    "plan_from_json": "ce_lang.plan",
    "trial_to_json": "ce_lang.plan",
    "CRITERION_ALIASES": "ce_lang.schema.criteria",
    "RepoSource": "ce_lang.schema.blocks",
    "StarterFilesSource": "ce_lang.schema.blocks",
    "TemplateDirSource": "ce_lang.schema.blocks",
    "task_dir_names": "ce_lang.inputs",
    "repo_url_problem": "ce_lang.paths",
    "read_regular": "ce_lang.paths",
    "NotRegularFile": "ce_lang.paths",
    "commit_problem": "ce_lang.paths",
    "is_local_repo": "ce_lang.paths",
    "RECORD_CLI_DIR": "ce_lang.schema.cli",
    "RECORD_CLI_LOG_NAME": "ce_lang.schema.cli",
    "argv_match": "ce_lang.argv_match",
    "SECRET_NAME": "ce_lang.secret_names",
    "looks_secret": "ce_lang.secret_names",
    "TOOL_NAMES": "ce_lang.tool_names",
    # the criteria language
    "ast": "ce_lang.lang.ast",
    "BUILTINS": "ce_lang.lang.builtins",
    "CriterionError": "ce_lang.lang.builtins",
    "regex_match": "ce_lang.lang.builtins",
    "RegexBudgetExceeded": "ce_lang.lang.builtins",
    "regex_budget": "ce_lang.lang.builtins",
    "Registry": "ce_lang.lang.checker",
    "effect_rank": "ce_lang.lang.checker",
    "rescore_offline": "ce_lang.lang.checker",
    "signature_text": "ce_lang.lang.checker",
    "default_value": "ce_lang.lang.bind",
    "analyze": "ce_lang.lang.analysis",
    "source_text": "ce_lang.lang.analysis",
    "meets": "ce_lang.lang.analysis",
    "Instance": "ce_lang.lang.instances",
    "instances_from_plan": "ce_lang.lang.instances",
    "Evaluator": "ce_lang.lang.evaluate",
    "Link": "ce_lang.lang.evaluate",
    "Program": "ce_lang.lang.program",
    "program_for": "ce_lang.lang.program",
    "program_builds": "ce_lang.lang.program",
    "LiveEvaluator": "ce_lang.lang.live",
    "live_verdict": "ce_lang.lang.live",
    "criterion_bound": "ce_lang.lang.live",
    "registry_for_sources": "ce_lang.lang.stdlib",
    "stdlib_texts": "ce_lang.lang.stdlib",
    "stdlib_digest": "ce_lang.plan",
    "SEMANTICS_VERSION": "ce_lang.plan",
    "load_file": "ce_lang.lang.stdlib",
    "user_registry": "ce_lang.lang.stdlib",
    "MessageView": "ce_lang.lang.values",
    "Regex": "ce_lang.lang.values",
    "ToolCallView": "ce_lang.lang.values",
    "TraceView": "ce_lang.lang.values",
    "unwrap_shell": "ce_lang.lang.values",
    "normalize_shell": "ce_lang.lang.values",
    "index_value": "ce_lang.lang.evaluate",
}
_MODULES = {"ast", "argv_match", "compile_cache"}  # exported as the module itself

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"ce_lang.api has no {name!r}")
    loaded = importlib.import_module(module)
    value = loaded if name in _MODULES else getattr(loaded, name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # for editors and type checkers: the same names, eagerly
    pass
