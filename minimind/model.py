"""The MiniMind decoder, top to bottom: norm, positions, attention, MLP, MoE, block, model.

Parameter names and math follow `transformers.LlamaForCausalLM` exactly
(`model.layers.N.self_attn.q_proj`, `rotate_half` rotary, SwiGLU, RMSNorm in
float32), so a dense rotary checkpoint opens as a stock Llama by rewriting config.json.

`config.position_encoding` picks how order reaches the model: `rope` rotates q and k
(Llama's); `alibi` adds a per-head distance penalty to the attention scores (the
kernels take its slopes); `sinusoidal` and `learned` add a position vector to the
token embeddings; `none` adds nothing (the causal mask alone tells positions apart).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import MoeCausalLMOutputWithPast

from .attention import ATTENTION_FUNCTIONS, alibi_slopes
from .config import MiniMindConfig


class RMSNorm(nn.Module):
    """x / rms(x) * weight, computed in float32 and cast back (as Llama does)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_inv_freq(config: MiniMindConfig) -> torch.Tensor:
    """Rotary inverse frequencies, with "ntk" scaling folded into the base and "llama3" scaling
    applied per frequency (Llama 3.1's rule: slow wavelengths divided by the factor, fast ones
    kept, a linear blend in between)."""
    d = config.head_dim
    theta = config.rope_theta
    if config.rope_scaling_type == "ntk":
        theta = theta * config.rope_scaling_factor ** (d / (d - 2))
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    if config.rope_scaling_type != "llama3":
        return inv_freq
    factor, low, high = config.rope_scaling_factor, config.rope_low_freq_factor, config.rope_high_freq_factor
    original = config.rope_original_max_position
    wavelength = 2 * math.pi / inv_freq
    scaled = torch.where(wavelength > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    between = (wavelength >= original / high) & (wavelength <= original / low)
    return torch.where(between, blended, scaled)


class RotaryEmbedding(nn.Module):
    """cos/sin tables for the given positions; "linear" scaling divides positions."""

    def __init__(self, config: MiniMindConfig):
        super().__init__()
        self.config = config
        self.position_scale = 1.0 / config.rope_scaling_factor if config.rope_scaling_type == "linear" else 1.0
        self.register_buffer("inv_freq", rope_inv_freq(config), persistent=False)

    def forward(self, position_ids: torch.Tensor, dtype: torch.dtype):
        pos = position_ids.float() * self.position_scale               # (B, T)
        freqs = pos[..., None] * self.inv_freq.float()                 # (B, T, D/2)
        emb = torch.cat((freqs, freqs), dim=-1)                        # (B, T, D)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def sinusoid_table(position_ids: torch.Tensor, config: MiniMindConfig) -> torch.Tensor:
    """(…, d) float32 fixed positions of "Attention Is All You Need": sin on even and cos on odd
    features at wavelengths 2π·10000^(2i/d). Scaled to the embeddings' initial size
    (std `initializer_range`), so neither drowns the other at the start of training."""
    d = config.hidden_size
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32, device=position_ids.device) / d))
    angles = position_ids.float()[..., None] * inv_freq                 # (…, d/2)
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # sin, cos interleaved
    return table * (config.initializer_range * 2 ** 0.5)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, T, D); cos/sin: (B, T, D)."""
    cos, sin = cos[:, None], sin[:, None]
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    """Grouped-query self-attention (rotary q/k or ALiBi scores, per the config) with an optional KV
    cache; optionally biased projections, per-head q/k RMSNorm (Qwen3) and a sliding window."""

    def __init__(self, config: MiniMindConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.head_dim = config.head_dim
        d = config.hidden_size
        bias = config.attention_bias
        self.q_proj = nn.Linear(d, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, d, bias=config.attention_out_bias)
        if config.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)

    def forward(self, x, positions, key_valid=None, cache: Cache | None = None):
        """`positions`: (cos, sin) for rotary, ("alibi", slopes) for ALiBi, None otherwise."""
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)                  # (B, T, Hq, D)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim)                     # (B, T, Hkv, D)
        if self.config.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)                                 # (B, H, T, D)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        alibi = None
        if positions is not None and positions[0] == "alibi":
            alibi = positions[1]
        elif positions is not None:
            q, k = apply_rotary(q, *positions), apply_rotary(k, *positions)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)                                # (B, Hkv, S, D)
        attend = ATTENTION_FUNCTIONS[self.config.attention_impl]
        out = attend(q, k, v, key_valid=key_valid, block_size=self.config.attention_block_size, alibi=alibi,
                     window=self.config.sliding_window)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    """Top-k routed SwiGLU experts. Returns (output, load-balancing loss).

    The balancing loss is the Switch-Transformer form E · Σ_e f_e · P_e, where f_e
    is the share of routed slots that went to expert e and P_e its mean router
    probability; it equals 1 when routing is perfectly uniform.
    """

    def __init__(self, config: MiniMindConfig):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.n_experts = config.num_experts
        self.gate = nn.Linear(config.hidden_size, config.num_experts, bias=False)
        self.experts = nn.ModuleList(MLP(config.hidden_size, config.intermediate_size)
                                     for _ in range(config.num_experts))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])                                   # (N, d)
        probs = torch.softmax(self.gate(x).float(), dim=-1)            # (N, E)
        weights, chosen = probs.topk(self.top_k, dim=-1)               # (N, k)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                out.index_add_(0, token, expert(x[token]) * weights[token, slot, None])
        share = F.one_hot(chosen, self.n_experts).float().mean(dim=(0, 1))  # f_e
        aux = self.n_experts * (share * probs.mean(0)).sum()
        return out.view(shape), aux


class DecoderLayer(GradientCheckpointingLayer):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, config: MiniMindConfig, layer_idx: int):
        super().__init__()
        self.self_attn = Attention(config, layer_idx)
        self.mlp = MoE(config) if config.use_moe else MLP(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, positions, key_valid=None, cache=None):
        x = x + self.dropout(self.self_attn(self.input_layernorm(x), positions, key_valid, cache))
        h = self.mlp(self.post_attention_layernorm(x))
        h, aux = h if isinstance(h, tuple) else (h, None)
        return x + self.dropout(h), aux


class MiniMindPreTrainedModel(PreTrainedModel):
    config: MiniMindConfig
    config_class = MiniMindConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["DecoderLayer"]
    _supports_sdpa = True

    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, RotaryEmbedding):  # a computed buffer, not a weight: rebuild after meta init
            with torch.no_grad():
                module.inv_freq.copy_(rope_inv_freq(module.config))


class MiniMindModel(MiniMindPreTrainedModel):
    """Embeddings (+ position vectors) → N decoder layers → final norm."""

    def __init__(self, config: MiniMindConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        if config.position_encoding == "learned":
            self.embed_positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if config.position_encoding == "rope":
            self.rotary_emb = RotaryEmbedding(config)
        self.post_init()

    def _positions(self, x: torch.Tensor, position_ids: torch.Tensor):
        """x with position vectors added (sinusoidal, learned), and what attention needs per layer:
        (cos, sin) for rope, ("alibi", slopes) for ALiBi, None otherwise."""
        encoding = self.config.position_encoding
        if encoding == "rope":
            return x, self.rotary_emb(position_ids, x.dtype)
        if encoding == "alibi":
            return x, ("alibi", alibi_slopes(self.config.num_attention_heads).to(x.device))
        if encoding == "sinusoidal":
            return x + sinusoid_table(position_ids, self.config).to(x.dtype), None
        if encoding == "learned":
            limit = self.config.max_position_embeddings
            if int(position_ids.max()) >= limit:
                raise ValueError(f"position {int(position_ids.max())} is past this model's {limit} learned "
                                 f"positions: a learned-position model cannot read beyond its context")
            return x + self.embed_positions(position_ids), None
        return x, None

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None,
                inputs_embeds=None, use_cache=None):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        b, t = x.shape[:2]
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        past = cache.get_seq_length() if cache is not None else 0

        key_valid = None
        if attention_mask is not None:
            if attention_mask.dim() != 2 or attention_mask.shape[1] != past + t:
                raise ValueError("attention_mask must be (batch, past + new tokens) of 0/1")
            if not bool(attention_mask.all()):
                key_valid = attention_mask.bool()
        if position_ids is None:
            if key_valid is not None:
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]
            else:
                position_ids = torch.arange(past, past + t, device=x.device)[None].expand(b, t)

        x, positions = self._positions(x, position_ids)
        aux_total = None
        for layer in self.layers:
            x, aux = layer(x, positions, key_valid, cache)
            if aux is not None:
                aux_total = aux if aux_total is None else aux_total + aux
        return self.norm(x), cache, aux_total


class MiniMindForCausalLM(MiniMindPreTrainedModel, GenerationMixin):
    """Decoder + LM head; `labels` gives the shifted next-token cross-entropy."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: MiniMindConfig):
        super().__init__(config)
        self.model = MiniMindModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None,
                inputs_embeds=None, labels=None, use_cache=None, logits_to_keep: int = 0, **kwargs):
        hidden, cache, aux = self.model(input_ids, attention_mask, position_ids, cache, inputs_embeds,
                                        use_cache if use_cache is not None else False)
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:]
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            loss = causal_lm_loss(logits, labels)
            if aux is not None and self.config.router_aux_loss_coef:
                loss = loss + self.config.router_aux_loss_coef * aux / self.config.num_hidden_layers
        return MoeCausalLMOutputWithPast(loss=loss, aux_loss=aux, logits=logits, cache=cache)


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of token t+1 given tokens ≤ t; label -100 is ignored."""
    logits = logits[:, :-1].reshape(-1, logits.shape[-1]).float()
    targets = labels[:, 1:].reshape(-1).to(logits.device)
    return F.cross_entropy(logits, targets, ignore_index=-100)
