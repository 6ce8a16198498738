"""Throughput accounting: FLOPs per token of a decoder and the matmul peak of this device,
so the log can report model FLOPs utilisation (MFU) against a peak measured here."""

from __future__ import annotations

import time

import torch


def flops_per_token(config, seq_len: int, trainable_fraction: float = 1.0) -> float:
    """Training FLOPs per token: 6·N for the matmuls (N excludes the embedding lookup but
    includes the LM head) plus the attention scores, 6·2·L·d·T/2 for causal attention.
    With frozen weights (LoRA) the weight-gradient third drops out: 4·N."""
    d, layers = config.hidden_size, config.num_hidden_layers
    factor = 6.0 if trainable_fraction >= 0.5 else 4.0
    if getattr(config, "model_type", None) == "minimind-lstm":
        # an LSTM layer: 4 gates x (input + recurrent) d x d products; optional attention: q, k, v, o
        attend = bool(getattr(config, "use_attention", False))
        n = layers * 8 * d * d + (4 * d * d if attend else 0) + d * config.vocab_size
        return factor * n + (6 * d * seq_len if attend else 0)
    kv = config.num_key_value_heads * config.head_dim
    q = config.num_attention_heads * config.head_dim
    experts = config.num_experts_per_tok if getattr(config, "use_moe", False) else 1
    per_layer = d * (q + 2 * kv) + q * d + 3 * d * config.intermediate_size * experts
    n = layers * per_layer + d * config.vocab_size
    attention = 6 * layers * q * seq_len  # 2 matmuls × (fwd + 2 bwd) × T/2 causal × 2 flops
    return factor * n + attention


def matmul_peak_flops(device: str, dtype: torch.dtype, size: int | None = None, trials: int = 3,
                      seconds: float = 0.1) -> float:
    """Sustained FLOP/s of square matmuls in `dtype` on `device`, measured now: the best of
    `trials` runs of at least `seconds` each. Large matrices (2048 on a CPU, 8192 on a GPU) and
    the best trial, so that a moment of contention or a small, cache-bound size does not
    understate the peak (which would overstate MFU, even past 1)."""
    size = size or (8192 if device.startswith("cuda") else 2048)
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b
    _sync(device)
    best = 0.0
    for _ in range(max(trials, 1)):
        n, start = 0, time.perf_counter()
        while n == 0 or time.perf_counter() - start < seconds:
            a @ b
            n += 1
            _sync(device)
        best = max(best, 2 * size ** 3 * n / (time.perf_counter() - start))
    return best


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
