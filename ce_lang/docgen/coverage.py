"""Is every field the schema accepts in the generated pages? Checked on the Markdown
text itself (a table row per field), with the classes found by walking the schema's
type hints here, independently of the walk that produced the pages."""

from __future__ import annotations

import re
import typing

import attrs


def tables(text: str) -> dict[str, set[str]]:
    """Heading -> the first-column names of the tables under it (backticks dropped)."""
    out: dict[str, set[str]] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            out.setdefault(heading, set())
        elif line.startswith("| ") and not line.startswith("|---"):
            name = line.split("|")[1].strip().strip("`")
            out.setdefault(heading, set()).add(re.sub(r"\(.*", "", name))
    return out


def reachable(roots: list[type]) -> list[type]:
    """Every attrs class the schema reaches from `roots` (tagged-union members included)."""
    from ce_lang.schema.fields import Tagged

    seen: list[type] = []

    def types_in(tp) -> list:
        args = typing.get_args(tp)
        return [t for a in args for t in types_in(a)] if args else [tp]

    def visit(cls) -> None:
        if cls in seen:
            return
        if isinstance(cls, type) and issubclass(cls, Tagged) and not attrs.has(cls):
            for member in cls.MEMBERS.values():
                visit(member)
            return
        if not (isinstance(cls, type) and attrs.has(cls)):
            return
        seen.append(cls)
        for tp in typing.get_type_hints(cls).values():
            for t in types_in(tp):
                visit(t)

    for root in roots:
        visit(root)
    return seen


def missing_fields(pages: dict[str, str]) -> list[str]:
    """Fields of the task and experiment formats (standard criteria's arguments included)
    with no row in `pages` (relative path -> text): empty when the reference is complete."""
    from ce_lang.schema.criteria import COMMON_FIELDS, Criterion, CriterionBase
    from ce_lang.schema.experiment import ExperimentSpec
    from ce_lang.schema.task import TaskSpec

    all_tables: dict[str, set[str]] = {}
    for rel, text in pages.items():
        for heading, names in tables(text).items():
            all_tables[f"{rel}#{heading}"] = names
    missing = []
    for cls in reachable([TaskSpec, ExperimentSpec]):
        fields = {f.name for f in attrs.fields(cls)}
        tag = next((t for t, c in Criterion.MEMBERS.items() if c is cls), None)
        if cls is not CriterionBase and issubclass(cls, CriterionBase):
            fields -= COMMON_FIELDS  # documented once, under task.success_criteria[]
            if tag != "expr":  # a standard criterion: its own section on criteria.md
                got = all_tables.get(f"reference/criteria.md#{tag}", set())
                missing += [f"{tag}.{f}" for f in sorted(fields - got)]
                continue
        if not any(fields <= names for names in all_tables.values()):
            best = max(all_tables.items(), key=lambda kv: len(fields & kv[1]))
            missing.append(f"{cls.__name__}: {', '.join(sorted(fields - best[1]))} "
                           f"(closest: {best[0]})")
    return missing
