"""ce's rate card and the task's own rates (ce_runtime/pricing.py): lookups under the
usual spellings of a model id and never a look-alike, `agent.pricing` over the card,
what the codex and openai agents make of a call's usage, the schema and its CE0214
warning, the `max_usd` pre-flight of `ce run`, and an unknown cost in task.json,
run.json and report.md. End to end with the real CLIs: tests/test_agent_cost.py."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from ce_runtime.pricing import CARD, Rates, agent_rates, lookup, own_rates, spellings, unpriced
from tests.test_preflight import ce, nothing_ran

GPT_55 = Rates(input=5.0, output=30.0, cache_read=0.5, cache_write=5.0)
SONNET_45 = Rates(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


@pytest.mark.parametrize("model", [
    "gpt-5.5", "GPT-5.5", " gpt-5.5 ", "openai/gpt-5.5", "openrouter/openai/gpt-5.5",
    "openai.gpt-5.5", "azure/gpt-5.5", "gpt-5.5-2026-04-23", "gpt-5.5-20260423"])
def test_spellings_of_one_openai_model(model):
    assert lookup(model) == GPT_55


@pytest.mark.parametrize("model", [
    "claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "anthropic.claude-sonnet-4-5",
    "anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "global.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic/claude-sonnet-4.5",
    "openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5@20250929"])
def test_spellings_of_one_claude_model(model):
    assert lookup(model) == SONNET_45


@pytest.mark.parametrize("model, twin", [
    ("gpt-5.5-pro", "gpt-5.5"),              # a tier of its own, 6x the price
    ("gpt-4.1-mini", "gpt-4.1"),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1"),  # the date goes, the tier stays
    ("o3-pro", "o3"),
    ("gpt-5.4-nano", "gpt-5.4"),
    ("claude-opus-4-5-20251101", "claude-opus-4"),  # 4.5 is a third of 4's price
    ("claude-3-5-haiku-20241022", "claude-3-haiku"),
])
def test_a_tier_is_never_priced_as_its_family(model, twin):
    assert lookup(model) is not None and lookup(model) != lookup(twin)


@pytest.mark.parametrize("model", [
    "gpt-5.5-house", "gpt-5.55", "gpt-5.5.1", "claude-sonnet-4-99", "claude-sonnet",
    "o3-house", "gpt-4.1-mini-house", "eu.gpt-5.5", "house-model", "",
    "gpt-5.5/extra", "gpt-5.5-2026"])
def test_no_guess_across_families(model):
    assert lookup(model) is None, spellings(model)


def test_an_exact_dated_entry_beats_the_undated_one():
    assert lookup("gpt-4o-2024-05-13") == Rates(5.0, 15.0, 5.0, 5.0)
    assert lookup("gpt-4o-2024-08-06") == lookup("gpt-4o") == Rates(2.5, 10.0, 1.25, 2.5)


def test_the_card_holds_only_bare_lower_case_ids():
    """Every key is its own first spelling (else it could never be found)."""
    assert [k for k in CARD if spellings(k)[0] != k] == []
    assert len(CARD) > 50


def test_cost_is_each_bucket_at_its_rate():
    rates = Rates(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5)
    assert rates.cost(1_000, 100, 400, 40) == pytest.approx((2_000 + 800 + 200 + 100) / 1e6)
    assert rates.cost(0, 0) == 0.0
    assert GPT_55.cost(1_000_000, 1_000_000) == 35.0


def test_the_tasks_rates_win_over_the_card_and_default_their_cache_rates_to_input():
    agent = {"model": "gpt-5.5", "pricing": {"gpt-5.5": {"input": 1, "output": 2}}}
    assert agent_rates(agent, "gpt-4.1") == ("gpt-5.5", Rates(1.0, 2.0, 1.0, 1.0))
    agent["pricing"]["gpt-5.5"].update(cache_read=0.1, cache_write=1.5)
    assert agent_rates(agent, "gpt-4.1")[1] == Rates(1.0, 2.0, 0.1, 1.5)


def test_the_tasks_rates_match_any_spelling_on_either_side():
    own = own_rates({"OpenAI/House-Model": {"input": 1, "output": 3}})
    for model in ("house-model", "openai/house-model", "HOUSE-MODEL-2026-01-01"):
        assert lookup(model, own) == Rates(1.0, 3.0, 1.0, 1.0), model
    assert lookup("house-model-large", own) is None


def test_rates_for_another_model_do_not_apply():
    agent = {"model": "house-model", "pricing": {"other-model": {"input": 1, "output": 3}}}
    assert agent_rates(agent, "gpt-4.1") == ("house-model", None)
    assert agent_rates({}, "gpt-4.1") == ("gpt-4.1", CARD["gpt-4.1"])  # the default model
    assert agent_rates({"model": None, "pricing": None}, "gpt-5.5") == ("gpt-5.5", GPT_55)


def test_unpriced_names_the_model_only_for_agents_ce_prices():
    from ce_agents.codex import CodexAgent
    from ce_agents.none import NoneAgent
    from ce_agents.openai_loop import OpenAIAgent
    from ce_agents.opencode import OpenCodeAgent
    from ce_agents.pi import PiAgent

    for agent in (CodexAgent(), OpenAIAgent()):
        assert unpriced(agent, {}) is None  # their default models are on the card
    for agent in (OpenCodeAgent(), PiAgent()):  # their model by default: the scripted one
        assert unpriced(agent, {}) == unpriced(agent, {"model": "scripted"}) is not None
        assert unpriced(agent, {"model": "openai/gpt-4.1"}) is None
    for agent in (CodexAgent(), OpenAIAgent(), OpenCodeAgent(), PiAgent()):
        why = unpriced(agent, {"model": "house-model"})
        assert why is not None and why.startswith("model 'house-model' has no rate")
        assert unpriced(agent, {"model": "house-model", "pricing": {
            "house-model": {"input": 1, "output": 2}}}) is None
    assert unpriced(NoneAgent(), {"model": "house-model"}) is None


def test_the_compilers_list_of_priced_agents_is_the_adapters():
    """ce_lang cannot import the adapters: PRICED_BY_CE mirrors their `priced_by_ce`."""
    import importlib

    from ce_lang.schema.agent import PRICED_BY_CE
    from ce_runtime.execute.agents import BUILTIN

    priced = []
    for name, where in BUILTIN.items():
        module, cls = where.split(":")
        if getattr(getattr(importlib.import_module(module), cls), "priced_by_ce", False):
            priced.append(name)
    assert tuple(priced) == PRICED_BY_CE


# -- what the agents make of a call's usage ----------------------------------------------
def test_codex_usage_is_new_input_plus_cache_parts_priced_each_at_its_rate():
    """Codex's input_tokens include the cached and the cache-written parts."""
    import json

    from tests.test_codex_session_log import mapped

    record = {"type": "token_usage_record", "payload": {"usage": {
        "input_tokens": 1_000, "cached_input_tokens": 400, "cache_write_input_tokens": 100,
        "output_tokens": 50, "reasoning_output_tokens": 20, "total_tokens": 1_050}}}

    def usages(model):
        events = mapped([json.dumps(record).encode()], model)
        return [e for e in events if type(e).__name__ == "Usage"]

    [u] = usages(None)  # Codex's default model, gpt-5.5
    assert (u.input_tokens, u.cache_read_tokens, u.cache_creation_tokens, u.output_tokens) \
        == (500, 400, 100, 50)
    assert u.cost_usd == pytest.approx((500 * 5 + 400 * 0.5 + 100 * 5 + 50 * 30) / 1e6)
    [u] = usages("house-model")  # a model with no rate: the tokens, no cost
    assert (u.input_tokens, u.cost_usd) == (500, 0.0)


