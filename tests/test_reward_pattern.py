"""A regex reward's pattern is bounded before it compiles: the reading over-counts, never under-counts,
what the regex module's own parser says the pattern expands to."""

import time

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from regex import _regex_core as core

from minimind.errors import ConfigError
from minimind.training.rewards import build_rewards
from minimind.training.rewards.pattern import MAX_REPEAT, MAX_UNITS, check_pattern, expanded_units, search


def parser_units(pattern: str) -> int:
    """The reference: atoms the regex module's parse tree holds with each repeat written out its
    minimum number of times (what compiling expands), read with the module's own parser."""
    source = core.Source(pattern)
    info = core.Info(0, source.char_type, {})
    info.guess_encoding = core.UNICODE
    return _units(core._parse_pattern(source, info))


def _units(node) -> int:
    if isinstance(node, core.SetBase):  # a set compiles to one node, its members listed once
        return 1
    if isinstance(node, (core.GreedyRepeat, core.LazyRepeat, core.PossessiveRepeat)):
        return _units(node.subpattern) * max(node.min_count, 1)
    children = [getattr(node, name) for name in ("subpattern", "yes_item", "no_item") if hasattr(node, name)]
    children += list(getattr(node, "items", ())) + list(getattr(node, "branches", ()))
    if not children and not hasattr(node, "items") and not hasattr(node, "branches"):
        return 1  # an atom (an empty sequence or branch holds none)
    return sum(_units(child) for child in children if child is not None)


HOSTILE = ["a{1000000000}", "(?:ab){4294967294}", "x{300000}", "(?:a{1000}){1000}", "((a{100}){100}){2}",
           "[ab]{1001}", "(?:(?:x{30}){30}){30}"]


@pytest.mark.parametrize("pattern", HOSTILE)
def test_a_pattern_that_would_expand_is_refused_before_it_compiles(pattern):
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=r"reward 'regex': pattern .* (repeats|atoms long)") as caught:
        build_rewards([{"name": "regex", "pattern": pattern}])
    assert time.perf_counter() - started < 0.1
    assert f"{MAX_REPEAT:,}" in str(caught.value) or f"{MAX_UNITS:,}" in str(caught.value)


@pytest.mark.parametrize("pattern, units", [
    ("月", 1), (r"^(.{5}[，。]){4}$", 26), (r"\d{4}-\d{2}-\d{2}", 10), (r"\p{Han}{7}", 7), ("a{,5}", 5),
    ("(?:a{100}){100}", MAX_UNITS), ("(春|秋){2}", 4), (r"[{]\{x", 3), ("(?#((c)月", 1)])
def test_ordinary_patterns_pass_with_their_size(pattern, units):
    check_pattern(pattern)
    assert expanded_units(pattern) == units


@pytest.mark.parametrize("pattern, needle", [
    ("(?x)a # [\n b{5000}", "inline flag 'x'"), ("(?V1)[]a]", "inline flag 'V1'"), ("(月", "a '(' has no ')'"),
    ("月)", "a ')' has no '('"), ("[月", "a '[' has no ']'"), ("a{5,3}", "does not compile")])
def test_syntax_the_reading_cannot_bound_is_refused(pattern, needle):
    with pytest.raises(ConfigError, match=regex.escape(needle)):
        check_pattern(pattern)


TOKENS = ["a", "月", ".", r"\d", r"\{", r"\p{Han}", r"\N{DIGIT ONE}", "[ab]", "[]a]", "[^]]", r"[\]{]", "[{9}]",
          "(", "(?:", "(?P<n>", "(?=", "(?<!", ")", "|", "*", "+?", "?", "{", "}", "{2}", "{3,}", "{,4}",
          "{2,5}", "{0,7}", "{12}", "{30}", "(?#(c)", "(?i)", r"\g<n>", "^", "$", "(?(1)", "(?>", "(?|", "[[a]",
          "[a-z]", "(?P=n)", "{e<=1}", "(?i:", r"\pL", r"\N{", "]", "\\", "(?<=ab)"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=14))
def test_the_reading_never_counts_less_than_the_regex_parser(tokens):
    pattern = "".join(tokens)
    try:
        reference = parser_units(pattern)
    except (regex.error, core._UnscopedFlagSet):
        return  # the module refuses it: so does check_pattern, through the compile
    try:
        ours = expanded_units(pattern)
    except ConfigError:
        return  # refused outright: safe
    assert ours >= reference, (pattern, ours, reference)


def test_no_user_pattern_stays_compiled():
    cached = len(regex._main._cache)
    build_rewards([{"name": "regex", "pattern": "春眠[不]觉晓{1,3}"}])
    assert search("春眠[不]觉晓{1,3}", "春眠不觉晓晓")
    assert search("明月", "床前明月光") and not search("^明月", "床前明月光")
    assert len(regex._main._cache) == cached


def test_the_largest_allowed_patterns_compile_in_milliseconds():
    for pattern in ("a{1000}" * 10, "(?:a{100}){100}", "(?:[ab]{10}){1000}", "(x){1000}(y){1000}(z){1000}"):
        check_pattern(pattern)
        started = time.perf_counter()
        regex.compile(pattern, cache_pattern=False)
        assert time.perf_counter() - started < 0.5, pattern
