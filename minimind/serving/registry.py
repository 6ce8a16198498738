"""Models served by name: folders loaded on first use, or models already in memory.

A LoRA adapter is served as its own name: its base is loaded with the adapter
merged in (a plain model, so the fast decode path applies). The web app gives
the registry the model it has already loaded plus the folders of finished
runs; the `serve` command gives it a base folder and `NAME=DIR` adapters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import CheckpointError


@dataclass
class ServedModel:
    """One name in /v1/models and what answers under it."""

    name: str                                  # the `model` field clients send
    model: object                              # a causal LM in eval mode
    tokenizer: object                          # its tokenizer (chat template inside)
    created: int = field(default_factory=lambda: int(time.time()))  # unix time shown in /v1/models
    owned_by: str = "minimind"                 # shown in /v1/models
    source: str = ""                           # folder it came from ("" when handed in loaded)


class _Entry:
    """A registry slot: loaded, or a loader that runs once on first use."""

    def __init__(self, name: str, loader: Callable[[], ServedModel], owned_by: str, source: str):
        self.name, self.owned_by, self.source = name, owned_by, source
        self.created = int(time.time())
        self._loader = loader
        self._served: ServedModel | None = None
        self._lock = threading.Lock()

    def get(self) -> ServedModel:
        with self._lock:
            if self._served is None:
                self._served = self._loader()
                self._served.created = self.created
            return self._served

    @property
    def loaded(self) -> bool:
        return self._served is not None


class ModelRegistry:
    """Name -> model. Thread-safe; folders load lazily (first request) unless `lazy=False`."""

    def __init__(self):
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def add(self, name: str, model, tokenizer, owned_by: str = "minimind", source: str = "") -> ServedModel:
        """Serve a model that is already loaded (the web app's)."""
        served = ServedModel(_check_name(name), model.eval(), tokenizer, owned_by=owned_by, source=source)
        self._put(_Entry(name, lambda: served, owned_by, source))
        return served

    def add_folder(self, path: str | Path, name: str | None = None, adapter: str | Path | None = None,
                   dtype: torch.dtype | None = None, lazy: bool = True, owned_by: str = "minimind") -> str:
        """Serve a model folder (optionally with a LoRA adapter merged in) as `name`
        (default: the adapter's or the model's folder name). Returns the name."""
        from ..checkpoint import check_model_folder, is_adapter, adapter_base

        path = Path(path)
        base = Path(adapter_base(path)) if adapter is None and is_adapter(path) else path
        check_model_folder(base)  # fail now, not at the first request
        if adapter is not None and not is_adapter(adapter):
            raise CheckpointError(f"{adapter}: not a LoRA adapter folder (no adapter_config.json)")
        name = _check_name(name or Path(adapter or path).resolve().name)
        source = str(adapter or path)

        def load() -> ServedModel:
            from ..checkpoint import load_model, load_tokenizer_for

            model = load_model(path, adapter=adapter, dtype=dtype, merge=True)
            return ServedModel(name, model, load_tokenizer_for(path), owned_by=owned_by, source=source)

        entry = _Entry(name, load, owned_by, source)
        if not lazy:
            entry.get()
        self._put(entry)
        return name

    def _put(self, entry: _Entry) -> None:
        with self._lock:
            self._entries[entry.name] = entry

    def remove(self, name: str) -> None:
        with self._lock:
            self._entries.pop(name, None)

    def get(self, name: str) -> ServedModel:
        """The model served as `name` (loading it on first use); KeyError when unknown."""
        with self._lock:
            entry = self._entries.get(name)
        if entry is None:
            raise KeyError(name)
        return entry.get()

    def describe(self) -> list[dict]:
        """What /v1/models lists, without loading anything."""
        with self._lock:
            entries = list(self._entries.values())
        return [{"id": e.name, "object": "model", "created": e.created, "owned_by": e.owned_by}
                for e in entries]

    def names(self) -> list[str]:
        with self._lock:
            return list(self._entries)

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"a served model name must be a non-empty word without spaces, got {name!r}")
    return name
