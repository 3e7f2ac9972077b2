"""`ce criteria`: the standard (and your own) criteria, as documentation."""

from __future__ import annotations

import sys

import click


@click.group("criteria")
def criteria_cmd() -> None:
    """Browse criterion definitions: signatures, docs, effects, early-stop rules.

    \b
      ce criteria list                       every standard criterion, one line each
      ce criteria show command_executed      its full definition and documentation
      ce criteria show my_check -f mine.ce   a criterion from your own .ce file
      ce criteria builtins                   the functions definitions can call
      ce criteria types                      the record types: Trace, ToolCall, ...
    """


def _registry(files: tuple[str, ...]):
    from ce_lang.api import Diagnostics, load_file, render_human, user_registry

    registry = user_registry()
    diags = Diagnostics()
    sources = {}
    for f in files:
        load_file(f, registry, diags)
        try:
            with open(f, encoding="utf-8") as fh:
                sources[f] = fh.read()
        except (OSError, UnicodeDecodeError):  # load_file said why (CE0611)
            pass
    if diags:
        click.echo(render_human(diags, sources), err=True, nl=False)
        if diags.has_errors:
            sys.exit(1)
    return registry


# the --format values of the other commands, where -f is --format
_FORMAT_WORDS = ("human", "html", "json", "junit", "md", "sarif", "text")


def _no_format_words(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
                     ) -> tuple[str, ...]:
    """`ce criteria list -f json`, as -f is elsewhere: a usage error that says so, not
    "cannot read criteria file 'json'" (a file of that name is loaded)."""
    import os

    for f in value:
        if f.lower() in _FORMAT_WORDS and not os.path.exists(f):
            raise click.UsageError(
                f"no file {f!r}: -f is --file here (a .ce file of your own criteria), not "
                "--format as in `ce report`/`runs`/`explain`; `ce criteria` prints text only",
                ctx)
    return value


_files = click.option("-f", "--file", "files", multiple=True, type=click.Path(dir_okay=False),
                      callback=_no_format_words,
                      help="Also load definitions from this .ce file (repeatable).")


@criteria_cmd.command("list")
@_files
def list_cmd(files: tuple[str, ...]) -> None:
    """One line per criterion: name, result kind, effects, first line of its docs.

    \b
    Examples:
      ce criteria list
      ce criteria list -f checks.ce     with the criteria of your own file
    """
    from ce_lang.api import effect_rank

    registry = _registry(files)
    width = max(len(n) for n in registry.criteria)
    for name in sorted(registry.criteria):
        checked = registry.criteria[name]
        doc = " ".join(checked.defn.doc.split()).split(". ")[0].rstrip(".") \
            if checked.defn.doc else ""
        effect = effect_rank(checked.effects)
        origin = "" if registry.origin[name].startswith("stdlib") else f"  [{registry.origin[name]}]"
        click.echo(f"{name:<{width}}  {checked.defn.result:<14} {effect:<9}  {doc}{origin}")


@criteria_cmd.command("show")
@click.argument("name")
@_files
def show_cmd(name: str, files: tuple[str, ...]) -> None:
    """The definition of NAME: documentation, signature, effects and early stop.

    \b
    Examples:
      ce criteria show file_contains
      ce criteria show my_check -f checks.ce
    """
    from ce_lang.api import did_you_mean

    registry = _registry(files)
    checked = registry.criteria.get(name)
    alias = _alias(name) if checked is None else None
    if alias is not None:  # command_not_executed: command_executed with fixed counts
        target, fixed = alias
        click.echo(f"# {name} is {target} with "
                   + ", ".join(f"{k}: {v}" for k, v in fixed.items())
                   + " (an alias; those fields cannot be set otherwise)\n")
        name, checked = target, registry.criteria.get(target)
    if checked is None:
        hint = did_you_mean(name, list(registry.criteria))
        raise click.BadParameter(f"no criterion {name!r}" + (f"; {hint}" if hint else ""),
                                 param_hint="NAME")
    click.echo(render_definition(checked, registry.origin[name], registry))


