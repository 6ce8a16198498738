"""The engine's one layer loop: B sequences x T new tokens each, after what their caches hold.

Prefill is B = 1 with the prompt's T tokens, decoding is B active sequences with one
token each (a lone request is B = 1, T = 1), and checking several tokens at once is
B = 1 with T of them. The weight products run once for all B x T rows (a decode step
reads each matrix once for the whole batch, which is what a bandwidth-bound CPU pays
for); attention reads each sequence's own cache: one masked call over the caches stacked
to the longest for a decode step, one call per sequence for a multi-token pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..attention import alibi_bias
from .weights import Weights


class KVCache:
    """Keys and values of one sequence, preallocated: (layers, 2, Hkv, capacity, D).

    `length` counts the positions written; a pass writes at [length, length + T)."""

    def __init__(self, weights: Weights, capacity: int):
        capacity = min(capacity, weights.max_positions)
        # zeros, not empty: a batched decode step reads past a short sequence's end (masked out,
        # but a NaN left in unused memory would still poison the weighted sum)
        self.buffer = torch.zeros(len(weights.layers), 2, weights.n_kv, capacity, weights.head_dim,
                                  dtype=torch.float32, device=weights.device)
        self.keys = list(self.buffer[:, 0])      # per-layer (Hkv, capacity, D) views, made once
        self.values = list(self.buffer[:, 1])
        self.capacity = capacity
        self.length = 0


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The model's RMSNorm in float32 as PyTorch's fused op (bit-identical on float32 input)."""
    return F.rms_norm(x, weight.shape, weight, eps)


