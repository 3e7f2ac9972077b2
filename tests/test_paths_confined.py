"""Issue 9, compiler paths: a task reads only regular files inside its suite root, and a
`repo` source hands git only a repository URL and a commit.

Real files throughout (a FIFO from os.mkfifo, links to /dev/zero and out of the root,
/proc/self/environ). Anything that could hang runs `ce compile` in a subprocess with a
timeout: a hang fails the test (TimeoutExpired) instead of the suite; nothing is timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

from ce_lang.api import CompileOptions, compile_paths
from ce_lang.inputs import digest_path
from ce_lang.paths import commit_problem, repo_url_problem
from ce_runtime.execute.sandbox import workspace as W

HANG = 120  # seconds: a compile that takes this long is hung, not slow
SECRET = "CE_TEST_SECRET_do_not_print_3f9a"

BASE = """\
task_id: t
description: d
"""
CRITERIA = """
success_criteria:
  - {type: file_exists, path: a.txt, description: exists}
"""

JUDGE = """\
  - type: llm_judge
    description: judged
    prompt: Grade it.
    files: ["{file}"]
"""


def task(d: Path, body: str, name: str = "task.yaml", prompt: bool = True) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    head = BASE + ("initial_prompt: Go.\n" if prompt else "")
    path = d / name
    path.write_text(head + textwrap.dedent(body) + CRITERIA)
    return path


def ce_compile(*args: str, cwd: Path, env: dict | None = None
               ) -> tuple[int, list[dict], str]:
    """`ce compile --format json ARGS` in its own process: exit, diagnostics, all output."""
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile", "--format",
                           "json", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=HANG, env={**os.environ, **(env or {})})
    try:
        diags = json.loads(proc.stdout)["diagnostics"]
    except ValueError:
        diags = []
    return proc.returncode, diags, proc.stdout + proc.stderr


def codes(diags: list[dict]) -> list[str]:
    return [d["code"] for d in diags]


def errors_of(result) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in result.diagnostics if d.severity == "error"]


# -- outside the suite root ------------------------------------------------------------------
def test_proc_self_environ_is_refused_and_never_printed(tmp_path):
    path = task(tmp_path / "suite" / "t", "initial_prompt_file: /proc/self/environ\n",
                prompt=False)
    rc, diags, out = ce_compile(str(path), "--emit", str(tmp_path / "out"), cwd=tmp_path,
                                env={SECRET: SECRET})
    assert rc == 1 and codes(diags) == ["CE0216"]
    d = diags[0]
    assert (d["file"], d["line"], d["col"]) == (str(path), 3, 22)  # at the YAML value
    assert "outside the suite root" in d["message"]
    assert SECRET not in out
    assert not (tmp_path / "out" / "plans").exists()  # no plan written
    # the human rendering neither
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", "compile", str(path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=HANG,
                          env={**os.environ, SECRET: SECRET})
    assert proc.returncode == 1 and SECRET not in proc.stdout + proc.stderr
    assert "CE0216" in proc.stdout + proc.stderr


def test_link_inside_the_root_pointing_out_is_refused(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(SECRET)
    t = tmp_path / "suite" / "t"
    t.mkdir(parents=True)
    (t / "prompt.md").symlink_to(tmp_path / "outside" / "secret.txt")
    path = task(t, "initial_prompt_file: prompt.md\n", prompt=False)
    result = compile_paths([str(path)])
    assert [c for c, _ in errors_of(result)] == ["CE0216"]
    assert "resolves to" in errors_of(result)[0][1]
    assert all(SECRET not in text for text in result.sources.values())
    # a directory named on the command line that holds both is a suite root
    assert not errors_of(compile_paths([str(tmp_path)]))
    # and so is the explicitly allowed directory
    allowed = compile_paths([str(path)], CompileOptions(allow_paths=(str(tmp_path / "outside"),)))
    assert not errors_of(allowed)
    assert allowed.trials[0].plan.prompt == SECRET


def test_guide_shared_rubric_stays_valid(tmp_path):
    suite = tmp_path / "suite"
    (suite / "shared").mkdir(parents=True)
    (suite / "shared" / "rubric.md").write_text("# Rubric\n")
    (suite / "templates" / "py").mkdir(parents=True)
    (suite / "templates" / "py" / "main.py").write_text("print(1)\n")
    path = task(suite / "family", """
        agent: {system_prompt_file: ../shared/rubric.md}
        sandbox:
          template_sources:
            - {type: template_dir, path: ../templates/py}
        reference: {directory: ../templates/py}
        """)
    path.write_text(path.read_text() + JUDGE.format(file="$TASK_DIR/../shared/rubric.md"))
    result = compile_paths([str(path)])
    assert not errors_of(result), errors_of(result)


def test_climbing_above_the_parent_needs_the_directory_on_the_command_line(tmp_path):
    suite = tmp_path / "suite"
    (suite / "shared").mkdir(parents=True)
    (suite / "shared" / "rubric.md").write_text("# Rubric\n")
    path = task(suite / "a" / "b", "agent: {system_prompt_file: ../../shared/rubric.md}\n")
    assert [c for c, _ in errors_of(compile_paths([str(path)]))] == ["CE0216"]
    assert not errors_of(compile_paths([str(suite)]))
    assert not errors_of(compile_paths([str(suite / "**" / "task.yaml")]))  # a glob's prefix


def test_a_task_in_a_home_subdirectory_cannot_climb_into_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    path = task(home / "Downloads", "initial_prompt_file: ../.ssh/id_ed25519\n", prompt=False)
    for args in ([str(path)], [str(home / "Downloads")]):
        result = compile_paths(args)
        assert [c for c, _ in errors_of(result)] == ["CE0216"]
        assert all(SECRET not in text for text in result.sources.values())
    (home / "Downloads" / "p.md").write_text("beside the task")  # its own directory is fine
    path.write_text(path.read_text().replace("../.ssh/id_ed25519", "p.md"))
    assert not errors_of(compile_paths([str(path)]))


def test_override_paths_are_relative_to_the_working_directory(tmp_path, monkeypatch):
    path = task(tmp_path / "suite" / "t", "", prompt=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.md").write_text("from cwd")
    ok = compile_paths([str(path)], CompileOptions(overrides=("initial_prompt_file=p.md",)))
    assert not errors_of(ok) and ok.trials[0].plan.prompt == "from cwd"
    bad = compile_paths([str(path)], CompileOptions(overrides=("initial_prompt_file=/etc/passwd",)))
    assert [c for c, _ in errors_of(bad)] == ["CE0216"]
    assert bad.diagnostics[0].span.file == "<-D #1>"


@pytest.mark.parametrize("field", ["reference: {file: ../../x.py}",
                                   "sandbox: {docker: {dockerfile_path: /etc/hostname}}",
                                   "agent: {model_script: /etc/hostname}",
                                   "criteria_files: [/etc/hostname]",
                                   "dataset: {paths: [/etc/hostname]}",
                                   "agent: {plugins: [{type: local, path: ~/.ssh}]}"])
def test_every_host_path_field_is_confined(tmp_path, field):
    path = task(tmp_path / "suite" / "t", field + "\n")
    assert "CE0216" in [c for c, _ in errors_of(compile_paths([str(path)]))]


def test_dataset_row_substitution_is_checked_after_substitution(tmp_path):
    t = tmp_path / "suite" / "t"
    path = task(t, """
        dataset:
          rows:
            - {id: a, ref: x.md}
            - {id: b, ref: ../../../../../../../etc/hostname}
        """)
    path.write_text(path.read_text() + JUDGE.format(file="$TASK_DIR/${row.ref}"))
    (t / "x.md").write_text("rubric\n")
    result = compile_paths([str(path)])
    errs = errors_of(result)
    assert [c for c, _ in errs] == ["CE0216"] and "'b'" in errs[0][1]


# -- only regular files and directories ------------------------------------------------------
def test_fifo_prompt_file_is_a_diagnostic_not_a_hang(tmp_path):
    t = tmp_path / "suite" / "t"
    t.mkdir(parents=True)
    os.mkfifo(t / "prompt.md")
    path = task(t, "initial_prompt_file: prompt.md\n", prompt=False)
    rc, diags, _ = ce_compile(str(path), cwd=tmp_path)
    assert rc == 1 and codes(diags) == ["CE0217"] and "FIFO" in diags[0]["message"]


@pytest.mark.parametrize("body", [
    "agent: {system_prompt_file: zero}",
    "reference: {file: zero}",
    "criteria_files: [zero]",
    "dataset: {paths: [zero]}",
])
def test_link_to_dev_zero_is_a_diagnostic_not_a_hang(tmp_path, body):
    t = tmp_path / "suite" / "t"
    t.mkdir(parents=True)
    (t / "zero").symlink_to("/dev/zero")
    path = task(t, body + "\n")
    rc, diags, _ = ce_compile(str(path), cwd=tmp_path)
    assert rc == 1 and "CE0217" in codes(diags)
    assert "character device" in next(d["message"] for d in diags if d["code"] == "CE0217")


@pytest.mark.parametrize("special", ["fifo", "zero"])
@pytest.mark.parametrize("where", ["template", "reference"])
def test_special_entry_inside_a_copied_directory(tmp_path, special, where):
    t = tmp_path / "suite" / "t"
    (t / "dir" / "sub").mkdir(parents=True)
    (t / "dir" / "ok.txt").write_text("fine\n")
    entry = t / "dir" / "sub" / "entry"
    os.mkfifo(entry) if special == "fifo" else entry.symlink_to("/dev/zero")
    body = ("sandbox: {template_sources: [{type: template_dir, path: dir}]}"
            if where == "template" else "reference: {directory: dir}")
    path = task(t, body + "\n")
    rc, diags, _ = ce_compile(str(path), cwd=tmp_path)
    assert rc == 1 and codes(diags) == ["CE0217"]
    assert "'sub/entry'" in diags[0]["message"]


def test_link_out_of_the_root_inside_a_template_dir(tmp_path):
    t = tmp_path / "suite" / "t"
    (t / "tpl").mkdir(parents=True)
    (tmp_path / "secret").write_text(SECRET)
    (t / "tpl" / "creds").symlink_to(tmp_path / "secret")
    (t / "tpl" / "inner").symlink_to("../tpl")  # a link inside the root is fine
    path = task(t, "sandbox: {template_sources: [{type: template_dir, path: tpl}]}\n")
    errs = errors_of(compile_paths([str(path)]))
    assert [c for c, _ in errs] == ["CE0216"] and "'creds'" in errs[0][1]


def test_fifo_task_file_in_a_directory(tmp_path):
    (tmp_path / "suite").mkdir()
    os.mkfifo(tmp_path / "suite" / "stuck.yaml")
    task(tmp_path / "suite", "", name="real.yaml")
    rc, diags, _ = ce_compile(str(tmp_path / "suite"), cwd=tmp_path)
    assert rc == 1 and codes(diags) == ["CE0001"] and "FIFO" in diags[0]["message"]


def test_input_digest_never_opens_a_special_entry(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.txt").write_text("a")
    os.mkfifo(d / "pipe")
    (d / "zero").symlink_to("/dev/zero")
    first = digest_path(str(d), [], {})
    (d / "zero").unlink()
    (d / "zero").symlink_to("/dev/null")
    assert digest_path(str(d), [], {}) != first  # the link's target name is its identity


# -- --allow-path through the real CLI ------------------------------------------------------
def test_allow_path_on_the_command_line(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "p.md").write_text("allowed prompt")
    path = task(tmp_path / "suite" / "t", f"initial_prompt_file: {tmp_path}/outside/p.md\n",
                prompt=False)
    rc, diags, _ = ce_compile(str(path), cwd=tmp_path)
    assert rc == 1 and codes(diags) == ["CE0216"]
    assert "--allow-path" in diags[0]["help"]
    rc, diags, out = ce_compile(str(path), "--allow-path", str(tmp_path / "outside"),
                                "--emit", str(tmp_path / "out"), cwd=tmp_path)
    assert rc == 0 and not diags, out
    plans = list((tmp_path / "out" / "plans").iterdir())
    assert "allowed prompt" in plans[0].read_text()
    # allowing a directory does not make a FIFO in it readable
    os.mkfifo(tmp_path / "outside" / "pipe.md")
    path.write_text(path.read_text().replace("p.md", "pipe.md"))
    rc, diags, _ = ce_compile(str(path), "--allow-path", str(tmp_path / "outside"),
                              cwd=tmp_path)
    assert rc == 1 and codes(diags) == ["CE0217"]


@pytest.mark.parametrize("command", ["run", "explain", "rescore"])
def test_allow_path_is_offered_wherever_tasks_compile(command):
    proc = subprocess.run([sys.executable, "-m", "ce_runtime.cli", command, "--help"],
                          capture_output=True, text=True, timeout=HANG)
    assert "--allow-path" in proc.stdout


# -- repo sources -----------------------------------------------------------------------------
BAD_URLS = ["file:///etc", "ext::sh -c touch% /tmp/pwned", "--upload-pack=touch /tmp/x",
            "-oProxyCommand=x", "ssh://-oProxyCommand=x/repo", "fd::17",
            "https://github.com/a/b\n--upload-pack=x", "C:/x"]
GOOD_URLS = ["https://github.com/user/repo.git", "http://git.local/r.git",
             "ssh://git@github.com/user/repo.git", "git://host/r.git",
             "git@github.com:user/repo.git"]


@pytest.mark.parametrize("url", BAD_URLS)
def test_bad_repo_urls_are_compile_errors(tmp_path, url):
    path = task(tmp_path / "suite" / "t",
                f"sandbox: {{template_sources: [{{type: repo, url: {json.dumps(url)}}}]}}\n")
    errs = errors_of(compile_paths([str(path)]))
    assert [c for c, _ in errs] == ["CE0218"], errs


@pytest.mark.parametrize("url", GOOD_URLS)
@pytest.mark.parametrize("commit", [None, "abc1234", "0" * 40, "v1.2.3", "release/2.0"])
def test_repository_urls_and_commits_compile(tmp_path, url, commit):
    pin = f", commit: {json.dumps(commit)}" if commit else ""
    path = task(tmp_path / "suite" / "t",
                f"sandbox: {{template_sources: [{{type: repo, url: {json.dumps(url)}{pin}}}]}}\n")
    assert not errors_of(compile_paths([str(path)]))


@pytest.mark.parametrize("commit", ["-b", "--upload-pack=x", "a..b", "HEAD@{1}", "x y"])
def test_bad_commits_are_compile_errors(tmp_path, commit):
    path = task(tmp_path / "suite" / "t", "sandbox: {template_sources: [{type: repo, "
                f"url: 'https://h/r.git', commit: {json.dumps(commit)}}}]}}\n")
    assert [c for c, _ in errors_of(compile_paths([str(path)]))] == ["CE0218"]


def test_local_repo_paths_are_confined(tmp_path):
    (tmp_path / "suite" / "origin").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    inside = task(tmp_path / "suite" / "t",
                  "sandbox: {template_sources: [{type: repo, url: ../origin}]}\n")
    assert not errors_of(compile_paths([str(inside)]))
    outside = task(tmp_path / "suite" / "u", "sandbox: {template_sources: [{type: repo, "
                   f"url: {tmp_path / 'elsewhere'}}}]}}\n")
    assert [c for c, _ in errors_of(compile_paths([str(outside)]))] == ["CE0216"]


# -- git at run time -----------------------------------------------------------------------------
def _repo_plan(tmp_path: Path, url: str, commit: str | None = None):
    path = task(tmp_path / "suite" / "t", "sandbox: {python: null, template_sources: "
                "[{type: repo, url: 'https://example.invalid/r.git'}]}\n")
    result = compile_paths([str(path)])
    plan = result.trials[0].plan
    src = attrs.evolve(plan.sandbox.template_sources[0], url=url, commit=commit)
    return attrs.evolve(plan, sandbox=attrs.evolve(plan.sandbox, template_sources=[src]))


def test_ext_url_in_a_plan_never_runs(tmp_path):
    """A plan that skipped the compiler (hand-made, or an old archive) still never runs
    the command: the workspace refuses it before git starts."""
    mark = tmp_path / "pwned"
    plan = _repo_plan(tmp_path, f"ext::sh -c touch% {mark}")
    res = W.prepare_workspace(plan, str(tmp_path / "suite" / "t"), str(tmp_path / "ws"))
    assert not res.ok and "refused repo source" in res.error and "remote helper" in res.error
    assert not mark.exists()


def test_git_itself_refuses_ext_and_file_transports(tmp_path, monkeypatch):
    """With the check bypassed, git's own protocol policy (set on every clone) stops the
    ext:: helper and file:// URLs."""
    monkeypatch.setattr(W, "repo_url_problem", lambda url: None)
    mark = tmp_path / "pwned"
    plan = _repo_plan(tmp_path, f"ext::sh -c touch% {mark}")
    res = W.prepare_workspace(plan, str(tmp_path / "suite" / "t"), str(tmp_path / "ws"))
    assert not res.ok and "git clone" in res.error
    assert not mark.exists()

    origin = tmp_path / "origin"
    origin.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "one"]):
        subprocess.run(["git", *args], cwd=origin, env=env, check=True, timeout=HANG)
    plan = _repo_plan(tmp_path, f"file://{origin}")
    res = W.prepare_workspace(plan, str(tmp_path / "suite" / "t"), str(tmp_path / "ws2"))
    assert not res.ok and "git clone" in res.error
    plan = _repo_plan(tmp_path, str(origin))  # the local path the task named still clones
    res = W.prepare_workspace(plan, str(tmp_path / "suite" / "t"), str(tmp_path / "ws3"))
    assert res.ok, res.error


