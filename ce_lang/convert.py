"""The cattrs converter: validated raw values <-> schema objects."""

from __future__ import annotations

from typing import Any

import cattrs

from ce_lang.schema.fields import Tagged


def _make() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True, omit_if_default=False)

    def is_tagged_base(tp: Any) -> bool:
        return isinstance(tp, type) and issubclass(tp, Tagged) and "MEMBERS" in tp.__dict__

    def structure_tagged(value: dict[str, Any], tp: type[Tagged]) -> Any:
        member = tp.MEMBERS.get(value[tp.TAG_FIELD])
        if member is None:  # a user-defined criterion: common fields + free arguments
            from ce_lang.schema.criteria import COMMON_FIELDS, UserCall

            common = {k: v for k, v in value.items() if k in COMMON_FIELDS}
            args = {k: v for k, v in value.items() if k not in COMMON_FIELDS}
            return conv.structure({**common, "args": args}, UserCall)
        return conv.structure(value, member)

    conv.register_structure_hook_func(is_tagged_base, structure_tagged)
    def _unstructure_tagged(obj: Any) -> Any:
        raw = conv.unstructure(obj, unstructure_as=obj.__class__)
        if "args" in raw and obj.__class__.__name__ == "UserCall":
            raw.update(raw.pop("args"))
        return raw

    conv.register_unstructure_hook_func(
        is_tagged_base, _unstructure_tagged
    )
    # `bool | str` and `str | dict` unions: the walker already checked the shape
    conv.register_structure_hook(bool | str, lambda v, _: v)
    conv.register_structure_hook(str | dict[str, Any] | None, lambda v, _: v)
    conv.register_structure_hook(Any, lambda v, _: v)
    conv.register_structure_hook(list[dict[str, Any]] | str | None, lambda v, _: v)
    # a record's shorthand (`Record | str`, e.g. FlagMatch's `output: json`): the bare
    # string is the full record with that field set
    conv.register_structure_hook_factory(_shorthand_union,
                                         lambda t: _structure_shorthand(conv, t))
    return conv


def _shorthand_record(t: Any) -> type | None:
    args = getattr(t, "__args__", ())
    if len(args) != 2 or str not in args:
        return None
    cls = next(a for a in args if a is not str)
    record = getattr(cls, "__ce_record__", None)
    return cls if record is not None and record.shorthand is not None else None


def _shorthand_union(t: Any) -> bool:
    return _shorthand_record(t) is not None


def _structure_shorthand(conv: Any, t: Any):
    cls = _shorthand_record(t)
    field = cls.__ce_record__.shorthand

    def structure(v: Any, _: Any) -> Any:
        return cls(**{field: v}) if isinstance(v, str) else conv.structure(v, cls)

    return structure


converter = _make()
