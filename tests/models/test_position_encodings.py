"""Position encodings (rope, alibi, sinusoidal, learned, none): each kernel, the KV cache, the
engine, save/load, training and the export formats that can or cannot carry them."""

import math

import pytest
import torch

from minimind import MiniMindForCausalLM
from minimind.attention import ATTENTION_FUNCTIONS, alibi_bias, alibi_slopes, eager_attention
from minimind.config import POSITION_ENCODINGS, MiniMindConfig
from minimind.errors import ExportError
from minimind.export import export, export_many
from minimind.inference.engine import engine_for
from minimind.inference.forward import KVCache, forward
from minimind.inference.sampler import Sampler
from minimind.inference.weights import Weights
from minimind.tokenizer import save_tokenizer
from helpers import tiny_config

KERNELS = tuple(ATTENTION_FUNCTIONS)


def _model(encoding: str, impl: str = "sdpa", **overrides) -> MiniMindForCausalLM:
    torch.manual_seed(0)
    # 6 query heads over 2 kv heads: ALiBi's non-power-of-two slope rule and grouped heads at once
    config = tiny_config(position_encoding=encoding, attention_impl=impl, attention_block_size=8,
                         num_attention_heads=6, num_key_value_heads=2, hidden_size=96, max_position_embeddings=64,
                         **overrides)
    model = MiniMindForCausalLM(config).eval()
    if encoding == "learned":  # trained-looking positions, not the near-zero init, so a wrong row shows
        with torch.no_grad():
            model.model.embed_positions.weight.normal_(0, 0.5)
    return model


def test_alibi_slopes_follow_the_paper():
    assert alibi_slopes(8).tolist() == [2.0 ** -k for k in range(1, 9)]
    assert alibi_slopes(4).tolist() == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8]
    # 6 heads: the 4-head slopes, then every other slope of 8 heads
    assert alibi_slopes(6).tolist() == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]


def test_alibi_bias_and_attention_match_a_hand_computed_case():
    slopes = torch.tensor([0.5, 0.25])
    bias = alibi_bias(slopes, torch.arange(2, 3), torch.arange(3))       # the query at position 2
    assert bias.tolist() == [[[-1.0, -0.5, 0.0]], [[-0.5, -0.25, 0.0]]]
    # one head, d = 1, q = 0: the scores are the bias alone, so the weights are softmax(bias)
    q = torch.zeros(1, 1, 3, 1)
    k = torch.randn(1, 1, 3, 1)
    v = torch.tensor([1.0, 2.0, 4.0]).view(1, 1, 3, 1)
    out = eager_attention(q, k, v, alibi=torch.tensor([0.5]))[0, 0, :, 0]
    w = [math.exp(-1.0), math.exp(-0.5), 1.0]
    expected_last = (w[0] * 1 + w[1] * 2 + w[2] * 4) / sum(w)
    expected_middle = (math.exp(-0.5) * 1 + 2) / (math.exp(-0.5) + 1)
    assert out.tolist() == pytest.approx([1.0, expected_middle, expected_last], abs=1e-6)


@pytest.mark.parametrize("impl", ["sdpa", "blocked"])
def test_alibi_kernels_match_eager_forward_and_backward_with_padding(impl):
    torch.manual_seed(0)
    q = torch.randn(2, 6, 20, 16, requires_grad=True)
    k = torch.randn(2, 2, 20, 16, requires_grad=True)
    v = torch.randn(2, 2, 20, 16, requires_grad=True)
    key_valid = torch.ones(2, 20, dtype=torch.bool)
    key_valid[1, :5] = False                                             # a left-padded row
    slopes = alibi_slopes(6)
    grads = []
    for fn in (eager_attention, ATTENTION_FUNCTIONS[impl]):
        out = fn(q, k, v, key_valid=key_valid, block_size=8, alibi=slopes)
        (g_out,) = torch.autograd.grad((out * torch.linspace(-1, 1, 16)).sum(), [q], retain_graph=True)
        grads.append((out.detach(), g_out, *torch.autograd.grad(out.pow(2).sum(), [k, v])))
    for ours, reference in zip(grads[1], grads[0]):
        assert torch.allclose(ours, reference, atol=1e-5), (ours - reference).abs().max()


@pytest.mark.parametrize("impl", KERNELS)
@pytest.mark.parametrize("encoding", POSITION_ENCODINGS)
def test_decode_with_cache_equals_the_full_forward(encoding, impl):
    model = _model(encoding, impl)
    ids = torch.randint(3, 512, (2, 40))
    with torch.no_grad():
        full = model(ids).logits
        out = model(ids[:, :25], use_cache=True)
        pieces, cache = [out.logits], out.cache
        for j in range(25, 40):
            out = model(ids[:, j:j + 1], cache=cache, use_cache=True)
            pieces.append(out.logits)
            cache = out.cache
    assert (torch.cat(pieces, dim=1) - full).abs().max() <= 1e-5


