"""`llama`: a stock `LlamaForCausalLM` folder that loads without the MiniMind package.

Dense MiniMind uses Llama's parameter names and math, so the weights are saved
as they are and only config.json changes (`MiniMindConfig.to_llama_dict`).
A mixture-of-experts model, or one whose positions are not rotary (ALiBi,
sinusoidal, learned, none), has no Llama equivalent and is refused.
"""

from __future__ import annotations

from pathlib import Path

from transformers import LlamaConfig

from ..errors import ExportError
from .hf import write_hf


def not_llama_shaped(config) -> str | None:
    """Why a model has no Llama equivalent (None when it has one): Llama is one dense MLP per
    block and rotary positions, nothing else."""
    if getattr(config, "model_type", "minimind") not in ("minimind", "llama"):
        return f"{config.model_type!r} models are not Llama-shaped"
    if getattr(config, "use_moe", False):
        return "mixture-of-experts models are not supported"
    encoding = getattr(config, "position_encoding", "rope")
    if encoding != "rope":
        return f"models with {encoding!r} positions are not supported"
    return None


def require_dense(config, fmt: str) -> None:
    """ExportError for a model the Llama-architecture formats cannot hold (experts, non-rotary positions)."""
    reason = not_llama_shaped(config)
    if reason:
        raise ExportError(f"{reason} for this format ({fmt}): it is the dense rotary Llama architecture; "
                          "export as 'hf' instead")


def llama_config(config, dtype: str | None = None) -> LlamaConfig:
    """The LlamaConfig holding the same shape as a dense MiniMindConfig."""
    require_dense(config, "llama")
    values = config.to_llama_dict()
    values["dtype"] = dtype or "float32"
    return LlamaConfig(**values)


def write_llama(model, tokenizer, out_dir: Path, dtype: str | None = None) -> Path:
    """Save `model` as a Llama folder: MiniMind weights (same names) + a Llama config.json."""
    cfg = llama_config(model.config, dtype)
    write_hf(model, tokenizer, out_dir, dtype)
    cfg.save_pretrained(out_dir)  # replaces the MiniMind config.json
    return out_dir
