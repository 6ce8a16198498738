"""Regional torch.compile of the decoder layers, with a fallback to eager ones.

One graph is compiled and reused by every layer; it fuses the norm, rotary, SwiGLU and
residual arithmetic between the matmuls. Compiling costs ~30 s on a CPU, so `auto`
compiles runs of MIN_STEPS_TO_COMPILE steps or more only, and time-budgeted runs of
MIN_BUDGET_TO_COMPILE_S or more (a 2-minute LoRA spent 19 s of its budget compiling for a step
7 % faster). A machine without a working
C++ compiler fails at the first forward: the run then goes on eager.
"""

from __future__ import annotations

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
    layers = decoder_layers(model)
    if not layers:  # an LSTM model: no decoder layers (its one nn.LSTM call is already a fused kernel)
        return []
    for layer in layers:
        layer.compile()
    log(f"compiling {len(layers)} decoder layers (torch.compile)")
    return layers


def is_compile_error(err: Exception) -> bool:
    return type(err).__module__.startswith(("torch._dynamo", "torch._inductor"))


def uncompile(layers: list, log, err: Exception) -> None:
    """Fall back to eager layers when compilation fails (e.g. no C++ compiler on this machine)."""
    for layer in layers:
        layer._compiled_call_impl = None
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
