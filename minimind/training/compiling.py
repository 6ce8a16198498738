"""Regional torch.compile of the decoder layers, with a fallback to eager ones.

One graph is compiled and reused by every layer; it fuses the norm, rotary, SwiGLU and
residual arithmetic between the matmuls. Compiling costs ~30 s on a CPU, so `auto`
considers runs of MIN_STEPS_TO_COMPILE steps or more only, and time-budgeted runs of
MIN_BUDGET_TO_COMPILE_S or more (a 2-minute LoRA spent 19 s of its budget compiling for a step
7 % faster). Even there it compiles only what pays in the run itself (CompileTrial): its first
steps run eager and are timed, then the layers compile, and they stay compiled only when
their steps are measured faster. `compile: on` compiles from the first step, unmeasured. A
machine without a working C++ compiler fails at the first forward: the run then goes on eager.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

MIN_STEPS_TO_COMPILE = 300
MIN_BUDGET_TO_COMPILE_S = 300.0  # compiling then costs at most ~10 % of the budget


def decoder_layers(model) -> list:
    """The model's decoder layers, under any peft / DDP wrapping."""
    for module in model.modules():
        layers = getattr(module, "layers", None)
        if isinstance(layers, torch.nn.ModuleList) and len(layers) and hasattr(layers[0], "self_attn"):
            return list(layers)
    return []


def long_enough_to_compile(cfg, max_steps: int) -> bool:
    """Does `auto` find the run long enough to compile: its time budget, else its steps?"""
    if cfg.time_budget_s > 0 and not cfg.max_steps:
        return cfg.time_budget_s >= MIN_BUDGET_TO_COMPILE_S
    return max_steps >= MIN_STEPS_TO_COMPILE


def wants_compile(cfg, max_steps: int) -> bool:
    """Does the config ask for compiled layers (or `auto` find the run long enough and the mode suited)?"""
    return cfg.compile == "on" or (cfg.compile == "auto" and long_enough_to_compile(cfg, max_steps)
                                   and cfg.adapter_kind != "qlora"
                                   and cfg.objective != "grpo")  # rollout lengths change every step


def compile_layers(model, cfg, max_steps: int, log) -> list:
    """Compile each decoder layer when the config asks for it (or `auto` finds the run long enough)."""
    if not wants_compile(cfg, max_steps):
        return []
    return compile_now(model, log)


def compile_now(model, log) -> list:
    """Compile each decoder layer (their next forward compiles); the layers compiled."""
    layers = decoder_layers(model)
    if not layers:  # an LSTM model: no decoder layers (its one nn.LSTM call is already a fused kernel)
        return []
    for layer in layers:
        layer.compile()
    log(f"compiling {len(layers)} decoder layers (torch.compile)")
    return layers


TRIAL_EAGER_STEPS = 4     # eager steps timed, after the run's first (which warms up)
TRIAL_COMPILE_STEPS = 2   # the steps that compile (the forward's first call, then the backward's): not timed
TRIAL_COMPILED_STEPS = 4  # compiled steps timed after them
MIN_GAIN = 0.03           # compiled layers stay when their median step is at least this much faster


@dataclass
class CompileTrial:
    """`compile: auto` on a run long enough to compile (wants_compile): told each step's seconds
    (`after_step`), it says when to compile the layers and, once compiled steps have been timed,
    whether to keep them (their median step MIN_GAIN faster than the eager one) or go back to eager.
    `mean` makes the ranks of a distributed run agree on each figure (and so on the decision)."""

    mean: Callable[[float], float] = float
    eager: list = field(default_factory=list)     # the timed steps' seconds, eager ...
    compiled: list = field(default_factory=list)  # ... and compiled
    seen: int = 0
    eager_s: float = 0.0     # their medians, once both are timed (all ranks agree)
    compiled_s: float = 0.0

    @property
    def compiling(self) -> bool:
        """Is the step now running one that compiles (its time is not a training step's)?"""
        start = 1 + TRIAL_EAGER_STEPS
        return start <= self.seen < start + TRIAL_COMPILE_STEPS

    def after_step(self, seconds: float) -> str | None:
        """"compile" after the eager steps are timed; then "keep" or "eager" once the compiled ones
        are; else None (nothing to do after this step)."""
        self.seen += 1
        if self.seen == 1 or self.seen > 1 + TRIAL_EAGER_STEPS + TRIAL_COMPILE_STEPS + TRIAL_COMPILED_STEPS:
            return None
        if self.seen <= 1 + TRIAL_EAGER_STEPS:
            self.eager.append(seconds)
            return "compile" if len(self.eager) == TRIAL_EAGER_STEPS else None
        if self.seen <= 1 + TRIAL_EAGER_STEPS + TRIAL_COMPILE_STEPS:
            return None
        self.compiled.append(seconds)
        if len(self.compiled) < TRIAL_COMPILED_STEPS:
            return None
        self.eager_s = self.mean(statistics.median(self.eager))
        self.compiled_s = self.mean(statistics.median(self.compiled))
        return "keep" if self.compiled_s <= (1 - MIN_GAIN) * self.eager_s else "eager"


def is_compile_error(err: Exception) -> bool:
    return type(err).__module__.startswith(("torch._dynamo", "torch._inductor"))


def measure_compile(cfg, max_steps: int, model) -> bool:
    """Does this run try compiled layers against eager ones (CompileTrial) before keeping them:
    `compile: auto` on a run long enough for it, with decoder layers to compile?"""
    return cfg.compile == "auto" and wants_compile(cfg, max_steps) and bool(decoder_layers(model))


def eager_again(layers: list) -> None:
    """Compiled layers back to their eager forward."""
    for layer in layers:
        layer._compiled_call_impl = None


def uncompile(layers: list, log, err: Exception) -> None:
    """Fall back to eager layers when compilation fails (e.g. no C++ compiler on this machine)."""
    eager_again(layers)
    log(f"torch.compile failed ({type(err).__name__}: {str(err).splitlines()[0][:200]}); running eager")


class LossWithFallback:
    """The objective's loss, falling back to eager layers once if compiling them fails."""

    def __init__(self, loss_fn, compiled: list, log):
        self.loss_fn, self.compiled, self.log = loss_fn, compiled, log

    def __call__(self, model, batch: dict):
        try:
            return self.loss_fn(model, batch)
        except Exception as err:  # only a compilation failure is recoverable here
            if not self.compiled or not is_compile_error(err):
                raise
            uncompile(self.compiled, self.log, err)
            self.compiled = []
            return self.loss_fn(model, batch)
