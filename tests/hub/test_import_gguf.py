"""GGUF exports of imported models: each family in the architecture llama.cpp runs it as, with its
tokenizer's own type and pre-tokenizer name, verified by reloading through transformers' GGUF reader
(export verification: perplexity, greedy decoding, tokenizer ids)."""

import json

import gguf
import numpy as np
import pytest
import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from helpers import SAMPLE_TEXTS
from hub_models import build_family_model, tokenizer_for
from minimind.checkpoint import load_model, load_tokenizer_for
from minimind.config import MiniMindConfig
from minimind.errors import ExportError
from minimind.export import export
from minimind.export.formats import tolerance_for
from minimind.export.gguf import write_gguf
from minimind.gguf_model import llama3_rope_factors
from minimind.export.gguf_vocab import PROBES, pre_tokenizer_name, vocab_refusal
from minimind.export.verify import load_export
from minimind.hub import import_folder

# held-out text with what splits differently between pre-tokenizers: digits, contractions, case, newlines
EVAL = ["(the cat) sat, \"the end\" .The 678901 DON'T WE'LL", "It's 2024, and I'D paid 12345 coins (roughly 3.50 each).\n\nThe rain in Spain stays mainly 42 times.",
        "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:",
        "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。"]

# family -> (llama.cpp architecture, tokenizer model, pre-tokenizer name)
EXPECTED = {
    "llama": ("llama", "gpt2", "llama-bpe"),            # Llama 3.2: rope_freqs, its own splitting
    "llama-smollm": ("llama", "gpt2", "smollm"),        # SmolLM2
    "llama-sentencepiece": ("llama", "llama", "default"),  # TinyLlama, Llama 2
    "qwen2": ("qwen2", "gpt2", "qwen2"),
    "qwen3": ("qwen3", "gpt2", "qwen2"),
}


def fields(path):
    reader = gguf.GGUFReader(path)
    lists = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.scores")
    return reader, {name: field.contents() for name, field in reader.fields.items() if name not in lists}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_each_family_exports_a_verified_gguf_in_its_own_architecture(tmp_path, family):
    build_family_model(family, tmp_path / "source")
    import_folder(tmp_path / "source", tmp_path / "model")
    result = export(tmp_path / "model", "gguf-f16", tmp_path / "gguf", eval_text=EVAL)
    assert result.verified and result.greedy_match == result.greedy_tokens, result.problems
    arch, tokenizer_model, pre = EXPECTED[family]
    reader, meta = fields(result.path)
    assert (meta["general.architecture"], meta["tokenizer.ggml.model"], meta["tokenizer.ggml.pre"]) == (
        arch, tokenizer_model, pre)
    assert result.stored_as == f"{arch}-architecture GGUF"
    names = {t.name for t in reader.tensors}
    assert ("blk.0.attn_q.bias" in names) == (family == "qwen2")
    assert ("blk.0.attn_q_norm.weight" in names) == (family == "qwen3")
    assert ("rope_freqs.weight" in names) == (family == "llama")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert meta[f"{arch}.attention.key_length"] == config["head_dim"]
    source = load_tokenizer_for(tmp_path / "model")
    assert meta["tokenizer.ggml.add_bos_token"] == (source("a")["input_ids"][0] == source.bos_token_id)

    # the tokenizer a GGUF reader rebuilds splits every probe as the source does (a sentencepiece file
    # read by transformers adds no second ▁ before a leading space, where llama.cpp and the source do)
    _, rebuilt = load_export("gguf-f16", result.path)
    texts = [t for t in PROBES + tuple(EVAL) if not (tokenizer_model == "llama" and t[0].isspace())]
    for text in texts:
        assert rebuilt(text, add_special_tokens=False)["input_ids"] == source(text, add_special_tokens=False)[
            "input_ids"], text


def test_a_mistral_without_a_window_shorter_than_its_context_exports_as_llama(tmp_path):
    build_family_model("mistral", tmp_path / "source", sliding_window=None)
    import_folder(tmp_path / "source", tmp_path / "model")
    result = export(tmp_path / "model", "gguf-q8_0", tmp_path / "gguf", eval_text=EVAL)
    assert result.verified, result.problems
    assert fields(result.path)[1]["general.architecture"] == "llama"


def test_llama3_rope_factors_are_what_transformers_divides_the_frequencies_by():
    config = MiniMindConfig(hidden_size=256, num_attention_heads=2, num_key_value_heads=2, rope_theta=500000.0,
                            rope_scaling_type="llama3", rope_scaling_factor=32.0, rope_low_freq_factor=1.0,
                            rope_high_freq_factor=4.0, rope_original_max_position=8192,
                            max_position_embeddings=131072)
    from transformers import LlamaConfig

    llama = LlamaConfig(hidden_size=256, num_attention_heads=2, rope_parameters=config.rope_dict(),
                        max_position_embeddings=131072)
    scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](llama, "cpu")
    plain = 1.0 / 500000.0 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    factors = llama3_rope_factors(config)
    assert factors.shape == (64,) and factors.min() == 1.0 and factors.max() == 32.0
    np.testing.assert_allclose(plain.numpy() / factors, scaled.double().numpy(), rtol=1e-6)


