"""MiniMindForCausalLM: shapes, loss, KV cache, padding, MoE, save/load, generate."""

import threading

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, DynamicCache, TextIteratorStreamer

from minimind import MiniMindConfig, MiniMindForCausalLM
from minimind.config import PRESETS

from helpers import tiny_config


def _ids(b=2, t=24, vocab=512, seed=1):
    return torch.randint(5, vocab, (b, t), generator=torch.Generator().manual_seed(seed))


def test_shapes_and_parameter_names(tiny_model):
    out = tiny_model(_ids())
    assert out.logits.shape == (2, 24, 512)
    names = dict(tiny_model.named_parameters())
    for name in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                 "model.layers.1.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
                 "model.norm.weight"):
        assert name in names
    assert tiny_model.lm_head.weight is tiny_model.model.embed_tokens.weight  # tied by default
    assert not any(n.endswith(".bias") for n in names)


@pytest.mark.parametrize("name,low,high", [("nano", 3e6, 6e6), ("small", 25e6, 27e6),
                                           ("base", 64e6, 100e6), ("small-moe", 40e6, 90e6)])
def test_preset_sizes(name, low, high):
    with torch.device("meta"):
        model = MiniMindForCausalLM(MiniMindConfig.from_preset(name))
    assert low <= sum(p.numel() for p in model.parameters()) <= high


def test_unknown_preset_and_bad_config_are_clear():
    with pytest.raises(ValueError, match="unknown preset"):
        MiniMindConfig.from_preset("huge")
    with pytest.raises(ValueError, match="attention_impl"):
        tiny_config(attention_impl="flash9")
    with pytest.raises(ValueError, match="multiple"):
        tiny_config(num_attention_heads=4, num_key_value_heads=3)


def test_loss_is_shifted_cross_entropy_ignoring_minus_100(tiny_model):
    ids = _ids()
    labels = ids.clone()
    labels[:, :10] = -100
    out = tiny_model(ids, labels=labels)
    logits = out.logits[:, :-1].reshape(-1, 512)
    target = labels[:, 1:].reshape(-1)
    keep = target != -100
    expected = F.cross_entropy(logits[keep], target[keep])
    torch.testing.assert_close(out.loss, expected)
    # The same figure without any ignore_index: the mean NLL of the kept next tokens alone. A -100
    # read as a token (clamped to 0, wrapped to vocab - 100, ...) or a mean over every position fails.
    nll = -out.logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # (2, 23)
    torch.testing.assert_close(out.loss, nll[:, 9:].mean())
    # Real token ids in those positions do count: the mask, not the data, is what removed them.
    unmasked = labels.clone()
    unmasked[:, :10] = (ids[:, :10] + 1) % 512
    assert abs(tiny_model(ids, labels=unmasked).loss.item() - out.loss.item()) > 1e-3
    # Masking one more label removes exactly that token from the mean.
    labels2 = labels.clone()
    labels2[:, 16] = -100
    kept = torch.ones_like(nll, dtype=torch.bool)
    kept[:, :9] = False
    kept[:, 15] = False
    torch.testing.assert_close(tiny_model(ids, labels=labels2).loss, nll[kept].mean())
    assert abs(nll[kept].mean().item() - out.loss.item()) > 1e-6


