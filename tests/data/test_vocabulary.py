"""Tokenizer coverage and vocabulary extension (minimind/vocabulary.py): what a base tokenizer
spells in bytes, the characters added as whole tokens in any context, the model's new rows, a
LoRA run that trains them (exact resume, adapter and merged reload), the UTF-8 guard allowing
them, and GGUF refusing them with a message."""

import json
from pathlib import Path

import pytest
import torch
from builders import SONGCI, write_songci
from training_helpers import (
    assert_same_losses,
    interrupted_run,
    losses,
    make_config,
    save_base_model,
)

from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.errors import ConfigError, ExportError
from minimind.training import train
from minimind.vocabulary import (
    Coverage,
    added_characters,
    coverage,
    extend_tokenizer,
    has_added_characters,
    resize_model,
)

SIMPLIFIED = "风无来时处归红飞长谁梦东"  # frequent in the Song ci sample, not in the test tokenizer's texts


def _texts(n: int = 80) -> list[str]:
    return [json.loads(line)["text"] for line in SONGCI.read_text(encoding="utf-8").splitlines()[:n]]


def _fresh(tokenizer):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer.__class__.from_str(
        tokenizer.backend_tokenizer.to_str()), **{k: getattr(tokenizer, k) for k in
                                                  ("bos_token", "eos_token", "pad_token")})


def test_coverage_counts_byte_spelled_characters_and_lists_the_missing_ones(tokenizer):
    texts = ["风风风 光", "风来\ufffd  \n"]
    found = coverage(tokenizer, texts)
    assert found.characters == sum(len(t) for t in texts)
    assert found.fallback_characters == 6  # 风 x4, 来 (the test tokenizer never saw them) and U+FFFD
    assert dict(found.missing) == {"风": 4, "来": 1}  # 光 has a token; space, newline and U+FFFD are not candidates
    assert found.candidates(min_count=2) == ["风"] and found.candidates(min_count=1, limit=1) == ["风"]
    assert Coverage(10, 8, 3).chars_per_token == 1.25 and Coverage(10, 8, 3).byte_fallback_share == 0.3


def test_added_characters_are_whole_in_any_context_and_old_text_keeps_its_ids(tokenizer):
    extended = _fresh(tokenizer)
    old = "床前明月光，疑是地上霜。ROMEO: But, soft!"
    before = extended(old, add_special_tokens=False)["input_ids"]
    ids = extend_tokenizer(extended, list(SIMPLIFIED) + ["光"])  # 光 already has a token: not added
    assert ids == list(range(len(tokenizer), len(tokenizer) + len(SIMPLIFIED)))
    assert added_characters(extended, len(tokenizer)) == dict(zip(ids, SIMPLIFIED))
    assert extended(old, add_special_tokens=False)["input_ids"] == before
    for text in ("东风夜放花千树", "a风b", "風风颩"):
        encoded = extended(text, add_special_tokens=False)["input_ids"]
        assert extended.decode(encoded) == text
        for char in set(text) & set(SIMPLIFIED):
            assert extended.convert_tokens_to_ids(char) in encoded
    assert has_added_characters(extended) and not has_added_characters(tokenizer)
    assert coverage(extended, _texts()).byte_fallback_share < coverage(tokenizer, _texts()).byte_fallback_share


def test_the_utf8_guard_lets_a_model_write_added_characters(tokenizer):
    from minimind.byte_level import token_bytes
    from minimind.inference.utf8 import Utf8Guard

    extended = _fresh(tokenizer)
    ids = extend_tokenizer(extended, list(SIMPLIFIED))
    table = token_bytes(extended)
    assert [table[i] for i in ids] == [c.encode("utf-8") for c in SIMPLIFIED]
    assert all(table[i] is None for i in extended.all_special_ids)  # special tokens stay out
    guard = Utf8Guard.for_tokenizer(extended, len(extended))
    allowed = guard.allowed(guard.start, 10)
    assert allowed is None or bool(allowed[ids].all())


