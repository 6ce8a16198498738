"""Importing a Llama, Mistral, Qwen2 or Qwen3 model: the imported MiniMind model computes what the
transformers original computes (fp32 logits within 1e-4, the engine's greedy tokens equal `generate`),
keeps its tokenizer, template, end tokens and license, and anything else is refused with a reason."""

import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

from minimind import MiniMindForCausalLM
from minimind.byte_level import token_table, tokenizer_style
from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.errors import CheckpointError, ExportError
from minimind.export import export, export_many
from minimind.export import applicable_formats
from minimind.export.llama import write_llama
from minimind.generation import chat, complete
from minimind.hub import import_folder, import_model
from minimind.inference import Engine, Sampler, guard_for
from minimind.sampling_params import SamplingParams

from hub_models import FAMILY_MODELS, build_family_model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module", params=list(FAMILY_MODELS))
def imported(request, tmp_path_factory):
    """(family name, transformers original, its tokenizer, source folder, imported folder)."""
    root = tmp_path_factory.mktemp(request.param)
    original, tokenizer = build_family_model(request.param, root / "source", shard=request.param == "qwen2")
    import_folder(root / "source", root / "imported")
    return request.param, original, tokenizer, root / "source", root / "imported"


def _ids(vocab: int):
    ids = torch.randint(3, vocab, (2, 40), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :7] = 0                                          # a left-padded row
    return ids, mask


def test_logits_equal_the_original_in_fp32(imported):
    name, original, tokenizer, _, folder = imported
    ours = load_model(folder)
    assert type(ours) is MiniMindForCausalLM and ours.config.family == name.split("-")[0]
    ids, mask = _ids(len(tokenizer))                          # 40 tokens: past Mistral's window of 24
    with torch.no_grad():
        assert (ours(ids).logits - original(ids).logits).abs().max().item() <= 1e-4
        a = ours(ids, attention_mask=mask).logits[1, 7:]
        b = original(ids, attention_mask=mask).logits[1, 7:]
    assert (a - b).abs().max().item() <= 1e-4


def test_bf16_logits_stay_close_to_fp32(imported):
    """bf16 rounds every product: reported, not equal (the benchmark records the figure)."""
    _, original, tokenizer, _, folder = imported
    ours = load_model(folder, dtype=torch.bfloat16)
    ids, _ = _ids(len(tokenizer))
    with torch.no_grad():
        diff = (ours(ids).logits.float() - original(ids).logits).abs().max().item()
    assert diff < 0.5 * original(ids).logits.abs().max().item()


def test_engine_greedy_tokens_equal_generate(imported):
    _, original, tokenizer, _, folder = imported
    ours = load_model(folder)
    engine = Engine(ours)
    for prompt in ([5, 9, 40, 77, 12], list(range(20, 50))):
        ids = torch.tensor([prompt])
        expected = original.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=30, min_new_tokens=30,
                                     do_sample=False, pad_token_id=0)[0, len(prompt):].tolist()
        assert list(engine.submit(prompt, Sampler(engine.vocab_size), 30, ())) == expected


def test_tokenizer_template_end_tokens_and_license_are_kept(imported):
    name, _, tokenizer, source, folder = imported
    kept = load_tokenizer_for(folder)
    for text in ("Hello world! 你好，世界。 1234", "ROMEO: But, soft! 🙂", "  two  spaces"):
        assert kept(text)["input_ids"] == tokenizer(text)["input_ids"]
        assert kept.decode(kept(text, add_special_tokens=False)["input_ids"]) == text
    messages = [{"role": "user", "content": "床前明月光"}, {"role": "assistant", "content": "疑是地上霜"}]
    assert kept.apply_chat_template(messages, tokenize=False) == tokenizer.apply_chat_template(messages, tokenize=False)
    assert kept.pad_token is not None                             # training pads batches
    generation = json.loads((source / "generation_config.json").read_text())
    assert json.loads((folder / "generation_config.json").read_text())["eos_token_id"] == generation["eos_token_id"]
    card = (folder / "README.md").read_text()
    record = json.loads((folder / "import.json").read_text())
    assert f"base_model: {source}" in card and f"License: {FAMILY_MODELS[name][4]}" in card
    assert record["license"] == FAMILY_MODELS[name][4] and record["family"] == name.split("-")[0]
    assert (folder / "LICENSE").read_text() == (source / "LICENSE").read_text()


def test_utf8_guard_knows_the_bytes_of_both_tokenizer_styles(imported):
    name, _, tokenizer, _, folder = imported
    kept = load_tokenizer_for(folder)
    style = tokenizer_style(kept)
    assert style == ("byte-fallback" if FAMILY_MODELS[name][3] == "sentencepiece" else "byte-level")
    table, special = token_table(kept)
    for i, piece in enumerate(table):                             # each token's bytes are what it decodes to
        if piece is not None and i not in special:
            try:
                text = piece.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if style == "byte-level":
                assert kept.decode([i]) == text
            else:
                assert kept.convert_tokens_to_ids(kept.convert_ids_to_tokens(i)) == i
    assert guard_for(kept, len(kept)) is not None
    ours = load_model(folder)
    for seed in range(4):                                          # sampled answers stay valid UTF-8
        params = SamplingParams(temperature=1.5, top_p=1.0, max_new_tokens=24, seed=seed)
        text = chat(ours, kept, [{"role": "user", "content": "你好"}], params).read()
        assert "\ufffd" not in text
        assert "\ufffd" not in complete(ours, kept, "床前", params).read()


