"""Pre-flight (issue 15): everything knowable before a trial starts is said by `ce compile`
and by `ce run` before any sandbox is set up, with nothing run and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CE = [sys.executable, "-m", "ce_runtime.cli"]


def ce(*args, cwd=None, env=None, drop=()):
    full = {**os.environ, "CE_PLAIN": "1", **(env or {})}
    for name in drop:
        full.pop(name, None)
    return subprocess.run([*CE, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=full, timeout=600)


def test_script_actions_mirror_the_script_player():
    from ce_agents.script import ACTIONS
    from ce_lang.rules_preflight import SCRIPT_ACTIONS

    assert SCRIPT_ACTIONS == ACTIONS


NO_KEYS = ("ANTHROPIC_API_KEY", "CE_JUDGE_URL", "CE_JUDGE_API_KEY", "OPENAI_API_KEY",
           "CODEX_API_KEY", "API_BACKEND", "AWS_BEARER_TOKEN_BEDROCK")


def task(tmp_path, body: str, name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text("task_id: t\ndescription: a pre-flight case\n" + body, encoding="utf-8")
    return path


SOLVABLE = """initial_prompt: Write hello.txt.
reference:
  solve:
    - {write: hello.txt, content: hi}
success_criteria:
  - {type: file_exists, path: hello.txt, description: exists}
