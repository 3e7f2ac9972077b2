"""A trial's record (task.json) as a typed value, and the one definition of its statuses.

`_record` in execute/trial.py builds a `TrialRecord`; the reports, the commands and a
resume read one back (`read_record`, `as_record`) and use attributes, not string keys.
On disk the record stays the JSON object it always was: `encode_record` writes the same
keys as the dict writer did, and decoding is lenient where history is: every field but
`trial_id` and `status` has a default (an older ce wrote fewer; the in-memory LOST record
has three), and keys this ce does not know are ignored (a newer ce's fields do not break
an older reader). What is not a record at all is `InvalidRecord`, one line naming why.

Statuses: `Status` lists every one; the tuples below group them the way the reports and
re-scoring need. Nothing else in ce_runtime spells a status out (a test checks).
"""

from __future__ import annotations

import enum
import json
import os
from typing import Any

import msgspec

from ce_runtime.store.archive import DIGEST_KEYS, DamagedArchive, load_task_record


class Status(enum.StrEnum):
    """A trial's outcome (coder_eval's FinalStatus, plus ce's NOT_GRADED and LOST)."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    TIMEOUT = "TIMEOUT"
    MAX_TURNS_EXHAUSTED = "MAX_TURNS_EXHAUSTED"
    TOKEN_BUDGET_EXCEEDED = "TOKEN_BUDGET_EXCEEDED"
    COST_BUDGET_EXCEEDED = "COST_BUDGET_EXCEEDED"
    ERROR = "ERROR"
    NOT_GRADED = "NOT_GRADED"
    LOST = "LOST"  # the trial's directory vanished mid-run: reported, never written


# a run limit stopped the agent (the trial is still graded, and fails)
RUN_LIMIT_STATUSES = (Status.TIMEOUT, Status.MAX_TURNS_EXHAUSTED,
                      Status.TOKEN_BUDGET_EXCEEDED, Status.COST_BUDGET_EXCEEDED)
# a task.json can hold these, in the order the reports list them (LOST is never written)
STATUSES = (Status.SUCCESS, Status.FAILURE, *RUN_LIMIT_STATUSES, Status.ERROR,
            Status.NOT_GRADED)
# neither a failure nor an error (SARIF reports nothing for these)
NOT_FAILED_STATUSES = (Status.SUCCESS, Status.NOT_GRADED)
# how the outcome of a trial whose timeout came while the model API was failing, or
# whose agent gave up on a model call that kept failing, begins (an ERROR, the API's:
# agent_phase.run_agent writes it, TrialRecord.model_outage reads it)
MODEL_OUTAGE = "the model API was failing when "


class InvalidRecord(ValueError):
    """Bytes or a value that are no trial record (not JSON, or a field of the wrong
    type): `why` says which."""

    def __init__(self, why: str, where: str = "task record"):
        super().__init__(f"{where}: not a valid trial record ({why})")
        self.where, self.why = where, why


class _Part(msgspec.Struct, kw_only=True, omit_defaults=False, frozen=True):
    pass


class Usage(_Part):
    input_tokens: int = 0  # new input only: reads from and writes to the prompt cache apart
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    tool_calls: int = 0


class JudgeUsage(_Part):
    """What a trial's judges cost, llm_judge calls and agent_judge sessions
    (grade/judge_usage.py): apart from the agent's usage."""

    calls: int = 0  # verdicts asked for or reused, agent_judge sessions included
    agent_sessions: int = 0  # of the calls, agent_judge sessions
    recorded: int = 0  # verdicts reused from the cache (reported at their recorded cost)
    unmetered: int = 0  # verdicts recorded without their usage (an older ce's)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0  # of the judges with a rate
    cost_unknown: list[str] = []  # why some judge tokens are not priced


class AgentOutcome(_Part):
    reason: str
    detail: str = ""


class EarlyStop(_Part):
    """coder_eval's EarlyStopInfo: present iff the run was stopped early."""

    reason: str
    deciding_criterion: str
    deciding_criterion_type: str | None = None
    deciding_criterion_description: str | None = None
    armed_criteria: list[str] = []
    tool_call_index: int | None = None
    turn_index: int | None = None
    turns_remaining_at_stop: int | None = None
    gate_threshold: float | None = None
    rule: str | None = None


