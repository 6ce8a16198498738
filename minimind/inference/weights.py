"""A model's weights in the layout the engine's layer loop reads, without a second copy.

A decode step multiplies one row by every matrix; on a CPU that is fastest as
`x @ W` with W stored (in, out). So each projection is stored that way, q/k/v and
gate/up fused into one matrix each, and the model's own parameters are re-pointed at
(transposed) views of that storage: the model's forward, its `save_pretrained` and the
engine all read the same memory, and preparing costs no weight copy. Products with
several rows (a prompt, a batch of sequences, guessed tokens) go through oneDNN's
blocked copy of a matrix, made the first time a multi-row product needs it: two to five
times faster than BLAS from 4 rows on (benchmarks/NOTES.md).

A prepared model still trains, saves and copies as before; its `state_dict()` hands out
contiguous copies of the transposed views (what safetensors and transformers' savers
expect), so editing a state_dict's tensors in place no longer edits such a model.

`draft()` gives the same weights with int8 matrices (a quarter of the bytes), which the
scheduler uses to guess tokens for speculative greedy decoding.

Works for `MiniMindForCausalLM` (dense or MoE; the MoE block runs as the model's own
module) and for `transformers.LlamaForCausalLM` (biases and activations included).
"""

from __future__ import annotations

import copy
import threading
import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import alibi_slopes
from ..errors import MiniMindError
from ..model import sinusoid_table
from .weak_cache import WeakCache

_PREPARED: WeakCache[Weights] = WeakCache()      # each model's prepared weights, while the model lives
_CONTIGUOUS_STATE: WeakCache = WeakCache()       # models whose state_dict hands out contiguous copies (the hook)


class EngineError(MiniMindError):
    """The engine cannot run this model (what to do instead is in the message)."""


@dataclass
class Matrix:
    """One projection: `t` (in, out) when stored that way (the model's weight is `t.t()`),
    its bias, the blocked copy for multi-row products, or int8 rows for a draft."""

    weight: torch.Tensor                 # (out, in), as nn.Linear holds it (a view of `t` when there is one)
    t: torch.Tensor | None = None        # (in, out) storage, for one-row products
    bias: torch.Tensor | None = None
    packed: object = None                # oneDNN's blocked copy; None until needed, False where impossible
    q: torch.Tensor | None = None        # draft only: (out, in) int8
    scales: torch.Tensor | None = None   # draft only: (out,) bfloat16 per-row scales

    def __post_init__(self):
        # one-row products multiply float32 activations by `t` directly when it is float32 too
        self.one_row = self.t if self.t is not None and self.t.dtype == torch.float32 else None


@dataclass
class Layer:
    ln1: torch.Tensor               # input RMSNorm weight
    qkv: Matrix                     # q | k | v
    o: Matrix
    ln2: torch.Tensor               # post-attention RMSNorm weight
    gate_up: Matrix | None          # gate | up (None: MoE)
    down: Matrix | None
    moe: nn.Module | None           # the model's own MoE block
    qk_norm: torch.Tensor | None = None  # (Hq + Hkv, D) per-head RMSNorm weights of q then k (Qwen3), or None


