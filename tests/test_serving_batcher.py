"""Continuous batching: several sequences decoded together give each one's own tokens."""

import threading

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.fast_decode import FastDecoder, ModelDecoder, TokenSampler, stream_tokens
from minimind.serving.batcher import DecodeBatcher

from helpers import tiny_config

PROMPTS = [[7, 300, 41, 99, 5], list(range(40, 75)), [11], [250, 251] * 9]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """On a 2-core machine shared with other jobs, a descheduled OpenMP worker stalls every op for
    a scheduler tick; one thread keeps these small-model tests fast (results do not depend on it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(**overrides):
    torch.manual_seed(0)
    return MiniMindForCausalLM(tiny_config(**overrides)).eval()


def _sampler(i):
    return TokenSampler(512, temperature=0.9 if i % 2 else 0.0, top_k=40, seed=i)


def test_step_batch_matches_single_steps():
    decoder = FastDecoder(_model())
    singles, batched = [], []
    for prompt in PROMPTS:
        for caches in (singles, batched):
            cache = decoder.new_cache(64)
            decoder.forward(torch.tensor(prompt), cache)
            caches.append(cache)
    tokens = [3, 90, 411, 7]
    for _ in range(5):
        expected = torch.stack([decoder.step(t, c) for t, c in zip(tokens, singles)])
        got = decoder.step_batch(tokens, batched)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        tokens = expected.argmax(-1).tolist()
    assert [c.length for c in batched] == [c.length for c in singles]


@pytest.mark.parametrize("overrides", [{}, {"use_moe": True}])
def test_batched_requests_equal_their_solo_runs(overrides):
    decoder = FastDecoder(_model(**overrides))
    lengths = [30, 12, 25, 1]
    alone = [list(stream_tokens(decoder, p, _sampler(i), n)) for i, (p, n) in enumerate(zip(PROMPTS, lengths))]
    batcher = DecodeBatcher(decoder, max_batch=3)  # one request has to wait for a free row
    try:
        streams = [batcher.submit(p, _sampler(i), n) for i, (p, n) in enumerate(zip(PROMPTS, lengths))]
        got = [list(s) for s in streams]
    finally:
        batcher.close()
    assert got == alone


def test_streams_consumed_from_many_threads_and_cancelled_ones_leave():
    decoder = FastDecoder(_model())
    batcher = DecodeBatcher(decoder, max_batch=8)
    results = {}

    def consume(i):
        stream = batcher.submit(PROMPTS[i % 4], _sampler(i), 40)
        if i == 5:  # this client leaves after three tokens
            results[i] = [next(stream) for _ in range(3)]
            stream.close()
        else:
            results[i] = list(stream)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        batcher.close()
    for i in range(8):
        expected = list(stream_tokens(decoder, PROMPTS[i % 4], _sampler(i), 40))
        assert results[i] == (expected[:3] if i == 5 else expected)


def test_stop_ids_and_errors_reach_the_consumer():
    model = _model()
    decoder = FastDecoder(model)
    free = list(stream_tokens(decoder, PROMPTS[0], _sampler(0), 12))
    batcher = DecodeBatcher(decoder)
    try:
        assert list(batcher.submit(PROMPTS[0], _sampler(0), 12, [free[4]])) == free[:free.index(free[4]) + 1]
        too_long = batcher.submit(list(range(5, 300)), _sampler(0), 4)  # 295 > the 256-token context
        with pytest.raises(ValueError, match="KV cache full"):
            list(too_long)
        assert list(batcher.submit(PROMPTS[1], _sampler(1), 3)) == list(stream_tokens(decoder, PROMPTS[1],
                                                                                      _sampler(1), 3))
    finally:
        batcher.close()


def test_a_model_without_the_lean_path_is_served_one_at_a_time():
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(_model(), LoraConfig(r=4, target_modules=["q_proj"], init_lora_weights=False)).eval()
    decoder = ModelDecoder(peft_model)
    batcher = DecodeBatcher(decoder, max_batch=8)
    assert batcher.max_batch == 1
    try:
        streams = [batcher.submit(p, _sampler(i), 8) for i, p in enumerate(PROMPTS[:3])]
        got = [list(s) for s in streams]
    finally:
        batcher.close()
    assert got == [list(stream_tokens(decoder, p, _sampler(i), 8)) for i, p in enumerate(PROMPTS[:3])]


def test_a_request_whose_sampler_fails_ends_alone_and_the_loop_goes_on():
    """A sampling error mid-answer (say, logits that overflowed) ends that request with the error;
    the batcher thread keeps serving the others and every later request."""

    class Breaks(TokenSampler):
        def __init__(self, after):
            super().__init__(512, temperature=0.0)
            self.after = after

        def choose(self, logits):
            self.after -= 1
            if self.after < 0:
                raise RuntimeError("probability tensor contains inf")
            return super().choose(logits)

    decoder = FastDecoder(_model())
    batcher = DecodeBatcher(decoder, max_batch=4)
    try:
        broken = batcher.submit(PROMPTS[0], Breaks(after=3), 20)
        fine = batcher.submit(PROMPTS[1], _sampler(0), 20)
        with pytest.raises(RuntimeError, match="inf"):
            list(broken)
        assert len(list(fine)) == 20
        later = batcher.submit(PROMPTS[2], _sampler(0), 5)
        assert len(list(later)) == 5
    finally:
        batcher.close()
