"""The trainer's CPU allocator setting: freed step-sized blocks are reused, not faulted in again."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minimind.training.allocator import glibc_mallopt, retain_freed_memory

ROOT = Path(__file__).resolve().parents[2]

# One "step" allocates and frees what a pico step's loss does: bf16 logits, their float copy and two
# more float tensors of the same size (4 x 256 x 6400). Minor page faults over 40 steps are printed
# beside the number of pages those steps touch.
STEPS = textwrap.dedent("""
    import resource, sys, torch
    from minimind.training.allocator import retain_freed_memory
    if sys.argv[1] == "retain":
        assert retain_freed_memory()
    def step():
        a = torch.ones(4 * 256 * 6400, dtype=torch.bfloat16)
        b = a.float(); c = b.exp(); d = c * 2
        return float(d[0])
    step()
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(40):
        step()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start
    print(faults, 40 * 4 * 256 * 6400 * (2 + 4 + 4 + 4) // 4096)
""")

glibc_only = pytest.mark.skipif(glibc_mallopt() is None, reason="the setting is glibc's (Linux)")


def _faults(mode: str) -> tuple[int, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", STEPS, mode], env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    return int(out[0]), int(out[1])


@glibc_only
def test_freed_blocks_are_reused_once_the_setting_is_made():
    faults, pages = _faults("retain")
    # the first steps grow the heap once, then nothing new is faulted in (glibc's defaults faulted
    # 11-100 % of these pages in again here, depending on how its moving threshold fell)
    assert faults < 0.1 * pages, (faults, pages)


def test_it_is_idempotent():
    assert retain_freed_memory() == retain_freed_memory()
