"""The one greedy loop and teacher-forced logits that export verification and the ONNX runner share."""

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.export.runner import forced_logits, greedy, model_logits, uncached

from helpers import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

PROMPT = [2, 17, 40, 99, 7, 300, 12]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return MiniMindForCausalLM(tiny_config()).eval()


def test_greedy_over_a_model_picks_what_generate_picks(model):
    ids = torch.tensor([PROMPT])
    want = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, min_new_tokens=20,
                          do_sample=False, pad_token_id=0)[0, len(PROMPT):].tolist()
    assert greedy(uncached(model_logits(model)), PROMPT, 20) == want
    assert greedy(uncached(model_logits(model)), PROMPT, 0) == []


def test_a_step_reads_the_prompt_then_each_pick_and_never_the_last():
    fed = []

    def step(new):
        fed.append(list(new))
        logits = torch.zeros(50)
        logits[len(fed) * 3] = 1.0  # picks 3, 6, 9
        return logits

    assert greedy(step, [1, 2], 3) == [3, 6, 9]
    assert fed == [[1, 2], [3], [6]]


def test_forced_logits_are_each_position_scored_alone(model):
    continuation = [5, 250, 31, 8]
    forced = forced_logits(model_logits(model), PROMPT, continuation)
    assert forced.shape == (len(continuation), model.config.vocab_size) and forced.dtype == torch.float32
    for i in range(len(continuation)):
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([PROMPT + continuation[:i]])).logits[0, -1]
        torch.testing.assert_close(forced[i], alone, atol=1e-5, rtol=1e-5)
