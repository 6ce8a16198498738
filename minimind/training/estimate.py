"""Before a run starts: its size, its data and how long it will take, from a short speed probe.

The web app shows this before launch; it runs the same model building, data
preparation and forward/backward passes the trainer will, without changing
any weight.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import torch

import minimind.training.distributed as dist
from .budget import planned_steps
from .config import TrainConfig
from .modes import count_parameters
from .precision import bf16_supported, describe, pick_device
from .run_dir import RunDir
from .setup import set_up, speed_probe


@dataclass
class Estimate:
    device: str             # device and precision, in words
    preset: str             # a new model's size (chosen for the run when "auto"); "" when fine-tuning
    params: int             # parameters in all
    trainable: int          # parameters that train in this mode
    train_rows: int         # training rows (blocks or examples)
    tokens_per_epoch: int   # tokens in the training split
    steps: int              # optimizer steps the run will take
    seconds_per_step: float # measured by the probe
    eta_s: float            # steps × seconds_per_step
    memory: str = ""        # what a fine-tune needs of the memory free (training/memory.py); "" for a new model

    def as_dict(self) -> dict:
        return asdict(self)


def estimate(config: TrainConfig, probe_steps: int = 2, scratch: str | None = None) -> Estimate:
    """Build the run as the trainer would (set_up), time a few steps of its objective, and plan
    its steps with the trainer's own arithmetic (budget.planned_steps)."""
    device = pick_device(config.device)
    cfg = config.resolved(device, bf16_supported(device))
    info = dist.DistInfo()
    run = RunDir(scratch or cfg.run_dir or ".")
    started = time.perf_counter()
    built = set_up(cfg, run, info, device, resume=False, started=started, log=lambda _msg: None)
    built.model.train()
    processes = max(1, cfg.processes)
    threads = torch.get_num_threads()
    if processes > 1 and device == "cpu":  # each of N processes gets its share of the cores (as the page starts them)
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))
    try:
        per_step = speed_probe(built.model, built.stream, built.precision, built.objective, steps=probe_steps)
    finally:
        torch.set_num_threads(threads)
    left = built.budget.left(time.perf_counter()) if built.budget else None
    # N processes take N batches a step (the probe times one process's; their all-reduce is not counted)
    steps = planned_steps(cfg, built.stream.steps_per_epoch() / processes, per_step, left)
    trainable, total = count_parameters(built.base_model)
    corpus, memory = built.corpus, built.memory
    del built
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return Estimate(describe(device, cfg.precision), cfg.model.preset if cfg.new_model else "", total, trainable,
                    len(corpus.train), int(getattr(corpus.stats, "tokens", 0) or 0), steps, per_step,
                    steps * per_step, memory.describe() if memory is not None else "")
