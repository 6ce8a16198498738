"""The model half of a GGUF file: the architecture llama.cpp runs a model's family as, the shape
keys, and the weights under llama.cpp's tensor names. The export (export/gguf.py) adds the
tokenizer; the engine's llama.cpp contexts (inference/gguf_context.py) write placeholder pieces instead,
since it feeds llama.cpp token ids.

Families (an import's, see minimind.hub; a model born here is Llama):
- llama, mistral -> `llama`. Hugging Face Llama rotates the two halves of each head (dimension i
  with i + d/2); llama.cpp's `llama` rotates adjacent pairs (2i with 2i+1), so the rows of each head
  of q_proj and k_proj are reordered, and transformers' GGUF loader undoes exactly this when it
  reads the file back, which is how verification checks it. Llama 3's rotary scaling travels as
  llama.cpp's `rope_freqs` tensor: the factor each frequency is divided by.
- qwen2 -> `qwen2` (q/k/v biases), qwen3 -> `qwen3` (per-head q/k RMSNorm, its own head size). Both
  rotate halves in llama.cpp too, so no rows move.

Types: vectors (norms, biases, rope factors) stay float32, as llama.cpp expects; matrices are
float16, or Q8_0 (32-weight blocks of int8 with one float16 scale) when a row is a multiple of 32
long, float16 otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from .errors import ExportError
from .llama_shape import family_of, not_llama_shaped

Q8_BLOCK = 32
ARCHITECTURES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
HALF_SPLIT = {"qwen2", "qwen3"}  # llama.cpp architectures that rotate halves as transformers does


def gguf_file_name(qtype: str, stem: str = "model") -> str:
    return f"{stem}-{qtype}.gguf"


def gguf_architecture(config) -> str:
    return ARCHITECTURES.get(family_of(config), "llama")


def rotary_to_interleaved(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Reorder q/k projection rows per head from half-split pairs (i, i+d/2) to adjacent pairs."""
    rows, cols = weight.shape
    half = rows // n_heads // 2
    return weight.reshape(n_heads, 2, half, cols).transpose(1, 2).reshape(rows, cols)


def architecture_refusal(config) -> str | None:
    """Why the GGUF architecture of this model's family cannot compute what it computes (None when it can)."""
    family = family_of(config)
    arch = gguf_architecture(config)
    bias, out_bias = getattr(config, "attention_bias", False), getattr(config, "attention_out_bias", False)
    qk_norm = getattr(config, "qk_norm", False)
    if (arch == "llama" and (bias or out_bias or qk_norm)) or (arch == "qwen2" and (out_bias or qk_norm)) \
            or (arch == "qwen3" and (bias or out_bias or not qk_norm)):
        return (f"GGUF export of a {family} model with these options (attention biases {bias}/{out_bias}, "
                f"q/k norms {qk_norm}) is not supported: llama.cpp's {arch} has other ones")
    if getattr(config, "rope_scaling_type", None) == "llama3" and arch != "llama":
        return f"GGUF export of Llama 3's rotary scaling on a {family} model is not supported"
    window = getattr(config, "sliding_window", None)
    context = getattr(config, "max_position_embeddings", 0)
    if window and window < context:
        return (f"GGUF export of a sliding attention window ({window} tokens) shorter than the context "
                f"({context}) is not supported: llama.cpp runs {family} models with full attention")
    return None


def llama3_rope_factors(config) -> np.ndarray:
    """What llama.cpp divides each rotary frequency by for Llama 3's scaling (`rope_freqs`): 1 for
    short wavelengths, the factor for long ones, a smooth blend between, as transformers computes it."""
    dim = config.head_dim
    inv_freq = 1.0 / config.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    original = config.rope_original_max_position
    low, high = original / config.rope_low_freq_factor, original / config.rope_high_freq_factor
    factor = config.rope_scaling_factor
    factors = []
    for freq in inv_freq:
        wavelength = 2 * math.pi / freq
        if wavelength < high:
            factors.append(1.0)
        elif wavelength > low:
            factors.append(factor)
        else:
            smooth = (original / wavelength - config.rope_low_freq_factor) / (
                config.rope_high_freq_factor - config.rope_low_freq_factor)
            factors.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.asarray(factors, dtype=np.float32)


