"""Explanations: why a criterion scored as it did, and what a plan will compute.

`explain_trial` prints, per criterion, the evaluation tree of its score (each node's
source text and value, with evidence: files and positions, matching tool calls and their
trace events, command exit codes and output), then the arithmetic from criterion scores
to the weighted score and the status. `explain_plan` (grade/explain_plan.py) describes
a plan before any run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ce_lang.api import (
    CriterionError,
    Instance,
    Plan,
    ToolCallView,
    regex_match,
    source_text,
)
from ce_lang.api import ast as A
from ce_runtime.grade.explain_calls import (
    call_text,
    counted_calls,
    metrics_evidence,
    near_misses,
    output_gist,
)
from ce_runtime.grade.explain_cli import cli_calls_evidence, is_cli_calls
from ce_runtime.grade.host import Host, SourceText
from ce_runtime.grade.interpreter import (
    CriterionResult,
    GradeResult,
    cli_call_text,
    regex_text,
    show_value,
)
from ce_runtime.grade.judge_evidence import judge_lines
from ce_runtime.store.record import Status

INDENT = "    "
MAX_DEPTH = 10


COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def node_text(node: A.Node, fallback: str = "") -> str:
    text = source_text(node.span.file) or fallback
    if node.span.offset >= 0 and text:
        snippet = text[node.span.offset:node.span.end_offset]
        return " ".join(snippet.split())
    return ""


def _lines(text: str) -> int:
    return len(text.splitlines()) or 1


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


class _Tree:
    """A criterion's evaluation tree: per node, its source text, value and evidence (see
    `tree_lines` for the text rendering and docs/explain-rescore.md for the JSON shape)."""

    def __init__(self, inst: Instance, result: CriterionResult, host: Host | None,
                 expr_text: str):
        self.inst = inst
        self.r = result
        self.host = host
        self.expr_text = expr_text
        self.nodes: list[dict[str, Any]] = []
        self.shown_lets: set[str] = set()
        self.found: list[str] = []  # evidence texts, in tree order

    def text(self, node: A.Node) -> str:
        text = node_text(node, self.expr_text) or type(node).__name__
        return text if len(text) <= 72 else text[:69] + "..."

    def build(self) -> list[dict[str, Any]]:
        """The tree under the criterion's score expression, its nodes in text order."""
        self.node(self.inst.score, 1, self.nodes)
        return self.nodes

    def render(self) -> list[str]:
        return tree_lines(self.build(), 1)

    def interesting(self, node: A.Node) -> bool:
        if isinstance(node, A.Lit | A.Lambda):
            return False
        if isinstance(node, A.Name) and (node.name in self.inst.params or node.name == "trace"):
            return False
        return node.id in self.r.values

    def item(self, kind: str, text: str, node: A.Node) -> dict[str, Any]:
        """A tree node of `kind` showing `node`'s value and evidence (found in tree order)."""
        return {"kind": kind, "text": text, "value": show_value(self.r.values.get(node.id)),
                "evidence": self.evidence(node), "children": []}

    def node(self, node: A.Node, depth: int, into: list[dict[str, Any]]) -> None:
        if depth > MAX_DEPTH:
            return
        value = self.r.values.get(node.id)
        if isinstance(node, A.Name) and any(let.name == node.name for let in self.inst.lets):
            let = next(let for let in self.inst.lets if let.name == node.name)
            if node.name in self.shown_lets:
                into.append({"kind": "ref", "name": node.name,
                             "value": None if isinstance(value, dict | list)
                             else show_value(value)})
                return
            self.shown_lets.add(node.name)
            item = {"kind": "let", "name": node.name, **self.item("let", self.text(let.expr),
                                                                   let.expr)}
            into.append(item)
            self.expand(let.expr, depth + 2, item["children"])
            return
        if isinstance(node, A.Cond):
            self.cond(node, depth, "if", into)
            return
        item = self.item("value", self.text(node), node)
        into.append(item)
        self.expand(node, depth + 1, item["children"])

    def expand(self, node: A.Node, depth: int, into: list[dict[str, Any]]) -> None:
        """What is under a node whose own line is already printed."""
        if isinstance(node, A.Cond):
            self.cond(node, depth, "if", into)
            return
        for child in A.children(node):
            if self.interesting(child):
                self.node(child, depth, into)
            elif self.compared_argument(node, child):
                # an argument compared: its value (a dataset row's `expected_skill: ""`,
                # a typo `date_teller`), or `expected_skill == skill_name = false` says
                # nothing of why
                into.append({"kind": "value", "text": child.name, "evidence": None,
                             "value": show_value(self.inst.params[child.name]),
                             "children": []})

    def compared_argument(self, node: A.Node, child: A.Node) -> bool:
        """`child` is an argument compared in `node`, and the comparison does not already
        say its value (`max_count == null: true`)."""
        if not (isinstance(node, A.Binary) and node.op in COMPARISONS
                and isinstance(child, A.Name) and child.name in self.inst.params):
            return False
        other = node.right if child is node.left else node.left
        said = self.r.values.get(node.id) is (node.op == "==")
        return not (isinstance(other, A.Lit) and node.op in ("==", "!=") and said)

    def cond(self, node: A.Cond, depth: int, word: str, into: list[dict[str, Any]]) -> None:
        """`if test: value`, then the branch taken (`then` or `else`); an `else if` chain
        stays at one level."""
        if depth > MAX_DEPTH or node.test.id not in self.r.values:
            return
        test = self.r.values[node.test.id]
        item = self.item(word, self.text(node.test), node.test)
        into.append(item)
        self.expand(node.test, depth + 1, item["children"])
        branch = node.then if test else node.else_
        if not test and isinstance(branch, A.Cond):
            self.cond(branch, depth, "else if", into)
            return
        item = self.item("then" if test else "else", self.text(branch), branch)
        into.append(item)
        self.expand(branch, depth + 1, item["children"])

    def evidence(self, node: A.Node) -> str | None:
        text = self._evidence(node)
        if text.startswith("  [") and text.endswith("]"):
            self.found.append(text[3:-1])
            return text[3:-1]
        return None

    def _evidence(self, node: A.Node) -> str:
        """Evidence beyond the value: where, which calls, which command."""
        if isinstance(node, A.Call):
            if node.id in self.r.matched:
                return self.matches(node)
            value = self.r.values.get(node.id)
            if node.func in ("path_exists", "glob") and node.args:
                pattern = self.r.values.get(node.args[0].id)
                value = self.r.values.get(node.id)
                if node.func == "glob" and isinstance(value, list):
                    return f"  [{pattern!r} matches {len(value)} file(s)]"
                return f"  [{pattern!r} " + ("exists]" if value else "matches nothing]")
            if node.func in ("search", "try_search") and len(node.args) == 3:
                return self._search_evidence(node)
            if node.func == "read_text":
                if isinstance(value, SourceText):
                    n = _lines(value)
                    return f"  [{value.path}: {n} line{'' if n == 1 else 's'}]"
                if value is None:  # which file: `no such file` named none
                    where = self.r.values.get(node.args[0].id) if node.args else None
                    return f"  [{where}: no such file]" if where else "  [no such file]"
            if node.func == "read_json" and isinstance(value, dict):
                where = self.r.values.get(node.args[0].id)
                if value.get("ok"):
                    return f"  [{where}: valid JSON]" if where else ""
                error = str(value.get("error"))
                # `invalid JSON at line 1 column 14` named no file; `x.json not found` does
                named = not where or error.startswith(str(where))
                return f"  [{error}]" if named else f"  [{where}: {error}]"
            if node.func == "schema_valid" and value is False and len(node.args) == 2 \
                    and self.host is not None:
                doc, schema = (self.r.values.get(a.id) for a in node.args)
                try:
                    why = self.host.schema_problem(doc, schema)
                except Exception:  # the criterion's own error says it
                    return ""
                return f"  [fails the JSON Schema {schema}: {why}]" if why else ""
            if node.func == "similarity" and isinstance(value, float) and self.host \
                    is not None and len(node.args) == 3:
                method, agent, ref = (self.r.values.get(a.id) for a in node.args)
                detail = _similarity_detail(self.host, str(method), str(agent), ref)
                return f"  [{detail}]" if detail else ""
            if node.func == "len" and isinstance(node.args[0], A.Member) \
                    and node.args[0].name == "tool_calls":
                calls = self.r.values.get(node.args[0].id)
                if isinstance(calls, list):
                    return counted_calls(calls, self.inst.params.get("expected_commands"))
            if node.func == "uipath_eval" and self.host is not None:
                return metrics_evidence(self.host.evidence.get(self.r.id, ()))
            if node.func == "read_cli_log" and isinstance(value, dict):
                where = self.r.values.get(node.args[0].id)
                calls = value.get("calls") or []
                if value.get("error"):
                    return f"  [{value['error']}]"
                return f"  [{where}: {len(calls)} invocation(s) recorded]"
            if node.func == "run" and isinstance(value, dict):
                command = self.r.values.get(node.args[0].id)
                out = output_gist(value.get("stdout"))
                err = output_gist(value.get("stderr"))
                return ("  ["
                        + (f"$ {command}: " if isinstance(command, str) else "")
                        + f"exit {value.get('exit_code')}"
                        + (f", timed out after {self.r.values.get(node.args[1].id)} s"
                           if value.get("timed_out") else "")
                        + (f"; stdout: {out!r}" if out else "")
                        + (f"; stderr: {err!r}" if err else "") + "]")
        return ""

    def _search_evidence(self, node: A.Call) -> str:
        """Where a regex search matched in the text it searched, or that it matched
        nothing there (a search of a file's text names the file)."""
        text, pattern, flags = (self.r.values.get(a.id) for a in node.args)
        if not isinstance(text, str) or not isinstance(pattern, str) \
                or not isinstance(flags, int) or isinstance(flags, bool):
            return ""
        try:
            found = regex_match(text, pattern, flags)
        except CriterionError:  # the search's own error is the criterion's error
            return ""
        where = text.path if isinstance(text, SourceText) else ""
        if found is None:
            return f"  [{regex_text(pattern)} matches nothing" + (f" in {where}]" if where
                                                                   else "]")
        line, col = _line_col(text, found.start())
        at = f"{where}:{line}:{col}" if where else f"line {line}, column {col}"
        return f"  [{regex_text(pattern)} matches {found.group(0)[:40]!r} at {at}]"

    def matches(self, node: A.Call) -> str:
        hits = self.r.matched[node.id]
        items = self.r.values.get(node.args[0].id)
        # name the list when it is a parameter (`includes 2/3: ...`, `excludes 1/2: ...`)
        label = f"{node.args[0].name} " if isinstance(node.args[0], A.Name) else ""
        if isinstance(items, list) and items and isinstance(items[0], ToolCallView):
            shown = [call_text(items[i]) for i in hits[:5]]
            more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
            near = "" if self.r.passed or self.host is None \
                else near_misses(node, items, hits, self.r.env, self.host, self.text)
            return (f"  [{len(hits)} of {len(items)} calls match: " + "; ".join(shown) + more
                    if hits else f"  [none of {len(items)} calls match") + near + "]"
        if is_cli_calls(items):
            name = next((let.name for let in self.inst.lets if let.expr is node), None)
            return cli_calls_evidence(node, items, hits, self.r, self.inst.params, self.host,
                                      self.text, name)
        if isinstance(items, list) and items and all(isinstance(x, str) for x in items):
            text = next((v for v in self.r.env.values() if isinstance(v, SourceText)), None)
            parts = []
            for i, item in enumerate(items):
                if text is not None:
                    pos = text.find(item)
                    if pos >= 0:
                        line, col = _line_col(text, pos)
                        parts.append(f"{item!r} found at {text.path}:{line}:{col}")
                    else:
                        parts.append(f"{item!r} not found")
                else:
                    parts.append(f"{item!r}: {'yes' if i in hits else 'no'}")
            return f"  [{label}{len(hits)}/{len(items)}: " + "; ".join(parts) + "]"
        if isinstance(items, list) and items:
            doc = next((v["value"] for v in self.r.env.values() if isinstance(v, dict)
                        and v.get("ok") is True and "value" in v), MISSING)
            # every item that is no is shown; those that are yes up to 8 in all
            misses = [i for i in range(len(items)) if i not in hits]
            passes = [i for i in range(len(items)) if i in hits]
            shown = sorted(misses + passes[:max(0, 8 - len(misses))])
            parts = [f"{item_text(items[i], doc)}: {'yes' if i in hits else 'no'}"
                     for i in shown]
            left = len(items) - len(shown)
            more = f"; and {left} more, all yes" if left else ""
            return f"  [{label}{len(hits)}/{len(items)}: " + "; ".join(parts) + more + "]"
        if isinstance(items, list) and not items:  # nothing to count: the value says it
            return ""
        return f"  [{len(hits)} match]"


