"""Import hygiene: what `ce --help`, `ce compile` and `ce_lang` pull in.

DESIGN.md: heavy libraries (polars, claude_agent_sdk, openai, ray) are imported only
inside the modules that use them, and `ce_lang` imports neither `ce_runtime` nor
`ce_agents` (the compiler stands alone). Each check runs in a fresh interpreter, so
whatever this pytest process has already imported cannot hide a regression. No timing
here: start-up speed is measured by bench/compile.py.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("polars", "claude_agent_sdk", "openai", "ray")
NOT_IN_COMPILER = ("ce_runtime", "ce_agents")

# Runs the click group in-process, like the `ce` script, then reports sys.modules.
CLI_PROBE = """
import json, sys
from ce_runtime.cli import main
try:
    main({argv!r}, standalone_mode=False)
    code = 0
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"exit": code, "modules": sorted(sys.modules)}}))
"""


def _probe(code: str, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _top_level(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in names)


@pytest.mark.parametrize("argv", [["--help"], ["compile", "tasks/hello_world.yaml"]],
                         ids=["help", "compile"])
def test_cli_does_not_import_heavy_libraries(argv):
    out = _probe(CLI_PROBE.format(argv=argv))
    assert out["exit"] == 0  # the command really ran (help printed, the task compiled)
    assert _top_level(out["modules"], HEAVY) == []


def test_compile_does_not_import_agents():
    out = _probe(CLI_PROBE.format(argv=["compile", "tasks/hello_world.yaml", "--no-cache"]))
    assert "ce_lang.compiler" in out["modules"]
    assert _top_level(out["modules"], ("ce_agents",)) == []
    # nor the runtime's sandboxes (asyncio ...): the host is probed only for a task
    # that sets a resource limit
    assert _top_level(out["modules"], ("asyncio",)) == []
    assert "ce_runtime.execute.sandbox" not in out["modules"]


def test_a_compile_cache_hit_imports_no_compiler(tmp_path):
    """A hit replays the output from the cache: no schema classes, YAML or cattrs."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("CE_NO_COMPILE_CACHE", None)
    argv = ["compile", "tasks/hello_world.yaml"]
    miss = _probe(CLI_PROBE.format(argv=argv), env)
    assert miss["exit"] == 0 and "ce_lang.compiler" in miss["modules"]
    hit = _probe(CLI_PROBE.format(argv=argv), env)
    assert hit["exit"] == 0
    loaded = [m for m in hit["modules"] if m.split(".")[0] in ("yaml", "cattrs", "attr",
                                                               "attrs", "lark")
              or m in ("ce_lang.compiler", "ce_lang.schema", "ce_lang.plan")]
    assert loaded == []


AGENTLESS_TASK = """task_id: agentless
description: an agentless trial
agent: {type: none}
sandbox: {driver: tempdir}
pre_run:
  - command: "printf ran > proof.txt"
success_criteria:
  - {type: file_exists, path: proof.txt, description: pre_run wrote its file}
  - {type: file_contains, path: proof.txt, includes: [ran], description: its content}
"""
USER_CRITERION = """criterion has_file(path: path "a file of the workspace") -> binary
\"\"\"The file exists.\"\"\"
  score = if path_exists(path) then 1.0 else 0.0
end
"""
# what compiling needs and loading a compiled plan does not: the criterion classes
# generated from the standard criteria, the task schema, lowering, the compiler
COMPILE_ONLY = ("ce_lang.compiler", "ce_lang.lower", "ce_lang.schema.criteria",
                "ce_lang.schema.task", "ce_lang.validate", "ce_lang.convert")


