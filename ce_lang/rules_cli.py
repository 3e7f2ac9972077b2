"""Rules for recorded CLIs (coder_eval 0.12.16): `sandbox.record_cli` entries and their
response rules, and the argv patterns they share with the `cli_called` criterion, which
one matcher (`ce_lang.argv_match`) evaluates. A pattern that cannot mean what it looks
like (a flag in a verb, a predicate on an ignored flag, a rule no call can reach) is
reported at its field."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ce_lang.argv_match import is_number
from ce_lang.schema.cli import (
    RECORD_CLI_DIR,
    RECORD_CLI_LOG_NAME,
    RECORD_CLI_RESERVED,
    FlagMatch,
)
from ce_lang.spans import Path

if TYPE_CHECKING:
    from ce_lang.rule_context import RuleContext


def record_cli_rules(ctx: RuleContext) -> None:
    """`sandbox.record_cli`: each entry writes `cli_mocks/<tool>`, so a name must be a bare
    executable the harness does not itself need, once; every response rule must be able
    to answer (a rule below a more general one never does)."""
    seen: dict[str, int] = {}
    for i, entry in enumerate(ctx.task.sandbox.record_cli):
        here = ("sandbox", "record_cli", i)
        at = ctx.at((*here, "tool"))
        name = entry.tool.lower()
        if name.removesuffix(".exe") in RECORD_CLI_RESERVED:
            ctx.diags.emit("CE0111", f"record_cli tool {entry.tool!r} is reserved: shadowing "
                           "it breaks the harness itself (the shim's interpreter, or the "
                           "shell criteria run in)", at,
                           notes=("reserved: " + ", ".join(sorted(RECORD_CLI_RESERVED)),))
        elif name == RECORD_CLI_LOG_NAME or name.endswith((".cmd", ".bat")):
            ctx.diags.emit("CE0111", f"record_cli tool {entry.tool!r} would overwrite a file "
                           f"the recorder writes in {RECORD_CLI_DIR}/", at)
        elif name in seen:
            ctx.diags.emit("CE0213", f"record_cli tool {entry.tool!r} is already shadowed by "
                           f"record_cli[{seen[name]}]", at,
                           help="merge the two entries (responses answer different calls)")
        seen.setdefault(name, i)
        specs = []
        for j, response in enumerate(entry.responses):
            when = (*here, "responses", j, "when")
            cli_match_rules(response.when, when, ctx, rule=True)
            specs.append(_spec_of(response.when))
        for later, spec in enumerate(specs):
            for earlier, prior in enumerate(specs[:later]):
                if prior == spec:
                    why = "is the same pattern as"
                elif _claims(prior, spec):
                    why = "can never answer: every call it matches is claimed by the more general"
                else:
                    continue
                ctx.diags.emit(
                    "CE0111", f"responses[{later}] {why} responses[{earlier}] (the first "
                    "matching rule answers)", ctx.at((*here, "responses", later, "when")),
                    help="put the specific rule above the general one, or drop the duplicate")
                break


def _spec_of(m) -> dict:
    from ce_lang.argv_match import match_spec
    from ce_lang.convert import converter

    raw = converter.unstructure(m)
    return match_spec(raw["verb"], raw["verb_any_of"], raw["positional"], raw["flags"],
                      raw["value_flags"], raw["ignore_flags"])


def _claims(prior: dict, spec: dict) -> bool:
    """A verb-only rule whose verb prefixes every verb of a later flag-free rule parsed
    the same way answers everything the later one would (the sound case only)."""
    return (prior["positional"] is None and prior["flags"] is None and spec["flags"] is None
            and prior["value_flags"] == spec["value_flags"]
            and prior["ignore_flags"] == spec["ignore_flags"] and bool(spec["verbs"])
            and bool(prior["verbs"])
            and all(any(v[:len(p)] == p for p in prior["verbs"]) for v in spec["verbs"]))


def cli_match_rules(m, here: Path, ctx: RuleContext, rule: bool) -> None:
    """What a `cli_called` criterion and a response rule's `when:` share: patterns that
    could never mean what they look like are errors, at the field that says so."""
    from ce_lang.rules_criterion import check_regex  # it imports this module

    d = ctx.diags
    label = "a response rule's `when`" if rule else "cli_called"
    if m.verb is not None and m.verb_any_of is not None:
        d.emit("CE0109", "`verb` and `verb_any_of` exclude each other",
               ctx.key_at((*here, "verb_any_of")), help="keep one of them")
    if m.verb_any_of is not None and not m.verb_any_of:
        d.emit("CE0110", "`verb_any_of` must list at least one verb",
               ctx.at((*here, "verb_any_of")), help="drop the field to match any verb")
    verbs: list[tuple[Path, str]] = []
    if m.verb is not None:
        verbs.append(((*here, "verb"), m.verb))
    for j, v in enumerate(m.verb_any_of or ()):
        verbs.append(((*here, "verb_any_of", j), v))
    for path, v in verbs:
        if not v.split():
            d.emit("CE0110", "a blank verb matches every invocation", ctx.at(path))
            continue
        for token in v.split():
            if token.startswith("-") and token != "-" and not is_number(token.lstrip("-")):
                name = token.lstrip("-").split("=")[0]
                d.emit("CE0111", f"verb token {token!r} is a flag: a verb matches the non-flag "
                       "arguments only, so it could never match", ctx.at(path),
                       help=f"put it in `flags`, e.g. flags: {{{name}: <value>}}")
                break
    if m.verb_any_of:
        tokens = [v.split() for v in m.verb_any_of]
        for j, a in enumerate(tokens):
            for k, b in enumerate(tokens[:j]):
                if not a or not b:
                    continue
                short, long_ = (b, a) if len(b) <= len(a) else (a, b)
                if long_[:len(short)] == short:
                    what = ("lists {!r} twice".format(" ".join(a)) if a == b else
                            f"entry {' '.join(short)!r} is a prefix of {' '.join(long_)!r}: "
                            "the shorter already accepts every call the longer does")
                    d.emit("CE0111", f"`verb_any_of` {what}",
                           ctx.at((*here, "verb_any_of", j)),
                           notes=(f"against verb_any_of[{k}]",))
                    break
    if m.positional is not None and not m.positional:
        d.emit("CE0110", "`positional: []` asserts nothing", ctx.at((*here, "positional")),
               help="list the arguments you expect, or drop the field")
    owner: dict[str, str] = {}
    for key, pred in (m.flags or {}).items():
        at = (*here, "flags", key)
        if isinstance(pred, str):
            pred = FlagMatch(equals=pred)
        chosen = [p for p in ("equals", "contains", "matches_regex", "any_of")
                  if getattr(pred, p) is not None]
        chosen += [p for p in ("present", "absent") if getattr(pred, p)]
        if len(chosen) != 1:
            d.emit("CE0109" if chosen else "CE0102",
                   f"flag `{key}` needs exactly one predicate, found "
                   + (", ".join(chosen) if chosen else "none"), ctx.at(at),
                   help="one of equals, contains, matches_regex, any_of, present, absent "
                        "(a bare scalar means equals)")
        if pred.any_of is not None and not pred.any_of:
            d.emit("CE0110", "`any_of` must list at least one value (an empty list matches "
                   "nothing, so a guard on it passes vacuously)", ctx.at((*at, "any_of")))
        if pred.flags and pred.matches_regex is None:
            d.emit("CE0109", "`flags` applies to matches_regex only", ctx.key_at((*at, "flags")))
        if pred.matches_regex is not None:
            check_regex(pred.matches_regex, pred.flags, (*at, "matches_regex"), ctx,
                         (*at, "flags"))
        if key in pred.aliases:
            d.emit("CE0111", f"flag `{key}` lists itself in aliases", ctx.at((*at, "aliases")))
        for name in (key, *pred.aliases):
            if owner.get(name, key) != key:
                d.emit("CE0111", f"flag name {name!r} belongs to both `{owner[name]}` and "
                       f"`{key}`: a flag can belong to one predicate only", ctx.at(at))
            owner.setdefault(name, key)
    ignored = sorted(set(owner) & set(m.ignore_flags))
    if ignored:
        names = ", ".join(f"`{n}`" for n in ignored)
        d.emit("CE0111", f"{names} {'is' if len(ignored) == 1 else 'are'} in `ignore_flags`, "
               "which drops the flag before predicates run: the predicate could never hold",
               ctx.at((*here, "flags", owner[ignored[0]])),
               help="remove it from ignore_flags (the criterion ignores `output` by default: "
                    "set ignore_flags: [])" if not rule else "remove it from ignore_flags")
    if rule and not (m.verb or m.verb_any_of or m.positional or m.flags):
        d.emit("CE0102", f"{label} needs at least one of verb, verb_any_of, positional, "
               "flags", ctx.at(here),
               help="a rule matching every call is the entry's own exit_code/stdout/stderr")