def test_openai_usage_takes_the_cached_prompt_apart():
    from ce_agents.openai_loop import _usage

    u = types.SimpleNamespace(prompt_tokens=1_000, completion_tokens=100,
                              prompt_tokens_details=types.SimpleNamespace(cached_tokens=400))
    got = _usage(u, CARD["gpt-4.1"])
    assert (got["input_tokens"], got["cache_read_tokens"], got["output_tokens"]) == \
        (600, 400, 100)
    assert got["cost_usd"] == pytest.approx((600 * 2 + 400 * 0.5 + 100 * 8) / 1e6)
    bare = types.SimpleNamespace(prompt_tokens=10, completion_tokens=None,
                                 prompt_tokens_details=None)  # a server without details
    assert _usage(bare, None) == {"input_tokens": 10, "output_tokens": 0,
                                  "cache_read_tokens": 0, "cost_usd": 0.0}


# -- the schema, the compiler's warning, `ce run`'s pre-flight ------------------------------
def write(tmp_path: Path, agent: str, limits: str = "{}", name: str = "t.yaml") -> Path:
    path = tmp_path / name
    path.write_text("task_id: t\ndescription: d\ninitial_prompt: go\n"
                    f"agent: {agent}\nrun_limits: {limits}\n"
                    "success_criteria:\n  - {type: file_exists, path: x, description: d}\n")
    return path