def test_new_rows_start_at_the_mean_of_their_byte_pieces(tokenizer, tiny_model):
    extended = _fresh(tokenizer)
    ids = extend_tokenizer(extended, list(SIMPLIFIED))
    embedding = tiny_model.get_input_embeddings().weight.detach().clone()
    probe = torch.tensor([tokenizer("床前明月光", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        before = tiny_model(input_ids=probe).logits
    assert resize_model(tiny_model, tokenizer, extended) == ids
    grown = tiny_model.get_input_embeddings().weight
    assert grown.shape[0] == len(extended) and tiny_model.config.vocab_size == len(extended)
    for i, char in zip(ids, SIMPLIFIED):
        pieces = tokenizer(char, add_special_tokens=False)["input_ids"]
        assert len(pieces) > 1 and torch.allclose(grown[i], embedding[pieces].mean(0))
    with torch.no_grad():
        after = tiny_model(input_ids=probe).logits
    assert torch.allclose(after[..., :len(tokenizer)], before, atol=1e-6)  # old tokens' logits unchanged
    assert resize_model(tiny_model, tokenizer, extended) == ids  # already grown: the rows are set again, not added
    assert tiny_model.get_input_embeddings().weight.shape[0] == len(extended)
    assert resize_model(tiny_model, extended, extended) == []  # nothing past the start's vocabulary


def test_a_model_with_spare_rows_gets_its_new_tokens_started_in_them(tokenizer):
    from helpers import tiny_config

    from minimind import MiniMindForCausalLM

    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(vocab_size=len(tokenizer) + 64))  # rows past the tokenizer
    extended = _fresh(tokenizer)
    ids = extend_tokenizer(extended, list(SIMPLIFIED))
    assert resize_model(model, tokenizer, extended) == ids
    weight = model.get_input_embeddings().weight
    assert weight.shape[0] == len(tokenizer) + 64  # no growth: the spare rows hold them
    pieces = tokenizer("风", add_special_tokens=False)["input_ids"]
    assert torch.allclose(weight[extended.convert_tokens_to_ids("风")], weight[pieces].mean(0))


def test_coverage_reads_at_most_max_chars(tokenizer):
    found = coverage(tokenizer, ["风" * 10, "风" * 10, "来" * 10], max_chars=15)
    assert found.characters == 15 and dict(found.missing) == {"风": 15}


def _lora_config(tmp_path, base, corpus, **overrides):
    settings = dict(mode="lora", model__init_from=str(base), model__extend_vocab=200, model__extend_min_count=2,
                    data__seq_len=48, max_steps=8, lora__rank=4, lora__dropout=0.0, optim__lr=1e-2)
    return make_config(tmp_path, [corpus], **{**settings, **overrides})


def test_a_lora_run_with_extension_trains_the_new_rows_and_reloads(tmp_path, tokenizer, one_thread):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_songci(tmp_path)
    status = train(_lora_config(tmp_path, base, corpus))
    run = tmp_path / "run"
    report = json.loads((run / "vocabulary.json").read_text(encoding="utf-8"))
    assert report["added_tokens"] > 50 and set(SIMPLIFIED) <= set(report["added"])
    assert report["after"]["byte_fallback_share"] < report["before"]["byte_fallback_share"] / 2
    assert report["after"]["chars_per_token"] > report["before"]["chars_per_token"]
    assert "characters added as tokens" in (run / "train.log").read_text(encoding="utf-8")
    steps = losses(run)
    assert steps[8] < steps[1]

    final = Path(status["final_checkpoint"])
    extended = load_tokenizer_for(final)  # the adapter carries the extended tokenizer
    from safetensors.torch import load_file

    saved = load_file(str(final / "adapter_model.safetensors"))
    assert all("lora_" in k or "trainable_tokens_delta" in k for k in saved), sorted(saved)  # no table copy
    assert [v.shape[0] for k, v in saved.items() if "trainable_tokens_delta" in k] == [report["added_tokens"]]
    assert len(extended) == len(tokenizer) + report["added_tokens"]
    new_id = extended.convert_tokens_to_ids("风")
    start = load_model(base)
    resize_model(start, tokenizer, extended)  # where the run's new rows started
    adapted = load_model(final)  # the base grows to the adapter's vocabulary on load
    merged = load_model(final, merge=True)
    assert merged.config.vocab_size == len(extended)
    moved = (merged.get_input_embeddings().weight[new_id] - start.get_input_embeddings().weight[new_id]).abs()
    assert moved.max() > 1e-3  # the new row trained beside the adapter, and the adapter carries it
    old_id = extended("床", add_special_tokens=False)["input_ids"][0]
    assert torch.equal(merged.get_input_embeddings().weight[old_id], start.get_input_embeddings().weight[old_id])
    ids = torch.tensor([extended("东风夜放花千树", add_special_tokens=False)["input_ids"]])
    assert new_id in ids[0].tolist()
    with torch.no_grad():
        assert torch.allclose(adapted(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-4)
    # the base folder on disk is untouched
    assert load_model(base).config.vocab_size == len(tokenizer)


def test_a_run_started_from_an_extended_adapter_run_extends_it_again(tmp_path, tokenizer, one_thread):
    base = save_base_model(tmp_path / "base", tokenizer)
    first = train(_lora_config(tmp_path / "a", base, write_songci(tmp_path, 40), max_steps=2,
                               model__extend_vocab=20))["final_checkpoint"]
    more = tmp_path / "more.jsonl"
    more.write_text("\n".join(SONGCI.read_text(encoding="utf-8").splitlines()[200:260]) + "\n", encoding="utf-8")
    second = train(_lora_config(tmp_path / "b", first, more, max_steps=2, model__extend_vocab=20))["final_checkpoint"]
    grown = load_tokenizer_for(second)
    assert len(grown) == len(tokenizer) + 40 and load_model(second, merge=True).config.vocab_size == len(grown)


def test_a_stopped_and_resumed_extension_run_matches_an_uninterrupted_one(tmp_path, tokenizer, one_thread):
    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_songci(tmp_path, 40)
    interrupted_run(lambda where: _lora_config(where, base, corpus, max_steps=6), tmp_path, stop_at=3)
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, 7))


def test_full_fine_tune_with_extension_saves_the_grown_model(tmp_path, tokenizer, one_thread):
    base = save_base_model(tmp_path / "base", tokenizer)
    cfg = make_config(tmp_path, [write_songci(tmp_path, 40)], mode="pretrain", model__init_from=str(base),
                      model__extend_vocab=20, data__seq_len=48, max_steps=2)
    final = Path(train(cfg)["final_checkpoint"])
    model, extended = load_model(final), load_tokenizer_for(final)
    assert len(extended) == len(tokenizer) + 20 == model.config.vocab_size


@pytest.mark.parametrize("settings, message", [
    (dict(mode="dpo", adapter="lora"), "compares the model with a reference"),
    (dict(mode="pretrain", model__init_from=""), "has no starting model"),
    (dict(mode="lora", model__tokenizer="tok"), "leave model.tokenizer empty"),
    (dict(mode="lora", model__extend_vocab=-1), "0..20000"),
])
def test_extension_settings_that_cannot_work_are_refused(tmp_path, settings, message):
    settings = {"model__init_from": "base", "model__extend_vocab": 100, **settings}
    with pytest.raises(ConfigError, match=message):
        make_config(tmp_path, ["x"], **settings).validate()


def test_gguf_refuses_an_extended_vocabulary_and_all_leaves_it_out(tmp_path, tokenizer):
    from minimind.commands.export import parse_formats
    from minimind.export.gguf_vocab import vocab_metadata

    extended = _fresh(tokenizer)
    extend_tokenizer(extended, list(SIMPLIFIED))
    with pytest.raises(ExportError, match="GGUF cannot carry the characters"):
        vocab_metadata(extended, len(extended))
    plain = save_base_model(tmp_path / "plain", tokenizer)
    grown = save_base_model(tmp_path / "grown", tokenizer)
    extended.save_pretrained(grown, save_jinja_files=False)
    assert "gguf-q8_0" in parse_formats("all", str(plain), None)
    assert not [f for f in parse_formats("all", str(grown), None) if f.startswith("gguf")]


def test_qlora_and_an_untied_output_layer_train_the_new_rows_too(tmp_path, tokenizer, one_thread):
    from helpers import tiny_config

    from minimind import MiniMindForCausalLM

    base = save_base_model(tmp_path / "base", tokenizer)
    cfg = _lora_config(tmp_path / "q", base, write_songci(tmp_path, 40), mode="qlora", max_steps=2)
    assert train(cfg)["state"] == "finished"  # the 4-bit base grows its (unquantized) embedding rows

    untied = tmp_path / "untied"
    torch.manual_seed(0)
    MiniMindForCausalLM(tiny_config(vocab_size=len(tokenizer), tie_word_embeddings=False)).save_pretrained(untied)
    tokenizer.save_pretrained(untied, save_jinja_files=False)
    status = train(_lora_config(tmp_path / "u", untied, write_songci(tmp_path, 40), max_steps=3))
    merged, start = load_model(status["final_checkpoint"], merge=True), load_model(untied)
    extended = load_tokenizer_for(status["final_checkpoint"])
    resize_model(start, tokenizer, extended)
    new_id = extended.convert_tokens_to_ids("风")
    for layer in ("get_input_embeddings", "get_output_embeddings"):
        moved = getattr(merged, layer)().weight[new_id] - getattr(start, layer)().weight[new_id]
        assert moved.abs().max() > 1e-3, layer  # both the input and the (separate) output row trained
