"""The LSTM language model family (minimind/lstm.py): packed documents, padding, the cache,
training through the real loop, save/load, the inference engine, LoRA and export refusals."""

import json

import pytest
import torch

from minimind import MiniMindLSTMConfig, MiniMindLSTMForCausalLM
from minimind.checkpoint import load_model
from minimind.errors import ConfigError, ExportError
from minimind.export import FORMATS, export
from minimind.generation import chat, complete
from minimind.sampling_params import SamplingParams
from minimind.inference import Engine, Sampler
from minimind.lstm import LSTM_PRESETS, LSTMState
from minimind.tokenizer import save_tokenizer
from minimind.training import RunDir, TrainConfig, train
from minimind.training.modes import add_lora
from minimind.evaluate import evaluate_documents
from minimind.tokenizer import load_tokenizer
from minimind.training.distributed import DistInfo
from minimind.training.setup import choose_new_model_size
from minimind.training.sizing import parameter_count, pretrain_lr
from training_helpers import (assert_same_losses, losses, make_config, one_and_two_processes, write_chat_corpus,
                              write_text_corpus)

pytestmark = pytest.mark.usefixtures("one_thread")

EOS = 2
DOCS = [[5, 6, 7, 8, EOS], [9, 10, EOS], [11, 12, 13, 14, 15, 16, EOS], [17, 18, 19]]
TINY_LSTM = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2}


def _model(use_attention: bool, vocab_size: int = 64, seed: int = 0, **overrides) -> MiniMindLSTMForCausalLM:
    torch.manual_seed(seed)
    config = MiniMindLSTMConfig(vocab_size=vocab_size, eos_token_id=EOS, use_attention=use_attention,
                                dropout=0.1, **{**TINY_LSTM, **overrides})
    return MiniMindLSTMForCausalLM(config).eval()


def _alone(model, docs) -> torch.Tensor:
    return torch.cat([model(torch.tensor([d])).logits[0] for d in docs])


@pytest.mark.parametrize("use_attention", [False, True])
def test_a_packed_row_equals_each_document_alone(use_attention):
    model = _model(use_attention)
    row = torch.tensor([sum(DOCS, [])])
    with torch.no_grad():
        assert torch.allclose(model(row).logits[0], _alone(model, DOCS), atol=1e-5, rtol=0)
        # the same in a batch beside a row without any boundary (the fused path is not taken)
        batch = torch.tensor([sum(DOCS, []), list(range(20, 20 + row.shape[1]))])
        assert torch.allclose(model(batch).logits[0], _alone(model, DOCS), atol=1e-5, rtol=0)


@pytest.mark.parametrize("use_attention", [False, True])
def test_right_and_left_padding_do_not_change_the_real_positions(use_attention):
    model = _model(use_attention)
    short = DOCS[2]
    width = 12
    ids = torch.tensor([short + [0] * (width - len(short)), [0] * (width - len(short)) + short])
    mask = torch.tensor([[1] * len(short) + [0] * (width - len(short)), [0] * (width - len(short)) + [1] * len(short)])
    with torch.no_grad():
        out = model(ids, attention_mask=mask).logits
        alone = model(torch.tensor([short])).logits[0]
    assert torch.allclose(out[0, :len(short)], alone, atol=1e-5, rtol=0)
    assert torch.allclose(out[1, -len(short):], alone, atol=1e-5, rtol=0)
    with torch.no_grad():  # a row of padding only (and a batch of nothing else) changes nothing
        both = model(ids, attention_mask=torch.stack([mask[0], torch.zeros_like(mask[1])])).logits
        assert torch.allclose(both[0, :len(short)], alone, atol=1e-5, rtol=0)
        assert model(ids, attention_mask=torch.zeros_like(mask)).logits.shape == (2, width, model.config.vocab_size)


