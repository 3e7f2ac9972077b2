"""The static ClaudeAgentOptions field lists match the installed claude-agent-sdk."""

import dataclasses

import pytest

from ce_lang.schema.sdk_options import MANAGED, PASS_THROUGH


def test_lists_partition_the_sdk_fields():
    sdk = pytest.importorskip("claude_agent_sdk")
    fields = {f.name for f in dataclasses.fields(sdk.ClaudeAgentOptions)}
    assert not (MANAGED & PASS_THROUGH)
    assert fields - (MANAGED | PASS_THROUGH) == set(), "new SDK fields: classify them"
    assert (MANAGED | PASS_THROUGH) - fields == set(), "fields the SDK no longer has"
