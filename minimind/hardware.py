"""What this machine's CPU can do, read once from the operating system: the defaults that
follow the hardware (training precision, ONNX int8 range, the benchmark report) ask here
instead of each reading /proc/cpuinfo, and a leaf keeps the exporters from loading the
trainer for one fact."""

from __future__ import annotations

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
