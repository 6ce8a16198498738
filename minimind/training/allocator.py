"""Keep freed memory in the process while training on a CPU (Linux, glibc).

A training step allocates and frees the same blocks every step: the logits and their
float32 copy (4 x 256 x 6400 floats, 26 MB, for a new model's batch), activations, gradients. With
glibc's defaults a freed block over its threshold (128 KB, raised only as far as the last
freed mmap) goes back to the kernel, and the next step faults every page of it in again:
on a 2-core CPU that was 18 % of a `pico` step and four fifths of its loss
(benchmarks/NOTES.md, "The allocator"). Served from the heap, and kept there, the same
memory is reused at once.

This is a process setting, like torch's thread count: blocks up to 32 MB (glibc's largest
mmap threshold on 64-bit) come from the heap, and up to 256 MB of free heap top is kept rather
than returned. Other C libraries (musl, macOS, Windows) are left as they are.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1   # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024
TRIM_THRESHOLD = 256 * 1024 * 1024


def glibc_mallopt():
    """glibc's `mallopt`, or None where the C library is another (musl's mallopt does nothing)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return libc.mallopt


def retain_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (idempotent); True when they were set."""
    mallopt = glibc_mallopt()
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) \
        and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
