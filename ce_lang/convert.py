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
        return conv.structure(value, tp.MEMBERS[value[tp.TAG_FIELD]])

    conv.register_structure_hook_func(is_tagged_base, structure_tagged)
    conv.register_unstructure_hook_func(
        is_tagged_base, lambda obj: conv.unstructure(obj, unstructure_as=obj.__class__)
    )
    # `bool | str` and `str | dict` unions: the walker already checked the shape
    conv.register_structure_hook(bool | str, lambda v, _: v)
    conv.register_structure_hook(str | dict[str, Any] | None, lambda v, _: v)
    conv.register_structure_hook(Any, lambda v, _: v)
    return conv


converter = _make()
