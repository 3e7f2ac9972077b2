"""Every diagnostic code ce can emit, with a one-line title and a user explanation.

This table is the documentation: `ce compile --explain CE0101` prints an entry, and a
test checks that every code the compiler emits is listed here.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Code:
    code: str
    severity: str  # "error" | "warning"
    title: str
    explanation: str


_TABLE = [
    # -- input files and YAML ---------------------------------------------------------
    ("CE0001", "error", "cannot read file",
     "A path given on the command line, or referenced from a task, could not be read."),
    ("CE0002", "error", "YAML syntax error",
     "The file is not valid YAML. The location points at the first token the parser rejected."),
    ("CE0003", "error", "duplicate key",
     "A mapping repeats a key (a YAML mapping, or a JSON object in a dataset's JSONL row). "
     "YAML and JSON loaders silently keep the last one; ce rejects it so a setting or a "
     "row's value is never overridden by accident."),
    ("CE0004", "error", "document is not a mapping",
     "A task or experiment file must be one YAML mapping (key: value pairs) at the top level."),
    ("CE0005", "error", "unsupported YAML construct",
     "Several documents in one file, recursive aliases, non-scalar mapping keys and "
     "oversized alias expansions are rejected."),
    ("CE0006", "error", "no task files matched",
     "A path, directory or glob given to `ce compile`/`ce run` matched no .yaml/.yml file, "
     "or a directory's YAML files are none of them a task (nor an experiment): without a "
     "task_id or success_criteria a file found in a directory is skipped, and a CI check "
     "pointed at the wrong directory passed with `0 task files`."),
    ("CE0007", "error", "file too large",
     "A task or experiment file over 2 MiB is refused before it is parsed: parsing YAML "
     "takes about 40 times the file's size in memory. Large data belongs in a dataset "
     "file (rows are read one at a time) or in a prompt file the task names."),
    ("CE0008", "warning", "a scripted model session named as a task",
     "A file given to `ce compile`/`ce run` is a scripted model session or a set of judge "
     "replies (only `steps`, `rows`, `judge`, `agent_judge`, `user_turns` at its top "
     "level), as a glob over a task directory names them (`tasks/*.yaml` matches "
     "`hello_world.codex.model.yaml`). It is skipped, not compiled as a task (which said "
     "every task field it lacks); a task reads it through `agent.model_script`, "
     "`--scripted-model` or `--judge-replies`."),
    # -- schema -------------------------------------------------------------------------
    ("CE0101", "error", "unknown field",
     "The key is not a field of this mapping. ce is strict at every level (the top level "
     "included): a typo would otherwise silently drop a setting. The help line suggests the "
     "closest known field."),
    ("CE0102", "error", "missing required field",
     "A required field is absent."),
    ("CE0103", "error", "wrong type",
     "The value has the wrong YAML type (for example a string where a number is expected). "
     "Booleans are never accepted as numbers."),
    ("CE0104", "error", "value out of range",
     "A number is outside its allowed range (weights >= 0 and finite, thresholds in [0, 1], "
     "timeouts within their limits, counts >= 0 ...)."),
    ("CE0105", "error", "invalid choice",
     "The value must be one of a fixed set of choices; the help line lists them."),
    ("CE0106", "error", "removed field",
     "The field existed in earlier versions of the task format and was removed; the message "
     "says what replaces it."),
    ("CE0107", "error", "removed criterion type",
     "The criterion type was removed; the message says which criterion replaces it."),
    ("CE0108", "error", "unknown criterion or source type",
     "`type:` names no known criterion (or template source). The help line suggests the closest one."),
    ("CE0109", "error", "conflicting fields",
     "Two fields that exclude each other are both set (for example `initial_prompt` and "
     "`initial_prompt_file`, or `expected_stdout` and `score_from_stdout`)."),
    ("CE0110", "error", "empty value",
     "The value must not be empty (an empty list of criteria, a blank string, a bare `!` "
     "ignore pattern ...)."),
    ("CE0111", "error", "invalid value",
     "The value is well-typed but not valid here (an invalid regular expression, a malformed "
     "identifier, min_count greater than max_count ...)."),
    ("CE0112", "error", "invalid sdk_options key",
     "`agent.sdk_options` passes fields through to Claude Code's ClaudeAgentOptions. A key that "
     "is not a ClaudeAgentOptions field, or that ce manages itself (model, allowed_tools, "
     "permission_mode, hooks, mcp_servers, ...), is rejected; sdk_options on an agent other "
     "than claude-code is rejected."),
    ("CE0113", "error", "coder_eval feature not implemented",
     "The task uses a form specific to coder_eval's vendor integrations (the `antigravity` "
     "and `delegate` agent types, the `system_one_judge` criterion) that ce does not "
     "implement. It is not a typo, so no other name is suggested: run such a task with "
     "coder_eval, or replace the agent or criterion with one ce provides."),
    # -- task rules ---------------------------------------------------------------------
    ("CE0201", "error", "missing prompt",
     "A task needs `initial_prompt` or `initial_prompt_file`, unless `agent.type` is `none` or "
     "an enabled `simulation` opens the dialog. The type is the resolved one: a variant's "
     "`agent: {type: ...}` is over the task's `type: none` (the note names the variant)."),
    ("CE0202", "error", "prompt not allowed",
     "An `agent: {type: none}` task runs no agent, so a prompt would be silently ignored."),
    ("CE0203", "error", "invalid tag",
     "Tags are lowercase kebab-case, optionally namespaced once as `key:value` "
     "(e.g. `smoke`, `lifecycle:generate`)."),
    ("CE0204", "error", "criterion needs an agent",
     "An `agent: {type: none}` task cannot use a criterion that reads the agent's trace "
     "(command_executed, commands_efficiency, skill_triggered, reference_comparison, ...)."),
    ("CE0205", "error", "simulation not allowed",
     "An `agent: {type: none}` task cannot enable a simulation: there is no agent to talk to."),
    ("CE0206", "error", "path escapes its root",
     "A workspace path (criterion path, mount_point, starter file path ...) must be relative "
     "and stay inside the workspace; a reference file must stay inside the reference directory."),
    ("CE0207", "error", "referenced file not found",
     "A file or directory the task refers to relative to its own location (prompt file, "
     "template_dir, reference, dataset, JSON Schema given as $TASK_DIR/...) does not exist; "
     "or a reference_comparison's `reference_file` is not a file in the task's "
     "`reference.directory`."),
    ("CE0208", "error", "repo source must come first",
     "A `repo` template source clones into an empty workspace, so it must be the first source."),
    ("CE0209", "error", "reference required",
     "The criterion compares with or shows the reference solution, but the task has no "
     "`reference:` block."),
    ("CE0210", "warning", "stop_when is inert",
     "`stop_when` arms a criterion for early stop only when `run_limits.stop_early: true`; "
     "without it the task runs to the end."),
    ("CE0211", "error", "stop_when cannot be armed here",
     "Early stop needs a live agent trace: it cannot be armed on an `agent: {type: none}` "
     "task or with an enabled simulation, nor on a weight-0 (informational) criterion."),
    ("CE0212", "error", "suite_thresholds misuse",
     "`suite_thresholds` gate a dataset-backed suite on aggregate metrics: they need a "
     "`dataset:`, known metric names (accuracy, macro_f1, weighted_f1, micro_f1, "
     "precision.<label>, recall.<label>, f1.<label> for classification criteria; pass_rate "
     "and mean_score for the others; for any criterion coder_eval's count, mean, median, "
     "std, min, max and completion_rate) and minimums in [0, 1] (`count`, a number of "
     "results: at least 0)."),
    ("CE0213", "error", "duplicate identifier",
     "Two tasks, variants or dataset rows share an id; results would overwrite each other."),
    ("CE0214", "warning", "field has no effect",
     "The field is accepted but does nothing in this configuration (for example "
     "`include_reference: true` on a task without a reference, a legacy `stop_early` "
     "block while `run_limits.stop_early: false`, or an agent key the task's agent type "
     "never reads: `agent.script` on any agent but `script`, Claude Code's settings on "
     "another agent; not when `--agent` or `-D agent.type` chose the type; or a run "
     "limit an `agent: {type: none}` task sets, such as `max_turns` or `expected_turns`: "
     "no agent runs, and its trials are left out of the within-expected-turns metric)."),
    ("CE0215", "warning", "not enforced on this host",
     "A sandbox setting this host cannot honour: a limit (`max_memory_mb`, `max_pids`, "
     "`max_cpus`) with no writable control group for its driver, `max_disk_mb` (no driver "
     "enforces it yet), or a `network` restriction under `driver: tempdir`. The trial runs "
     "anyway and its task.json records what was not enforced; use bwrap or docker, or a "
     "host with delegated cgroups."),
    ("CE0216", "error", "path outside the suite root",
     "Every host path a task makes ce read (initial_prompt_file, agent.system_prompt_file, "
     "reference file and directory, template_dir paths, dataset paths, criteria_files, "
     "dockerfile_path, model_script, agent.plugins paths, `$TASK_DIR/...` files in "
     "criteria, local `repo` paths, and the entries of the directories ce copies) must resolve, symlinks "
     "followed, inside a suite root, so a task file from elsewhere cannot copy host "
     "secrets (`/proc/self/environ`, `~/.ssh`) into a plan or a sandbox. The suite roots "
     "of a path written in a file are the parent of that file's directory (so "
     "`$TASK_DIR/../shared/rubric.md` works; the file's own directory when that parent is "
     "`/`, a top-level directory such as /tmp, or your home directory, so a task saved in "
     "~/Downloads cannot reach ~/.ssh), every directory given to `ce compile`/`ce run` "
     "(or the fixed part of a glob), and for `-D` values the working directory; /proc, "
     "/sys and /dev never are. `--allow-path DIR` (repeatable) allows one "
     "more directory explicitly. The message never shows the file's content."),
    ("CE0217", "error", "not a regular file or directory",
     "ce reads only regular files and directories from the host: a FIFO, socket or device "
     "(or a symlink to one, such as /dev/zero) named as a task file, prompt file, dataset, "
     "criteria file or experiment file (`-e`), or found inside a template or reference directory "
     "would block or never end. "
     "Replace it with a regular file, or remove it from the directory."),
    ("CE0218", "error", "invalid repo source",
     "A `repo` source's `url` must be a repository URL (https://, http://, ssh://, "
     "git://, or scp-like user@host:path) or a local path to a directory inside the "
     "suite root; `file://` URLs, remote helpers (`ext::...`) and anything starting with "
     "`-` are refused, because git would run a command or read host files. `commit` is "
     "a commit id (7 to 40 hex digits) or a branch or tag name (not starting with `-`)."),
    ("CE0219", "error", "invalid script action",
     "Each entry of `reference.solve` (a list) and of `agent.script` is one action the "
     "script player replays: exactly one of say, write, edit, read, run, tool, sleep, "
     "usage, fail, with that action's keys (`write` needs `content`, `edit` needs `old` "
     "and `new`, `run` may set `timeout`, `tool` may set `params`, `output`, `status`). "
     "A misspelt action (`writ:`) would fail only when the trial runs; the help line "
     "suggests the closest one."),
    ("CE0220", "error", "the oracle has nothing to apply",
     "A task run by the oracle (`agent.type: oracle`, or `ce run --agent oracle`) needs a "
     "reference it can apply: `reference.solve` (a shell command or script actions), a "
     "`reference.directory` (copied into the workspace), or `reference.file`/`code` with "
     "a reference_comparison criterion whose `agent_file` (not a glob) says where it goes. "
     "Without one the oracle's trials would all be ERROR after their sandboxes were set up."),
    ("CE0221", "warning", "number written as a string",
     "A json_check assertion with `gt`, `gte`, `lt` or `lte` compares two numbers or two "
     "strings (code point order, so ISO dates compare as dates). An `expected` written as "
     "a quoted number (`expected: \"3\"`) is a string: it compares as text (\"10\" < "
     "\"9\") and fails on every number in the document. Write it unquoted to compare "
     "numbers."),
    ("CE0222", "error", "a cost budget ce cannot enforce",
     "`run_limits.max_usd` stops a trial when its agent's cost passes it. An agent whose "
     "CLI reports no price (codex, openai) is priced by ce, from its rate card or the "
     "task's `agent.pricing`; on a model neither has, the cost is unknown and the budget "
     "could never stop the trial, so `ce run` refuses to start (the agent as run: "
     "`--agent` can replace the task's). Give the model a rate with `agent.pricing: "
     "{MODEL: {input: USD, output: USD}}` (per million tokens), or remove `max_usd`. "
     "Said by `ce run`, never by `ce compile`: it depends on the installed agents."),
    ("CE0223", "warning", "limit that can never fire",
     "A per-turn or partial limit of `run_limits` is larger than the whole it is part of, "
     "so the whole always stops the trial first: a `turn_timeout` longer than the "
     "`task_timeout` (a turn never outlasts the trial; the built-in task_timeout is 600 "
     "s), or a `max_input_tokens` or `max_output_tokens` above `max_total_tokens` (input "
     "and output each count toward the total). The trial still ends, at the larger "
     "limit's place, as the whole's TIMEOUT or TOKEN_BUDGET_EXCEEDED. Also a command's "
     "own `timeout` (pre_run, post_run, run_command) above `sandbox.limits.timeout` "
     "(built-in 300 s), which stops every task command at its value. Lower the part, "
     "raise the whole, or remove the part."),
    ("CE0224", "error", "reserved identifier",
     "A variant is named like one of the run directory's own directories (plans, objects, "
     "definitions, task_files, templates, judges, rescored, attempts): its trials' "
     "directories would sit among the run's files, where `ce rescore` and `ce run "
     "--resume` do not look for trials. Rename the variant."),
    ("CE0225", "warning", "judge file not found",
     "A judge's `files` entry `$TASK_DIR/...` names a file that does not exist. The task "
     "runs: the judge is shown `<file not found>` in its place, as the task format says "
     "of missing files; a misspelt path is the likely cause."),
    ("CE0226", "error", "the script agent has no script",
     "A task the script agent runs (`agent.type: script`, or every task of `ce run --agent "
     "script`) sets no `agent.script`: there is nothing to play, and each trial would be an "
     "ERROR once its sandbox was set up. Add the actions, or run another agent."),
    ("CE0227", "warning", "pass-through that never passes",
     "A name in `sandbox.env_passthrough` (or `sandbox.docker.env_passthrough` / "
     "`env_passthrough_extra`) looks like a secret: it contains KEY, TOKEN, SECRET, "
     "PASSWORD, CREDENTIAL, AUTH, COOKIE, SESSION, PRIVATE, SIGNATURE, DSN or the like. "
     "ce keeps such variables out of every sandbox (and redacts their values from "
     "everything it writes), so the task runs without it. An agent's own credentials "
     "reach it through its adapter; a value that is no secret can be set in "
     "`sandbox.env` or passed under another name."),
    ("CE0228", "warning", "experiment default the task overrides",
     "An experiment's `defaults` sit under every task: a task that sets the same agent "
     "setting (`agent.type`, `agent.model`) itself keeps its own, and the default never "
     "applies to it. An A/B meant to run every task with one agent or model then runs "
     "some tasks with another. Set the agent in each variant (variants sit over the "
     "tasks), or remove it from the tasks."),
    ("CE0229", "warning", "tool name in a spelling that matches nothing",
     "A trace names every agent's tool calls as Claude Code does (`Bash`, `Read`, `Write`, "
     "`Edit`, `Glob`, `Grep`, `Skill` ...): OpenCode's `bash`, Codex's `exec_command` and "
     "`apply_patch`, Pi's `write` are recorded as `Bash`, `Bash`, `Edit`, `Write` (the "
     "agent's own name is kept as `raw_tool`). `command_executed` compares `tool_name` "
     "exactly, so another spelling (`bash`, `BASH`, `exec_command`) matches no call and "
     "the criterion fails on every run (or, with `max_count`, never catches the call). "
     "Likewise Claude Code's permission rules, `agent.allowed_tools` and "
     "`disallowed_tools` (of the task's agent or an agent_judge's): tool names are "
     "case-sensitive, so `write` or `bash(git *)` approves or denies nothing. Write the "
     "name the help line gives."),
    ("CE0230", "warning", "a task's file named as a workspace path",
     "A json_check's `json_schema` and a judge's `files` entries are read in the "
     "workspace (the sandbox root), as the task format says; `$TASK_DIR/...` reads a file "
     "relative to the task file instead. A plain path naming a file that sits beside the "
     "task file, which no template source (template_dir, starter_files) writes into the "
     "workspace, is not found when the trial is graded: the json_check is an ERROR, the "
     "judge is shown `<file not found>`. Write `$TASK_DIR/PATH`, or copy the file in with "
     "a template source. Not said when a `repo` source or a pre_run command may put it "
     "there."),
    ("CE0231", "warning", "a skill the agents cannot load",
     "A SKILL.md the task ships (in a skill directory a template source writes: "
     "`.claude/skills/NAME/`, `.agents/skills/NAME/`, ...; or an `agent.plugins` "
     "directory's `skills/NAME/`) starts with its front matter: a `---` line, `name:` and "
     "`description:`, a `---` line. Codex, OpenCode and Pi skip a skill without it, and "
     "OpenCode one without a `name`, without a word (Claude Code names such a skill by "
     "its directory); of two skills of one name in one directory the agents load one. "
     "A skill_triggered check or a skill A/B would measure a skill the agent never had."),
    # -- datasets -----------------------------------------------------------------------
    ("CE0301", "error", "invalid dataset",
     "A dataset has exactly one of `rows` or `paths`; JSONL files must hold one JSON object "
     "per line."),
    ("CE0302", "error", "invalid row id",
     "Every row needs its `id_field`, a scalar matching [A-Za-z0-9_][A-Za-z0-9_.-]*, at most "
     "255 characters long (it names its trials' directory), unique in the dataset."),
    ("CE0303", "error", "bad ${row.key} substitution",
     "`${row.key}` must name a key present in every row with a scalar value (string, number, "
     "boolean); the message names the rows that fail. Outside a dataset task `${row...}` is an error."),
    ("CE0304", "warning", "${row.key} is not substituted here",
     "A dataset row is substituted in the task's initial_prompt (and initial_prompt_file), "
     "success_criteria, reference and the script agent's agent.script. Anywhere else (pre_run "
     "and post_run commands, the sandbox and its starter files, the agent's other "
     "settings, simulation) `${row.key}` stays as written: a shell reads it as a bad "
     "substitution. Move the row-dependent part into one of those places (a criterion's "
     "run_command, or the reference's solve actions). A mapping's key is never "
     "substituted, even there (`params: {\"${row.k}\": v}`): only values are."),
    ("CE0305", "warning", "mistyped ${row.key}",
     "Text that looks like a row reference but is not one (`{row.key}`, `$row.key`, "
     "`${rows.key}`, `${ row.key }`) is not substituted: every row gets it as written. "
     "Write `${row.key}` exactly."),
    ("CE0306", "warning", "stratify_field in no row",
     "`sample_per_stratum: N` keeps N rows per value of `stratify_field` (default "
     "`expected_skill`). A field no row has puts every row in one stratum, so the sample "
     "keeps N rows in all, whatever the labels: set `stratify_field` to the rows' label "
     "key."),
    ("CE0307", "error", "allowed label spelt like a label ce reserves",
     "classification_match labels an answer that is none of `allowed_labels` itself: "
     "`(none)` for an empty or missing file, `(other)` for anything else. Listed in "
     "`allowed_labels`, such a label merges with ce's: an agent that writes `(none)` and "
     "one that writes nothing count as one label in the suite's accuracy, per-label "
     "metrics and confusion matrix, silently; spelt in another case (`(None)`), both "
     "labels show, and rows expecting the listed one never match an agent that answers "
     "nothing. Name the label without parentheses (`none`, `other`). `(none)` and "
     "`(other)` are labels of every classification_match as they are: the matrix shows "
     "them and `recall.(none)` gates them without listing them."),
    # -- experiments and overrides ------------------------------------------------------
    ("CE0402", "error", "wrong kind of file",
     "A task file was given where an experiment is expected, or the other way round."),
    # -- the criteria language ------------------------------------------------------------
    ("CE0601", "error", "syntax error in an expression or criteria file",
     "The text does not parse as the criteria language. The help line lists what the "
     "parser expected at that point. `ce criteria show file_contains` prints a complete "
     "definition to copy from."),
    ("CE0602", "error", "unknown name",
     "The name is not a parameter, a `let`, a lambda parameter or a global (`trace`). The "
     "help line suggests the closest one."),
    ("CE0603", "error", "type mismatch",
     "An operand, argument, `let`, default value or score has the wrong type. Scores are "
     "numbers (bool is not a number); conditions are booleans; `T?` values must be checked "
     "against `null` before they are used as `T`."),
    ("CE0604", "error", "unknown function or method",
     "No builtin function (or record method) has this name, or none of its overloads "
     "accepts these argument types. `ce criteria builtins` lists them all."),
    ("CE0605", "error", "unknown field",
     "The record type has no such field; the help line lists the closest."),
    ("CE0606", "error", "duplicate definition",
     "A criterion, record, parameter or `let` is defined twice (or a user criterion reuses "
     "a standard criterion's name)."),
    ("CE0607", "error", "invalid definition",
     "A criterion definition needs a result kind (binary, fraction, continuous, "
     "classification) and exactly one `score`; a classification also defines "
     "`output observed` and `output expected` (strings)."),
    ("CE0608", "error", "unknown type",
     "Types are bool, int, float, str, regex, path, json, list[T], map[T], T? and the "
     "record types (ToolCall, Trace, File, CommandResult, JsonFile, Verdict, and records "
     "declared with `record`)."),
    ("CE0609", "error", "misplaced lambda",
     "`x -> expr` is only allowed as the predicate or mapper argument of count, exists, "
     "all, filter and map."),
    ("CE0610", "error", "invalid literal",
     "A regex literal (`re\"...\"`) that does not compile, or a malformed number or string."),
    ("CE0612", "error", "expression too large",
     "An expression nests deeper than the language allows (parentheses, `not`, `-`, chains "
     "of operators: 200 levels), or a number literal has more than 4000 digits. Such text "
     "is not something a person writes; split it with `let`."),
    ("CE0611", "error", "cannot load criteria file",
     "A `criteria_files` entry does not exist, is not UTF-8, or its definitions have errors."),
    ("CE0501", "error", "invalid -D override",
     "`-D` takes `path=value`, where path names a task setting (e.g. `agent.model`, "
     "`run_limits.max_turns`, `agent.sdk_options.effort`) and value is a YAML scalar or flow "
     "collection of the right type. Without `=` it is a usage error (exit status 2). A path "
     "no task has is reported once, with the closest setting; one that does not fit a "
     "task (a list index past its end) is reported naming the tasks. The tasks are still "
     "checked, without the bad `-D`, and no trials are made."),
]

CODES: dict[str, Code] = {c[0]: Code(*c) for c in _TABLE}
