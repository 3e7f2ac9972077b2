"""The argv matcher `record_cli` shims and `cli_called` share (ce_lang/argv_match.py),
on hand-written invocations: every facet and every flag predicate."""

from __future__ import annotations

import pytest

from ce_lang.argv_match import argv_matches, match_spec, select_rule, split_flags


def m(argv: str, **facets) -> bool:
    return argv_matches(match_spec(**facets), argv.split())


# -- verb ------------------------------------------------------------------------------------
def test_the_verb_is_a_token_wise_prefix_of_the_non_flag_arguments():
    assert m("ixp projects list", verb="ixp projects list")
    assert m("ixp projects list proj-1 --output json", verb="ixp projects")
    assert not m("ixp projects lists", verb="ixp projects list")
    assert not m("labellings unconfirm", verb="labellings confirm")
    assert not m("ixp", verb="ixp projects")
    assert m("--verbose ixp projects get", verb="ixp projects get")  # flags do not count


def test_verb_any_of_matches_any_spelling_and_positional_follows_the_one_that_matched():
    spec = dict(verb_any_of=["ixp projects list", "ixp get"], positional=["p1"])
    assert m("ixp get p1", **spec)
    assert m("ixp projects list p1", **spec)
    assert not m("ixp projects get p1", **spec)
    assert not m("ixp get p2", **spec)


def test_no_verb_matches_any_verb():
    assert m("anything at all", positional=["anything"])


# -- positional ------------------------------------------------------------------------------
def test_positional_is_a_prefix_of_what_follows_the_verb():
    assert m("ixp projects list proj-1 dummy", verb="ixp projects list", positional=["proj-1"])
    assert not m("ixp projects list proj-2", verb="ixp projects list", positional=["proj-1"])
    assert not m("ixp projects list", verb="ixp projects list", positional=["proj-1"])


def test_an_undeclared_flag_is_a_switch_so_its_value_shifts_the_positionals():
    spec = dict(verb="get", positional=["proj-1"])
    assert m("get proj-1 --folder Finance", **spec)
    assert not m("get --folder Finance proj-1", **spec)
    assert m("get --folder Finance proj-1", **spec, value_flags=["folder"])


def test_a_switch_before_the_target_never_swallows_it():
    # the delete guard: --yes is a switch, so proj-1 stays positional and is matched
    assert m("ixp fields delete --yes proj-1", verb="ixp fields delete", positional=["proj-1"])


# -- flags -----------------------------------------------------------------------------------
def test_equals_and_its_bare_scalar_shorthand():
    assert m("configure --model gemini", flags={"model": "gemini"})
    assert m("configure --model gemini", flags={"model": {"equals": "gemini"}})
    assert m("configure --model=gemini", flags={"model": "gemini"})
    assert not m("configure --model gpt", flags={"model": "gemini"})
    assert not m("configure", flags={"model": "gemini"})


def test_contains():
    assert m("q --query select-all-rows", flags={"query": {"contains": "all"}})
    assert not m("q --query select-one", flags={"query": {"contains": "all"}})


def test_matches_regex_is_scoped_to_one_value_and_takes_re_flags():
    assert m("q --name Invoice-7", flags={"name": {"matches_regex": r"^invoice-\d$",
                                                   "flags": 2}})
    assert not m("q --name Invoice-7", flags={"name": {"matches_regex": r"^invoice-\d$"}})
    assert not m("q --name x --other invoice-7",
                 flags={"name": {"matches_regex": "invoice"}})


def test_any_of():
    assert m("c --model b", flags={"model": {"any_of": ["a", "b"]}})
    assert not m("c --model z", flags={"model": {"any_of": ["a", "b"]}})


def test_present_and_absent_and_neither_makes_the_flag_take_a_value():
    assert m("delete --yes proj-1", verb="delete", positional=["proj-1"],
             flags={"yes": {"present": True}})
    assert not m("delete proj-1", flags={"yes": {"present": True}})
    assert m("delete proj-1", flags={"force": {"absent": True}})
    assert not m("delete --force proj-1", verb="delete", positional=["proj-1"],
                 flags={"force": {"absent": True}})


def test_repeated_flags_match_on_any_value():
    assert m("get --fields a --fields b", flags={"fields": "b"})


def test_aliases_gather_values_across_spellings():
    yes = {"yes": {"present": True, "aliases": ["y"]}}
    assert m("delete -y p", flags=yes)
    assert m("delete --yes p", flags=yes)
    assert not m("delete p", flags=yes)
    assert m("get -f f-002", flags={"fields": {"equals": "f-002", "aliases": ["f"]}})
    assert not m("delete -y p", flags={"yes": {"absent": True, "aliases": ["y"]}})


def test_clustered_short_flags_split_unless_declared():
    assert m("rm -rf dir", flags={"f": {"present": True}})
    assert m("rm -yf dir", flags={"y": {"present": True}})
    assert m("tool -ab x", flags={"ab": {"present": True}})  # a declared multi-char name
    assert m("tool -ovalue", value_flags=["o"], flags={"o": "value"})


def test_negative_numbers_are_values_unless_declared():
    assert m("seek -1", verb="seek", positional=["-1"])
    assert m("head -1 file", flags={"1": {"present": True}})
    assert m("list --limit -1", flags={"limit": "-1"})  # a value flag binds a dash value


def test_ignore_flags_drop_the_flag_and_value_flags_keep_its_value_out_of_positionals():
    spec = dict(verb="get", positional=["p1"], ignore_flags=["output"])
    assert m("get --output json p1", **spec)  # output is a value flag by default
    assert not m("get --output json p1", verb="get", positional=["p1"], value_flags=[])
    # an ignored switch does not become value-bearing
    assert m("delete --verbose p1", verb="delete", positional=["p1"], ignore_flags=["verbose"])
    _, flags = split_flags(["--output", "json", "--x"], frozenset({"output"}),
                           frozenset({"output"}))
    assert flags == {"x": [""]}


def test_double_dash_ends_flags_and_a_lone_dash_is_positional():
    assert m("run -- --not-a-flag", verb="run", positional=["--not-a-flag"])
    assert m("cat -", verb="cat", positional=["-"])


# -- rules -----------------------------------------------------------------------------------
def test_the_first_matching_rule_wins_and_none_when_nothing_matches():
    rules = [{"when": match_spec(verb="ixp dummy1"), "exit": 0},
             {"when": match_spec(verb="ixp"), "exit": 3}]
    assert select_rule(rules, ["ixp", "dummy1"])[0] == 0
    assert select_rule(rules, ["ixp", "dummy2"])[0] == 1
    assert select_rule(rules, ["other"]) is None


@pytest.mark.parametrize("argv", [[], ["-"], ["--"], ["--="], ["-1"], ["---x"]])
def test_odd_argv_never_raises(argv):
    argv_matches(match_spec(verb="a", flags={"x": {"present": True}}), argv)
