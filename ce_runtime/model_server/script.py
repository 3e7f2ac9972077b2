"""A scripted model session: what the model server answers, step by step.

    # hello_world.claude-code.model.yaml
    steps:                       # one per model call of the agent, in order
      - text: I'll write the file.          # a text block (optional)
        tool: Write                         # a tool call (optional), with its input
        input: {file_path: "{workspace}/hello.py", content: "print('Hello, World!')\\n"}
        usage: {input_tokens: 1200, output_tokens: 80}   # what the call reports
      - text: Done.
    rows:                        # dataset tasks: the steps of each row, by row id
      weekday: [...]
    judge: [...]                 # llm_judge verdicts: {match?, score, rationale, usage?}
    # a step may fail instead of answering (how agents cope with a failing model):
    #   fail: 500                     the API's error body with that HTTP status (429,
    #                                 529, ...), every time this step is asked for
    #   fail: {status: 429, times: 2} only the first 2 requests of this step (retries
    #                                 then get its answer: give it text and/or a tool)
    #   fail: garbage                 200 with a body that is not the API's format
    #   fail: disconnect              the reply starts, then the connection closes
    agent_judge: [...]           # the steps of an agent_judge's session
    user_turns: [...]            # what the simulated user says (`simulation:` tasks), in
                                 # order; end one with the stop token to end the dialog

A step is chosen by the conversation's position, never by a counter: the number of
assistant turns already in the request (Anthropic Messages, OpenAI Chat Completions) or
of tool outputs in it (OpenAI Responses). A client that retries, or sends side requests
(titles, summaries: requests without tools), cannot desynchronize it, and any number of
sessions can run against one server at once. `{workspace}` in a step becomes the
workspace path (given to the server, or read from the agent's own prompt). Past the
last step the model says so in a text reply and ends its turn.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

DEFAULT_USAGE = {"input_tokens": 10, "output_tokens": 10}
STEP_KEYS = {"text", "tool", "input", "usage", "delay", "tools", "custom_tool", "fail"}
FAIL_KINDS = ("garbage", "disconnect")
USAGE_KEYS = {"input_tokens", "output_tokens", "cache_read_input_tokens",
              "cache_creation_input_tokens"}
END_TEXT = "The scripted session has no more steps."
WORKDIR = re.compile(r"(?:Primary working directory|Working directory|<cwd>|cwd)[:>]?\s*"
                     r"(/[^\s<\"']+)")


class ScriptError(ValueError):
    """A malformed script (the message names the step and the key). `keys`: where in
    the script's data, as a path of mapping keys and list indexes (`("steps", 0,
    "tol")`), which load_script_file turns into the file's line:col."""

    def __init__(self, message: str, keys: tuple[Any, ...] = (), at_key: bool = False) -> None:
        super().__init__(message)
        self.keys = keys
        self.at_key = at_key  # the last key is one that should not be there: point at it


@attrs.frozen
class Call:
    name: str
    input: Any  # a mapping; for a custom tool (apply_patch), a string
    custom: bool = False


@attrs.frozen
class Fail:
    """How a step fails: `status` (an HTTP error status), or `kind` garbage /
    disconnect; `times`: the first N requests of the step only (None: all). ce's own
    `refused` (a spent budget: see ModelServer.spent) answers as a status does."""
    status: int = 500
    kind: str = "status"
    times: int | None = None
    message: str = "scripted failure"


@attrs.frozen
class Step:
    text: str | None
    calls: tuple[Call, ...]
    usage: dict[str, int]
    delay: float = 0.0
    fail: Fail | None = None


def load_script_file(path: str) -> dict[str, Any]:
    """A script file (`--judge-replies`, `ce model-server --script`, a scripted session)
    read and checked, every row's steps too: its data, or ScriptError naming the file
    and the line:col of the problem - said before a run starts, never as an internal
    error in the middle of one."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise ScriptError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ScriptError(f"{path}: not a UTF-8 text file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise ScriptError(f"{where}: not valid YAML: "
                          f"{getattr(exc, 'problem', None) or exc}") from None
    try:
        Script.from_data(data, where=path)
        rows = data.get("rows") if isinstance(data, dict) else None
        for row in rows if isinstance(rows, dict) else ():
            Script.from_data(data, row=row, where=path)
    except ScriptError as exc:
        raise (_located(exc, path, text) if exc.keys else exc) from None
    return data or {}


def _located(exc: ScriptError, path: str, text: str) -> ScriptError:
    """`exc` with the file's line:col of the deepest node its `keys` reach in `text`
    (a key that should not be there: the key itself)."""
    import yaml

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    mark = node.start_mark if node is not None else None
    for n, key in enumerate(exc.keys, 1):
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if k.value == str(key)), None)
            if pair is None:
                break
            node = pair[0] if exc.at_key and n == len(exc.keys) else pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) \
                and 0 <= key < len(node.value):
            node = node.value[key]
        else:
            break
        mark = node.start_mark
    message = str(exc)
    if mark is None or not message.startswith(path):
        return exc
    rest = message[len(path):].lstrip(":").lstrip()
    return ScriptError(f"{path}:{mark.line + 1}:{mark.column + 1}: {rest}", exc.keys)


def check_steps(raw: Any, where: str, keys: tuple[Any, ...] = ()) -> list[Step]:
    """`raw` checked as a list of steps; `keys`: where it is in the script's data."""
    if not isinstance(raw, list):
        raise ScriptError(f"{where}: the steps must be a list", keys)
    out = []
    for i, s in enumerate(raw, 1):
        at = f"{where} step {i}"
        here = (*keys, i - 1)
        if isinstance(s, str):
            s = {"text": s}
        if not isinstance(s, dict):
            raise ScriptError(f"{at} must be a mapping such as {{text: ...}} or "
                              "{tool: NAME, input: {...}}", here)
        unknown = sorted(set(s) - STEP_KEYS)
        if unknown:
            raise ScriptError(f"{at}: unknown key(s) {', '.join(unknown)} (allowed: "
                              f"{', '.join(sorted(STEP_KEYS))})", (*here, unknown[0]),
                              at_key=True)
        calls: list[Call] = []
        if "tool" in s:
            calls.append(Call(str(s["tool"]), s.get("input", {})))
        if "custom_tool" in s:
            calls.append(Call(str(s["custom_tool"]), str(s.get("input", "")), custom=True))
        for j, c in enumerate(s.get("tools") or [], 1):
            if not isinstance(c, dict) or "tool" not in c:
                raise ScriptError(f"{at}: tools[{j}] needs `tool` (and `input`)",
                                  (*here, "tools", j - 1))
            calls.append(Call(str(c["tool"]), c.get("input", {})))
        fail = _fail(s.get("fail"), at, (*here, "fail")) if "fail" in s else None
        if not calls and "text" not in s and (fail is None or fail.times is not None):
            raise ScriptError(f"{at} has neither `text` nor a tool call"
                              + (" (to answer after its failures)" if fail else ""), here)
        for c in calls:
            if not c.custom and not isinstance(c.input, dict):
                raise ScriptError(f"{at}: the input of {c.name} must be a mapping",
                                  (*here, "input"))
        usage = dict(DEFAULT_USAGE)
        given = s.get("usage") or {}
        if not isinstance(given, dict) or set(given) - USAGE_KEYS or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for v in given.values()):
            raise ScriptError(f"{at}: `usage` takes non-negative integers for "
                              f"{', '.join(sorted(USAGE_KEYS))}", (*here, "usage"))
        usage.update(given)
        delay = s.get("delay", 0)
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
            raise ScriptError(f"{at}: `delay` is a number of seconds", (*here, "delay"))
        text = s.get("text")
        out.append(Step(None if text is None else str(text), tuple(calls), usage, float(delay),
                        fail))
    return out


def _fail(raw: Any, at: str, keys: tuple[Any, ...]) -> Fail:
    how = (f"{at}: `fail` is an HTTP status (500, 429, ...), garbage, disconnect, or "
           "{status|kind, times?, message?}")
    if isinstance(raw, str):
        raw = {"kind": raw}
    elif isinstance(raw, int) and not isinstance(raw, bool):
        raw = {"status": raw}
    if not isinstance(raw, dict) or set(raw) - {"status", "kind", "times", "message"}:
        raise ScriptError(how, keys)
    kind = raw.get("kind", "status")
    status = raw.get("status", 500)
    times = raw.get("times")
    if kind not in ("status", *FAIL_KINDS) or not isinstance(status, int) \
            or isinstance(status, bool) or not 400 <= status <= 599 \
            or (times is not None and (not isinstance(times, int) or isinstance(times, bool)
                                       or times < 1)):
        raise ScriptError(how, keys)
    return Fail(status, kind, times, str(raw.get("message", "scripted failure")))


@attrs.frozen
class Script:
    steps: tuple[Step, ...] = ()
    judge: tuple[dict[str, Any], ...] = ()
    agent_judge: tuple[Step, ...] = ()
    workspace: str | None = None  # what `{workspace}` becomes (else read from the prompt)
    user_turns: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: Any, row: str | None = None, workspace: str | None = None,
                  where: str = "the script") -> Script:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ScriptError(f"{where} must be a mapping with `steps` (and `rows`, `judge`, "
                              "`agent_judge`)")
        from ce_lang.api import SCRIPT_KEYS  # (`ce compile` knows a script by them)

        unknown = sorted(set(data) - SCRIPT_KEYS)
        if unknown:
            raise ScriptError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: steps, "
                              "rows, judge, agent_judge, user_turns)", (unknown[0],),
                              at_key=True)
        turns = data.get("user_turns") or []
        if not isinstance(turns, list) or not all(isinstance(u, str) for u in turns):
            raise ScriptError(f"{where}: `user_turns` is a list of texts", ("user_turns",))
        raw = data.get("steps") or []
        rows = data.get("rows") or {}
        if not isinstance(rows, dict):
            raise ScriptError(f"{where}: `rows` maps a row id to its steps", ("rows",))
        steps_at: tuple[Any, ...] = ("steps",)
        if row is not None and row in rows:
            raw, steps_at = rows[row], ("rows", row)
        elif row is not None and rows and not raw:
            raise ScriptError(f"{where}: no steps for row {row!r} (rows: "
                              f"{', '.join(map(str, rows))})")
        judge = data.get("judge") or []
        if not isinstance(judge, list):
            raise ScriptError(f"{where}: `judge` is a list of {{match?, score, rationale, "
                              "usage?}", ("judge",))
        for i, j in enumerate(judge):
            if not isinstance(j, dict) or "score" not in j:
                raise ScriptError(f"{where}: `judge` is a list of {{match?, score, "
                                  "rationale, usage?}", ("judge", i))
            given = j.get("usage", {})
            if not isinstance(given, dict) or set(given) - USAGE_KEYS or not all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for v in given.values()):
                raise ScriptError(f"{where}: a judge verdict's `usage` takes non-negative "
                                  f"integers for {', '.join(sorted(USAGE_KEYS))}",
                                  ("judge", i, "usage"))
        return cls(tuple(check_steps(raw, f"{where}" + (f" row {row}" if row else ""),
                                     steps_at)),
                   tuple(judge), tuple(check_steps(data.get("agent_judge") or [],
                                                   f"{where} agent_judge", ("agent_judge",))),
                   workspace, tuple(turns))

    def user_turn(self, position: int) -> str:
        """The simulated user's message after `position` earlier ones of its own."""
        if position < len(self.user_turns):
            return self.user_turns[position]
        return "The scripted user has nothing more to say."

    # -- answering ------------------------------------------------------------------------
    def step(self, position: int, request_text: str, judge_session: bool = False) -> Step:
        steps = self.agent_judge if judge_session else self.steps
        if position >= len(steps):
            return Step(END_TEXT, (), dict(DEFAULT_USAGE))
        step = steps[position]
        workspace = self.workspace
        if workspace is None:
            found = WORKDIR.search(request_text)
            workspace = found.group(1) if found else ""
        return Step(_fill(step.text, workspace),
                    tuple(Call(c.name, _fill(c.input, workspace), c.custom)
                          for c in step.calls), step.usage, step.delay, step.fail)

    def _judge_entry(self, request_text: str) -> dict[str, Any] | None:
        default = None
        for entry in self.judge:
            match = entry.get("match")
            if match is None and default is None:
                default = entry
            elif match is not None and match in request_text:
                return entry
        return default

    def verdict(self, request_text: str) -> dict[str, Any]:
        entry = self._judge_entry(request_text)
        if entry is None:
            return {"rationale": "no scripted verdict matches this request"}
        return {"score": entry["score"], "rationale": entry.get("rationale", "")}

    def verdict_usage(self, request_text: str) -> dict[str, int]:
        """The usage the verdict's reply reports (its `usage`, else 10 in and 10 out)."""
        entry = self._judge_entry(request_text) or {}
        return {**DEFAULT_USAGE, **(entry.get("usage") or {})}

    @property
    def total_usage(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            for k, v in s.usage.items():
                out[k] = out.get(k, 0) + v
        return out


def _fill(value: Any, workspace: str) -> Any:
    if isinstance(value, str):
        return value.replace("{workspace}", workspace).replace("$WORKSPACE", workspace)
    if isinstance(value, list):
        return [_fill(v, workspace) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, workspace) for k, v in value.items()}
    return value
