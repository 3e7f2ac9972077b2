"""Compile-speed benchmark for `ce compile`.

    .venv/bin/python bench/compile.py [--tasks 1000] [--out bench/.data] [--repeat 3]
                                      [--seed 1130] [--profile] [--json]

1. Generates N realistic, varied, valid task files (deterministic: --seed) into a temp
   dir, or into OUT/tasks/ with --out (regenerated on every run). 10% of them carry inline
   `type: expr` criteria (the criteria language), half of those with `stop_when` armed.
2. Measures, every measurement in a FRESH subprocess so imports, caches and allocator
   state of one measurement never pollute another:
   (a) front end in-process: `compile_paths([DIR], CompileOptions(check_criteria=False))`
       on all N files: wall time, tasks/s, trials/s, peak RSS; any compile error fails
       the benchmark (exit 1)
   lower_check: the full compile (`check_criteria=True`, what `ce compile` does): every
       criterion bound, folded and analyzed, plan steps and facts; its ratio to (a), and
       a sanity line (instances checked, how many can decide pass / fail, armed, steps)
   stdlib: loading the standard criteria registry (both of the above pay it once)
   (b) the CLI: `ce compile DIR -q`, wall time (interpreter start-up included)
   (c) start-up: `python -c pass`, `ce --help`, `ce compile ONE_FILE -q` (15 runs each)
   (d) imports: heavy modules (polars, claude_agent_sdk, openai, ray, rich) and the
       module count after `ce --help` / `ce compile ONE_FILE`, plus the top 10 of
       `python -X importtime` by cumulative time
   and, with --profile, (a) and lower_check once more under cProfile: the top 15 by
   cumulative and 10 by own time of each; for lower_check also the top 20 functions of
   ce_lang/lang/ by cumulative and by own time, and the top 20 functions outside
   ce_lang/lang/ whose cumulative time grew most over (a)'s profile.
3. Prints a table, and writes the numbers as JSON to OUT/compile.json (default
   bench/.data/compile.json), or to stdout with --json (the table then goes to stderr).

Adding a phase: register an in-process function with `@phase(...)` (see `_stdlib` or
`_lower_check` under "Phases"); it runs in its own fresh subprocess --repeat times, and the table reports
its time relative to the front end (phase "frontend", i.e. (a)).

The git revision is taken at the start and the end; the table warns when the compiler's
sources changed in between (the phases may then have measured different code).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchlib import git_rev

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_DATA = os.path.join(HERE, ".data")
MARKER = ".ce-bench-generated"  # only directories carrying it are ever deleted
HEAVY = ("polars", "claude_agent_sdk", "openai", "ray", "rich")
STARTUP_RUNS = 15
# Every measured subprocess runs with cached bytecode, as an installed ce would: the
# environment may say PYTHONDONTWRITEBYTECODE=1 (then ce_lang would be recompiled from
# source on every start), so drop it and keep the .pyc files under DATA/pycache.
# main() fills this in; start-up under the inherited environment is reported separately.
BENCH_ENV: dict[str, str] = dict(os.environ)


def bench_env(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(data_dir, "pycache")
    env["CE_NO_COMPILE_CACHE"] = "1"  # the compiler is measured, not a cache hit
    return env


# ======================================================================================
# Task generator
# ======================================================================================

@dataclass(frozen=True)
class Theme:
    slug: str
    module: str
    func: str
    call: str  # Python expression calling func
    output: str  # what print(call) prints
    summary: str
    reference: str  # a reference solution (for reference_comparison / judges)


THEMES = (
    Theme("slugify", "text_utils.py", "slugify", "slugify('Hello, World!')", "hello-world",
          "turns a title into a URL slug (lowercase, runs of other characters -> one hyphen)",
          "import re\n\n\ndef slugify(text: str) -> str:\n"
          "    \"\"\"Lowercase, hyphen-separated ASCII slug.\"\"\"\n"
          "    return re.sub(r\"[^a-z0-9]+\", \"-\", text.lower()).strip(\"-\")\n"),
    Theme("fizzbuzz", "fizzbuzz.py", "fizzbuzz", "fizzbuzz(15)", "FizzBuzz",
          "returns Fizz, Buzz, FizzBuzz or the number as a string",
          "def fizzbuzz(n: int) -> str:\n    if n % 15 == 0:\n        return \"FizzBuzz\"\n"
          "    if n % 3 == 0:\n        return \"Fizz\"\n    if n % 5 == 0:\n"
          "        return \"Buzz\"\n    return str(n)\n"),
    Theme("roman", "roman.py", "to_roman", "to_roman(1994)", "MCMXCIV",
          "converts a positive integer (1-3999) to Roman numerals",
          "NUMERALS = [(1000, \"M\"), (900, \"CM\"), (500, \"D\"), (400, \"CD\"), (100, \"C\"),\n"
          "            (90, \"XC\"), (50, \"L\"), (40, \"XL\"), (10, \"X\"), (9, \"IX\"),\n"
          "            (5, \"V\"), (4, \"IV\"), (1, \"I\")]\n\n\n"
          "def to_roman(n: int) -> str:\n    out = []\n    for value, sym in NUMERALS:\n"
          "        count, n = divmod(n, value)\n        out.append(sym * count)\n"
          "    return \"\".join(out)\n"),
    Theme("fibonacci", "fib.py", "fib", "fib(10)", "55",
          "returns the n-th Fibonacci number iteratively (fib(0) == 0)",
          "def fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n"
          "        a, b = b, a + b\n    return a\n"),
    Theme("palindrome", "strings.py", "is_palindrome",
          "is_palindrome('A man, a plan, a canal: Panama')", "True",
          "checks whether a string is a palindrome, ignoring case and non-alphanumerics",
          "def is_palindrome(text: str) -> bool:\n"
          "    chars = [c.lower() for c in text if c.isalnum()]\n"
          "    return chars == chars[::-1]\n"),
    Theme("word_count", "wordcount.py", "count_words", "count_words('a b a')",
          "{'a': 2, 'b': 1}", "counts whitespace-separated words, first occurrence first",
          "def count_words(text: str) -> dict[str, int]:\n    counts: dict[str, int] = {}\n"
          "    for word in text.split():\n        counts[word] = counts.get(word, 0) + 1\n"
          "    return counts\n"),
    Theme("temperature", "temperature.py", "c_to_f", "c_to_f(100)", "212.0",
          "converts degrees Celsius to Fahrenheit",
          "def c_to_f(celsius: float) -> float:\n    return celsius * 9 / 5 + 32\n"),
    Theme("binary_search", "search.py", "binary_search", "binary_search([1, 3, 5, 7], 5)",
          "2", "returns the index of a value in a sorted list, or -1",
          "def binary_search(items: list[int], target: int) -> int:\n"
          "    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n"
          "        if items[mid] == target:\n            return mid\n"
          "        if items[mid] < target:\n            lo = mid + 1\n        else:\n"
          "            hi = mid - 1\n    return -1\n"),
    Theme("median", "stats.py", "median", "median([3, 1, 2])", "2",
          "returns the median of a non-empty list of numbers",
          "def median(values: list[float]) -> float:\n    s = sorted(values)\n"
          "    mid = len(s) // 2\n    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2\n"),
    Theme("flatten", "lists.py", "flatten", "flatten([[1, [2]], 3])", "[1, 2, 3]",
          "flattens arbitrarily nested lists",
          "def flatten(items: list) -> list:\n    out = []\n    for item in items:\n"
          "        if isinstance(item, list):\n            out.extend(flatten(item))\n"
          "        else:\n            out.append(item)\n    return out\n"),
    Theme("vowels", "text_stats.py", "count_vowels", "count_vowels('Evaluation')", "6",
          "counts the vowels (aeiou, any case) in a string",
          "def count_vowels(text: str) -> int:\n"
          "    return sum(1 for c in text.lower() if c in \"aeiou\")\n"),
    Theme("gcd", "numbers.py", "gcd", "gcd(48, 18)", "6",
          "computes the greatest common divisor with Euclid's algorithm",
          "def gcd(a: int, b: int) -> int:\n    while b:\n        a, b = b, a % b\n"
          "    return abs(a)\n"),
    Theme("reverse_words", "words.py", "reverse_words", "reverse_words('one two three')",
          "three two one", "reverses the order of the words in a sentence",
          "def reverse_words(text: str) -> str:\n    return \" \".join(reversed(text.split()))\n"),
    Theme("caesar", "cipher.py", "caesar", "caesar('abc', 3)", "def",
          "shifts lowercase letters by k positions (Caesar cipher), other characters unchanged",
          "def caesar(text: str, k: int) -> str:\n    return \"\".join(\n"
          "        chr((ord(c) - 97 + k) % 26 + 97) if c.islower() else c for c in text\n"
          "    )\n"),
    Theme("durations", "durations.py", "parse_duration", "parse_duration('1h30m')", "5400",
          "parses durations such as 1h30m or 45s into seconds",
          "import re\n\nUNITS = {\"h\": 3600, \"m\": 60, \"s\": 1}\n\n\n"
          "def parse_duration(text: str) -> int:\n"
          "    return sum(int(n) * UNITS[u] for n, u in re.findall(r\"(\\d+)([hms])\", text))\n"),
    Theme("chunks", "chunks.py", "chunk", "chunk([1, 2, 3, 4, 5], 2)", "[[1, 2], [3, 4], [5]]",
          "splits a list into chunks of size n (the last one may be shorter)",
          "def chunk(items: list, n: int) -> list[list]:\n"
          "    return [items[i:i + n] for i in range(0, len(items), n)]\n"),
)

SUITES = ("algorithms", "strings", "refactoring", "data", "cli", "judged", "skills",
          "agentless")
TAG_POOL = ("smoke", "golden", "pure-python", "regression", "nightly", "fast", "slow",
            "lifecycle:generate", "lifecycle:fix", "difficulty:easy", "difficulty:medium",
            "difficulty:hard", "area:text", "area:math", "area:io")
TOOLS = ("Read", "Write", "Edit", "Bash", "Glob", "Grep")
MODELS = ("anthropic.claude-sonnet-4-6", "anthropic.claude-haiku-4-5",
          "anthropic.claude-opus-4-1")
SKILLS = ("date-teller", "unit-converter", "code-formatter", "release-notes")
# criterion type -> relative frequency (agent tasks)
CRITERIA_MIX = {
    "file_exists": 14, "file_contains": 12, "file_check": 14, "json_check": 10,
    "run_command": 18, "command_executed": 10, "skill_triggered": 4, "llm_judge": 6,
    "reference_comparison": 4,
}
AGENTLESS_OK = ("file_exists", "file_contains", "file_check", "json_check", "run_command")
# Inline `type: expr` criteria (the criteria language), added to exactly 10% of the tasks
# (index % 10 == 5; the dataset tasks are index % 10 == 0): (expr, kind or None, the
# polarity `stop_when` may arm or None when the analysis decides nothing live, works on a
# `type: none` task, description). {module} / {out_json} are filled in per task.
EXPRS = (
    ('count(trace.tool_calls, c -> c.tool == "Bash") >= 2', None, "pass", False,
     "the agent ran at least two shell commands"),
    (r'not exists(trace.tool_calls, c -> c.tool == "Bash" and c.matches(re"\brm\s+-rf\b"))',
     None, "fail", False, "the agent never ran rm -rf"),
    ('all(trace.tool_calls, c -> c.tool != "WebFetch")', None, "fail", False,
     "the agent stayed offline"),
    ("len(trace.tool_calls) <= 40", None, "fail", False, "at most 40 tool calls"),
    ("trace.turns <= 25", None, "fail", False, "at most 25 turns"),
    ('clamp(float(count(trace.tool_calls, c -> c.matches(re"pytest|unittest"))) / 2.0, 0.0, '
     '1.0)', "continuous", "pass", False, "the agent ran the tests (twice for full marks)"),
    ("float(count(trace.tool_calls, c -> c.ok)) / max(len(trace.tool_calls), 1)", "fraction",
     None, False, "share of tool calls that succeeded"),
    # `in` is not folded by the analysis yet, so this decides nothing (never armed)
    ('exists(trace.tool_calls, c -> c.tool in ["Write", "Edit"] and c.mentions("{module}"))',
     None, None, False, "the agent wrote {module} with a file tool"),
    ('count(trace.tool_calls, c -> c.tool == "Bash" and c.matches(re"pytest")) >= 1 and '
     'path_exists("{module}")', None, None, False, "tests were run and {module} exists"),
    ('path_exists("{module}") and len(glob("*.py")) >= 1', None, None, True,
     "{module} and some Python file exist"),
    ('read_json("{out_json}").ok', None, None, True, "{out_json} is valid JSON"),
    ('run("python -m py_compile {module}", 30).exit_code == 0', None, None, True,
     "{module} compiles"),
)


class TaskGenerator:
    def __init__(self, seed: int):
        import random

        self.rng = random.Random(seed)
        # a separate stream for the `type: expr` criteria, so adding them left every other
        # byte of the generated tasks as before
        self.xrng = random.Random(seed * 7919 + 1)

    # -- helpers -------------------------------------------------------------------------
    def maybe(self, p: float) -> bool:
        return self.rng.random() < p

    def weight(self, allow_zero: bool = True) -> float | None:
        choices = [None, None, None, 0.5, 1.0, 2.0, 3.0] + ([0.0] if allow_zero else [])
        return self.rng.choice(choices)

    def common(self, c: dict[str, Any], allow_zero: bool = True,
               threshold: bool = False) -> dict[str, Any]:
        w = self.weight(allow_zero)
        if w is not None:
            c["weight"] = w
        if threshold and self.maybe(0.2):
            c["pass_threshold"] = self.rng.choice([0.5, 0.6, 0.75, 0.8, 1.0])
        return c

    # -- one task ------------------------------------------------------------------------
    def task(self, index: int) -> tuple[str, str, dict[str, Any]]:
        rng = self.rng
        theme = rng.choice(THEMES)
        with_dataset = index % 10 == 0  # exactly 10% of the tasks, each with 5 rows
        r = rng.random()
        agent_type = ("claude-code" if with_dataset else "none" if r < 0.06 else
                      "codex" if r < 0.10 else "openai" if r < 0.14 else "claude-code")
        suite = ("agentless" if agent_type == "none" else "skills" if with_dataset
                 else rng.choice(SUITES[:-2]))
        task_id = f"{theme.slug}_{index:04d}"
        if rng.random() < 0.3:
            task_id = f"{suite}.{task_id}"
        out_json = rng.choice(["report.json", "out/result.json", f"results/{theme.slug}.json"])
        if agent_type == "none":
            out_json = "report.json"  # what pre_run writes
            what = (f"No agent: pre_run stubs {theme.module} and writes {out_json}; the "
                    "criteria check the sandbox plumbing.")
        else:
            what = f"The agent writes {theme.module}: {theme.func}() {theme.summary}."
        t: dict[str, Any] = {"task_id": task_id, "description": what}
        tags: list[str] = []
        for tag in rng.sample(TAG_POOL, rng.randint(1, 4)):
            if ":" not in tag or all(not x.startswith(tag.split(":")[0] + ":") for x in tags):
                tags.append(tag)  # at most one tag per key (one difficulty, ...)
        t["tags"] = [*tags, f"suite:{suite}"]
        rows = self.rows(theme) if with_dataset else None
        if rows is not None:
            t["dataset"] = {"rows": rows}
        if agent_type != "none":
            t["initial_prompt"] = self.prompt(theme, out_json, rows is not None)
        t["agent"] = self.agent(agent_type)
        if rows is not None:  # the skill must be able to fire
            tools = t["agent"].setdefault("allowed_tools", [])
            if "Skill" not in tools:
                tools.append("Skill")
            t["agent"]["setting_sources"] = ["project"]
        t["run_limits"] = self.run_limits(agent_type)
        sandbox = self.sandbox(theme)
        if sandbox:
            t["sandbox"] = sandbox
        if agent_type == "none" or self.maybe(0.4):
            t["pre_run"] = self.pre_run(theme, agent_type == "none")
        if self.maybe(0.1):
            t["post_run"] = [{"command": "ls -la > .listing.txt", "timeout": 10}]
        if self.maybe(0.15):
            t["expected_commands"] = rng.randint(3, 20)

        n_criteria = rng.randint(3, 12)
        kinds = self.criteria_kinds(n_criteria, agent_type, rows is not None)
        if "reference_comparison" in kinds or self.maybe(0.08):
            t["reference"] = {"code": theme.reference}
        exprs = self.expr_criteria(theme, out_json, t, agent_type) if index % 10 == 5 else []
        armed = t["run_limits"].get("stop_early") is True \
            and not any("stop_when" in c for c in exprs)
        criteria = []
        for kind in kinds:
            c = getattr(self, "c_" + kind)(theme, out_json, t, rows is not None)
            if armed and kind == "command_executed" and "max_count" not in c \
                    and c.get("min_count", 1) > 0:
                c["stop_when"] = "pass"
                c.pop("weight", None)
                armed = False  # one armed criterion per task
            criteria.append(c)
        if armed:  # no armable criterion was drawn: add one
            criteria.append({"type": "command_executed", "tool_name": "Bash",
                             "command_pattern": r"python3? .*\.py", "min_count": 1,
                             "stop_when": "pass",
                             "description": "The agent ran a Python script"})
        t["success_criteria"] = criteria + exprs
        ext = ".yml" if self.maybe(0.05) else ".yaml"
        return suite, task_id + ext, t

    def criteria_kinds(self, n: int, agent_type: str, dataset: bool) -> list[str]:
        if agent_type == "none":
            pool = {k: v for k, v in CRITERIA_MIX.items() if k in AGENTLESS_OK}
        else:
            pool = dict(CRITERIA_MIX)
        kinds = self.rng.choices(list(pool), weights=list(pool.values()), k=n)
        # at most one skill_triggered (it is a task's classification criterion) and one
        # reference_comparison
        for once in ("skill_triggered", "reference_comparison"):
            while kinds.count(once) > 1:
                kinds[kinds.index(once)] = "file_exists"
        if dataset and "skill_triggered" not in kinds:
            kinds[0] = "skill_triggered"
        return kinds

    def expr_criteria(self, th: Theme, out_json: str, t: dict, agent_type: str
                      ) -> list[dict[str, Any]]:
        """1-3 inline `type: expr` criteria; on half of the agent tasks, early stop is
        switched on and every decidable one is armed with `stop_when`."""
        x = self.xrng
        pool = [e for e in EXPRS if agent_type != "none" or e[3]]
        if agent_type != "none" and x.random() < 0.5:
            t["run_limits"]["stop_early"] = True
        arm = t["run_limits"].get("stop_early") is True
        out = []
        for expr, kind, polarity, _agentless, what in x.sample(pool, x.randint(1, 3)):
            c: dict[str, Any] = {"type": "expr",
                                 "expr": expr.format(module=th.module, out_json=out_json)}
            if kind is not None:
                c["kind"] = kind
            if kind == "continuous":
                c["pass_threshold"] = 0.5
            c["description"] = what.format(module=th.module, out_json=out_json)
            if arm and polarity is not None:
                c["stop_when"] = polarity
            elif x.random() < 0.3:
                c["weight"] = x.choice([0.5, 2.0, 0.0])
            out.append(c)
        return out

    def rows(self, theme: Theme) -> list[dict[str, Any]]:
        skill = self.rng.choice(SKILLS)
        rows = []
        for i in range(5):
            positive = i < 3
            rows.append({
                "id": f"case-{i + 1}",
                "prompt_text": (f"Use the {skill} skill where it helps, then write "
                                f"{theme.module} with {theme.func}() (case {i + 1})."
                                if positive else
                                f"Write {theme.module} with {theme.func}(); no skill is "
                                f"needed (case {i + 1})."),
                "expected_skill": skill if positive else "",
                "output_file": f"answers/case_{i + 1}.txt",
            })
        return rows

    def prompt(self, theme: Theme, out_json: str, dataset: bool) -> str:
        rng = self.rng
        lines = []
        if dataset:
            lines.append("${row.prompt_text}")
            lines.append("Write a one-line summary of what you did to ${row.output_file}.")
            lines.append("")
        lines.append(f"Create {theme.module} in the current directory with a function "
                     f"`{theme.func}` that {theme.summary}.")
        lines.append(f"For example, `print({theme.call})` prints `{theme.output}`.")
        if rng.random() < 0.6:
            lines.append("Add a docstring and type hints. Use only the standard library.")
        if rng.random() < 0.5:
            lines.append(f"Then write {out_json} with the keys `function` (the function "
                         "name), `examples` (a list of {input, output} objects, at least 3) "
                         "and `status` (\"ok\").")
        if rng.random() < 0.4:
            lines.append("Check your work with `python -m pytest -q` before you finish.")
        return "\n".join(lines) + "\n"

    def agent(self, agent_type: str) -> dict[str, Any]:
        rng = self.rng
        a: dict[str, Any] = {"type": agent_type}
        if agent_type == "none":
            return a
        if agent_type == "claude-code":
            a["permission_mode"] = rng.choice(["acceptEdits", "acceptEdits", "bypassPermissions"])
            a["allowed_tools"] = sorted(rng.sample(TOOLS, rng.randint(3, 6)),
                                        key=TOOLS.index)
            if rng.random() < 0.15:
                a["allowed_tools"].append("Skill")
                a["setting_sources"] = ["project"]
            if rng.random() < 0.3:
                a["model"] = rng.choice(MODELS)
            if rng.random() < 0.1:
                a["system_prompt"] = "Prefer small, well-tested functions."
        elif agent_type == "openai":
            a["model"] = "gpt-4.1-mini"
            a["base_url"] = "http://127.0.0.1:8000/v1"
            a["api_key_env"] = "OPENAI_API_KEY"
        else:
            a["model"] = "gpt-5-codex"
        return a

    def run_limits(self, agent_type: str) -> dict[str, Any]:
        rng = self.rng
        rl: dict[str, Any] = {}
        if agent_type != "none":
            rl["max_turns"] = rng.choice([5, 10, 15, 20, 30, 50])
            if rng.random() < 0.7:
                rl["expected_turns"] = rng.randint(2, 8)
            if rng.random() < 0.1:
                rl["stop_early"] = True
            if rng.random() < 0.15:
                rl["max_usd"] = rng.choice([0.5, 1.0, 2.5])
            if rng.random() < 0.1:
                rl["max_total_tokens"] = rng.choice([200_000, 500_000])
        rl["task_timeout"] = rng.choice([120, 300, 600, 900])
        if rng.random() < 0.2:
            rl["turn_timeout"] = rng.choice([60, 120, 300])
        return rl

    def sandbox(self, theme: Theme) -> dict[str, Any]:
        rng = self.rng
        sb: dict[str, Any] = {}
        if rng.random() < 0.3:
            sb["driver"] = rng.choice(["tempdir", "tempdir", "bwrap", "docker"])
        if rng.random() < 0.25:
            sb["python"] = {"env_packages": ["pytest"] + (["hypothesis"] if rng.random() < 0.3
                                                          else [])}
        if rng.random() < 0.6:
            test_name = f"tests/test_{theme.module}"
            files = [
                {"path": "README.md",
                 "content": f"# {theme.slug}\n\nImplement `{theme.func}` in `{theme.module}`: "
                            f"it {theme.summary}.\n\nRun the tests with `python -m pytest -q`.\n"},
                {"path": test_name,
                 "content": f"from {theme.module[:-3]} import {theme.func}\n\n\n"
                            f"def test_example():\n    assert str({theme.call}) == "
                            f"{theme.output!r}\n"},
            ]
            if rng.random() < 0.3:
                files.append({"path": "data/input.csv",
                              "content": "id,value\n1,10\n2,20\n3,30\n"})
            sb["template_sources"] = [{"type": "starter_files", "files": files}]
        if rng.random() < 0.05:
            sb["ignore_patterns"] = ["*.log", "tmp/"]
        return sb

    def pre_run(self, theme: Theme, agentless: bool) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = [{"command": "mkdir -p out results answers"}]
        if agentless:
            steps.append({"command": f"printf '%s\\n' 'def {theme.func}(*args): pass' "
                                     f"> {theme.module}", "timeout": 10})
            steps.append({"command": "echo '{\"status\": \"ok\", \"function\": \"x\", "
                                     "\"examples\": [1, 2, 3]}' > report.json"})
        if self.maybe(0.5):
            steps.append({"command": "python --version > out/python_version.txt",
                          "fail_on_error": False})
        return steps

    # -- criteria ------------------------------------------------------------------------
    def c_file_exists(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        if ds and self.maybe(0.5):
            return self.common({"type": "file_exists", "path": "${row.output_file}",
                                "description": "the per-row summary file was written"})
        path = self.rng.choice([th.module, th.module, "tests/", out_json, "*.py"])
        return self.common({"type": "file_exists", "path": path,
                            "description": f"{path} exists"})

    def c_file_contains(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        extra = self.rng.sample(["return", '"""', "->", ": str", "import"],
                                self.rng.randint(0, 3))
        c: dict[str, Any] = {"type": "file_contains", "path": th.module,
                             "includes": [f"def {th.func}", *extra],
                             "description": f"{th.module} defines {th.func}()"}
        if self.maybe(0.4):
            c["excludes"] = ["TODO", "NotImplementedError"]
        return self.common(c, threshold=True)

    def c_file_check(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        rng = self.rng
        c: dict[str, Any] = {"type": "file_check", "path": th.module,
                             "description": f"{th.module} is complete and self-contained"}
        if rng.random() < 0.7:
            c["includes"] = [f"def {th.func}("]
        if rng.random() < 0.5:
            c["excludes"] = rng.sample(["TODO", "FIXME", "NotImplementedError", "print("],
                                       rng.randint(1, 3))
        patterns = []
        for _ in range(rng.randint(1, 3)):
            p = rng.choice([
                {"pattern": rf"^def {th.func}\(", "flags": 8},
                {"pattern": r"import\s+(requests|numpy|pandas)", "must_match": False},
                {"pattern": r'"""[\s\S]+?"""'},
                {"pattern": r"->\s*\w+", "must_match": True},
                {"pattern": r"(?i)todo|fixme", "must_match": False},
                {"pattern": r"^\s+return\b", "flags": 8},
            ])
            if p not in patterns:
                patterns.append(p)
        c["patterns"] = patterns
        return self.common(c, threshold=True)

    def c_json_check(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        rng = self.rng
        pool = [
            {"expression": "status", "expected": "ok"},
            {"expression": "function", "expected": th.func},
            {"expression": "length(examples)", "operator": "gte", "expected": 3},
            {"expression": "examples", "operator": "type", "expected": "array"},
            {"expression": "function", "operator": "regex", "expected": r"^[a-z_]+$"},
            {"expression": "status", "operator": "exists"},
            {"expression": "examples[0]", "operator": "exists"},
            {"expression": "keys(@)", "operator": "contains", "expected": "examples"},
            {"expression": "status", "operator": "not_equals", "expected": "error"},
            {"expression": "length(keys(@))", "operator": "lt", "expected": 10},
        ]
        assertions = rng.sample(pool, rng.randint(1, 6))
        return self.common({"type": "json_check", "path": out_json, "assertions": assertions,
                            "description": f"{out_json} describes the function and examples"},
                           threshold=True)

    def c_run_command(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            c: dict[str, Any] = {
                "type": "run_command",
                "command": f"python -c \"from {th.module[:-3]} import {th.func}; "
                           f"print({th.call})\"",
                "expected_stdout": th.output,
                "description": f"{th.call} prints {th.output}",
            }
            match = rng.choice([None, "exact", "contains"])
            if match:
                c["stdout_match"] = match
        elif r < 0.8:
            c = {"type": "run_command", "command": "python -m pytest -q",
                 "timeout": rng.choice([60, 120]), "description": "the test suite passes"}
        elif r < 0.9:
            c = {"type": "run_command", "command": f"python -m py_compile {th.module}",
                 "read_only": True, "description": f"{th.module} is valid Python"}
        else:
            c = {"type": "run_command", "command": f"grep -c 'def ' {th.module}",
                 "expected_stdout": r"^[1-9]\d*$", "stdout_match": "regex",
                 "description": f"{th.module} defines at least one function"}
        if rng.random() < 0.3:
            c["timeout"] = rng.choice([10, 30, 60])
        return self.common(c)

    def c_command_executed(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        rng = self.rng
        r = rng.random()
        if r < 0.4:
            c: dict[str, Any] = {"type": "command_executed", "tool_name": "Bash",
                                 "command_pattern": "pytest|unittest", "min_count": 1,
                                 "description": "the agent ran the tests"}
            if rng.random() < 0.5:
                c["exclude_pattern"] = "--help"
            if rng.random() < 0.5:
                c["require_success"] = True
        elif r < 0.7:
            c = {"type": "command_executed", "tool_name": "Bash",
                 "command_pattern": r"\brm\s+-[a-zA-Z]*([rR][a-zA-Z]*f|f[a-zA-Z]*[rR])",
                 "min_count": 0, "max_count": 0, "description": "the agent never ran rm -rf"}
        else:
            c = {"type": "command_executed",
                 "tool_name": rng.choice(["Bash", None]),
                 "command_pattern": rf"python3? .*{th.module[:-3]}",
                 "min_count": rng.randint(1, 2),
                 "description": f"the agent ran its {th.module} at least once"}
            if c["tool_name"] is None:
                del c["tool_name"]
            if rng.random() < 0.3:
                c["max_count"] = 10
        return self.common(c, threshold=True)

    def c_skill_triggered(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        if ds:
            skill = t["dataset"]["rows"][0]["expected_skill"]
            c = {"type": "skill_triggered", "skill_name": skill,
                 "expected_skill": "${row.expected_skill}",
                 "description": f"{skill} fires exactly on the rows that need it"}
            if self.maybe(0.6):
                c["suite_thresholds"] = {"recall.yes": 0.6, "precision.yes": 0.8}
            return c
        skill = self.rng.choice(SKILLS)
        expected = skill if self.maybe(0.7) else ""
        return self.common({"type": "skill_triggered", "skill_name": skill,
                            "expected_skill": expected,
                            "description": f"{skill} fires" if expected else
                            f"{skill} does not fire"})

    def c_llm_judge(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        rng = self.rng
        c: dict[str, Any] = {
            "type": "llm_judge",
            "description": f"{th.func}() is correct, readable and idiomatic",
            "prompt": (f"You are reviewing {th.module}, which must define {th.func}(): it "
                       f"{th.summary}.\n\nScore:\n"
                       "- 1.0: correct on all inputs including edge cases, documented, typed\n"
                       "- 0.7: correct on the examples, misses an edge case or the docs\n"
                       "- 0.4: partially correct\n- 0.0: missing or does not run\n"),
            "files": [th.module],
        }
        if "reference" in t and rng.random() < 0.7:
            c["include_reference"] = True
        if rng.random() < 0.3:
            c["include_tool_calls"] = True
        if rng.random() < 0.5:
            c["temperature"] = 0.0
            c["max_tokens"] = rng.choice([500, 1000, 2000])
        if rng.random() < 0.3:
            c["model"] = rng.choice(MODELS)
        return self.common(c, threshold=True)

    def c_reference_comparison(self, th: Theme, out_json: str, t: dict, ds: bool) -> dict:
        rng = self.rng
        return self.common({
            "type": "reference_comparison", "agent_file": th.module,
            "comparison_method": rng.choice(["ast", "token", "complexity"]),
            "similarity_threshold": rng.choice([0.5, 0.6, 0.7, 0.8]),
            "description": f"{th.module} is structurally close to the reference",
        })


def _yaml_dump(task: dict[str, Any], header: str) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def str_repr(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, str_repr)
    body = yaml.dump(task, Dumper=Dumper, sort_keys=False, default_flow_style=False,
                     width=100, allow_unicode=True, indent=2)
    return header + body


def generate(n: int, out_dir: str, seed: int) -> dict[str, Any]:
    """Write n task files under out_dir/<suite>/; returns counts for the report."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, MARKER), "w") as fh:
        fh.write(f"generated by bench/compile.py, seed {seed}\n")
    gen = TaskGenerator(seed)
    kinds: dict[str, int] = {}
    rows_tasks = criteria = size = stop_when = 0
    first = fallback = None
    for i in range(n):
        suite, name, task = gen.task(i)
        for c in task["success_criteria"]:
            kinds[c["type"]] = kinds.get(c["type"], 0) + 1
            stop_when += "stop_when" in c
        criteria += len(task["success_criteria"])
        rows_tasks += "dataset" in task
        header = (f"# {name}: generated by bench/compile.py (seed {seed}, task {i}).\n"
                  f"# Suite {suite}; {len(task['success_criteria'])} criteria.\n\n")
        text = _yaml_dump(task, header)
        size += len(text)
        os.makedirs(os.path.join(out_dir, suite), exist_ok=True)
        path = os.path.join(out_dir, suite, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        if first is None and "dataset" not in task and task["agent"]["type"] == "claude-code":
            first = path  # an ordinary task: the start-up probe compiles this one
        fallback = fallback or path
    return {"files": n, "criteria": criteria, "criteria_by_type": dict(sorted(kinds.items())),
            "dataset_tasks": rows_tasks, "stop_when": stop_when, "bytes": size,
            "one_file": first or fallback}


# ======================================================================================
# Phases: in-process measurements, each run in a fresh subprocess
# ======================================================================================

@dataclass
class PhaseContext:
    tasks_dir: str
    n_tasks: int
    profile: bool = False


@dataclass(frozen=True)
class Phase:
    name: str
    title: str
    fn: Callable[[PhaseContext], dict[str, Any]]
    profiled: bool  # --profile runs it once more under cProfile


PHASES: dict[str, Phase] = {}


def phase(name: str, title: str, profiled: bool = False):
    """Register an in-process phase. `fn(ctx)` returns a dict with at least `seconds`
    (the timed part only; do untimed set-up before starting the clock). With
    `profiled=True`, --profile runs it once more with `ctx.profile` set, and `fn` must
    then return `profile`, `profile_tottime` and `profile_all` (see `_compile_phase`)."""
    def register(fn: Callable[[PhaseContext], dict[str, Any]]):
        PHASES[name] = Phase(name, title, fn, profiled)
        return fn
    return register


def _peak_rss_mib() -> float:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _compile_phase(ctx: PhaseContext, check_criteria: bool) -> tuple[dict[str, Any], Any]:
    """`compile_paths` on every generated file, timed; fails unless all compile cleanly.
    Returns the numbers and the CompileResult (for phase-specific sanity counts)."""
    t0 = time.perf_counter()
    from ce_lang.compiler import CompileOptions, compile_paths

    import_s = time.perf_counter() - t0
    rss_after_import = _peak_rss_mib()
    options = CompileOptions(check_criteria=check_criteria)
    profiler = None
    if ctx.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    result = compile_paths([ctx.tasks_dir], options)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    if profiler is not None:
        profiler.disable()
    if result.errors or result.task_files != ctx.n_tasks:
        shown = [d for d in result.diagnostics if d.severity == "error"][:10]
        lines = "\n".join(f"  {d.span}: {d.code} {d.message}" for d in shown)
        raise SystemExit(f"compile (check_criteria={check_criteria}): {result.errors} "
                         f"error(s), {result.task_files} of {ctx.n_tasks} task files compiled; "
                         f"the generator made invalid tasks:\n{lines}")
    out = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,  # this process's CPU time: steadier on a busy machine
        "import_seconds": import_s,
        "tasks": result.task_files,
        "trials": len(result.trials),
        "plans": len({t.plan_hash for t in result.trials}),
        "errors": result.errors,
        "warnings": result.warnings,
        "tasks_per_s": result.task_files / seconds,
        "trials_per_s": len(result.trials) / seconds,
        "rss_after_import_mib": rss_after_import,
    }
    if profiler is not None:
        out["profile"] = _top_functions(profiler, 15, "cumtime")
        out["profile_tottime"] = _top_functions(profiler, 10, "tottime")
        out["profile_all"] = _all_functions(profiler)  # for the diff; not kept in the JSON
    return out, result


@phase("frontend", "(a) front end: compile_paths, check_criteria=False", profiled=True)
def _frontend(ctx: PhaseContext) -> dict[str, Any]:
    out, _result = _compile_phase(ctx, check_criteria=False)
    return out


@phase("lower_check", "lower_check: full compile (check_criteria)",
       profiled=True)
def _lower_check(ctx: PhaseContext) -> dict[str, Any]:
    """The whole compiler as `ce compile` runs it: the front end plus binding, folding
    and decidability analysis of every criterion, plan steps and the facts in the plan."""
    out, result = _compile_phase(ctx, check_criteria=True)
    checked = can_pass = can_fail = both = expr = armed = steps = 0
    entries = 0
    for trial in result.trials:
        plan = trial.plan
        steps += len(plan.steps)
        armed += len(plan.early_stop.armed)
        for c in plan.criteria:
            entries += 1
            if not c.definition:
                continue  # no checked instance behind it
            checked += 1
            expr += c.definition == "expr"
            can_pass += c.can_decide_pass
            can_fail += c.can_decide_fail
            both += c.can_decide_pass and c.can_decide_fail
    out["sanity"] = {"criteria": entries, "checked": checked, "can_decide_pass": can_pass,
                     "can_decide_fail": can_fail, "can_decide_both": both,
                     "expr": expr, "armed": armed, "plan_steps": steps}
    if ctx.profile:
        lang = [r for r in out["profile_all"] if r["function"].startswith("ce_lang/lang/")]
        out["profile_lang"] = _rank(lang, "cumtime")[:20]
        out["profile_lang_tottime"] = _rank(lang, "tottime")[:20]
    return out


@phase("stdlib", "    stdlib registry load (both; cached)")
def _stdlib(ctx: PhaseContext) -> dict[str, Any]:
    """Parsing and checking the standard criteria library (stdlib_criteria/*.ce), which
    every compile pays once per process, with or without check_criteria."""
    from ce_lang.lang.stdlib import stdlib_files, stdlib_registry

    t0 = time.perf_counter()
    registry = stdlib_registry()
    return {"seconds": time.perf_counter() - t0, "definitions": len(registry.criteria),
            "files": len(stdlib_files())}


def _all_functions(profiler: Any) -> list[dict[str, Any]]:
    import pstats

    stats = pstats.Stats(profiler)
    rows = []
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():
        rel = os.path.relpath(file, ROOT) if file.startswith(ROOT) else file
        if "site-packages" in rel:
            rel = rel.split("site-packages" + os.sep, 1)[1]
        rows.append({"function": f"{rel}:{line}({func})", "ncalls": ncalls,
                     "tottime": tottime, "cumtime": cumtime})
    return rows


def _rank(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: -r[key])


def _top_functions(profiler: Any, n: int, key: str) -> list[dict[str, Any]]:
    return _rank(_all_functions(profiler), key)[:n]


def profile_diff(base: list[dict[str, Any]], other: list[dict[str, Any]], n: int = 20,
                 exclude: str = "ce_lang/lang/") -> list[dict[str, Any]]:
    """Functions outside `exclude` whose cumulative time grew the most from `base` to
    `other` (two profiles of the same corpus): the extra cost of `other` that a profile
    restricted to ce_lang/lang/ does not show (plan size, hashing, unstructuring ...).
    A chain of wrappers (same call counts, within 5% of the time) shows as its first row."""
    before = {r["function"]: r for r in base}
    rows = []
    for r in other:
        if r["function"].startswith(exclude):
            continue
        b = before.get(r["function"], {"ncalls": 0, "tottime": 0.0, "cumtime": 0.0})
        rows.append({"function": r["function"], "ncalls_base": b["ncalls"],
                     "ncalls": r["ncalls"], "tottime_delta": r["tottime"] - b["tottime"],
                     "cumtime_delta": r["cumtime"] - b["cumtime"]})
    rows.sort(key=lambda r: -r["cumtime_delta"])
    kept: list[dict[str, Any]] = []
    for r in rows:  # fold call chains (same call counts, ~same time) into their first row
        k = kept[-1] if kept else None
        if k is not None and (k["ncalls"], k["ncalls_base"]) == (r["ncalls"], r["ncalls_base"]) \
                and r["cumtime_delta"] >= 0.95 * k["cumtime_delta"]:
            k["folded"] = k.get("folded", 0) + 1
            continue
        kept.append(r)
        if len(kept) == n:
            break
    return kept


def _run_phase_child(name: str, ctx: PhaseContext) -> None:
    """Child side: run one phase and print its numbers as one JSON line."""
    out = PHASES[name].fn(ctx)
    out["peak_rss_mib"] = _peak_rss_mib()
    print(json.dumps(out))


def run_phase(name: str, ctx: PhaseContext) -> dict[str, Any]:
    """Parent side: run one phase in a fresh interpreter."""
    cmd = [sys.executable, os.path.abspath(__file__), "--_phase", name,
           "--_dir", ctx.tasks_dir, "--tasks", str(ctx.n_tasks)]
    if ctx.profile:
        cmd.append("--profile")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=BENCH_ENV)
    if proc.returncode != 0:
        sys.exit(f"phase {name} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ======================================================================================
# Subprocess measurements
# ======================================================================================

def ce_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "ce")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-c", "import sys; from ce_runtime.cli import main; "
                                  "sys.exit(main())"]


def timed_run(cmd: list[str], env: dict[str, str] | None = None
              ) -> tuple[float, int, float, str]:
    """Wall seconds, exit code, the child's own peak RSS (MiB) and its stderr."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
                                env=BENCH_ENV if env is None else env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    rss = usage.ru_maxrss / (1024 * 1024) if sys.platform == "darwin" else usage.ru_maxrss / 1024
    return wall, proc.returncode, rss, stderr


def measure_cli(tasks_dir: str, repeat: int) -> dict[str, Any]:
    walls, rss = [], []
    for _ in range(repeat):
        wall, code, peak, stderr = timed_run([*ce_command(), "compile", tasks_dir, "-q"])
        if code != 0:
            sys.exit(f"`ce compile {tasks_dir} -q` exited {code}:\n{stderr[:2000]}")
        walls.append(wall)
        rss.append(peak)
    return {"seconds": statistics.median(walls), "min_seconds": min(walls),
            "runs": walls, "peak_rss_mib": max(rss)}


def measure_startup(one_file: str, runs: int = STARTUP_RUNS) -> dict[str, Any]:
    ce = ce_command()
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], BENCH_ENV),
        "ce --help": ([*ce, "--help"], BENCH_ENV),
        "ce compile ONE_FILE -q": ([*ce, "compile", one_file, "-q"], BENCH_ENV),
    }
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):  # what this shell really gets
        commands["ce compile ONE_FILE -q, PYTHONDONTWRITEBYTECODE=1"] = ([*ce, "compile", one_file, "-q"],
                                                       {**os.environ,
                                                        "CE_NO_COMPILE_CACHE": "1"})
    for cmd, env in commands.values():  # warm the page cache and the .pyc files
        timed_run(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in commands}
    for _ in range(runs):  # interleaved, so drift hits every command alike
        for name, (cmd, env) in commands.items():
            wall, code, _rss, stderr = timed_run(cmd, env)
            if code != 0:
                sys.exit(f"`{' '.join(cmd)}` exited {code}:\n{stderr[:2000]}")
            times[name].append(wall * 1000)
    return {name: {"median_ms": statistics.median(v), "min_ms": min(v), "runs": len(v)}
            for name, v in times.items()}


IMPORT_PROBE = """
import json, sys
before = set(sys.modules)
from ce_runtime.cli import main
try:
    main({argv!r}, standalone_mode=False)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = {heavy!r}
mods = sorted(sys.modules)
third = sorted({{m.split(".")[0] for m in mods if m.split(".")[0] not in sys.stdlib_module_names
                and not m.startswith("_")}})
print(json.dumps({{"exit": code, "heavy": sorted(m for m in mods if m.split(".")[0] in heavy),
                  "modules": len(mods), "new_modules": len(set(mods) - before),
                  "top_level_non_stdlib": third}}))
"""


def measure_imports(one_file: str) -> dict[str, Any]:
    out = {}
    for label, argv in (("ce --help", ["--help"]),
                        ("ce compile ONE_FILE", ["compile", one_file, "-q"])):
        code = IMPORT_PROBE.format(argv=argv, heavy=set(HEAVY))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, env=BENCH_ENV)
        if proc.returncode != 0:
            sys.exit(f"import probe for {label} failed:\n{proc.stderr}")
        out[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def measure_importtime(one_file: str, top: int = 10, runs: int = 5) -> dict[str, Any]:
    """`python -X importtime` of `ce compile ONE_FILE`: the top modules by cumulative time,
    from the fastest of `runs` runs (the least disturbed one)."""
    return min((_importtime_once(one_file, top) for _ in range(runs)),
               key=lambda r: r["total_ms"])


def _importtime_once(one_file: str, top: int) -> dict[str, Any]:
    code = ("import sys\nfrom ce_runtime.cli import main\n"
            f"try:\n    main(['compile', {one_file!r}, '-q'], standalone_mode=False)\n"
            "except SystemExit:\n    pass\n")
    cmd = [sys.executable, "-X", "importtime", "-c", code]
    subprocess.run(cmd, capture_output=True, cwd=ROOT, env=BENCH_ENV)  # warm .pyc
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=BENCH_ENV)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        # "import time:       self |  cumulative |     package.module" (2 spaces per level)
        self_us, cum_us, name = line.split(":", 1)[1].split("|")
        name = name[1:]
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append({"module": name.strip(), "self_us": int(self_us), "cumulative_us":
                     int(cum_us), "depth": depth})
    total_us = sum(r["cumulative_us"] for r in rows if r["depth"] == 0)
    rows.sort(key=lambda r: -r["cumulative_us"])
    return {"total_ms": total_us / 1000, "top": rows[:top]}


# ======================================================================================
# Report
# ======================================================================================


def render(r: dict[str, Any]) -> str:
    g, fe, cli = r["generated"], r["phases"]["frontend"], r["cli"]
    m = r["meta"]
    out = [f"ce compile benchmark: {g['files']} task files ({g['criteria']} criteria, "
           f"{g['criteria_by_type'].get('expr', 0)} of them type: expr, {g['stop_when']} with "
           f"stop_when; {g['dataset_tasks']} with a 5-row dataset; "
           f"{g['bytes'] / 1024:.0f} KiB), seed {m['seed']}",
           f"python {m['python']}, {m['cpus']} CPUs, {m['platform']}, git {m['git']}, "
           f"{m['date']}", ""]
    if m.get("git_end") not in (None, m["git"]):
        out[-1:] = [f"WARNING: the sources changed during the run ({m['git']} -> "
                    f"{m['git_end']}): phases may have measured different code", ""]
    out.append(f"{'measurement':44} {'median':>9} {'min':>9} {'tasks/s':>8} {'trials/s':>9} "
               f"{'peak RSS':>9}")
    out.append(f"{'(a) front end (check_criteria=False)':44} {fe['seconds']:8.3f}s "
               f"{fe['min_seconds']:8.3f}s {fe['tasks_per_s']:8.0f} {fe['trials_per_s']:9.0f} "
               f"{fe['peak_rss_mib']:6.1f} MiB")
    out.append(f"{'    CPU time of the same':44} {fe['cpu_median']:8.3f}s {fe['cpu_min']:8.3f}s")
    out.append(f"{'    import ce_lang.compiler':44} {fe['import_seconds']:8.3f}s "
               f"{'':9} {'':8} {'':9} {fe['rss_after_import_mib']:6.1f} MiB")
    for name, ph in r["phases"].items():
        if name == "frontend":
            continue
        rates = (f"{ph['tasks_per_s']:8.0f} {ph['trials_per_s']:9.0f}" if "tasks_per_s" in ph
                 else f"{'':8} {'':9}")
        out.append(f"{PHASES[name].title[:44]:44} {ph['seconds']:8.3f}s {ph['min_seconds']:8.3f}s "
                   f"{rates} {ph['peak_rss_mib']:6.1f} MiB   "
                   f"x{ph['seconds'] / fe['seconds']:.2f} of (a) "
                   f"(min x{ph['min_seconds'] / fe['min_seconds']:.2f})")
        if "cpu_median" in ph:
            out.append(f"{'    CPU time of the same':44} {ph['cpu_median']:8.3f}s "
                       f"{ph['cpu_min']:8.3f}s {'':8} {'':9} {'':9}    "
                       f"x{ph['cpu_median'] / fe['cpu_median']:.2f} of (a) "
                       f"(min x{ph['cpu_min'] / fe['cpu_min']:.2f})")
        extra = ph["seconds"] - fe["seconds"]
        if "tasks" in ph:
            cpu = ph["cpu_min"] - fe["cpu_min"]
            out.append(f"    checking adds {extra:+.3f}s median wall, {cpu:+.3f}s min CPU "
                       f"({cpu / ph['trials'] * 1000:+.2f} ms per trial); "
                       f"{ph['errors']} errors, {ph['warnings']} warnings")
        if "sanity" in ph:
            k = ph["sanity"]
            out.append(f"    {k['checked']} of {k['criteria']} criterion instances checked "
                       f"({k['expr']} type: expr) in {ph['trials']} trials; can decide pass "
                       f"{k['can_decide_pass']}, fail {k['can_decide_fail']} (both "
                       f"{k['can_decide_both']}); {k['armed']} armed; {k['plan_steps']} plan steps")
    out.append(f"{'(b) ce compile DIR -q (CLI, with start-up)':44} {cli['seconds']:8.3f}s "
               f"{cli['min_seconds']:8.3f}s {fe['tasks'] / cli['seconds']:8.0f} "
               f"{fe['trials'] / cli['seconds']:9.0f} {cli['peak_rss_mib']:6.1f} MiB")
    out.append(f"    {fe['tasks']} tasks -> {fe['trials']} trials ({fe['plans']} distinct plans), "
               f"{fe['errors']} errors, {fe['warnings']} warnings")
    out.append("")
    out.append(f"{f'(c) start-up, {STARTUP_RUNS} runs each (cached .pyc)':52} {'median':>10} "
               f"{'min':>9} {'over python':>12}")
    base = r["startup"]["python -c pass"]["median_ms"]
    for name, s in r["startup"].items():
        extra = "" if name.startswith("python") else f"+{s['median_ms'] - base:.0f} ms"
        out.append(f"    {name:48} {s['median_ms']:7.1f} ms {s['min_ms']:6.1f} ms {extra:>12}")
    out.append("")
    out.append(f"(d) imports (heavy = {', '.join(HEAVY)})")
    for label, imp in r["imports"].items():
        heavy = ", ".join(imp["heavy"]) or "none"
        out.append(f"    {label:24} {imp['modules']:4} modules ({imp['new_modules']} imported by "
                   f"ce), heavy: {heavy}")
        out.append(f"    {'':24} non-stdlib: {', '.join(imp['top_level_non_stdlib'])}")
    it = r["importtime"]
    out.append(f"    python -X importtime, ce compile ONE_FILE (fastest of 5): {it['total_ms']:.1f} "
               "ms of imports; top 10 by cumulative:")
    for row in it["top"]:
        out.append(f"      {row['cumulative_us'] / 1000:7.1f} ms  (self {row['self_us'] / 1000:5.1f})"
                   f"  {'  ' * row['depth']}{row['module']}")
    for name, ph in r["phases"].items():
        if "profile" not in ph:
            continue
        label = "(a)" if name == "frontend" else name
        sections = [("profile", "top 15 by cumulative time"),
                    ("profile_tottime", "top 10 by own time"),
                    ("profile_lang", "ce_lang/lang/ only, top 20 by cumulative time"),
                    ("profile_lang_tottime", "ce_lang/lang/ only, top 20 by own time")]
        for key, title in sections:
            if key not in ph:
                continue
            out.append("")
            out.append(f"cProfile of {label}, {title} (profiled run: "
                       f"{ph['profiled_seconds']:.2f} s)")
            out.append(f"    {'ncalls':>9} {'tottime':>8} {'cumtime':>8}  function")
            for row in ph[key]:
                out.append(f"    {row['ncalls']:9} {row['tottime']:8.3f} {row['cumtime']:8.3f}  "
                           f"{row['function']}")
        if "profile_diff" in ph:
            fe_prof = r["phases"]["frontend"]["profiled_seconds"]
            out.append("")
            out.append(f"cProfile: what {label} adds over (a) outside ce_lang/lang/ (profiled "
                       f"{ph['profiled_seconds']:.2f} s vs {fe_prof:.2f} s), top 20 by extra "
                       "cumulative time")
            out.append(f"    {'ncalls (a)':>10} {'ncalls':>9} {'+tottime':>9} {'+cumtime':>9}  "
                       "function")
            for row in ph["profile_diff"]:
                folded = f"  (+{row['folded']} callee(s) alike)" if row.get("folded") else ""
                out.append(f"    {row['ncalls_base']:10} {row['ncalls']:9} "
                           f"{row['tottime_delta']:+9.3f} {row['cumtime_delta']:+9.3f}  "
                           f"{row['function']}{folded}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1000, help="task files to generate")
    ap.add_argument("--out", help="keep the tasks in OUT/tasks and write OUT/compile.json "
                                  "(default: temp dir, bench/.data/compile.json)")
    ap.add_argument("--seed", type=int, default=1130)
    ap.add_argument("--repeat", type=int, default=3,
                    help="fresh-subprocess runs of each phase and of (b); median reported")
    ap.add_argument("--phases", default=None,
                    help=f"comma-separated in-process phases (default: all: {', '.join(PHASES)})")
    ap.add_argument("--profile", action="store_true",
                    help="also profile phase (a) with cProfile (a separate run)")
    ap.add_argument("--json", action="store_true", help="print JSON to stdout, table to stderr")
    ap.add_argument("--_phase", help=argparse.SUPPRESS)
    ap.add_argument("--_dir", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args._phase:  # child: one in-process measurement
        _run_phase_child(args._phase, PhaseContext(args._dir, args.tasks, args.profile))
        return

    names = args.phases.split(",") if args.phases else list(PHASES)
    if "frontend" not in names:
        names.insert(0, "frontend")
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        ap.error(f"unknown phase(s) {', '.join(unknown)}; known: {', '.join(PHASES)}")

    data_dir = os.path.abspath(args.out) if args.out else DEFAULT_DATA
    BENCH_ENV.clear()
    BENCH_ENV.update(bench_env(data_dir))
    tmp = None
    if args.out:
        tasks_dir = os.path.join(data_dir, "tasks")
        if os.path.exists(tasks_dir):
            if not os.path.exists(os.path.join(tasks_dir, MARKER)):
                sys.exit(f"{tasks_dir} exists and was not generated by this script; "
                         "refusing to overwrite it")
            shutil.rmtree(tasks_dir)
    else:
        tmp = tempfile.mkdtemp(prefix="ce-bench-")
        tasks_dir = os.path.join(tmp, "tasks")

    log = sys.stderr
    git_start = git_rev()
    try:
        print(f"generating {args.tasks} task files in {tasks_dir} ...", file=log)
        generated = generate(args.tasks, tasks_dir, args.seed)
        one_file = generated["one_file"]
        ctx = PhaseContext(tasks_dir, args.tasks)
        # fill the bytecode cache, so no measurement pays for compiling .py files
        for cmd in ([*ce_command(), "compile", one_file, "-q"],
                    [sys.executable, os.path.abspath(__file__), "--help"],
                    [sys.executable, "-c", "import cProfile, pstats, resource"]):
            timed_run(cmd)
        phases: dict[str, Any] = {}
        print(f"phases {', '.join(names)}: {args.repeat} interleaved fresh run(s) each ...",
              file=log)
        all_runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        for _ in range(args.repeat):  # round-robin, so drift in the load hits all alike
            for name in names:
                all_runs[name].append(run_phase(name, ctx))
        for name in names:
            runs = all_runs[name]
            best = sorted(runs, key=lambda x: x["seconds"])[len(runs) // 2]  # median run
            best = dict(best, min_seconds=min(x["seconds"] for x in runs),
                        runs=[x["seconds"] for x in runs],
                        **({"cpu_median": statistics.median(x["cpu_seconds"] for x in runs),
                            "cpu_min": min(x["cpu_seconds"] for x in runs)}
                           if "cpu_seconds" in best else {}),
                        peak_rss_mib=max(x["peak_rss_mib"] for x in runs))
            phases[name] = best
        if args.profile:
            profiles = {}
            for name in names:
                if not PHASES[name].profiled:
                    continue
                print(f"profiling phase {name} ...", file=log)
                prof = run_phase(name, PhaseContext(tasks_dir, args.tasks, profile=True))
                profiles[name] = prof.pop("profile_all")
                phases[name].update({k: v for k, v in prof.items() if k.startswith("profile")})
                phases[name]["profiled_seconds"] = prof["seconds"]
            for name in profiles:
                if name != "frontend":
                    phases[name]["profile_diff"] = profile_diff(profiles["frontend"],
                                                                profiles[name])
        print(f"(b) ce compile DIR -q: {args.repeat} run(s) ...", file=log)
        cli = measure_cli(tasks_dir, args.repeat)
        print(f"(c) start-up: {STARTUP_RUNS} runs x 3 commands ...", file=log)
        startup = measure_startup(one_file)
        print("(d) imports ...", file=log)
        imports = measure_imports(one_file)
        importtime = measure_importtime(one_file)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    generated["one_file"] = os.path.relpath(one_file, tasks_dir)
    report = {
        "meta": {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "seed": args.seed,
                 "repeat": args.repeat, "python": platform.python_version(),
                 "platform": platform.platform(terse=True), "cpus": os.cpu_count(),
                 "git": git_start, "git_end": git_rev()},
        "generated": generated,
        "phases": phases,
        "cli": cli,
        "startup": startup,
        "imports": imports,
        "importtime": importtime,
    }
    table = render(report)
    if args.json:
        print(table, file=sys.stderr)
        print(json.dumps(report, indent=2))
    else:
        os.makedirs(data_dir, exist_ok=True)
        path = os.path.join(data_dir, "compile.json")
        with open(path, "w") as fh:
            json.dump(report, fh, indent=2)
        print(table)
        print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