@torch.inference_mode()
def forward(w: Weights, ids: torch.Tensor, caches: Sequence[KVCache], all_logits: bool = False) -> torch.Tensor:
    """Run `ids` (B, T) after each cache's contents and advance the caches. Returns float32 logits
    (B, V) of each sequence's last position, or (B, T, V) with `all_logits`.

    Everything per token is done once for all B x T rows; only attention, which reads each
    sequence's own cache, loops over the B sequences of a multi-token pass (a decode step of
    several sequences attends in one masked call; B = 1 needs no mask)."""
    b, t = ids.shape
    starts = [c.length for c in caches]
    for s, c in zip(starts, caches):
        if s + t > c.capacity:
            raise ValueError(f"KV cache full: {s + t} positions > capacity {c.capacity}")
    hq, hkv, hd, eps = w.n_heads, w.n_kv, w.head_dim, w.eps
    nq, nqk, inter, gqa = hq * hd, (hq + hkv) * hd, w.intermediate, hq != hkv
    rows = b * t
    x = w.embed[ids.view(-1)].float()                                       # (BT, d)
    if b == 1:                                                              # a slice: no gather
        s0 = starts[0]
        positions = slice(s0, s0 + t)
    else:
        positions = (torch.tensor(starts, device=w.device)[:, None] + torch.arange(t, device=w.device)).view(-1)
    rotary = w.cos is not None
    if rotary:
        cos, sin = w.cos[positions, None], w.sin_signed[positions, None]     # (BT, 1, D)
    if w.position_table is not None:                                         # sinusoidal / learned
        x = x + w.position_table[positions]
    # a chunk after cached tokens attends causally within itself and to all of its past
    masked = t > 1 or w.alibi is not None or w.window is not None
    masks = [_chunk_mask(w, s, t) for s in starts] if masked else [None] * b
    # a decode step of several sequences attends in one call, each row masked to its own length
    length_mask = _length_mask(w, starts) if b > 1 and t == 1 else None
    mm = w.mm
    for i, layer in enumerate(w.layers):
        qkv = mm(_rms_norm(x, layer.ln1, eps), layer.qkv)                   # (BT, (Hq + 2Hkv) D)
        qk = qkv[:, :nqk].view(rows, hq + hkv, hd)
        if layer.qk_norm is not None:                                       # per-head q/k RMSNorm (Qwen3)
            qk = F.rms_norm(qk, (hd,), None, eps) * layer.qk_norm
        if rotary:
            qk = qk * cos + qk.roll(hd // 2, -1) * sin                      # rotary on q and k at once
        v = qkv[:, nqk:].view(rows, hkv, hd)
        if b == 1:
            a = _attend(qk, v, caches[0], i, s0, t, masks[0], hq, gqa)
        elif t == 1:
            a = _attend_decode(qk, v, caches, i, starts, length_mask, hq, gqa)
        else:
            a = torch.cat([_attend(qk[r * t:(r + 1) * t], v[r * t:(r + 1) * t], c, i, s, t, masks[r], hq, gqa)
                           for r, (s, c) in enumerate(zip(starts, caches))])
        x = mm(a.reshape(rows, nq), layer.o, residual=x)
        h = _rms_norm(x, layer.ln2, eps)
        if layer.moe is None:
            gu = mm(h, layer.gate_up)                                        # (BT, 2I)
            x = mm(w.act(gu[:, :inter]) * gu[:, inter:], layer.down, residual=x)
        else:
            x = x + layer.moe(h.to(w.dtype))[0].float()                        # the model's own MoE block
    for c in caches:
        c.length += t
    if all_logits:
        return mm(_rms_norm(x, w.final_norm, eps), w.lm_head).view(b, t, -1)
    last = x if t == 1 else x.view(b, t, -1)[:, -1]
    return mm(_rms_norm(last, w.final_norm, eps), w.lm_head)


def _attend(qk: torch.Tensor, v: torch.Tensor, cache: KVCache, layer: int, start: int, t: int, mask, hq: int,
            gqa: bool) -> torch.Tensor:
    """One sequence's T rows: write their keys and values at [start, start + T) and attend over
    [0, start + T). qk (T, Hq + Hkv, D) rotated, v (T, Hkv, D) -> (T, Hq, D)."""
    keys, values = cache.keys[layer], cache.values[layer]
    end = start + t
    keys[:, start:end] = qk[:, hq:].transpose(0, 1)
    values[:, start:end] = v.transpose(0, 1)
    q = qk[:, :hq].transpose(0, 1)[None]                                    # (1, Hq, T, D)
    out = F.scaled_dot_product_attention(q, keys[None, :, :end], values[None, :, :end], attn_mask=mask,
                                         is_causal=t > 1 and mask is None, enable_gqa=gqa)
    return out[0].transpose(0, 1)


def _chunk_mask(w: Weights, start: int, t: int):
    """What T new tokens after `start` cached ones may see, for one sequence: None where plain
    causal attention says it all (rotary etc. from an empty cache), a (T, start + T) bool mask
    after cached tokens or past a sliding window, or with ALiBi a float (Hq, T, start + T) mask
    carrying the bias."""
    windowed = w.window is not None and start + t > w.window
    if w.alibi is None and not windowed:
        return torch.ones(t, start + t, dtype=torch.bool, device=w.device).tril(start) if start > 0 else None
    q_abs = torch.arange(start, start + t, device=w.device)
    k_abs = torch.arange(start + t, device=w.device)
    allowed = k_abs[None, :] <= q_abs[:, None]                              # (T, S)
    if windowed:
        allowed = allowed & (q_abs[:, None] - k_abs[None, :] < w.window)
    if w.alibi is None:
        return allowed
    bias = alibi_bias(w.alibi, q_abs, k_abs)                                # (Hq, T, S)
    return bias.masked_fill(~allowed[None], float("-inf"))


def _length_mask(w: Weights, starts: list[int]) -> torch.Tensor:
    """(B, 1, 1, L) True where a sequence has a position: its cached ones (the last `window`, with a
    sliding window) and the new token; with ALiBi a float (B, Hq, 1, L) mask holding each row's bias there and -inf past its end."""
    lengths = torch.tensor(starts, device=w.device) + 1
    k_abs = torch.arange(int(lengths.max()), device=w.device)
    valid = k_abs[None] < lengths[:, None]                                  # (B, L)
    if w.window is not None:                                                # a sliding window: recent keys only
        valid = valid & (k_abs[None] > (lengths - 1 - w.window)[:, None])
    valid = valid[:, None, None]                                            # (B, 1, 1, L)
    if w.alibi is None:
        return valid
    distance = (k_abs[None] - (lengths - 1)[:, None]).float()              # (B, L)
    bias = w.alibi[None, :, None, None] * distance[:, None, None, :]        # (B, Hq, 1, L)
    return bias.masked_fill(~valid, float("-inf"))


def _attend_decode(qk: torch.Tensor, v: torch.Tensor, caches: Sequence[KVCache], layer: int, starts: list[int],
                   mask: torch.Tensor, hq: int, gqa: bool) -> torch.Tensor:
    """One new token of each of B sequences: write its key and value into its own cache, then
    attend for all B in one call over their caches stacked to the longest length (positions
    past a sequence's end are masked). qk (B, Hq + Hkv, D), v (B, Hkv, D) -> (B, Hq, D)."""
    length = mask.shape[-1]
    keys, values = [], []
    for r, (s, c) in enumerate(zip(starts, caches)):
        k_cache, v_cache = c.keys[layer], c.values[layer]
        k_cache[:, s] = qk[r, hq:]
        v_cache[:, s] = v[r]
        keys.append(k_cache[:, :length])
        values.append(v_cache[:, :length])
    if any(k.shape[1] < length for k in keys):  # a cache shorter than the longest sequence: pad it
        keys = [F.pad(k, (0, 0, 0, length - k.shape[1])) for k in keys]
        values = [F.pad(x, (0, 0, 0, length - x.shape[1])) for x in values]
    q = qk[:, :hq, None]                                                    # (B, Hq, 1, D)
    out = F.scaled_dot_product_attention(q, torch.stack(keys), torch.stack(values), attn_mask=mask,
                                         enable_gqa=gqa)
    return out[:, :, 0]
