"""Before a run starts: its size, its data and how long it will take, from a short speed probe.

The web app shows this before launch; it runs the same model building, data
preparation and forward/backward passes the trainer will, without changing
any weight.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import torch

from . import distributed as dist
from .batches import BatchStream
from .config import TrainConfig
from .budget import Budget
from .loop import _prepare_data, _prepare_tokenizer, _speed_probe, choose_new_model_size
from .modes import build_model, count_parameters
from .precision import Precision, bf16_supported, describe, pick_device
from .run_dir import RunDir


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

    def as_dict(self) -> dict:
        return asdict(self)


def estimate(config: TrainConfig, probe_steps: int = 2, scratch: str | None = None) -> Estimate:
    device = pick_device(config.device)
    cfg = config.resolved(device, bf16_supported(device))
    info = dist.DistInfo()
    run = RunDir(scratch or cfg.run_dir or ".")
    tokenizer = _prepare_tokenizer(cfg, run, info)
    corpus = _prepare_data(cfg, tokenizer, info)
    precision = Precision(cfg.precision, device)
    budget = Budget.start(cfg.time_budget_s, time.perf_counter()) if cfg.time_budget_s > 0 else None
    choose_new_model_size(cfg, tokenizer, corpus, device, precision, info, budget, lambda _msg: None)
    model = build_model(cfg, tokenizer, device, precision.dtype)
    stream = BatchStream(corpus.train, cfg.batch_size, cfg.grad_accum, cfg.seed, tokenizer.pad_token_id)
    model.train()
    per_step = _speed_probe(model, stream, precision, steps=probe_steps)
    steps = cfg.max_steps or (max(1, int(cfg.time_budget_s / per_step)) if cfg.time_budget_s
                              else max(1, math.ceil(cfg.epochs * stream.steps_per_epoch())))
    trainable, total = count_parameters(model)
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    new_model = cfg.mode == "pretrain" and not cfg.model.init_from
    return Estimate(describe(device, cfg.precision), cfg.model.preset if new_model else "", total, trainable, len(corpus.train),
                    int(getattr(corpus.stats, "tokens", 0) or 0), steps, per_step, steps * per_step)
