"""Checking `.ce` modules: records (fields, `require`s, shorthand) and criterion
definitions (parameters and defaults, `require`s, lets, the score, outputs), each
expression through the `Checker`. A checked criterion goes into the `Registry`; one
with errors is marked broken, so a task that calls it gets one clear diagnostic.
"""

from __future__ import annotations

from ce_lang.diagnostics import Diagnostics, did_you_mean
from ce_lang.lang import ast as A
from ce_lang.lang.builtins import GLOBALS
from ce_lang.lang.checker import (
    FIELD_PLACEHOLDER,
    PLACEHOLDER,
    REQUIRE_KINDS,
    RESULT_KINDS,
    CheckedDef,
    Checker,
    Registry,
)
from ce_lang.lang.records import Field, RecordType
from ce_lang.lang.types import ANY, BOOL, STR, T, assignable, is_numeric


def check_module(module: A.Module, registry: Registry, diags: Diagnostics, origin: str
                 ) -> list[CheckedDef]:
    for rec in module.records:
        if rec.name in registry.records:
            diags.emit("CE0606", f"record `{rec.name}` is already defined", rec.span)
            continue
        fields, defaults = {}, {}
        for p in rec.fields:
            fields[p.name] = Field(registry.resolve_type(p.type, diags), "const", p.doc)
            if p.default is not None:
                defaults[p.name] = p.default
        checker = Checker(registry, diags)
        types = {name: f.type for name, f in fields.items()}
        for req in rec.requires:
            check_require(req, types, checker, diags, what="field")
        shorthand = rec.shorthand
        if shorthand is not None and (shorthand not in types or types[shorthand].name != "str"):
            what = "not a field" if shorthand not in types else f"of type {types[shorthand]}"
            diags.emit("CE0607", f"`shorthand {shorthand}`: `{shorthand}` is {what}; a "
                       "record's shorthand names one of its string fields",
                       rec.shorthand_span or rec.span,
                       help=did_you_mean(shorthand, [n for n, t in types.items()
                                                     if t.name == "str"]))
            shorthand = None
        registry.records[rec.name] = RecordType(rec.name, fields, {}, rec.doc, rec.requires,
                                                rec.source, shorthand)
        registry.record_defaults[rec.name] = defaults
    out = []
    reserved: set[str] = set()
    if not origin.startswith("stdlib"):  # the standard criteria are the schema's source
        from ce_lang.schema.criteria import Criterion

        reserved = {*Criterion.ALIASES, *Criterion.REMOVED, "expr"}
    for defn in module.criteria:
        if defn.name in reserved:
            diags.emit("CE0606", f"`{defn.name}` is reserved by the task format (it could never "
                       "be called)", defn.span)
            continue
        errors_before = sum(d.severity == "error" for d in diags)
        checked = check_definition(defn, registry, diags)
        if defn.name in registry.criteria:
            prev = registry.origin[defn.name]
            diags.emit("CE0606", f"criterion `{defn.name}` is already defined ({prev})",
                       defn.span)
            continue
        registry.criteria[defn.name] = checked
        registry.origin[defn.name] = origin
        if sum(d.severity == "error" for d in diags) > errors_before:
            registry.broken.add(defn.name)
        out.append(checked)
    return out


