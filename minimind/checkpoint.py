"""Open a checkpoint folder safely: a Hugging Face model folder or a peft adapter folder.

Only safetensors weights are read (never a pickle) and no remote code runs.
Every failure is a `CheckpointError` that says what is missing and where.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .classifier import CLASSIFIER_ARCHITECTURE, classifier_from, read_adapter_labels
from .errors import CheckpointError
from .tokenizer import load_tokenizer

SUPPORTED_MODEL_TYPES = ("minimind", "minimind-lstm", "llama")


def is_adapter(path: str | Path) -> bool:
    return (Path(path) / "adapter_config.json").is_file()


def check_model_folder(path: str | Path) -> Path:
    """Raise CheckpointError unless `path` holds config.json + safetensors weights of a known type."""
    folder = Path(path)
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such model folder")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{folder}: not a model folder (no config.json)")
    try:
        model_type = json.loads(config_file.read_text(encoding="utf-8")).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{config_file}: unreadable config.json ({err})") from err
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(f"{folder}: model_type {model_type!r} is not supported "
                              f"(expected one of {', '.join(SUPPORTED_MODEL_TYPES)})")
    if not any(folder.glob("*.safetensors")):
        pickles = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        hint = f" (found {', '.join(pickles)}: pickled weights are refused)" if pickles else ""
        raise CheckpointError(f"{folder}: no .safetensors weights{hint}")
    return folder


def adapter_base(path: str | Path) -> str:
    """The base model folder a peft adapter names in its adapter_config.json."""
    cfg = json.loads((Path(path) / "adapter_config.json").read_text(encoding="utf-8"))
    base = cfg.get("base_model_name_or_path")
    if not base:
        raise CheckpointError(f"{path}: adapter_config.json does not name its base model")
    return base


def is_classifier(path: str | Path) -> bool:
    """Whether a folder holds a sequence classifier: a model folder whose config.json names
    MiniMindForSequenceClassification, or a LoRA adapter trained for classification (SEQ_CLS)."""
    folder = Path(path)
    try:
        if is_adapter(folder):
            config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
            return config.get("task_type") == "SEQ_CLS"
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    return CLASSIFIER_ARCHITECTURE in (config.get("architectures") or [])


def load_model(path: str | Path, adapter: str | Path | None = None, dtype: torch.dtype | None = None,
               device: str | torch.device = "cpu", merge: bool = False):
    """Load a MiniMind/Llama model folder, optionally with a LoRA adapter on top.

    `path` may itself be an adapter folder; its base is then read from the adapter (and when that
    base is an adapter too, as for a LoRA run started from a LoRA run, it is loaded merged first).
    With `merge=True` the adapter is folded into the weights (plain model returned).
    A classifier folder loads as MiniMindForSequenceClassification; a classifier's adapter loads on
    its base made a classifier of the classes saved beside the adapter (minimind.classifier).
    """
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    if adapter is None and is_adapter(path):
        path, adapter = adapter_base(path), path
    if is_adapter(path):  # a chain: the base is itself a run's adapter on its own base
        model = load_model(path, dtype=dtype, merge=True)
    else:
        folder = check_model_folder(path)
        auto = AutoModelForSequenceClassification if is_classifier(folder) else AutoModelForCausalLM
        try:
            model = auto.from_pretrained(folder, dtype=dtype or torch.float32, use_safetensors=True,
                                         trust_remote_code=False)
        except (OSError, ValueError, RuntimeError) as err:
            raise CheckpointError(f"{folder}: could not load the model ({err})") from err
    if adapter is not None:
        if not is_adapter(adapter):
            raise CheckpointError(f"{adapter}: not a LoRA adapter folder (no adapter_config.json)")
        from peft import PeftModel

        if is_classifier(adapter):
            model = _classifier_base(model, adapter)

        _fit_vocabulary(model, adapter)
        try:
            model = PeftModel.from_pretrained(model, str(adapter))
        except (OSError, ValueError, RuntimeError, KeyError) as err:
            raise CheckpointError(f"{adapter}: could not apply the adapter ({err})") from err
        if merge:
            model = model.merge_and_unload()
    return model.to(device).eval()


def _classifier_base(model, adapter: str | Path):
    """The base of a classifier adapter: `model` made a classifier of the classes saved beside the
    adapter (its head is then replaced by the adapter's trained copy)."""
    classes, pooling = read_adapter_labels(adapter)
    return classifier_from(model, classes, pooling=pooling)


def _fit_vocabulary(model, adapter: str | Path) -> None:
    """Give the base the rows of the tokens an adapter's run added to the vocabulary
    (minimind.vocabulary): the adapter carries their trained values, so the base only needs the
    room. An adapter without its own tokenizer uses the base's vocabulary."""
    tokenizer_file = Path(adapter) / "tokenizer.json"
    if not tokenizer_file.is_file():
        return
    size = len(load_tokenizer_for(adapter))
    if size > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(size, mean_resizing=False)


def load_tokenizer_for(path: str | Path):
    """The tokenizer saved with a model (or with an adapter's base)."""
    folder = Path(path)
    if is_adapter(folder) and not (folder / "tokenizer.json").is_file():
        folder = Path(adapter_base(folder))
    if not (folder / "tokenizer.json").is_file():
        raise CheckpointError(f"{folder}: no tokenizer.json beside the model")
    return load_tokenizer(folder)
