"""`gguf-f16`, `gguf-q8_0`: a llama-architecture GGUF file for llama.cpp (and Ollama, LM Studio, ...).

Written with the `gguf` package: the model shape as `llama.*` keys, the
tokenizer embedded as a gpt2-style byte-level BPE (tokens, token types, merges,
pre-tokenizer "gpt-2", special ids, ChatML template), and the weights under
llama.cpp's tensor names.

Rotary layout: Hugging Face Llama rotates the two halves of each head
(dimension i with i + d/2); llama.cpp rotates adjacent pairs (2i with 2i+1).
The rows of each head of q_proj and k_proj are therefore reordered so that
row i and row i + d/2 become neighbours; transformers' GGUF loader undoes
exactly this when it reads the file back, which is how verification checks it.

Types: vectors (norms) stay float32, as llama.cpp expects; matrices are float16,
or Q8_0 (32-weight blocks of int8 with one float16 scale) when a row is a
multiple of 32 long, float16 otherwise.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import torch

from ..errors import ExportError
from ..tokenizer import SPECIAL_TOKENS
from ..vocabulary import has_added_characters
from .llama import require_dense

GGUF_TYPES = ("f16", "q8_0")
Q8_BLOCK = 32


def gguf_file_name(qtype: str, stem: str = "model") -> str:
    return f"{stem}-{qtype}.gguf"


def rotary_to_interleaved(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder q/k projection rows per head from half-split pairs (i, i+d/2) to adjacent pairs."""
    rows, cols = weight.shape
    half = rows // n_heads // 2
    return weight.reshape(n_heads, 2, half, cols).transpose(1, 2).reshape(rows, cols)


def plain_chat_template(template: str | None) -> str | None:
    """The chat template without transformers' {% generation %} markers, which other Jinja engines
    reject; they only tag assistant tokens for training and render nothing."""
    if not template:
        return template
    return re.sub(r"\{%-?\s*(end)?generation\s*-?%\}", "", template)


def gguf_refusal(config, tokenizer) -> str | None:
    """Why this writer's llama-architecture GGUF with a GPT-2 tokenizer cannot hold a model (None when
    it can): an imported model of another family, or with Llama 3's rotary scaling or a tokenizer that
    splits text otherwise than GPT-2 (llama.cpp would run different math or read different tokens)."""
    family = getattr(config, "family", None) or "llama"
    if family != "llama" or getattr(config, "qk_norm", False) or getattr(config, "attention_bias", False) \
            or getattr(config, "sliding_window", None):
        return f"GGUF export of a {family} model (biases, q/k norms or a sliding window) is not supported yet"
    if getattr(config, "rope_scaling_type", None) == "llama3":
        return "GGUF export of Llama 3's rotary scaling is not supported yet"
    pre = json.loads(tokenizer.backend_tokenizer.to_str()).get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        return ("GGUF export needs a GPT-2-style byte-level tokenizer (this one splits text its own way, which "
                "llama.cpp would not reproduce)")
    return None


