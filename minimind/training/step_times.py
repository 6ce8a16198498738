"""Seconds a training step took before, on this machine, for a run of the same shape.

A time-budgeted run is sized by its seconds per step. Measuring them costs steps; a short
budget cannot spare them (a speed probe ate 95 s of a 2-minute GRPO run). So a run that ends
leaves its measured steady figure here, keyed by what sets a step's cost (the device and its
precision and threads, the objective, the model's shape, what trains, the batch, sequence length,
accumulation, processes and compilation), and the next run of that shape plans with it from
its first step. The file lives in the prepared-data cache (the workspace's cache on the page);
a figure is only a starting plan: the loop re-sizes from the steps it measures either way.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from .run_dir import atomic_write

FILE = "step_times.json"
MAX_ENTRIES = 200  # the newest shapes kept (a page's workspace sees a handful)
SHAPE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
              "num_key_value_heads", "vocab_size", "use_attention")


def shape_key(cfg, device: str, model_config, trainable: int, world: int, threads: int, compiled: bool) -> str:
    """What sets the seconds of one optimizer step, as one string."""
    shape = {k: getattr(model_config, k, None) for k in SHAPE_KEYS}
    grpo = ([cfg.grpo.group_size, cfg.grpo.max_new_tokens, cfg.grpo.updates]
            if cfg.objective == "grpo" else None)
    return json.dumps([device, cfg.precision, threads, world, cfg.objective, cfg.mode, cfg.adapter_kind, trainable,
                       shape, cfg.batch_size, cfg.grad_accum, cfg.data.seq_len, bool(cfg.grad_checkpointing),
                       compiled, grpo, cfg.optim.name], sort_keys=True)


def _read(folder: Path) -> dict:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads((folder / FILE).read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    return {}


def recall(folder: Path, key: str) -> float | None:
    """The seconds a step of this shape took last time, or None."""
    value = _read(folder).get(key)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def remember(folder: Path, key: str, seconds: float) -> None:
    """Keep this shape's seconds per step (newest last; the oldest shapes beyond MAX_ENTRIES go). A
    cache that cannot be written only costs the next run its head start."""
    if not seconds or seconds <= 0:
        return
    entries = _read(folder)
    entries.pop(key, None)
    entries[key] = round(float(seconds), 6)
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / FILE, json.dumps(kept, indent=0))
