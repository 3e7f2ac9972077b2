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
    from ce_lang.schema.cli import FlagMatch

    # a flag predicate's bare scalar is `equals`: structured as the full predicate
    conv.register_structure_hook(
        FlagMatch | str, lambda v, _: FlagMatch(equals=v) if isinstance(v, str)
        else conv.structure(v, FlagMatch))
    return conv


converter = _make()