@pytest.mark.parametrize("impl", ["sdpa", "eager", "blocked"])
def test_cached_decode_equals_full_forward(impl):
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(attention_impl=impl, attention_block_size=8)).eval()
    ids = _ids(t=20)
    with torch.no_grad():
        full = model(ids).logits
        cache = DynamicCache(config=model.config)
        pieces = [model(ids[:, :12], cache=cache, use_cache=True).logits]
        for i in range(12, 20):
            pieces.append(model(ids[:, i:i + 1], cache=cache, use_cache=True).logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("impl", ["sdpa", "eager", "blocked"])
def test_left_padding_gives_the_unpadded_logits(impl):
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(attention_impl=impl, attention_block_size=4)).eval()
    short = _ids(b=1, t=10)
    padded = torch.cat([torch.zeros(1, 6, dtype=torch.long), short], dim=1)
    mask = torch.cat([torch.zeros(1, 6, dtype=torch.long), torch.ones(1, 10, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a = model(short).logits
        b = model(padded, attention_mask=mask).logits[:, 6:]
    torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def test_all_attention_impls_give_the_same_model_output():
    torch.manual_seed(0)
    ref = MiniMindForCausalLM(tiny_config()).eval()
    ids = _ids(t=33)
    mask = torch.ones_like(ids)
    mask[1, :7] = 0
    with torch.no_grad():
        expected = ref(ids, attention_mask=mask).logits
        for impl in ("eager", "blocked"):
            ref.config.attention_impl = impl
            got = ref(ids, attention_mask=mask).logits
            torch.testing.assert_close(got[:, 7:], expected[:, 7:], atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=1e-4)


def test_untied_embeddings_and_rope_scaling_build():
    model = MiniMindForCausalLM(tiny_config(tie_word_embeddings=False, rope_scaling_type="linear",
                                            rope_scaling_factor=2.0))
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    assert torch.isfinite(model(_ids()).logits).all()


def test_moe_routes_trains_and_reports_balance_loss():
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(use_moe=True, num_experts=4, num_experts_per_tok=2))
    ids = _ids()
    out = model(ids, labels=ids)
    assert out.aux_loss is not None and out.aux_loss.item() >= 2 * 0.99  # ≥ 1 per layer, 2 layers
    out.loss.backward()
    for e in range(4):
        grad = model.model.layers[0].mlp.experts[e].up_proj.weight.grad
        assert grad is not None and grad.abs().sum() > 0  # every expert received tokens
    assert model.model.layers[0].mlp.gate.weight.grad.abs().sum() > 0


def test_gradient_checkpointing_gives_the_same_gradients():
    ids = _ids()
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = MiniMindForCausalLM(tiny_config()).train()
        if checkpointing:
            model.activation_checkpointing_enable()
            assert all(layer.gradient_checkpointing for layer in model.model.layers)
        model(ids, labels=ids).loss.backward()
        grads.append(model.model.layers[0].self_attn.q_proj.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_save_and_load_round_trip_through_auto_classes(tmp_path, tiny_model):
    tiny_model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is MiniMindForCausalLM
    ids = _ids()
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, tiny_model(ids).logits)


def _prompt(tokenizer, text="床前明月光"):
    return tokenizer(text, return_tensors="pt")


def test_generate_greedy_matches_manual_argmax(tiny_model, tokenizer):
    inputs = _prompt(tokenizer)
    out = tiny_model.generate(**inputs, max_new_tokens=8, do_sample=False, pad_token_id=0)
    ids = inputs["input_ids"]
    with torch.no_grad():
        for _ in range(8):
            nxt = tiny_model(ids).logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    assert out.tolist() == ids.tolist()


def test_generate_sampling_modes_are_seeded_and_valid(tiny_model, tokenizer):
    inputs = _prompt(tokenizer)
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        runs.append(tiny_model.generate(**inputs, max_new_tokens=10, do_sample=True, temperature=0.8,
                                        top_k=20, top_p=0.9, pad_token_id=0))
    assert runs[0].tolist() == runs[1].tolist()
    assert runs[0].shape[1] == inputs["input_ids"].shape[1] + 10


def test_generate_repetition_penalty_changes_output(tiny_model, tokenizer):
    inputs = _prompt(tokenizer)
    plain = tiny_model.generate(**inputs, max_new_tokens=20, do_sample=False, pad_token_id=0)
    penalised = tiny_model.generate(**inputs, max_new_tokens=20, do_sample=False,
                                    repetition_penalty=5.0, pad_token_id=0)
    new = penalised[0, inputs["input_ids"].shape[1]:].tolist()
    assert len(set(new)) >= len(set(plain[0, inputs["input_ids"].shape[1]:].tolist()))
    assert plain.tolist() != penalised.tolist()


def test_generate_beam_search_and_batched_left_padding(tiny_model, tokenizer):
    beams = tiny_model.generate(**_prompt(tokenizer), max_new_tokens=6, num_beams=3, do_sample=False,
                                pad_token_id=0)
    assert beams.shape[0] == 1
    batch = tokenizer(["床前明月光", "To be, or not to be"], return_tensors="pt", padding=True)
    out = tiny_model.generate(**batch, max_new_tokens=5, do_sample=False, pad_token_id=0)
    single = tiny_model.generate(**_prompt(tokenizer, "床前明月光"), max_new_tokens=5, do_sample=False,
                                 pad_token_id=0)
    assert out[0, -5:].tolist() == single[0, -5:].tolist()


def test_text_iterator_streamer_streams_the_generated_text(tiny_model, tokenizer):
    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True)
    inputs = _prompt(tokenizer)
    kwargs = dict(**inputs, max_new_tokens=12, do_sample=False, pad_token_id=0, streamer=streamer)
    thread = threading.Thread(target=tiny_model.generate, kwargs=kwargs)
    thread.start()
    streamed = "".join(streamer)
    thread.join()
    full = tiny_model.generate(**inputs, max_new_tokens=12, do_sample=False, pad_token_id=0)
    expected = tokenizer.decode(full[0, inputs["input_ids"].shape[1]:])
    assert streamed == expected


def test_presets_are_the_documented_ones_with_their_sizes():
    """The README's preset table names every preset and its parameter count (vocab 6400)."""
    import re

    from minimind.training.sizing import parameter_count

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("| preset | shape | parameters |")[1].split("\n\n")[0]
    table = dict(re.findall(r"^\| `([a-z-]+)` \|.*\| ([\d.]+)M", section, flags=re.M))
    assert set(PRESETS) == set(table) == {"pico", "micro", "nano", "mini", "small", "base", "small-moe"}
    for name, millions in table.items():
        assert round(parameter_count(name, 6400) / 1e6, 1) == float(millions), name