def _byte_level(pre_tokenizer, normalizer=None) -> PreTrainedTokenizerFast:
    core = Tokenizer(models.BPE())
    core.pre_tokenizer, core.normalizer, core.decoder = pre_tokenizer, normalizer, decoders.ByteLevel()
    core.train_from_iterator(SAMPLE_TEXTS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|endoftext|>")


def test_the_pre_tokenizer_name_is_found_by_splitting_text_and_an_unknown_splitting_is_refused(tokenizer):
    assert pre_tokenizer_name(tokenizer.backend_tokenizer) == "gpt-2"  # the studio's own
    assert pre_tokenizer_name(tokenizer_for("qwen").backend_tokenizer) == "qwen2"
    assert pre_tokenizer_name(tokenizer_for("llama3").backend_tokenizer) == "llama-bpe"
    assert pre_tokenizer_name(tokenizer_for("smollm").backend_tokenizer) == "smollm"
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    # splitting at whitespace alone (no regex llama.cpp knows), and GPT-2's with a space put in front
    for pre in (pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), byte_level]),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)):
        strange = _byte_level(pre)
        assert pre_tokenizer_name(strange.backend_tokenizer) is None
        assert "splits it otherwise" in vocab_refusal(strange)
    # Qwen's splitting after lower-casing is not Qwen's splitting
    lowered = _byte_level(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{N}"), "isolated"),
                                                   pre_tokenizers.ByteLevel(use_regex=True)]), normalizers.Lowercase())
    assert pre_tokenizer_name(lowered.backend_tokenizer) is None


def test_a_sentencepiece_tokenizer_must_write_spaces_as_llama_cpp_does():
    good = tokenizer_for("sentencepiece")
    assert vocab_refusal(good) is None
    data = json.loads(good.backend_tokenizer.to_str())
    data["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}  # no ▁ in front
    bad = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), unk_token="<unk>")
    assert "llama.cpp's way of writing spaces" in vocab_refusal(bad)
    data["normalizer"] = None  # newer files: the Metaspace pre-tokenizer does the same
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
    metaspace = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), unk_token="<unk>")
    assert vocab_refusal(metaspace) is None


def test_an_ascii_added_token_travels_as_user_defined_but_added_characters_do_not(tmp_path):
    build_family_model("qwen2", tmp_path / "source")
    import_folder(tmp_path / "source", tmp_path / "model")
    model, tokenizer = load_model(tmp_path / "model"), load_tokenizer_for(tmp_path / "model")
    tokenizer.add_tokens(["<tool_call>"])  # as Qwen2.5 ships it: added, not special
    reader = gguf.GGUFReader(write_gguf(model, tokenizer, tmp_path / "g", "f16"))
    tokens, types = reader.get_field("tokenizer.ggml.tokens").contents(), reader.get_field(
        "tokenizer.ggml.token_type").contents()
    assert types[tokens.index("<tool_call>")] == gguf.TokenType.USER_DEFINED
    tokenizer.add_tokens(["霜"])
    with pytest.raises(ExportError, match="GGUF cannot carry the characters"):
        write_gguf(model, tokenizer, tmp_path / "h", "f16")


@pytest.mark.llama_cpp
@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_llama_cpp_runs_each_family_as_the_import_does(tmp_path, family):
    """llama.cpp itself: the same token ids for every probe (leading spaces included), the same greedy
    tokens up to a near-tie, and close logits on the held-out window."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from minimind.export.verify import make_reference

    build_family_model(family, tmp_path / "source")
    import_folder(tmp_path / "source", tmp_path / "model")
    model, tokenizer = load_model(tmp_path / "model"), load_tokenizer_for(tmp_path / "model")
    path = write_gguf(model, tokenizer, tmp_path / "gguf", "f16")
    reference = make_reference(model, tokenizer, EVAL)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, logits_all=True, verbose=False)
    try:
        for text in PROBES + tuple(EVAL):
            want = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert llm.tokenize(text.encode("utf-8"), add_bos=False, special=True) == want, text
        llm.eval(reference.prompt)
        picks = []
        for _ in range(len(reference.greedy)):
            picks.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval([picks[-1]])
        # random weights have near-ties, which float16 may flip: the first divergence must be one
        first = next((i for i, (a, b) in enumerate(zip(picks, reference.greedy)) if a != b), None)
        if first is not None:
            lead = reference.logits[first, reference.greedy[first]] - reference.logits[first, picks[first]]
            assert first >= 16 and lead < tolerance_for("gguf-f16", None).logit_margin, (first, float(lead))
        ids = reference.window
        llm.reset()
        llm.eval(ids)
        got = torch.tensor(np.array(llm.scores[:len(ids)]))
        assert float((got - reference.window_logits).abs().max()) < 0.05
    finally:
        llm.close()
