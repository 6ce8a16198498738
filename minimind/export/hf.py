"""`hf`: the MiniMind Hugging Face folder itself, optionally cast to bfloat16/float16.

The folder is what training writes (config.json, model.safetensors,
generation_config.json, tokenizer files), so it reloads with
`AutoModelForCausalLM` once `minimind` is imported. Casting is the only change.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from ..tokenizer import save_tokenizer

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def cast(model: torch.nn.Module, dtype: str | None) -> torch.nn.Module:
    """The model in `dtype` (a copy, so the source stays float32 for the next format)."""
    if dtype in (None, "float32"):
        return model
    return copy.deepcopy(model).to(TORCH_DTYPES[dtype])


def write_hf(model, tokenizer, out_dir: Path, dtype: str | None = None) -> Path:
    """Save `model` (cast to `dtype`) and its tokenizer as a MiniMind folder in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cast(model, dtype).save_pretrained(out_dir, safe_serialization=True)
    save_tokenizer(tokenizer, out_dir, getattr(model.config, "max_position_embeddings", None))
    return out_dir
