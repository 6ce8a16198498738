"""`llama`: a stock `LlamaForCausalLM` folder that loads without the MiniMind package.

Dense MiniMind uses Llama's parameter names and math, so the weights are saved
as they are and only config.json changes (`MiniMindConfig.to_llama_dict`).
A mixture-of-experts model has no Llama equivalent and is refused.
"""

from __future__ import annotations

from pathlib import Path

from transformers import LlamaConfig

from ..errors import ExportError
from .hf import write_hf


def require_dense(config, fmt: str) -> None:
    """ExportError for a mixture-of-experts model: Llama-architecture formats have no experts."""
    if getattr(config, "use_moe", False):
        raise ExportError(f"mixture-of-experts models are not supported for this format ({fmt}): "
                          "it is the dense Llama architecture; export as 'hf' instead")


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
