"""`ce run --junit-xml F --sarif S` that refuses its input (exit 2) still writes F and S,
saying so: an earlier run's files left in place were read by Jenkins, GitLab and code
scanning as this run's results (pytest, likewise, writes its JUnit file with the
collection error).

- F: one testcase in error (classname `run`, name `ce accepted its input`, type
  `REFUSED`): why, then the first errors, each at its file:line:col;
- S: the compile diagnostics as `ce compile --format sarif` renders them (code scanning
  shows the task files' errors at their lines) and an invocation saying why (`_sarif`:
  executionSuccessful false when the task files are not the cause, and so no result).

Written when ce knows the paths: given on the command line (a resume refused does not
write the paths its run recorded), also when an option's value was refused while the
options were parsed (the raw arguments still name F and S); not when the arguments do not
parse at all, never over a path the pre-flight refuses (part of a run's archive,
unwritable), nor in a --run-dir that holds no run yet (the next run would find it not
empty). `Refused` is the exit 2 of a refusal that printed its reasons itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import click

ERRORS_SHOWN = 10  # diagnostics the JUnit error's text quotes, at most


class Refused(SystemExit):
    """Exit 2: `ce run` refused its input and said why on stderr (`lines`, without the
    `ce run: ` prefix); `diagnostics`: the compile's, when the task files are the cause."""

    def __init__(self, lines: Sequence[str], diagnostics: Sequence[Any] = ()):
        super().__init__(2)
        self.lines, self.diagnostics = list(lines), list(diagnostics)


class RunCommand(click.Command):
    """`ce run`'s command: an option value refused while parsing (`--repeats 0`,
    `--min-pass-rate 2`) writes the refusal to the --junit-xml and --sarif the raw
    arguments name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        raw = list(args)  # click's parser consumes the list
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            given = _raw_options(self, ctx, raw)
            if given is not None:
                write(given, [exc.format_message()])
            raise


def _raw_options(command: click.Command, ctx: click.Context, raw: list[str]
                 ) -> dict[str, Any] | None:
    """The options `write` reads as the arguments spell them (no value checked), or None
    when they do not parse."""
    try:
        opts, _, _ = command.make_parser(ctx).parse_args(args=raw)
    except Exception:  # an unknown option, a missing value: nothing is known
        return None

    def one(name: str) -> str | None:
        value = opts.get(name)
        if isinstance(value, (list, tuple)):
            value = value[-1] if value else None
        return value if isinstance(value, str) and value else None

    return {**{k: one(k) for k in ("junit_xml", "sarif", "run_dir", "resume_dir")},
            "quiet": bool(opts.get("quiet"))}


def refusal_lines(exc: BaseException) -> list[str] | None:
    """Why `exc` refused the input, or None when it is no refusal (exit 2)."""
    if isinstance(exc, Refused):
        return exc.lines
    if isinstance(exc, click.UsageError):
        return [exc.format_message()]
    return None


def write(given: dict[str, Any], lines: Sequence[str], diagnostics: Sequence[Any] = ()
          ) -> None:
    """Write the refusal to the --junit-xml and --sarif of `given` (`ce run`'s options),
    each where the pre-flight would let the run write it (never in its --run-dir's
    archive, nor another run's); a file that cannot be written is one line on stderr,
    the exit stays 2."""
    from ce_runtime.cli.run_preflight import output_problem
    from ce_runtime.store.atomic import write_bytes_atomic

    errors = [d for d in diagnostics if d.severity == "error"]
    message = "ce run refused its input: " + (lines[0] if lines else "bad input")
    run_dir = given.get("resume_dir") or given.get("run_dir")
    for option, path, render in (("JUnit XML", given.get("junit_xml"), _junit),
                                 ("SARIF", given.get("sarif"), _sarif)):
        if not path or output_problem(path, run_dir) or _in_unmade_run(path, given):
            continue  # the pre-flight says why, when it is the cause
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            write_bytes_atomic(path, render(message, lines[1:], errors,
                                            diagnostics).encode())
        except OSError as exc:
            click.echo(f"ce run: cannot write {path}: {exc.strerror or exc}", err=True)
            continue
        if not given.get("quiet"):
            click.echo(f"{option}: {path} (the refusal: nothing was run)", err=True)


def _in_unmade_run(path: str, given: dict[str, Any]) -> bool:
    """`path` is in the --run-dir of a run not yet made: written there, the file would
    make the directory one that is not empty, which the next `ce run --run-dir` refuses."""
    run_dir = given.get("run_dir")
    if not run_dir or given.get("resume_dir") or \
            os.path.isfile(os.path.join(run_dir, "run.json")):
        return False
    rel = os.path.relpath(os.path.realpath(os.path.abspath(path)),
                          os.path.realpath(os.path.abspath(run_dir)))
    return not (rel == os.pardir or rel.startswith(os.pardir + os.sep))


def _junit(message: str, more: Sequence[str], errors: Sequence[Any],
           diagnostics: Sequence[Any]) -> str:
    """One testcase in error, as pytest writes a collection error."""
    import xml.etree.ElementTree as ET

    from ce_runtime.report.junit import _x
    from ce_runtime.report.rundir import cwd_relative

    detail = [*more, *(f"{d.span}: {d.severity}[{d.code}]: {d.message}" if d.span
                       else f"{d.severity}[{d.code}]: {d.message}"
                       for d in errors[:ERRORS_SHOWN])]
    if len(errors) > ERRORS_SHOWN:
        detail.append(f"... and {len(errors) - ERRORS_SHOWN} more error(s)")
    root = ET.Element("testsuites", name="ce", tests="1", failures="0", errors="1",
                      skipped="0", time="0.000")
    suite = ET.SubElement(root, "testsuite", name="(run)", tests="1", failures="0",
                          errors="1", skipped="0", time="0.000")
    where = next((d.span.file for d in errors if d.span and not d.span.file.startswith("<")),
                 None)
    tc = ET.SubElement(suite, "testcase", classname="run", name="ce accepted its input",
                       **({"file": _x(cwd_relative(where))} if where else {}), time="0.000")
    el = ET.SubElement(tc, "error", type="REFUSED", message=_x(message))
    el.text = _x("\n".join([message, *detail]))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def _sarif(message: str, more: Sequence[str], errors: Sequence[Any],
           diagnostics: Sequence[Any]) -> str:
    """`ce compile --format sarif`'s document, with the run's invocation. Refused for
    errors in the task files, the check that found them ran to its end and they are its
    results (executionSuccessful true, the refusal a note): code scanning shows them at
    their lines. Refused for anything else, there are no results to show, and
    executionSuccessful is false: GitHub code scanning then processes none (an
    "unsuccessful execution") and closes no alert, where an empty result list would have
    closed every alert of the last run."""
    from ce_lang.api import __version__, render_sarif

    doc = json.loads(render_sarif(list(diagnostics), __version__))
    doc["runs"][0]["invocations"] = [{"executionSuccessful": bool(errors),
                                      "toolExecutionNotifications": [{
                                          "level": "note" if errors else "error",
                                          "message": {"text": "\n".join([message, *more])},
                                          "descriptor": {"id": "ce/run-refused"}}]}]
    return json.dumps(doc, indent=2) + "\n"