def _similarity_detail(host: Host, method: str, agent_file: str,
                       reference_file: str | None) -> str | None:
    """How a `similarity` came to its value; None when it cannot be told again."""
    from ce_runtime.grade.similarity import similarity_detail

    try:
        agent = host.b_read_text(agent_file)
        reference = host.reference_text(reference_file)
        return similarity_detail(method, str(agent), reference) \
            if agent is not None and reference else None
    except (CriterionError, ValueError, OSError):
        return None


def tree_lines(nodes: list[dict[str, Any]], depth: int) -> list[str]:
    """`_Tree.build`'s nodes as `ce explain` prints them, from `depth` indents on."""
    lines = []
    for n in nodes:
        pad = INDENT * depth
        ev = f"  [{n['evidence']}]" if n.get("evidence") is not None else ""
        kind, under = n["kind"], depth + 1
        if kind == "ref":
            shown = "" if n["value"] is None else f" = {n['value']}"
            lines.append(f"{pad}{n['name']}{shown}  (above)")
            continue
        if kind == "let":
            lines.append(f"{pad}{n['name']} = {n['text']}")
            lines.append(f"{pad}{INDENT}= {n['value']}{ev}")
            under = depth + 2
        elif kind in ("if", "else if"):
            lines.append(f"{pad}{kind} {n['text']}: {n['value']}{ev}")
        elif kind in ("then", "else"):
            lines.append(f"{pad}{kind} {n['text']} = {n['value']}{ev}")
        else:
            lines.append(f"{pad}{n['text']} = {n['value']}{ev}")
        lines += tree_lines(n["children"], under)
    return lines


