"""Speculative greedy decoding (an int8 draft guesses, the exact weights check) gives exactly the
tokens plain decoding gives: with stops, a repetition penalty, any lookahead, and a bad draft."""

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.fast_decode import FastDecoder, TokenSampler, stream_tokens

from helpers import tiny_config


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _decoders(seed=0):
    torch.manual_seed(seed)
    model = MiniMindForCausalLM(tiny_config()).eval()
    return FastDecoder(model), FastDecoder(model, "int8")


def _tokens(decoder, prompt, n, penalty=1.0, stops=(), **speculative):
    sampler = TokenSampler(decoder.vocab_size, repetition_penalty=penalty)
    return list(stream_tokens(decoder, prompt, sampler, n, stop_ids=stops, **speculative))


@pytest.mark.parametrize("prompt", [[7, 300, 41, 99, 5], [11], list(range(40, 90))])
def test_speculative_tokens_equal_plain_greedy(prompt):
    exact, draft = _decoders()
    plain = _tokens(exact, prompt, 50)
    for lookahead in (1, 3, 8):
        assert _tokens(exact, prompt, 50, draft=draft, lookahead=lookahead) == plain
    assert _tokens(exact, prompt, 30, penalty=1.3, draft=draft) == _tokens(exact, prompt, 30, penalty=1.3)
    stop = plain[12]
    assert _tokens(exact, prompt, 50, stops=[stop], draft=draft) == plain[:plain.index(stop) + 1]
    assert _tokens(exact, prompt, 1, draft=draft) == plain[:1]


def test_a_draft_of_another_model_only_costs_speed():
    exact, _ = _decoders(0)
    _, wrong_draft = _decoders(1)  # guesses that are mostly rejected
    prompt = [3, 14, 15, 92, 65]
    assert _tokens(exact, prompt, 40, draft=wrong_draft, lookahead=4) == _tokens(exact, prompt, 40)


def test_sampling_ignores_the_draft():
    exact, draft = _decoders()
    sampled = [list(stream_tokens(exact, [5, 6, 7], TokenSampler(exact.vocab_size, temperature=0.8, seed=3), 20,
                                  **kw)) for kw in ({}, {"draft": draft})]
    assert sampled[0] == sampled[1]
