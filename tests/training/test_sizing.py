"""The size of a new model follows what its run can afford (minimind/training/sizing.py)."""

import pytest

from minimind import MiniMindConfig, MiniMindForCausalLM
from minimind.training.sizing import (LADDER, PROBE_TOLERANCE, REPEAT_DROPOUT, REPEAT_PASSES, TOKENS_PER_PARAMETER,
                                       choose_preset, choose_timed_preset, parameter_count, repetition_dropout)


def test_parameter_count_is_the_built_models():
    for preset in ("pico", "micro", "nano"):
        model = MiniMindForCausalLM(MiniMindConfig.from_preset(preset, vocab_size=1000))
        assert parameter_count(preset, 1000) == sum(p.numel() for p in model.parameters())


def test_the_largest_size_the_tokens_can_train_is_chosen_and_probing_stops_past_it():
    params = {name: 10 ** (i + 6) for i, name in enumerate(LADDER)}     # 1M, 10M, 100M, ...
    probed = []

    def planned(name):
        probed.append(name)
        return 60e6 / (1 + LADDER.index(name))                          # bigger: fewer tokens

    choice = choose_preset(planned, params.__getitem__)
    # pico (60 tokens per parameter) and micro (3.0) qualify at 2.5, nano (0.2) does not
    assert choice.preset == "micro" and choice.planned_tokens == 30_000_000
    assert probed == ["pico", "micro", "nano"]
    assert TOKENS_PER_PARAMETER == 2.5


def test_a_budget_too_small_for_any_size_gets_the_smallest():
    choice = choose_preset(lambda name: 1.0, lambda name: 10 ** 6)
    assert choice.preset == LADDER[0]
    assert "pico" in choice.describe()


@pytest.mark.parametrize("tokens, expected", [(1e6, "pico"), (6e6, "pico"), (8e6, "micro"), (1.2e7, "nano"), (1e9, "base")])
def test_known_token_counts_map_to_sizes(tokens, expected):
    """With a step count the planned tokens do not depend on the size (no probe is needed)."""
    choice = choose_preset(lambda name: tokens, lambda name: parameter_count(name, 6400))
    assert choice.preset == expected


def _timed(first_pass: dict, later: dict):
    """A seconds_per_step that answers from `first_pass` until a size is timed a second time, and
    from `later` from then on (the machine's speed changed)."""
    calls = []

    def seconds_per_step(name):
        calls.append(name)
        return (first_pass if len(set(calls)) == len(calls) else later)[name]

    return seconds_per_step, calls


def _tokens_for(seconds):  # half an hour of steps of 1,024 tokens
    return 1800 / seconds * 1024


def test_a_steady_machine_times_the_chosen_size_once_more_and_keeps_its_choice():
    steady = {"pico": 0.15, "micro": 0.20, "nano": 0.28, "mini": 0.6}
    seconds_per_step, calls = _timed(steady, {"micro": 0.26})   # 30 % off (a first size warming up): inside
    messages = []
    choice = choose_timed_preset(seconds_per_step, _tokens_for, lambda name: parameter_count(name, 6400),
                                 log=messages.append)
    assert choice.preset == "micro" and calls == ["pico", "micro", "nano", "micro"] and messages == []


def test_timings_that_ran_slow_are_taken_again_and_the_choice_follows_the_new_ones():
    """At 60 minutes on Tang the first timings ran 2.5 times slow while another process started:
    pico was chosen, micro wins (benchmarks/NOTES.md, "Size probe")."""
    slow = {"pico": 0.51, "micro": 0.55, "nano": 0.7}
    steady = {"pico": 0.20, "micro": 0.22, "nano": 0.30, "mini": 0.6}
    seconds_per_step, calls = _timed(slow, steady)
    messages = []
    parameters = lambda name: parameter_count(name, 6400)  # noqa: E731
    assert choose_preset(lambda name: _tokens_for(slow[name]), parameters).preset == "pico"
    choice = choose_timed_preset(seconds_per_step, _tokens_for, parameters, log=messages.append)
    assert choice.preset == "micro"
    assert calls == ["pico", "pico", "pico", "micro", "nano"]  # pico fell short at first
    assert len(messages) == 1 and "0.51s/step, then 0.20s/step" in messages[0]
    assert PROBE_TOLERANCE == 1.5


def test_dropout_starts_where_the_planned_passes_reach_the_threshold():
    assert repetition_dropout(0.7) == repetition_dropout(REPEAT_PASSES - 0.01) == 0.0
    assert repetition_dropout(REPEAT_PASSES) == repetition_dropout(40.0) == REPEAT_DROPOUT > 0