@pytest.mark.parametrize("use_attention", [False, True])
def test_the_cache_continues_exactly_in_chunks_and_in_single_steps(use_attention):
    model = _model(use_attention)
    row = torch.tensor([sum(DOCS, [])])
    with torch.no_grad():
        full = model(row).logits[0]
        first = model(row[:, :4], use_cache=True)  # cut mid-document ...
        second = model(row[:, 4:], cache=first.cache, use_cache=True)  # ... right before the first EOS
        assert isinstance(first.cache, LSTMState) and second.cache.length == row.shape[1]
        assert torch.allclose(torch.cat([first.logits[0], second.logits[0]]), full, atol=1e-5, rtol=0)
        state, steps = None, []
        for i in range(row.shape[1]):
            out = model(row[:, i:i + 1], cache=state, use_cache=True)
            state = out.cache
            steps.append(out.logits[0, -1])
        assert torch.allclose(torch.stack(steps), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("use_attention", [False, True])
def test_generate_greedy_equals_argmax_of_the_full_forward(use_attention):
    model = _model(use_attention)
    prompt = [5, 6, 7]
    out = model.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, pad_token_id=0,
                         eos_token_id=None)
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(12):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    assert out[0].tolist() == ids


@pytest.mark.parametrize("use_attention", [False, True])
def test_generate_left_padded_batches_and_beams(use_attention):
    model = _model(use_attention)
    short, long = [5, 6], [9, 10, 11, 12]
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0, eos_token_id=None)
    ids = torch.tensor([[0, 0] + short, long])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    batch = model.generate(ids, attention_mask=mask, **kwargs)
    assert batch[0, 4:].tolist() == model.generate(torch.tensor([short]), **kwargs)[0, 2:].tolist()
    assert batch[1].tolist() == model.generate(torch.tensor([long]), **kwargs)[0].tolist()
    beams = model.generate(torch.tensor([long]), num_beams=3, **kwargs)
    assert beams.tolist() == model.generate(torch.tensor([long]), num_beams=3, use_cache=False, **kwargs).tolist()


@pytest.mark.parametrize("use_attention", [False, True])
def test_save_load_gives_the_same_logits(tmp_path, use_attention):
    model = _model(use_attention)
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "minimind-lstm"
    assert (tmp_path / "model.safetensors").is_file()
    again = load_model(tmp_path)
    assert isinstance(again, MiniMindLSTMForCausalLM) and again.lm_head.weight is again.embed_tokens.weight
    row = torch.tensor([sum(DOCS, [])])
    with torch.no_grad():
        assert torch.equal(model(row).logits, again(row).logits)


def test_presets_are_sized_like_the_transformer_presets():
    sizes = {name: parameter_count(name, 6400, architecture="lstm") for name in LSTM_PRESETS}
    assert 4.3e6 < sizes["nano"] < 4.8e6 and 11e6 < sizes["mini"] < 12.5e6
    assert sizes["pico"] < sizes["micro"] < sizes["nano"] < sizes["mini"]
    with pytest.raises(ValueError, match="unknown LSTM preset"):
        MiniMindLSTMConfig.from_preset("base")


# ---------------------------------------------------------------- the engine

def _engine_greedy(model, prompt, n):
    engine = Engine(model, max_batch=4)
    return list(engine.submit(prompt, Sampler(engine.vocab_size), n))


def _forward_greedy(model, prompt, n):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt):]


@pytest.mark.parametrize("use_attention", [False, True])
def test_engine_greedy_equals_the_full_forward(use_attention):
    model = _model(use_attention, vocab_size=300)  # the sampler's UTF-8 guard expects byte tokens to exist
    prompt = [EOS, 260, 261, 262]
    assert not Engine(model).speculate
    assert _engine_greedy(model, prompt, 20) == _forward_greedy(model, prompt, 20)


@pytest.mark.parametrize("use_attention", [False, True])
def test_engine_batches_requests_of_different_lengths_like_each_alone(use_attention):
    model = _model(use_attention, vocab_size=300)
    prompts = [[EOS, 260, 261], [EOS, 270, 271, 272, 273, 274], [280]]
    engine = Engine(model, max_batch=3)
    streams = [engine.submit(p, Sampler(engine.vocab_size), 15) for p in prompts]
    got = [list(s) for s in streams]
    assert got == [_forward_greedy(model, p, 15) for p in prompts]


def test_chat_and_complete_run_through_the_engine(tokenizer):
    model = _model(True, vocab_size=len(tokenizer), seed=1)
    greedy = SamplingParams(temperature=0, max_new_tokens=12)
    answer = chat(model, tokenizer, [{"role": "user", "content": "床前明月光"}], greedy)
    text = "".join(answer)
    assert answer.completion_tokens >= 1 and text == answer.text
    assert "".join(complete(model, tokenizer, "To be", greedy)) == "".join(complete(model, tokenizer, "To be", greedy))


