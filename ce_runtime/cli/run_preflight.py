"""`ce run`'s pre-flight: what the task files cannot say but this machine can, checked
after compiling and before any run directory or sandbox exists. Each check names what
is missing and the trials it stops; any problem ends the run with exit 2, nothing run.

- `agent_name`: `--agent` names an agent ce has (did-you-mean, as `ce compile --type`);
- `drivers`: every sandbox driver the trials need works here;
- `agents`: every agent the trials run has an adapter that loads;
- `costs`: a `max_usd` budget ce can enforce: an agent that reports no price (codex,
  openai) runs a model ce has a rate for (its card, `agent.pricing`); else CE0222 at the
  `max_usd`, rendered as `ce compile` renders (ce_lang.budget says where);
- `models`: every agent that calls a model has its credentials or scripted session;
- `judges`: criteria that ask a model (llm_judge, agent_judge ...) can reach one.
"""

from __future__ import annotations

import os

import click


def _fail(problems: list[str], hint: str) -> None:
    if problems:
        from ce_runtime.cli.run_refused import Refused

        for p in problems:
            click.echo(f"ce run: {p}", err=True)
        click.echo(f"ce run: nothing was run ({hint})", err=True)
        raise Refused([*problems, f"nothing was run ({hint})"])


def _shown(ids: list[str]) -> str:
    return (f"{len(ids)} trial(s): " + ", ".join(ids[:3])
            + (f" and {len(ids) - 3} more" if len(ids) > 3 else ""))


def known_agents() -> tuple[str, ...]:
    """ce's agents and those installed packages register (`ce.agents` entry points)."""
    from importlib.metadata import entry_points

    from ce_runtime.execute.agents import BUILTIN

    return tuple(BUILTIN) + tuple(sorted(ep.name for ep in entry_points(group="ce.agents")
                                         if ep.name not in BUILTIN))


def agent_name(name: str | None) -> None:
    """`--agent NAME` is an agent ce knows, else a usage error with a did-you-mean."""
    if name is None:
        return
    from ce_lang.api import did_you_mean

    known = known_agents()
    if name not in known:
        hint = did_you_mean(name, known) or "known: " + ", ".join(known)
        raise click.BadParameter(f"no agent named {name!r}; {hint}", param_hint="--agent")


def effective_agent(trial, override: str | None) -> str:
    """The agent a trial runs: --agent replaces the task's, except on type-none tasks."""
    agent = trial.plan.agent.type or "claude-code"
    return override if override and agent != "none" else agent


def drivers(trials) -> None:
    """Every sandbox driver the trials need must work here: said before any trial runs,
    not as one ERROR per trial."""
    from ce_runtime.execute.sandbox import unavailable

    needed: dict[str, list[str]] = {}
    for t in trials:
        needed.setdefault(t.plan.sandbox.driver, []).append(t.trial_id)
    problems = []
    for driver, ids in sorted(needed.items()):
        why = unavailable(driver, [t.plan.sandbox for t in trials
                                   if t.plan.sandbox.driver == driver])
        if why:
            problems.append(f"driver `{driver}` ({_shown(ids)}): {why}")
    _fail(problems, "choose another driver with --driver, or fix the above")


def agents(trials, override: str | None) -> None:
    """Every agent the trials run has an adapter that loads here."""
    from ce_runtime.execute.agents import UnknownAgent, load_agent

    needed: dict[str, list[str]] = {}
    for t in trials:
        needed.setdefault(effective_agent(t, override), []).append(t.trial_id)
    problems = []
    for name, ids in sorted(needed.items()):
        try:
            load_agent(name)
        except UnknownAgent as exc:
            problems.append(f"agent `{name}` ({_shown(ids)}): {exc}")
        except Exception as exc:  # a third-party adapter that fails to import
            problems.append(f"agent `{name}` ({_shown(ids)}): its adapter does not load "
                            f"({type(exc).__name__}: {exc})")
    _fail(problems, "choose another agent with --agent, or install its adapter")