def _alias(name: str):
    """(target, fixed fields) of a criterion type alias, or None."""
    from ce_lang.api import CRITERION_ALIASES

    return CRITERION_ALIASES.get(name)


def _records_used(checked, registry) -> list:
    """The declared records the parameters take (and the records those take), in order."""
    seen: dict[str, object] = {}

    def visit(t) -> None:
        for arg in t.args:
            visit(arg)
        record = registry.records.get(t.name)
        if record is not None and record.source and t.name not in seen:
            seen[t.name] = record
            for field in record.fields.values():
                visit(field.type)

    for t in checked.params.values():
        visit(t)
    return list(seen.values())


def render_definition(checked, origin: str, registry=None) -> str:
    d = checked.defn
    lines = [f"{d.name}  ({d.result}; defined in {origin})", ""]
    if d.doc:
        lines += [d.doc, ""]
    lines.append("Parameters:")
    for p in d.params:
        default = ""
        if p.default is not None:
            default = " = " + _node_text(p.default, d)
        lines.append(f"  {p.name}: {checked.params.get(p.name, p.type)}{default}")
        if p.doc:
            lines.append(f"      {p.doc}")
    lines.append("")
    effects = ", ".join(sorted(checked.effects)) or "pure"
    lines.append(f"Effects: {effects}")
    lines.append(_early_stop_line(checked))
    from ce_lang.api import rescore_offline

    lines.append(f"Re-scoring offline: {rescore_offline(checked.effects)}.")
    lines += ["", "Definition:", "", d.source.rstrip()]
    records = _records_used(checked, registry) if registry is not None else []
    if records:  # their fields' docs and `require` constraints bind with the arguments
        lines += ["", "Records:"]
        for record in records:
            lines += ["", record.source.rstrip()]
    return "\n".join(lines)


# What a criterion with these effects does that only the finished run allows.
POST_HOC = {"exec": "runs a command", "model": "calls a model",
            "workspace": "reads the workspace"}


def _early_stop_line(checked) -> str:
    effects = checked.effects
    if effects & set(POST_HOC):
        return ("Early stop: cannot be armed (it "
                + " and ".join(POST_HOC[k] for k in sorted(effects & set(POST_HOC)))
                + ", so it is graded after the run).")
    if "trace" in effects:
        return ("Early stop: depends on its arguments (" + _with_defaults(checked) + "); "
                "`ce compile` checks every `stop_when` against the actual arguments, and "
                "`--emit` records can_decide_pass / can_decide_fail per criterion.")
    return "Early stop: cannot be armed (it does not read the trace)."


def _with_defaults(checked) -> str:
    from ce_lang.api import analyze, default_value

    required = [n for n, t in checked.params.items()
                if n not in checked.defaults and not t.optional]
    if required:
        return "decided per task from " + ", ".join(required)
    params = {n: default_value(checked.defaults[n], t) for n, t in checked.params.items()
              if n in checked.defaults}
    d, _ = analyze(checked.defn.score, checked.defn.lets, params, 0.9,
                   result_bool=str(checked.score_type) == "bool")
    what = ("pass and fail" if d.can_pass and d.can_fail else "pass" if d.can_pass
            else "fail" if d.can_fail else "nothing")
    return f"with the defaults it can decide {what}"


def _node_text(node, d) -> str:
    span = node.span
    from ce_lang.api import source_text

    text = source_text(span.file)
    return text[span.offset:span.end_offset] if text and span.offset >= 0 else "..."


