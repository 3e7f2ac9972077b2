"""Argv patterns, shared by `sandbox.record_cli` response rules and the `cli_called`
criterion (coder_eval 0.12.16). Both are evaluated by `ce_lang.argv_match`; the rules
that reject a pattern which cannot mean what it looks like live in `ce_lang.rules`."""

from __future__ import annotations

from typing import ClassVar

import attrs

from ce_lang.schema.fields import spec
from ce_lang.schema.records import FlagMatch  # generated from stdlib cli.ce

frozen = attrs.frozen(kw_only=True)

RECORD_CLI_DIR = "cli_mocks"  # where the shims are written, first on the agent's PATH
RECORD_CLI_LOG_NAME = "calls.jsonl"
RECORD_CLI_LOG = f"{RECORD_CLI_DIR}/{RECORD_CLI_LOG_NAME}"
# shadowing these breaks the harness (the shim's interpreter, the criteria's shell)
RECORD_CLI_RESERVED = frozenset(
    {"python", "python3", "py", "env", "sh", "bash", "zsh", "cmd", "node", "uv", "git"})
TOOL_PATTERN = r"[A-Za-z0-9._+-]+"


@frozen
class CliMatch:
    """A pattern over one invocation's arguments (the `when:` of a response rule)."""

    # `when: "ixp dummy1"` is the obvious first try: say the spelling that works
    SCALAR_HELP: ClassVar[str] = 'a pattern has several facets: write {{verb: "{value}"}}'

    verb: str | None = spec(None, doc="subcommand chain, a token-wise prefix of the "
                                      "non-flag arguments")
    verb_any_of: list[str] | None = spec(None, doc="alternative whole verbs")
    positional: list[str] | None = spec(None, doc="non-flag arguments after the verb "
                                                  "(a prefix)")
    flags: dict[str, FlagMatch | str] | None = spec(
        None, doc="flag name (no dashes) -> predicate; a bare scalar means equals")
    value_flags: list[str] = spec(factory=lambda: ["output"],
                                  doc="flags that take the next token as their value")
    ignore_flags: list[str] = spec(factory=list, doc="flags dropped before matching "
                                                     "(none by default on a rule)")


@frozen
class CliResponse:
    when: CliMatch = spec(doc="the pattern an invocation must match, e.g. {verb: \"ixp get\"}")
    exit_code: int = spec(0, ge=0, le=255, doc="exit status of a matching invocation")
    stdout: str = spec("", doc="printed on stdout for a matching invocation")
    stderr: str = spec("", doc="printed on stderr for a matching invocation")


@frozen
class RecordedCli:
    """One executable shadowed by a generated recording shim in `cli_mocks/`."""

    tool: str = spec(non_empty=True, pattern=TOOL_PATTERN,
                     pattern_hint="a bare executable name: letters, digits, . _ + -",
                     doc="executable name to shadow on the agent's PATH")
    exit_code: int = spec(1, ge=0, le=255, doc="exit status when no response rule matches "
                                               "(default 1: an undescribed call fails)")
    stdout: str = spec("", doc="printed on stdout when no rule matches")
    stderr: str = spec("", doc="printed on stderr when no rule matches")
    responses: list[CliResponse] = spec(factory=list,
                                        doc="per-invocation answers, first match wins")