class CriterionRecord(_Part):
    """One criterion's result (`criterion_records` in grade/interpreter.py writes it)."""

    id: str
    type: str
    description: str | None = None
    kind: str | None = None
    score: float | None = None
    pass_threshold: float | None = None
    passed: bool = False
    weight: float | None = None
    gating: bool = False
    advisory: bool = False
    disabled: bool = False
    error: str | None = None
    outputs: dict[str, Any] = {}
    suite_thresholds: dict[str, float] | None = None


class CommandRecord(_Part):
    """A pre_run or post_run command's outcome (execute/task_commands.CommandOutcome)."""

    command: str
    exit_code: int = -1
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_ms: float = 0.0
    failed: bool = False
    ok: bool = True
    fail_on_error: bool = False


class SandboxNote(_Part):
    """How the sandbox driver held the trial (Enforcement.as_record)."""

    driver: str
    isolation: str | None = None
    network: str | None = None
    limits: dict[str, Any] = {}
    not_enforced: list[str] = []


class DialogRecord(_Part):
    """A simulated-user dialog: how many turns and what ended it."""

    turns: int = 0
    ended_by: str = "agent"
    checks: list[dict[str, Any]] = []
    user_messages: int = 0


class Previous(_Part):
    """A re-scored trial's outcome before the re-score."""

    status: str | None = None
    weighted_score: float | None = None
    plan_hash: str | None = None


class TrialRecord(_Part, kw_only=True):
    """A trial's task.json. Field order and names are the file's keys."""

    schema_version: int = 1
    trial_id: str
    variant_id: str | None = None
    experiment_id: str | None = None
    task_id: str | None = None
    suite_id: str | None = None
    row_id: str | None = None
    repeat: int = 0
    tags: list[str] = []
    task_file: str | None = None
    task_dir: str | None = None
    plan_hash: str | None = None
    agent: str | None = None
    model: str | None = None
    status: str
    stopped_early: bool = False
    early_stop_reason: str | None = None
    early_stop: EarlyStop | None = None
    monitor_gave_up: dict[str, str] = {}
    weighted_score: float | None = None
    success: bool = False
    started_at: str | None = None
    duration_s: float | None = None
    agent_outcome: AgentOutcome | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    # why usage.cost_usd leaves the agent's tokens out: its model has no rate (written
    # only then; ce_runtime.pricing)
    cost_unknown: str | None = None
    # the llm_judge calls' tokens and cost (only when the trial called a judge)
    judge_usage: JudgeUsage | None = None
    expected_turns: int | None = None
    criteria: list[CriterionRecord] = []
    error: str | None = None
    pre_run: list[CommandRecord] = []
    post_run: list[CommandRecord] = []
    sandbox: SandboxNote | None = None
    setup: list[Any] = []
    agent_left_running: list[Any] = []
    teardown_killed: list[Any] = []
    oom_killed: bool = False
    integrity: list[Any] = []
    model_server: dict[str, Any] | None = None
    judge_sessions: list[Any] = []
    dialog: DialogRecord | None = None
    # a re-scored trial's (grade/rescore.py): where from, and what it was before
    rescored_from: str | None = None
    previous: Previous | None = None
    rescore_notes: list[str] | None = None
    # written by the archive (write_trial_files), checked by `read_record`
    trace_sha256: str | None = None
    workspace_sha256: str | None = None
    record_sha256: str | None = None

    @property
    def model_outage(self) -> bool:
        """An ERROR because the model API was still failing when a timeout came, or when
        the agent gave up (its outcome says `MODEL_OUTAGE` ...: agent_phase.run_agent),
        not the agent's."""
        outcome = self.agent_outcome
        return self.status == Status.ERROR and not self.error and outcome is not None \
            and outcome.reason == "error" and outcome.detail.startswith(MODEL_OUTAGE)

    @property
    def error_reason(self) -> str | None:
        """Why an ERROR trial is one: its `error` (a sandbox, pre_run or grading failure),
        else the agent's own end (`agent_outcome`, whose detail the CLI or model gave);
        None for any other status."""
        if self.status != Status.ERROR:
            return None
        if self.error:
            return self.error
        outcome = self.agent_outcome
        if outcome is not None and outcome.reason == "error":
            if self.model_outage:  # said as is: it is the API's
                return outcome.detail
            return "the agent ended in an error" + (f": {outcome.detail}" if outcome.detail
                                                    else "")
        return None


