"""Attention kernels (sdpa / eager / blocked): time and peak memory by sequence length.

Shape: the `small` preset's attention (8 query heads, 2 kv heads, head_dim 64),
batch 1, causal. Memory is the peak resident memory a fresh process gains while
running one call (forward, and forward + backward), read from the kernel's
high-water mark, so it counts everything the kernel allocates.
"""

from __future__ import annotations

import argparse
import json

NAME = "attention"
DESCRIPTION = "attention kernels: time and peak memory at T = 512, 2048, 4096"


def _inputs(t: int, grad: bool):
    import torch

    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 8, t, 64, generator=g, requires_grad=grad)
    k = torch.randn(1, 2, t, 64, generator=g, requires_grad=grad)
    v = torch.randn(1, 2, t, 64, generator=g, requires_grad=grad)
    return q, k, v


def child(impl: str, t: int, backward: bool) -> dict:
    """Measure one (kernel, length) in this process: peak extra memory of a single call."""
    import torch

    from benchmarks._harness import peak_rss_since_reset_kb, reset_peak_rss
    from minimind.attention import ATTENTION_FUNCTIONS

    fn = ATTENTION_FUNCTIONS[impl]
    q, k, v = _inputs(64, backward)  # warm the allocator and kernels on a tiny call first
    out = fn(q, k, v, block_size=128)
    if backward:
        out.sum().backward()
    q, k, v = _inputs(t, backward)
    before = reset_peak_rss()
    with torch.set_grad_enabled(backward):
        out = fn(q, k, v, block_size=128)
        if backward:
            out.sum().backward()
    return {"peak_mb": (peak_rss_since_reset_kb() - before) / 1024}


def run(quick: bool = False) -> dict:
    from benchmarks._harness import interleaved_medians, run_child
    from minimind.attention import ATTENTION_FUNCTIONS

    lengths = [512, 2048] if quick else [512, 2048, 4096]
    rows = []
    for t in lengths:
        q, k, v = _inputs(t, False)
        fns = {impl: (lambda f=fn: f(q, k, v, block_size=128)) for impl, fn in ATTENTION_FUNCTIONS.items()}
        times = interleaved_medians(fns, repeats=3 if quick else 5)
        for impl in ATTENTION_FUNCTIONS:
            fwd = run_child("benchmarks.attention", "--child", impl, str(t))
            bwd = run_child("benchmarks.attention", "--child", impl, str(t), "--backward")
            rows.append({"T": t, "kernel": impl, "forward ms": times[impl] * 1000,
                         "forward peak MB": fwd["peak_mb"], "fwd+bwd peak MB": bwd["peak_mb"],
                         "time vs sdpa": times[impl] / times["sdpa"]})
    at = {r["kernel"]: r for r in rows if r["T"] == 2048}
    summary = {f"{impl} forward peak MB @2048": at[impl]["forward peak MB"] for impl in at}
    summary.update({f"{impl} fwd+bwd peak MB @2048": at[impl]["fwd+bwd peak MB"] for impl in at})
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "T"))
    parser.add_argument("--backward", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.backward)))
        return
    from benchmarks._harness import machine, table

    result = run(args.quick)
    print(machine())
    print(table(result["rows"]))


if __name__ == "__main__":
    main()
