"""Device and mixed-precision choice: bf16 autocast where the hardware has bf16,
fp16 + GradScaler on older GPUs, fp32 otherwise (the user can force any)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..hardware import cpu_has_bf16, on_zero_gpu

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def pick_device(preference: str = "auto") -> str:
    """The device "auto" means: CUDA where there is a GPU (on ZeroGPU: the one each GPU call gets,
    decided without touching CUDA), then Apple's MPS, then the CPU."""
    if preference != "auto":
        return preference
    if on_zero_gpu() or torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def bf16_supported(device: str) -> bool:
    """Native bf16 matmuls: Ampere and later GPUs (a T4 would emulate them: fp16 is its default), a
    ZeroGPU slice (asked without touching CUDA, which the app process must not), CPUs with bf16
    instructions."""
    if device.startswith("cuda"):
        if on_zero_gpu():
            return True
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device == "cpu":
        return cpu_has_bf16()
    return False


def resolved_for(config, device: str):
    """`config` with its auto fields filled for `device` (the trainer, the estimate and the ZeroGPU
    driver resolve alike, so the driver's prepared data is the cache a slice reads)."""
    return config.resolved(device.split(":")[0], bf16_supported(device))


@dataclass
class Precision:
    """How the forward pass runs and whether gradients need loss scaling."""

    name: str            # bf16 | fp16 | fp32
    device_type: str     # cpu | cuda | mps

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.name]

    def autocast(self):
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=self.dtype)

    def grad_scaler(self):
        """A GradScaler for fp16 on CUDA (bf16 and fp32 need none)."""
        enabled = self.name == "fp16" and self.device_type == "cuda"
        return torch.amp.GradScaler("cuda", enabled=enabled)


def describe(device: str, precision: str) -> str:
    if device.startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
    elif device == "cpu":
        n = torch.get_num_threads()
        name = f"CPU ({n} thread{'s' if n > 1 else ''}{', bf16' if cpu_has_bf16() else ''})"
    else:
        name = device.upper()
    return f"{name}, {precision}"
