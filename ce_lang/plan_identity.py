"""A plan's identity: the sha256 that names `plans/<hash>.json`, is each trial's
`plan_hash`, and tells `ce run --resume` which finished trials ran the plan they would
run today.

It is the hash of the plan's *hashed form*: its JSON (plan_to_json: every field, unset
ones null) without the keys of schema fields whose value is null and whose default is
null (or that have no default). A field added to the schema later with default None (as
`agent.pricing` was) is absent from every older plan and null in today's: both drop it,
so upgrading ce renames no plan. The plan file itself is written in full: what an
archive means must not move if a default changes later.

What goes, and what stays (two different plans never hash equal):
- Only schema fields go, where the schema says what null means: `None` is their
  "absent". A free-form value keeps every null: a criterion's JSON argument
  (`json_check`'s expected `{"a": null}` is not `{}`), a user criterion's arguments,
  `sdk_options`, inline settings, script actions.
- A field whose default is not None keeps its null: `sandbox.python: null` skips the
  venv, while absent (in an older plan) would mean the default venv.
- Empty lists and mappings stay: `allowed_tools: []` approves no tool, null leaves the
  agent's default; an empty value is not an absent one.
- A field without a default (Plan's `prompt`, `reference` ...) drops its null too: a
  plan of today's schema always has it, so null is its only "absent".
- A key the schema does not know (a field removed since) stays as written.

The form makes an upgrade rename no plan only where the plan is the same: the standard
criteria's digest and the grading semantics' version are part of every plan, so a ce
that edits a standard criterion still makes every plan a new one, as it should.

Plans written before this form (named by the hash of their full JSON) are still
recognised by that name: `legacy_plan_json_hash`.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import types
import typing
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder(order="sorted")


def plan_json_hash(plan_json: Any) -> str:
    """The plan's hash from its JSON (plan_to_json's output, or a plan file's `plan` read
    back as written): what `plan_hash` gives for the plan it was written from, without
    structuring it by today's schema."""
    return hashlib.sha256(_encoder.encode(hashed_form(plan_json))).hexdigest()


def hashed_field(name: str, value_json: Any) -> dict[str, Any]:
    """The hashed form of one field of a plan, as {name: form}, or {} when it drops out:
    the plan's form is the union of its fields' (`plan.plan_hash` with a memo)."""
    return _plan_shape().walk({name: value_json})


def hash_of_form(form: Any) -> str:
    return hashlib.sha256(_encoder.encode(form)).hexdigest()


def legacy_plan_json_hash(plan_json: Any) -> str:
    """The hash of the plan's full JSON: how plans were named before the hashed form
    (archives of those versions carry it as their name)."""
    return hashlib.sha256(_encoder.encode(plan_json)).hexdigest()


def hashed_form(plan_json: Any) -> Any:
    """The plan's JSON without the null-valued keys of schema fields whose null means
    absent (see the module's docstring); a new object, the argument is unchanged."""
    return _plan_shape().walk(plan_json)


# -- the schema's shapes -------------------------------------------------------------------
class _Record:
    """An attrs class's JSON object: per known field, whether a null drops it, and the
    shape of its value. `args_by_type`: a criterion call's `args`, whose shape is its
    definition's class (chosen by the call's `type`)."""

    def __init__(self) -> None:
        self.fields: dict[str, tuple[bool, Any]] = {}
        self.args_by_type: dict[str, _Record] | None = None

    def walk(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for key, item in value.items():
            known = self.fields.get(key)
            if known is None:
                out[key] = item  # not a field of today's schema: as written
                continue
            drop_null, shape = known
            if item is None:
                if not drop_null:
                    out[key] = None
                continue
            if key == "args" and self.args_by_type is not None:
                tag = value.get("type")
                shape = self.args_by_type.get(tag) if isinstance(tag, str) else None
            out[key] = item if shape is None else shape.walk(item)
        return out


class _List:
    def __init__(self, item: Any) -> None:
        self.item = item

    def walk(self, value: Any) -> Any:
        return [self.item.walk(v) for v in value] if isinstance(value, list) else value


class _Map:
    """A mapping whose keys are data (model ids ...): its values' nulls are not fields."""

    def __init__(self, item: Any) -> None:
        self.item = item

    def walk(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: None if v is None else self.item.walk(v) for k, v in value.items()}


class _Tagged:
    """A tagged union (template sources): the member its tag names."""

    def __init__(self, tag_field: str, members: dict[str, _Record]) -> None:
        self.tag_field, self.members = tag_field, members

    def walk(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        tag = value.get(self.tag_field)
        member = self.members.get(tag) if isinstance(tag, str) else None
        return value if member is None else member.walk(value)


@functools.cache
def _plan_shape() -> _Record:
    import attrs

    from ce_lang.plan import CriterionCall, Plan
    from ce_lang.schema.criteria import COMMON_FIELDS, Criterion
    from ce_lang.schema.fields import Tagged

    records: dict[type, _Record] = {}
    annotations: dict[type, dict[str, Any]] = {}

    def hints(cls: type) -> dict[str, Any]:
        """typing.get_type_hints, each class's own annotations evaluated once (the
        criterion classes share CriterionBase's): a third of the time."""
        if cls not in annotations:
            out: dict[str, Any] = {}
            for base in reversed(cls.__bases__):
                if base is not object:
                    out.update(hints(base))
            out.update(inspect.get_annotations(cls, eval_str=True))
            annotations[cls] = out
        return annotations[cls]

    def record(cls: type) -> _Record:
        if cls in records:
            return records[cls]
        shape = records[cls] = _Record()
        types_of = hints(cls)
        for f in attrs.fields(cls):
            drop_null = f.default is None or f.default is attrs.NOTHING
            shape.fields[f.name] = (drop_null, of(types_of[f.name]))
        return shape

    def of(tp: Any) -> Any:
        """The shape of a value of type `tp`; None: a leaf, or free-form (kept whole)."""
        if isinstance(tp, type) and issubclass(tp, Tagged) and "MEMBERS" in tp.__dict__:
            return _Tagged(tp.TAG_FIELD, {tag: record(m) for tag, m in tp.MEMBERS.items()})
        if isinstance(tp, type) and attrs.has(tp):
            return record(tp)
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (list, tuple) and args and args[-1] is not Ellipsis:
            item = of(args[0])
            return None if item is None else _List(item)
        if origin is dict and len(args) == 2:
            item = of(args[1])
            return None if item is None else _Map(item)
        if origin in (typing.Union, types.UnionType):
            shapes = [s for s in (of(a) for a in args if a is not type(None)) if s is not None]
            # one structured member beside plain values (`PythonEnv | None`, a record
            # or its shorthand string): that member's; two: free-form, kept whole
            return shapes[0] if len(shapes) == 1 else None
        return None

    plan = record(Plan)
    call = record(CriterionCall)
    call.args_by_type = {}
    for tag, cls in Criterion.MEMBERS.items():
        shape = record(cls)
        args = _Record()  # a call's args: the definition's own fields, not the common ones
        args.fields = {k: v for k, v in shape.fields.items() if k not in COMMON_FIELDS}
        call.args_by_type[tag] = args
    return plan
