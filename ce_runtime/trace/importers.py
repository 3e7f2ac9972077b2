"""Foreign transcripts -> ce trace events, so that runs ce did not make can be scored too.

Formats (`detect_format` tells them apart by content):

  claude-stream   what `claude -p --output-format stream-json --verbose` prints (the same
                  records the Agent SDK parses): system/init, assistant, user, result
  claude-session  the transcript Claude Code itself writes under
                  $CLAUDE_CONFIG_DIR/projects/<dir>/<session>.jsonl
  coder-eval      a coder_eval `task.json` (an EvaluationResult)
  codex-session   the session log Codex writes under
                  $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl (its own mapping, that
                  of ce's codex agent: `ce_runtime.trace.import_codex`)

The mapping, the same for every format:

- A `RunHeader` comes first: trial and task ids from the caller, else from the content
  (coder_eval's task_id) or the file name; `plan_hash` is "" unless given. An
  `AgentStart` precedes the agent's first activity (again after each `AgentEnd`).
- Turns: one per assistant API message. `TurnStart(n)` (n counts from 1) comes before
  the message's first content block; consecutive records with the same message id are
  one turn (Claude Code writes one record per content block). `TurnEnd(n)` comes when
  the next assistant message starts or the agent ends, so the tool results answering a
  turn's calls lie inside it. A transcript that stops without an end record leaves its
  last turn open, as a crashed live run does. Sub-agent records (`parent_tool_use_id`,
  `isSidechain`) add their messages, calls, results and usage but no turn boundaries:
  they run inside the main turn that called the sub-agent.
- Assistant text -> `Message(assistant)`; user text -> `Message(user)` (Claude Code's
  meta entries are skipped); thinking is not recorded.
- A tool use -> `ToolCall` (`raw_tool` as the agent named it, `tool` normalized to
  Claude Code's names by `ce_runtime.trace.events.normalize_tool`, as for live agents:
  shell tools `exec_command`, `shell`, `local_shell`, `command_execution` and `bash`
  become `Bash` with params `{"command": str, ...}` (the command as written), `read` /
  `write` / `edit` / `apply_patch` become `Read` / `Write` / `Edit` / `Edit`, and so on;
  Claude's names are already canonical).
  A tool result -> `ToolResult`, status `error` when the source says so, `denied` for
  the calls a stream-json result lists in `permission_denials`, else `ok`.
- A call without a result gets no `ToolResult`: the interpreter treats a missing result
  as unresolved, exactly as for a live run that was cut off.
- `Usage` events are increments: their sum over a trace is the run's total. Claude Code
  repeats a message's usage on every record of that message; only growth beyond what
  was already counted for that message id is emitted. An authoritative total (the
  stream-json result, a coder_eval turn's or run's `token_usage`) adds one final `Usage`
  with the difference, clamped at zero, and the cost, so the sum matches it.
  `input_tokens` is the uncached input (Anthropic's meaning; coder_eval's
  `uncached_input_tokens`); cache reads and writes are counted apart.
- `t` is seconds since the first timestamp of the source (session entries, coder_eval
  datetimes; naive times are read as UTC) and never decreases. stream-json has no timestamps: everything is at 0
  except the end, at the result's `duration_ms`.
- `RunEnd` is never emitted: an import is not a run of ce's; the source's own verdict,
  when it has one, goes into the `AgentEnd` detail.
- Unknown record types and content blocks are skipped; malformed lines and records
  become warnings `Problem(line, message, col)` (0 when no line or column applies;
  JSON that does not parse: where it stops parsing), never errors.

The code: `import_builder` (the shared `Builder`, `ImportResult`),
`import_claude` (claude-stream, claude-session), `import_coder_eval`; this module tells
the formats apart and reads a file.

coder_eval's field-by-field mapping is in `ce_runtime.trace.import_coder_eval`.
"""

from __future__ import annotations

import os

import msgspec

from ce_runtime.trace.events import normalize_tool
from ce_runtime.trace.import_builder import ImportResult, json_lines
from ce_runtime.trace.import_claude import import_claude_session, import_claude_stream
from ce_runtime.trace.import_coder_eval import import_coder_eval
from ce_runtime.trace.import_codex import import_codex_session

__all__ = [
    "FORMATS",
    "ImportResult",
    "UnknownFormat",
    "detect_format",
    "import_claude_session",
    "import_claude_stream",
    "import_coder_eval",
    "import_codex_session",
    "import_file",
    "normalize_tool",
]

FORMATS = ("claude-stream", "claude-session", "coder-eval", "codex-session")
CODEX_RECORDS = ("session_meta", "response_item", "event_msg", "turn_context",
                 "token_usage_record")


def detect_format(data: bytes) -> str | None:
    """Tell the formats apart by content; None when it is none of them."""
    text = data.lstrip()
    if not text:
        return None
    try:
        doc = msgspec.json.decode(text)
    except msgspec.DecodeError:
        doc = None
    if isinstance(doc, dict) and (isinstance(doc.get("iterations"), list)
                                  or isinstance(doc.get("turns"), list)  # its legacy alias
                                  or ("task_id" in doc and "final_status" in doc)):
        return "coder-eval"  # (ce's run.json has a `turns` count, not a list)
    for _, rec in json_lines(b"\n".join(text.split(b"\n", 50)[:50]), []):
        kind = rec.get("type")
        if kind in CODEX_RECORDS and isinstance(rec.get("payload"), dict):
            return "codex-session"
        if "parentUuid" in rec or "sessionId" in rec or kind in ("summary",
                                                                  "file-history-snapshot"):
            return "claude-session"
        if kind in ("system", "result") or "session_id" in rec \
                or (kind in ("assistant", "user") and "message" in rec):
            return "claude-stream"
    return None


_IMPORTERS = {
    "claude-stream": import_claude_stream,
    "claude-session": import_claude_session,
    "coder-eval": import_coder_eval,
    "codex-session": import_codex_session,
}


class UnknownFormat(ValueError):
    pass


def import_file(path: str, fmt: str = "auto", *, task_id: str | None = None,
                trial_id: str | None = None, plan_hash: str = "") -> ImportResult:
    """Read a transcript and convert it; raises UnknownFormat when `auto` cannot tell."""
    with open(path, "rb") as fh:
        data = fh.read()
    if fmt == "auto":
        detected = detect_format(data)
        if detected is None:
            raise UnknownFormat(f"{path}: not a Claude Code stream-json or session "
                                "transcript, a Codex session log or a coder_eval task.json "
                                "(pass --format to force one)"
                                + _own_record_hint(path))
        fmt = detected
    if fmt not in _IMPORTERS:
        raise UnknownFormat(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return _IMPORTERS[fmt](data, task_id=task_id, trial_id=trial_id, plan_hash=plan_hash,
                           name=path)


def _own_record_hint(path: str) -> str:
    """A ce run's own files are not transcripts: say where its trace already is."""
    folder, name = os.path.split(path)
    sibling = {"run.json": "trials.parquet", "task.json": "trace.msgpack",
               "evidence.json": "trace.msgpack", "workspace.json": "trace.msgpack"}.get(name)
    if sibling is None or not os.path.exists(os.path.join(folder or ".", sibling)):
        return ""
    if name == "run.json":
        return "; this is a ce run's own run.json: its trials' traces are ce traces already " \
               "(each trial's trace.msgpack)"
    return f"; this is a ce run's own {name}: its trace is a ce trace already " \
           f"({os.path.join(folder, 'trace.msgpack')})"
