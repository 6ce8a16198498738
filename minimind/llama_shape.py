"""Whether a model has the Llama shape, and which Hugging Face family it exports as: questions the
exporters and the engine's llama.cpp draft both ask of a config."""

from __future__ import annotations


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


def family_of(config) -> str:
    """The Hugging Face family a model's folder exports as: its import's, else Llama."""
    return getattr(config, "family", None) or "llama"
