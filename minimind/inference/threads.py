"""How many threads the decode thread's own PyTorch ops use, set for that thread alone.

A lone request on a small model is bound by per-op overhead, and spreading each small op over
the process's threads costs more than it gives: on two cores without llama-cpp-python,
MiniMind-Shakespeare decoded 20-45 % faster on one thread than on the page's two
(benchmarks/NOTES.md). Larger models and batches still gain from every thread, so the engine
times both, by request (decoder_choice.py).

`torch.set_num_threads` cannot serve here: besides the calling thread's count it sets the
process-wide count that every thread starting its first parallel op later takes, so a handler
thread starting during a one-thread pass would stay on one thread for its life. PyTorch's CPU
builds run their parallel ops (oneDNN's included) on OpenMP, whose thread count is a per-thread
setting, so the engine sets that count for its own thread through OpenMP's `omp_set_num_threads`
and leaves the rest of the process as it was. Where that function is not in the process (a build
without OpenMP), the engine decodes on the process's count, as before.
"""

from __future__ import annotations

import ctypes
import functools

import torch


@functools.cache
def _omp_set_num_threads():
    """OpenMP's per-thread setter, as PyTorch's own runtime exports it; None where there is none."""
    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    try:  # (the symbols the process has loaded: a TypeError on Windows, where CDLL needs a name)
        setter = ctypes.CDLL(None).omp_set_num_threads
    except (AttributeError, OSError, TypeError):
        return None
    setter.argtypes, setter.restype = [ctypes.c_int], None
    return setter


def settable() -> bool:
    """Whether this process can give one thread its own PyTorch thread count."""
    return _omp_set_num_threads() is not None


def use(count: int) -> bool:
    """Run this thread's later PyTorch ops on `count` threads; other threads keep theirs. True where
    the count changed. (PyTorch first gives a thread the process's count at its first parallel op:
    reading the count here makes that happen now, so that it cannot undo this later.)"""
    setter = _omp_set_num_threads()
    if setter is None or torch.get_num_threads() == count:
        return False
    setter(max(1, int(count)))
    return True
