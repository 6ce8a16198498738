"""Attention kernels (sdpa / eager / blocked): time and peak memory by sequence length.

Shape: the `small` preset's attention (8 query heads, 2 kv heads, head_dim 64),
batch 1, causal. Time: one forward (no grad) and one forward + backward, the
kernels taking turns after a warm-up, medians. Memory is the peak resident memory a fresh process gains while
running one call (forward, and forward + backward), read from the kernel's
high-water mark, so it counts everything the kernel allocates (on a GPU: the
peak GPU memory allocated).
"""

from __future__ import annotations

import argparse
import json

NAME = "attention"
DESCRIPTION = "attention kernels: time and peak memory at T = 512, 2048, 4096"
HEADLINE = ["blocked fwd+bwd peak MB @2048", "sdpa fwd+bwd peak MB @2048", "eager fwd+bwd peak MB @2048"]


def _inputs(t: int, grad: bool, device: str = "cpu"):
    import torch

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, t, 64, generator=g).to(device).requires_grad_(grad) for h in (8, 2, 2))
    return q, k, v


def _peak_of(call, device: str) -> float:
    """MB of memory a call adds at its peak: resident memory on a CPU, allocated memory on a GPU."""
    import torch

    from benchmarks._harness import peak_rss_since_reset_kb, reset_peak_rss

    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        call()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    before = reset_peak_rss()
    call()
    return (peak_rss_since_reset_kb() - before) / 1024


def child(impl: str, t: int, backward: bool) -> dict:
    """Measure one (kernel, length) in this fresh process: peak extra memory of a single call
    (forward only, or forward + backward: one per process, so the first cannot lend the second
    memory the allocator kept)."""
    import torch

    from benchmarks._harness import bench_device
    from minimind.attention import ATTENTION_FUNCTIONS

    device = bench_device()
    fn = ATTENTION_FUNCTIONS[impl]
    q, k, v = _inputs(64, True, device)  # warm the allocator and kernels on a tiny call first
    fn(q, k, v, block_size=128).sum().backward()
    q, k, v = _inputs(t, backward, device)
    if backward:
        return {"peak_mb": _peak_of(lambda: fn(q, k, v, block_size=128).sum().backward(), device)}
    with torch.no_grad():
        return {"peak_mb": _peak_of(lambda: fn(q, k, v, block_size=128), device)}


def run(quick: bool = False) -> dict:
    import torch

    from benchmarks._harness import bench_device, interleaved_medians, run_child, sync
    from minimind.attention import ATTENTION_FUNCTIONS

    device = bench_device()
    lengths = [512, 2048] if quick else [512, 2048, 4096]
    rows = []
    for t in lengths:
        q, k, v = _inputs(t, False, device)
        qg, kg, vg = _inputs(t, True, device)

        def forward(f):
            with torch.no_grad():
                f(q, k, v, block_size=128)
            sync(device)

        def train(f):
            f(qg, kg, vg, block_size=128).sum().backward()
            sync(device)

        fns = {(impl, "fwd"): (lambda f=fn: forward(f)) for impl, fn in ATTENTION_FUNCTIONS.items()}
        fns.update({(impl, "bwd"): (lambda f=fn: train(f)) for impl, fn in ATTENTION_FUNCTIONS.items()})
        times = interleaved_medians(fns, repeats=2 if quick else 5)
        for impl in ATTENTION_FUNCTIONS:
            fwd = run_child("benchmarks.attention", "--child", impl, str(t))
            bwd = run_child("benchmarks.attention", "--child", impl, str(t), "--backward")
            rows.append({"T": t, "kernel": impl, "forward ms": times[impl, "fwd"] * 1000,
                         "fwd+bwd ms": times[impl, "bwd"] * 1000,
                         "forward peak MB": fwd["peak_mb"], "fwd+bwd peak MB": bwd["peak_mb"],
                         "forward time vs sdpa": times[impl, "fwd"] / times["sdpa", "fwd"]})
    at = {r["kernel"]: r for r in rows if r["T"] == 2048}
    summary = {f"{impl} forward peak MB @2048": at[impl]["forward peak MB"] for impl in at}
    summary.update({f"{impl} fwd+bwd peak MB @2048": at[impl]["fwd+bwd peak MB"] for impl in at})
    summary.update({f"{impl} fwd+bwd ms @2048": at[impl]["fwd+bwd ms"] for impl in at})
    summary["device"] = device
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
    from benchmarks._harness import print_result

    result = run(args.quick)
    print_result(result)


if __name__ == "__main__":
    main()
