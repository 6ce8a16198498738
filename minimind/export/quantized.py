"""`int8`, `bnb-8bit`, `bnb-nf4`: weight-quantized Hugging Face folders that `from_pretrained` reloads.

Dense rotary models are written in Llama form (config.json from `to_llama_dict`), so
stock transformers loads them without the MiniMind package; a mixture-of-experts
model, or one with other positions, keeps its MiniMind form. Only the linear layers of the decoder are
quantized: embeddings, norms and the LM head (tied to the embedding by default)
keep `dtype`, as both libraries do by default.

int8 storage (torchao): `quantize_` with `Int8WeightOnlyConfig` turns each
linear weight into an `Int8Tensor` (int8 values + a float scale per output
row). torchao flattens those into plain tensors (`…_weight_qdata`,
`…_weight_scale`) plus JSON metadata describing them, which we write with
`safetensors`; config.json carries the `TorchAoConfig`, so transformers rebuilds
the `Int8Tensor`s on load. Nothing is pickled: the metadata is JSON and torchao
only rebuilds classes from a fixed allow-list.

bitsandbytes quantizes while loading, so the float model is written to a
temporary folder beside the output, reloaded with a `BitsAndBytesConfig`, and
saved (bitsandbytes' own safetensors layout, which `from_pretrained` reads).
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from torch import nn

from ..tokenizer import save_tokenizer
from .hf import TORCH_DTYPES, cast, write_hf
from .llama import llama_config, not_llama_shaped, with_legacy_rope, write_llama


def _is_dense(config) -> bool:
    """Written in Llama form: dense and rotary (anything else keeps its MiniMind form)."""
    return not_llama_shaped(config) is None


def keep_float(config) -> list[str]:
    """Module names (suffixes) left unquantized: the LM head and, in MoE models, the routers."""
    return ["lm_head"] + (["mlp.gate"] if getattr(config, "use_moe", False) else [])


def _int8_config():
    from torchao.quantization import Int8WeightOnlyConfig

    # set_inductor_config=False: leave torch.compile's process-wide settings alone
    return Int8WeightOnlyConfig(set_inductor_config=False)


def write_int8(model, tokenizer, out_dir: Path, dtype: str | None = None) -> Path:
    """torchao int8 weight-only (per-row scales) in safetensors, reloadable by transformers."""
    from safetensors.torch import save_file
    from torchao.prototype.safetensors.safetensors_support import flatten_tensor_state_dict
    from torchao.quantization import quantize_
    from transformers import TorchAoConfig

    out_dir.mkdir(parents=True, exist_ok=True)
    quantized = cast(model, dtype)
    if quantized is model:
        quantized = copy.deepcopy(model)
    skip = keep_float(model.config)
    quantize_(quantized, _int8_config(), filter_fn=lambda module, fqn: isinstance(module, nn.Linear)
              and not any(fqn == s or fqn.endswith("." + s) for s in skip))
    state = quantized.state_dict()
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # the embedding matrix, saved once
    tensors, metadata = flatten_tensor_state_dict(state)
    tensors = {name: t.contiguous() for name, t in tensors.items()}
    save_file(tensors, out_dir / "model.safetensors", metadata={"format": "pt", **metadata})

    config = llama_config(model.config, dtype) if _is_dense(model.config) else copy.deepcopy(model.config)
    config.dtype = dtype or "float32"
    config.quantization_config = TorchAoConfig(_int8_config(), modules_to_not_convert=skip).to_dict()
    config.save_pretrained(out_dir)
    model.generation_config.save_pretrained(out_dir)
    save_tokenizer(tokenizer, out_dir)
    return out_dir


NF4_BLOCK = 64  # weights per NF4 block


def nf4_unblockable(model) -> list[str]:
    """Linear layers whose rows do not split into whole NF4 blocks (e.g. the `pico` preset's FFN
    input of 352): bitsandbytes' CPU path quantizes them but cannot run them after a reload
    ("shape '[128, 5]' is invalid"), so they stay in float like the LM head."""
    return [name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and module.in_features % NF4_BLOCK]


def bnb_config(fmt: str, config, dtype: str | None = None, keep: list[str] = ()):
    """The BitsAndBytesConfig for `bnb-8bit` (LLM.int8) or `bnb-nf4` (4-bit NormalFloat)."""
    from transformers import BitsAndBytesConfig

    if fmt == "bnb-8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=keep_float(config))
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_compute_dtype=TORCH_DTYPES[dtype or "float32"],
                              llm_int8_skip_modules=keep_float(config) + list(keep))


def write_bnb(model, tokenizer, out_dir: Path, fmt: str, dtype: str | None = None) -> Path:
    """A bitsandbytes-quantized folder (`fmt` is "bnb-8bit" or "bnb-nf4")."""
    from transformers import AutoModelForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=f".{out_dir.name}-float-") as tmp:
        writer = write_llama if _is_dense(model.config) else write_hf
        writer(model, tokenizer, Path(tmp), dtype)
        quantized = AutoModelForCausalLM.from_pretrained(
            tmp, quantization_config=bnb_config(fmt, model.config, dtype, nf4_unblockable(model)), dtype=TORCH_DTYPES[dtype or "float32"],
            device_map="cpu", use_safetensors=True, trust_remote_code=False)
        if writer is write_llama:  # (reloaded by 5.x, the config kept only rope_parameters: 4.x would run theta 10000)
            with_legacy_rope(quantized.config)
        quantized.save_pretrained(out_dir, safe_serialization=True)
    save_tokenizer(tokenizer, out_dir)
    return out_dir
