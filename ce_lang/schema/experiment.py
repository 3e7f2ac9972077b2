"""Experiment files: defaults and variants layered over every task they run."""

from __future__ import annotations

import attrs

from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.fields import spec
from ce_lang.schema.task import (
    CheckerContext,
    PostRunCommand,
    PreRunCommand,
    RunLimits,
    SandboxConfig,
    Simulation,
    TemplateSource,
    driver_choices,
)

frozen = attrs.frozen(kw_only=True)
ID = r"[a-z0-9]+([-_.][a-z0-9]+)*"


@frozen
class ExperimentDefaults:
    repeats: int | None = spec(None, ge=1, doc="trials per task and variant")
    criteria_files: list[str] | None = spec(None, path="task", doc="user .ce files for every task")
    agent: AgentConfig | None = spec(None, partial=True)
    checker_context: CheckerContext | None = spec(None)
    simulation: Simulation | None = spec(None, partial=True)
    template_sources: list[TemplateSource] | None = spec(None)
    pre_run: list[PreRunCommand] | None = spec(None)
    post_run: list[PostRunCommand] | None = spec(None)
    run_limits: RunLimits | None = spec(None)
    driver: str | None = spec(None, choices=driver_choices)
    sandbox: SandboxConfig | None = spec(None, partial=True)


@frozen
class Variant:
    variant_id: str = spec(non_empty=True, pattern=ID, pattern_hint="lowercase, digits, - _ .")
    description: str = spec("")
    agent: AgentConfig | None = spec(None, partial=True)
    simulation: Simulation | None = spec(None, partial=True)
    repeats: int | None = spec(None, ge=1)
    checker_context: CheckerContext | None = spec(None)
    template_sources: list[TemplateSource] | None = spec(None)
    initial_prompt: str | None = spec(None)
    initial_prompt_file: str | None = spec(None, path="task")
    run_limits: RunLimits | None = spec(None)
    driver: str | None = spec(None, choices=driver_choices)


@frozen
class ExperimentSpec:
    experiment_id: str = spec(
        non_empty=True, pattern=ID, pattern_hint="kebab-case, e.g. `model-ab`"
    )
    description: str = spec("")
    defaults: ExperimentDefaults | None = spec(None)
    variants: list[Variant] = spec(non_empty=True)
