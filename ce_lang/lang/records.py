"""Record types the language knows without a `record` declaration, with the monotonicity
of each field as the trace grows (what the decidability analysis needs)."""

from __future__ import annotations

import attrs

from ce_lang.lang.types import BOOL, FLOAT, INT, JSON, STR, T, list_of


@attrs.frozen
class Field:
    type: T
    mono: str  # const | up | down | none | grows (lists that only get longer)
    doc: str


@attrs.frozen
class MethodSig:
    params: tuple[T, ...]
    ret: T
    mono: str  # as Field.mono, for the call's result given constant arguments
    doc: str


@attrs.frozen
class RecordType:
    name: str
    fields: dict[str, Field]
    methods: dict[str, MethodSig]
    doc: str
    # a `record` declaration's `require` constraints (ast.Require), checked when a value of
    # the record is bound from YAML, and its .ce text (`ce criteria show`)
    requires: tuple = ()
    source: str = ""
    shorthand: str | None = None  # a bare string where the record is expected: this field


TOOL_CALL = RecordType("ToolCall", {
    "tool": Field(STR, "const", "the tool's Claude Code name, whichever agent called it "
                  "(Bash, Read, Write, Edit, Skill, ...)"),
    "raw_tool": Field(STR, "const", "the tool name as the agent reported it"),
    "params": Field(JSON, "const", "the call's parameters"),
    "command": Field(T("str", (), True), "const",
                     "for shell tools (Bash), the command as the agent wrote it "
                     "(`matches` also reads it with `bash -lc '...'` unwrapped); null "
                     "for other tools"),
    "index": Field(INT, "const", "position of the call in the trace (0-based)"),
    "ok": Field(BOOL, "up", "the result arrived and was not an error (never reverts)"),
    "status": Field(STR, "none", "unresolved until the result arrives; then ok/error/denied"),
    "output": Field(STR, "none", "the tool result's text (empty until it arrives)"),
}, {
    "matches": MethodSig((T("regex"),), BOOL, "const",
                         "regex search (DOTALL) over the raw command, its shell-normalized "
                         "form, or the JSON parameters for non-shell tools"),
    "mentions": MethodSig((STR,), BOOL, "const", "a string parameter contains the text"),
    "mentions_path": MethodSig((STR,), BOOL, "const",
                               "a string parameter contains the path, each `/` matching "
                               "any run of `/` or `\\` (Windows and JSON-escaped forms)"),
    "param": MethodSig((STR,), JSON, "const", "one parameter (null when absent)"),
}, "one tool call of the agent")

MESSAGE = RecordType("Message", {
    "role": Field(STR, "const", "user | assistant"),
    "text": Field(STR, "const", "the message text"),
}, {}, "one message of the dialog")

TRACE = RecordType("Trace", {
    "tool_calls": Field(list_of(T("ToolCall")), "grows", "every tool call, in order"),
    "messages": Field(list_of(T("Message")), "grows", "user and assistant messages"),
    "turns": Field(INT, "up", "model calls so far"),
    "final_output": Field(STR, "none", "the agent's last assistant message"),
}, {}, "the agent's trace (grows while the agent runs)")

COMMAND_RESULT = RecordType("CommandResult", {
    "exit_code": Field(INT, "const", "exit status; -1 on timeout"),
    "stdout": Field(STR, "const", "standard output"),
    "stderr": Field(STR, "const", "standard error"),
    "timed_out": Field(BOOL, "const", "the command hit its timeout"),
}, {}, "a finished shell command")

JSON_FILE = RecordType("JsonFile", {
    "ok": Field(BOOL, "const", "the file exists and holds valid JSON"),
    "value": Field(JSON, "const", "the parsed document (null when not ok)"),
    "error": Field(T("str", (), True), "const", "why not ok"),
}, {}, "a JSON file read from the workspace")

VERDICT = RecordType("Verdict", {
    "score": Field(FLOAT, "const", "0..1"),
    "rationale": Field(STR, "const", "the judge's explanation"),
}, {}, "a judge's structured verdict")

CLI_CALL = RecordType("CliCall", {
    "tool": Field(STR, "const", "the shadowed executable (empty when the record has none)"),
    "argv": Field(list_of(STR), "const", "the arguments after the tool name"),
    "exit": Field(T("int", (), True), "const", "the exit status the shim answered with"),
    "rule": Field(T("int", (), True), "const",
                  "index of the response rule that answered (null: the entry's default)"),
    "fault": Field(T("str", (), True), "const",
                   "the shim could not evaluate its response rules for this call"),
    "line": Field(INT, "const", "line of the record in the log (1-based)"),
}, {}, "one recorded invocation of a shadowed CLI")

CLI_LOG = RecordType("CliLog", {
    "error": Field(T("str", (), True), "const",
                   "why the log cannot be trusted (missing, a write failed, unreadable "
                   "records); null when it can"),
    "calls": Field(list_of(T("CliCall")), "const", "the recorded invocations, in order"),
}, {}, "a JSON Lines invocation log (sandbox.record_cli writes cli_mocks/calls.jsonl)")

BUILTIN_RECORDS: dict[str, RecordType] = {
    r.name: r for r in (TOOL_CALL, MESSAGE, TRACE, COMMAND_RESULT, JSON_FILE, VERDICT,
                        CLI_CALL, CLI_LOG)
}
