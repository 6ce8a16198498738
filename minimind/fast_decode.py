"""Fast batch-1 decoding: a preallocated KV cache and a lean per-token step.

At batch 1 a small model's decode is bound by reading its weights once per
token plus the cost of launching ~15 small ops per layer from Python, not by
arithmetic. `FastDecoder` therefore reads the model's weights once at build
time into the layout the step wants (q/k/v and gate/up fused into one matrix
each, stored transposed so a token is one `x @ W`), keeps one preallocated
(L, 2, Hkv, S, D) key/value buffer per sequence written in place, takes the
rotary tables from the model's own rotary module, and runs the layers with as
few ops as the math allows (residual adds fused into `addmm`). In float32 it
gives the same greedy tokens as `model.generate` (tests/test_fast_decode.py).

Greedy decoding can also be speculative (`stream_tokens(..., draft=...)`): an
int8 copy of the model guesses several tokens, the exact weights check them all
in one pass, and the exact greedy picks are kept -- the same tokens, with the
exact weights read once per several tokens instead of once per token.

Works for `MiniMindForCausalLM` (dense or MoE: the MoE block is called as the
model's own module) and for a stock `transformers.LlamaForCausalLM` with our
parameter names. Anything else (a peft wrapper, biases, other activations)
runs through `ModelDecoder`, which drives the model's own forward with a
transformers cache: same interface, same sampling, just slower.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------- which path

def unsupported_reason(model: nn.Module) -> str | None:
    """Why the lean path cannot run `model` (None when it can)."""
    if hasattr(model, "peft_config"):
        return "a LoRA adapter that is not merged (load it with merge=True for the fast path)"
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in ("minimind", "llama"):
        return f"model type {model_type!r} (a peft wrapper or another architecture)"
    if model_type == "llama":
        if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
            return "Llama with projection biases"
        if getattr(config, "hidden_act", "silu") != "silu":
            return f"activation {config.hidden_act!r}"
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(model, "lm_head"):
        return "no model.layers / lm_head"
    attn = inner.layers[0].self_attn
    if not all(isinstance(getattr(attn, n, None), nn.Linear) and type(getattr(attn, n)) is nn.Linear
               for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
        return "attention projections are not plain nn.Linear (an unmerged adapter?)"
    return None


# ---------------------------------------------------------------- KV cache

class KVCache:
    """Keys and values of one sequence, preallocated: buffer (L, 2, Hkv, capacity, D).

    `length` counts the positions written so far; a step writes its keys and
    values in place at [length, length + T) and attends over [0, length + T).
    """

    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int,
                 dtype: torch.dtype, device: torch.device):
        self.buffer = torch.empty(layers, 2, kv_heads, capacity, head_dim, dtype=dtype, device=device)
        self.keys = list(self.buffer[:, 0])      # per-layer (Hkv, capacity, D) views, made once
        self.values = list(self.buffer[:, 1])
        self.capacity = capacity
        self.length = 0


# ---------------------------------------------------------------- lean path

@dataclass
class _Layer:
    """One decoder block's weights in the step's layout (matrices as (in, out))."""

    ln1: torch.Tensor               # input RMSNorm weight (d,)
    qkv: torch.Tensor               # fused q|k|v projection (d, (Hq + 2 Hkv) D)
    o: torch.Tensor                 # output projection (Hq D, d)
    ln2: torch.Tensor               # post-attention RMSNorm weight (d,)
    gate_up: torch.Tensor | None    # fused gate|up projection (d, 2 I); None for MoE
    down: torch.Tensor | None       # down projection (I, d); None for MoE
    moe: nn.Module | None           # the model's own MoE block (dense: None)


WEIGHT_MODES = (None, "bf16", "int8")


@dataclass
class Int8Matrix:
    """A weight matrix as int8 rows and one scale per row (symmetric, per output channel)."""

    q: torch.Tensor        # (out, in) int8
    scales: torch.Tensor   # (out,) bfloat16: row r is q[r] * scales[r]

    @classmethod
    def quantize(cls, w: torch.Tensor) -> "Int8Matrix":
        w = w.float()
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0
        q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
        return cls(q, scales.to(torch.bfloat16))

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, in) -> (M, out) float32, via PyTorch's int8 weight-only kernel (bf16 activations)."""
        return torch._weight_int8pack_mm(x.to(torch.bfloat16), self.q, self.scales).float()


