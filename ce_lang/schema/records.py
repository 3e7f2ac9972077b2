"""The records the standard criteria take (RegexPattern, Assertion, FlagMatch), as frozen
attrs classes generated at import from their `.ce` declarations, and how a `.ce`
parameter or record field becomes an attrs field (`add_fields`, which the criterion
classes of ce_lang.schema.criteria are generated with too).

A module of their own: `sandbox.record_cli`'s patterns (ce_lang.schema.cli) take a
FlagMatch, and a plan, which holds its sandbox, loads (`ce run`'s compile-cache hit
unpickles the trials) without generating the criterion classes.
"""

from __future__ import annotations

import copy
from typing import Any

import attrs

from ce_lang.schema.fields import spec

frozen = attrs.frozen(kw_only=True, slots=False)

# .ce records the generated criteria take (list[RegexPattern], list[Assertion]) -> the
# Python class generated for each; its `__ce_record__` carries the record's `require`
# constraints, which the schema walker checks on every bound value
GENERATED_RECORDS = {"RegexPattern": "RegexPattern", "Assertion": "JmesAssertion",
                     "FlagMatch": "FlagMatch"}
_record_classes: dict[str, type] = {}


def _python_type(t) -> Any:
    scalar = {"bool": bool, "int": int, "float": float, "str": str, "path": str, "regex": str,
              "json": Any}
    if t.name in scalar:
        tp = scalar[t.name]
    elif t.name == "list":
        tp = list[_python_type(t.elem)]
    elif t.name == "map":
        tp = dict[str, _python_type(t.elem)]
    elif t.name in _record_classes:
        tp = _record_classes[t.name]
        if tp.__ce_record__.shorthand is not None:  # a bare string means that field
            tp = tp | str
    else:
        raise TypeError(f"no schema type for .ce type {t}")
    return tp | None if t.optional and tp is not Any else tp


def add_fields(docs: dict[str, str], types: dict[str, Any], defaults: dict[str, Any],
               annotations: dict, namespace: dict,
               schema_fields: dict[str, tuple[Any, dict[str, Any]]] | None = None) -> None:
    """One attrs field per .ce parameter (or record field), in declaration order: type,
    default, doc, path rule. `schema_fields`: name -> (type, extra rule) of a parameter
    the task format types itself."""
    from ce_lang.lang.evaluate import Evaluator

    for name, doc in docs.items():
        t = types[name]
        annotations[name] = _python_type(t)
        rule: dict[str, Any] = {"doc": doc}
        if schema_fields and name in schema_fields:
            annotations[name], extra = schema_fields[name]
            rule.update(extra)
        if t.name == "path":
            rule["path"] = "workspace"
        if name in defaults:
            value = Evaluator().eval(defaults[name], {})
            namespace[name] = spec(factory=lambda v=value: copy.deepcopy(v), **rule) \
                if isinstance(value, list | dict) else spec(value, **rule)
        else:
            namespace[name] = spec(None, **rule) if t.optional else spec(**rule)


def _generate_record(name: str, class_name: str) -> type:
    from ce_lang.lang.stdlib import stdlib_records

    records, defaults = stdlib_records(tuple(GENERATED_RECORDS))
    record = records[name]
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {"__module__": __name__, "__qualname__": class_name,
                                 "__doc__": record.doc, "__ce_record__": record}
    add_fields({n: f.doc for n, f in record.fields.items()},
               {n: f.type for n, f in record.fields.items()},
               defaults[name], annotations, namespace)
    namespace["__annotations__"] = annotations
    cls = frozen(type(class_name, (), namespace))
    _record_classes[name] = cls
    return cls


for _record, _name in GENERATED_RECORDS.items():
    globals()[_name] = _generate_record(_record, _name)
RegexPattern: type
JmesAssertion: type
FlagMatch: type
