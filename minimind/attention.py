"""Three interchangeable causal attention kernels with one signature.

- `sdpa`: PyTorch's fused scaled_dot_product_attention (the default).
- `eager`: softmax(QKᵀ/√d)V written out; the readable reference.
- `blocked`: a tiled online-softmax ("flash") attention in plain PyTorch. It
  walks key tiles per query tile and keeps a running max and sum, so the
  largest score tensor it holds is tile × tile, never T × S. Its backward
  recomputes each tile from the saved row log-sum-exp (as FlashAttention
  does), so training memory stays linear in T as well.

All take q (B, Hq, T, D) and k, v (B, Hkv, S, D) where the T queries sit at
absolute positions S-T .. S-1 (S-T keys come from the KV cache). A query sees
keys at or before its own position and, when `key_valid` (B, S) is given, only
valid (non-padding) keys -- plus always itself, so that a padding query never
has an empty row (its output is ignored downstream, but it stays finite).

`alibi` (Hq,) per-head slopes, when given, adds ALiBi's linear distance penalty
slope·(key position − query position) to every score after scaling (Press et al.,
"Train Short, Test Long"); each kernel adds it where it forms its scores, so the
blocked kernel's backward recomputes it per tile like the rest of the score.

`window`, when given, is a sliding window (Mistral's): a query sees only the `window`
keys ending at its own position (query position − key position < window).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _mask(key_valid: torch.Tensor | None, q_abs: torch.Tensor, k_abs: torch.Tensor,
          window: int | None = None) -> torch.Tensor:
    """(B|1, 1, len(q_abs), len(k_abs)) bool: causal (within `window`), padding-aware, diagonal always allowed."""
    causal = k_abs[None, :] <= q_abs[:, None]                     # (t, k)
    if window is not None:
        causal = causal & (q_abs[:, None] - k_abs[None, :] < window)
    if key_valid is None:
        return causal[None, None]
    diag = k_abs[None, :] == q_abs[:, None]                       # (t, k)
    valid = key_valid[:, k_abs][:, None, None, :]                 # (B, 1, 1, k)
    return causal[None, None] & (valid | diag[None, None])


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes: 2^(-8/n), 2^(-16/n), ... for n a power of two; otherwise those of the
    nearest lower power of two followed by every other slope of twice that many (the paper's rule)."""
    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    closest = 2 ** int(math.floor(math.log2(n_heads)))
    slopes = geometric(closest) + geometric(2 * closest)[0::2][:n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(slopes: torch.Tensor, q_abs: torch.Tensor, k_abs: torch.Tensor) -> torch.Tensor:
    """(H, len(q_abs), len(k_abs)) float32: slope · (key position − query position), ≤ 0 where causal."""
    distance = (k_abs[None, :] - q_abs[:, None]).float()
    return slopes.float()[:, None, None] * distance[None]


def causal_mask(key_valid: torch.Tensor | None, t: int, s: int, device, window: int | None = None) -> torch.Tensor:
    """Full (B|1, 1, T, S) mask for the kernels that use one (sdpa with padding or a window, eager)."""
    q_abs = torch.arange(s - t, s, device=device)
    k_abs = torch.arange(s, device=device)
    return _mask(key_valid, q_abs, k_abs, window)


def eager_attention(q, k, v, key_valid=None, scale=None, block_size=None, alibi=None, window=None):
    """softmax(QKᵀ·scale (+ ALiBi) + mask)·V with the full score matrix; float32 softmax."""
    b, hq, t, d = q.shape
    s = k.shape[2]
    groups = hq // k.shape[1]
    k = k.repeat_interleave(groups, dim=1)                        # (B, Hq, S, D)
    v = v.repeat_interleave(groups, dim=1)
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale  # (B, Hq, T, S)
    if alibi is not None:
        scores = scores + alibi_bias(alibi, torch.arange(s - t, s, device=q.device), torch.arange(s, device=q.device))
    scores = scores.masked_fill(~causal_mask(key_valid, t, s, q.device, window), float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype)
    return torch.matmul(probs, v)                                 # (B, Hq, T, D)


def sdpa_attention(q, k, v, key_valid=None, scale=None, block_size=None, alibi=None, window=None):
    """PyTorch's fused kernel; picks is_causal when no explicit mask is needed. ALiBi goes in
    as an additive float mask (the bias where a key is allowed, -inf where it is not)."""
    t, s = q.shape[2], k.shape[2]
    gqa = q.shape[1] != k.shape[1]
    if window is not None and window >= s:
        window = None                                                             # every key is inside it
    if alibi is not None:
        allowed = causal_mask(key_valid, t, s, q.device, window)                  # (B|1, 1, T, S)
        bias = alibi_bias(alibi, torch.arange(s - t, s, device=q.device), torch.arange(s, device=q.device))
        mask = bias[None].masked_fill(~allowed, float("-inf")).to(q.dtype)        # (B|1, Hq, T, S)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)
    if key_valid is None and window is None and t == s:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=gqa)
    if key_valid is None and window is None and t == 1:
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=gqa)
    mask = causal_mask(key_valid, t, s, q.device, window)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=gqa)


def _tiles(t: int, s: int, block: int):
    """(query slice, absolute query positions, key end) for each query tile; keys stop at the
    last query's position (causal), so tiles above the diagonal are never computed."""
    for q0 in range(0, t, block):
        q1 = min(q0 + block, t)
        yield q0, q1, s - t + q0, s - t + q1


