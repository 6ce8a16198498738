"""The model an export starts from: a MiniMind folder, with a LoRA adapter merged in if one is given.

Every export format is written from one in-memory float32 model, so a LoRA
adapter is folded into its base once (peft `merge_and_unload`) and the
quantizers and GGUF writer never see peft wrappers. The unmerged base+adapter
stays loadable as the reference the merged weights are checked against.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from ..checkpoint import adapter_base, check_model_folder, is_adapter, load_model, load_tokenizer_for
from ..errors import ExportError
from .merged import merge_adapter


@dataclass
class Source:
    folder: Path            # the model folder (the base, when there is an adapter)
    adapter: Path | None    # the LoRA adapter folder, if any
    model: torch.nn.Module  # float32, eval mode, adapter merged
    tokenizer: object       # PreTrainedTokenizerFast

    @property
    def config(self):
        return self.model.config

    @property
    def label(self) -> str:
        return f"{self.folder} + adapter {self.adapter}" if self.adapter else str(self.folder)

    def reference_model(self) -> torch.nn.Module:
        """What the exports are compared with: base + adapter applied by peft, unmerged."""
        if self.adapter is None:
            return self.model
        return load_model(self.folder, adapter=self.adapter)


def resolve(model: str | Path, adapter: str | Path | None = None) -> tuple[Path, Path | None]:
    """(base folder, adapter folder or None); `model` may itself be an adapter folder."""
    model = Path(model)
    if adapter is None and is_adapter(model):
        model, adapter = Path(adapter_base(model)), model
    if adapter is not None and not is_adapter(adapter):
        raise ExportError(f"{adapter}: not a LoRA adapter folder (no adapter_config.json)")
    folder = check_model_folder(model)
    model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    if model_type not in ("minimind", "minimind-lstm"):
        raise ExportError(f"{folder}: export reads MiniMind checkpoints; this one is {model_type!r} "
                          "(already an export?)")
    return folder, Path(adapter) if adapter is not None else None


def load_source(model: str | Path, adapter: str | Path | None = None) -> Source:
    """Load a MiniMind checkpoint in float32 for export, merging `adapter` into it if given."""
    folder, adapter = resolve(model, adapter)
    merged = merge_adapter(folder, adapter) if adapter is not None else load_model(folder)
    tokenizer = load_tokenizer_for(adapter if adapter is not None else folder)
    return Source(folder=folder, adapter=adapter, model=merged, tokenizer=tokenizer)