@criteria_cmd.command("builtins")
def builtins_cmd() -> None:
    """Every builtin function with its signatures, effect and documentation.

    \b
    Examples:
      ce criteria builtins
      ce criteria builtins | grep -A3 '^read_json'
    """
    from ce_lang.api import BUILTINS, signature_text

    for name in sorted(BUILTINS):
        fn = BUILTINS[name]
        for o in fn.overloads:
            params = ", ".join(signature_text(p) for p in o.params)
            click.echo(f"{name}({params}) -> {signature_text(o.ret)}   [{fn.effect}]")
        click.echo(f"    {fn.doc}")


@criteria_cmd.command("types")
@click.argument("names", nargs=-1)
@_files
def types_cmd(names: tuple[str, ...], files: tuple[str, ...]) -> None:
    """The record types of the criteria language, with their fields and methods.

    \b
    Built in: Trace (what `trace` is in a definition), ToolCall, Message, CommandResult,
    JsonFile, Verdict, CliCall, CliLog. Then the records the standard criteria declare
    (RegexPattern, Assertion, FlagMatch) and those of your -f files. Each field shows its
    type and, for the trace's records, how it can change while the agent still runs
    (what early stop relies on).

    \b
      ce criteria types                  every record
      ce criteria types Trace ToolCall   only these
      ce criteria types -f checks.ce     with the records of your own file
    """
    from ce_lang.api import did_you_mean

    registry = _registry(files)
    builtin = [n for n in registry.records if n in _BUILTIN_ORDER]
    builtin.sort(key=_BUILTIN_ORDER.index)
    declared = sorted(n for n in registry.records if n not in _BUILTIN_ORDER)
    shown = builtin + declared
    for name in names:
        if name not in registry.records:
            hint = did_you_mean(name, shown)
            raise click.BadParameter(f"no record type {name!r}" + (f"; {hint}" if hint else ""),
                                     param_hint="NAMES")
    if names:
        shown = [n for n in shown if n in names]
    blocks = [render_record(name, registry) for name in shown]
    click.echo("\n\n".join(blocks))


# the built-in records, most used first (the order `ce criteria types` prints)
_BUILTIN_ORDER = ["Trace", "ToolCall", "Message", "CommandResult", "JsonFile", "Verdict",
                  "CliLog", "CliCall"]
_MONO = {"const": "", "up": "only rises while the agent runs",
         "down": "only falls while the agent runs", "none": "may change while the agent runs",
         "grows": "only gets longer while the agent runs"}


def render_record(name: str, registry) -> str:
    from ce_lang.api import signature_text

    record = registry.records[name]
    origin = "built in" if name in _BUILTIN_ORDER else \
        registry_origin_of_record(record)
    lines = [f"{name}  ({origin})"]
    if record.doc:
        lines.append("  " + " ".join(record.doc.split()))
    if record.shorthand:
        lines.append(f"  shorthand: a bare string means {{{record.shorthand}: <string>}}")
    width = max((len(f) for f in record.fields), default=0)
    twidth = max((len(signature_text(f.type)) for f in record.fields.values()), default=0)
    lines.append("  fields:")
    for fname, field in record.fields.items():
        note = " ".join(field.doc.split())
        mono = _MONO.get(field.mono, "")
        if mono and name in _BUILTIN_ORDER:
            note = f"{note} ({mono})" if note else f"({mono})"
        lines.append(f"    {fname:<{width}}  {signature_text(field.type):<{twidth}}  {note}"
                     .rstrip())
    if record.methods:
        lines.append("  methods:")
        for mname, m in record.methods.items():
            params = ", ".join(signature_text(p) for p in m.params)
            lines.append(f"    {mname}({params}) -> {signature_text(m.ret)}")
            lines.append(f"        {' '.join(m.doc.split())}")
    return "\n".join(lines)


def registry_origin_of_record(record) -> str:
    """Where a declared record comes from: its span's file, shown by name."""
    import os

    span = getattr(record.requires[0], "span", None) if record.requires else None
    if span is None:
        return "declared in a .ce file"
    return f"declared in {os.path.basename(str(span.file))}"
