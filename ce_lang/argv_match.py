"""Structured argv matching: the one matcher `record_cli` shims and `cli_called` share.

A `record_cli` response rule asks, inside the sandbox, which canned answer an invocation
gets; the `cli_called` criterion asks afterwards whether a recorded invocation happened.
Both evaluate the same pattern with this module, so the pattern that serves a response
is the pattern that grades it.

The shim generator copies this file's source verbatim into every generated shim (which
runs under whatever python3 the sandbox has, where ce is not installed). So: standard
library only, no ce imports, nothing newer than Python 3.8 at run time (annotations stay
strings), and plain dicts in and out.

A match spec (see `match_spec`):
    {"verbs": [[token, ...], ...],      # accepted verb spellings; [] = any verb
     "positional": [str, ...] | None,   # non-flag arguments after the verb (a prefix)
     "flags": {name: predicate} | None, # predicates, every one must hold
     "value_flags": [str, ...],         # flags that consume the next token
     "ignore_flags": [str, ...]}        # flags dropped before matching
A predicate: exactly one of equals / contains / matches_regex / any_of / present /
absent, plus `aliases` (other names of the same flag) and `flags` (re flags).
"""

from __future__ import annotations

import re

PREDICATES = ("equals", "contains", "matches_regex", "any_of", "present", "absent")
_PREDICATE_DEFAULTS = {"equals": None, "contains": None, "matches_regex": None,
                       "any_of": None, "present": False, "absent": False, "aliases": [],
                       "flags": 0}


def predicate(value):
    """A flag predicate with every key present; a bare string means `equals`."""
    if isinstance(value, str):
        value = {"equals": value}
    out = dict(_PREDICATE_DEFAULTS)
    out.update(value)
    out["aliases"] = list(out["aliases"] or [])
    out["flags"] = int(out["flags"] or 0)
    return out


def verb_spellings(verb, verb_any_of):
    """Each accepted verb as its token list; [] when there is no verb constraint."""
    if verb is not None:
        return [verb.split()]
    if verb_any_of is not None:
        return [v.split() for v in verb_any_of]
    return []


def match_spec(verb=None, verb_any_of=None, positional=None, flags=None,
               value_flags=("output",), ignore_flags=()):
    """The facets of a `cli_called` criterion or a `when:` block, lowered to plain data
    (JSON-serializable: a shim embeds it as a literal)."""
    return {
        "verbs": verb_spellings(verb, verb_any_of),
        "positional": list(positional) if positional is not None else None,
        "flags": ({name: predicate(p) for name, p in flags.items()} if flags else None),
        "value_flags": list(value_flags),
        "ignore_flags": list(ignore_flags),
    }


def is_number(text):
    """`-1` is a value, not a flag named `1`."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def needs_value(pred):
    """A presence predicate never makes its flag consume the next token: asserting a
    switch must not swallow the positional after it."""
    return not (pred["present"] or pred["absent"])


def split_flags(argv, ignore, value_flags, known=frozenset()):
    """(non-flag arguments, {flag name: [values]}) of `argv`.

    Only `value_flags` consume the following token; every other flag is a switch (value
    ""), so `delete --yes proj-1` keeps proj-1 positional. `--name=value` binds directly.
    `--` ends the flags (and is dropped); a lone `-` and a bare negative number are
    positional. Clustered short flags (`-rf`) split into single letters unless the whole
    name is declared (`known`, or a value flag); `-fVALUE` binds when `f` takes a value.
    Ignored names are dropped with their values. Repeated flags accumulate."""
    positional = []
    flags = {}

    def record(name, value):
        if name not in ignore:
            flags.setdefault(name, []).append(value)

    i = 0
    end_of_flags = False
    while i < len(argv):
        token = argv[i]
        i += 1
        if end_of_flags or not token.startswith("-") or token == "-":
            positional.append(token)
            continue
        if token == "--":
            end_of_flags = True
            continue
        if "=" in token:
            name, _, value = token.partition("=")
            record(name.lstrip("-"), value)
            continue
        name = token.lstrip("-")
        declared = name in value_flags or name in known
        if not declared and is_number(name):
            positional.append(token)
            continue
        if not declared and not token.startswith("--") and len(name) > 1:
            if name[0] in value_flags:
                record(name[0], name[1:])
            else:
                for char in name:
                    record(char, "")
            continue
        if name in value_flags and i < len(argv):
            record(name, argv[i])
            i += 1
        else:
            record(name, "")
    return positional, flags


def flag_matches(pred, values):
    """Does one predicate hold? `values` is None when the flag was not passed; a value
    predicate holds when any of a repeated flag's values satisfies it."""
    if pred["absent"]:
        return values is None
    if pred["present"]:
        return values is not None
    if values is None:
        return False
    if pred["equals"] is not None:
        return any(v == pred["equals"] for v in values)
    if pred["contains"] is not None:
        return any(pred["contains"] in v for v in values)
    if pred["any_of"] is not None:
        allowed = set(pred["any_of"])
        return any(v in allowed for v in values)
    if pred["matches_regex"] is not None:
        regex = re.compile(pred["matches_regex"], pred["flags"] & ~re.DEBUG)
        return any(regex.search(v) is not None for v in values)
    raise ValueError("flag predicate has none of " + ", ".join(PREDICATES))


def parse(spec, argv):
    """`argv` split the way `spec` declares its flags: (non-flag arguments, flags)."""
    preds = spec["flags"] or {}
    ignore = frozenset(spec["ignore_flags"])
    value_flags = frozenset(spec["value_flags"]).union(
        n for key, p in preds.items() if needs_value(p) for n in (key, *p["aliases"]))
    known = frozenset(n for key, p in preds.items() for n in (key, *p["aliases"])) | ignore
    return split_flags(argv, ignore, value_flags, known)


def argv_matches(spec, argv):
    """Does `argv` (the arguments after the tool name) satisfy every facet of `spec`?

    The verb is an ordered, token-wise prefix of the non-flag arguments (`labellings
    confirm` never matches `labellings unconfirm`); `positional` is a prefix of what
    follows it; each flag predicate must hold over the values gathered under the flag's
    name and its aliases; flags the spec does not name are ignored."""
    positional, flags = parse(spec, argv)
    offset = 0
    if spec["verbs"]:
        hit = next((v for v in spec["verbs"] if positional[:len(v)] == list(v)), None)
        if hit is None:
            return False
        offset = len(hit)
    expected = spec["positional"]
    if expected is not None and positional[offset:offset + len(expected)] != list(expected):
        return False
    for key, pred in (spec["flags"] or {}).items():
        values = [v for n in (key, *pred["aliases"]) for v in flags.get(n, [])]
        if not flag_matches(pred, values or None):
            return False
    return True


def select_rule(rules, argv):
    """(index, rule) of the first rule whose `when` spec matches `argv`, or None. First
    match wins; stateless, so the same argv always gets the same answer."""
    for index, rule in enumerate(rules):
        if argv_matches(rule["when"], argv):
            return index, rule
    return None