@pytest.mark.parametrize("user_criteria", [False, True], ids=["standard", "user-criteria"])
def test_a_warm_run_imports_neither_the_compiler_nor_the_criterion_classes(tmp_path,
                                                                           user_criteria):
    """`ce run`'s compile-cache hit unpickles the trials: their plans need the plan's
    blocks (ce_lang.schema.blocks) and the criteria language that grades them. The
    user's own criteria (a plan's `.ce` sources) are checked once per machine: a warm
    run parses none (no Lark)."""
    (tmp_path / "suite").mkdir()
    task = AGENTLESS_TASK
    if user_criteria:
        (tmp_path / "suite" / "mine.ce").write_text(USER_CRITERION)
        task = ("criteria_files: [mine.ce]\n" + task
                + "  - {type: has_file, path: proof.txt, description: a user criterion}\n")
    (tmp_path / "suite" / "agentless.yaml").write_text(task)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "CE_PLAIN": "1"}
    env.pop("CE_NO_COMPILE_CACHE", None)
    run_dir = tmp_path / "run"
    argv = ["run", str(tmp_path / "suite"), "-j", "1", "--run-dir", str(run_dir)]
    miss = _probe(CLI_PROBE.format(argv=argv), env)
    assert miss["exit"] == 0 and "ce_lang.schema.criteria" in miss["modules"]
    shutil.rmtree(run_dir)
    hit = _probe(CLI_PROBE.format(argv=argv), env)
    assert hit["exit"] == 0
    task = json.loads((run_dir / "default" / "agentless" / "00" / "task.json").read_text())
    assert task["status"] == "SUCCESS"  # the trial ran and was graded
    assert "ce_lang.plan" in hit["modules"]  # its plan was loaded
    loaded = [m for m in hit["modules"] if m.split(".")[0] in ("yaml", "cattrs", "lark")
              or m in COMPILE_ONLY]
    assert loaded == []


def test_import_ce_lang_stands_alone():
    out = _probe("import json, sys\nimport ce_lang\n"
                 "print(json.dumps({'modules': sorted(sys.modules)}))")
    assert _top_level(out["modules"], NOT_IN_COMPILER) == []


def test_compiling_through_ce_lang_stands_alone():
    """The whole front end, run end to end, reaches neither the runtime nor the agents."""
    out = _probe(
        "import json, sys\n"
        "from ce_lang.compiler import compile_paths\n"
        "result = compile_paths(['tasks/hello_world.yaml'])\n"
        "assert result.errors == 0 and len(result.trials) == 1, result.diagnostics\n"
        "print(json.dumps({'modules': sorted(sys.modules)}))"
    )
    assert "ce_lang.plan" in out["modules"]
    assert _top_level(out["modules"], NOT_IN_COMPILER) == []
    assert _top_level(out["modules"], HEAVY) == []