def tensor_names(config, arch: str, params) -> dict[str, str]:
    """Our parameter name -> llama.cpp tensor name."""
    from gguf import MODEL_ARCH, MODEL_ARCH_NAMES, get_tensor_name_map

    arch_id = next(a for a, name in MODEL_ARCH_NAMES.items() if name == arch and a in MODEL_ARCH)
    names = get_tensor_name_map(arch_id, config.num_hidden_layers)
    out = {}
    for param in params:
        name = names.get_name(param, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ExportError(f"GGUF ({arch}) has no tensor for {param}")
        out[param] = name
    return out


def encode(array: np.ndarray, qtype: str):
    """(data, raw GGML type or None) for one tensor."""
    from gguf import GGMLQuantizationType, quants

    if array.ndim == 1 or qtype == "f32":  # f32: the engine's exact llama.cpp decoder (inference/gguf_context.py)
        return array.astype(np.float32), None
    if qtype == "q8_0" and array.shape[-1] % Q8_BLOCK == 0:
        return quants.quantize(array.astype(np.float32), GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0
    return array.astype(np.float16), None


def write_shape(writer, config) -> None:
    import gguf

    rope = config.rope_dict()
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
    writer.add_rope_freq_base(rope["rope_theta"])  # "ntk" is folded into the base
    if rope["rope_type"] == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["factor"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)


def write_draft_gguf(model, out_dir: Path, qtype: str = "q8_0") -> Path:
    """A GGUF of the model's weights alone, for llama.cpp to run on token ids (the engine's draft in
    q8_0, its exact decoder in f32: minimind/inference/gguf_context.py): its vocabulary is
    placeholders, since nothing reads text."""
    reason = not_llama_shaped(model.config) or architecture_refusal(model.config)
    if not reason and not hasattr(model.config, "rope_dict"):  # a stock transformers model (minimind.hub imports as MiniMind)
        reason = f"the GGUF writer reads MiniMind configs, not {type(model.config).__name__}"
    if reason:
        raise ExportError(reason)
    vocab = placeholder_vocab(model.config.vocab_size)
    return write_model_file(model, out_dir / gguf_file_name(qtype, "draft"), qtype, "MiniMind draft",
                            lambda writer: write_vocab(writer, vocab))


def write_model_file(model, path: Path, qtype: str, name: str, write_tokenizer) -> Path:
    """The GGUF at `path`: shape, `write_tokenizer(writer)`'s keys, then the weights."""
    import gguf

    config = model.config
    arch = gguf_architecture(config)
    state = {k: v for k, v in model.state_dict().items()
             # llama.cpp reuses token_embd as the output matrix when output.weight is absent
             if not (k == "lm_head.weight" and config.tie_word_embeddings)}
    names = tensor_names(config, arch, state)
    path.parent.mkdir(parents=True, exist_ok=True)

    writer = gguf.GGUFWriter(path, arch)
    writer.add_name(name)
    writer.add_file_type({"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f32": gguf.LlamaFileType.ALL_F32}.get(
        qtype, gguf.LlamaFileType.MOSTLY_F16))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    write_shape(writer, config)
    write_tokenizer(writer)

    if getattr(config, "rope_scaling_type", None) == "llama3":
        writer.add_tensor(gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight", llama3_rope_factors(config))
    interleave = arch not in HALF_SPLIT
    for param, tensor in state.items():
        weight = tensor.detach().float()
        if interleave and param.endswith("self_attn.q_proj.weight"):
            weight = rotary_to_interleaved(weight, config.num_attention_heads)
        elif interleave and param.endswith("self_attn.k_proj.weight"):
            weight = rotary_to_interleaved(weight, config.num_key_value_heads)
        data, raw = encode(weight.numpy(), qtype)
        writer.add_tensor(names[param], data, raw_dtype=raw)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def placeholder_vocab(vocab_size: int) -> dict:
    """A `vocab_metadata`-shaped vocabulary of `vocab_size` placeholder pieces, for a GGUF that
    llama.cpp runs on token ids alone (sentencepiece style: a list and scores, no merges)."""
    from gguf import TokenType

    return {"model": "llama", "pre": "default", "tokens": [f"[ID{i}]" for i in range(vocab_size)],
            "types": [TokenType.NORMAL] * vocab_size, "scores": [0.0] * vocab_size,
            "add_bos": False, "add_eos": False}


def write_vocab(writer, vocab: dict) -> None:
    """The `tokenizer.ggml.*` keys of `vocab_metadata`'s result."""
    writer.add_tokenizer_model(vocab["model"])
    writer.add_tokenizer_pre(vocab["pre"])
    writer.add_token_list(vocab["tokens"])
    writer.add_token_types(vocab["types"])
    if "merges" in vocab:
        writer.add_token_merges(vocab["merges"])
    if "scores" in vocab:
        writer.add_token_scores(vocab["scores"])
        writer.add_add_space_prefix(True)
    writer.add_add_bos_token(vocab["add_bos"])
    writer.add_add_eos_token(vocab["add_eos"])
