"""The lean decode path gives the tokens `model.generate` gives, and the sampler behaves."""

import json

import pytest
import torch
from transformers import LlamaForCausalLM

from minimind import MiniMindForCausalLM
from minimind.fast_decode import (FastDecoder, ModelDecoder, TokenSampler, decoder_for, stream_tokens,
                                  unsupported_reason)

from helpers import tiny_config

PROMPTS = [[7, 300, 41, 99, 5], [250] * 3 + list(range(40, 70)), [11]]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """On a 2-core machine shared with other jobs, a descheduled OpenMP worker stalls every op for
    a scheduler tick; one thread keeps these small-model tests fast (results do not depend on it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(seed=0, **overrides):
    torch.manual_seed(seed)
    model = MiniMindForCausalLM(tiny_config(**overrides)).eval()
    with torch.no_grad():  # non-trivial norms, so their placement is tested too
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


def _generate(model, prompt, n):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def _fast(decoder, prompt, n):
    return list(stream_tokens(decoder, prompt, TokenSampler(decoder.vocab_size), n))


@pytest.mark.parametrize("overrides", [
    {},
    {"tie_word_embeddings": False},
    {"num_key_value_heads": 4},
    {"attention_impl": "eager"},
    {"rope_scaling_type": "linear", "rope_scaling_factor": 2.0},
    {"rope_scaling_type": "ntk", "rope_scaling_factor": 4.0},
    {"use_moe": True, "num_experts": 4, "num_experts_per_tok": 2},
])
def test_greedy_tokens_equal_generate(overrides):
    model = _model(**overrides)
    decoder = decoder_for(model)
    assert isinstance(decoder, FastDecoder)
    for prompt in PROMPTS:
        assert _fast(decoder, prompt, 40) == _generate(model, prompt, 40)


def test_logits_match_a_full_forward_step_by_step():
    model = _model()
    decoder = FastDecoder(model)
    ids = list(range(20, 60))
    cache = decoder.new_cache(64)
    got = [decoder.forward(torch.tensor(ids[:10]), cache)]
    got += [decoder.forward(torch.tensor(ids[i:i + 1]), cache) for i in range(10, 30)]
    got.append(decoder.forward(torch.tensor(ids[30:40]), cache))  # a chunk after cached tokens
    with torch.no_grad():
        full = model(torch.tensor([ids])).logits[0]
    expected = torch.stack([full[9]] + [full[i] for i in range(10, 30)] + [full[39]])
    torch.testing.assert_close(torch.stack(got), expected, atol=1e-4, rtol=1e-4)
    assert cache.length == 40


def test_stock_llama_with_the_same_weights_decodes_the_same(tmp_path):
    model = _model(tie_word_embeddings=False)
    model.save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_llama_dict()))
    llama = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    decoder = FastDecoder(llama)
    for prompt in PROMPTS[:2]:
        assert _fast(decoder, prompt, 30) == _generate(llama, prompt, 30) == _generate(model, prompt, 30)


def test_unmerged_lora_falls_back_to_the_models_forward():
    from peft import LoraConfig, get_peft_model

    model = _model()
    peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                  init_lora_weights=False)).eval()
    assert "LoRA" in unsupported_reason(peft_model)
    decoder = decoder_for(peft_model)
    assert isinstance(decoder, ModelDecoder)
    assert _fast(decoder, PROMPTS[0], 20) == _generate(peft_model, PROMPTS[0], 20)
    merged = peft_model.merge_and_unload()
    assert _fast(FastDecoder(merged), PROMPTS[0], 20) == _fast(decoder, PROMPTS[0], 20)


def test_decoder_is_cached_and_rebuilt_after_weights_change():
    model = _model()
    first = decoder_for(model)
    assert decoder_for(model) is first
    before = _fast(first, PROMPTS[1], 10)
    with torch.no_grad():
        model.model.norm.weight.neg_()  # logits flip sign: another argmax
    assert not first.is_current()
    second = decoder_for(model)
    assert second is not first
    assert _fast(second, PROMPTS[1], 10) == _generate(model, PROMPTS[1], 10) != before


@pytest.mark.parametrize("weights,tolerance", [("bf16", 0.05), ("int8", 0.08)])
def test_smaller_weights_stay_close(weights, tolerance):
    model = _model()
    exact, small = FastDecoder(model), FastDecoder(model, weights=weights)
    ids = torch.tensor(PROMPTS[1])
    cache_a, cache_b = exact.new_cache(40), small.new_cache(40)
    a = torch.stack([exact.forward(ids, cache_a)] + [exact.step(t, cache_a) for t in (5, 9, 300)])
    b = torch.stack([small.forward(ids, cache_b)] + [small.step(t, cache_b) for t in (5, 9, 300)])
    assert (a - b).abs().max() < tolerance * a.abs().max()
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() >= 0.75
    layer = small.layers[0].qkv
    assert (layer.q.dtype if weights == "int8" else layer.dtype) == {"bf16": torch.bfloat16, "int8": torch.int8}[weights]
    with pytest.raises(ValueError, match="weights must be one of"):
        FastDecoder(model, weights="fp8")


def test_cache_capacity_is_enforced():
    decoder = FastDecoder(_model())
    cache = decoder.new_cache(4)
    with pytest.raises(ValueError, match="KV cache full"):
        decoder.forward(torch.arange(5, 10), cache)


def test_stream_stops_after_a_stop_token_and_at_max_tokens():
    decoder = FastDecoder(_model())
    free = _fast(decoder, PROMPTS[0], 12)
    stop = free[5]
    stopped = list(stream_tokens(decoder, PROMPTS[0], TokenSampler(decoder.vocab_size), 12, [stop]))
    assert stopped == free[:free.index(stop) + 1]
    assert list(stream_tokens(decoder, PROMPTS[0], TokenSampler(decoder.vocab_size), 0)) == []


def _logits(seed=0):
    return torch.randn(512, generator=torch.Generator().manual_seed(seed)) * 3


def test_seeded_sampling_is_reproducible_and_seeds_differ():
    decoder = FastDecoder(_model())
    run = lambda seed: list(stream_tokens(decoder, PROMPTS[0], TokenSampler(  # noqa: E731
        512, temperature=1.0, top_k=50, top_p=0.95, repetition_penalty=1.2, seed=seed), 30))
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_sampler_filters():
    logits = _logits()
    best = int(logits.argmax())
    assert TokenSampler(512, temperature=1.0, top_k=1, seed=0).choose(logits) == best
    assert TokenSampler(512, temperature=1.0, top_p=1e-6, seed=0).choose(logits) == best
    top3 = set(torch.topk(logits, 3).indices.tolist())
    sampler = TokenSampler(512, temperature=2.0, top_k=3, seed=0)
    draws = {sampler.choose(logits) for _ in range(200)}
    assert draws <= top3 and len(draws) > 1
    # top_p keeps the smallest set whose probability reaches p
    probs = torch.softmax(logits, -1)
    ordered = torch.sort(probs, descending=True)
    n = int((ordered.values.cumsum(0) < 0.5).sum()) + 1
    nucleus = set(ordered.indices[:n].tolist())
    sampler = TokenSampler(512, temperature=1.0, top_p=0.5, seed=1)
    assert {sampler.choose(logits) for _ in range(300)} <= nucleus


def test_repetition_penalty_pushes_seen_tokens_down():
    logits = _logits()
    best = int(logits.argmax())
    sampler = TokenSampler(512, repetition_penalty=1e9)
    sampler.observe([best])
    assert sampler.choose(logits) != best
    plain = TokenSampler(512)
    assert plain.choose(logits) == best