MISSING = object()


def item_text(item: Any, doc: Any) -> str:
    """One element of a comprehension, as the user wrote it: a json_check assertion
    (with the value its expression found), a regex sub-check, or the value itself."""
    if isinstance(item, dict) and {"expression", "operator"} <= item.keys():
        expected = "" if item["operator"] == "exists" else " " + _json(item.get("expected"))
        text = f"{item['expression']} {item['operator']}{expected}"
        if doc is not MISSING:
            try:
                import jmespath

                text += f" (got {_json(jmespath.search(item['expression'], doc))})"
            except Exception:  # the criterion's own error says why
                pass
        return text
    if isinstance(item, dict) and isinstance(item.get("argv"), list):  # a recorded CLI call
        return cli_call_text(item)
    if isinstance(item, dict) and "pattern" in item:
        must = "must match" if item.get("must_match", True) else "must not match"
        flags = f", flags {item['flags']}" if item.get("flags") else ""
        return f"{regex_text(str(item['pattern']))} {must}{flags}"
    return show_value(item, 40)


def _json(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= 40 else text[:37] + "..."


def chosen(only: str | Sequence[str] | None, cid: str, index: int, ctype: str) -> bool:
    """Whether `--criterion ONLY` (an id, an index or a type, or several; None: every
    one) names the criterion `cid`, at `index` in its plan, of type `ctype`."""
    if only is None:
        return True
    names = (only,) if isinstance(only, str) else only
    return any(name in (cid, str(index), ctype) for name in names)


def _judges(result: CriterionResult, host: Host | None) -> list[dict[str, Any]]:
    """The judge verdicts behind a criterion's score, as evidence.json keeps them."""
    return [ev for ev in (host.evidence.get(result.id, ()) if host is not None else ())
            if ev.get("kind") == "judge"]


def _built(inst: Instance, result: CriterionResult, host: Host | None, plan: Plan) -> _Tree:
    call = plan.criteria[inst.index]
    builder = _Tree(inst, result, host,
                    call.args.get("expr", "") if call.definition == "expr" else "")
    builder.build()
    return builder


def explain_criterion(inst: Instance, result: CriterionResult, host: Host | None,
                      plan: Plan) -> list[str]:
    if result.disabled:
        return [f"{result.id} {result.type}: {result.description}\n"
                f"{INDENT}not run (enabled: false): excluded from the weighted score and the "
                f"gate; weight {result.weight:g}"]
    verdict = "error" if result.error else ("pass" if result.passed else "fail")
    flags = []
    if result.advisory:
        flags.append("advisory: the trial stopped early and this criterion was not armed")
    elif not result.gating:
        flags.append("informational (weight 0)" if result.weight == 0 else "not gating")
    if result.passed and result.score < result.pass_threshold:  # analysis.meets
        flags.insert(0, "meets the threshold within 1e-9 (float rounding of an exact score)")
    head = (f"{result.id} {result.type}: {result.description}\n"
            f"{INDENT}score {_apart(result.score, result.pass_threshold)[0]} ({result.kind}) "
            f"vs pass threshold {_apart(result.score, result.pass_threshold)[1]} -> "
            f"{verdict.upper()}; weight {result.weight:g}"
            + (f"; {'; '.join(flags)}" if flags else ""))
    lines = [head]
    if result.error:
        lines.append(f"{INDENT}error: {result.error}")
    for ev in _judges(result, host):
        lines += judge_lines(ev, INDENT)
    builder = _built(inst, result, host, plan)
    # the evidence first (which files, positions, calls, commands): the tree below shows
    # how the definition turned it into the score
    lines += [f"{INDENT}evidence: {e}" for e in dict.fromkeys(builder.found)]
    lines += tree_lines(builder.nodes, 1)
    for name, value in result.outputs.items():
        lines.append(f"{INDENT}output {name} = {show_value(value)}")
    return lines


def _apart(score: float, threshold: float, least: int = 3) -> tuple[str, str]:
    """Both numbers, to `least` significant digits or as many more as tell them apart:
    0.6666 against 0.6667 printed `0.667 < 0.667`, 0.8999999999999999 against 0.9 `0.9 <
    0.9`."""
    for digits in range(least, 18):
        a, b = f"{score:.{digits}g}", f"{threshold:.{digits}g}"
        if a != b or score == threshold:
            return a, b
    return repr(score), repr(threshold)


def arithmetic(result: GradeResult, weighted_gate: float | None = None) -> list[str]:
    """The weighted score from the criterion scores, then the gate. A criterion's score
    reads as the gate line says it (`_apart` against its pass threshold): `.3g` read
    0.6999 against 0.7 `c3 0.7×1` above `c3 0.6999 < 0.7`."""
    weighted = [r for r in result.criteria if r.weight > 0 and not r.disabled]
    lines = []
    if weighted:
        terms = " + ".join(f"{r.id} {_apart(r.score, r.pass_threshold)[0]}×{r.weight:g}"
                           for r in weighted)
        total = sum(r.weight for r in weighted)
        lines.append(f"weighted score = ({terms}) / {total:g} = {result.weighted_score:.4g}")
    else:
        lines.append("weighted score = 0 (no criterion with weight > 0)")
    left_out = [f"{r.id} ({'disabled' if r.disabled else 'weight 0'})"
                for r in result.criteria if r.disabled or r.weight == 0]
    if left_out:
        lines.append(f"not in the score or the gate: {', '.join(left_out)}")
    gating = [r for r in result.criteria if r.gating]
    failed = [r for r in gating if not r.passed]
    scope = "armed criteria only (stopped early)" if result.stopped_early else \
        "every enabled criterion with weight > 0"
    if result.stopped_early and weighted_gate is not None and gating:
        total = sum(r.weight for r in gating)
        passed = sum(r.weight for r in gating if r.passed)
        terms = " + ".join(f"{r.id} {1 if r.passed else 0}×{r.weight:g}" for r in gating)
        # the armed weighted score and the gate told apart: `.4g` read 2/3 against
        # 0.6667 `0.6667 < stop_early_gate_threshold 0.6667`
        shown, gate = _apart(passed / total, weighted_gate, 4)
        lines.append(f"gate (armed criteria only, stopped early; weighted): ({terms}) / "
                     f"{total:g} = {shown} "
                     f"{'>=' if result.success else '<'} stop_early_gate_threshold "
                     f"{gate} -> "
                     f"{Status.SUCCESS if result.success else Status.FAILURE}")
        return lines
    if failed:
        why = ", ".join(f"{r.id} {' < '.join(_apart(r.score, r.pass_threshold))}"
                        if not r.error else f"{r.id} error" for r in failed)
        lines.append(f"gate ({scope}): {why} -> FAILURE")
    else:
        lines.append(f"gate ({scope}): {len(gating)}/{len(gating)} passed -> SUCCESS")
    return lines


def explain_trial(plan: Plan, instances: list[Instance], result: GradeResult,
                  host: Host | None, only: str | Sequence[str] | None = None, kept: str | None = None,
                  why: str | None = None) -> str:
    """`kept`: the archived trial's status when the criteria do not decide it (a run
    limit stopped the agent, or it never reached grading), `why` the reason the run
    recorded: said last, as report.html."""
    out = [f"task {plan.task_id}"]
    for inst, r in zip(instances, result.criteria, strict=True):
        if not chosen(only, r.id, inst.index, r.type):
            continue
        out.append("")
        out += explain_criterion(inst, r, host, plan)
    if only is None:
        out.append("")
        out += arithmetic(result, plan.early_stop.gate_threshold
                          if plan.early_stop.rule == "weighted" else None)
        if kept is not None:
            out.append(f"trial -> {kept} (kept: "
                       + (why if why else "it never reached grading" if kept == Status.ERROR
                          else "a run limit stopped the agent") + ")")
    return "\n".join(out) + "\n"


def failure_evidence(plan: Plan, instances: list[Instance], result: GradeResult,
                     host: Host | None) -> dict[str, list[str]]:
    """For each criterion that did not pass: the evidence lines `ce explain` prints first
    (the file read, what was not found, where a pattern matched nothing ...). Kept in
    evidence.json so that report.html says why without grading again."""
    out: dict[str, list[str]] = {}
    for inst, r in zip(instances, result.criteria, strict=True):
        if r.passed or r.disabled:
            continue
        builder = _built(inst, r, host, plan)
        if builder.found:
            out[r.id] = list(dict.fromkeys(builder.found))
    return out


def with_failure_evidence(criteria: dict[str, Any], found: dict[str, list[str]]
                          ) -> dict[str, Any]:
    """evidence.json's `criteria` with a `{"kind": "found", "lines": [...]}` entry added
    for each criterion in `found` (the grader's own entries, commands and judges, first)."""
    if not found:
        return criteria
    merged = {cid: list(entries) for cid, entries in criteria.items()}
    for cid, lines in found.items():
        merged.setdefault(cid, []).append({"kind": "found", "lines": lines})
    return merged


def explain_json(plan: Plan, result: GradeResult, instances: list[Instance],
                 host: Host | None, only: str | Sequence[str] | None = None, status: str | None = None,
                 error: str | None = None) -> dict[str, Any]:
    """`explain_trial` as data (`ce explain -f json`; the shape is in
    docs/explain-rescore.md): the grade, the trial's `status` (its grade's verdict unless
    given: an archived trial's kept status) and, for an ERROR, the recorded `error`; per
    criterion `--criterion` names, its evidence lines, judge verdicts and evaluation tree."""
    criteria = []
    for inst, r in zip(instances, result.criteria, strict=True):
        if not chosen(only, r.id, inst.index, r.type):
            continue
        builder = None if r.disabled else _built(inst, r, host, plan)
        criteria.append({
            "id": r.id, "type": r.type, "description": r.description, "kind": r.kind,
            "score": r.score, "pass_threshold": r.pass_threshold, "passed": r.passed,
            "weight": r.weight, "gating": r.gating, "advisory": r.advisory,
            "disabled": r.disabled, "error": r.error,
            "outputs": {k: show_value(v) for k, v in r.outputs.items()},
            "matched": {str(k): v for k, v in r.matched.items()},
            "evidence": list(dict.fromkeys(builder.found)) if builder else [],
            "judges": [{k: v for k, v in ev.items() if k != "kind"}
                       for ev in _judges(r, host)],
            "tree": builder.nodes if builder else [],
        })
    return {
        "task_id": plan.task_id,
        "weighted_score": result.weighted_score,
        "success": result.success,
        "stopped_early": result.stopped_early,
        "status": status or str(Status.SUCCESS if result.success else Status.FAILURE),
        "error": error,
        "criteria": criteria,
    }
