"""`merged`: a LoRA adapter folded into its base (peft `merge_and_unload`), saved as `llama` or `hf`.

After merging, W' = W + (alpha / r) · B·A sits in the ordinary weight and the
result is a plain model that needs neither peft nor the adapter folder. It is
saved as a stock Llama folder when the base is dense and rotary (loads anywhere) and as a
MiniMind folder otherwise, unless asked for one explicitly.
"""

from __future__ import annotations

from pathlib import Path

from ..checkpoint import load_model
from ..errors import ExportError
from .hf import write_hf
from .llama import not_llama_shaped, write_llama

MERGED_AS = ("llama", "hf")


def merge_adapter(folder: Path, adapter: Path):
    """Base model with `adapter` merged in (float32, eval mode); no LoRA module remains."""
    model = load_model(folder, adapter=adapter, merge=True)
    leftover = [name for name, _ in model.named_parameters() if "lora_" in name]
    if leftover:
        raise ExportError(f"{adapter}: LoRA weights remain after merging ({leftover[0]}, ...)")
    return model


def default_merged_as(config) -> str:
    return "hf" if not_llama_shaped(config) else "llama"


def write_merged(model, tokenizer, out_dir: Path, adapter: Path | None, merged_as: str | None = None,
                 dtype: str | None = None) -> Path:
    """Save an already merged model; `adapter` must be set (a merge of nothing is refused)."""
    if adapter is None:
        raise ExportError("format 'merged' needs a LoRA adapter: pass --adapter DIR "
                          "(or give the adapter folder as --model)")
    merged_as = merged_as or default_merged_as(model.config)
    if merged_as not in MERGED_AS:
        raise ExportError(f"merged exports are saved as one of {', '.join(MERGED_AS)}, not {merged_as!r}")
    writer = write_llama if merged_as == "llama" else write_hf
    return writer(model, tokenizer, out_dir, dtype)
