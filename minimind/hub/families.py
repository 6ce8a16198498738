"""The Hugging Face decoder families an import takes, and how each one's config.json maps onto
`MiniMindConfig` and back.

Llama, Mistral, Qwen2 and Qwen3 share Llama's block (pre-norm RMSNorm, rotary grouped-query
attention, SwiGLU) and its parameter names; they differ in a few switches, which MiniMind has
as options: Qwen2 puts biases on q/k/v, Qwen3 normalises each head's queries and keys, Mistral
may slide its attention window, Llama 3.x scales its rotary frequencies. A config is read
through transformers' own config class (no remote code), so its defaults and both spellings of
the rotary settings (`rope_scaling` + `rope_theta`, or `rope_parameters`) are understood as
transformers understands them. Anything that changes the math and is not mapped is refused
with a sentence that names it.
"""

from __future__ import annotations

from transformers import CONFIG_MAPPING

from ..config import MiniMindConfig
from ..errors import CheckpointError

# architecture in config.json -> (family, model_type)
FAMILIES = {
    "LlamaForCausalLM": ("llama", "llama"),
    "MistralForCausalLM": ("mistral", "mistral"),
    "Qwen2ForCausalLM": ("qwen2", "qwen2"),
    "Qwen3ForCausalLM": ("qwen3", "qwen3"),
}
ARCHITECTURE = {family: arch for arch, (family, _) in FAMILIES.items()}
MODEL_TYPE = {family: model_type for family, model_type in FAMILIES.values()}
SUPPORTED = ", ".join(FAMILIES)
ROPE_TYPES = {"default": None, "linear": "linear", "llama3": "llama3"}


def refuse(source: str, what: str) -> CheckpointError:
    return CheckpointError(f"{source}: {what}. The studio imports {SUPPORTED} with safetensors weights.")


def family_of(raw: dict, source: str) -> str:
    """The family of a config.json (as a dict); CheckpointError naming what is unsupported."""
    if raw.get("auto_map"):
        raise refuse(source, "this model needs its own Python code (auto_map), which the studio never runs")
    architectures = raw.get("architectures") or []
    if not architectures:
        raise refuse(source, "config.json names no architecture")
    arch = architectures[0]
    if arch not in FAMILIES:
        kind = "a mixture-of-experts model" if "moe" in arch.lower() else "a model"
        raise refuse(source, f"{arch} is {kind} of a family the studio does not run")
    family, model_type = FAMILIES[arch]
    if raw.get("model_type") != model_type:
        raise refuse(source, f"config.json says {arch} but model_type {raw.get('model_type')!r}")
    if raw.get("quantization_config"):
        method = raw["quantization_config"].get("quant_method", "quantized")
        raise refuse(source, f"the weights are {method}-quantized; import the full-precision model "
                             "(QLoRA quantizes it on the fly)")
    return family