def costs(trials, override: str | None, quiet: bool = False,
          sources: dict[str, str] | None = None, color: bool = False) -> None:
    """A trial whose agent reports no price, on a model without a rate, has an unknown
    cost: with `run_limits.max_usd` that budget could never stop it (a silent no-op), so
    the run stops here, with a CE0222 at the `max_usd` (rendered from the compile's
    `sources`); without one it runs, and its cost is said to be unknown (here, in its
    task.json and in the reports)."""
    from ce_lang.api import block_to_json, budget_places, render_human, unenforceable_budget
    from ce_runtime import pricing
    from ce_runtime.execute.agents import load_agent

    agents: dict[str, object] = {}
    budgeted: dict[tuple, list] = {}
    unknown: dict[str, list[str]] = {}
    for t in trials:
        name = effective_agent(t, override)
        if name not in agents:
            agents[name] = load_agent(name)  # `agents` checked that it loads
        why = pricing.unpriced(agents[name], block_to_json(t.plan.agent))
        if why is None:
            continue
        why = f"agent `{name}`: {why}"
        if t.plan.run_limits.max_usd:
            budgeted.setdefault((why, *budget_places(t)), []).append(t)
        else:
            unknown.setdefault(why, []).append(t.trial_id)
    if not quiet:
        for why, ids in unknown.items():
            click.echo(f"ce run: cost unknown ({_shown(ids)}): {why}", err=True)
    if budgeted:
        diags = [unenforceable_budget(
            group, f"`run_limits.max_usd` can never stop these trials "
                   f"({_shown([t.trial_id for t in group])}): {why}", override)
            for (why, *_), group in budgeted.items()]
        click.echo(render_human(diags, sources or {}, color=color), err=True, nl=False)
        why = (f"{len(diags)} max_usd budget(s) ce cannot enforce; nothing was run (give "
               "the model a rate, or remove max_usd)")
        click.echo(f"ce run: {why}", err=True)
        from ce_runtime.cli.run_refused import Refused

        raise Refused([why], diags)


def models(trials, override: str | None, scripted: bool) -> None:
    """Every agent that calls a model has its scripted session (--scripted-model) or its
    credentials: said before any trial, naming what is missing (never a key's value)."""
    from ce_runtime.execute import credentials
    from ce_runtime.execute.sandbox import tools

    problems: dict[str, list[str]] = {}
    for t in trials:
        agent = effective_agent(t, override)
        if agent not in credentials.MODEL_AGENTS:
            continue
        if scripted:
            path = credentials.script_path(t.plan.agent, t.source, agent)
            why = _session_problem(path, t.plan.row_id) if os.path.isfile(path) else \
                f"no scripted session {os.path.relpath(path)} (or set agent.model_script)"
        else:
            why = credentials.missing(agent, agent=t.plan.agent)
        if why is None and agent in tools.NPM_AGENTS:
            try:
                tools.install(agent, say=lambda msg: click.echo(msg, err=True))
            except tools.ToolError as exc:
                why = str(exc)
            else:  # a docker sandbox runs it in its image, with the image's node
                if t.plan.sandbox.driver != "docker":
                    why = tools.node_missing(agent)
        if why:
            problems.setdefault(why, []).append(t.trial_id)
    _fail([f"{why} ({_shown(ids)})" for why, ids in problems.items()], "fix the above")


def _session_problem(path: str, row: str | None) -> str | None:
    """What is wrong with a scripted model session (not UTF-8, not YAML, not a script,
    no step for the agent): said before the run, not as each trial's ERROR after its
    sandbox was set up (nor, for an empty one, as the real CLI answering nothing)."""
    from ce_runtime.model_server.script import Script, ScriptError, load_script_file

    shown = os.path.relpath(path)
    try:
        script = Script.from_data(load_script_file(shown), row=row, where=shown)
    except ScriptError as exc:
        return f"scripted session {exc}"
    if not script.steps:
        return f"scripted session {shown} has no step to answer the agent with" + (
            f" (row {row})" if row else "")
    return None