def _onednn_pack(w: torch.Tensor):
    """oneDNN's blocked copy of an (in, out) float32 matrix for products with several rows at once
    (a prompt, or a batch of guessed tokens), or None where PyTorch has no oneDNN. At 2 to 32 rows
    it is about twice as fast as `torch.mm`, which repacks the weight on every call; for a single
    row `torch.mm`'s matrix-vector kernel stays the faster one."""
    if w.device.type != "cpu" or w.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), 16)
    except (RuntimeError, AttributeError):
        return None


def _rows_mm(x: torch.Tensor, packed) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def _param_versions(model: nn.Module) -> int:
    """Sum of the parameters' in-place version counters: changes when any weight is updated."""
    return sum(p._version for p in model.parameters())


class FastDecoder:
    """The lean decode path for one model. Thread-safe: weights are read-only and each
    sequence brings its own `KVCache`. Holds its own copy of the weight matrices (fused and
    transposed), so it costs about one more model's worth of memory; in exact mode on a CPU
    with oneDNN, one more again: a blocked copy for multi-token passes (prompts, speculative
    checks), which it computes about twice as fast.

    `weights` picks how the matrices are stored (norms, residual stream and KV cache stay
    float32 in every mode):
      None     the model's own dtype: exact (float32: the same greedy tokens as generate).
      "bf16"   bfloat16 matrices: half the bytes, not exact, and on a CPU without AMX no
               faster (PyTorch's bf16 matrix-vector product does not stream at full speed).
      "int8"   int8 matrices with one float scale per output row, multiplied with bf16
               activations (`torch._weight_int8pack_mm`): a quarter of the bytes, so on a
               bandwidth-bound CPU about 2.5x faster matmuls; approximate (greedy tokens
               drift from float32 after a while), so opt-in.
    """

    def __init__(self, model: nn.Module, weights: str | None = None):
        reason = unsupported_reason(model)
        if reason:
            raise ValueError(f"fast decode does not support this model: {reason}")
        if weights not in WEIGHT_MODES:
            raise ValueError(f"weights must be one of {WEIGHT_MODES}, got {weights!r}")
        self.model = model
        config = model.config
        self.config = config
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.n_heads
        self.hidden = config.hidden_size
        self.eps = config.rms_norm_eps
        self.max_positions = config.max_position_embeddings
        self.vocab_size = model.lm_head.weight.shape[0]
        self.device = model.lm_head.weight.device
        self.weights = weights
        self._version = _param_versions(model)
        with torch.no_grad():
            self._load_weights(model)
            self._load_rotary(model)

    # -- building

    def _mat(self, *weights: torch.Tensor):
        """nn.Linear weights (out, in), stacked on `out`; stored as (in, out) for x @ W, or as
        an `Int8Matrix` in "int8" mode."""
        stacked = torch.cat([w.detach() for w in weights])
        if self.weights == "int8":
            return Int8Matrix.quantize(stacked)
        dtype = torch.bfloat16 if self.weights == "bf16" else stacked.dtype
        return stacked.t().contiguous().to(dtype)

    def _load_weights(self, model: nn.Module) -> None:
        inner = model.model
        self.embed = inner.embed_tokens.weight.detach()                  # (V, d)
        self.final_norm = inner.norm.weight.detach().float()
        self.lm_head = self._mat(model.lm_head.weight)                   # (d, V)
        self.layers = []
        for block in inner.layers:
            a, mlp = block.self_attn, block.mlp
            dense = hasattr(mlp, "gate_proj")
            self.layers.append(_Layer(
                ln1=block.input_layernorm.weight.detach().float(),
                qkv=self._mat(a.q_proj.weight, a.k_proj.weight, a.v_proj.weight),
                o=self._mat(a.o_proj.weight),
                ln2=block.post_attention_layernorm.weight.detach().float(),
                gate_up=self._mat(mlp.gate_proj.weight, mlp.up_proj.weight) if dense else None,
                down=self._mat(mlp.down_proj.weight) if dense else None,
                moe=None if dense else mlp))
        self.intermediate = getattr(inner.layers[0].mlp, "down_proj", None)
        self.intermediate = self.intermediate.weight.shape[1] if self.intermediate is not None else 0
        # multi-row copies for `forward` (exact mode only): {id(matrix): packed}; empty when unsupported
        self.packed = {}
        if self.weights is None:
            mats = [self.lm_head] + [m for layer in self.layers for m in (layer.qkv, layer.o, layer.gate_up,
                                                                            layer.down) if m is not None]
            packed = [_onednn_pack(m) for m in mats]
            if all(p is not None for p in packed):
                self.packed = {id(m): p for m, p in zip(mats, packed)}

    def _load_rotary(self, model: nn.Module) -> None:
        """cos and sign-folded sin for every position, from the model's own rotary module, so
        rotate_half(x)·sin becomes roll(x, D/2)·sin_signed (one op fewer, bit-identical)."""
        rotary = model.model.rotary_emb
        positions = torch.arange(self.max_positions, device=self.device)[None]
        if self.config.model_type == "llama":
            probe = torch.empty(1, dtype=torch.float32, device=self.device)
            cos, sin = rotary(probe, positions)
        else:
            cos, sin = rotary(positions, torch.float32)
        cos, sin = cos[0], sin[0]                                         # (P, D)
        half = self.head_dim // 2
        self.cos = cos.contiguous()
        self.sin_signed = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1).contiguous()

    def is_current(self) -> bool:
        """False once any of the model's weights changed in place since this decoder was built."""
        return _param_versions(self.model) == self._version

    # -- running

    def new_cache(self, capacity: int) -> KVCache:
        capacity = min(capacity, self.max_positions)
        return KVCache(len(self.layers), self.n_kv, self.head_dim, capacity, torch.float32, self.device)

    def _linear(self, x: torch.Tensor, w) -> torch.Tensor:
        if isinstance(w, Int8Matrix):
            return w.mm(x)
        if w.dtype == x.dtype:
            return torch.mm(x, w)
        return torch.mm(x.to(w.dtype), w).float()

    def _rows(self, x: torch.Tensor, w) -> torch.Tensor:
        """x (T, in) @ w for T > 1: through the packed copy when there is one."""
        packed = self.packed.get(id(w))
        return _rows_mm(x, packed) if packed is not None else self._linear(x, w)

    def _linear_add(self, residual: torch.Tensor, x: torch.Tensor, w) -> torch.Tensor:
        if isinstance(w, Int8Matrix):
            return residual + w.mm(x)
        if w.dtype == x.dtype:
            return torch.addmm(residual, x, w)
        return residual + torch.mm(x.to(w.dtype), w).float()

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, cache: KVCache, all_logits: bool = False) -> torch.Tensor:
        """Run tokens `ids` (T,) after the cache's contents; returns the last position's logits (V,),
        or every position's (T, V) with `all_logits` (to check several guessed tokens at once)."""
        t, start = ids.shape[0], cache.length
        end = start + t
        if end > cache.capacity:
            raise ValueError(f"KV cache full: {end} positions > capacity {cache.capacity}")
        hq, hkv, hd = self.n_heads, self.n_kv, self.head_dim
        nq, nqk = hq * hd, (hq + hkv) * hd
        x = self.embed[ids].float()                                       # (T, d)
        cos = self.cos[start:end, None]                                   # (T, 1, D)
        sin = self.sin_signed[start:end, None]
        mask = None
        if t > 1 and start > 0:  # a chunk after cached tokens: causal within it, all of the past
            mask = torch.ones(t, end, dtype=torch.bool, device=x.device).tril(start)
        linear = self._rows if t > 1 else self._linear
        for i, layer in enumerate(self.layers):
            h = _rms_norm(x, layer.ln1, self.eps)
            qkv = linear(h, layer.qkv)                                    # (T, (Hq + 2Hkv) D)
            qk = qkv[:, :nqk].view(t, hq + hkv, hd)
            qk = qk * cos + qk.roll(hd // 2, -1) * sin                    # rotary on q and k at once
            kv = cache.buffer[i]                                          # (2, Hkv, S, D)
            kv[0, :, start:end] = qk[:, hq:].transpose(0, 1)
            kv[1, :, start:end] = qkv[:, nqk:].view(t, hkv, hd).transpose(0, 1)
            q = qk[:, :hq].transpose(0, 1)[None]                          # (1, Hq, T, D)
            a = F.scaled_dot_product_attention(q, kv[0, None, :, :end], kv[1, None, :, :end],
                                               attn_mask=mask, is_causal=t > 1 and mask is None,
                                               enable_gqa=hq != hkv)
            x = x + linear(a[0].transpose(0, 1).reshape(t, nq), layer.o)
            h = _rms_norm(x, layer.ln2, self.eps)
            if layer.moe is None:
                gu = linear(h, layer.gate_up)                             # (T, 2I)
                x = x + linear(F.silu(gu[:, :self.intermediate]) * gu[:, self.intermediate:], layer.down)
            else:
                x = x + layer.moe(h)[0]
        cache.length = end
        if all_logits:
            return linear(_rms_norm(x, self.final_norm, self.eps), self.lm_head)
        return self._linear(_rms_norm(x[-1:], self.final_norm, self.eps), self.lm_head)[0]

    @torch.inference_mode()
    def step(self, token: int, cache: KVCache) -> torch.Tensor:
        """One new token after the cache's contents: `forward` with T = 1 and nothing it does
        not need (no index tensors, no masks, views made once), since this runs per token."""
        p = cache.length
        if p >= cache.capacity:
            raise ValueError(f"KV cache full: {p + 1} positions > capacity {cache.capacity}")
        hq, hkv, hd = self.n_heads, self.n_kv, self.head_dim
        nq, nqk, inter, eps = hq * hd, (hq + hkv) * hd, self.intermediate, self.eps
        linear, linear_add = self._linear, self._linear_add
        x = self.embed[token:token + 1].float()                          # (1, d)
        cos, sin = self.cos[p:p + 1], self.sin_signed[p:p + 1]            # (1, D)
        for layer, keys, values in zip(self.layers, cache.keys, cache.values):
            qkv = linear(_rms_norm(x, layer.ln1, eps), layer.qkv)[0]       # ((Hq + 2Hkv) D,)
            qk = qkv[:nqk].view(hq + hkv, hd)
            qk = qk * cos + qk.roll(hd // 2, -1) * sin
            keys[:, p] = qk[hq:]
            values[:, p] = qkv[nqk:].view(hkv, hd)
            a = F.scaled_dot_product_attention(qk[None, :hq, None], keys[None, :, :p + 1],
                                               values[None, :, :p + 1], enable_gqa=hq != hkv)
            x = linear_add(x, a.view(1, nq), layer.o)
            h = _rms_norm(x, layer.ln2, eps)
            if layer.moe is None:
                gu = linear(h, layer.gate_up)
                x = linear_add(x, F.silu(gu[:, :inter]) * gu[:, inter:], layer.down)
            else:
                x = x + layer.moe(h)[0]
        cache.length = p + 1
        return linear(_rms_norm(x, self.final_norm, eps), self.lm_head)[0]

    @torch.inference_mode()
    def step_batch(self, tokens: Sequence[int], caches: Sequence[KVCache]) -> torch.Tensor:
        """One new token for each of several sequences (each with its own cache and length):
        logits (B, V). The matmuls run once for the whole batch -- the weights are read once,
        which is what a bandwidth-bound decode pays for -- and attention runs per sequence.
        A batch of one is `step` itself, so a lone request decodes exactly as it would alone."""
        if len(tokens) == 1:
            return self.step(tokens[0], caches[0])[None]
        positions = [c.length for c in caches]
        for p, c in zip(positions, caches):
            if p >= c.capacity:
                raise ValueError(f"KV cache full: {p + 1} positions > capacity {c.capacity}")
        b = len(tokens)
        hq, hkv, hd = self.n_heads, self.n_kv, self.head_dim
        nq, nqk, inter, eps = hq * hd, (hq + hkv) * hd, self.intermediate, self.eps
        linear = self._rows                                               # b > 1 rows: the packed copy
        linear_add = lambda residual, rows, w: residual + self._rows(rows, w)  # noqa: E731
        index = torch.tensor(positions, device=self.device)
        x = self.embed[torch.tensor(list(tokens), device=self.device)].float()   # (B, d)
        cos, sin = self.cos[index][:, None], self.sin_signed[index][:, None]       # (B, 1, D)
        for i, layer in enumerate(self.layers):
            qkv = linear(_rms_norm(x, layer.ln1, eps), layer.qkv)                  # (B, (Hq + 2Hkv) D)
            qk = qkv[:, :nqk].view(b, hq + hkv, hd)
            qk = qk * cos + qk.roll(hd // 2, -1) * sin
            v = qkv[:, nqk:].view(b, hkv, hd)
            out = []
            for row, (p, c) in enumerate(zip(positions, caches)):
                keys, values = c.keys[i], c.values[i]
                keys[:, p] = qk[row, hq:]
                values[:, p] = v[row]
                out.append(F.scaled_dot_product_attention(qk[row, None, :hq, None], keys[None, :, :p + 1],
                                                          values[None, :, :p + 1], enable_gqa=hq != hkv))
            x = linear_add(x, torch.cat(out).view(b, nq), layer.o)
            h = _rms_norm(x, layer.ln2, eps)
            if layer.moe is None:
                gu = linear(h, layer.gate_up)
                x = linear_add(x, F.silu(gu[:, :inter]) * gu[:, inter:], layer.down)
            else:
                x = x + layer.moe(h)[0]
        for c in caches:
            c.length += 1
        return linear(_rms_norm(x, self.final_norm, eps), self.lm_head)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The model's RMSNorm (float32, x · rsqrt(mean(x²) + eps) · w) as PyTorch's one fused op;
    on float32 input it is bit-identical to the model's composite and a few ops cheaper."""
    return F.rms_norm(x, weight.shape, weight, eps)


# ---------------------------------------------------------------- reference path

class ModelDecoder:
    """The same interface over the model's own forward and a transformers DynamicCache:
    for models the lean path does not cover (peft wrappers, other architectures)."""

    def __init__(self, model: nn.Module):
        self.model = model
        config = model.config
        self.max_positions = getattr(config, "max_position_embeddings", 2048)
        self.vocab_size = model.get_output_embeddings().weight.shape[0]
        self.device = next(model.parameters()).device

    def is_current(self) -> bool:
        return True

    def new_cache(self, capacity: int):
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, cache) -> torch.Tensor:
        out = self.model(input_ids=ids[None].to(self.device), cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[0, -1].float()

    def step(self, token: int, cache) -> torch.Tensor:
        return self.forward(torch.tensor([token], device=self.device), cache)


def decoder_for(model: nn.Module, weights: str | None = None) -> FastDecoder | ModelDecoder:
    """The decoder for `model`, built once and kept on the model object (rebuilt after its
    weights change in place). Lean path when supported, else the model's own forward.
    `weights`: see FastDecoder (None = exact)."""
    key = f"_minimind_decoder_{weights}"
    cached = model.__dict__.get(key)
    if cached is not None and cached.is_current():
        return cached
    decoder = FastDecoder(model, weights) if unsupported_reason(model) is None else ModelDecoder(model)
    model.__dict__[key] = decoder
    return decoder


# ---------------------------------------------------------------- sampling

class TokenSampler:
    """Picks the next token from logits: repetition penalty over every token seen
    (prompt included, as transformers does), then temperature, top-k, top-p, and a
    draw from a seeded `torch.Generator`; temperature 0 is argmax (greedy)."""

    def __init__(self, vocab_size: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 repetition_penalty: float = 1.0, seed: int | None = None):
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.penalty = repetition_penalty
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)
        self.seen = torch.zeros(vocab_size, dtype=torch.bool) if repetition_penalty != 1.0 else None

    def observe(self, tokens: Sequence[int]) -> None:
        if self.seen is not None and len(tokens):
            self.seen[torch.as_tensor(list(tokens), dtype=torch.long)] = True

    def choose(self, logits: torch.Tensor) -> int:
        logits = logits.float().cpu()
        if self.seen is not None:
            penalised = torch.where(logits < 0, logits * self.penalty, logits / self.penalty)
            logits = torch.where(self.seen[:logits.shape[0]], penalised, logits)
        if self.temperature == 0:
            token = int(logits.argmax())
        else:
            token = self._draw(logits / self.temperature)
        if self.seen is not None:
            self.seen[token] = True
        return token

    def _draw(self, logits: torch.Tensor) -> int:
        if 0 < self.top_k < logits.shape[0]:
            kth = torch.topk(logits, self.top_k).values[-1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1.0:
            ordered, order = torch.sort(logits)                           # ascending
            cumulative = ordered.softmax(-1).cumsum(-1)
            drop = cumulative <= 1.0 - self.top_p
            drop[-1] = False                                              # always keep the best token
            logits = logits.masked_fill(drop.scatter(0, order, drop), float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        return int(torch.multinomial(probs, 1, generator=self.generator))


# ---------------------------------------------------------------- the loop

def stream_tokens(decoder: FastDecoder | ModelDecoder, prompt_ids: Sequence[int], sampler: TokenSampler,
                  max_new_tokens: int, stop_ids: Sequence[int] = (), draft: FastDecoder | None = None,
                  lookahead: int = 8) -> Iterator[int]:
    """Yield up to `max_new_tokens` token ids after `prompt_ids`; a stop id is yielded, then ends.

    With a `draft` decoder (e.g. `decoder_for(model, "int8")`) and a greedy sampler, decoding is
    speculative (see `speculative_tokens`): the same tokens, fewer passes over the exact weights."""
    if not prompt_ids:
        raise ValueError("the prompt is empty")
    if max_new_tokens <= 0:
        return
    if draft is not None and sampler.temperature == 0 and isinstance(decoder, FastDecoder):
        yield from speculative_tokens(decoder, draft, prompt_ids, sampler, max_new_tokens, stop_ids, lookahead)
        return
    stop = set(stop_ids)
    cache = decoder.new_cache(len(prompt_ids) + max_new_tokens)
    sampler.observe(prompt_ids)
    logits = decoder.forward(torch.as_tensor(list(prompt_ids), dtype=torch.long, device=decoder.device), cache)
    for i in range(max_new_tokens):
        token = sampler.choose(logits)
        yield token
        if token in stop or i == max_new_tokens - 1:
            return
        logits = decoder.step(token, cache)


def speculative_tokens(decoder: FastDecoder, draft: FastDecoder, prompt_ids: Sequence[int],
                       sampler: TokenSampler, max_new_tokens: int, stop_ids: Sequence[int] = (),
                       lookahead: int = 8) -> Iterator[int]:
    """Greedy decoding that reads the exact weights once per several tokens instead of once per token.

    A cheap `draft` (the same model with int8 weights: a quarter of the bytes) guesses the next
    `lookahead` tokens one by one; the exact `decoder` then runs the last token and all guesses in
    one pass (one read of its weights for k + 1 positions, which at batch 1 costs little more
    than one position) and the sampler picks each position's token from the exact logits, in
    order, as plain decoding would. Guesses are kept while they equal the pick; the first
    mismatch is replaced by the exact pick and the rest are dropped (their cache entries are
    overwritten later). So the tokens are the exact model's greedy tokens; the draft only
    decides how many come per pass.
    """
    stop = set(stop_ids)
    capacity = len(prompt_ids) + max_new_tokens + lookahead + 1
    cache, draft_cache = decoder.new_cache(capacity), draft.new_cache(capacity)
    device = decoder.device
    sampler.observe(prompt_ids)
    prompt = torch.as_tensor(list(prompt_ids), dtype=torch.long, device=device)
    token = sampler.choose(decoder.forward(prompt, cache))
    draft.forward(prompt, draft_cache)
    yield token
    emitted, pending = 1, [token]  # pending: tokens the draft cache has not seen yet
    while emitted < max_new_tokens and token not in stop:
        k = min(lookahead, max_new_tokens - emitted - 1)
        guesses: list[int] = []
        if k > 0:
            logits = (draft.step(pending[0], draft_cache) if len(pending) == 1 else
                      draft.forward(torch.as_tensor(pending, dtype=torch.long, device=device), draft_cache))
            for i in range(k):
                guesses.append(int(logits.argmax()))
                if i < k - 1:
                    logits = draft.step(guesses[-1], draft_cache)
        start = cache.length
        exact = decoder.forward(torch.as_tensor([token] + guesses, dtype=torch.long, device=device), cache,
                                all_logits=True)
        for i in range(len(guesses) + 1):
            token = sampler.choose(exact[i])
            yield token
            emitted += 1
            if token in stop or emitted >= max_new_tokens:
                return
            if i == len(guesses) or token != guesses[i]:
                break
        cache.length = start + i + 1  # the last token, then the guesses that were kept
        # the draft has seen the guesses it stepped on (all but the last one)
        draft_cache.length = min(cache.length, draft_cache.length)
        pending = guesses[draft_cache.length - start - 1:i] + [token] if k > 0 else [token]
