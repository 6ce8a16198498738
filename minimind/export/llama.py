"""`llama`: a stock transformers folder that loads without the MiniMind package: `LlamaForCausalLM`,
or for a model imported from another family (minimind.hub) that family's own class, so a Qwen2
import leaves as `Qwen2ForCausalLM` with its biases.

Dense MiniMind uses these families' parameter names and math, so the weights are saved
as they are and only config.json changes (`minimind.hub.families.hf_config_dict`).
A mixture-of-experts model, or one whose positions are not rotary (ALiBi,
sinusoidal, learned, none), has no Llama equivalent and is refused.
"""

from __future__ import annotations

from pathlib import Path

from transformers import CONFIG_MAPPING, PretrainedConfig

from ..errors import ExportError
from ..hub.families import ARCHITECTURE, hf_config_dict, legacy_rope
from ..llama_shape import family_of, not_llama_shaped
from .hf import write_hf


def family_name(config) -> str:
    """The transformers class an export of this model is (LlamaForCausalLM, Qwen2ForCausalLM, ...)."""
    return ARCHITECTURE[family_of(config)]


def require_dense(config, fmt: str) -> None:
    """ExportError for a model the Llama-architecture formats cannot hold (experts, non-rotary positions)."""
    reason = not_llama_shaped(config)
    if reason:
        raise ExportError(f"{reason} for this format ({fmt}): it is the dense rotary Llama architecture; "
                          "export as 'hf' instead")


def llama_config(config, dtype: str | None = None) -> PretrainedConfig:
    """The transformers config (Llama's, or the imported family's) holding the same shape as a dense
    MiniMindConfig."""
    require_dense(config, "llama")
    if config.model_type == "llama":
        values = config.to_dict()
    else:
        try:
            values = hf_config_dict(config)
        except ValueError as err:
            raise ExportError(f"{err}; export as 'hf' instead") from err
    values["dtype"] = dtype or "float32"
    skip = ("model_type", *LEGACY_ROPE_KEYS)  # given to 5.x they would override rope_parameters
    cfg = CONFIG_MAPPING[values["model_type"]](**{k: v for k, v in values.items() if k not in skip})
    return with_legacy_rope(cfg)


LEGACY_ROPE_KEYS = ("rope_theta", "rope_scaling")


def with_legacy_rope(cfg: PretrainedConfig) -> PretrainedConfig:
    """`cfg` whose config.json also holds its rotary settings in transformers 4.x's keys (`rope_theta`,
    `rope_scaling`), beside 5.x's `rope_parameters`, so both versions load the same frequencies.
    5.x keeps only `rope_parameters` (its `rope_scaling` is a property over it), so the 4.x values
    are plain instance entries, which `to_dict` and `save_pretrained` write as they are."""
    legacy = legacy_rope(cfg.rope_parameters)
    vars(cfg).update(legacy)
    return cfg


def write_llama(model, tokenizer, out_dir: Path, dtype: str | None = None) -> Path:
    """Save `model` as a stock transformers folder: MiniMind weights (same names) + the family's config.json."""
    cfg = llama_config(model.config, dtype)
    write_hf(model, tokenizer, out_dir, dtype)
    cfg.save_pretrained(out_dir)  # replaces the MiniMind config.json
    return out_dir
