"""How the model of a run is built and which of its weights train: fresh weights
(pretrain, or a distilled student of a preset), a loaded model trained whole, or a
loaded model (4-bit for QLoRA) frozen under LoRA adapters. What is optimised is
the objective's business (objectives/); the loop is the same for every mode."""

from __future__ import annotations

import torch

from ..checkpoint import (
    adapter_base,
    check_model_folder,
    is_adapter,
    load_model,
    load_tokenizer_for,
)
from ..classifier import classifier_from
from ..config import MiniMindConfig
from ..errors import CheckpointError, ConfigError
from ..lstm import LSTM_MODEL_TYPE, MiniMindLSTMConfig, MiniMindLSTMForCausalLM, is_lstm
from ..model import MiniMindForCausalLM
from ..vocabulary import resize_model


def new_model(config, tokenizer) -> MiniMindForCausalLM | MiniMindLSTMForCausalLM:
    """A freshly initialised model of the configured architecture and preset, sized to the
    tokenizer. Its declared context is the length of its training rows (`data.seq_len`): a rotary
    model is not known to hold a longer one (held-out BPC of 256-token-trained models rose 9-25 %
    at 1024 tokens), unless `model.overrides` sets `max_position_embeddings` on purpose. (For an
    LSTM it is nominal: chat bounds prompts by it, the state itself reaches any length.)"""
    overrides = {"max_position_embeddings": config.data.seq_len} if config.data.seq_len else {}
    overrides.update(config.model.overrides)
    lstm = config.model.architecture == "lstm"
    config_class, model_class = ((MiniMindLSTMConfig, MiniMindLSTMForCausalLM) if lstm
                                 else (MiniMindConfig, MiniMindForCausalLM))
    try:
        model_config = config_class.from_preset(
            config.model.preset, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **overrides)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"model: {err}") from err
    torch.manual_seed(config.seed)
    model = model_class(model_config)
    if config.model.zero_init:  # (a new transformer only: TrainConfig.validate)
        zero_projections(model)
    return model


def zero_projections(model) -> None:
    """Every block's last projections (attention output, MLP or expert down) set to zero: the
    residual stream starts as the embeddings alone, and each block grows its part from there."""
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in ("o_proj", "down_proj"):
                module.weight.zero_()
                if module.bias is not None:
                    module.bias.zero_()


def build_model(config, tokenizer, device: str, precision_dtype: torch.dtype, classes: list[str] = ()):
    """The model to train, on `device`, with only the weights of this mode trainable. Mode classify
    builds a classifier of `classes` (the labelled corpus's, in id order) on the starting model's
    decoder (minimind.classifier.classifier_from: a new head unless it already classifies these)."""
    adapter = config.adapter_kind
    if config.new_model:
        return new_model(config, tokenizer).to(device)
    if adapter == "qlora":
        _refuse_lstm_qlora(config.model.init_from)
        model = _load_4bit(config.model.init_from, precision_dtype, device)
    else:
        # a run started from an adapter run trains on base + that adapter merged (new adapters, or
        # new token rows, go on a plain model)
        model = load_model(config.model.init_from, device=device, merge=True).train()
    if config.objective == "classify":
        model = _as_classifier(model, classes, config.seed, config.classify.pooling)
    new_ids = []
    if config.model.extend_vocab:
        new_ids = resize_model(model, load_tokenizer_for(config.model.init_from), tokenizer)
    elif len(tokenizer) > model.config.vocab_size:
        raise ConfigError(f"the tokenizer has {len(tokenizer)} tokens but the model only "
                          f"{model.config.vocab_size}: use the model's own tokenizer")
    if adapter:
        model = add_lora(model, config, qlora=adapter == "qlora", new_token_ids=new_ids)
    return model


def _as_classifier(model, classes, seed: int, pooling: str):
    """The loaded model as a classifier of `classes`; ConfigError when there are none (not a labelled corpus)."""
    if len(classes) < 2:
        raise ConfigError("task classify trains on a labelled corpus (a text and a label field, two or more "
                          "classes); this corpus has no labels")
    return classifier_from(model, list(classes), seed, pooling)