def tokenizer_metadata(tokenizer, vocab_size: int) -> dict:
    """Tokens (byte-level spelling), token types, merges and special ids, as GGUF wants them."""
    from gguf import TokenType

    if has_added_characters(tokenizer):
        raise ExportError("GGUF cannot carry the characters this model's run added to its vocabulary "
                          "(its readers split them into bytes); export hf, llama or merged instead")
    n = len(tokenizer)
    if n > vocab_size:
        raise ExportError(f"the tokenizer has {n} tokens but the model only {vocab_size} embeddings")
    tokens = tokenizer.convert_ids_to_tokens(list(range(n)))
    special = set(tokenizer.all_special_ids) | {tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS
                                                if t in tokenizer.get_vocab()}
    added = set(tokenizer.get_added_vocab().values())
    types = [TokenType.CONTROL if i in special else TokenType.USER_DEFINED if i in added else TokenType.NORMAL
             for i in range(n)]
    # embeddings beyond the tokenizer (a model trained with a rounded-up vocabulary) get unused placeholders
    tokens += [f"[PAD{i}]" for i in range(n, vocab_size)]
    types += [TokenType.UNUSED] * (vocab_size - n)
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    if model.get("type") != "BPE":
        raise ExportError(f"GGUF export needs a byte-level BPE tokenizer, not {model.get('type')!r}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return {"tokens": tokens, "types": types, "merges": merges}


def _tensor_names(config) -> dict[str, str]:
    """Our parameter name -> llama.cpp tensor name."""
    from gguf import MODEL_ARCH, get_tensor_name_map

    names = get_tensor_name_map(MODEL_ARCH.LLAMA, config.num_hidden_layers)
    out = {}
    for layer in ["model.embed_tokens", "model.norm", "lm_head"] + [
            f"model.layers.{i}.{part}" for i in range(config.num_hidden_layers) for part in (
                "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                "input_layernorm", "post_attention_layernorm")]:
        out[layer + ".weight"] = names.get_name(layer) + ".weight"
    return out


def _encode(array: np.ndarray, qtype: str):
    """(data, raw GGML type or None) for one tensor."""
    from gguf import GGMLQuantizationType, quants

    if array.ndim == 1:
        return array.astype(np.float32), None
    if qtype == "q8_0" and array.shape[-1] % Q8_BLOCK == 0:
        return quants.quantize(array.astype(np.float32), GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0
    return array.astype(np.float16), None


def write_gguf(model, tokenizer, out_dir: Path, qtype: str, name: str = "MiniMind", stem: str = "model") -> Path:
    """Write `out_dir/<stem>-<qtype>.gguf` (qtype "f16" or "q8_0") for a dense model."""
    import gguf

    config = model.config
    require_dense(config, f"gguf-{qtype}")
    reason = gguf_refusal(config, tokenizer)
    if reason:
        raise ExportError(f"{reason}; export hf or llama instead")
    llama = config.to_llama_dict()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / gguf_file_name(qtype, stem)

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(name)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if qtype == "q8_0" else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_vocab_size(config.vocab_size)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(llama["rope_parameters"]["rope_theta"])  # "ntk" is folded into the base
    if llama["rope_parameters"]["rope_type"] == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(llama["rope_parameters"]["factor"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)

    vocab = tokenizer_metadata(tokenizer, config.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(vocab["tokens"])
    writer.add_token_types(vocab["types"])
    writer.add_token_merges(vocab["merges"])
    for setter, token_id in ((writer.add_bos_token_id, tokenizer.bos_token_id),
                             (writer.add_eos_token_id, tokenizer.eos_token_id),
                             (writer.add_pad_token_id, tokenizer.pad_token_id)):
        if token_id is not None:
            setter(token_id)
    im_end = tokenizer.get_vocab().get("<|im_end|>")
    if im_end is not None:
        writer.add_eot_token_id(im_end)  # a chat turn ends here
    writer.add_add_bos_token(False)  # documents are trained after an end-of-text token, not a BOS
    writer.add_add_eos_token(False)
    template = plain_chat_template(getattr(tokenizer, "chat_template", None))
    if template:
        writer.add_chat_template(template)

    names = _tensor_names(config)
    for param, tensor in model.state_dict().items():
        if param == "lm_head.weight" and config.tie_word_embeddings:
            continue  # llama.cpp reuses token_embd as the output matrix when output.weight is absent
        weight = tensor.detach().float()
        if param.endswith("self_attn.q_proj.weight"):
            weight = rotary_to_interleaved(weight, config.num_attention_heads)
        elif param.endswith("self_attn.k_proj.weight"):
            weight = rotary_to_interleaved(weight, config.num_key_value_heads)
        data, raw = _encode(weight.numpy(), qtype)
        writer.add_tensor(names[param], data, raw_dtype=raw)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