"""


def nothing_ran(res, tmp_path) -> None:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "runs").exists()  # stopped before a run directory existed


def test_agent_name_typo_has_did_you_mean(tmp_path):
    t = task(tmp_path, SOLVABLE)
    res = ce("run", t, "--agent", "claude_code", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "no agent named 'claude_code'; did you mean `claude-code`?" in res.stderr


def test_solve_action_typo_is_a_compile_error_of_ce_run(tmp_path):
    t = task(tmp_path, SOLVABLE.replace("{write:", "{writ:"))
    res = ce("run", t, "--agent", "oracle", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "error[CE0219]" in res.stderr and "did you mean `write`?" in res.stderr


def test_oracle_with_nothing_to_apply(tmp_path):
    t = task(tmp_path, "initial_prompt: Write hello.txt.\nsuccess_criteria:\n"
             "  - {type: file_exists, path: hello.txt, description: exists}\n")
    res = ce("run", t, "--agent", "oracle", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "error[CE0220]" in res.stderr and "`--agent oracle`" in res.stderr
    # ce compile says the same for `--type oracle`, naming the option, not a task key
    # the task does not set (it said "(`agent.type: oracle`)")
    for args, via in ((("--type", "oracle"), "`--agent oracle`"),
                      (("--agent", "oracle"), "`--agent oracle`"),
                      (("-D", "agent.type=oracle"), "`-D agent.type=oracle`")):
        comp = ce("compile", t, *args, cwd=tmp_path)
        assert comp.returncode == 1 and "CE0220" in comp.stderr
        assert f"the oracle ({via}) has nothing to apply" in comp.stderr, comp.stderr
    # the diagnostic points at the option's value, shown like a -D's (it said `<--type>:1:1`
    # with no source line, whichever of --agent and --type was given)
    comp = ce("compile", t, "--type", "orcale", cwd=tmp_path)
    assert "<--agent>:1:9: error[CE0105]: unknown agent type `orcale`\n  |\n" \
        "1 | --agent orcale\n  |         ^^^^^^\n  = help: did you mean `oracle`?" \
        in comp.stderr, comp.stderr
    set_in_file = task(tmp_path, "agent: {type: oracle}\n" + t.read_text().split("\n", 2)[2],
                       name="oracle.yaml")
    comp = ce("compile", set_in_file, cwd=tmp_path)
    assert "the oracle (`agent.type: oracle`) has nothing to apply" in comp.stderr


def test_the_script_agent_with_nothing_to_play(tmp_path):
    """`ce run --agent script` over a task without `agent.script` is refused before any
    sandbox is set up (each trial was an ERROR after it)."""
    t = task(tmp_path, "initial_prompt: Write hello.txt.\nsuccess_criteria:\n"
             "  - {type: file_exists, path: hello.txt, description: exists}\n")
    res = ce("run", t, "--agent", "script", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "error[CE0226]" in res.stderr and "`--agent script`" in res.stderr
    played = task(tmp_path, "initial_prompt: Write hello.txt.\nagent:\n  script:\n"
                  "    - {write: hello.txt, content: hi}\nsuccess_criteria:\n"
                  "  - {type: file_exists, path: hello.txt, description: exists}\n")
    assert ce("compile", played, "--type", "script", cwd=tmp_path).returncode == 0


def test_report_files_outside_the_run_that_cannot_be_written_are_said_first(tmp_path):
    """--junit-xml and --sarif are written after every trial ran: one ce cannot write
    (under a file, in /proc) is refused before the run (exit 2), not found at its end;
    one whose directories do not exist yet is fine (they are made)."""
    t = task(tmp_path, SOLVABLE)
    (tmp_path / "afile").write_text("x")
    for option, path, says in (("--junit-xml", "afile/j.xml", "is a file, where a directory"),
                               ("--sarif", "/proc/s.sarif", "cannot write in /proc")):
        res = ce("run", t, "--agent", "oracle", option, path, cwd=tmp_path)
        nothing_ran(res, tmp_path)
        assert f"{option} {path}: " in res.stderr and says in res.stderr, res.stderr
    res = ce("run", t, "--agent", "oracle", "--junit-xml", "new/dir/j.xml", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "new" / "dir" / "j.xml").is_file(), res.stderr
    assert not list((tmp_path / "new" / "dir").glob(".ce-probe-*"))


def test_agent_none_enforces_the_type_none_contract(tmp_path):
    t = task(tmp_path, SOLVABLE)
    res = ce("run", t, "--agent", "none", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "error[CE0202]" in res.stderr and "initial_prompt" in res.stderr
    same = ce("compile", t, "-D", "agent.type=none", cwd=tmp_path)
    assert "error[CE0202]" in same.stderr


def test_unavailable_driver(tmp_path):
    t = task(tmp_path, SOLVABLE)
    res = ce("run", t, "--agent", "oracle", "--driver", "docker", cwd=tmp_path,
             env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    nothing_ran(res, tmp_path)
    assert "driver `docker` (1 trial(s): default/t/00)" in res.stderr


def test_missing_agent_credentials(tmp_path):
    t = task(tmp_path, SOLVABLE)
    res = ce("run", t, "--agent", "claude-code", cwd=tmp_path, drop=NO_KEYS)
    nothing_ran(res, tmp_path)
    assert "ANTHROPIC_API_KEY is not set" in res.stderr


def test_missing_judge_credentials(tmp_path):
    t = task(tmp_path, SOLVABLE + "  - {type: llm_judge, prompt: Is it nice?, "
             "files: [hello.txt], description: nice}\n")
    res = ce("run", t, "--agent", "oracle", cwd=tmp_path, drop=NO_KEYS)
    nothing_ran(res, tmp_path)
    assert "llm_judge criteria need a judge model" in res.stderr
    assert "--judge-replies" in res.stderr


def test_a_broken_judge_replies_file_is_said_before_the_run(tmp_path):
    """Not 'internal error ... a bug in ce' (exit 3) with a run directory left 'running'."""
    t = task(tmp_path, SOLVABLE + "  - {type: llm_judge, prompt: Is it nice?, "
             "files: [hello.txt], description: nice}\n")
    (tmp_path / "list.yaml").write_text("- not a mapping\n", encoding="utf-8")
    res = ce("run", t, "--agent", "oracle", "--judge-replies", "list.yaml", cwd=tmp_path,
             drop=NO_KEYS)
    nothing_ran(res, tmp_path)
    assert "ce run: --judge-replies: list.yaml must be a mapping" in res.stderr
    (tmp_path / "cut.yaml").write_text("judge: [\n", encoding="utf-8")
    res = ce("run", t, "--agent", "oracle", "--judge-replies", "cut.yaml", cwd=tmp_path,
             drop=NO_KEYS)
    nothing_ran(res, tmp_path)
    assert "ce run: --judge-replies: cut.yaml:2:1: not valid YAML" in res.stderr
    assert "internal error" not in res.stderr
    res = ce("rescore", tmp_path, "--judge-replies", "cut.yaml", cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--judge-replies: cut.yaml:2:1: not valid YAML" in res.stderr
    assert "internal error" not in res.stderr


def test_judge_replies_without_what_a_judge_criterion_reads(tmp_path):
    """An agent_judge needs the file's `agent_judge:` session and an llm_judge its
    `judge:` verdicts: without them each trial ran its agent, then ended ERROR with 'the
    judge's verdict holds no JSON object' (the scripted session had no steps)."""
    t = task(tmp_path, SOLVABLE + "  - {type: agent_judge, prompt: Is it nice?, "
             "description: judged by an agent}\n")
    (tmp_path / "verdicts.yaml").write_text("judge:\n  - {score: 1.0, rationale: ok}\n",
                                            encoding="utf-8")
    res = ce("run", t, "--agent", "oracle", "--judge-replies", "verdicts.yaml",
             cwd=tmp_path, drop=NO_KEYS)
    nothing_ran(res, tmp_path)
    assert ("ce run: --judge-replies: verdicts.yaml has no `agent_judge:` list, which "
            "agent_judge criteria read") in res.stderr
    assert "(1 trial(s): default/t/00)" in res.stderr
    llm = task(tmp_path, SOLVABLE + "  - {type: llm_judge, prompt: Is it nice?, "
               "description: judged}\n", name="llm.yaml")
    (tmp_path / "session.yaml").write_text(
        "agent_judge:\n  - text: '{\"score\": 1.0}'\n", encoding="utf-8")
    res = ce("run", llm, "--agent", "oracle", "--judge-replies", "session.yaml",
             cwd=tmp_path, drop=NO_KEYS)
    nothing_ran(res, tmp_path)
    assert "session.yaml has no `judge:` list, which llm_judge criteria read" in res.stderr


def test_agent_without_adapter(tmp_path, monkeypatch):
    """A type the compiler accepts (an installed `ce.agents` entry point) whose adapter
    does not load is said before any set-up."""
    from click.testing import CliRunner

    from ce_runtime.cli import main
    from ce_runtime.execute import agents

    monkeypatch.setattr(agents, "PLANNED", ("oracle",))
    monkeypatch.setattr(agents, "BUILTIN", {k: v for k, v in agents.BUILTIN.items()
                                            if k != "oracle"} | {"oracle": "nowhere:Agent"})
    monkeypatch.chdir(tmp_path)
    t = task(tmp_path, SOLVABLE)
    res = CliRunner().invoke(main, ["run", str(t), "--agent", "oracle"])
    assert res.exit_code == 2, res.output
    assert "agent `oracle` (1 trial(s): default/t/00): its adapter does not load" \
        in res.output
    assert not (tmp_path / "runs").exists()


def test_ce_run_shows_compile_warnings(tmp_path):
    t = task(tmp_path, "sandbox: {driver: tempdir, network: none}\n" + SOLVABLE)
    comp = ce("compile", t, cwd=tmp_path)
    assert comp.returncode == 0 and "warning[CE0215]" in comp.stderr
    res = ce("run", t, "--agent", "oracle", cwd=tmp_path)
    assert res.returncode == 0 and "warning[CE0215]" in res.stderr
    quiet = ce("run", t, "--agent", "oracle", "-q", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert "1/1 trial(s): 1 SUCCESS" in quiet.stdout


def test_blank_skip_reason_is_refused_not_run(tmp_path):
    """`skip: ""` read as false and ran the task: a blank reason is an unfinished skip,
    refused at its span (the contract: true, or a reason, keeps the task out)."""
    t = task(tmp_path, 'skip: ""\n' + SOLVABLE)
    res = ce("run", t, "--agent", "oracle", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "t.yaml:3:7: error[CE0110]: `skip` must not be empty" in res.stderr


def test_skipped_tasks_are_named_with_their_reasons(tmp_path):
    """`skip:` kept a task out of the run without a word: only 'no trial to run' when
    every task was skipped, and nothing at all when some others ran."""
    skipped = task(tmp_path, "skip: flaky upstream\n" + SOLVABLE, name="s.yaml")
    res = ce("run", skipped, "--agent", "oracle", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "ce run: not run (skip:): task 't' (flaky upstream)" in res.stderr
    other = tmp_path / "o.yaml"
    other.write_text("task_id: o\ndescription: runs\n" + SOLVABLE, encoding="utf-8")
    res = ce("run", skipped, other, "--agent", "oracle", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "ce run: not run (skip:): task 't' (flaky upstream)" in res.stderr


def test_no_trial_to_run_says_why(tmp_path):
    """A directory with no task file, and --tags that select none, both said 'no trial
    to run (check --tags / skip:)': a CI job pointed at the wrong directory was told to
    check tags it never gave."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "notes.yaml").write_text("foo: bar\n", encoding="utf-8")
    res = ce("run", "suite", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "error[CE0006]: no task file under 'suite': its 1 YAML file(s) have no task_id " \
        "or success_criteria" in res.stderr  # the compiler's, as `ce compile suite` says
    assert "--tags" not in res.stderr
    t = task(tmp_path, "tags: [smoke]\n" + SOLVABLE)
    res = ce("run", t, "--tags", "nightly", "--exclude-tags", "slow", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert "ce run: no trial to run: --tags nightly --exclude-tags slow select none of " \
        "the 1 task(s)" in res.stderr


def test_a_run_json_that_is_not_a_run_says_so_on_resume(tmp_path):
    """A run.json holding `[]` or an object without `args`: one line saying what is
    wrong (it showed Python's "list indices must be integers or slices, not str")."""
    for content, says in (("[]", "not the JSON object `ce run` writes"),
                          ('{"run_id": "x"}', "not the JSON object `ce run` writes"),
                          ('{"args": {}}', "records no task paths")):
        run = tmp_path / f"r{len(content)}"
        run.mkdir()
        (run / "run.json").write_text(content)
        res = ce("run", "--resume", str(run), cwd=tmp_path)
        assert res.returncode == 2 and says in res.stderr, res.stderr
        assert "list indices" not in res.stderr and "Traceback" not in res.stderr


def test_agents_install_of_an_unknown_name_is_a_usage_error():
    from click.testing import CliRunner

    from ce_runtime.cli import main

    res = CliRunner().invoke(main, ["agents", "install", "codx"])
    assert res.exit_code == 2, res.output
    assert "codx: not an npm agent ce installs" in res.output
    assert "did you mean `codex`?" in res.output


def test_agents_list_says_where_each_cli_is_installed_claude_code_included(tmp_path):
    """docs/agents.md: `ce agents list` shows each agent and whether its CLI is installed;
    the claude-code line said only "bundled in claude-agent-sdk", never where or whether."""
    from ce_agents.claude_code import bundled_cli

    res = ce("agents", "list", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = {line.split()[0]: line for line in res.stdout.splitlines()}
    assert lines["claude-code"].endswith(f"installed: {bundled_cli()}"), lines
    assert lines["oracle"].endswith("built into ce")
    # an SDK without its bundled binary (a wheel for another platform): said, not hidden
    fake = tmp_path / "site" / "claude_agent_sdk"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    res = ce("agents", "list", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith("claude-code"))
    assert "not installed (claude-agent-sdk without its bundled CLI" in line, line


def test_sample_without_a_dataset_says_it_keeps_every_trial(tmp_path):
    """--sample N keeps N dataset rows per task: on tasks without a dataset it was ignored
    silently, as if the run had been cut to N trials."""
    t = task(tmp_path, SOLVABLE)
    res = ce("run", t, "--agent", "oracle", "--sample", "2", "--repeats", "3", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "ce run: --sample 2 keeps dataset rows, and no task here has a dataset: every " \
        "trial runs" in res.stderr
    assert "3 trial(s)" in res.stderr