def _refuse_lstm_qlora(path: str) -> None:
    """QLoRA quantizes linear layers to 4 bits under adapters; an LSTM's recurrent weights are no
    linear layers (bitsandbytes and peft cannot touch nn.LSTM), so it is refused before loading."""
    import json

    folder = check_model_folder(adapter_base(path) if is_adapter(path) else path)
    if json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type") == LSTM_MODEL_TYPE:
        raise ConfigError("QLoRA does not apply to an LSTM model (its recurrent weights are not linear layers "
                          "that 4-bit quantization or LoRA can adapt): use mode sft (full fine-tune), or mode "
                          "lora on an LSTM with use_attention")


def _load_4bit(path: str, compute_dtype: torch.dtype, device: str):
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    folder = check_model_folder(path)
    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                               bnb_4bit_compute_dtype=compute_dtype, bnb_4bit_use_double_quant=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, quantization_config=quant, dtype=compute_dtype,
                                                     device_map={"": device}, use_safetensors=True)
    except (OSError, ValueError, RuntimeError, ImportError) as err:
        raise CheckpointError(f"{folder}: cannot load it in 4-bit ({err})") from err
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def add_lora(model, config, qlora: bool = False, new_token_ids: list[int] = ()):
    """Freeze the base and add LoRA adapters on the configured linear layers; the rows of tokens
    added to the vocabulary (`new_token_ids`) train too (peft's trainable tokens: the embedding
    rows, and the output rows tied to them), and the adapter carries them."""
    from peft import LoraConfig, get_peft_model

    targets = _lora_targets(model, config.lora.target_modules)
    torch.manual_seed(config.seed)
    classify = config.objective == "classify"  # the classifier's new head trains whole, and the adapter keeps it
    lora = LoraConfig(r=config.lora.rank, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
                      target_modules=targets, task_type="SEQ_CLS" if classify else "CAUSAL_LM", bias="none",
                      modules_to_save=["score"] if classify else None,
                      trainable_token_indices=_token_rows(model, new_token_ids))
    peft_model = get_peft_model(model, lora)
    # peft records the folder the base came from: the saved adapter names its base.
    peft_model.peft_config["default"].base_model_name_or_path = str(config.model.init_from)
    return peft_model


def _lora_targets(model, targets) -> list[str]:
    """The configured LoRA targets. peft cannot adapt nn.LSTM, so an LSTM model's adapters go on its
    attention's projections (q_proj, k_proj, v_proj, o_proj) where it has them and the
    configuration names them; without any, ConfigError says what to do instead."""
    targets = list(targets)
    if not is_lstm(model):
        return targets
    present = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    usable = [t for t in targets if t in present and t != "lm_head"]
    if not usable:
        has_attention = bool(getattr(model.config, "use_attention", False))
        raise ConfigError(
            "LoRA cannot adapt an LSTM's recurrent weights (peft has no LoRA for nn.LSTM), and this model has "
            + ("none of lora.target_modules among its attention projections q_proj, k_proj, v_proj, o_proj: "
               "name some of those" if has_attention else "no attention layers to adapt: fine-tune every weight "
               "with mode sft instead (or train an LSTM with model.overrides use_attention: true)"))
    return usable


def _token_rows(model, ids) -> list[int] | dict[str, list[int]] | None:
    """peft's trainable_token_indices for `ids`: the input embedding (which a tied output layer
    follows), or both layers by name when they are not tied."""
    if not ids:
        return None
    if model.config.tie_word_embeddings:
        return list(ids)
    return {"embed_tokens": list(ids), "lm_head": list(ids)}


def trainable_parameters(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def count_parameters(model) -> tuple[int, int]:
    """(trainable, total) parameter counts; 4-bit weights count as their logical size."""
    trainable = total = 0
    for p in model.parameters():
        n = p.numel() * (2 if p.dtype == torch.uint8 else 1)  # packed NF4: two weights per byte
        total += n
        if p.requires_grad:
            trainable += n
    return trainable, total
