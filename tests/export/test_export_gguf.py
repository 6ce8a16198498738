"""GGUF exports: the file loads back through transformers' GGUF reader (which undoes llama.cpp's
rotary permutation) with the source's logits, and its embedded tokenizer splits text as ours does.
The llama.cpp checks run when llama-cpp-python is installed (requirements-llama-cpp.txt)."""

import math

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from minimind.checkpoint import load_model
from minimind.export import export_many, load_source
from minimind import MiniMindForCausalLM
from minimind.errors import ExportError
from minimind.export.gguf import plain_chat_template
from minimind.gguf_model import rotary_to_interleaved, write_draft_gguf
from minimind.export.verify import make_reference
from minimind.model import apply_rotary
from helpers import tiny_config
from test_export import EVAL_TEXTS, trained_model_dir

TEXTS = {
    "chinese": "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。",
    "english": "ROMEO: But, soft! what light through yonder window breaks?",
    "mixed": "Hello world! 你好，世界。 1234 5678 — emoji 🙂🚀 tabs\tand  spaces\n\nnew lines",
    "special": "<|im_start|>user\n写诗<|im_end|>\n<|im_start|>assistant\n春眠不覺曉<|endoftext|>",
}
# greatest |logit difference| against the float32 source allowed after reloading each file
LOGIT_TOLERANCE = {"gguf-f16": 0.02, "gguf-q8_0": 0.15}


def source_ids(model_dir, text: str) -> list[int]:
    return load_source(model_dir).tokenizer(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    return trained_model_dir(tmp_path_factory, tokenizer)


@pytest.fixture(scope="module")
def ggufs(model_dir, tmp_path_factory):
    results = export_many(model_dir, ["gguf-f16", "gguf-q8_0"], tmp_path_factory.mktemp("gguf"),
                          eval_text=EVAL_TEXTS)
    assert all(r.verified for r in results), [r.error for r in results]
    return {r.format: r for r in results}


def test_rotary_permutation_turns_half_split_rotation_into_adjacent_pairs():
    """llama.cpp rotates pairs (2i, 2i+1); HF Llama rotates (i, i + d/2). After reordering the
    projection rows, llama.cpp's rotation of the new rows equals the reordered HF rotation, so
    attention scores are unchanged."""
    n_heads, d, hidden, t = 3, 8, 12, 5
    w = torch.randn(n_heads * d, hidden, generator=torch.Generator().manual_seed(0))
    x = torch.randn(t, hidden, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(t, dtype=torch.float32)
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    angles = pos[:, None] * inv                                           # (T, D/2)
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    hf = apply_rotary((x @ w.T).view(t, n_heads, d).transpose(0, 1)[None], cos[None], sin[None])[0]  # (H, T, D)

    y = (x @ rotary_to_interleaved(w, n_heads).T).view(t, n_heads, d).transpose(0, 1)  # (H, T, D)
    even, odd = y[..., 0::2], y[..., 1::2]
    rot = torch.stack([even * angles.cos() - odd * angles.sin(), even * angles.sin() + odd * angles.cos()], -1)
    cpp = rot.reshape(n_heads, t, d)                                      # pairs back in place
    order = torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2], -1).reshape(-1)
    assert torch.allclose(cpp, hf[..., order], atol=1e-5)
    assert not torch.allclose(rotary_to_interleaved(w, n_heads), w)


@pytest.mark.parametrize("fmt", ["gguf-f16", "gguf-q8_0"])
def test_gguf_loads_through_transformers_with_the_source_logits(ggufs, model_dir, fmt):
    r = ggufs[fmt]
    assert r.path.suffix == ".gguf" and r.path.parent == r.folder and r.files == [r.path.name]
    model = AutoModelForCausalLM.from_pretrained(r.folder, gguf_file=r.path.name, dtype=torch.float32).eval()
    assert isinstance(model, LlamaForCausalLM) and model.config.tie_word_embeddings
    source = load_model(model_dir)
    ids = torch.randint(5, 512, (2, 48), generator=torch.Generator().manual_seed(5))
    text = torch.tensor([source_ids(model_dir, " ".join(EVAL_TEXTS))])
    with torch.no_grad():
        assert (model(ids).logits - source(ids).logits).abs().max() < LOGIT_TOLERANCE[fmt]
        got, want = model(text).logits, source(text).logits
    assert (got - want).abs().max() < LOGIT_TOLERANCE[fmt]
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() > 0.98  # on the text the model knows
    assert r.greedy_match == 32 and abs(r.delta) <= 0.03


def test_q8_0_is_smaller_than_f16(ggufs):
    assert ggufs["gguf-q8_0"].size_bytes < 0.7 * ggufs["gguf-f16"].size_bytes


@pytest.mark.parametrize("fmt", ["gguf-f16", "gguf-q8_0"])
def test_embedded_tokenizer_gives_identical_ids(ggufs, model_dir, fmt):
    r = ggufs[fmt]
    ours = load_source(model_dir).tokenizer
    theirs = AutoTokenizer.from_pretrained(r.folder, gguf_file=r.path.name)
    for name, text in TEXTS.items():
        want = ours(text, add_special_tokens=False)["input_ids"]
        assert theirs(text, add_special_tokens=False)["input_ids"] == want, name
        assert theirs.decode(want) == text
    assert (theirs.bos_token, theirs.eos_token, theirs.pad_token) == (ours.bos_token, ours.eos_token,
                                                                      ours.pad_token)
    messages = [{"role": "system", "content": "你是诗人"}, {"role": "user", "content": "写诗"},
                {"role": "assistant", "content": "春眠不覺曉"}]
    assert theirs.apply_chat_template(messages, tokenize=False) == ours.apply_chat_template(messages, tokenize=False)


