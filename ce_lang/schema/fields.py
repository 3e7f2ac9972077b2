"""How schema classes declare their rules.

Each attrs field carries a `Rule` in its metadata: documentation, numeric bounds,
non-emptiness, how layers merge it, and what kind of path it holds. One generic walker
(`ce_lang.validate`) enforces the rules, so validation lives in the schema and nowhere else.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

REQUIRED = attrs.NOTHING


@attrs.frozen
class Rule:
    doc: str = ""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    non_empty: bool = False
    # merge strategy across config layers: "merge" (mappings per key, else replace),
    # "replace", "append" (lower layers first), "append_reverse" (higher layers first)
    merge: str = "merge"
    # "workspace" (relative, stays inside the sandbox), "task" (a host file, must exist),
    # "task_dir" (a host directory, must exist); a host path is relative to the file it
    # is written in: the task file, or the experiment file for an experiment's settings
    path: str | None = None
    partial: bool = False  # nested mapping where required fields may be omitted (layers)
    pattern: str | None = None  # a regex the string must fully match
    pattern_hint: str = ""
    choices: Any = None  # (value) -> allowed strings: choices known at run time (plugins)


def spec(default: Any = REQUIRED, *, factory: Any = None, **rule: Any) -> Any:
    """An attrs field with a `Rule`; `factory` builds mutable defaults."""
    if factory is not None:
        return attrs.field(factory=factory, metadata={"rule": Rule(**rule)})
    return attrs.field(default=default, metadata={"rule": Rule(**rule)})


def rule_of(field: attrs.Attribute) -> Rule:
    return field.metadata.get("rule", _DEFAULT_RULE)


_DEFAULT_RULE = Rule()


class Tagged:
    """Base of a tagged union: subclasses are chosen by the value of `TAG_FIELD`."""

    TAG_FIELD: ClassVar[str] = "type"
    # tag -> class, filled by `register`
    MEMBERS: ClassVar[dict[str, type]]
    # tag -> migration message for tags that no longer exist
    REMOVED: ClassVar[dict[str, str]] = {}
    # tag -> (real tag, forced field values)
    ALIASES: ClassVar[dict[str, tuple[str, dict[str, Any]]]] = {}
    KIND: ClassVar[str] = "type"
    # the class validating the common fields of members defined outside the schema
    USER_BASE: ClassVar[type | None] = None


def register(base: type[Tagged], tag: str):
    def deco(cls: type) -> type:
        base.MEMBERS[tag] = cls
        return cls

    return deco


# Keys that used to exist on a class, with the message that tells the user what to do.
REMOVED_FIELDS_ATTR = "__ce_removed__"
# a record's help for unknown keys a user is likely to write there (key -> help line)
UNKNOWN_HELP_ATTR = "__ce_unknown_help__"
