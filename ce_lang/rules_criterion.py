"""The rules that read one criterion entry: its `require` constraints, regexes, JMESPath
assertions, workspace and host paths, argv patterns. `criterion_rules` runs them on an
entry of a resolved task, and `dropped_criterion_rules` on an entry the schema dropped
(a missing or invalid field), skipping every check that reads a broken field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs

from ce_lang import hostfs
from ce_lang.diagnostics import did_you_mean
from ce_lang.rule_context import RowProblem
from ce_lang.rules_cli import cli_match_rules
from ce_lang.rules_paths import criterion_host_paths, emit_for_rows
from ce_lang.rules_task_files import task_file_as_workspace_path
from ce_lang.schema import criteria as C
from ce_lang.spans import Path
from ce_lang.tool_names import canonical_spelling
from ce_lang.validate import check_workspace_path

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext


def constraint_rules(ctx: RuleContext) -> None:
    """The `require` constraints of each criterion's definition, broken by its arguments:
    reported at the first parameter the constraint reads that the task sets (the key of a
    conflicting field, the value otherwise), or at the criterion's `type` when it sets
    none; one diagnostic per field (a range error makes a comparison with it moot)."""
    task_commands = ctx.intact("expected_commands")
    for i, c in enumerate(ctx.task.success_criteria):
        inst = ctx.instance(i)
        if inst is None:
            continue
        violations = inst.violations
        if not task_commands and isinstance(c, C.CommandsEfficiency) \
                and c.expected_commands is None:  # the task's (broken) value counts
            violations = [v for v in violations if "expected_commands" not in v.names]
        _constraints(ctx, i, violations)


def _constraints(ctx: RuleContext, i: int, violations: Iterable[Any]) -> None:
    from ce_lang.lang.checker import FIELD_PLACEHOLDER

    here = ("success_criteria", i)
    blamed: set[Path] = set()
    for v in violations:
        name = next((n for n in v.names if ctx.written((*here, n))), None)
        path = (*here, "type") if name is None else (*here, name)
        if path in blamed:
            continue
        blamed.add(path)
        span = ctx.key_at(path) if v.code == "CE0109" and name is not None else ctx.at(path)
        message, help_ = (None if t is None else FIELD_PLACEHOLDER.sub(
            lambda m, h=here: ctx.name((*h, m.group(1))), t) for t in (v.message, v.help))
        if ctx.has_dataset:  # once, naming the rows whose values break it
            ctx.row_problems.append(RowProblem(v.code, message, span, help_, ctx.row_id))
        else:
            ctx.diags.emit(v.code, message, span, help=help_)


# the fields of a cli_called criterion its argv pattern rules read
_CLI_MATCH_FIELDS = ("verb", "verb_any_of", "positional", "flags", "ignore_flags")


def criterion_rules(ctx: RuleContext, i: int, c: C.CriterionBase,
                    skip: frozenset[str] = frozenset()) -> None:
    """The rules that read one criterion entry's own fields and nothing else of the task
    (regexes, run_command's regex `expected_stdout`, JMESPath assertions, workspace paths, argv patterns). A check reading a
    field in `skip` does not run: for an entry the schema dropped, that field is missing
    or invalid (reported) and holds a placeholder (`dropped_criterion_rules`)."""
    def reads(*names: str) -> bool:
        return skip.isdisjoint(names)

    here = ("success_criteria", i)
    if isinstance(c, C.CommandExecuted):
        for f in ("command_pattern", "exclude_pattern"):
            if reads(f):
                check_regex(getattr(c, f), 0, (*here, f), ctx)
        if c.tool_name is not None and reads("tool_name"):
            _tool_name_rule(c.tool_name, (*here, "tool_name"), ctx)
    if isinstance(c, C.CliCalled) and reads(*_CLI_MATCH_FIELDS):
        cli_match_rules(c, here, ctx, rule=False)
    if isinstance(c, C.RunCommand) and c.stdout_match == "regex" \
            and reads("expected_stdout", "stdout_match"):
        check_regex(c.expected_stdout, 0, (*here, "expected_stdout"), ctx)
    if isinstance(c, C.FileMatchesRegex) and reads("pattern", "flags"):
        check_regex(c.pattern, c.flags, (*here, "pattern"), ctx, (*here, "flags"))
    if isinstance(c, C.FileCheck) and reads("patterns"):
        for j, p in enumerate(c.patterns):
            at = (*here, "patterns", j)
            check_regex(p.pattern, p.flags, (*at, "pattern"), ctx, (*at, "flags"))
    if isinstance(c, C.JsonCheck):
        if reads("assertions"):
            _json_rules(c, here, ctx)
        if c.json_schema is not None and reads("json_schema"):
            _check_mixed_path(c.json_schema, (*here, "json_schema"), ctx)
            _check_task_schema(c.json_schema, (*here, "json_schema"), ctx)
    if isinstance(c, C.ClassificationMatch) and reads("allowed_labels"):
        _reserved_labels(c.allowed_labels, (*here, "allowed_labels"), ctx)
    if isinstance(c, C.LlmJudge | C.AgentJudge) and reads("files"):
        for j, f in enumerate(c.files):  # a missing file is shown as missing (the guide)
            _check_mixed_path(f, (*here, "files", j), ctx, missing="CE0225")
    if isinstance(c, C.ReferenceComparison) and ctx.written((*here, "pass_threshold")):
        ctx.diags.emit("CE0214", "`pass_threshold` has no effect on reference_comparison: it "
                       f"passes at its `similarity_threshold` ({c.similarity_threshold:g})",
                       ctx.key_at((*here, "pass_threshold")),
                       notes=("set `similarity_threshold` to move the pass threshold "
                              "(coder_eval's rule: the domain field wins)",))
    if isinstance(c, C.ReferenceComparison) and c.reference_file is not None \
            and reads("reference_file"):
        check_workspace_path(c.reference_file, ctx.at((*here, "reference_file")),
                             ctx.name((*here, "reference_file")), ctx.diags,
                             root="the reference directory")


def dropped_criterion_rules(ctx: RuleContext, i: int, c: C.CriterionBase,
                            broken: frozenset[str], inst: Any) -> None:
    """The rules of a criterion entry the schema dropped (`success_criteria[i]` in the
    document) that read only its valid fields, so a missing `description` does not hide
    the invalid regex next to it. `c` stands in for the entry, its `broken` fields holding
    placeholders; `inst` is its checked instance (or None). Skipped as well: fields that
    still hold a dataset row's `${row.key}` (the rules check the substituted value of a
    row, and a dropped entry has no rows), and for commands_efficiency an unset
    `expected_commands` (the task's value then counts). Rules that read the rest of the
    task (a `reference:`, the agent, early stop, suite thresholds) wait for the fix."""
    skip = set(broken)
    for f in attrs.fields(type(c)):
        if _has_row_ref(getattr(c, f.name)):
            skip.add(f.name)
    if isinstance(c, C.CommandsEfficiency) and c.expected_commands is None:
        skip.add("expected_commands")
    if isinstance(c, C.UserCall):  # its arguments are the constraints' names
        skip.update(k for k, v in c.args.items() if _has_row_ref(v))
    frozen_skip = frozenset(skip)
    criterion_rules(ctx, i, c, frozen_skip)
    if ctx.roots is not None:
        criterion_host_paths(ctx, i, c, frozen_skip)
    if inst is not None:
        _constraints(ctx, i, [v for v in inst.violations if frozen_skip.isdisjoint(v.names)])


def _has_row_ref(value: Any) -> bool:
    if isinstance(value, str):
        return "${row." in value
    if isinstance(value, list | tuple):
        return any(_has_row_ref(v) for v in value)
    if isinstance(value, dict):
        return any(_has_row_ref(v) for v in value.values())
    if attrs.has(type(value)):
        return any(_has_row_ref(getattr(value, f.name)) for f in attrs.fields(type(value)))
    return False


def _check_mixed_path(value: str, path: Path, ctx: RuleContext, missing: str = "CE0207"
                      ) -> None:
    """Workspace-relative, or `$TASK_DIR/...` (host, must exist: `missing` is the code
    said when it does not), or `$REFERENCE_DIR/...`."""
    span = ctx.at(path)
    if value.startswith("$REFERENCE_DIR/"):
        return
    if value.startswith("$TASK_DIR/"):
        base = os.path.dirname(os.path.abspath(span.file))
        resolved = os.path.normpath(os.path.join(base, value[len("$TASK_DIR/"):]))
        if not hostfs.exists(resolved):
            ctx.diags.emit(missing, f"{value!r} not found" + (
                "" if missing == "CE0207" else ": the judge is shown `<file not found>`"),
                           span,
                           notes=(f"$TASK_DIR is the task file's directory: {base}",))
        return
    if "${row." not in value:
        check_workspace_path(value, span, ctx.name(path), ctx.diags)
        task_file_as_workspace_path(value, path, ctx)


def _check_task_schema(value: str, path: Path, ctx: RuleContext) -> None:
    """A `$TASK_DIR/...` JSON Schema is the author's file, here at compile time: one that
    is no JSON, or no valid schema, would make the criterion an ERROR in every trial."""
    if not value.startswith("$TASK_DIR/"):
        return  # a workspace schema exists only once the agent ran
    import json

    from ce_lang.paths import NotRegularFile, read_regular_text

    span = ctx.at(path)
    base = os.path.dirname(os.path.abspath(span.file))
    resolved = os.path.normpath(os.path.join(base, value[len("$TASK_DIR/"):]))
    if not hostfs.isfile(resolved):
        return  # reported by _check_mixed_path
    try:
        schema = json.loads(read_regular_text(resolved))
    except (OSError, NotRegularFile, UnicodeDecodeError):
        return  # unreadable here; the grader says so
    except json.JSONDecodeError as exc:
        ctx.diags.emit("CE0111", f"JSON Schema {value!r} is not valid JSON: {exc.msg} at "
                       f"line {exc.lineno} column {exc.colno}", span)
        return
    except (RecursionError, ValueError):
        ctx.diags.emit("CE0111", f"JSON Schema {value!r} is not valid JSON", span)
        return
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(map(str, exc.absolute_path))
        ctx.diags.emit("CE0111", f"invalid JSON Schema {value!r}: {exc.message}"
                       + (f" (at {where})" if where else ""), span)
    except RecursionError:
        ctx.diags.emit("CE0111", f"invalid JSON Schema {value!r}: nested too deeply", span)


def _json_rules(c: C.JsonCheck, here: Path, ctx: RuleContext) -> None:
    import jmespath  # small, and only needed when a task has json_check
    from jmespath.exceptions import JMESPathError

    for j, a in enumerate(c.assertions):
        at = (*here, "assertions", j)
        try:
            parsed = jmespath.compile(a.expression)
            problem = jmespath_call_error(parsed.parsed)
            if problem:
                emit_for_rows(ctx, "CE0111", f"invalid JMESPath expression {a.expression!r}: "
                              + problem[0], (*at, "expression"), problem[1])
        except JMESPathError as exc:
            pos = getattr(exc, "lex_position", None)
            token = getattr(exc, "token_value", None)
            what = "incomplete expression" if token is None else f"unexpected {token!r}"
            emit_for_rows(ctx, "CE0111", f"invalid JMESPath expression {a.expression!r}: {what}"
                          + (f" at position {pos}" if pos is not None else ""),
                          (*at, "expression"))
        except RecursionError:
            emit_for_rows(ctx, "CE0111", "invalid JMESPath expression: nested too deeply to "
                          "compile", (*at, "expression"))
        if a.operator != "exists" and a.expected is None and not ctx.written((*at, "expected")):
            ctx.diags.emit("CE0102", f"assertion with operator `{a.operator}` needs `expected`",
                           ctx.at(at))
        if a.operator == "exists" and a.expected is not None:
            ctx.diags.emit("CE0214", "`expected` has no effect with operator `exists`: it "
                           "checks only that the expression yields a value (not null)",
                           ctx.key_at((*at, "expected")),
                           help="remove `expected`; to require a value, use `equals`")
        if a.operator == "regex" and isinstance(a.expected, str):
            check_regex(a.expected, 0, (*at, "expected"), ctx)
        if a.operator in ("gt", "gte", "lt", "lte") and a.expected is not None:
            _ordering_expected(a.operator, a.expected, (*at, "expected"), ctx)
        types = ("string", "number", "boolean", "array", "object", "null")
        if a.operator == "type" and a.expected not in types:
            emit_for_rows(ctx, "CE0105", f"operator `type` expects one of {', '.join(types)}",
                          (*at, "expected"), did_you_mean(str(a.expected), types))


# the labels classification_match gives an answer that is none of allowed_labels
# (stdlib_criteria/classification.ce, label_of): what each stands for, and the answers
# a listed one would be counted with
RESERVED_LABELS = {"(none)": ("an empty or missing file", "one that answers nothing"),
                   "(other)": ("an answer not in allowed_labels",
                               "one that answers anything else")}


def _reserved_labels(labels: list[str], path: Path, ctx: RuleContext) -> None:
    """CE0307: an allowed label spelt like one ce reserves. Listed as is, an agent that
    writes `(none)` and one that writes nothing count as one label in the suite's
    metrics and confusion matrix; in another case (`(None)`), both show, and a row
    expecting the listed one never matches an agent that answers nothing."""
    for j, label in enumerate(labels):
        if not isinstance(label, str) or label.strip().lower() not in RESERVED_LABELS:
            continue
        reserved = label.strip().lower()
        what, others = RESERVED_LABELS[reserved]
        if label == reserved:
            why = (f"`{label}` is the label ce gives {what}: an agent that answers "
                   f"`{label}` and {others} would count as one label")
        else:
            why = (f"`{label}` is spelt like `{reserved}`, the label ce gives {what}: "
                   "the suite's metrics and confusion matrix would show both")
        emit_for_rows(ctx, "CE0307", f"allowed label {why}", (*path, j),
                      f"name the label without parentheses (`{reserved[1:-1]}`); "
                      f"`{reserved}` is a label of every classification_match as it is")


def _tool_name_rule(name: str, at: Path, ctx: RuleContext) -> None:
    """A trace holds Claude Code's tool names (`tool_names`): another spelling matches no
    call, so the criterion would fail every run, said nowhere."""
    canon = canonical_spelling(name)
    if canon is not None:
        emit_for_rows(ctx, "CE0229", f"`tool_name: {name}` matches no tool call: traces "
                      f"name this tool `{canon}`, whichever agent ran", at,
                      f"did you mean `{canon}`?")


def _ordering_expected(operator: str, expected: Any, at: Path, ctx: RuleContext) -> None:
    """gt/gte/lt/lte compare two numbers or two strings: any other `expected` can never
    hold; a string that reads as a number compares as text ("10" < "9"), never with the
    document's numbers, which is rarely what was meant."""
    if isinstance(expected, bool) or not isinstance(expected, int | float | str):
        emit_for_rows(ctx, "CE0103", f"operator `{operator}` compares numbers or strings; "
                      "`expected` must be one", at)
        return
    if isinstance(expected, str) and _reads_as_number(expected):
        emit_for_rows(ctx, "CE0221", f"operator `{operator}` with the string {expected!r} "
                      "compares text: it fails on any number in the document", at,
                      f"write `expected: {expected.strip()}` to compare numbers")


def _reads_as_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("nan", "inf", "-inf", "+inf", "infinity",
                                        "-infinity", "+infinity")


def jmespath_call_error(node: Any) -> tuple[str, str | None] | None:
    """Why a parsed JMESPath expression can never be evaluated (a function JMESPath does
    not have, or called with the wrong number of arguments), with a help line, or None. jmespath only finds
    these when the expression runs, whatever the document."""
    from jmespath.functions import Functions

    table = Functions.FUNCTION_TABLE
    stack = [node]
    while stack:
        item = stack.pop()
        if not isinstance(item, dict):
            continue
        children = item.get("children") or []
        stack.extend(children)
        if item.get("type") != "function_expression":
            continue
        name = item.get("value")
        if name not in table:
            return f"unknown function {name}()", did_you_mean(str(name), sorted(table))
        signature = table[name]["signature"]
        variadic = bool(signature) and signature[-1].get("variadic", False)
        n = len(children)
        if (variadic and n < len(signature)) or (not variadic and n != len(signature)):
            plural = "" if len(signature) == 1 else "s"
            wanted = f"at least {len(signature)}" if variadic else str(len(signature))
            return f"{name}() takes {wanted} argument{plural}, given {n}", None
    return None


def check_regex(pattern: str | None, flags: int, path: Path, ctx: RuleContext,
                 flags_path: Path | None = None) -> None:
    if pattern is None or "${row." in pattern or flags < 0:
        return  # negative flags: the definition's range constraint reports them
    try:
        re.compile(pattern, flags & ~re.DEBUG)  # DEBUG would print on stdout
    except re.error as exc:
        emit_for_rows(ctx, "CE0111", f"invalid regular expression: {exc.msg}"
                      + (f" at position {exc.pos}" if exc.pos is not None else ""), path)
    except RecursionError:
        emit_for_rows(ctx, "CE0111", "invalid regular expression: nested too deeply to "
                      "compile", path)
    except (ValueError, OverflowError) as exc:
        emit_for_rows(ctx, "CE0111", f"invalid regex flags {flags}: {exc}", flags_path or path)


def check_dropped_entries(entries: list[Any], doc: Any, original: Any, roots: Any,
                          diags: Any, registry: Any, sources: dict[str, str]) -> None:
    """Criteria the schema dropped (`entries`: validate.Dropped at `success_criteria[i]`)
    get the rules that read only their other fields, with placeholders standing in for
    the broken ones (validate.stand_in). `original` maps a path of the merged task back to
    the file's; `registry`: the criteria language's (None: `check_criteria` off)."""
    from ce_lang.convert import converter
    from ce_lang.diagnostics import Diagnostics
    from ce_lang.lang.instances import check_instances
    from ce_lang.lower import lower_criterion
    from ce_lang.rule_context import RuleContext
    from ce_lang.spans import Span
    from ce_lang.validate import stand_in

    def source(p: Path) -> Path:  # paths under a dropped entry: its own inner lists
        return original(p, fixed=2)

    ctx = RuleContext(None, lambda p: doc.span(source(p)),  # type: ignore[arg-type]
                      lambda p: doc.key_span(source(p)), diags, (), False,
                      source_path=source, written=lambda p: source(p) in doc.key_spans,
                      roots=roots)
    for entry in sorted(entries, key=lambda e: e.path[1]):
        filled = stand_in(entry) if entry.broken else dict(entry.value)
        if filled is None:
            continue
        try:
            criterion = converter.structure(filled, C.Criterion)
        except Exception:  # nothing to check it with (its errors are reported)
            continue
        i = entry.path[1]
        here = ("success_criteria", i)

        def at(p: Path, h: Path = here) -> Span:  # check_instances says index 0
            return ctx.at((*h, *p[2:]))

        def key_at(p: Path, h: Path = here) -> Span:
            return ctx.key_at((*h, *p[2:]))

        # a standard criterion's arguments were checked by the schema walker (the
        # placeholders would only add noise); an inline expression's and a user
        # criterion's are checked here only
        own = isinstance(criterion, C.UserCall | C.ExprCriterion) and not any(
            "${row." in str(v) for v in filled.values())
        inst = None
        if registry is not None:
            threshold = lower_criterion(i, criterion).pass_threshold
            inst = check_instances([criterion], [threshold], None, registry,
                                   diags if own else Diagnostics(), at, key_at,
                                   sources)[0]
        dropped_criterion_rules(ctx, i, criterion, entry.broken, inst)