@pytest.mark.parametrize("encoding", POSITION_ENCODINGS)
def test_the_engine_decodes_like_the_full_forward(encoding):
    """Prefill of different lengths, then batched one-token steps over caches of different lengths."""
    model = _model(encoding)
    ids = torch.randint(3, 512, (2, 40))
    with torch.no_grad():
        full = model(ids).logits
    w = Weights.of(model)
    caches = [KVCache(w, 64), KVCache(w, 64)]
    first = forward(w, ids[:1, :30], caches[:1])[0]
    second = forward(w, ids[1:, :22], caches[1:])[0]
    errors = [(first - full[0, 29]).abs().max(), (second - full[1, 21]).abs().max()]
    for step in range(4):
        rows = forward(w, torch.stack([ids[0, 30 + step:31 + step], ids[1, 22 + step:23 + step]]), caches)
        errors += [(rows[0] - full[0, 30 + step]).abs().max(), (rows[1] - full[1, 22 + step]).abs().max()]
    chunk = forward(w, ids[:1, 34:38], caches[:1], all_logits=True)[0]   # several tokens after a cache
    errors.append((chunk - full[0, 34:38]).abs().max())
    assert max(errors) <= 1e-5


@pytest.mark.parametrize("encoding", POSITION_ENCODINGS)
def test_a_left_padded_row_reads_like_the_row_alone(encoding):
    model = _model(encoding)
    ids = torch.randint(3, 512, (1, 12))
    padded = torch.cat([torch.zeros(1, 4, dtype=torch.long), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 12, dtype=torch.long)], dim=1)
    with torch.no_grad():
        alone = model(ids).logits
        together = model(padded, attention_mask=mask).logits[:, 4:]
    assert (alone - together).abs().max() <= 1e-5


def test_encodings_really_differ():
    """Each encoding changes what the model computes (a wiring slip that ignored the option would pass
    every equality test above)."""
    ids = torch.randint(3, 512, (1, 16))
    with torch.no_grad():
        logits = {e: _model(e)(ids).logits for e in POSITION_ENCODINGS}
    for a in POSITION_ENCODINGS:
        for b in POSITION_ENCODINGS:
            if a < b:
                assert (logits[a] - logits[b]).abs().max() > 1e-3, (a, b)


def test_one_nope_layer_reads_its_past_as_a_set():
    """Without positions, one attention layer reads its past as a set: swapping two earlier tokens
    leaves the last token's output unchanged (deeper layers learn order only through the causal
    mask, which gives each earlier position a different prefix). With rotary positions it changes."""
    model = _model("none", num_hidden_layers=1)
    ids = torch.randint(3, 512, (1, 10))
    swapped = ids.clone()
    swapped[0, [2, 5]] = ids[0, [5, 2]]
    with torch.no_grad():
        a, b = model(ids).logits, model(swapped).logits
    assert (a[0, -1] - b[0, -1]).abs().max() <= 1e-5
    rope = _model("rope", num_hidden_layers=1)
    with torch.no_grad():
        assert (rope(ids).logits[0, -1] - rope(swapped).logits[0, -1]).abs().max() > 1e-4


def test_learned_positions_refuse_to_read_past_their_table():
    model = _model("learned")
    with pytest.raises(ValueError, match="past this model's 64 learned positions"):
        model(torch.randint(3, 512, (1, 65)))


def test_config_checks_the_encoding():
    with pytest.raises(ValueError, match="position_encoding must be one of"):
        MiniMindConfig(position_encoding="wavelet")
    with pytest.raises(ValueError, match="rope_scaling_type only applies"):
        MiniMindConfig(position_encoding="alibi", rope_scaling_type="ntk", rope_scaling_factor=2.0)
    assert MiniMindConfig().position_encoding == "rope"


@pytest.mark.parametrize("encoding", POSITION_ENCODINGS)
def test_a_few_steps_lower_the_loss(encoding):
    model = _model(encoding).train()
    torch.manual_seed(1)
    batch = torch.randint(3, 512, (4, 32))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(12):
        loss = model(batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5


@pytest.mark.parametrize("encoding", POSITION_ENCODINGS)
def test_save_and_load_give_the_same_logits(encoding, tmp_path, tokenizer):
    from minimind.checkpoint import load_model

    model = _model(encoding)
    model.save_pretrained(tmp_path)
    save_tokenizer(tokenizer, tmp_path)
    loaded = load_model(tmp_path)
    assert loaded.config.position_encoding == encoding
    ids = torch.randint(3, 512, (1, 20))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, loaded(ids).logits)
    # the engine (what chat and the API run) picks the greedy tokens transformers' generate picks
    prompt = ids[0, :8].tolist()
    ours = list(engine_for(loaded).submit(prompt, Sampler(512), 12))
    theirs = loaded.generate(ids[:, :8], max_new_tokens=12, do_sample=False, eos_token_id=None)[0, 8:].tolist()
    assert ours == theirs


@pytest.fixture(scope="module")
def alibi_dir(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("alibi")
    _model("alibi").save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


@pytest.mark.parametrize("fmt", ["llama", "gguf-f16", "gguf-q8_0"])
def test_llama_formats_refuse_non_rotary_models(alibi_dir, tmp_path, fmt):
    with pytest.raises(ExportError, match=r"models with 'alibi' positions are not supported for this format "
                                          r"\(.*\): it is the dense rotary Llama architecture; export as 'hf'"):
        export(alibi_dir, fmt, tmp_path / fmt)
    assert list(tmp_path.iterdir()) == []


def test_hf_keeps_a_non_rotary_model_and_int8_stays_minimind(alibi_dir, tmp_path):
    results = {r.format: r for r in export_many(alibi_dir, ["hf", "int8"], tmp_path,
                                                eval_text=["the cat sat on the mat. " * 8])}
    assert results["hf"].verified and results["hf"].greedy_match == 32
    assert results["int8"].verified, results["int8"].error
    import json

    assert json.loads((tmp_path / "int8" / "config.json").read_text())["position_encoding"] == "alibi"