def _imported_names(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Absolute names of every import in `module` (dotted; packages end in `.__init__`),
    including function-level imports and importlib.import_module("...") / __import__("...")
    with a literal name."""
    package = module.rsplit(".", 1)[0].split(".")
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - (node.level - 1)])
                if node.module:
                    found.append((node.lineno, f"{base}.{node.module}"))
                else:
                    found.extend((node.lineno, f"{base}.{a.name}") for a in node.names)
            else:
                found.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else None
            if called in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def _ce_lang_modules() -> list[Path]:
    files = sorted((ROOT / "ce_lang").rglob("*.py"))
    assert len(files) > 5, "ce_lang sources not found"
    return files


def test_no_ce_lang_module_imports_runtime_or_agents():
    offenders = []
    for path in _ce_lang_modules():
        rel = path.relative_to(ROOT)
        module = ".".join(rel.with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, name in _imported_names(tree, module):
            if name.split(".")[0] in NOT_IN_COMPILER:
                offenders.append(f"{rel}:{line}: imports {name}")
    assert offenders == []


def test_import_scanner_sees_every_form():
    """The AST scan above must not pass vacuously: it finds each way of importing."""
    src = (
        "import ce_runtime.cli\n"
        "from ce_agents import x\n"
        "def f():\n"
        "    from ce_runtime import atomic\n"
        "    import importlib\n"
        "    importlib.import_module('ce_agents.none')\n"
        "    __import__('ce_runtime')\n"
        "from . import spans\n"
        "from ..plan import lower\n"
    )
    names = sorted(n for _, n in _imported_names(ast.parse(src), "ce_lang.schema.fields"))
    assert names == sorted(["ce_runtime.cli", "ce_agents", "ce_runtime", "importlib",
                            "ce_agents.none", "ce_runtime", "ce_lang.schema.spans",
                            "ce_lang.plan"])
    init = _imported_names(ast.parse("from .task import TaskSpec\n"), "ce_lang.schema.__init__")
    assert [n for _, n in init] == ["ce_lang.schema.task"]


def test_short_help_covers_every_command():
    from ce_runtime.cli import _COMMANDS, _SHORT_HELP

    assert set(_SHORT_HELP) == set(_COMMANDS)


def test_a_bug_is_one_line_and_exit_3_not_a_traceback(tmp_path, monkeypatch):
    """The group-level guard every command shares (simulated with a failing compile)."""
    from click.testing import CliRunner

    import ce_lang.api
    from ce_runtime.cli import main

    def boom(*a, **k):
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(ce_lang.api, "compile_paths", boom, raising=False)
    monkeypatch.delenv("CE_DEBUG", raising=False)
    res = CliRunner().invoke(main, ["compile", str(tmp_path)])
    assert res.exit_code == 3
    assert "internal error (RuntimeError: simulated bug)" in res.output
    assert "Traceback" not in res.output


def test_resume_of_a_non_run_directory_is_a_usage_error(tmp_path):
    from click.testing import CliRunner

    from ce_runtime.cli import main

    res = CliRunner().invoke(main, ["run", "--resume", str(tmp_path)])
    assert res.exit_code == 2 and "is not a run directory" in res.output


# -- the runtime by stage --------------------------------------------------------------------
# Data flows (boot, the `ce` script) -> cli -> report -> execute -> grade -> trace -> store: a stage imports only the
# stages below it. `model_server` and `pricing` (the rate card) are leaves every stage may
# use (judges, agents, tests; the agents that report no price, the pre-flight), and so is
# `worker_process` (the report worker's process, started by boot or by the command),
# `zygote_process` (the tempdir zygote, started by boot before the run names its socket),
# `startup_gc` (the collector during start-up) and `safe_text` (agent-written text made
# safe to print or render: the terminal's commands and the reports both need it).
STAGES = ("boot", "cli", "report", "execute", "grade", "trace", "store")
LEAVES = ("ce_runtime.model_server", "ce_runtime.pricing", "ce_runtime.worker_process",
          "ce_runtime.zygote_process", "ce_runtime.startup_gc", "ce_runtime.safe_text")
AGENT_API = ("ce_runtime.execute.agent_protocol", "ce_runtime.trace.events",
             "ce_runtime.trace.codex_log",  # a Codex session log, read live and imported
             "ce_runtime.trace.claude_log",  # Claude Code's records, read live and imported
             "ce_runtime.model_server", "ce_runtime.pricing")


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _ce_imports(package: str) -> list[tuple[str, int, str]]:
    """(module, line, imported module) for every ce_* import under `package`; `from A
    import b` counts as A.b when that is a module, else as A."""
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        module = _module_of(path)
        as_file = module + (".__init__" if path.name == "__init__.py" else "")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    rel = Path(*full.split("."))
                    is_module = (ROOT / rel).with_suffix(".py").exists() or \
                        (ROOT / rel / "__init__.py").exists()
                    out.append((module, node.lineno, full if is_module else node.module))
        for line, name in _imported_names(tree, as_file):
            if not any(line == seen_line and seen_module == module
                       for seen_module, seen_line, _ in out):
                out.append((module, line, name))
    return [(m, ln, n) for m, ln, n in out if n.split(".")[0].startswith("ce_")]


def _stage(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) > 1 and parts[0] == "ce_runtime" and parts[1] in STAGES:
        return STAGES.index(parts[1])
    return None


def test_runtime_stages_import_only_the_stages_below():
    offenders = []
    for module, line, name in _ce_imports("ce_runtime"):
        if name.startswith("ce_lang"):
            if name != "ce_lang.api":
                offenders.append(f"{module}:{line}: {name} (use the ce_lang.api facade)")
            continue
        if name.startswith("ce_agents"):
            offenders.append(f"{module}:{line}: {name} (agents are found through the registry)")
            continue
        if any(name == leaf or name.startswith(leaf + ".") for leaf in LEAVES):
            continue
        mine, theirs = _stage(module), _stage(name)
        if any(module == leaf or module.startswith(leaf + ".") for leaf in LEAVES):
            offenders.append(f"{module}:{line}: {name} (a leaf imports nothing of ce)")
        elif mine is not None and theirs is not None and theirs < mine:
            offenders.append(f"{module}:{line}: {name} ({STAGES[mine]} is below "
                             f"{STAGES[theirs]})")
        elif theirs is None and name not in ("ce_runtime",):
            offenders.append(f"{module}:{line}: {name} (not in a stage)")
    assert offenders == []


def test_every_runtime_module_sits_in_a_stage():
    loose = [p.name for p in (ROOT / "ce_runtime").glob("*.py")
             if p.name != "__init__.py" and f"ce_runtime.{p.stem}" not in LEAVES
             and p.stem not in STAGES]
    assert loose == []


def test_ce_agents_import_only_the_protocol_the_trace_the_model_server_and_the_rate_card():
    offenders = [f"{m}:{ln}: {n}" for m, ln, n in _ce_imports("ce_agents")
                 if not n.startswith("ce_agents") and n not in AGENT_API]
    assert offenders == []


def test_the_stage_check_sees_a_violation(tmp_path):
    """Not vacuous: an upward import is found by the same scan."""
    assert _stage("ce_runtime.grade.host") > _stage("ce_runtime.execute.trial")
    found = _ce_imports("ce_runtime")
    assert ("ce_runtime.execute.trial", "ce_runtime.grade.monitor") in {
        (m, n) for m, _, n in found}


# -- processes start in the sandbox package only ---------------------------------------------
SPAWNERS = ("subprocess", "create_subprocess_exec", "create_subprocess_shell", "fork",
            "forkpty", "posix_spawn", "posix_spawnp", "spawnv", "spawnve", "execv", "execve",
            "execvp", "execvpe", "system", "popen", "Popen")


def _spawn_sites(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(
                node, ast.ImportFrom) and node.module else [])
            if any(n.split(".")[0] == "subprocess" for n in names):
                sites.append(f"{node.lineno}: imports subprocess")
        elif isinstance(node, ast.Attribute) and node.attr in SPAWNERS and isinstance(
                node.value, ast.Name) and node.value.id in ("os", "asyncio", "subprocess",
                                                           "pty"):
            sites.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return sites


# ce's own processes, never a trial's: the report worker (`ce run` writes its reports in
# a process that imported Polars while the trials ran) and rescore's trial writer (the
# re-scored trials' files made while the next trial is graded)
# ce's own processes, running ce's code: the report worker, the trial writer, the
# forked graders of `ce rescore -j N` (a command a criterion runs still goes through a
# sandbox driver, in the grader as in the parent), and the tempdir zygote started by the
# `ce` script (it forks no init until the tempdir driver gives it a socket: the driver's
# own zygote, started earlier)
OWN_PROCESSES = ("ce_runtime/worker_process.py", "ce_runtime/cli/report_worker.py", "ce_runtime/store/staged_run.py",
                 "ce_runtime/cli/rescore_pool.py", "ce_runtime/zygote_process.py")


def test_only_the_sandbox_package_starts_processes():
    """Every process of a trial goes through a sandbox driver: no other module of the
    runtime or the agents may start one (but for ce's own OWN_PROCESSES)."""
    sandbox = ROOT / "ce_runtime" / "execute" / "sandbox"
    offenders = []
    for package in ("ce_runtime", "ce_agents"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if sandbox in path.parents or str(path.relative_to(ROOT)) in OWN_PROCESSES:
                continue
            offenders += [f"{path.relative_to(ROOT)}:{s}" for s in _spawn_sites(path)]
    assert offenders == []


def test_the_spawn_scan_sees_every_form(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import subprocess\nimport os, asyncio\nos.fork()\n"
                   "asyncio.create_subprocess_exec('x')\nos.execvpe('a', [], {})\n")
    assert _spawn_sites(src) == ["1: imports subprocess", "3: os.fork",
                                 "4: asyncio.create_subprocess_exec", "5: os.execvpe"]
    assert _spawn_sites(ROOT / "ce_runtime" / "execute" / "sandbox" / "supervised.py")