# ---------------------------------------------------------------- training

def _train_lstm(tmp_path, tokenizer_dir, **overrides):
    tmp_path.mkdir(parents=True, exist_ok=True)
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), model__architecture="lstm",
                      model__preset="pico", model__overrides=dict(TINY_LSTM, **overrides), max_steps=12,
                      optim__lr=1e-2, optim__warmup_steps=0)
    status = train(cfg)
    assert status["state"] == "finished", status
    return tmp_path / "run"


@pytest.mark.parametrize("use_attention", [False, True])
def test_pretraining_an_lstm_lowers_the_loss(tmp_path, tokenizer_dir, use_attention):
    run = _train_lstm(tmp_path, tokenizer_dir, use_attention=use_attention)
    curve = losses(run)
    first, last = curve[min(curve)], curve[max(curve)]
    assert last < first - 0.5, curve
    model = load_model(run / "checkpoints" / "step-12")
    assert isinstance(model, MiniMindLSTMForCausalLM) and model.config.use_attention is use_attention
    assert model.config.max_position_embeddings == 32  # the training row length, as for a transformer


def test_sft_of_an_lstm_and_lora_on_its_attention(tmp_path, tokenizer_dir):
    base = _train_lstm(tmp_path / "pre", tokenizer_dir, use_attention=True) / "checkpoints" / "step-12"
    chat_corpus = write_chat_corpus(tmp_path)
    for mode in ("sft", "lora"):
        cfg = make_config(tmp_path / mode, [chat_corpus], mode=mode, model__init_from=str(base), max_steps=3,
                          data__seq_len=96,
                          model__overrides={})
        assert train(cfg)["state"] == "finished"
    adapter = json.loads((tmp_path / "lora" / "run" / "checkpoints" / "step-3" / "adapter_config.json").read_text())
    assert set(adapter["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj"}
    adapter_dir = tmp_path / "lora" / "run" / "checkpoints" / "step-3"
    merged = load_model(adapter_dir, merge=True)
    assert isinstance(merged, MiniMindLSTMForCausalLM)
    result = export(adapter_dir, "merged", tmp_path / "merged", eval_text=["床前明月光，疑是地上霜。"])
    assert result.verified and isinstance(load_model(result.folder), MiniMindLSTMForCausalLM)
    with pytest.raises(ConfigError, match="QLoRA does not apply to an LSTM model"):
        train(make_config(tmp_path / "qlora", [chat_corpus], mode="qlora", model__init_from=str(base), max_steps=1,
                          data__seq_len=96, model__overrides={}))


def test_lora_on_an_lstm_without_attention_is_refused_with_what_to_do():
    cfg = TrainConfig.from_dict({"mode": "lora", "model": {"init_from": "x"}, "data": {"files": ["x"]}})
    with pytest.raises(ConfigError, match="no attention layers to adapt: fine-tune every weight with mode sft"):
        add_lora(_model(False), cfg)
    cfg.lora.target_modules = ["gate_proj"]
    with pytest.raises(ConfigError, match="name some of those"):
        add_lora(_model(True), cfg)


def test_architecture_and_its_presets_are_validated(tmp_path):
    base = {"data": {"files": ["corpus.txt"]}}
    with pytest.raises(ConfigError, match="model.architecture must be one of transformer, lstm"):
        TrainConfig.from_dict({**base, "model": {"architecture": "gru"}}).validate()
    with pytest.raises(ConfigError, match="model.preset must be auto or one of pico, micro, nano, mini"):
        TrainConfig.from_dict({**base, "model": {"architecture": "lstm", "preset": "small"}}).validate()
    TrainConfig.from_dict({**base, "model": {"architecture": "lstm", "preset": "nano"}}).validate()
    with pytest.raises(ConfigError, match="an LSTM model has none: turn it off"):
        TrainConfig.from_dict({**base, "model": {"architecture": "lstm"}, "grad_checkpointing": True}).validate()


def test_auto_size_climbs_the_lstm_ladder(tmp_path, tokenizer_dir):
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), model__architecture="lstm",
                      model__preset="auto", model__overrides={}, max_steps=1)
    cfg = cfg.resolved("cpu", False)
    logged = []
    chose, step_s = choose_new_model_size(cfg, load_tokenizer(tokenizer_dir), None, "cpu", None, DistInfo(), None,
                                          logged.append)
    assert chose and step_s is None  # sized from its step count: nothing was timed
    assert cfg.model.preset == "pico" and "pico" in logged[0]  # a 1-step run affords the smallest size
    assert cfg.optim.lr == pretrain_lr("pico")


