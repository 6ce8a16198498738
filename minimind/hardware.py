"""What this machine can do: the CPU's instruction sets, read once from the operating system, and
the hardware model (CPU, CUDA GPU or ZeroGPU) the page's Device line and the defaults follow.
The defaults that follow the hardware (training precision, ONNX int8 range, the benchmark report)
ask here instead of each reading /proc/cpuinfo or torch.cuda, and a leaf keeps the exporters from
loading the trainer for one fact."""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass
from pathlib import Path

BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})      # native bf16 matmul instructions
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})  # int8 dot products with 32-bit sums


def cpu_flags() -> set[str]:
    """The CPU's instruction-set flags from /proc/cpuinfo (empty where there is none to read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith(("flags", "Features"))), "")
    return set(line.partition(":")[2].split())


def cpu_has_bf16() -> bool:
    """True when the CPU has native bf16 matmul instructions (AVX512-BF16 or AMX)."""
    return bool(BF16_FLAGS & cpu_flags())


# ---- the machine a page or a run is on: CPU, a CUDA GPU, or ZeroGPU -----------------------------

ZERO_GPU_TRUE = {"1", "t", "true"}  # what the `spaces` package reads as true in SPACES_ZERO_GPU


@dataclass(frozen=True)
class Gpu:
    name: str
    capability: tuple[int, int]   # CUDA compute capability; bf16 matmuls are native from 8.0 (Ampere)
    memory_gb: float


@dataclass(frozen=True)
class Hardware:
    """One description of the hardware, which the page's Device line and the defaults follow.

    kind: "cpu"; "cuda" (a GPU this process owns); or "zerogpu" (a Hugging Face ZeroGPU Space: the
    GPU exists only inside `@spaces.GPU` calls of the app process, never in a child process, and
    CUDA must not be touched outside them, so nothing here asks CUDA anything there)."""

    kind: str
    name: str
    bf16: bool                      # native bf16 matmuls
    memory_gb: float | None = None  # the GPU's memory (None: a CPU, or unknown before a GPU call)
    space: bool = False             # running on a Hugging Face Space

    @property
    def precision(self) -> str:
        """The default training precision: bf16 where it is native, fp16 with loss scaling on older
        GPUs (T4, V100: bf16 would be emulated), float32 on a CPU without bf16 instructions."""
        if self.bf16:
            return "bf16"
        return "fp32" if self.kind == "cpu" else "fp16"

    @property
    def device(self) -> str:
        return "cpu" if self.kind == "cpu" else "cuda"

    def describe(self) -> str:
        precision = {"fp16": "fp16 with loss scaling"}.get(self.precision, self.precision)
        memory = f", {self.memory_gb:.0f} GB" if self.memory_gb else ""
        return f"{self.name}{memory}, {precision}"


def _one_thread_if_forked(parent_pid: int) -> None:
    """In a worker forked from `parent_pid` (a ZeroGPU call), put PyTorch's CPU side on one thread.
    GNU OpenMP does not survive a fork: once the parent has run a parallel op on several threads
    (loading a model is enough), the child's first parallel op waits forever for threads it does not
    have, and the platform kills the call at its duration. One thread runs no parallel region; the
    worker's real work is on the GPU."""
    if os.getpid() != parent_pid:
        import torch

        torch.set_num_threads(1)


def on_one_thread_when_forked(fn):
    """`fn` for a GPU call (`spaces.GPU(duration)(on_one_thread_when_forked(fn))`): run in a worker
    forked from this process, it first puts PyTorch's CPU side on one thread (`_one_thread_if_forked`);
    run here (off ZeroGPU the decorator calls it in place), it keeps this process's threads. A
    generator function stays one, as the platform streams those."""
    parent_pid = os.getpid()
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(*args, **kwargs):
            _one_thread_if_forked(parent_pid)
            yield from fn(*args, **kwargs)
        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        _one_thread_if_forked(parent_pid)
        return fn(*args, **kwargs)
    return call


def on_zero_gpu(env=None) -> bool:
    """A ZeroGPU Space (the variable the `spaces` package and Gradio read)."""
    env = os.environ if env is None else env
    return env.get("SPACES_ZERO_GPU", "").lower() in ZERO_GPU_TRUE


def on_space(env=None) -> bool:
    """Running on a Hugging Face Space (the variables Gradio reads)."""
    env = os.environ if env is None else env
    return bool(env.get("SPACE_ID")) and env.get("SYSTEM") == "spaces"


def _cuda_gpu() -> Gpu | None:
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return Gpu(props.name, (props.major, props.minor), props.total_memory / 1024 ** 3)


def detect(env=None, gpu=None, threads: int | None = None) -> Hardware:
    """The hardware this process trains on. `gpu`: a function returning the CUDA GPU or None (tests
    pass their own); it is not called on ZeroGPU, where the app process must not touch CUDA."""
    space = on_space(env)
    if on_zero_gpu(env):
        return Hardware("zerogpu", "ZeroGPU (a GPU slice in each GPU call)", bf16=True, space=space)
    found = (gpu or _cuda_gpu)()
    if found is not None:
        return Hardware("cuda", found.name, bf16=found.capability >= (8, 0), memory_gb=found.memory_gb, space=space)
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    bf16 = cpu_has_bf16()
    name = f"CPU ({threads} thread{'s' if threads > 1 else ''}{', bf16' if bf16 else ''})"
    return Hardware("cpu", name, bf16=bf16, space=space)
