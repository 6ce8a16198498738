"""One registry of loaded models per process (above generation: it loads checkpoints and reads
each model's sampling defaults; the engine below it knows nothing of either): the page's chat, its side-by-side view and
the API all ask it, so each model is in memory once, with one engine.

Names (what /v1/models lists) point at sources: a model folder, optionally with a LoRA
adapter (merged into its own copy of the base, so the engine runs it). Loading happens on first use; the page asks by folder (`load`), the API
by name (`get`), and both land on the same loaded copy. When the loaded models' weights
exceed the memory budget the least recently used ones are let go (a request still using
one keeps it until it finishes; an idle engine holds no thread).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from .checkpoint import adapter_base, check_model_folder, is_adapter, load_model, load_tokenizer_for
from .errors import CheckpointError
from .inference.engine import Engine, engine_for
from .inference.gpu_call import GpuCallEngine
from .sampling_params import SamplingParams

DEFAULT_BUDGET_MB = 2048


@dataclass
class LoadedModel:
    """One model in memory and what answers for it."""

    model: object                              # a causal LM in eval mode
    tokenizer: object                          # its tokenizer (chat template inside)
    engine: Engine                             # its decode thread and prepared weights
    folder: Path                               # the folder (or adapter folder) it came from
    sampling: object = None                    # its saved sampling defaults (sampling_params.SamplingParams)

    def memory_bytes(self) -> int:
        return self.engine.memory_bytes()


@dataclass
class _Name:
    """A name in /v1/models and where its model comes from."""

    name: str
    path: Path                                 # model folder (or an adapter folder naming its base)
    adapter: Path | None                       # a LoRA adapter merged on top of `path`
    owned_by: str = "minimind"
    created: int = field(default_factory=lambda: int(time.time()))


def budget_from_env() -> int:
    """MINIMIND_MODEL_MEMORY_MB (default 2048): how much loaded weights may take before old models go."""
    raw = os.environ.get("MINIMIND_MODEL_MEMORY_MB", "")
    try:
        mb = float(raw) if raw.strip() else DEFAULT_BUDGET_MB
    except ValueError:
        mb = DEFAULT_BUDGET_MB
    return int(max(mb, 1) * 2**20)


def _load_folder(path: str | Path, adapter: str | Path | None, max_batch: int, gpu_calls=None) -> LoadedModel:
    model = load_model(path, adapter=adapter, merge=True)  # adapters folded in: the engine runs a plain model
    folder = Path(adapter or path)
    engine = engine_for(model, max_batch)
    if gpu_calls is not None:  # ZeroGPU: each request decodes in a GPU call (inference/gpu_call.py)
        engine = GpuCallEngine(model, engine, gpu_calls)
    return LoadedModel(model, load_tokenizer_for(path), engine, folder,
                       SamplingParams.from_model(folder))  # read once, not per request


class ModelRegistry:
    """Name -> model, and folder -> model, over one least-recently-used set of loaded copies."""

    def __init__(self, memory_budget: int | None = None, max_batch: int = 16, gpu_calls=None):
        """`gpu_calls`: the decorator that gives one call the GPU (spaces.GPU on ZeroGPU); with it every
        request decodes in a GPU call, as the app process there may not touch the GPU."""
        self.memory_budget = memory_budget if memory_budget is not None else budget_from_env()
        self.max_batch = max_batch
        self.gpu_calls = gpu_calls
        self._names: dict[str, _Name] = {}
        self._loaded: OrderedDict[tuple, LoadedModel] = OrderedDict()
        self._loading: dict[tuple, threading.Lock] = {}
        self._lock = threading.Lock()

    # -- names

    def add_folder(self, path: str | Path, name: str | None = None, adapter: str | Path | None = None,
                   lazy: bool = True, owned_by: str = "minimind") -> str:
        """Serve a model folder (optionally with a LoRA adapter merged in) as `name` (default: the
        adapter's or the model's folder name). Checks the folder now; loads on first use unless
        `lazy=False`. Returns the name."""
        path = Path(path)
        base = Path(adapter_base(path)) if adapter is None and is_adapter(path) else path
        check_model_folder(base)  # fail now, not at the first request
        if adapter is not None and not is_adapter(adapter):
            raise CheckpointError(f"{adapter}: not a LoRA adapter folder (no adapter_config.json)")
        name = _check_name(name or Path(adapter or path).resolve().name)
        self._put(_Name(name, path, Path(adapter) if adapter else None, owned_by))
        if not lazy:
            self.get(name)
        return name

    def _put(self, entry: _Name) -> None:
        with self._lock:
            self._names[entry.name] = entry

    def remove(self, name: str) -> None:
        with self._lock:
            self._names.pop(name, None)

    def get(self, name: str) -> LoadedModel:
        """The model served as `name`, loaded on first use; KeyError when the name is unknown."""
        with self._lock:
            entry = self._names.get(name)
        if entry is None:
            raise KeyError(name)
        return self._obtain(entry.path, entry.adapter)

    def load(self, path: str | Path) -> LoadedModel:
        """The model in folder `path` (an adapter folder brings its base), loaded on first use: the
        same copy a name for that folder serves."""
        return self._obtain(Path(path), None)

    # -- loaded copies

    def _obtain(self, path: Path, adapter: Path | None) -> LoadedModel:
        """The loaded copy of (path, adapter), shared by every name and folder that leads to it."""
        key = (str(path.resolve()), str(adapter.resolve()) if adapter else None)
        with self._lock:
            loaded = self._loaded.get(key)
            if loaded is not None:
                self._loaded.move_to_end(key)
                return loaded
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:  # one load per key, however many ask at once
            with self._lock:
                loaded = self._loaded.get(key)
            if loaded is None:
                loaded = _load_folder(path, adapter, self.max_batch, self.gpu_calls)
                with self._lock:
                    self._loaded[key] = loaded
                    self._evict(keep=key)
            with self._lock:
                self._loading.pop(key, None)
                if key in self._loaded:
                    self._loaded.move_to_end(key)
            return loaded

    def _evict(self, keep: tuple) -> None:
        """Let the least recently used copies go while over budget (never `keep`, the one just asked for)."""
        def total() -> int:
            return sum(m.memory_bytes() for m in self._loaded.values())

        for key in list(self._loaded):
            if total() <= self.memory_budget:
                return
            if key == keep:
                continue
            self._loaded.pop(key).engine.retire()  # requests in flight keep their copy until they finish

    def loaded(self) -> list[str]:
        """Folders of the models in memory, least recently used first."""
        with self._lock:
            return [str(m.folder) for m in self._loaded.values()]

    def describe(self) -> list[dict]:
        """What /v1/models lists, without loading anything."""
        with self._lock:
            entries = list(self._names.values())
        return [{"id": e.name, "object": "model", "created": e.created, "owned_by": e.owned_by} for e in entries]

    def names(self) -> list[str]:
        with self._lock:
            return list(self._names)

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._names


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise ValueError(f"a served model name must be a non-empty word without spaces, got {name!r}")
    return name