def unsupported_reason(model: nn.Module) -> str | None:
    """Why the engine cannot run `model` (None when it can)."""
    if hasattr(model, "peft_config"):
        return "a LoRA adapter that is not merged: load it with merge=True"
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in ("minimind", "llama"):
        return f"model type {model_type!r}: the engine runs MiniMind and Llama models"
    inner = getattr(model, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(model, "lm_head"):
        return "no model.layers / lm_head"
    attn = inner.layers[0].self_attn
    if not all(type(getattr(attn, n, None)) is nn.Linear for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
        return "attention projections are not plain nn.Linear (an unmerged adapter or a quantized model)"
    return None


def _stored(*linears: nn.Linear) -> Matrix:
    """The linears' weights as one (in, sum of outs) matrix; each linear's weight becomes a
    transposed view of its columns (the original tensors are freed: no copy survives)."""
    t = torch.cat([lin.weight.detach().t() for lin in linears], dim=1).contiguous()
    column = 0
    for lin in linears:
        n = lin.weight.shape[0]
        lin.weight.data = t[:, column:column + n].t()
        column += n
    biases = [lin.bias for lin in linears]
    bias = None if all(b is None for b in biases) else torch.cat([
        b.detach() if b is not None else torch.zeros(lin.weight.shape[0], dtype=t.dtype, device=t.device)
        for b, lin in zip(biases, linears)])
    return Matrix(t.t(), t, bias)


def _contiguous_state(module, state_dict, prefix, local_metadata) -> None:
    """state_dict() of a prepared model hands out plain contiguous tensors (what savers such as
    safetensors expect) instead of the engine's transposed views; tensors that were one (tied
    weights) stay one."""
    copies: dict = {}
    for name, tensor in state_dict.items():
        if isinstance(tensor, torch.Tensor) and not tensor.is_contiguous():
            key = (tensor.data_ptr(), tensor.shape, tensor.stride())
            if key not in copies:
                copies[key] = tensor.contiguous()
            state_dict[name] = copies[key]


def _versions(model: nn.Module) -> tuple:
    """Where every parameter lives and its in-place version: changes when weights are updated or replaced."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


class Weights:
    """The engine's view of one model (see the module docstring). Build with `Weights.of(model)`."""

    def __init__(self, model: nn.Module):
        reason = unsupported_reason(model)
        if reason:
            raise EngineError(f"the inference engine cannot run this model: {reason}")
        config = model.config
        self._model = weakref.ref(model)  # not a strong reference: the model holds these weights, not the reverse
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.n_heads
        self.eps = config.rms_norm_eps
        self.max_positions = config.max_position_embeddings
        self.window = getattr(config, "sliding_window", None)  # keys a query sees, itself included (None: all)
        self.device = model.lm_head.weight.device
        self.dtype = model.lm_head.weight.dtype
        self.param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        self.act = _activation(config)
        self._draft: Weights | None = None
        self._lock = threading.Lock()
        with torch.no_grad():
            inner = model.model
            # tied or not, the output matrix is stored (d, V): the embedding (the same tensor when tied)
            # then reads its rows by token id from a transposed view, which costs nothing at decode
            self.lm_head = _stored(model.lm_head)
            self.embed = inner.embed_tokens.weight.detach()
            self.final_norm = inner.norm.weight.detach().float()
            self.vocab_size = self.lm_head.weight.shape[0]
            self.layers = []
            for block in inner.layers:
                a, mlp = block.self_attn, block.mlp
                dense = hasattr(mlp, "gate_proj")
                self.layers.append(Layer(
                    ln1=block.input_layernorm.weight.detach().float(),
                    qkv=_stored(a.q_proj, a.k_proj, a.v_proj), o=_stored(a.o_proj),
                    ln2=block.post_attention_layernorm.weight.detach().float(),
                    gate_up=_stored(mlp.gate_proj, mlp.up_proj) if dense else None,
                    down=_stored(mlp.down_proj) if dense else None,
                    moe=None if dense else mlp, qk_norm=self._qk_norm(a)))
            self.intermediate = self.layers[0].down.weight.shape[1] if self.layers[0].down is not None else 0
            self._positions(model)
        _CONTIGUOUS_STATE.get(model, lambda: model.register_state_dict_post_hook(_contiguous_state))  # once
        self._stamp = _versions(model)

    def _qk_norm(self, attention: nn.Module) -> torch.Tensor | None:
        """The q and k RMSNorm weights stacked per head, so one norm over (rows, Hq + Hkv, D) does both."""
        if getattr(attention, "q_norm", None) is None:
            return None
        q, k = attention.q_norm.weight.detach().float(), attention.k_norm.weight.detach().float()
        return torch.cat([q.expand(self.n_heads, -1), k.expand(self.n_kv, -1)]).contiguous()

    @classmethod
    def of(cls, model: nn.Module) -> "Weights":
        """The model's prepared weights, made once and kept while it lives (remade after its weights change)."""
        return _PREPARED.get(model, lambda: cls(model), fresh=Weights.current)

    def current(self) -> bool:
        """False once the model's parameters were replaced or updated in place (optimizer steps,
        load_state_dict, in-place ops). Edits through `.data` bypass PyTorch's version counters and
        are not seen: prepare again with `Weights(model)` after those."""
        model = self._model()
        return model is None or _versions(model) == self._stamp

    def _positions(self, model: nn.Module) -> None:
        """What the layer loop needs for the model's position encoding: rotary tables (`rope`),
        per-head slopes (`alibi`), or a table of position vectors added to the embeddings
        (`sinusoidal`: the model's own function; `learned`: the model's own parameter, no copy)."""
        config = model.config
        self.encoding = getattr(config, "position_encoding", "rope")  # Llama: rotary
        self.cos = self.sin_signed = self.alibi = self.position_table = None
        if self.encoding == "rope":
            self._rotary(model)
        elif self.encoding == "alibi":
            self.alibi = alibi_slopes(self.n_heads).to(self.device)
        elif self.encoding == "sinusoidal":
            positions = torch.arange(self.max_positions, device=self.device)
            self.position_table = sinusoid_table(positions, config).to(self.dtype).float()
        elif self.encoding == "learned":
            self.position_table = model.model.embed_positions.weight.detach().float()

    def _rotary(self, model: nn.Module) -> None:
        """cos and sign-folded sin for every position, from the model's own rotary module, so
        rotate_half(x)·sin becomes roll(x, D/2)·sin_signed (one op fewer, bit-identical)."""
        rotary = model.model.rotary_emb
        positions = torch.arange(self.max_positions, device=self.device)[None]
        if model.config.model_type == "llama":
            cos, sin = rotary(torch.empty(1, dtype=torch.float32, device=self.device), positions)
        else:
            cos, sin = rotary(positions, torch.float32)
        cos, sin = cos[0].float(), sin[0].float()
        half = self.head_dim // 2
        self.cos = cos.contiguous()
        self.sin_signed = torch.cat([-sin[:, :half], sin[:, half:]], dim=-1).contiguous()

    def matrices(self) -> list[Matrix]:
        return [self.lm_head] + [m for layer in self.layers for m in (layer.qkv, layer.o, layer.gate_up, layer.down)
                                 if m is not None]

    # -- products

    def mm(self, x: torch.Tensor, m: Matrix, residual: torch.Tensor | None = None) -> torch.Tensor:
        """`residual` + x (rows, in) @ m -> (rows, out) float32."""
        if m.one_row is not None and x.shape[0] == 1:                         # a decode step: BLAS on (in, out)
            if residual is not None and m.bias is None:
                return torch.addmm(residual, x, m.one_row)
            out = torch.mm(x, m.one_row) if m.bias is None else torch.addmm(m.bias, x, m.one_row)
        elif m.q is not None:
            out = torch._weight_int8pack_mm(x.to(torch.bfloat16), m.q, m.scales).float()
            out = out if m.bias is None else out + m.bias
        elif x.shape[0] > 1 and self._packed(m) is not None:
            out = torch.ops.mkldnn._linear_pointwise(x, m.packed, m.bias, "none", [], "")
        else:
            out = F.linear(x.to(m.weight.dtype), m.weight, m.bias).float()
        return out if residual is None else residual + out

    def _packed(self, m: Matrix):
        if m.packed is None:
            with self._lock:
                if m.packed is None:
                    packed = _onednn_pack(m.weight)
                    m.packed = False if packed is None else packed
        return None if m.packed is False else m.packed

    @property
    def drafted(self) -> bool:
        """Whether the int8 draft has been made (making it is not decoding: a pass that does is not timed)."""
        return self._draft is not None

    def draft(self) -> "Weights":
        """These weights with int8 matrices (one scale per output row), made once: a cheap model
        that guesses what the exact one will pick. Norms, embeddings and MoE blocks are shared."""
        with self._lock:
            if self._draft is None:
                draft = copy.copy(self)  # shallow: norms, embeddings and MoE blocks are shared
                draft._draft, draft._lock = None, threading.Lock()
                draft.lm_head = _int8(self.lm_head)
                draft.layers = [Layer(layer.ln1, _int8(layer.qkv), _int8(layer.o), layer.ln2,
                                      layer.gate_up and _int8(layer.gate_up), layer.down and _int8(layer.down),
                                      layer.moe, layer.qk_norm) for layer in self.layers]
                self._draft = draft
            return self._draft

    def memory_bytes(self) -> int:
        """Bytes of the weights plus the blocked copies and the draft made so far."""
        total = self.param_bytes + sum(m.weight.numel() * 4 for m in self.matrices() if m.packed is not None and m.packed is not False)
        if self._draft is not None:
            total += sum(m.q.numel() + m.scales.numel() * 2 for m in self._draft.matrices())
        return total


def _int8(m: Matrix) -> Matrix:
    w = m.weight.detach().float()
    scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
    return Matrix(m.weight, None, m.bias, False, q, scales.to(torch.bfloat16))


def _onednn_pack(w: torch.Tensor):
    """oneDNN's blocked copy of an (out, in) float32 matrix, or None where PyTorch has no oneDNN."""
    if w.device.type != "cpu" or w.dtype != torch.float32 or not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), 16)
    except (RuntimeError, AttributeError):
        return None


def _activation(config):
    name = getattr(config, "hidden_act", "silu")
    if name == "silu":
        return F.silu
    from transformers.activations import ACT2FN

    return ACT2FN[name]
