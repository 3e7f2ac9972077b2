"""What every task rule reads (`RuleContext`: the resolved task, where its fields are
written, the diagnostics to emit into) and the one thing a rule may hand back
(`RowProblem`: a dataset row's problem, reported once by the compiler, naming rows).
Apart from the rules so that each family of them can live in a module of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ce_lang.diagnostics import Diagnostics
from ce_lang.paths import SuiteRoots
from ce_lang.schema.task import TaskSpec
from ce_lang.spans import Path, Span, format_path

SpanOf = Callable[[Path], Span]


@attrs.frozen
class RowProblem:
    """A problem that depends on the dataset row; the compiler reports it once, naming rows."""

    code: str
    message: str
    span: Span
    help: str | None
    row_id: str | None


@attrs.frozen
class RuleContext:
    task: TaskSpec
    at: SpanOf
    key_at: SpanOf
    diags: Diagnostics
    agent_types: tuple[str, ...]
    has_dataset: bool
    row_id: str | None = None
    row_problems: list[RowProblem] = attrs.field(factory=list)
    source_path: Callable[[Path], Path] = lambda p: p
    instances: list = attrs.field(factory=list)  # checked instances, one per criterion
    written: Callable[[Path], bool] = lambda p: True  # the key appears in its file
    # CompileOptions.host_limits (a function: called only when a task sets a limit)
    host_limits: Any = None
    roots: SuiteRoots | None = None  # where host paths may resolve (None: unchecked)
    run_agent: str | None = None  # `ce run --agent X`: runs every task but type-none ones
    # the fields of the task file the schema found missing or invalid and dropped
    # (`validate.broken_fields`): a default or a placeholder stands in for each, so no
    # rule reads them (`READS`, `intact`): their errors are reported, and a rule error
    # caused only by them would be noise. A dropped `success_criteria` entry leaves the
    # others intact (their own rules run) but not the list (a rule counting over it)
    broken: frozenset[Path] = frozenset()
    layer_of: Callable[[Path], str | None] = lambda p: None  # "variant x", "task", ...

    def intact(self, *fields: str | Path) -> bool:
        """No part of these fields (a top-level name, or a path) was dropped."""
        if not self.broken:
            return True
        paths = [(f,) if isinstance(f, str) else f for f in fields]
        return not any(b[:len(p)] == p or p[:len(b)] == b
                       for b in self.broken for p in paths)

    def instance(self, i: int):
        return self.instances[i] if i < len(self.instances) else None

    def name(self, path: Path) -> str:
        """A path as the user wrote it (`success_criteria[3].path`)."""
        return format_path(self.source_path(path))


def agent_type(task: TaskSpec) -> str:
    return task.agent.type or "claude-code"
