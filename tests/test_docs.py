"""docs/: the generated reference matches the code, covers every field the schema accepts
and every criterion parameter; links resolve; the examples marked as complete files
compile and the `$ ce ...` commands of console blocks run as documented.

Conventions the pages follow (docs/README.md says so too):
- a fenced block with `title="NAME"` after its language is a complete file: every such
  block of a page is written into one directory under NAME; YAML files with a `task_id`
  are compiled with `ce compile` (with `-e` for each titled experiment of the page) and
  must compile cleanly, except those marked `compiles=no`, which must fail;
- in a ```console block, each `$ ce ...` line runs (in a scratch copy of the repository's
  tasks/ plus the page's titled files, in order); a trailing `# exit N` states the exit
  status, else 0 is expected.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import attrs
import pytest

from ce_lang.docgen import build, stale
from ce_lang.docgen.coverage import missing_fields, tables
from ce_lang.docgen.schema import DIFFERENCES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CE = [sys.executable, "-m", "ce_runtime.cli"]
PAGES = sorted(DOCS.rglob("*.md"))


# -- the generated reference --------------------------------------------------------------
def test_reference_is_up_to_date():
    assert stale(str(DOCS)) == [], "regenerate with: python -m ce_lang.docgen"


def test_check_mode_catches_drift(tmp_path):
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "reference" / "task-format.md"
    page.write_text(page.read_text().replace("| max_turns |", "| max_turn |", 1))
    proc = subprocess.run([sys.executable, "-m", "ce_lang.docgen", "--check", "--docs",
                           str(tmp_path / "docs")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1 and "reference/task-format.md" in proc.stderr
    (tmp_path / "docs" / "reference" / "criteria.md").unlink()
    assert "reference/criteria.md" in "".join(stale(str(tmp_path / "docs")))


def test_build_is_deterministic():
    assert build() == build()


def test_every_schema_field_is_in_the_reference():
    """Read from the committed files: every field of every class the schema reaches."""
    from ce_lang.docgen.coverage import reachable
    from ce_lang.schema.experiment import ExperimentSpec
    from ce_lang.schema.task import TaskSpec

    pages = {str(p.relative_to(DOCS)): p.read_text() for p in (DOCS / "reference").glob("*.md")}
    assert len(reachable([TaskSpec, ExperimentSpec])) > 30
    assert missing_fields(pages) == []


def test_a_lost_field_fails_the_build(monkeypatch):
    """The generator refuses to write a reference that lacks a field."""
    import ce_lang.docgen as docgen

    real = docgen.task_page
    monkeypatch.setattr(docgen, "task_page",
                        lambda: real().replace("| max_usd |", "| max_dollars |"))
    with pytest.raises(docgen.IncompleteReference, match="RunLimits: max_usd"):
        docgen.build()
    pages = {str(p.relative_to(DOCS)): p.read_text() for p in (DOCS / "reference").glob("*.md")}
    pages["reference/criteria.md"] = pages["reference/criteria.md"].replace(
        "| min_count |", "| minimum |")
    assert "command_executed.min_count" in missing_fields(pages)


def test_every_criterion_and_record_is_in_the_reference():
    from ce_lang.lang.stdlib import stdlib_registry

    registry = stdlib_registry()
    criteria = tables((DOCS / "reference" / "criteria.md").read_text())
    language = tables((DOCS / "reference" / "language.md").read_text())
    for name, checked in registry.criteria.items():
        assert {p.name for p in checked.defn.params} <= criteria[name], name
    for name, record in registry.records.items():
        assert set(record.fields) <= language[name], name
        assert set(record.methods) <= language[name], name


def test_difference_notes_name_real_fields():
    """Each `DIFFERENCES` key is a path of the task format (or `criterion.FIELD`)."""
    from ce_lang.schema.criteria import CriterionBase
    from ce_lang.schema.task import TaskSpec

    for key in DIFFERENCES:
        parts = key.split(".")
        cls = CriterionBase if parts[0] == "criterion" else TaskSpec
        for part in parts[1:]:
            hints = typing.get_type_hints(cls)
            assert part in hints, key
            inner = [a for a in typing.get_args(hints[part]) if attrs.has(a)]
            cls = inner[0] if inner else hints[part]


def test_criteria_difference_notes_name_real_parameters():
    from ce_lang.docgen.language import CRITERIA_DIFFERENCES
    from ce_lang.lang.stdlib import stdlib_registry

    criteria = stdlib_registry().criteria
    for key in CRITERIA_DIFFERENCES:
        name, _, param = key.partition(".")
        assert name in criteria, key
        assert not param or param in {p.name for p in criteria[name].defn.params}, key


def test_experiment_paths_are_documented_as_resolved(tmp_path):
    """An experiment's host paths are relative to the experiment file (not the task's),
    and experiment-format.md says so for each of them."""
    page = (DOCS / "reference" / "experiment-format.md").read_text()
    rows = [r for r in page.splitlines() if r.startswith("| ") and "relative to the" in r]
    assert rows and all("relative to the experiment file" in r for r in rows), rows
    fields = ("defaults.criteria_files", "variants[].initial_prompt_file",
              "agent.system_prompt_file", "agent.model_script",
              "template_sources[type=template_dir].path", "sandbox.docker.dockerfile_path")
    note = next(p for p in page.split("\n\n") if p.startswith("Host paths"))
    assert all(f"`{f}`" in note for f in fields), note
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "t.yaml").write_text(
        "task_id: t\ndescription: d\ninitial_prompt: go\n"
        "agent: {type: script, script: [{write: x.txt, content: hi}]}\n"
        "success_criteria: [{type: mine, description: d}]\n")
    exp = tmp_path / "exp"
    (exp / "tpl").mkdir(parents=True)
    (exp / "tpl" / "a.txt").write_text("a\n")
    (exp / "mine.ce").write_text(
        'criterion mine() -> binary\n  score = true\nend\n')
    for name in ("p.md", "sp.md", "ms.yaml", "Dockerfile"):
        (exp / name).write_text("x\n")
    (exp / "e.yaml").write_text(
        "experiment_id: e\n"
        "defaults:\n  criteria_files: [mine.ce]\n"
        "  agent: {system_prompt_file: sp.md, model_script: ms.yaml}\n"
        "  sandbox: {docker: {dockerfile_path: Dockerfile}}\n"
        "variants:\n  - variant_id: a\n    initial_prompt_file: p.md\n"
        "    template_sources: [{type: template_dir, path: tpl}]\n")
    proc = subprocess.run([*CE, "compile", "tasks/t.yaml", "-e", "exp/e.yaml"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_task_json_table_names_every_record_field():
    """run-directory.md's task.json table names every field of TrialRecord (the file's
    keys), and no field the record does not have (it lacked `suite_id`)."""
    import msgspec

    from ce_runtime.store.record import TrialRecord

    page = (DOCS / "run-directory.md").read_text(encoding="utf-8")
    section = page.split("## task.json", 1)[1].split("\n## ", 1)[0]
    named = {name for row in section.splitlines() if row.startswith("| `")
             for name in re.findall(r"`([a-z_0-9]+)`", row.split("|")[1])}
    fields = {f.name for f in msgspec.structs.fields(TrialRecord)}
    assert (sorted(fields - named), sorted(named - fields)) == ([], [])


# -- `ce criteria types` ------------------------------------------------------------------
def test_criteria_types_prints_every_record(tmp_path):
    from ce_lang.lang.stdlib import stdlib_registry

    out = subprocess.run([*CE, "criteria", "types"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    for name, record in stdlib_registry().records.items():
        block = out.split(f"\n{name}  (")[1] if not out.startswith(f"{name}  (") \
            else out[len(name):]
        block = block.split("\n\n")[0]
        for field in record.fields:
            assert re.search(rf"^    {field}\s", block, re.M), (name, field)
    assert out.startswith("Trace  (built in)")
    assert re.search(r"^    tool_calls\s+list\[ToolCall\]", out, re.M)
    ce_file = tmp_path / "mine.ce"
    ce_file.write_text('record Budget(limit: int "most calls")\n"""A budget."""\n')
    mine = subprocess.run([*CE, "criteria", "types", "Budget", "-f", str(ce_file)],
                          capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert mine.startswith("Budget  (") and "limit  int  most calls" in mine
    bad = subprocess.run([*CE, "criteria", "types", "Trac"], capture_output=True, text=True,
                         cwd=ROOT)
    assert bad.returncode == 2 and "did you mean `Trace`" in bad.stderr


# -- links ----------------------------------------------------------------------------------
def _anchors(path: Path) -> set[str]:
    from ce_lang.docgen.schema import anchor

    out: set[str] = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            out.add(anchor(line.lstrip("#").strip().replace("`", "")))
    return out


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, frag = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in _anchors(dest):
            broken.append(f"{target}: no heading with anchor #{frag}")
    assert broken == []


def test_readme_links_the_documentation():
    links = _links(ROOT / "README.md")
    assert "docs/README.md" in links
    assert "docs/reference/task-format.md" in links


# -- examples -------------------------------------------------------------------------------
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.M | re.S)
ANY_FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.M | re.S)  # untyped ones too


def _titled(page: Path, broken: bool | None = None) -> dict[str, str]:
    """Titled blocks: name -> text (`broken`: only those marked `compiles=no`, or only
    the others)."""
    out = {}
    for _lang, info, body in FENCE.findall(page.read_text(encoding="utf-8")):
        m = re.search(r'title="([^"]+)"', info)
        if m and (broken is None or broken == ("compiles=no" in info)):
            assert m.group(1) not in out, f"{page.name}: two blocks titled {m.group(1)}"
            out[m.group(1)] = body
    return out


def _scratch(page: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(ROOT / "tasks", work / "tasks")
    for name, body in _titled(page).items():
        dest = work / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(body, encoding="utf-8")
    return work


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CE_PLAIN"] = "1"
    return env


TITLED_PAGES = [p for p in PAGES if _titled(p)]


@pytest.mark.parametrize("page", TITLED_PAGES, ids=lambda p: p.name)
def test_titled_task_files_compile(page, tmp_path):
    import yaml

    work = _scratch(page, tmp_path)
    tasks, experiments = [], []
    for name, body in _titled(page, broken=False).items():
        if name.endswith((".yaml", ".yml")):
            doc = yaml.safe_load(body)
            if isinstance(doc, dict) and "task_id" in doc:
                tasks.append(name)
            elif isinstance(doc, dict) and "experiment_id" in doc:
                experiments.append(name)
    assert tasks or experiments, f"{page.name}: titled blocks but no task file"
    for exp in [None, *experiments]:
        argv = [*CE, "compile", *(tasks or ["tasks/hello_world.yaml"])]
        argv += ["-e", exp] if exp else []
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=work,
                              env=_env(tmp_path))
        assert proc.returncode == 0, f"{' '.join(argv[3:])}\n{proc.stdout}{proc.stderr}"
    for name in _titled(page, broken=True):
        proc = subprocess.run([*CE, "compile", name], capture_output=True, text=True,
                              cwd=work, env=_env(tmp_path))
        assert proc.returncode == 1 and "error[" in proc.stdout + proc.stderr, name


def _console_commands(page: Path) -> list[tuple[str, int]]:
    out = []
    for lang, _info, body in FENCE.findall(page.read_text(encoding="utf-8")):
        if lang != "console":
            continue
        for line in body.splitlines():
            if line.startswith("$ ce "):
                command, _, comment = line[2:].partition("  #")
                m = re.search(r"exit (\d+)", comment)
                out.append((command.strip(), int(m.group(1)) if m else 0))
    return out


CONSOLE_PAGES = [p for p in PAGES if _console_commands(p)]


@pytest.mark.parametrize("page", CONSOLE_PAGES, ids=lambda p: p.name)
def test_console_commands_run(page, tmp_path):
    work = _scratch(page, tmp_path)
    for command, expected in _console_commands(page):
        argv = shlex.split(command)
        proc = subprocess.run([*CE, *argv[1:]], capture_output=True, text=True, cwd=work,
                              env=_env(tmp_path), timeout=600)
        assert proc.returncode == expected, \
            f"{command}: exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"


# -- commands named in the pages exist -------------------------------------------------------
def _ce_invocations(text: str) -> list[str]:
    """The `ce ...` command lines a page shows: lines of code blocks starting with `ce `
    or `$ ce `, with the indented `[--option ...]` lines of a synopsis that continue
    one, and inline code starting with `ce ` (comments dropped)."""
    out = []
    for _lang, _info, body in ANY_FENCE.findall(text):
        for raw in body.splitlines():
            line = raw.strip().removeprefix("$ ")
            if line.startswith("ce "):
                out.append(line.split("  #")[0].split(" # ")[0])
            elif out and raw[:1].isspace() and line.startswith("[") and \
                    out[-1].startswith("ce ") and out[-1].rstrip().endswith("]"):
                out[-1] += " " + line.split("  #")[0]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    out += [code for code in re.findall(r"`([^`\n]+)`", prose) if code.startswith("ce ")]
    return out


def _resolve(words: list[str]):
    """The click command `ce WORDS...` names (a group's subcommand when there is one), and
    how many words it took."""
    import click

    from ce_runtime.cli import main

    ctx = click.Context(main)
    command, used = main, 0
    for word in words:
        if isinstance(command, click.Group):
            sub = command.get_command(ctx, word)
            if sub is None:
                break
            command, used = sub, used + 1
        else:
            break
    return command, used


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_and_options_named_in_the_pages_exist(page):
    """Every `ce COMMAND ... --option` a page shows is a command with that option."""
    assert _command_problems(page.read_text(encoding="utf-8")) == []


def _command_problems(text: str) -> list[str]:
    import click

    problems = []
    for line in _ce_invocations(text):
        words = line.split()[1:]
        command, used = _resolve(words)
        if used == 0:
            problems.append(f"{line}: no such command")
            continue
        if isinstance(command, click.Group):
            continue  # `ce criteria` alone
        rest = " ".join(words[used:])
        known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        known |= {"--help", "-h"}
        for opt in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", rest):
            if opt not in known:
                problems.append(f"ce {' '.join(words[:used])}: no option {opt}")
    return problems


def test_the_command_check_sees_commands_and_bad_options():
    text = ("Run `ce run tasks/ --agent oracle`.\n\n```console\n$ ce explain T --json\n"
            "$ ce criteria types Trace  # the trace\n```\nand ce prose --ignored\n")
    assert _ce_invocations(text) == ["ce explain T --json", "ce criteria types Trace",
                                     "ce run tasks/ --agent oracle"]
    synopsis = "```\nce run PATHS... [-j N]\n       [--nope X]\nce runs [DIR]\n```\n"
    assert _ce_invocations(synopsis) == ["ce run PATHS... [-j N] [--nope X]", "ce runs [DIR]"]
    assert _command_problems(synopsis) == ["ce run: no option --nope"]
    command, used = _resolve(["criteria", "types", "Trace"])
    assert used == 2 and command.name == "types"
    assert sum(len(_ce_invocations(p.read_text())) for p in PAGES) > 40
    assert _command_problems("`ce explain T --nope` and `ce frobnicate`") == [
        "ce explain: no option --nope", "ce frobnicate: no such command"]