def test_gguf_metadata_describes_a_gpt2_bpe_with_control_tokens(ggufs, tokenizer):
    import gguf

    reader = gguf.GGUFReader(ggufs["gguf-q8_0"].path)
    field = lambda key: reader.get_field(key).contents()  # noqa: E731
    assert field("general.architecture") == "llama"
    assert field("tokenizer.ggml.model") == "gpt2" and field("tokenizer.ggml.pre") == "gpt-2"
    types = field("tokenizer.ggml.token_type")
    assert types[:5] == [gguf.TokenType.CONTROL] * 5 and set(types[5:]) == {gguf.TokenType.NORMAL}
    assert field("tokenizer.ggml.tokens")[:5] == ["<|pad|>", "<|startoftext|>", "<|endoftext|>",
                                                  "<|im_start|>", "<|im_end|>"]
    assert (field("tokenizer.ggml.padding_token_id"), field("tokenizer.ggml.bos_token_id"),
            field("tokenizer.ggml.eos_token_id"), field("tokenizer.ggml.eot_token_id")) == (0, 1, 2, 4)
    assert field("tokenizer.ggml.add_bos_token") is False
    assert len(field("tokenizer.ggml.merges")) > 0 and " " in field("tokenizer.ggml.merges")[0]
    template = field("tokenizer.chat_template")
    assert "<|im_start|>" in template and "endgeneration" not in template and "{%- generation" not in template
    kinds = {t.name: t.tensor_type.name for t in reader.tensors}
    assert "output.weight" not in kinds  # tied: llama.cpp reuses token_embd
    assert kinds["blk.0.attn_q.weight"] == "Q8_0" and kinds["token_embd.weight"] == "Q8_0"
    assert kinds["blk.0.attn_norm.weight"] == "F32" and kinds["output_norm.weight"] == "F32"


def test_a_draft_gguf_holds_the_weights_and_placeholder_pieces(tmp_path):
    """The engine's llama.cpp draft (minimind/inference/gguf_context.py) reads token ids only: its
    GGUF needs no tokenizer, one placeholder piece per embedding row, and Q8_0 matrices. A model
    llama.cpp cannot run is refused with the reason."""
    import gguf

    model = MiniMindForCausalLM(tiny_config())
    reader = gguf.GGUFReader(write_draft_gguf(model, tmp_path))
    field = lambda key: reader.get_field(key).contents()  # noqa: E731
    tokens = field("tokenizer.ggml.tokens")
    assert field("tokenizer.ggml.model") == "llama" and len(tokens) == model.config.vocab_size
    assert tokens[:2] == ["[ID0]", "[ID1]"] and len(set(tokens)) == len(tokens)
    assert reader.get_field("tokenizer.ggml.eos_token_id") is None  # no token is special
    kinds = {t.name: t.tensor_type.name for t in reader.tensors}
    assert kinds["blk.0.attn_q.weight"] == "Q8_0" and kinds["blk.0.attn_norm.weight"] == "F32"
    with pytest.raises(ExportError, match="mixture-of-experts"):
        write_draft_gguf(MiniMindForCausalLM(tiny_config(use_moe=True, num_experts=4)), tmp_path / "moe")


def test_plain_chat_template_renders_like_ours(tokenizer):
    import jinja2

    messages = [{"role": "user", "content": "写诗"}, {"role": "assistant", "content": "春眠不覺曉"}]
    plain = jinja2.Environment().from_string(plain_chat_template(tokenizer.chat_template))
    assert plain.render(messages=messages, add_generation_prompt=True) == \
        tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _llama_cpp_greedy(llm, prompt: list[int], n: int) -> list[int]:
    llm.reset()
    llm.eval(prompt)
    out = []
    for _ in range(n):
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(token)
        llm.eval([token])
    return out


@pytest.mark.llama_cpp
@pytest.mark.parametrize("fmt", ["gguf-f16", "gguf-q8_0"])
def test_llama_cpp_greedy_matches_pytorch(ggufs, model_dir, fmt):
    llama_cpp = pytest.importorskip("llama_cpp")
    src = load_source(model_dir)
    reference = make_reference(src.model, src.tokenizer, EVAL_TEXTS)   # PyTorch float32 greedy, 32 tokens
    llm = llama_cpp.Llama(model_path=str(ggufs[fmt].path), n_ctx=128, n_threads=2, logits_all=True,
                          verbose=False)
    try:
        assert llm.n_vocab() == src.config.vocab_size
        assert _llama_cpp_greedy(llm, reference.prompt, 32) == reference.greedy
        for name, text in TEXTS.items():
            want = src.tokenizer(text, add_special_tokens=False)["input_ids"]
            assert llm.tokenize(text.encode("utf-8"), add_bos=False, special=True) == want, name
        # llama.cpp's own log-probabilities of the held-out text agree with PyTorch's perplexity
        ids = [src.tokenizer.eos_token_id] + reference.document_ids[0]
        llm.reset()
        llm.eval(ids)
        logits = torch.tensor(np.array(llm.scores[:len(ids) - 1]))
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]))
        with torch.no_grad():
            want_nll = src.model(torch.tensor([ids]), labels=torch.tensor([ids])).loss
        assert math.isclose(float(nll), float(want_nll), rel_tol=0.05, abs_tol=0.02)
    finally:
        llm.close()