def test_held_out_bpc_of_an_lstm(tokenizer):
    model = _model(True, vocab_size=len(tokenizer))
    result = evaluate_documents(model, tokenizer, ["床前明月光，疑是地上霜。", "To be, or not to be."], context=16)
    assert result.tokens > 0 and result.bpc > 0


# ---------------------------------------------------------------- export

@pytest.fixture(scope="module")
def lstm_dir(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("lstm")
    model = _model(True, vocab_size=len(tokenizer))
    model.config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


def test_hf_export_keeps_the_lstm(lstm_dir, tmp_path):
    result = export(lstm_dir, "hf", tmp_path / "hf", eval_text=["床前明月光，疑是地上霜。", "To be, or not to be."])
    assert result.verified and "model_type minimind-lstm" in result.stored_as
    row = torch.tensor([[5, 6, 7, 2, 8, 9]])
    with torch.no_grad():
        assert torch.equal(load_model(lstm_dir)(row).logits, load_model(result.folder)(row).logits)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in ("hf", "merged")])
def test_other_formats_refuse_an_lstm(lstm_dir, tmp_path, fmt):
    with pytest.raises(ExportError, match=f"format '{fmt}' cannot hold an LSTM model .* export an LSTM as hf, merged"):
        export(lstm_dir, fmt, tmp_path / fmt)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_process_lstm_run_matches_one_process(tmp_path, tokenizer_dir, strategy):
    corpus = write_text_corpus(tmp_path)
    settings = dict(model__tokenizer=str(tokenizer_dir), model__architecture="lstm", model__preset="pico",
                    model__overrides=dict(TINY_LSTM, use_attention=True), max_steps=3, save_every=3)
    one, two = one_and_two_processes(lambda where, **kw: make_config(where, [corpus], **settings, **kw),
                                     tmp_path, strategy)
    assert_same_losses(one, two, [1, 2, 3], tolerance=1e-4)
    assert isinstance(load_model(two / "checkpoints" / "step-3"), MiniMindLSTMForCausalLM)


# ---------------------------------------------------------------- the other objectives

def _save_lstm_base(folder, tokenizer, use_attention=True):
    model = _model(use_attention, vocab_size=len(tokenizer))
    model.config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder, save_jinja_files=False)
    return folder


def test_dpo_and_distillation_train_an_lstm(tmp_path, tokenizer):
    from builders import write_preference_corpus
    from training_helpers import distill_config, dpo_config

    base = _save_lstm_base(tmp_path / "base", tokenizer)
    dpo = dpo_config(tmp_path / "dpo", base, write_preference_corpus(tmp_path), max_steps=4, eval_every=4,
                     model__overrides={})
    assert train(dpo)["state"] == "finished"
    rows = [r for r in RunDir(tmp_path / "dpo" / "run").read_metrics() if "loss" in r]
    assert rows[-1]["loss"] < rows[0]["loss"]
    # an LSTM student of a transformer teacher that shares its tokenizer
    from training_helpers import save_base_model

    teacher = save_base_model(tmp_path / "teacher", tokenizer)
    distill = distill_config(tmp_path / "distill", teacher, write_text_corpus(tmp_path), max_steps=4,
                             model__architecture="lstm", model__preset="pico", model__overrides=dict(TINY_LSTM))
    assert train(distill)["state"] == "finished"
    assert isinstance(load_model(tmp_path / "distill" / "run" / "checkpoints" / "step-4"), MiniMindLSTMForCausalLM)


@pytest.mark.parametrize("adapter", ["", "lora"])
def test_grpo_samples_an_lstm_through_the_engine(tmp_path, tokenizer, adapter):
    from builders import write_prompts
    from training_helpers import grpo_config

    base = _save_lstm_base(tmp_path / "base", tokenizer)
    cfg = grpo_config(tmp_path, base, write_prompts(tmp_path), max_steps=2, adapter=adapter, lora__rank=4,
                      model__overrides={})
    assert train(cfg)["state"] == "finished"