def compiled(path: Path, run_agent: str | None = None):
    from ce_lang.api import CompileOptions, compile_paths

    return compile_paths([str(path)], CompileOptions(run_agent=run_agent))


def test_agent_pricing_is_checked_by_the_schema(tmp_path):
    bad = write(tmp_path, "{type: codex, pricing: {m: {input: -1, output: x, cache_reed: 1}}}")
    codes = sorted(d.code for d in compiled(bad).diagnostics)
    assert codes == ["CE0101", "CE0103", "CE0104"]
    good = write(tmp_path, "{type: codex, model: m, pricing: {m: {input: 2, output: 8}}}")
    result = compiled(good)
    assert not result.diagnostics
    rates = result.trials[0].plan.agent.pricing["m"]
    assert (rates.input, rates.output, rates.cache_read) == (2.0, 8.0, None)


@pytest.mark.parametrize("agent, run_agent, warned", [
    ("claude-code", None, "it reports its own cost"),
    ("pi", None, None),                      # ce prices pi's and opencode's tokens
    ("opencode", None, None),
    ("script", None, "it calls no model"),
    ("codex", None, None),
    ("openai", None, None),
    ("claude-code", "codex", None),          # `ce run --agent codex` runs codex
    ("codex", "claude-code", "it reports its own cost"),
])
def test_pricing_on_an_agent_that_prices_itself_is_a_warning(tmp_path, agent, run_agent,
                                                             warned):
    script = "script: [], " if agent == "script" else ""  # a key only it reads (CE0214)
    path = write(tmp_path, f"{{type: {agent}, {script}pricing: "
                           "{m: {input: 1, output: 2}}}")
    found = [d for d in compiled(path, run_agent).diagnostics if d.code == "CE0214"]
    if warned is None:
        assert found == []
    else:
        [d] = found
        assert warned in d.message and "agent.pricing" in d.message


def test_max_usd_on_a_model_without_a_rate_stops_the_run_before_anything(tmp_path):
    write(tmp_path, "{type: codex, model: house-model}", "{max_usd: 5}")
    res = ce("run", ".", "--scripted-model", "--runs-root", "runs", cwd=tmp_path)
    nothing_ran(res, tmp_path)
    assert ("t.yaml:5:23: error[CE0222]: `run_limits.max_usd` can never stop these trials "
            "(1 trial(s): default/t/00): agent `codex`: model 'house-model' has no rate on "
            "ce's rate card") in res.stderr
    assert "give the model a rate, or remove max_usd" in res.stderr


def test_a_refused_max_usd_is_shown_where_it_and_the_model_were_set(tmp_path):
    """CE0222 as `ce compile` renders a diagnostic: the `max_usd` (from the task file),
    and the model that has no rate (from an experiment's variant)."""
    from tests.test_compare import check_golden

    write(tmp_path, "{type: codex}", "{max_usd: 5}")
    (tmp_path / "exp.yaml").write_text("""\
experiment_id: models
variants:
  - variant_id: priced
    agent: {model: gpt-4.1}
  - variant_id: house
    agent:
      model: house-model
""")
    res = ce("run", "t.yaml", "-e", "exp.yaml", "--scripted-model", "--runs-root", "runs",
             cwd=tmp_path)
    nothing_ran(res, tmp_path)
    check_golden("run_max_usd_unpriced.txt", res.stderr)


