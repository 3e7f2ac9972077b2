"""The success criteria of the task format, one frozen class per `type:`.

These classes describe what a task file may say about a criterion; every standard
criterion's class is generated at import from its `.ce` signature (`GENERATED`), with
the records its arguments take (ce_lang.schema.records' `GENERATED_RECORDS`:
RegexPattern, Assertion, FlagMatch, whose `require` constraints the schema walker checks
on every bound entry; a record's `shorthand` field makes a bare string stand for it,
FlagMatch's `output: json`). One
parameter the language types as `json` keeps a schema type of the task format
(`_SCHEMA_FIELDS`: agent_judge's `agent`, a partial AgentConfig merged over the judge's
hardened defaults). What a criterion *computes* (its predicate, effects and
decidability) belongs to the criteria language; the plan lowers each instance into a
call of that definition with these fields as arguments. Hand-written here: `expr`, user
calls and the common fields, which belong to the task format, not to a definition.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.fields import Tagged, register, spec
from ce_lang.schema.records import (  # noqa: F401 - the records, also criteria's names
    GENERATED_RECORDS,
    FlagMatch,
    JmesAssertion,
    RegexPattern,
    add_fields,
)

frozen = attrs.frozen(kw_only=True, slots=False)  # generated classes extend CriterionBase

StopWhen = Literal["pass", "fail", "decided"]
JUDGE_DEFAULT_MODEL = "anthropic.claude-sonnet-4-6"


COMMON_FIELDS = frozenset(
    ("type", "description", "weight", "pass_threshold", "stop_when", "stop_early",
     "suite_thresholds")
)


@frozen
class StopEarlyPolicy:
    """coder_eval's per-criterion early-stop block; lowered to the same arming as stop_when."""

    on_pass: Literal["stop", "continue"] = spec(
        "continue", doc="'stop' ends the run on a live pass; 'continue' only latches it"
    )
    decide_within: int | None = spec(
        None, ge=1, doc="tool-call steps after which an undecided criterion counts as failed"
    )


class Criterion(Tagged):
    """Base of every criterion entry of `success_criteria`."""

    MEMBERS: ClassVar[dict[str, type]] = {}
    REMOVED: ClassVar[dict[str, str]] = {
        "program_stdout_equals": "use `run_command` with `expected_stdout` and `stdout_match`",
        "code_lints": "use `run_command` to run the linter directly",
        "scored_command": "use `run_command` with `score_from_stdout: true`",
    }
    ALIASES: ClassVar[dict[str, tuple[str, dict[str, Any]]]] = {
        "command_not_executed": ("command_executed", {"min_count": 0, "max_count": 0}),
    }
    KIND: ClassVar[str] = "criterion type"
    # Result kind and what the criterion reads; the criteria language derives these from
    # the definitions, the front end only needs them to enforce the `type: none` contract.
    RESULT: ClassVar[str] = "binary"
    READS_TRACE: ClassVar[bool] = False
    DEFAULT_PASS_THRESHOLD: ClassVar[float] = 0.9


# criterion types that stand for another with fixed fields (`ce criteria show` says so)
CRITERION_ALIASES = Criterion.ALIASES


@frozen
class CriterionBase:
    type: str = spec(doc="criterion type")
    description: str = spec(
        non_empty=True, doc="what this criterion checks, shown in reports (required)"
    )
    weight: float = spec(1.0, ge=0, doc="relative importance; 0 makes it informational")
    pass_threshold: float | None = spec(
        None, ge=0, le=1, doc="minimum score to pass (0.9; judges 0.7)"
    )
    stop_when: StopWhen | None = spec(
        None, doc="arm for early stop: pass, fail or decided (needs run_limits.stop_early)"
    )
    stop_early: StopEarlyPolicy | None = spec(
        None, doc="coder_eval spelling of early-stop arming; prefer stop_when"
    )
    suite_thresholds: dict[str, float] | None = spec(
        None, doc="suite-level minimums over dataset rows, e.g. {recall.yes: 0.7}"
    )


@register(Criterion, "expr")
@frozen
class ExprCriterion(CriterionBase, Criterion):
    """An inline criterion: a boolean (binary) or numeric (fraction/continuous) expression."""

    RESULT = "binary"
    expr: str = spec(non_empty=True, doc="an expression of the criteria language")
    kind: Literal["binary", "fraction", "continuous"] | None = spec(
        None, doc="result kind; default binary for a boolean expression, else continuous"
    )


@frozen
class UserCall(CriterionBase, Criterion):
    """A criterion defined in the user's `criteria_files`; its arguments are checked
    against that definition's signature, not against a schema class."""

    RESULT = "user"
    args: dict[str, Any] = spec(factory=dict)


Criterion.USER_BASE = CriterionBase


# -- classes generated from the standard library's .ce signatures -------------------------
# Field names, types, defaults, docs and the result kind come from the definition (its
# `require` constraints are checked when the arguments are bound); only what a signature
# does not say is here.
GENERATED = {
    "file_exists": "FileExists", "file_contains": "FileContains", "file_check": "FileCheck",
    "json_check": "JsonCheck",
    "file_matches_regex": "FileMatchesRegex", "run_command": "RunCommand",
    "uipath_eval": "UipathEval", "reference_comparison": "ReferenceComparison",
    "command_executed": "CommandExecuted", "commands_efficiency": "CommandsEfficiency",
    "skill_triggered": "SkillTriggered", "classification_match": "ClassificationMatch",
    "llm_judge": "LlmJudge", "agent_judge": "AgentJudge", "cli_called": "CliCalled",
}
_DEFAULT_PASS_THRESHOLD = {"llm_judge": 0.7, "agent_judge": 0.7}
# parameters the language types as `json` that the task format validates with a schema
# of its own: agent_judge's `agent` is a partial AgentConfig (the task's agent schema),
# merged over the judge's hardened defaults
_SCHEMA_FIELDS = {("agent_judge", "agent"): (AgentConfig | None, {"partial": True})}


def _generate(tag: str, class_name: str) -> type:
    from ce_lang.lang.stdlib import stdlib_registry

    checked = stdlib_registry().criteria[tag]
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {
        "__module__": __name__, "__qualname__": class_name,
        "__doc__": checked.defn.doc.split("\n\n")[0],
        "RESULT": checked.defn.result,
        "DEFAULT_PASS_THRESHOLD": _DEFAULT_PASS_THRESHOLD.get(tag, 0.9),
    }
    add_fields({p.name: p.doc for p in checked.defn.params}, checked.params, checked.defaults,
               annotations, namespace,
               {name: v for (owner, name), v in _SCHEMA_FIELDS.items() if owner == tag})
    namespace["__annotations__"] = annotations
    return register(Criterion, tag)(frozen(type(class_name, (CriterionBase, Criterion),
                                                namespace)))


for _tag, _name in GENERATED.items():
    globals()[_name] = _generate(_tag, _name)
FileExists: type
FileContains: type
FileCheck: type
JsonCheck: type
FileMatchesRegex: type
RunCommand: type
UipathEval: type
ReferenceComparison: type
CommandExecuted: type
CommandsEfficiency: type
SkillTriggered: type
ClassificationMatch: type
LlmJudge: type
AgentJudge: type
CliCalled: type
