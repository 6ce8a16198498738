"""The size of a new model follows what its run can afford (minimind/training/sizing.py)."""

import pytest

from minimind import MiniMindConfig, MiniMindForCausalLM
from minimind.training.sizing import LADDER, TOKENS_PER_PARAMETER, choose_preset, parameter_count


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