def check_definition(defn: A.CriterionDef, registry: Registry, diags: Diagnostics
                     ) -> CheckedDef:
    checker = Checker(registry, diags)
    params: dict[str, T] = {}
    defaults: dict[str, A.Node] = {}
    for p in defn.params:
        if p.name in params:
            diags.emit("CE0606", f"parameter `{p.name}` is declared twice", p.span)
            continue
        t = registry.resolve_type(p.type, diags)
        params[p.name] = t
        if p.default is not None:
            dt = checker.check(p.default, {})
            if checker.eff(p.default):
                diags.emit("CE0607", f"the default of `{p.name}` must be a constant",
                           p.default.span)
            elif not assignable(dt, t) and not (t.name == "regex" and dt.name == "str"):
                diags.emit("CE0603", f"default of `{p.name}` has type {dt}, not {t}",
                           p.default.span)
            defaults[p.name] = p.default
    if defn.result not in RESULT_KINDS:
        diags.emit("CE0607", f"unknown result kind `{defn.result}`",
                   defn.result_span or defn.span,
                   help=did_you_mean(defn.result, RESULT_KINDS)
                   or "one of " + ", ".join(RESULT_KINDS))
    for req in defn.requires:
        check_require(req, params, checker, diags)
    scope = dict(params)
    lets: dict[str, T] = {}
    for let in defn.lets:
        if let.name in scope or let.name in GLOBALS:
            diags.emit("CE0606", f"`{let.name}` is already defined", let.span)
            checker.check(let.expr, scope)  # still report errors inside it
            continue
        lets[let.name] = scope[let.name] = checker.check(let.expr, scope)
    score_type = ANY
    if defn.score is None:
        diags.emit("CE0607", f"criterion `{defn.name}` has no `score = ...`", defn.span)
    else:
        score_type = checker.check(defn.score, scope)
        if not (is_numeric(score_type) or score_type == BOOL or score_type.name == "any"):
            diags.emit("CE0603", f"the score must be a number or a boolean, found {score_type}",
                       defn.score.span)
        elif score_type.name == "int" and defn.result in ("binary", "fraction"):
            # `score = 1` where a float in [0, 1] is meant: almost always a slip (a count
            # clamped to 1, an integer division); say which
            diags.emit("CE0603", f"a {defn.result} score is a float in [0, 1] (or a boolean), "
                       "found int", defn.score.span,
                       help="write 1.0 / 0.0, or divide as floats: `float(n) / total`")
    outputs = {}
    output_nodes = {}
    for out in defn.outputs:
        outputs[out.name] = checker.check(out.expr, scope)
        output_nodes[out.name] = out.expr
    if defn.result == "classification":
        for name in ("observed", "expected"):
            if name not in outputs:
                diags.emit("CE0607", f"a classification criterion defines `output {name} = "
                           "...` (a string label)", defn.span)
            elif not assignable(outputs[name], STR):
                diags.emit("CE0603", f"output `{name}` must be a string, found {outputs[name]}",
                           output_nodes[name].span)
    effects = frozenset().union(*checker.tables.effects.values()) if checker.tables.effects \
        else frozenset()
    return CheckedDef(defn, params, defaults, lets, score_type, effects, checker.tables)


def check_require(req: A.Require, params: dict[str, T], checker: Checker,
                  diags: Diagnostics, what: str = "parameter") -> None:
    """A constraint reads the parameters only (constants when a task binds them): no
    `let`, no trace, no effect; it is a boolean; its message names parameters. In a
    `record` declaration (`what="field"`) it reads the record's fields only."""
    if req.kind not in REQUIRE_KINDS:
        diags.emit("CE0607", f"unknown `require` kind `{req.kind}`", req.kind_span or req.span,
                   help=did_you_mean(req.kind, list(REQUIRE_KINDS))
                   or "one of " + ", ".join(REQUIRE_KINDS))
    t = checker.check(req.cond, dict(params))
    effects = checker.eff(req.cond)
    if effects:
        shown = {"trace": "the trace", "workspace": "the workspace", "exec": "commands",
                 "model": "a model"}
        diags.emit("CE0607", "a `require` condition is checked when the task compiles: it can "
                   f"read the {what}s only, not "
                   + ", ".join(shown.get(e, e) for e in sorted(effects)), req.cond.span)
    elif t != BOOL and t.name != "any":
        diags.emit("CE0603", f"a `require` condition must be a boolean, found {t}",
                   req.cond.span)
    text = req.message + (req.help or "")
    for name in PLACEHOLDER.findall(text) + FIELD_PLACEHOLDER.findall(text):
        if name not in params:
            diags.emit("CE0607", f"the message of `require` shows `{{{name}}}`, which is not a "
                       f"{what}", req.span, help=did_you_mean(name, list(params)))