def test_option_like_commit_in_a_plan_is_refused(tmp_path):
    plan = _repo_plan(tmp_path, "https://example.invalid/r.git", "--upload-pack=touch x")
    res = W.prepare_workspace(plan, str(tmp_path / "suite" / "t"), str(tmp_path / "ws"))
    assert not res.ok and "refused repo source" in res.error


def test_checks_agree_with_the_compiler():
    for url in BAD_URLS:
        assert repo_url_problem(url) is not None, url
    for url in GOOD_URLS:
        assert repo_url_problem(url) is None, url
    assert commit_problem("-b") and commit_problem("deadbeef") is None


def test_allow_path_through_ce_run(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "ref.py").write_text("x = 1\n")
    t = tmp_path / "suite" / "t"
    t.mkdir(parents=True)
    path = t / "task.yaml"
    path.write_text(BASE + textwrap.dedent(f"""\
        agent: {{type: none}}
        sandbox: {{python: null}}
        reference: {{file: {tmp_path}/outside/ref.py}}
        """) + CRITERIA)
    run = [sys.executable, "-m", "ce_runtime.cli", "run", str(path), "--runs-root",
           str(tmp_path / "runs")]
    refused = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=HANG)
    assert refused.returncode == 2 and "CE0216" in refused.stderr
    allowed = subprocess.run([*run, "--allow-path", str(tmp_path / "outside")], cwd=tmp_path,
                             capture_output=True, text=True, timeout=HANG)
    assert "error(s) in the task files" not in allowed.stderr, allowed.stderr
    assert allowed.returncode in (0, 1)  # ran (the file_exists criterion fails: no agent)
    run_json = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    assert run_json["args"]["allow_paths"] == [str(tmp_path / "outside")]