# keys a record has only once something wrote them (the archive, a re-score, a cost
# that is unknown)
_PRESENT_ONLY = (*DIGEST_KEYS, "rescored_from", "previous", "rescore_notes", "cost_unknown",
                "judge_usage")


# usage keys written only when not 0 (the prompt cache's tokens: an agent without one, and
# every record an older ce wrote, keep the usage they had)
_USAGE_PRESENT_ONLY = ("cache_read_tokens", "cache_write_tokens")


def record_dict(rec: TrialRecord) -> dict[str, Any]:
    """The record as task.json's JSON object: every key the dict writer wrote; the
    archive's digests, a re-score's notes and an unknown cost only once recorded."""
    out = msgspec.to_builtins(rec)
    for key in _PRESENT_ONLY:
        if out.get(key) is None:
            out.pop(key, None)
    for key in _USAGE_PRESENT_ONLY:
        if not out["usage"].get(key):
            out["usage"].pop(key, None)
    return out


def encode_record(rec: TrialRecord) -> bytes:
    """task.json's bytes for `rec` (as archive.write_trial_files lays them out: sorted
    keys, indented; the digests are the archive's to add)."""
    return (json.dumps(record_dict(rec), indent=2, sort_keys=True) + "\n").encode()


def as_record(value: TrialRecord | dict[str, Any], where: str = "task record"
              ) -> TrialRecord:
    """A record from a task.json-shaped dict (a test's, `ce rescore`'s, an older ce's),
    or the record itself; InvalidRecord when a field has the wrong type."""
    if isinstance(value, TrialRecord):
        return value
    if not isinstance(value, dict):
        raise InvalidRecord(f"a {type(value).__name__}, not a JSON object", where)
    try:
        return msgspec.convert(value, TrialRecord)
    except msgspec.ValidationError as exc:
        raise InvalidRecord(str(exc), where) from None


def as_records(values) -> list[TrialRecord]:
    """`as_record` of each: the reports take typed records or task.json-shaped dicts. A
    list of records already is returned as it is (the reports key their frames on it)."""
    if isinstance(values, list) and all(type(v) is TrialRecord for v in values):
        return values
    return [as_record(v) for v in values]


def decode_record(data: bytes | str, where: str = "task record") -> TrialRecord:
    """A record from task.json's bytes; InvalidRecord (never a traceback) otherwise."""
    try:
        return msgspec.json.decode(data, type=TrialRecord)
    except msgspec.ValidationError as exc:
        raise InvalidRecord(str(exc), where) from None
    except msgspec.DecodeError as exc:
        raise InvalidRecord(f"not valid JSON: {exc}", where) from None


def read_record(path: str) -> TrialRecord:
    """A trial's task.json (`path`: the trial directory or the file), checked as the
    archive checks it (its own digest, its ids and plan hash), then typed.
    DamagedArchive ("damaged archive: PATH: why") for either failure, as for every other
    archived file."""
    trial_dir = os.path.dirname(path) if os.path.basename(path) == "task.json" \
        and os.path.isfile(path) else path
    return checked_record(load_task_record(trial_dir), trial_dir)


def checked_record(task: dict[str, Any], trial_dir: str) -> TrialRecord:
    """The record of a task.json the archive read and checked (`verified_trial`,
    `load_task_record`); a field of the wrong type is DamagedArchive too."""
    try:
        return as_record(task)
    except InvalidRecord as exc:
        raise DamagedArchive(os.path.join(trial_dir, "task.json"), exc.why) from None
