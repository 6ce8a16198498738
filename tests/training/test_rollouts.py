"""GRPO's rollouts build their sampler from SamplingParams (with GRPO's own temperature bound) and
leave the prompt room in the model's context, as the engine's other callers do."""

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.errors import SamplingError
from minimind.inference import Sampler, engine_for, guard_for
from minimind.sampling_params import SamplingParams
from minimind.training.objectives.rollouts import RolloutPolicy, RolloutSampling

from helpers import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_rollouts_sample_hot_seeded_answers_within_the_context(tokenizer):
    torch.manual_seed(0)
    policy = RolloutPolicy(MiniMindForCausalLM(tiny_config()).eval(), tokenizer)
    prompt = tokenizer("床前明月光，疑是地上霜。", add_special_tokens=False)["input_ids"]
    rolled = policy.sample([prompt], [7], 12, 3.0, 0, 1.0)  # hotter than a chat may ask for
    engine = engine_for(policy.model)
    assert engine.cpp is None  # no llama.cpp copy of weights that change every step (remade each time)
    by_hand = Sampler(engine.vocab_size, 3.0, 0, 1.0, 1.0, seed=7, guard=guard_for(tokenizer, engine.vocab_size))
    assert rolled.answers == [list(engine.submit(prompt, by_hand, 12, policy.stop_ids))]
    assert rolled.answers != policy.sample([prompt], [8], 12, 3.0, 0, 1.0).answers  # the seed is used

    long = [5] * (256 - 3)  # two tokens of room left (one stays free, as before)
    assert len(policy.sample([long], [1], 12, 1.0, 0, 1.0).answers[0]) <= 2

    with pytest.raises(SamplingError, match=r"temperature must be in \[0, 2\]"):
        SamplingParams(temperature=3.0)
    with pytest.raises(SamplingError, match=r"temperature must be in \[0, 10\]"):
        RolloutSampling(temperature=11.0)
