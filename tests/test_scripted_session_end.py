"""A scripted session shorter than the agent's: past the last step the scripted server
answers "no more steps" and the agent ends its turn, which can look like a finished
session (the trial may even succeed). task.json's `model_server.past_end` counts those
calls and the trace says so; a script the agent used up exactly counts none."""

from __future__ import annotations

import pytest

from tests.engines import need
from tests.test_agent_fidelity import ce_run, missing, of, shell, task, trial

pytestmark = pytest.mark.slow

ANY = "  - {type: file_exists, path: first.txt, description: d}\n"


def test_calls_past_the_scripts_last_step_are_counted_and_said(tmp_path):
    need(missing("openai"))
    task(tmp_path, "short", "openai", [shell("openai", "echo 1 > first.txt")],
         criteria=ANY)
    task(tmp_path, "whole", "openai", [shell("openai", "echo 1 > first.txt"),
                                       {"text": "done"}], criteria=ANY)
    res = ce_run(tmp_path)
    assert "Traceback" not in res.stderr, res.stderr

    record, events, _ = trial(tmp_path, "short")
    assert record["status"] == "SUCCESS", record["agent_outcome"]
    assert record["model_server"]["calls"] == 2
    assert record["model_server"]["past_end"] == 1
    said = [e.text for e in of(events, "Message") if e.role == "system"]
    assert said == ["ce: the agent made 1 model call(s) past the last step of its "
                    "scripted session; each was answered 'The scripted session has no "
                    "more steps.'"]

    record, events, _ = trial(tmp_path, "whole")
    assert record["model_server"]["calls"] == 2
    assert "past_end" not in record["model_server"]
    assert not [e for e in of(events, "Message") if e.role == "system"]
