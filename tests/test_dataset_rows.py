"""Dataset rows as a user's JSONL file gives them: what a row can break in the task, and
where the compile says so (the file's line:col, naming the row)."""

from ce_lang.compiler import compile_paths

TASK = """\
task_id: trig
description: does the skill fire
initial_prompt: "${row.prompt_text}"
dataset:
  paths: [rows.jsonl]
success_criteria:
  - type: skill_triggered
    skill_name: date-teller
    expected_skill: "${row.expected_skill}"
    description: date-teller fires right
    suite_thresholds: {recall.yes: 0.7}
"""


def diags(result):
    return [(d.code, d.span.line, d.span.col, d.message) for d in result.diagnostics]


def test_a_row_that_blanks_the_prompt_is_named(write):
    write("rows.jsonl", '{"id": "p1", "prompt_text": "What day is it?", '
                        '"expected_skill": "date-teller"}\n'
                        '{"id": "n1", "prompt_text": " ", "expected_skill": ""}\n')
    result = compile_paths([write("t.yaml", TASK)])
    assert diags(result) == [
        ("CE0110", 3, 17, "`initial_prompt` is blank (dataset row 'n1'; 1 of 2)")]


def test_a_row_missing_the_prompts_key_is_one_error_not_also_a_blank_prompt(write):
    write("rows.jsonl", '{"id": "p1", "prompt_text": "What day is it?", '
                        '"expected_skill": "date-teller"}\n'
                        '{"id": "n1", "expected_skill": ""}\n')
    result = compile_paths([write("t.yaml", TASK)])
    assert diags(result) == [
        ("CE0303", 3, 18, "`${row.prompt_text}`: dataset row 'n1' (rows.jsonl:2) has no key "
                          "`prompt_text`")]


def test_a_row_that_blanks_the_prompt_file_is_an_error_naming_it(write):
    write("prompt.md", "${row.prompt_text}\n")
    write("rows.jsonl", '{"id": "p1", "prompt_text": "What day is it?", '
                        '"expected_skill": "date-teller"}\n'
                        '{"id": "n1", "prompt_text": "", "expected_skill": ""}\n')
    task = TASK.replace('initial_prompt: "${row.prompt_text}"', "initial_prompt_file: prompt.md")
    result = compile_paths([write("t.yaml", task)])
    assert diags(result) == [
        ("CE0110", 3, 22, "initial_prompt_file 'prompt.md' is blank once its `${row...}` are "
                          "filled (dataset row 'n1'; 1 of 2)")]
    assert not result.trials or all(t.plan.task_id != "trig/n1" for t in result.trials)


def test_a_dataset_file_that_is_not_utf8_is_said_at_the_byte(write, tmp_path):
    (tmp_path / "rows.jsonl").write_bytes(
        b'{"id": "p1", "prompt_text": "What day is it?", "expected_skill": "date-teller"}\n'
        b'{"id": "n1", "prompt_text": "caf\xe9?", "expected_skill": ""}\n')
    result = compile_paths([write("t.yaml", TASK)])
    [d] = result.diagnostics
    assert (d.code, d.span.file, d.span.line, d.span.col) == (
        "CE0301", str(tmp_path / "rows.jsonl"), 2, 33)
    assert d.message == "dataset file 'rows.jsonl' is not UTF-8: byte 0xe9"


def test_a_row_repeating_a_key_is_an_error_as_in_yaml(write):
    # json.loads keeps the last value: the row would silently be 'b', not 'a'
    write("rows.jsonl", '{"id": "a", "prompt_text": "x", "expected_skill": ""}\n'
                        '{"id": "b", "prompt_text": "y", "id": "c", "expected_skill": ""}\n')
    result = compile_paths([write("t.yaml", TASK)])
    [d] = result.diagnostics
    assert (d.code, d.span.line, d.span.col, d.message) == (
        "CE0003", 2, 33, "duplicate key `id`")
    assert d.notes == ("first defined at rows.jsonl:2:2",)
    assert not result.trials


def test_a_csv_file_is_one_error_saying_datasets_are_jsonl_not_one_per_line(write):
    write("rows.csv", "id,prompt_text,expected_skill\n"
          + "".join(f"r{i},question {i},date-teller\n" for i in range(300)))
    result = compile_paths([write("t.yaml", TASK.replace("rows.jsonl", "rows.csv"))])
    [d] = result.diagnostics
    assert (d.code, d.span.line, d.span.col) == ("CE0301", 1, 1)
    assert d.message == ("invalid JSON line: Expecting value; no line of 'rows.csv' is JSON "
                         "(301 lines): a dataset file is JSONL, one JSON object per line")
    assert d.help.startswith("ce reads no CSV; convert it once: ")


def test_each_bad_line_of_a_jsonl_file_is_still_its_own_error(write):
    write("rows.jsonl", '{"id": "a", "prompt_text": "x", "expected_skill": ""}\n'
                        '{"id": "b", "prompt_text": "y" "expected_skill": ""}\n'
                        '{"id": "c", prompt_text: "z"}\n')
    result = compile_paths([write("t.yaml", TASK)])
    assert [(d.code, d.span.line, d.span.col) for d in result.diagnostics] == [
        ("CE0301", 2, 32), ("CE0301", 3, 13)]


def test_a_rows_warning_is_said_once_and_keeps_the_rows_trials(write):
    """A warning that depends on the row (CE0230, said once naming the rows) dropped
    every row's trial: `compile ok: ... 0 trials` and a run of nothing."""
    write("schema.json", "{}")
    result = compile_paths([write("t.yaml", """\
task_id: t
description: d
initial_prompt: "Label ${row.text}"
dataset:
  rows:
    - {id: r1, text: a}
    - {id: r2, text: b}
agent: {type: claude-code}
success_criteria:
  - {type: json_check, path: out.json, json_schema: schema.json, description: d}
""")])
    assert [(code, line, col) for code, line, col, _ in diags(result)] == [("CE0230", 10, 53)]
    assert "(dataset rows 'r1', 'r2'; 2 of 2)" in result.diagnostics[0].message
    assert sorted(t.plan.row_id for t in result.trials) == ["r1", "r2"]