def preflight(tmp_path, capsys, agent: str, limits: str, run_agent: str | None = None):
    """`ce run`'s cost check on one task: (exit code or None, what it said)."""
    from ce_runtime.cli import run_preflight

    result = compiled(write(tmp_path, agent, limits), run_agent)
    try:
        run_preflight.costs(result.trials, run_agent, sources=result.sources)
        code = None
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def test_the_cost_check_of_each_case(tmp_path, capsys):
    # a priced model, or the task's own rate: nothing said
    assert preflight(tmp_path, capsys, "{type: codex}", "{max_usd: 1}") == (None, "")
    assert preflight(tmp_path, capsys, "{type: openai, model: m, pricing: {m: {input: 1, "
                     "output: 1}}}", "{max_usd: 1}") == (None, "")
    # an agent reporting its own cost: never refused
    assert preflight(tmp_path, capsys, "{type: claude-code, model: m}", "{max_usd: 1}") == \
        (None, "")
    # no rate and no budget: runs, said once
    code, err = preflight(tmp_path, capsys, "{type: openai, model: m}", "{}")
    assert code is None and err.startswith("ce run: cost unknown (1 trial(s): default/t/00): "
                                           "agent `openai`: model 'm' has no rate")
    # no rate and a budget: refused, also when `--agent openai` makes it so
    code, err = preflight(tmp_path, capsys, "{type: openai, model: m}", "{max_usd: 1}")
    assert code == 2 and "t.yaml:5:23: error[CE0222]: `run_limits.max_usd` can never " \
        "stop" in err
    code, err = preflight(tmp_path, capsys, "{model: m}", "{max_usd: 1}", run_agent="openai")
    assert code == 2 and "agent `openai`: model 'm'" in err
    assert "note: the agent is `openai`, set by `ce run --agent openai`" in err


# -- an unknown cost in the records and reports ------------------------------------------
def records(why: str | None):
    from ce_runtime.store.record import Status, TrialRecord, Usage

    return [TrialRecord(trial_id=f"default/t{i}/00", variant_id="default", task_id=f"t{i}",
                        status=Status.SUCCESS, success=True, weighted_score=1.0,
                        usage=Usage(input_tokens=10, output_tokens=5, cost_usd=cost),
                        cost_unknown=unknown)
            for i, (cost, unknown) in enumerate([(0.25, None), (0.0, why), (0.0, why)])]


def test_an_unknown_cost_is_in_task_json_only_when_there_is_one():
    from ce_runtime.store.record import decode_record, encode_record, record_dict

    known, unknown, _ = records("model 'm' has no rate")
    assert "cost_unknown" not in record_dict(known)
    assert record_dict(unknown)["cost_unknown"] == "model 'm' has no rate"
    assert decode_record(encode_record(unknown)).cost_unknown == "model 'm' has no rate"


def test_run_json_and_report_md_count_the_trials_of_unknown_cost():
    from ce_runtime import report

    recs = records("model 'm' has no rate")
    summary = report.summary(recs, [], "r", {})
    assert summary["cost_usd"] == 0.25
    assert summary["cost_unknown"] == {"trials": 2, "why": ["model 'm' has no rate"]}
    assert summary["variants"]["default"]["cost_unknown"]["trials"] == 2
    md = report.render_markdown(summary, recs, [])
    assert "| Cost | $0.2500 over 1 of 3 trial(s); 2 unpriced: model 'm' has no rate |" in md
    assert md.count("| — |") == 2  # the two trials' cost cells
    clean = report.summary(records(None), [], "r", {})
    assert "cost_unknown" not in clean and "cost_unknown" not in clean["variants"]["default"]


def test_ce_report_reads_the_unknown_cost_back_from_the_parquet(tmp_path):
    import json

    from ce_runtime import report
    from ce_runtime.report.rundir import load_run

    recs = records("model 'm' has no rate")
    report.write_parquet(str(tmp_path), recs)
    (tmp_path / "run.json").write_text(json.dumps(report.summary(recs, [], "r", {})))
    back = load_run(str(tmp_path)).records
    assert [r.cost_unknown for r in back] == [None, "model 'm' has no rate",
                                              "model 'm' has no rate"]
