"""Golden-diagnostics corpus: every case under tests/corpus/ compiles to its `.expected` file.

Layout (see tests/corpus/README.md):
- `tests/corpus/<group>/<name>.yaml` is a case; `<name>.expected` next to it is its golden.
- An optional first line `# args: <extra ce compile args>` adds arguments (shell-split;
  paths relative to the case's directory, which is the working directory of the run).
- Supporting files live under `_support/` folders (skipped); experiment helpers are
  named `*.exp.yaml` (also skipped as cases).

Golden format: line 1 `exit: N`, then one line per diagnostic in output order,
`CODE severity FILE:LINE:COL message` (FILE relative to the case's directory; pseudo
files such as `<-D #1>` as they are), each followed by `  help: ...` when it has one.
Notes are not part of the golden.

`CE_UPDATE_GOLDENS=1 pytest tests/test_corpus.py` rewrites the goldens. A golden is a
claim about correct behaviour: review every rewritten file before committing it.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from ce_lang.codes import CODES

CORPUS = Path(__file__).parent / "corpus"
UPDATE = os.environ.get("CE_UPDATE_GOLDENS") == "1"
# Codes a case cannot reasonably produce: CE0007 needs a file over 2 MiB (made on the
# fly by tests/test_compile_limits.py instead of kept in the repository); CE0222 is
# `ce run`'s, which knows the installed agents (tests/test_pricing.py).
UNCOVERABLE: set[str] = {"CE0007", "CE0222"}


def _is_case(path: Path) -> bool:
    rel = path.relative_to(CORPUS)
    if any(part.startswith(("_", ".")) for part in rel.parts):
        return False
    return not path.name.endswith(".exp.yaml")


CASES = sorted(p for p in CORPUS.rglob("*.yaml") if _is_case(p))


def _case_id(path: Path) -> str:
    return path.relative_to(CORPUS).with_suffix("").as_posix()


def case_args(case: Path) -> list[str]:
    first = case.read_bytes().split(b"\n", 1)[0].decode("utf-8", "replace")
    if first.startswith("# args:"):
        return shlex.split(first[len("# args:"):])
    return []


def _rel(file: str | None, case_dir: Path) -> str:
    if file is None:
        return "-"
    if file.startswith("<"):
        return file
    if os.path.isabs(file):
        return os.path.relpath(file, case_dir)
    return os.path.normpath(file)


def run_case(case: Path) -> tuple[str, dict | None]:
    """The golden text for `case` as the compiler produces it, and the parsed JSON."""
    from ce_runtime.cli import main

    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, ["compile", case.name, *case_args(case), "--format", "json"],
                           catch_exceptions=True)
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        import traceback

        tb = "".join(traceback.format_exception(*result.exc_info)).rstrip()
        return f"exit: {result.exit_code}\ncrash: {type(exc).__name__}: {exc}\n{tb}\n", None
    try:
        payload = json.loads(result.stdout)
    except ValueError:
        try:
            stderr = result.stderr
        except ValueError:  # stderr not captured separately
            stderr = ""
        return (f"exit: {result.exit_code}\nnot JSON: {result.stdout!r}\n"
                f"stderr: {stderr.strip()}\n"), None
    lines = [f"exit: {result.exit_code}"]
    for d in payload["diagnostics"]:
        loc = f"{_rel(d['file'], case.parent)}:{d['line']}:{d['col']}" if d["file"] else "-"
        lines.append(f"{d['code']} {d['severity']} {loc} {d['message']}")
        if d.get("help"):
            lines.append(f"  help: {d['help']}")
    return "\n".join(lines) + "\n", payload


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_case(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(case.parent)
    actual, _ = run_case(case)
    golden = case.with_suffix(".expected")
    if UPDATE:
        golden.write_text(actual, encoding="utf-8")
        return
    assert golden.exists(), f"no golden {golden}; run with CE_UPDATE_GOLDENS=1 and review it"
    expected = golden.read_text(encoding="utf-8")
    assert actual == expected, f"{_case_id(case)}: compiler output differs from the golden"


def test_corpus_size() -> None:
    assert len(CASES) >= 60, f"only {len(CASES)} corpus cases"


def test_every_golden_has_a_case() -> None:
    stale = [g for g in CORPUS.rglob("*.expected")
             if not g.with_suffix(".yaml").exists() or not _is_case(g.with_suffix(".yaml"))]
    assert not stale, f"goldens without a case: {stale}"


def test_every_code_is_covered() -> None:
    """Every code of the table appears in at least one golden (goldens say what *should* be)."""
    seen: set[str] = set()
    for case in CASES:
        golden = case.with_suffix(".expected")
        if not golden.exists():
            continue
        for line in golden.read_text(encoding="utf-8").splitlines()[1:]:
            head = line.split(" ", 1)[0]
            if head in CODES:
                seen.add(head)
    missing = sorted(set(CODES) - seen - UNCOVERABLE)
    assert not missing, f"codes no corpus case expects: {missing}"


def test_every_code_is_produced(monkeypatch: pytest.MonkeyPatch) -> None:
    """...and the compiler really emits each of them somewhere in the corpus."""
    produced: set[str] = set()
    for case in CASES:
        monkeypatch.chdir(case.parent)
        _, payload = run_case(case)
        if payload:
            produced.update(d["code"] for d in payload["diagnostics"])
    missing = sorted(set(CODES) - produced - UNCOVERABLE)
    assert not missing, f"codes the compiler never emitted on the corpus: {missing}"