def test_exports_write_the_familys_own_layout_back(imported, tmp_path):
    name, original, tokenizer, _, folder = imported
    ours = load_model(folder)
    write_llama(ours, load_tokenizer_for(folder), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == [type(original).__name__]
    back = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    assert type(back) is type(original)
    ids, mask = _ids(len(tokenizer))
    with torch.no_grad():
        assert (back(ids, attention_mask=mask).logits - original(ids, attention_mask=mask).logits)[:, 7:]\
            .abs().max().item() <= 1e-4


# ---------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def qwen_source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen-source") / "model"
    build_family_model("qwen2", folder)
    return folder


def _copy(source, tmp_path):
    target = tmp_path / "source"
    shutil.copytree(source, target)
    return target


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("changes, reason", [
    ({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe"}, "mixture-of-experts"),
    ({"architectures": ["GemmaForCausalLM"]}, "GemmaForCausalLM is a model of a family the studio does not run"),
    ({"auto_map": {"AutoModelForCausalLM": "modeling.MyModel"}}, "its own Python code"),
    ({"quantization_config": {"quant_method": "gptq"}}, "gptq-quantized"),
    ({"hidden_act": "gelu"}, "activation 'gelu'"),
    ({"use_sliding_window": True}, "per-layer sliding windows"),
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}}, "rotary scaling 'yarn'"),
    ({"model_type": "llama"}, "model_type 'llama'"),
    ({"hidden_size": 128}, "do not match its config.json"),
])
def test_unsupported_sources_are_refused_with_the_reason(qwen_source, tmp_path, changes, reason):
    source = _copy(qwen_source, tmp_path)
    _edit_config(source, **changes)
    with pytest.raises(CheckpointError, match=reason) as err:
        import_folder(source, tmp_path / "out")
    assert "The studio imports LlamaForCausalLM, MistralForCausalLM" in str(err.value)
    assert not (tmp_path / "out").exists()


def test_other_architectures_and_pickles_and_missing_tokenizers_are_refused(qwen_source, tmp_path):
    gpt2 = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)).save_pretrained(gpt2)
    with pytest.raises(CheckpointError, match="GPT2LMHeadModel is a model of a family"):
        import_folder(gpt2, tmp_path / "a")

    pickled = _copy(qwen_source, tmp_path)
    weights = load_file(str(pickled / "model.safetensors"))
    (pickled / "model.safetensors").unlink()
    torch.save(weights, pickled / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="pytorch_model.bin: pickled weights .* refused"):
        import_folder(pickled, tmp_path / "b")

    corrupt = tmp_path / "corrupt"
    shutil.copytree(qwen_source, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all")
    with pytest.raises(CheckpointError, match="model.safetensors is not a readable safetensors file"):
        import_folder(corrupt, tmp_path / "d")

    no_tokenizer = tmp_path / "no-tokenizer"
    shutil.copytree(qwen_source, no_tokenizer)
    (no_tokenizer / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no tokenizer.json"):
        import_folder(no_tokenizer, tmp_path / "c")

    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    with pytest.raises(CheckpointError, match="not empty"):
        import_folder(qwen_source, tmp_path / "taken")
    assert (tmp_path / "taken" / "x").read_text() == "mine"


def test_an_old_checkpoints_rotary_buffers_are_dropped(qwen_source, tmp_path):
    source = _copy(qwen_source, tmp_path)
    weights = load_file(str(source / "model.safetensors"))
    weights["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(8)
    save_file(weights, str(source / "model.safetensors"), metadata={"format": "pt"})
    import_folder(source, tmp_path / "out")
    assert not any("inv_freq" in k for k in load_file(str(tmp_path / "out" / "model.safetensors")))


def test_a_hub_id_offline_says_what_to_do(tmp_path, monkeypatch):
    from minimind.errors import HubError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="cannot be reached .* import its folder"):
        import_model("someone-unknown/not-cached-model", tmp_path / "out", max_gb=4)
    assert not (tmp_path / "out").exists()


def test_the_import_command(qwen_source, tmp_path):
    out = subprocess.run([sys.executable, "-m", "minimind", "import", str(qwen_source), "--out", str(tmp_path / "m")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Qwen2ForCausalLM" in out.stdout and "license: apache-2.0" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "minimind", "import", str(tmp_path / "nothing"), "--out",
                          str(tmp_path / "n")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "no config.json" in bad.stderr


def test_verified_exports_of_an_import(tmp_path):
    """Every format that applies is written and verified against the import (a GGUF among them), and a
    GGUF that llama.cpp would run otherwise (Mistral's sliding window) is refused with the reason."""
    build_family_model("llama-smollm", tmp_path / "llama-source")
    import_folder(tmp_path / "llama-source", tmp_path / "llama")
    texts = ["床前明月光，疑是地上霜。", "ROMEO: But, soft! what light through yonder window breaks?"] * 4
    results = export_many(tmp_path / "llama", ["llama", "gguf-q8_0", "int8"], tmp_path / "exports", eval_text=texts)
    assert all(r.verified for r in results), [(r.format, r.error) for r in results]

    build_family_model("mistral", tmp_path / "mistral-source")
    import_folder(tmp_path / "mistral-source", tmp_path / "mistral")
    with pytest.raises(ExportError, match=r"sliding attention window \(24 tokens\) shorter than the context"):
        export(tmp_path / "mistral", "gguf-f16", tmp_path / "mistral-gguf")
    formats = applicable_formats(tmp_path / "mistral")
    assert "gguf-f16" not in formats and "llama" in formats
