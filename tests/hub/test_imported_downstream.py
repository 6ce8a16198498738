"""An imported model goes everywhere a model born here goes: full SFT, LoRA, QLoRA, DPO, GRPO and
classify start from it (its own tokenizer, a template without generation markers, its end tokens),
chat and /v1 serve it, and its runs' checkpoints stay in its family's layout."""

import json

import pytest
import torch
from builders import write_labelled_corpus, write_preference_corpus, write_prompts
from fastapi.testclient import TestClient
from training_helpers import make_config, write_chat_corpus

from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.data.tokens import render
from minimind.export.llama import write_llama
from minimind.generation import chat
from minimind.sampling_params import SamplingParams
from minimind.serving import ModelRegistry, create_app
from minimind.training import train
from minimind.training.checkpoint import latest_checkpoint

from hub_models import imported_family

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    """A tiny imported Qwen2 (byte-level, ChatML template without generation markers, tied, biases)."""
    return imported_family("qwen2", tmp_path_factory.mktemp("qwen"))


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """A tiny imported Mistral (sentencepiece byte-fallback, [INST] template, untied, sliding window)."""
    return imported_family("mistral", tmp_path_factory.mktemp("mistral"))


@pytest.mark.parametrize("which", ["qwen", "mistral"])
def test_a_template_without_generation_markers_masks_the_assistants_tokens(which, request):
    tokenizer = load_tokenizer_for(request.getfixturevalue(which))
    messages = [{"role": "user", "content": "寫一首詩"}, {"role": "assistant", "content": "床前明月光"},
                {"role": "user", "content": "再寫一首"}, {"role": "assistant", "content": "春眠不覺曉"}]
    (ids,), (mask,) = render(tokenizer, [messages])
    trained = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    end = "<|im_end|>" if which == "qwen" else "</s>"
    assert trained.replace(" ", "") == f"床前明月光{end}春眠不覺曉{end}"


@pytest.mark.parametrize("mode", ["sft", "lora", "qlora"])
def test_fine_tunes_start_from_an_import(qwen, tmp_path, mode):
    corpus = write_chat_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], mode=mode, model__init_from=str(qwen), max_steps=4, data__seq_len=48,
                      optim__lr=1e-3)
    assert train(cfg)["state"] == "finished"
    checkpoint = latest_checkpoint(tmp_path / "run" / "checkpoints")
    model = load_model(checkpoint, merge=True)
    assert model.config.family == "qwen2" and model.config.attention_bias
    if mode == "sft":  # a full model's checkpoint keeps the import's end tokens and exports as Qwen2 again
        generation = json.loads((checkpoint / "generation_config.json").read_text())
        im_end = load_tokenizer_for(qwen).convert_tokens_to_ids("<|im_end|>")
        assert im_end in (generation["eos_token_id"] if isinstance(generation["eos_token_id"], list)
                          else [generation["eos_token_id"]])
        write_llama(model, load_tokenizer_for(checkpoint), tmp_path / "export")
        assert json.loads((tmp_path / "export" / "config.json").read_text())["model_type"] == "qwen2"


def test_dpo_grpo_and_classify_start_from_an_import(mistral, tmp_path):
    pairs = write_preference_corpus(tmp_path)
    dpo = make_config(tmp_path / "dpo", [pairs], mode="dpo", adapter="lora", model__init_from=str(mistral),
                      data__seq_len=96, max_steps=3, optim__lr=1e-3)
    assert train(dpo)["state"] == "finished"
    prompts = write_prompts(tmp_path)
    grpo = make_config(tmp_path / "grpo", [prompts], mode="grpo", adapter="lora", model__init_from=str(mistral),
                       data__seq_len=64, max_steps=2, batch_size=2, grpo__group_size=4, grpo__max_new_tokens=8,
                       grpo__rewards=[{"name": "contains", "text": "月"}], grpo__beta=0.0)
    assert train(grpo)["state"] == "finished"
    labelled = write_labelled_corpus(tmp_path)
    classify = make_config(tmp_path / "cls", [labelled], task="classify", mode="lora",
                           model__init_from=str(mistral), data__seq_len=48, max_steps=3)
    assert train(classify)["state"] == "finished"


def test_chat_and_the_api_serve_an_import(mistral):
    model, tokenizer = load_model(mistral), load_tokenizer_for(mistral)
    generation = chat(model, tokenizer, [{"role": "user", "content": "你好"}],
                      SamplingParams(temperature=0.0, max_new_tokens=12))
    text = generation.read()
    assert generation.completion_tokens >= 1 and "\ufffd" not in text
    registry = ModelRegistry()
    registry.add_folder(mistral, name="tiny-mistral")
    client = TestClient(create_app(registry))
    answer = client.post("/v1/chat/completions", json={
        "model": "tiny-mistral", "messages": [{"role": "user", "content": "你好"}], "max_tokens": 12,
        "temperature": 0})
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == text
    with torch.no_grad():
        assert torch.isfinite(model(torch.tensor([[1, 5, 9]])).logits).all()
