"""The options of one `ce run` (a frozen value: a resume makes another with
`run_resume.resumed`), and what run.json records of them under `args`."""

from __future__ import annotations

import os
from typing import Any

import attrs


@attrs.frozen
class RunArgs:
    paths: tuple[str, ...] = ()
    experiment: str | None = None
    overrides: tuple[str, ...] = ()
    agent_type: str | None = None
    model: str | None = None
    driver: str | None = None
    jobs: int | None = None
    executor: str | None = None
    ray_address: str | None = None
    repeats: int | None = None
    sample: int | None = None
    allow_paths: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    run_dir: str | None = None
    runs_root: str = "runs"
    resume_dir: str | None = None
    junit_xml: str | None = None
    sarif: str | None = None
    min_pass_rate: float | None = None
    scripted_model: bool | None = None  # None: not given (a resume takes the run's)
    judge_replies: str | None = None
    retry_errors: int | None = None  # None: not given (a resume takes the run's)
    quiet: bool = False
    no_cache: bool = False

    @classmethod
    def from_click(cls, params: dict[str, Any]) -> RunArgs:
        seqs = ("paths", "overrides", "allow_paths", "tags", "exclude_tags")
        return cls(**{k: tuple(v) if k in seqs else v for k, v in params.items()})

    def config(self) -> dict[str, Any]:
        """run.json's `args`: absolute paths (`--resume` may run from elsewhere)."""
        return {"paths": [os.path.abspath(p) for p in self.paths],
                "experiment": _abs(self.experiment),
                "overrides": list(self.overrides), "agent_type": self.agent_type,
                "model": self.model, "driver": self.driver, "repeats": self.repeats,
                "sample": self.sample, "tags": list(self.tags),
                "exclude_tags": list(self.exclude_tags),
                "allow_paths": [os.path.abspath(p) for p in self.allow_paths],
                "judge_replies": _abs(self.judge_replies),
                "scripted_model": bool(self.scripted_model), "executor": self.executor,
                "ray_address": self.ray_address, "jobs": self.jobs,
                "min_pass_rate": self.min_pass_rate, "junit_xml": _abs(self.junit_xml),
                "sarif": _abs(self.sarif), "retry_errors": self.retry_errors}


def _abs(path: str | None) -> str | None:
    return os.path.abspath(path) if path else None
