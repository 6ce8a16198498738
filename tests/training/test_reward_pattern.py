"""A regex reward's pattern is bounded before it compiles where it matters: a counted repeat over the
bound is refused at once, and everything else compiles first in a child with a memory and a time
limit, so no reading of the syntax can be fooled (these patterns each fooled a hand-written one)."""

import os
import time

import pytest
import regex

from minimind.errors import ConfigError
from minimind.training.rewards import build_rewards
from minimind.training.rewards.pattern import COMPILE_MEMORY_MB, MAX_REPEAT, check_pattern


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.parametrize("pattern", ["a{1000000000}", "(?:ab){4294967294}", "x{300000}", "[ab]{1001}", "a{,5000}"])
def test_a_repeat_over_the_bound_is_refused_at_once(pattern):
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"reward 'regex': pattern .* repeats [\d,]+ times .* limit is {MAX_REPEAT:,}"):
        build_rewards([{"name": "regex", "pattern": pattern}])
    assert time.perf_counter() - started < 0.05


@pytest.mark.parametrize("pattern", [
    "(?:a{1000}){1000}",                           # nested repeats multiply
    "(?:a{1000})(?i){1000}",                       # an inline flag is nothing: the repeat applies to what is before
    r"(?#\)[)(?:a{1000}){1000}]",                  # \) continues a comment
    "(?:a{1000}[[:alpha:])b(]){1000}",             # a POSIX class inside a set
    r"(?fi:(?:[\x00-\U0010ffff]{100}){100})",      # full case folding of the widest range
    "(?:(?:(?:a{100}){100}){100}){100}"])
def test_a_pattern_that_would_compile_huge_is_refused_without_growing_this_process(pattern):
    before = _rss_mb()
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"needs more than {COMPILE_MEMORY_MB} MB to compile|takes longer than"):
        check_pattern(pattern)
    assert time.perf_counter() - started < 6 and _rss_mb() - before < 20


@pytest.mark.parametrize("pattern", ["月", r"^(.{5}[，。]){4}$", r"\d{4}-\d{2}-\d{2}", r"\p{Han}{7}", "(春|秋){2}",
                                     "(?:a{100}){10}", "(?i)spring", r"[{]\{x"])
def test_ordinary_patterns_pass(pattern):
    check_pattern(pattern)


@pytest.mark.parametrize("pattern, needle", [
    ("(月", "does not compile: missing )"), ("a{5,3}", "does not compile: min repeat greater than max"),
    ("月\x00", "NUL"), ("", "pattern is empty"), ("月" * 201, "keep it to 200 or fewer")])
def test_a_pattern_that_cannot_be_used_says_why(pattern, needle):
    with pytest.raises(ConfigError, match=regex.escape(needle)):
        check_pattern(pattern)


def test_no_user_pattern_stays_compiled_and_a_reward_compiles_once_when_it_first_scores():
    cached = len(regex._main._cache)
    (reward,) = build_rewards([{"name": "regex", "pattern": "春眠[不]觉晓{1,3}"}])
    assert not reward.prepared  # checking a config (as the page does) compiles nothing here
    assert reward("春眠不觉晓晓", "") == 1.0 and reward("春眠觉晓", "") == 0.0
    compiled = reward.prepared["compiled"]
    reward("春眠不觉晓", "")
    assert reward.prepared["compiled"] is compiled
    assert len(regex._main._cache) == cached
