"""Checking the criteria of one resolved task: bind, fold, decide, and plan the effects.

For each criterion entry this finds its definition (standard, user-defined, or an
inline `type: expr`), binds the arguments, folds the constants and derives the
instance's effects and decidability. It also lays out the plan graph's steps: the
effectful calls that remain after folding, workspace reads shared by every criterion
that makes them, and commands kept in order as barriers (a command may change the files
later reads see, unless its criterion says `read_only: true`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ce_lang.diagnostics import Diagnostics
from ce_lang.lang import ast as A
from ce_lang.lang.analysis import Analyzer, Decision, analyze
from ce_lang.lang.bind import bind
from ce_lang.lang.builtins import BUILTINS
from ce_lang.lang.checker import CheckedDef, Registry, check_expression
from ce_lang.lang.types import BOOL, is_numeric
from ce_lang.lang.values import Regex
from ce_lang.spans import Path, Span

if TYPE_CHECKING:
    from ce_lang.schema import criteria as C

SpanOf = Callable[[Path], Span]


@attrs.frozen
class Violation:
    """A `require` of a definition that the bound arguments break."""

    code: str
    message: str
    names: tuple[str, ...]  # the parameters the condition reads, in source order
    help: str | None = None


@attrs.frozen
class Instance:
    index: int
    definition: str
    result_kind: str
    params: dict[str, Any]
    decision: Decision
    score: A.Node
    lets: tuple[A.Let, ...]
    outputs: tuple[A.Let, ...]
    calls: tuple[tuple[str, tuple[Any, ...]], ...]  # effectful calls left after folding
    score_bool: bool = False  # a boolean score (P is the score itself, not score >= t)
    violations: tuple[Violation, ...] = ()  # `require` constraints these arguments break

    @property
    def effects(self) -> frozenset[str]:
        return self.decision.effects


@attrs.frozen
class Step:
    id: str
    func: str
    args: tuple[Any, ...]
    effect: str
    epoch: int
    used_by: tuple[str, ...]


def check_instances(criteria: list[C.CriterionBase], thresholds: list[float],
                    task_expected_commands: int | None, registry: Registry,
                    diags: Diagnostics, at: SpanOf, key_at: SpanOf,
                    sources: dict[str, str], cache: dict | None = None,
                    ) -> list[Instance | None]:
    """`cache` (per compile) reuses the analysis of identical instances: the same
    definition with the same arguments and threshold, across rows, variants and tasks."""
    # the compiler's step: a plan's instances (`instances_from_plan`) need no schema class
    from ce_lang.schema import criteria as C

    out: list[Instance | None] = []
    for i, (c, threshold) in enumerate(zip(criteria, thresholds, strict=True)):
        base: Path = ("success_criteria", i)
        if isinstance(c, C.ExprCriterion):
            out.append(_expr_instance(i, c, threshold, registry, diags, at, sources))
            continue
        defn = registry.criteria.get(c.type)
        if defn is None:
            diags.emit("CE0108", f"no definition for criterion type `{c.type}`",
                       at((*base, "type")))
            out.append(None)
            continue
        if c.type in registry.broken:  # its definition's errors are reported where it is
            out.append(None)
            continue
        if isinstance(c, C.UserCall):
            args, strict = dict(c.args), True
        else:
            from ce_lang.convert import converter

            # this very entry seen before (a dataset row that left it as it was)
            same = ("entry", id(c), id(defn), threshold, task_expected_commands)
            hit = cache.get(same) if cache is not None else None
            if hit is not None and hit[0] is c:
                out.append(_at_index(hit[1], i))
                continue
            raw = converter.unstructure(c)
            args = {k: v for k, v in raw.items() if k not in C.COMMON_FIELDS}
            strict = False
            if isinstance(c, C.CommandsEfficiency) and args.get("expected_commands") is None:
                args["expected_commands"] = task_expected_commands
            if cache is not None:  # a standard criterion seen before: skip bind too
                key = ("args", id(defn), repr(sorted(args.items())), threshold)
                hit = cache.get(key)
                if hit is not None:
                    cache[same] = (c, hit)
                    out.append(_at_index(hit, i))
                    continue
        params = bind(defn, args, registry, diags, at, key_at, base, strict)
        if params is None:
            out.append(None)
            continue
        inst = _instance(i, defn, params, threshold, cache)
        if cache is not None and not strict:
            cache[("args", id(defn), repr(sorted(args.items())), threshold)] = inst
            cache[same] = (c, inst)  # (c kept: its id names no other entry meanwhile)
        out.append(inst)
    return out


def check_requires(requires: tuple[A.Require, ...], params: dict[str, Any]) -> list[Violation]:
    """Evaluate `require` constraints (a criterion's or a record's) on constant arguments.
    A constraint reading an argument that is not constant yet (a `${row.key}` not
    substituted) waits for the row that makes it constant."""
    from ce_lang.diagnostics import did_you_mean
    from ce_lang.lang.checker import PLACEHOLDER, REQUIRE_KINDS
    from ce_lang.lang.evaluate import Evaluator

    out = []
    for req in requires:
        known = _REQ_NAMES.get(id(req))
        if known is None or known[0] is not req or known[1] != params.keys():
            if len(_REQ_NAMES) > 4096:  # (definitions of many compiles in one process)
                _REQ_NAMES.clear()
            known = _REQ_NAMES[id(req)] = (req, frozenset(params), tuple(dict.fromkeys(
                _param_names(req.cond, params))))
        names = known[2]
        if any(_pending(params[n]) for n in names):
            continue
        try:
            ok = Evaluator().eval(req.cond, params) is True
        except Exception:  # a condition that cannot be evaluated on these arguments fails
            ok = False
        if ok:
            continue
        def fill(text: str) -> str:
            return PLACEHOLDER.sub(lambda m: _rendered(params[m.group(1)])
                                   if m.group(1) in params else m.group(0), text)

        message = fill(req.message)
        help_ = fill(req.help) if req.help is not None else None
        test = _membership(req.cond) if help_ is None else None
        if test is not None and isinstance(params.get(test.left.name), str):
            try:
                allowed = Evaluator().eval(test.right, params)
            except Exception:  # no list to suggest from
                allowed = None
            if isinstance(allowed, list):
                help_ = did_you_mean(params[test.left.name], [str(a) for a in allowed])
        out.append(Violation(REQUIRE_KINDS.get(req.kind, "CE0111"), message, names, help_))
    return out


# a `require`'s parameter names, for the parameters bound (each dataset row asks again)
_REQ_NAMES: dict[int, tuple[A.Require, Any, tuple[str, ...]]] = {}


def _membership(cond: A.Node) -> A.Binary | None:
    """The `NAME in LIST` test a constraint asks to hold (the condition itself, or one
    of its `or`s: `expected_label in allowed_labels or ...`), whose failure is a value
    not in a list: a `help:` then suggests the closest entry. Not one under `not` or
    `and`, where the value need not be in the list."""
    if isinstance(cond, A.Binary):
        if cond.op == "in" and isinstance(cond.left, A.Name):
            return cond
        if cond.op == "or":
            return _membership(cond.left) or _membership(cond.right)
    return None


def _param_names(node: A.Node, params: dict[str, Any], bound: frozenset[str] = frozenset()):
    if isinstance(node, A.Name) and node.name in params and node.name not in bound:
        yield node.name
    inner = bound | {node.param} if isinstance(node, A.Lambda) else bound
    for child in A.children(node):
        yield from _param_names(child, params, inner)


def _pending(value: Any) -> bool:
    if isinstance(value, str):
        return "${row." in value
    if isinstance(value, list):
        return any(_pending(v) for v in value)
    if isinstance(value, dict):
        return any(_pending(v) for v in value.values())
    return False


def _rendered(value: Any) -> str:
    """An argument as the task file would spell it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Regex):
        return repr(value.pattern)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return "[" + ", ".join(_rendered(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_rendered(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def _at_index(inst: Instance, i: int) -> Instance:
    return inst if inst.index == i else attrs.evolve(inst, index=i)


def _instance(i: int, defn: CheckedDef, params: dict[str, Any], threshold: float,
              cache: dict | None = None) -> Instance:
    if cache is not None:
        opaque = [n for n in _opaque_params(defn, cache) if isinstance(params.get(n), str)
                  and params[n] is not _STAND_INS.get(n)]
        if opaque:  # analyzed once with stand-ins, whatever text a dataset row gives
            stand_ins = {n: _STAND_INS.setdefault(n, f"\0{n}\0") for n in opaque}
            shape = _instance(i, defn, {**params, **stand_ins}, threshold, cache)
            return _with_params(shape, params, {id(v): params[n] for n, v in stand_ins.items()},
                                defn)
        key = (id(defn), repr(sorted(params.items())), threshold)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _instance(i, defn, params, threshold)
        return _at_index(hit, i)
    return _analyzed_instance(i, defn, params, threshold)[0]


_STAND_INS: dict[str, str] = {}  # one string object per parameter name: found by identity


def _opaque_params(defn: CheckedDef, cache: dict) -> tuple[str, ...]:
    """The parameters the analysis never looks into: in the score, lets and outputs each
    is only ever a whole argument of an effectful call (`llm_judge(prompt, ...)`), never
    an operand, a condition, or a pure function's argument, and no let or lambda takes
    its name. The analysis of a text parameter so used is the same for any text, the
    text itself in the effect calls it names: a dataset row's judge prompt is analyzed
    once (`require` conditions, which do read it, are checked per row)."""
    hit = cache.get(("opaque", id(defn)))
    if hit is not None and hit[0] is defn:
        return hit[1]
    d = defn.defn
    inside: set[str] = set()  # names used anywhere but as a whole effectful argument
    shadowed = {let.name for let in d.lets}

    def visit(node: A.Node, whole_arg: bool = False) -> None:
        if isinstance(node, A.Name):
            if not whole_arg:
                inside.add(node.name)
            return
        if isinstance(node, A.Lambda):
            shadowed.add(node.param)
        effectful = isinstance(node, A.Call) and BUILTINS[node.func].effect in (
            "workspace", "exec", "model")
        for child in A.children(node):
            visit(child, effectful and not isinstance(child, A.Lambda))

    for root in (d.score, *(x.expr for x in (*d.lets, *d.outputs))):
        if root is not None:
            visit(root)
    names = tuple(n for n in defn.params if n not in inside and n not in shadowed)
    cache[("opaque", id(defn))] = (defn, names)
    return names


def _with_params(shape: Instance, params: dict[str, Any], texts: dict[int, str],
                 defn: CheckedDef) -> Instance:
    """The instance `shape` (analyzed with stand-ins) for these arguments: each stand-in
    its text again in the effect calls, and the `require` conditions checked on them."""
    calls = tuple((func, tuple(texts.get(id(a), a) if isinstance(a, str) else a
                               for a in args)) for func, args in shape.calls)
    return attrs.evolve(shape, params=params, calls=calls,
                        violations=tuple(check_requires(defn.defn.requires, params)))


def _analyzed_instance(i: int, defn: CheckedDef, params: dict[str, Any],
                       threshold: float) -> tuple[Instance, Analyzer]:
    d = defn.defn
    decision, an = analyze(d.score, d.lets, params, threshold,
                           result_bool=defn.score_type == BOOL, outputs=d.outputs)
    kind = d.result
    if kind == "binary" and defn.score_type != BOOL and \
            not _zero_or_one(d.score, {let.name: let.expr for let in d.lets}, an):
        kind = "fraction"  # e.g. run_command with score_from_stdout: its score is stdout's
    return Instance(i, d.name, kind, params, decision, d.score, d.lets, d.outputs,
                    tuple(_effect_calls(d.score, d.lets, an)), defn.score_type == BOOL,
                    tuple(check_requires(d.requires, params))), an


def _expr_instance(i: int, c: C.ExprCriterion, threshold: float, registry: Registry,
                   diags: Diagnostics, at: SpanOf, sources: dict[str, str]) -> Instance | None:
    from ce_lang.lang.parser import parse_expression, scalar_locator

    path: Path = ("success_criteria", i, "expr")
    if not c.expr.strip():
        return None  # reported as an empty value
    span = at(path)
    locate = scalar_locator(c.expr, span, sources.get(span.file))
    before = len(diags)
    node = parse_expression(c.expr, locate, diags)
    if node is None:
        return None
    t, _tables = check_expression(node, registry, diags)
    if len(diags) > before:
        return None
    kind = c.kind
    if t == BOOL:
        if kind not in (None, "binary"):
            diags.emit("CE0603", f"a boolean expression is a binary criterion, not {kind}",
                       at(("success_criteria", i, "kind")))
            return None
        kind = "binary"
    elif is_numeric(t):
        kind = kind or "continuous"
        if kind == "binary":
            diags.emit("CE0603", "a binary criterion's expression must be a boolean; this one "
                       f"is {t}", node.span, help="compare it, e.g. `... >= 3`, or set "
                       "`kind: continuous`")
            return None
    else:
        diags.emit("CE0603", f"a criterion expression must be a boolean or a number, found {t}",
                   node.span)
        return None
    decision, an = analyze(node, (), {}, threshold, result_bool=t == BOOL)
    fact = an.facts.get(node.id)
    if fact is not None and fact.const:
        diags.emit("CE0214", f"this expression is always {_shown(fact.value)}: it does not "
                   "depend on the agent's work", node.span)
    return Instance(i, "expr", kind, {}, decision, node, (), (),
                    tuple(_effect_calls(node, (), an)), t == BOOL)


def _zero_or_one(node: A.Node, lets: dict[str, A.Node], an: Analyzer) -> bool:
    """Whether a numeric score, with its arguments bound, can only be 0 or 1: every
    branch its folded conditionals can take ends in the literal 0 or 1. A definition
    declared `-> binary` whose bound score can be anything else is a fraction."""
    if isinstance(node, A.Name) and node.name in lets:
        return _zero_or_one(lets[node.name], lets, an)
    if isinstance(node, A.Cond):
        test = an.facts.get(node.test.id)
        if test is not None and test.const:
            return _zero_or_one(node.then if test.value else node.else_, lets, an)
        return _zero_or_one(node.then, lets, an) and _zero_or_one(node.else_, lets, an)
    return isinstance(node, A.Lit) and node.kind in ("int", "float") and node.value in (0, 1)


def _effect_calls(score: A.Node, lets: tuple[A.Let, ...], an: Analyzer
                  ) -> list[tuple[str, tuple[Any, ...]]]:
    """Effectful builtin calls the score still depends on, with their folded arguments."""
    found: list[tuple[str, tuple[Any, ...]]] = []
    seen_names: set[str] = set()

    def visit(node: A.Node) -> None:
        if node.id not in an.facts:
            return
        if isinstance(node, A.Name) and node.name not in seen_names:
            seen_names.add(node.name)
            for let in lets:
                if let.name == node.name:
                    visit(let.expr)
        for child in A.children(node):
            visit(child)
        if isinstance(node, A.Call) and BUILTINS[node.func].effect in ("workspace", "exec",
                                                                       "model"):
            facts = [an.facts.get(a.id) for a in node.args]
            args = tuple(_jsonable(f.value) if f is not None and f.const else "<dynamic>"
                         for f in facts)
            found.append((node.func, args))

    visit(score)
    return found


def _shown(v: Any) -> str:
    return "true" if v is True else "false" if v is False else repr(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, Regex):
        return v.pattern
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def plan_steps(instances: list[Instance | None], read_only: dict[int, bool]) -> list[Step]:
    """The ordered effect steps of a plan: reads shared within an epoch, commands in order."""
    steps: list[Step] = []
    shared: dict[tuple, int] = {}
    epoch = 0
    users: list[list[str]] = []
    for inst in instances:
        if inst is None:
            continue
        cid = f"c{inst.index}"
        for func, args in inst.calls:
            effect = BUILTINS[func].effect
            key = (func, repr(args), epoch)
            if effect == "workspace" and key in shared:
                users[shared[key]].append(cid)
                continue
            shared[key] = len(steps)
            users.append([cid])
            steps.append(Step(f"s{len(steps)}", func, args, effect, epoch, ()))
            if effect == "exec" and not read_only.get(inst.index, False):
                epoch += 1
    return [attrs.evolve(s, used_by=tuple(dict.fromkeys(u))) for s, u in
            zip(steps, users, strict=True)]




def instances_from_plan(criteria: list[Any], registry: Registry) -> list[Instance]:
    """Rebuild checked instances from a plan's criterion calls (a plan is self-contained:
    its calls name their definitions and carry their bound arguments)."""
    return [inst for inst, _ in analyzed_instances_from_plan(criteria, registry)]


def analyzed_instances_from_plan(criteria: list[Any], registry: Registry
                                 ) -> list[tuple[Instance, Analyzer]]:
    """As `instances_from_plan`, with the analysis each instance was checked with (the
    program keeps it instead of analyzing again)."""
    out: list[tuple[Instance, Analyzer]] = []
    for i, call in enumerate(criteria):
        diags = Diagnostics()
        if call.definition == "expr":
            from ce_lang.lang.parser import file_locator, parse_expression

            text = call.args["expr"]
            node = parse_expression(text, file_locator(f"<{call.id}>", text), diags)
            if node is None:
                raise ValueError(f"{call.id}: {diags[0].message}")
            t, _ = check_expression(node, registry, diags)
            decision, an = analyze(node, (), {}, call.pass_threshold, result_bool=t == BOOL)
            out.append((Instance(i, "expr", call.result_kind, {}, decision, node, (), (),
                                 tuple(_effect_calls(node, (), an)), t == BOOL), an))
            continue
        defn = registry.criteria.get(call.definition or call.type)
        if defn is None:
            raise ValueError(f"{call.id}: no definition `{call.definition or call.type}`")
        here = Span.point(f"<{call.id}>")
        at = lambda _p, s=here: s  # noqa: E731 - the arguments were checked at compile time
        params = bind(defn, dict(call.args), registry, diags, at, at, (), strict=False)
        if params is None:
            raise ValueError(f"{call.id}: {diags[0].message}")
        out.append(_analyzed_instance(i, defn, params, call.pass_threshold))
    return out