def outputs(paths: dict[str, str | None], run_dir: str | None = None) -> None:
    """The report files written outside the run directory (--junit-xml, --sarif) can be:
    said before the run, not found unwritable once every trial has run; none of them is
    in `run_dir` (this run's) or part of another run's archive."""
    problems = []
    for option, path in paths.items():
        why = path and output_problem(path, run_dir)
        if why:
            problems.append(f"{option} {path}: {why}")
    _fail(problems, "give a path ce can write")


def output_problem(path: str, run_dir: str | None = None) -> str | None:
    """Why a report file may not be written at `path` (see `outputs`), or None."""
    from ce_runtime.cli.archive_guard import clash

    return clash(path, run_dir) or _unwritable(path)


def _unwritable(path: str) -> str | None:
    """Why `path` cannot be written as a file (its directories made as needed), or None."""
    if os.path.isdir(path):
        return "a directory"
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):  # the nearest directory that exists is written in
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"{parent} is a file, where a directory must go"
    import tempfile

    try:  # a file made and removed where the report goes (as root, os.access says yes
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".ce-probe-")  # to a read-only
        os.close(fd)  # mount, and to /proc)
        os.unlink(probe)
    except OSError as exc:
        return f"cannot write in {parent} ({exc.strerror})"
    return None


def judges(trials, judge_replies: str | None) -> None:
    """Criteria that ask a model (llm_judge, agent_judge, user criteria calling one) need
    a judge endpoint: CE_JUDGE_URL, a key, or --judge-replies. Without one each such
    trial would end ERROR after its agent ran. A --judge-replies file must read as one."""
    if judge_replies:
        _fail(_replies_problems(judge_replies), "fix the --judge-replies file")
        _fail(_unscripted_judges(trials, judge_replies), "fix the --judge-replies file")
        return
    from ce_runtime.grade.judge import judge_from_env

    if judge_from_env() is not None:
        return
    ids: list[str] = []
    kinds: set[str] = set()
    for t in trials:
        judged = [c for c in t.plan.criteria if "model" in c.effects
                  and c.args.get("enabled", True) is not False]
        if judged:
            ids.append(t.trial_id)
            kinds.update(c.type for c in judged)
    if ids:
        _fail([f"{', '.join(sorted(kinds))} criteria need a judge model and none is "
               f"configured ({_shown(ids)}): set ANTHROPIC_API_KEY (or CE_JUDGE_API_KEY, "
               "CE_JUDGE_URL, OPENAI_API_KEY, API_BACKEND=bedrock), or grade with scripted "
               "verdicts: --judge-replies FILE"], "fix the above")


def _replies_problems(path: str) -> list[str]:
    """What is wrong with a --judge-replies file, said before the run directory exists."""
    from ce_runtime.model_server.script import ScriptError, load_script_file

    try:
        load_script_file(path)
    except ScriptError as exc:
        return [f"--judge-replies: {exc}"]
    return []


# the part of a --judge-replies file each judge criterion reads
_REPLIES_KEY = {"llm_judge": ("judge", "verdicts ({match?, score, rationale})"),
                "agent_judge": ("agent_judge", "the judge session's steps (its last reply "
                                "holds the verdict JSON)")}


def _unscripted_judges(trials, path: str) -> list[str]:
    """Judge criteria the --judge-replies file has nothing for: each would end ERROR
    after its agent ran ('no more steps', no verdict JSON)."""
    from ce_runtime.model_server.script import load_script_file

    data = load_script_file(path)
    missing: dict[str, list[str]] = {}
    for t in trials:
        for c in t.plan.criteria:
            key = _REPLIES_KEY.get(c.type)
            if key is None or data.get(key[0]) or c.args.get("enabled", True) is False:
                continue
            ids = missing.setdefault(c.type, [])
            if t.trial_id not in ids:
                ids.append(t.trial_id)
    return [f"--judge-replies: {path} has no `{_REPLIES_KEY[kind][0]}:` list, which "
            f"{kind} criteria read: {_REPLIES_KEY[kind][1]} ({_shown(ids)})"
            for kind, ids in missing.items()]
