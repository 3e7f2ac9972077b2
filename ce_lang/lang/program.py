"""One checked program per plan: what every consumer of a plan's criteria shares.

A `Program` is built once from a plan: the registry (the plan's own `.ce` sources over
the standard criteria, today's or an archived copy), the checked instance of each
criterion call, each instance's analysis (its `Decision` and the analyzer's facts and
totality tables, what the live monitor bounds values with), and each instance's link
table: every `Call` and `Method` node resolved once to what evaluating it runs (a pure
builtin's implementation, the host for an effectful builtin, a record method), from the
checker's tables. It is immutable after construction and shared by the live monitor, the
grader, explanations and re-scoring.

`program_for` caches programs per process, keyed by the plan's hash and the standard
criteria variant, so a suite of N trials of one plan (or a re-score of N archived trials)
builds it once.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from ce_lang.diagnostics import Diagnostics
from ce_lang.lang import ast as A
from ce_lang.lang.analysis import Decision, Fact
from ce_lang.lang.builtins import BUILTINS, Overload
from ce_lang.lang.checker import Registry, Tables, check_expression
from ce_lang.lang.evaluate import Link
from ce_lang.lang.instances import Instance, analyzed_instances_from_plan
from ce_lang.lang.records import BUILTIN_RECORDS
from ce_lang.lang.values import MessageView, ToolCallView, TraceView

# record type -> the Python class its values are at run time (methods are looked up here)
RECORD_CLASSES: dict[str, type] = {"ToolCall": ToolCallView, "Message": MessageView,
                                   "Trace": TraceView}


@attrs.frozen(eq=False)
class Analysis:
    """An instance's analysis (`ce_lang.lang.analysis.analyze`), read-only: what the live
    evaluator needs (`facts`, `raises`, `raises_here`) and the decision."""

    decision: Decision
    facts: Mapping[int, Fact]
    raises: Mapping[int, bool]
    raises_here: Mapping[int, bool]
    folded: tuple[str, ...]


@attrs.frozen(eq=False)
class Compiled:
    """One criterion call of the plan, checked, analyzed and linked."""

    call: Any  # the plan's CriterionCall (with task-level defaults applied)
    instance: Instance
    analysis: Analysis
    links: Mapping[int, Link]  # Call / Method node id -> what evaluating it runs
    lambda_nodes: frozenset[int]  # nodes inside lambdas (evaluated per element)


@attrs.frozen(eq=False)
class Program:
    plan: Any  # ce_lang.plan.Plan
    registry: Registry
    criteria: tuple[Compiled, ...]

    @property
    def instances(self) -> list[Instance]:
        return [c.instance for c in self.criteria]

    @staticmethod
    def build(plan: Any, registry: Registry) -> Program:
        """Check, analyze and link every criterion of `plan` against `registry` (raises
        ValueError when a criterion does not bind, as `instances_from_plan`)."""
        global _BUILDS
        calls = with_task_defaults(plan)
        criteria = []
        for call, (inst, an) in zip(calls, analyzed_instances_from_plan(calls, registry),
                                    strict=True):
            analysis = Analysis(inst.decision, MappingProxyType(dict(an.facts)),
                                MappingProxyType(dict(an.raises)),
                                MappingProxyType(dict(an.raises_here)),
                                tuple(dict.fromkeys(an.folded)))
            tables = _tables(call, inst, registry)
            criteria.append(Compiled(call, inst, analysis,
                                     MappingProxyType(link_instance(inst, tables)),
                                     frozenset(_lambda_nodes(inst))))
        with _LOCK:
            _BUILDS += 1
        return Program(plan, registry, tuple(criteria))


def with_task_defaults(plan: Any) -> list[Any]:
    """The plan's calls with task-level defaults the lowering leaves out of `args`:
    commands_efficiency's expected_commands falls back to the task's expected_commands
    (compile time checked one of them is set)."""
    out = []
    for call in plan.criteria:
        if (call.definition or call.type) == "commands_efficiency" \
                and call.args.get("expected_commands") is None \
                and plan.expected_commands is not None:
            call = attrs.evolve(call, args={**call.args,
                                            "expected_commands": plan.expected_commands})
        out.append(call)
    return out


def _roots(inst: Instance) -> list[A.Node]:
    return [inst.score, *(let.expr for let in inst.lets), *(o.expr for o in inst.outputs)]


def _tables(call: Any, inst: Instance, registry: Registry) -> Tables:
    """The checker's side tables for the instance's nodes: its definition's, or (an inline
    expression, parsed anew for the plan) the expression checked again."""
    if inst.definition != "expr":
        return registry.criteria[call.definition or call.type].tables
    _, tables = check_expression(inst.score, registry, Diagnostics())
    return tables


def link_instance(inst: Instance, tables: Tables) -> dict[int, Link]:
    return link_nodes(_roots(inst), tables, inst.definition)


def link_nodes(roots: list[A.Node], tables: Tables, what: str = "") -> dict[int, Link]:
    """Every Call and Method node under `roots` -> its implementation. Node ids are unique
    within one parse, and an instance's nodes come from one parse; a clash would make the
    table ambiguous, so it is an error here rather than a wrong call later."""
    links: dict[int, Link] = {}
    seen: dict[int, A.Node] = {}
    for root in roots:
        for node in A.walk(root):
            other = seen.setdefault(node.id, node)
            if other is not node:
                raise ValueError(f"node id {node.id} names two nodes of `{what}`")
            if isinstance(node, A.Call):
                links[node.id] = link_call(node, tables.overloads.get(node.id))
            elif isinstance(node, A.Method):
                links[node.id] = link_method(node, tables.types.get(node.obj.id))
    return links


def link_call(node: A.Call, overload: Overload | None) -> Link:
    fn = BUILTINS[node.func]
    return Link(node.func, fn.impl, overload=overload)


def link_method(node: A.Method, receiver: Any) -> Link:
    """A record method, when the checker typed the receiver as a builtin record; else
    (a receiver of type `any`) the method is found on the value at run time."""
    name = getattr(receiver, "name", None)
    record = BUILTIN_RECORDS.get(name or "")
    cls = RECORD_CLASSES.get(name or "")
    if receiver is None or receiver.optional or record is None or cls is None \
            or node.name not in record.methods:
        return Link(node.name, None)
    sig = record.methods[node.name]
    regex_args = tuple(i for i, p in enumerate(sig.params) if p.name == "regex")
    return Link(node.name, getattr(cls, node.name), receiver=cls, regex_args=regex_args)


def _lambda_nodes(inst: Instance) -> set[int]:
    out: set[int] = set()
    for root in _roots(inst):
        for n in A.walk(root):
            if isinstance(n, A.Lambda):
                out.update(x.id for x in A.walk(n.body))
                out.add(n.id)
    return out


# -- the per-process cache ------------------------------------------------------------------
_LOCK = threading.RLock()  # one build at a time: N threads of one plan build it once
_CACHE: OrderedDict[tuple[str, str], Program] = OrderedDict()
_CACHE_SIZE = 64
_BUILDS = 0


def program_builds() -> int:
    """How many programs this process has built (for tests and benchmarks)."""
    return _BUILDS


def clear_programs() -> None:
    with _LOCK:
        _CACHE.clear()


_STDLIB_KEYS: dict[int, tuple[dict[str, str], tuple, str]] = {}  # id -> (it, items, key)


def stdlib_key(stdlib: dict[str, str] | None) -> str:
    """Which standard criteria: today's, or an archived copy (by content). The same
    mapping passed again (a rescore passes one per plan for every trial) is hashed once;
    its items are compared, so a mapping changed in place is hashed again."""
    if stdlib is None:
        return "today"
    items = tuple(sorted(stdlib.items()))
    hit = _STDLIB_KEYS.get(id(stdlib))
    if hit is not None and hit[0] is stdlib and hit[1] == items:
        return hit[2]
    h = hashlib.sha256()
    for name, text in items:
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    key = "archived:" + h.hexdigest()
    if len(_STDLIB_KEYS) > 64:
        _STDLIB_KEYS.clear()
    _STDLIB_KEYS[id(stdlib)] = (stdlib, items, key)
    return key


def program_for(plan: Any, stdlib: dict[str, str] | None = None,
                plan_hash: str | None = None) -> Program:
    """The plan's program, built once per process per (plan hash, standard criteria).
    `plan_hash`: the plan's hash when the caller has it (a Trial does)."""
    if plan_hash is None:
        from ce_lang.plan import plan_hash as hash_of

        plan_hash = hash_of(plan)
    key = (plan_hash, stdlib_key(stdlib))
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
        from ce_lang.lang.stdlib import registry_for_sources

        program = Program.build(plan, registry_for_sources(plan.criteria_sources, stdlib))
        _CACHE[key] = program
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return program
