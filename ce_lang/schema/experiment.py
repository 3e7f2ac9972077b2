"""Experiment files: defaults and variants layered over every task they run."""

from __future__ import annotations

from typing import ClassVar

import attrs

from ce_lang.schema.agent import AgentConfig
from ce_lang.schema.fields import Tagged, register, spec
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


class PromptMutation(Tagged):
    """coder_eval's prompt mutations: applied in order to the resolved prompt of every
    task a variant runs (the experiment defaults' first, then the variant's)."""

    MEMBERS: ClassVar[dict[str, type]] = {}
    KIND: ClassVar[str] = "prompt mutation type"

    def apply(self, prompt: str) -> str:
        raise NotImplementedError


@register(PromptMutation, "prefix")
@frozen
class PrefixMutation(PromptMutation):
    type: str = spec()
    content: str = spec(non_empty=True, doc="text put before the prompt")
    separator: str = spec("\n\n")

    def apply(self, prompt: str) -> str:
        return f"{self.content}{self.separator}{prompt}"


@register(PromptMutation, "suffix")
@frozen
class SuffixMutation(PromptMutation):
    type: str = spec()
    content: str = spec(non_empty=True, doc="text put after the prompt")
    separator: str = spec("\n\n")

    def apply(self, prompt: str) -> str:
        return f"{prompt}{self.separator}{self.content}"


@register(PromptMutation, "replace")
@frozen
class ReplaceMutation(PromptMutation):
    type: str = spec()
    pattern: str = spec(non_empty=True, doc="literal text, or a regex with `regex: true`")
    replacement: str = spec()
    regex: bool = spec(False, doc="re.sub semantics (backreferences like \\1)")

    def apply(self, prompt: str) -> str:
        if self.regex:
            import re

            return re.sub(self.pattern, self.replacement, prompt)
        return prompt.replace(self.pattern, self.replacement)


@register(PromptMutation, "template")
@frozen
class TemplateMutation(PromptMutation):
    type: str = spec()
    variables: dict[str, str] = spec(non_empty=True,
                                     doc="`{name}` -> value (plain replacement; an unknown "
                                         "`{name}` stays as written)")

    def apply(self, prompt: str) -> str:
        for name, value in self.variables.items():
            prompt = prompt.replace("{" + name + "}", value)
        return prompt


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
    prompt_mutations: list[PromptMutation] | None = spec(
        None, doc="applied to every task's prompt, before a variant's own")


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
    prompt_mutations: list[PromptMutation] | None = spec(
        None, doc="transform the task's prompt (prefix, suffix, replace, template), in order")
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
