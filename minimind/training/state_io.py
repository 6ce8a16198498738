"""Weights and optimizer state in and out of a run, the same with or without FSDP.

Under FSDP2 each process holds a shard; a checkpoint holds the full tensors (gathered
to CPU), so a run saved by N processes resumes in M (or in one) and its model folder
loads like any other.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..chat_format import end_token_ids
from ..errors import TrainingError
import minimind.training.distributed as dist


def is_fsdp(cfg, info) -> bool:
    return info.enabled and cfg.distributed == "fsdp"


def full_model_state(model, base_model, info, cfg) -> dict | None:
    """Every weight of the model (None for an adapter run: peft saves the adapter itself)."""
    if is_fsdp(cfg, info):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if getattr(base_model.config, "tie_word_embeddings", False):
            full.pop("lm_head.weight", None)  # gathered as a separate copy; it is the embedding
        return full
    if cfg.adapter_kind:
        return None
    return dict(base_model.state_dict())


def full_optimizer_state(model, optimizer, info, cfg) -> dict:
    if is_fsdp(cfg, info):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        return get_optimizer_state_dict(model, optimizer,
                                        options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return optimizer.state_dict()


def load_optimizer(optimizer, optim_state: dict, model, cfg) -> None:
    if is_fsdp(cfg, dist.DistInfo(world=int(os.environ.get("WORLD_SIZE", "1")))):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        set_optimizer_state_dict(model, optimizer, optim_state_dict=optim_state,
                                 options=StateDictOptions(full_state_dict=True))
        return
    optimizer.load_state_dict(optim_state)


def load_weights(model, folder: Path, adapter: bool) -> None:
    """Put a checkpoint's weights (full model or adapter) into the freshly built model."""
    from safetensors.torch import load_file

    if adapter:
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(str(folder / "adapter_model.safetensors")))
        return
    weights = load_file(str(folder / "model.safetensors"))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" or not model.config.tie_word_embeddings]
    if missing or unexpected:
        raise TrainingError(f"{folder}: checkpoint does not match the model "
                            f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if model.config.tie_word_embeddings:
        model.tie_weights()


def write_generation_config(folder: Path, tokenizer, model_config=None) -> None:
    """Sampling defaults saved beside a full model, so chat and `generate` stop at the end of a turn
    (an imported model's own end tokens included)."""
    from transformers import GenerationConfig

    eos = end_token_ids(tokenizer, model_config)
    GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=eos or tokenizer.eos_token_id,
                     pad_token_id=tokenizer.pad_token_id, do_sample=True, temperature=0.8, top_p=0.9,
                     top_k=40, repetition_penalty=1.1, max_new_tokens=256).save_pretrained(folder)
