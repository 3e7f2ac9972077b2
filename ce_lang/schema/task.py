"""The task file: every field of the task format, as frozen attrs classes.

The blocks a plan carries as they are (sandbox, run limits, reference, ...) live in
ce_lang.schema.blocks, without the criteria, and are re-exported here.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.blocks import (  # noqa: F401 - re-exported: the task format's names
    BUILTIN_DRIVERS,
    DEFAULT_IGNORE_PATTERNS,
    ApiRoute,
    CheckerContext,
    DockerBuild,
    DockerConfig,
    NodeEnv,
    PostRunCommand,
    PreRunCommand,
    PythonEnv,
    Reference,
    RepoSource,
    ResourceLimits,
    RunLimits,
    SandboxConfig,
    Simulation,
    StarterFile,
    StarterFilesSource,
    TemplateDirSource,
    TemplateSource,
    driver_choices,
    sandbox_drivers,
)
from ce_lang.schema.criteria import Criterion
from ce_lang.schema.fields import spec

frozen = attrs.frozen(kw_only=True)


@frozen
class Dataset:
    rows: list[dict[str, Any]] | None = spec(None, doc="inline rows")
    paths: list[str] | None = spec(None, path="task", doc="JSONL files relative to the task file")
    id_field: str = spec("id", non_empty=True, doc="the row key holding each row's id")
    sample_per_stratum: int | None = spec(None, ge=1,
        doc="keep at most this many rows per value of stratify_field")
    stratify_field: str = spec("expected_skill",
        doc="the row key that sample_per_stratum groups by")
    sample_seed: int | None = spec(None, doc="seed of the stratified sample (default 0)")


TAG_PATTERN = r"[a-z0-9]+(-[a-z0-9]+)*(:[a-z0-9]+(-[a-z0-9]+)*)?"


@frozen
class TaskSpec:
    __ce_removed__: ClassVar[dict[str, str]] = {
        "max_turns": "moved to `run_limits.max_turns`",
        "turn_timeout": "moved to `run_limits.turn_timeout`",
        "task_timeout": "moved to `run_limits.task_timeout`",
    }
    task_id: str = spec(
        non_empty=True, pattern=r"[A-Za-z0-9_][A-Za-z0-9_.\-]*",
        pattern_hint="ASCII letters, digits, `_`, `.` and `-`, not starting with `.` or `-`",
        doc="the task's id; its trials are VARIANT/TASK_ID/NN (TASK_ID/ROW_ID for dataset rows)",
    )
    description: str = spec(non_empty=True, doc="what the task is about, shown in reports")
    initial_prompt: str | None = spec(None,
        doc=("the agent's prompt (exactly one of it and initial_prompt_file, unless "
            "`agent.type: none` or an enabled simulation)"))
    initial_prompt_file: str | None = spec(None, path="task",
        doc="a file holding the prompt (stripped)")
    tags: list[str] = spec(factory=list, merge="replace",
        doc=("labels: lowercase kebab-case, optionally one `key:value`; `ce run --tags` / "
            "`--exclude-tags` select by them"))
    # a blank reason is refused, not read as false: `skip: ""` is an unfinished skip,
    # and running the task instead would be the silent opposite of what it says
    skip: bool | str = spec(False, non_empty=True,
        doc="true (or a reason) keeps the task out of runs; a blank reason is an error")
    agent: AgentConfig = spec(factory=AgentConfig, partial=True, doc="who does the work")
    sandbox: SandboxConfig = spec(factory=SandboxConfig,
        doc="where every process of the trial runs, and how the workspace starts")
    run_limits: RunLimits = spec(factory=RunLimits,
        doc="turn, time, token and cost limits of the agent; early stop")
    criteria_files: list[str] = spec(
        factory=list, path="task", merge="append", doc="the user's own .ce definition files"
    )
    success_criteria: list[Criterion] = spec(non_empty=True, merge="replace",
        doc=("the weighted criteria; a trial succeeds when every gating criterion reaches "
            "its pass_threshold"))
    checker_context: CheckerContext | None = spec(None,
        doc="coder_eval's routing of checker model calls; accepted, not used by ce")
    reference: Reference | None = spec(None,
        doc=("the author's solution: applied by `--agent oracle`, read by judges and "
            "reference_comparison"))
    expected_commands: int | None = spec(None, ge=1,
        doc="the default `expected_commands` of the task's commands_efficiency criteria")
    pre_run: list[PreRunCommand] = spec(factory=list, merge="append",
        doc="commands run after set-up, before the agent")
    post_run: list[PostRunCommand] = spec(factory=list, merge="append_reverse",
        doc="commands run after grading (clean-up, exports); never affect the verdict")
    simulation: Simulation | None = spec(None,
        doc="a simulated user holding a dialog with the agent")
    dataset: Dataset | None = spec(None,
        doc=("rows: one trial per row, `${row.KEY}` substituted in the prompt, criteria and "
            "reference"))
    suite_thresholds: dict[str, float] | None = spec(
        None, doc="suite gate for the task's classification criterion"
    )