def test_a_task_path_that_is_a_symlink_to_nothing_says_so(tmp_path):
    """A symlink loop (`ln -s loop loop`) given as the task was "matches no file"."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "dangling").symlink_to("missing.yaml")
    rc, diags, _ = ce_compile("loop", "a", "dangling", "nothing.yaml", cwd=tmp_path)
    assert rc == 2
    assert [(d["code"], d["message"]) for d in diags] == [
        ("CE0006", "'loop' is a symlink loop: it cannot be resolved"),
        ("CE0006", "'a' is a symlink loop: it cannot be resolved"),
        ("CE0006", f"'dangling' is a symlink to '{os.path.realpath(tmp_path)}/missing.yaml', "
                   "which does not exist"),
        ("CE0006", "'nothing.yaml' matches no file")]


def test_a_task_path_that_is_a_device_or_fifo_is_never_read_and_says_so(tmp_path):
    """`ce compile /dev/null` said "matches no file" of a path that is there: a device or
    FIFO is CE0217, as inside a task (ce never reads one: it would block or never end)."""
    os.mkfifo(tmp_path / "fifo.yaml")
    rc, diags, _ = ce_compile("/dev/null", "fifo.yaml", cwd=tmp_path)
    assert rc == 2
    assert [(d["code"], d["message"]) for d in diags] == [
        ("CE0217", "'/dev/null' is a character device, not a task file"),
        ("CE0217", "'fifo.yaml' is a FIFO, not a task file")]


# -- agent.plugins ----------------------------------------------------------------------------
def test_a_missing_plugin_directory_is_a_compile_error(tmp_path):
    """`agent.plugins[].path` names a directory the agent's sandbox is given: a missing one
    (or a file) is CE0207 as a missing template_dir is; it compiled clean and every trial
    ended ERROR at the agent's set-up ('No such file or directory')."""
    t = tmp_path / "suite" / "t"
    path = task(t, "agent: {plugins: [{path: nope}, {path: task.yaml}, {path: plug}]}\n")
    (t / "plug").mkdir()
    errs = errors_of(compile_paths([str(path)]))
    assert [c for c, _ in errs] == ["CE0207", "CE0207"], errs
    assert errs[0][1].startswith("`agent.plugins[0].path`: directory 'nope' not found")
    assert errs[1][1].startswith("`agent.plugins[1].path`: directory 'task.yaml' is not a "
                                 "directory")


def test_a_plugin_without_a_type_is_a_local_one(tmp_path):
    """The SDK's only plugin type is `local`, and it failed with "KeyError: 'type'" on an
    entry without one (`plugins: [{path: my-plugin}]`)."""
    import types

    from ce_agents.claude_code import _plugins

    request = types.SimpleNamespace(task_dir=str(tmp_path),
                                    sandbox=types.SimpleNamespace(share=lambda p: p))
    assert _plugins([{"path": "p"}, {"type": "local", "path": "/q"}], request) == [
        {"type": "local", "path": str(tmp_path / "p")}, {"type": "local", "path": "/q"}]