def config_from_hf(raw: dict, source: str, generation: dict | None = None) -> MiniMindConfig:
    """The MiniMindConfig computing exactly what the source's config describes. `generation`: its
    generation_config.json, whose end tokens (several for chat models) are the ones that end an answer."""
    family = family_of(raw, source)
    try:
        hf = CONFIG_MAPPING[MODEL_TYPE[family]].from_dict(dict(raw))
    except (TypeError, ValueError, KeyError) as err:
        raise refuse(source, f"config.json does not read as a {ARCHITECTURE[family]} config ({err})") from err
    if getattr(hf, "hidden_act", "silu") != "silu":
        raise refuse(source, f"activation {hf.hidden_act!r} is not supported (SwiGLU with silu only)")
    if getattr(hf, "mlp_bias", False):
        raise refuse(source, "biases on the MLP (mlp_bias) are not supported")
    if getattr(hf, "use_sliding_window", False):
        raise refuse(source, "per-layer sliding windows (use_sliding_window) are not supported")
    rope = dict(hf.rope_parameters or {})
    rope_type = rope.get("rope_type", "default")
    if rope_type not in ROPE_TYPES:
        raise refuse(source, f"rotary scaling {rope_type!r} is not supported (default, linear and llama3 are)")
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise refuse(source, "partial rotary embeddings (partial_rotary_factor) are not supported")
    heads = hf.num_attention_heads
    values = dict(
        family=family, vocab_size=hf.vocab_size, hidden_size=hf.hidden_size,
        intermediate_size=hf.intermediate_size, num_hidden_layers=hf.num_hidden_layers,
        num_attention_heads=heads, num_key_value_heads=hf.num_key_value_heads or heads,
        head_dim=getattr(hf, "head_dim", None) or hf.hidden_size // heads,
        max_position_embeddings=hf.max_position_embeddings, rms_norm_eps=hf.rms_norm_eps,
        rope_theta=float(rope.get("rope_theta", 10000.0)), rope_scaling_type=ROPE_TYPES[rope_type],
        tie_word_embeddings=bool(hf.tie_word_embeddings), initializer_range=hf.initializer_range,
        pad_token_id=hf.pad_token_id, bos_token_id=hf.bos_token_id, eos_token_id=hf.eos_token_id,
    )
    if rope_type != "default":
        values["rope_scaling_factor"] = float(rope["factor"])
    if rope_type == "llama3":
        values.update(rope_low_freq_factor=float(rope["low_freq_factor"]),
                      rope_high_freq_factor=float(rope["high_freq_factor"]),
                      rope_original_max_position=int(rope["original_max_position_embeddings"]))
    if family == "qwen2":
        values["attention_bias"] = True                     # q/k/v always carry biases, o never
    elif family in ("llama", "qwen3"):
        values["attention_bias"] = values["attention_out_bias"] = bool(hf.attention_bias)
    if family == "qwen3":
        values["qk_norm"] = True
    if family == "mistral":
        values["sliding_window"] = hf.sliding_window
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if generation and generation.get(name) is not None:
            values[name] = generation[name]
    values["dtype"] = str(hf.dtype).replace("torch.", "") if hf.dtype else "float32"
    try:
        return MiniMindConfig(**values)
    except ValueError as err:
        raise refuse(source, str(err)) from err


def hf_config_dict(config: MiniMindConfig) -> dict:
    """config.json of the family `config` came from (Llama for a model born here), holding the same
    weights: what an export writes, so a Qwen2 import leaves as a Qwen2 model, biases and all."""
    family = getattr(config, "family", None) or "llama"
    values = config.to_llama_dict() if family == "llama" else config.hf_fields()
    values["architectures"], values["model_type"] = [ARCHITECTURE[family]], MODEL_TYPE[family]
    values.update(legacy_rope(values["rope_parameters"]))
    if family == "mistral":
        _need(config, family, not (config.attention_bias or config.attention_out_bias or config.qk_norm))
        values["sliding_window"] = config.sliding_window
    elif family == "qwen2":
        _need(config, family, config.attention_bias and not config.attention_out_bias and not config.qk_norm
              and not config.sliding_window)
        values.update(use_sliding_window=False, sliding_window=None)
    elif family == "qwen3":
        _need(config, family, config.qk_norm and config.attention_bias == config.attention_out_bias
              and not config.sliding_window)
        values.update(attention_bias=config.attention_bias, use_sliding_window=False, sliding_window=None)
    return values


def legacy_rope(rope: dict) -> dict:
    """`rope_parameters` (what transformers 5.x reads) spelled as transformers 4.x reads it, `rope_theta` +
    `rope_scaling`: 4.x ignores `rope_parameters` and would silently run theta 10000 unscaled. Linear
    scaling is written as exactly `type` + `factor`, the only form 4.40-4.42 accept; 5.x reads
    `rope_scaling` first, so the two forms must say the same."""
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind == "default":
        scaling = None
    elif kind == "linear":
        scaling = {"type": "linear", "factor": rope["factor"]}
    else:
        scaling = {"rope_type": kind, **{k: v for k, v in rope.items() if k not in ("rope_theta", "rope_type", "type")}}
    return {"rope_theta": rope["rope_theta"], "rope_scaling": scaling}


def _need(config: MiniMindConfig, family: str, holds: bool) -> None:
    if not holds:
        raise ValueError(f"this model's attention options (biases, q/k norms, window) no longer match the "
                         f"{ARCHITECTURE[family]} layout it was imported from")
