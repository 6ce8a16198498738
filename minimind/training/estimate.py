"""Before a run starts: its size, its data and how long it will take, from a short speed probe.

The web app shows this before launch; it runs the same model building, data
preparation and forward/backward passes the trainer will, without changing
any weight, and says what a time budget buys: steps, tokens, passes over the data,
and, below MIN_USEFUL_STEPS steps, the budget that would buy them.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

import torch

import minimind.training.distributed as dist
from . import step_times
from ..data.config import cache_root
from .budget import PROBE_PLAN_SHARE, planned_steps
from .compiling import wants_compile
from .config import TrainConfig
from .modes import count_parameters
from .precision import describe, pick_device, resolved_for
from .run_dir import RunDir
from .setup import set_up, speed_probe


# Fewer optimizer steps than this buy nothing a newcomer can see (a 1-step GRPO run left both plots empty):
# the estimate says so, with the budget that would buy them.
MIN_USEFUL_STEPS = 20


@dataclass
class Estimate:
    device: str             # device and precision, in words
    preset: str             # a new model's size (chosen for the run when "auto"); "" when fine-tuning
    params: int             # parameters in all
    trainable: int          # parameters that train in this mode
    train_rows: int         # training rows (blocks or examples)
    tokens_per_epoch: int   # tokens in the training split
    steps: int              # optimizer steps the run will take
    seconds_per_step: float # measured by the probe (or by an earlier run of this shape: `measured_before`)
    eta_s: float            # the run's wall time: set-up, steps, evaluations and saves (a time budget: the budget)
    memory: str = ""        # what a fine-tune needs of the memory free (training/memory.py); "" for a new model
    tokens: int = 0         # tokens the planned steps read
    passes: float = 0.0     # ... as passes over the training split
    setup_s: float = 0.0    # preparing data and building the model, as timed here
    useful_s: float = 0.0   # a time budget too short for MIN_USEFUL_STEPS steps: the budget that buys them; else 0
    measured_before: bool = False  # seconds_per_step came from an earlier run of this shape (no probe ran)

    def as_dict(self) -> dict:
        return asdict(self)


def estimate(config: TrainConfig, probe_steps: int = 2, scratch: str | None = None) -> Estimate:
    """Build the run as the trainer would (set_up), time a few steps of its objective (or take the
    seconds a step of this shape took in an earlier run here), and plan its steps with the trainer's
    own arithmetic (budget.planned_steps)."""
    device = pick_device(config.device)
    cfg = resolved_for(config, device)
    info = dist.DistInfo()
    run = RunDir(scratch or cfg.run_dir or ".")
    started = time.perf_counter()
    built = set_up(cfg, run, info, device, resume=False, started=started, log=lambda _msg: None)
    built_step_s = built.step_s
    setup_s = time.perf_counter() - started
    built.model.train()
    processes = max(1, cfg.processes)
    trainable, total = count_parameters(built.base_model)
    key = step_times.shape_key(cfg, describe(device, cfg.precision), getattr(built.base_model, "config", None),
                               trainable, processes, torch.get_num_threads(), wants_compile(cfg, cfg.max_steps))
    before = step_times.recall(cache_root(cfg.data), key) if processes == 1 else None
    per_step = built.step_s or before
    if per_step is None:
        threads = torch.get_num_threads()
        if processes > 1 and device == "cpu":  # each of N processes gets its share of the cores (as the page starts them)
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))
        try:
            per_step = speed_probe(built.model, built.stream, built.precision, built.objective, steps=probe_steps,
                                   optimizer=built.optimizer)  # (the built model is thrown away)
        finally:
            torch.set_num_threads(threads)
        if processes == 1 and not wants_compile(cfg, cfg.max_steps):  # the run's steps are eager too
            step_times.remember(cache_root(cfg.data), key, per_step)
    budget_s = cfg.time_budget_s if cfg.time_budget_s > 0 and not cfg.max_steps else 0.0
    left = budget_s - setup_s if budget_s else None
    # N processes take N batches a step (the probe times one process's; their all-reduce is not counted)
    steps_per_epoch = built.stream.steps_per_epoch() / processes
    steps = planned_steps(cfg, steps_per_epoch, per_step, left) if not budget_s or left > 0 else 0
    tokens_per_step = built.stream.global_batch * processes * cfg.data.seq_len
    if cfg.objective == "grpo":  # a prompt's answers, at most max_new_tokens each
        tokens_per_step = built.stream.global_batch * processes * cfg.grpo.group_size * cfg.grpo.max_new_tokens
    corpus, memory = built.corpus, built.memory
    tokens_per_epoch = int(getattr(corpus.stats, "tokens", 0) or 0)
    del built
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    # a run that measures its steps spends about a tenth more on evaluations and saves (budget.EVAL_SHARE,
    # five saves); with a budget, it ends at the budget
    eta = budget_s or setup_s + steps * per_step * 1.1
    useful = 0.0
    if budget_s and steps < MIN_USEFUL_STEPS:
        useful = setup_s + MIN_USEFUL_STEPS * per_step * 1.1 / PROBE_PLAN_SHARE
    return Estimate(describe(device, cfg.precision), cfg.model.preset if cfg.new_model else "", total, trainable,
                    len(corpus.train), tokens_per_epoch, steps, per_step, eta,
                    memory.describe() if memory is not None else "", steps * tokens_per_step,
                    steps / max(steps_per_epoch, 1e-9), setup_s, useful, before is not None and not built_step_s)