def _scores(q_tile, k, k0, k1, key_valid, q_abs, scale, alibi, window):
    """Masked scores (B, Hkv, G, tq, tk) in float32 for one tile pair; `alibi` is (Hkv, G) or None."""
    scores = torch.matmul(q_tile, k[:, :, None, k0:k1].transpose(-1, -2)).float() * scale
    k_abs = torch.arange(k0, k1, device=q_tile.device)
    if alibi is not None:
        distance = (k_abs[None, :] - q_abs[:, None]).float()                   # (tq, tk)
        scores = scores + alibi[:, :, None, None] * distance
    allowed = _mask(key_valid, q_abs, k_abs, window)[:, :, None]  # (B|1, 1, 1, tq, tk)
    return scores.masked_fill(~allowed, float("-inf"))


def _blocked_forward(qg, k, v, key_valid, scale, block, alibi, window):
    """Online softmax over key tiles. Returns output (B, Hkv, G, T, D) and row log-sum-exp."""
    b, hkv, g, t, d = qg.shape
    s = k.shape[2]
    out = torch.empty(b, hkv, g, t, d, dtype=torch.float32, device=qg.device)
    lse = torch.empty(b, hkv, g, t, 1, dtype=torch.float32, device=qg.device)
    for q0, q1, a0, a1 in _tiles(t, s, block):
        q_tile, q_abs = qg[:, :, :, q0:q1], torch.arange(a0, a1, device=qg.device)
        m = torch.full((b, hkv, g, q1 - q0, 1), float("-inf"), device=qg.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(b, hkv, g, q1 - q0, d, device=qg.device)
        for k0 in range(0, a1, block):
            k1 = min(k0 + block, a1)
            scores = _scores(q_tile, k, k0, k1, key_valid, q_abs, scale, alibi, window)
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
            m_safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(scores - m_safe)
            alpha = torch.exp(m - m_safe)
            l = alpha * l + p.sum(dim=-1, keepdim=True)
            acc = alpha * acc + torch.matmul(p, v[:, :, None, k0:k1].float())
            m = m_new
        out[:, :, :, q0:q1] = acc / l
        lse[:, :, :, q0:q1] = m + torch.log(l)
    return out, lse


class _BlockedAttention(torch.autograd.Function):
    """Flash-style attention: saves only q, k, v, the output and the row log-sum-exp, and
    recomputes each score tile in backward, so training memory is linear in T too."""

    @staticmethod
    def forward(ctx, qg, k, v, key_valid, scale, block, alibi, window):
        out, lse = _blocked_forward(qg, k, v, key_valid, scale, block, alibi, window)
        ctx.save_for_backward(qg, k, v, out, lse, key_valid, alibi)
        ctx.scale, ctx.block, ctx.window = scale, block, window
        return out.to(qg.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        qg, k, v, out, lse, key_valid, alibi = ctx.saved_tensors
        scale, block, window = ctx.scale, ctx.block, ctx.window
        t, s = qg.shape[3], k.shape[2]
        grad_out = grad_out.float()
        delta = (grad_out * out).sum(dim=-1, keepdim=True)         # (B, Hkv, G, T, 1)
        dq = torch.zeros_like(qg, dtype=torch.float32)
        dk = torch.zeros_like(k, dtype=torch.float32)
        dv = torch.zeros_like(v, dtype=torch.float32)
        for q0, q1, a0, a1 in _tiles(t, s, block):
            q_tile, q_abs = qg[:, :, :, q0:q1], torch.arange(a0, a1, device=qg.device)
            go, row_lse, row_delta = grad_out[:, :, :, q0:q1], lse[:, :, :, q0:q1], delta[:, :, :, q0:q1]
            for k0 in range(0, a1, block):
                k1 = min(k0 + block, a1)
                p = torch.exp(_scores(q_tile, k, k0, k1, key_valid, q_abs, scale, alibi, window) - row_lse)
                k_tile, v_tile = k[:, :, None, k0:k1].float(), v[:, :, None, k0:k1].float()
                dv[:, :, k0:k1] += torch.matmul(p.transpose(-1, -2), go).sum(dim=2)
                dp = torch.matmul(go, v_tile.transpose(-1, -2))
                ds = p * (dp - row_delta) * scale
                dq[:, :, :, q0:q1] += torch.matmul(ds, k_tile)
                dk[:, :, k0:k1] += torch.matmul(ds.transpose(-1, -2), q_tile.float()).sum(dim=2)
        return dq.to(qg.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None, None


def blocked_attention(q, k, v, key_valid=None, scale=None, block_size=128, alibi=None, window=None):
    """Tiled online-softmax attention; never holds a T × S score matrix."""
    b, hq, t, d = q.shape
    hkv = k.shape[1]
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    qg = q.reshape(b, hkv, hq // hkv, t, d)                       # query heads grouped by kv head
    grouped = None if alibi is None else alibi.float().reshape(hkv, hq // hkv)  # head h = kv·G + g, as qg
    out = _BlockedAttention.apply(qg, k, v, key_valid, scale, block_size, grouped, window)
    return out.reshape(b, hq, t, d)


ATTENTION_FUNCTIONS = {
    "sdpa": sdpa_attention,
    "eager": eager_attention,
    "blocked": blocked_attention,
}
