"""The blocks of a task a plan carries as they are: the sandbox (and how its workspace
starts), run limits, reference, pre- and post-run commands, simulation, checker context.

A module of their own, re-exported by ce_lang.schema.task: a plan holds these and no
criterion class (its criteria are calls), so loading one (`ce run`'s compile-cache hit
unpickles the trials) does not generate the criterion classes of ce_lang.schema.criteria.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from ce_lang.schema.cli import RecordedCli
from ce_lang.schema.fields import Tagged, register, spec

frozen = attrs.frozen(kw_only=True)

DEFAULT_IGNORE_PATTERNS = (
    ".venv", "venv", "ENV", "env", "virtualenv", ".git", ".svn", ".hg", "__pycache__",
    "*.pyc", "*.pyo", "*.pyd", ".pytest_cache", ".ruff_cache", "*.egg-info", ".eggs",
    "dist", "build", ".vscode", ".idea", "*.swp", "*.swo", "*~", ".DS_Store", "Thumbs.db",
    "node_modules", ".npm", "bower_components", ".coverage", "htmlcov", ".tox", ".nox",
    "*.so", "*.dylib", "*.dll",
)


# -- sandbox ---------------------------------------------------------------------------
class TemplateSource(Tagged):
    MEMBERS: ClassVar[dict[str, type]] = {}
    KIND: ClassVar[str] = "template source type"


@register(TemplateSource, "repo")
@frozen
class RepoSource(TemplateSource):
    type: str = spec(doc="`repo`: clone a git repository (must be the first source)")
    url: str = spec(non_empty=True, doc="git URL (or local path), cloned into `repo/` in the "
                                        "workspace (as coder_eval does): criteria paths "
                                        "start with `repo/`")
    commit: str | None = spec(None, doc="commit to check out")


@register(TemplateSource, "template_dir")
@frozen
class TemplateDirSource(TemplateSource):
    type: str = spec(doc="`template_dir`: copy a directory of the task's")
    path: str = spec(path="task_dir", non_empty=True, doc="directory relative to the task file")
    mount_point: str = spec(".", path="workspace", doc="where inside the workspace to copy it")
    include_patterns: list[str] = spec(
        factory=list, doc="copy these even when an ignore pattern would drop them")


@frozen
class StarterFile:
    path: str = spec(path="workspace", non_empty=True, doc="where the file goes in the workspace")
    content: str = spec("", doc="the file's text")


@register(TemplateSource, "starter_files")
@frozen
class StarterFilesSource(TemplateSource):
    type: str = spec(doc="`starter_files`: write files given inline")
    files: list[StarterFile] = spec(non_empty=True, doc="the files to write")


@frozen
class PythonEnv:
    env_packages: list[str] = spec(factory=list, merge="replace",
        doc="packages (pip requirement strings) installed with uv into the workspace's .venv")


@frozen
class NodeEnv:
    env_packages: list[str] = spec(factory=list, merge="replace",
        doc="npm packages installed into the workspace's node_modules")


@frozen
class ResourceLimits:
    timeout: int = spec(300, gt=0, doc="seconds: the longest one command ce runs in the "
                        "sandbox for the task may take (pre_run, post_run, a criterion's "
                        "command, the script agent's); a shorter timeout of its own wins. "
                        "An agent CLI's own tool calls are bounded by `run_limits`")
    max_memory_mb: int | None = spec(
        None, gt=0, doc="memory of the whole sandbox (cgroup; docker --memory)")
    max_disk_mb: int | None = spec(None, gt=0, doc="not enforced by any driver yet (a warning)")
    max_cpus: float | None = spec(None, gt=0, doc="CPU share (cgroup cpu quota; docker --cpus)")
    max_pids: int | None = spec(
        None, gt=0, doc="processes of the whole sandbox (cgroup pids; docker --pids-limit)")


@frozen
class DockerBuild:
    args: dict[str, str] = spec(factory=dict, doc="--build-arg KEY=VALUE ($VAR expanded)")
    secrets: list[str] = spec(factory=list, merge="replace", doc="--secret specs (BuildKit)")
    extra_args: list[str] = spec(factory=list, merge="replace", doc="more docker build flags")
    buildkit: bool | None = spec(None, doc="force DOCKER_BUILDKIT on or off")


@frozen
class DockerConfig:
    image: str | None = spec(None, doc="image to run (default: python:3.12-slim)")
    dockerfile_path: str | None = spec(
        None, path="task", doc="a Dockerfile to build the image from (its directory is the "
                               "build context); wins over `image`")
    build: DockerBuild = spec(factory=DockerBuild, doc="how `dockerfile_path` is built")
    network: Literal["bridge", "none"] | None = spec(
        None, doc="coder_eval's switch: bridge = `sandbox.network: full`, none = none")
    working_dir: str | None = spec(
        None, doc="absolute path where the workspace is mounted (default: /workspace)")
    env_passthrough: list[str] | None = spec(
        None, merge="replace", doc="host variables passed to the container (replaces the "
                                   "default: none)")
    env_passthrough_extra: list[str] = spec(factory=list, merge="append",
                                            doc="more host variables to pass")
    extra_mounts: list[str] = spec(factory=list, merge="replace",
                                   doc="`-v src:dst[:ro]` mounts (src must exist)")


BUILTIN_DRIVERS = ("tempdir", "bwrap", "docker")


def sandbox_drivers() -> tuple[str, ...]:
    """Built-in drivers, then those installed packages register (`ce.sandboxes`)."""
    from ce_lang import hostfs

    return BUILTIN_DRIVERS + tuple(sorted(name for name in hostfs.entry_points("ce.sandboxes")
                                          if name not in BUILTIN_DRIVERS))


def driver_choices(value: str) -> tuple[str, ...]:
    """The drivers `value` may be: a built-in name needs no look at entry points."""
    return BUILTIN_DRIVERS if value in BUILTIN_DRIVERS else sandbox_drivers()


@frozen
class SandboxConfig:
    driver: str = spec("tempdir", non_empty=True, choices=driver_choices,
                       doc="tempdir, bwrap, docker, or a driver of the ce.sandboxes entry points")
    python: PythonEnv | None = spec(factory=PythonEnv, doc="null skips the venv")
    node: NodeEnv | None = spec(None, doc="node packages for the workspace (null: none)")
    limits: ResourceLimits = spec(factory=ResourceLimits,
        doc="resource limits of the whole sandbox")
    template_sources: list[TemplateSource] = spec(factory=list, merge="append",
        doc="how the workspace starts: applied in order, the last writer wins")
    ignore_patterns: list[str] = spec(factory=list, merge="replace",
        doc=("added to the default ignore patterns (.git, .venv, node_modules, ...) of "
            "template copies and snapshots; `!pattern` removes a default"))
    network: Literal["none", "model", "full"] | None = spec(
        None, doc="ce: what the agent may reach: none, its model endpoint only, or the "
                  "host's network (default: model for an agent that calls a model, else "
                  "none; tempdir cannot restrict it)")
    env: dict[str, str] = spec(factory=dict, doc="ce: variables set for every command")
    env_passthrough: list[str] = spec(
        factory=list, merge="append",
        doc="ce: host variables passed to commands (names that look like secrets never are)")
    protected: list[str] = spec(
        factory=list, merge="append",
        doc="ce: workspace paths (globs) the grader trusts: hashed after set-up, a change by "
            "the agent makes the trial ERROR (integrity)")
    docker: DockerConfig | None = spec(None, doc="settings of `driver: docker`")
    mock_path_dirs: list[str] = spec(
        factory=list, merge="replace", path="workspace",
        doc="workspace directories of mock executables, first on the agent's PATH (their "
            "files made executable after the template sources)")
    record_cli: list[RecordedCli] = spec(
        factory=list, merge="replace",
        doc="executables shadowed by generated recording shims in cli_mocks/ (first on the "
            "agent's PATH): each call is appended to cli_mocks/calls.jsonl and answered with "
            "canned output (cli_called reads the log)")


# -- run limits --------------------------------------------------------------------------
@frozen
class RunLimits:
    max_turns: int | None = spec(None, gt=0, doc="model calls per agent invocation")
    expected_turns: int | None = spec(None, ge=1, doc="soft budget, reported only")
    turn_timeout: int | None = spec(None, gt=0, doc="seconds per agent turn")
    task_timeout: int | None = spec(None, gt=0, doc="seconds for the whole trial")
    stop_early: bool | None = spec(None, doc="master switch for stop_when arming")
    stop_early_gate_threshold: float = spec(1.0, ge=0, le=1,
        doc=("an early-stopped trial passes when the weight share of its armed criteria that "
            "passed reaches this (1.0: all of them)"))
    max_input_tokens: int | None = spec(None, ge=1,
        doc="the agent's input tokens; past it the trial ends TOKEN_BUDGET_EXCEEDED")
    max_output_tokens: int | None = spec(None, ge=1,
        doc="the agent's output tokens; past it the trial ends TOKEN_BUDGET_EXCEEDED")
    max_total_tokens: int | None = spec(None, ge=1,
        doc="input + output tokens; past it the trial ends TOKEN_BUDGET_EXCEEDED")
    max_usd: float | None = spec(None, gt=0,
        doc=("the agent's cost in USD; past it the trial ends COST_BUDGET_EXCEEDED (codex, "
             "openai: priced by ce, and `ce run` refuses a model it has no rate for)"))
    count_cached_input: bool = spec(False,
        doc=("count cache-read input tokens toward max_input_tokens and max_total_tokens "
            "(default: only new input counts)"))
    count_cache_creation: bool = spec(False,
        doc="count cache-creation (cache write) tokens toward the same budgets")


# -- other blocks -----------------------------------------------------------------------
@frozen
class Reference:
    file: str | None = spec(None, path="task", doc="reference solution file")
    code: str | None = spec(None, doc="inline reference solution")
    directory: str | None = spec(None, path="task_dir", doc="reference solution directory")
    solve: list[dict[str, Any]] | str | None = spec(
        None, doc="how the oracle agent solves the task: a shell command, or script actions")


@frozen
class PreRunCommand:
    command: str = spec(non_empty=True,
        doc="shell command run in the workspace after set-up, before the agent")
    timeout: int = spec(30, ge=1, le=300, doc="seconds")
    fail_on_error: bool = spec(True, doc="a failure makes the trial ERROR (false: recorded only)")


@frozen
class PostRunCommand:
    command: str = spec(non_empty=True,
        doc="shell command run after grading; it never affects the verdict")
    timeout: int = spec(30, ge=1, le=300, doc="seconds")


@frozen
class Simulation:
    enabled: bool = spec(False,
        doc="run the task as a dialog with a simulated user (claude-code and openai agents)")
    model: str = spec("anthropic.claude-sonnet-4-6", doc="the model that plays the user")
    persona: str = spec(non_empty=True, doc="who the simulated user is")
    goal: str = spec(non_empty=True, doc="what the simulated user wants from the agent")
    constraints: list[str] = spec(factory=list, merge="replace",
        doc="rules the simulated user keeps to")
    max_turns: int = spec(8, ge=1, le=100, doc="exchanges at most")
    stop_token: str = spec("<<<END>>>", non_empty=True,
        doc="the simulated user ends the dialog by saying this")
    stop_on_criteria_pass: bool = spec(False,
        doc=("end the dialog after the turn at which every criterion passes (needs "
            "check_criteria every_turn or both)"))
    max_total_tokens: int | None = spec(None, gt=0, doc="token budget of the dialog")
    n_trials: int = spec(1, ge=1, le=100, doc="trials per task and repeat (multiplies repeats)")
    parallel_trials: bool = spec(True,
        doc="coder_eval: run the dialog trials in parallel; accepted, not used by ce (-j decides)")
    check_criteria: Literal["end_of_dialog", "every_turn", "both"] = spec("end_of_dialog",
        doc="when criteria are checked: at the end of the dialog, after every turn, or both")


@frozen
class ApiRoute:
    route: str | None = spec(None, doc="coder_eval's model routing; accepted, not used by ce")
    model: str | None = spec(None, doc="coder_eval's model routing; accepted, not used by ce")
    params: dict[str, Any] | None = spec(None,
        doc="coder_eval's model routing; accepted, not used by ce")
    env_params: dict[str, str] | None = spec(None,
        doc="coder_eval's model routing; accepted, not used by ce")


@frozen
class CheckerContext:
    api_route: ApiRoute | None = spec(None,
        doc="coder_eval's routing of checker model calls; accepted, not used by ce")
