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
    type: str = spec(doc="`prefix`")
    content: str = spec(non_empty=True, doc="text put before the prompt")
    separator: str = spec("\n\n", doc="between the text and the prompt")

    def apply(self, prompt: str) -> str:
        return f"{self.content}{self.separator}{prompt}"


@register(PromptMutation, "suffix")
@frozen
class SuffixMutation(PromptMutation):
    type: str = spec(doc="`suffix`")
    content: str = spec(non_empty=True, doc="text put after the prompt")
    separator: str = spec("\n\n", doc="between the prompt and the text")

    def apply(self, prompt: str) -> str:
        return f"{prompt}{self.separator}{self.content}"


@register(PromptMutation, "replace")
@frozen
class ReplaceMutation(PromptMutation):
    type: str = spec(doc="`replace`")
    pattern: str = spec(non_empty=True, doc="literal text, or a regex with `regex: true`")
    replacement: str = spec(doc="what replaces each match")
    regex: bool = spec(False, doc="re.sub semantics (backreferences like \\1)")

    def apply(self, prompt: str) -> str:
        if self.regex:
            import re

            return re.sub(self.pattern, self.replacement, prompt)
        return prompt.replace(self.pattern, self.replacement)


@register(PromptMutation, "template")
@frozen
class TemplateMutation(PromptMutation):
    type: str = spec(doc="`template`")
    variables: dict[str, str] = spec(non_empty=True,
                                     doc="`{name}` -> value (plain replacement; an unknown "
                                         "`{name}` stays as written)")

    def apply(self, prompt: str) -> str:
        for name, value in self.variables.items():
            prompt = prompt.replace("{" + name + "}", value)
        return prompt


@frozen
class ExperimentDefaults:
    repeats: int | None = spec(None, ge=1, le=10_000, doc="trials per task and variant")
    criteria_files: list[str] | None = spec(None, path="task", doc="user .ce files for every task")
    agent: AgentConfig | None = spec(None, partial=True,
        doc="agent settings for every task (the task's own win per key)")
    checker_context: CheckerContext | None = spec(None,
        doc="as the task's (accepted, not used by ce)")
    simulation: Simulation | None = spec(None, partial=True,
        doc="simulation settings for every task")
    template_sources: list[TemplateSource] | None = spec(None,
        doc="applied before each task's own template sources")
    pre_run: list[PreRunCommand] | None = spec(None, doc="run before each task's own pre_run")
    post_run: list[PostRunCommand] | None = spec(None, doc="run after each task's own post_run")
    run_limits: RunLimits | None = spec(None,
        doc="limits for every task (the task's own win per key)")
    driver: str | None = spec(None, choices=driver_choices, doc="sandbox driver for every task")
    sandbox: SandboxConfig | None = spec(None, partial=True,
        doc="sandbox settings for every task (the task's own win per key)")
    prompt_mutations: list[PromptMutation] | None = spec(
        None, doc="applied to every task's prompt, before a variant's own")


@frozen
class Variant:
    # what a user reaches for on a variant that only the experiment's `defaults` has
    __ce_unknown_help__: ClassVar[dict[str, str]] = {
        "sandbox": "a variant sets `template_sources` and `driver` itself; other sandbox "
                   "settings go under the experiment's `defaults.sandbox`",
        "pre_run": "pre_run commands go under the experiment's `defaults.pre_run`",
        "post_run": "post_run commands go under the experiment's `defaults.post_run`",
        "success_criteria": "a variant cannot change the criteria: every variant is graded "
                            "alike (`ce rescore RUN TASKS -D ...` grades with new ones)",
    }

    variant_id: str = spec(non_empty=True, pattern=ID, pattern_hint="lowercase, digits, - _ .",
        doc="names the variant's trials: VARIANT/TASK/NN")
    description: str = spec("", doc="what this variant changes, shown in reports")
    agent: AgentConfig | None = spec(None, partial=True,
        doc="agent settings over the task's, per key")
    simulation: Simulation | None = spec(None, partial=True,
        doc="simulation settings over the task's")
    repeats: int | None = spec(None, ge=1, le=10_000,
                                doc="trials per task under this variant")
    checker_context: CheckerContext | None = spec(None,
        doc="as the task's (accepted, not used by ce)")
    template_sources: list[TemplateSource] | None = spec(None,
        doc="applied after the task's own template sources")
    initial_prompt: str | None = spec(None,
        doc="replaces the task's prompt (and its initial_prompt_file)")
    initial_prompt_file: str | None = spec(None, path="task",
        doc="replaces the task's prompt with this file's text")
    prompt_mutations: list[PromptMutation] | None = spec(
        None, doc="transform the task's prompt (prefix, suffix, replace, template), in order")
    run_limits: RunLimits | None = spec(None, doc="limits over the task's, per key")
    driver: str | None = spec(None, choices=driver_choices,
        doc="sandbox driver for this variant's trials")


@frozen
class ExperimentSpec:
    experiment_id: str = spec(
        non_empty=True, pattern=ID, pattern_hint="kebab-case, e.g. `model-ab`",
        doc="the experiment's id, recorded with every trial")
    description: str = spec("", doc="what the experiment compares")
    defaults: ExperimentDefaults | None = spec(None, doc="settings under every variant and task")
    variants: list[Variant] = spec(non_empty=True, doc="each variant runs every task")
