"""The success criteria of the task format, one frozen class per `type:`.

These classes describe what a task file may say about a criterion. What a criterion
*computes* (its predicate, effects and decidability) belongs to the criteria language;
the plan lowers each instance into a call of that definition with these fields as
arguments.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.cli import RECORD_CLI_LOG, FlagMatch
from ce_lang.schema.fields import Tagged, register, spec

frozen = attrs.frozen(kw_only=True, slots=False)  # judges mix two field groups

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


@register(Criterion, "file_exists")
@frozen
class FileExists(CriterionBase, Criterion):
    """1 if the path (or glob) matches at least one file or directory."""

    path: str = spec(path="workspace", doc="file, directory or glob")


@register(Criterion, "file_contains")
@frozen
class FileContains(CriterionBase, Criterion):
    RESULT = "fraction"
    path: str = spec(path="workspace")
    includes: list[str] = spec(factory=list, doc="strings that must be present")
    excludes: list[str] | None = spec(None, doc="strings that must not be present")


@frozen
class RegexPattern:
    pattern: str = spec(non_empty=True, doc="Python regular expression")
    must_match: bool = spec(True, doc="false: the pattern must NOT match")
    flags: int = spec(0, ge=0, doc="Python re flags (IGNORECASE=2, MULTILINE=8, DOTALL=16)")


@register(Criterion, "file_check")
@frozen
class FileCheck(CriterionBase, Criterion):
    RESULT = "fraction"
    path: str = spec(path="workspace")
    includes: list[str] = spec(factory=list)
    excludes: list[str] = spec(factory=list)
    patterns: list[RegexPattern] = spec(factory=list)


JsonOperator = Literal[
    "equals", "not_equals", "contains", "gt", "gte", "lt", "lte", "type", "regex", "exists"
]


@frozen
class JmesAssertion:
    expression: str = spec(non_empty=True, doc="JMESPath expression")
    operator: JsonOperator = spec("equals")
    expected: Any = spec(None, doc="required for every operator except exists")


@register(Criterion, "json_check")
@frozen
class JsonCheck(CriterionBase, Criterion):
    RESULT = "fraction"
    path: str = spec(path="workspace")
    json_schema: str | None = spec(None, doc="JSON Schema file (workspace, or $TASK_DIR/...)")
    assertions: list[JmesAssertion] = spec(factory=list)


@register(Criterion, "run_command")
@frozen
class RunCommand(CriterionBase, Criterion):
    command: str = spec(doc="shell command run in the workspace")
    timeout: int = spec(30, doc="seconds")
    expected_exit_code: int = spec(0)
    expected_stdout: str | None = spec(None)
    stdout_match: str = spec("exact")
    score_from_stdout: bool = spec(False, doc="score = first stdout line as a float in [0, 1]")
    read_only: bool = spec(False, doc="the command does not modify the workspace")


@register(Criterion, "file_matches_regex")
@frozen
class FileMatchesRegex(CriterionBase, Criterion):
    path: str = spec(path="workspace")
    pattern: str = spec()
    must_match: bool = spec(True)
    flags: int = spec(0)


@register(Criterion, "reference_comparison")
@frozen
class ReferenceComparison(CriterionBase, Criterion):
    RESULT = "continuous"
    READS_TRACE = True  # the guide and coder_eval reject it on agentless tasks
    agent_file: str = spec(path="workspace")
    reference_file: str | None = spec(
        None, doc="file inside reference.directory (needed when the reference is a directory)"
    )
    comparison_method: str = spec("ast")
    similarity_threshold: float = spec(0.8, doc="also the pass threshold")


@register(Criterion, "command_executed")
@frozen
class CommandExecuted(CriterionBase, Criterion):
    RESULT = "fraction"
    READS_TRACE = True
    tool_name: str | None = spec(None, doc="exact tool name; null = any tool")
    command_pattern: str | None = spec(None, doc="regex over the command / JSON parameters")
    exclude_pattern: str | None = spec(None, doc="regex that must not match")
    min_count: int = spec(1)
    max_count: int | None = spec(None)
    require_success: bool = spec(False)


@register(Criterion, "cli_called")
@frozen
class CliCalled(CriterionBase, Criterion):
    """Invocations recorded in a JSON Lines log (`sandbox.record_cli`) matching a pattern."""

    log: str = spec(RECORD_CLI_LOG, path="workspace",
                    doc="the invocation log (default: where record_cli writes)")
    verb: str | None = spec(None)
    verb_any_of: list[str] | None = spec(None)
    tool: str | None = spec(None)
    positional: list[str] | None = spec(None)
    flags: dict[str, FlagMatch | str] | None = spec(None)
    value_flags: list[str] = spec(factory=lambda: ["output"])
    ignore_flags: list[str] = spec(factory=lambda: ["output"])
    min_count: int = spec(1)
    max_count: int | None = spec(None)


@register(Criterion, "commands_efficiency")
@frozen
class CommandsEfficiency(CriterionBase, Criterion):
    RESULT = "continuous"
    READS_TRACE = True
    expected_commands: int | None = spec(
        None, doc="expected tool calls (defaults to the task's expected_commands)"
    )


@register(Criterion, "uipath_eval")
@frozen
class UipathEval(CriterionBase, Criterion):
    RESULT = "fraction"
    agent_name: str = spec()
    eval_set: str = spec()
    thresholds: dict[str, float] = spec(doc="metric -> minimum")


@register(Criterion, "classification_match")
@frozen
class ClassificationMatch(CriterionBase, Criterion):
    RESULT = "classification"
    path: str = spec(path="workspace")
    expected_label: str = spec()
    allowed_labels: list[str] = spec()
    case_sensitive: bool = spec(False)


@register(Criterion, "skill_triggered")
@frozen
class SkillTriggered(CriterionBase, Criterion):
    RESULT = "classification"
    READS_TRACE = True
    skill_name: str = spec()
    expected_skill: str = spec(doc="the row's true skill; empty string for negative rows")


@frozen
class JudgeCommon:
    enabled: bool = spec(True, doc="false excludes the judge from score and gate")
    prompt: str = spec(doc="grading instructions")
    files: list[str] = spec(factory=list, doc="workspace paths, or $TASK_DIR/... host paths")
    include_reference: bool = spec(False)
    include_agent_output: bool = spec(False)
    include_tool_calls: bool = spec(False)
    include_dialog: bool = spec(False)
    max_dialog_chars: int = spec(80_000)
    max_file_chars: int = spec(20_000)
    capture_transcript: bool = spec(True)
    max_transcript_chars: int = spec(100_000)


@register(Criterion, "llm_judge")
@frozen
class LlmJudge(CriterionBase, JudgeCommon, Criterion):
    RESULT = "continuous"
    DEFAULT_PASS_THRESHOLD = 0.7
    model: str = spec(JUDGE_DEFAULT_MODEL)
    temperature: float = spec(0.0)
    max_tokens: int = spec(1000)


@register(Criterion, "agent_judge")
@frozen
class AgentJudge(CriterionBase, JudgeCommon, Criterion):
    RESULT = "continuous"
    DEFAULT_PASS_THRESHOLD = 0.7
    max_turns: int = spec(50)
    turn_timeout: int = spec(300)
    agent: AgentConfig | None = spec(
        None, partial=True, doc="judge agent settings (hardened defaults for missing fields)"
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
