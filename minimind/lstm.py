"""The LSTM language model: embedding → n-layer LSTM → optional causal self-attention → head.

The "LSTM + attention" text generator of the notes the project grew from, as a
`PreTrainedModel` beside the transformer: the same training loop, objectives, checkpoint
folder (`model_type` "minimind-lstm", safetensors) and inference engine
(`inference/recurrent.py`) serve it.

Packed rows. A pretraining row holds several documents, each followed by the EOS token.
A transformer attends across them; an LSTM would carry one poem's state into the next.
So the state is reset where a document starts (the position after an EOS token), and
the attention only sees keys of the query's own document: a row of packed documents
gives each document exactly the outputs it gets alone. Rows without a boundary run as
one cuDNN/oneDNN LSTM call over the batch; rows with boundaries are cut into their
documents, which run together as one packed variable-length batch
(`pack_padded_sequence`) and are scattered back. Positions whose attention mask is 0
(right or left padding) belong to no document: they neither read nor change the state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import _VF, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .model import causal_lm_loss

LSTM_MODEL_TYPE = "minimind-lstm"


class MiniMindLSTMConfig(PretrainedConfig):
    """Shape of an LSTM language model. Use `from_preset` for named sizes (LSTM_PRESETS)."""

    model_type = LSTM_MODEL_TYPE
    keys_to_ignore_at_inference = ["cache"]

    vocab_size: int = 6400                 # tokenizer size
    hidden_size: int = 320                 # embedding, LSTM state and attention width
    num_hidden_layers: int = 3             # stacked LSTM layers
    dropout: float = 0.0                   # dropout between LSTM layers and on the attention output (training only)
    use_attention: bool = False            # causal self-attention over the LSTM outputs, with a residual
    num_attention_heads: int = 4           # heads of that attention
    max_position_embeddings: int = 1024    # nominal context (the LSTM itself reaches any length)
    layer_norm_eps: float = 1e-5
    tie_word_embeddings: bool = True       # the output head shares the embedding matrix
    initializer_range: float = 0.02        # std of the normal init of embeddings and linear layers
    pad_token_id: int | None = 0
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    use_cache: bool = True

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        self._check()

    def _check(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"MiniMindLSTMConfig: {msg}")

        need(self.hidden_size >= 1 and self.num_hidden_layers >= 1, "hidden_size and num_hidden_layers must be >= 1")
        need(0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)")
        need(not self.use_attention or self.hidden_size % self.num_attention_heads == 0,
             f"hidden_size ({self.hidden_size}) must be a multiple of num_attention_heads "
             f"({self.num_attention_heads}) when use_attention is on")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def eos_ids(self) -> list[int]:
        """The token ids that end a document (the state resets after them)."""
        eos = self.eos_token_id
        return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "MiniMindLSTMConfig":
        """A named size (see LSTM_PRESETS), with any field overridden."""
        if name not in LSTM_PRESETS:
            raise ValueError(f"unknown LSTM preset {name!r}; choose one of {', '.join(LSTM_PRESETS)}")
        return cls(**{**LSTM_PRESETS[name], **overrides})


# Sized like the transformer presets of the same name (tied embeddings, vocab 6400); an LSTM
# layer of width d holds 8d² + 8d weights. use_attention adds 4d² (+ a norm).
LSTM_PRESETS: dict[str, dict] = {
    # pico: 1.65M parameters: d=160, 3 layers (transformer pico: 1.6M)
    "pico": dict(hidden_size=160, num_hidden_layers=3, num_attention_heads=4),
    # micro: 2.69M parameters: d=256, 2 layers (transformer micro: 2.8M)
    "micro": dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4),
    # nano: 4.51M parameters: d=320, 3 layers (transformer nano: 4.6M)
    "nano": dict(hidden_size=320, num_hidden_layers=3, num_attention_heads=4),
    # mini: 11.7M parameters: d=512, 4 layers (transformer mini: 11.9M)
    "mini": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8),
}


def is_lstm(config_or_model) -> bool:
    """Whether a config (or a model, or a peft wrapper of one) is an LSTM language model."""
    config = getattr(config_or_model, "config", config_or_model)
    return getattr(config, "model_type", None) == LSTM_MODEL_TYPE


@dataclass
class LSTMState:
    """The cache of an LSTM model for B sequences: what the next tokens continue from.

    h, c: (layers, B, d) the recurrent state after the last position; `ended`: (B,) whether
    that position was an EOS (the next one starts a new document, from a zero state).
    With attention also the keys and values so far (B, heads, S, head_dim), each key's
    document number and validity (B, S), and the current document number of each row (B,).
    `length` counts the positions consumed (padding included), as a KV cache's length does."""

    h: torch.Tensor
    c: torch.Tensor
    ended: torch.Tensor
    doc: torch.Tensor
    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None
    key_doc: torch.Tensor | None = None
    key_valid: torch.Tensor | None = None
    length: int = 0

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Keep the rows `beam_idx` names, in that order (generate's beam search)."""
        for name in ("h", "c"):
            setattr(self, name, getattr(self, name).index_select(1, beam_idx.to(self.h.device)))
        for name in ("ended", "doc", "keys", "values", "key_doc", "key_valid"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.index_select(0, beam_idx.to(value.device)))


class CausalSelfAttention(nn.Module):
    """Multi-head attention over the LSTM outputs. No positional encoding: the LSTM's state
    already says where a token is. Linear layers are named like the transformer's, so LoRA
    targets q_proj / k_proj / v_proj / o_proj apply."""

    def __init__(self, config: MiniMindLSTMConfig):
        super().__init__()
        d = config.hidden_size
        self.n_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)        # (B, H, T, D)

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor):
        """x (B, T, d) queries' input; keys/values (B, H, S, D) incl. these T; mask (B, 1, T, S) bool."""
        b, t, _ = x.shape
        out = F.scaled_dot_product_attention(self.split(self.q_proj(x)), keys, values, attn_mask=mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class MiniMindLSTMPreTrainedModel(PreTrainedModel):
    config: MiniMindLSTMConfig
    config_class = MiniMindLSTMConfig
    base_model_prefix = "lstm_lm"
    supports_gradient_checkpointing = False
    _supports_sdpa = True
    _is_stateful = True  # no assisted generation: a recurrent state cannot be rolled back

    def _init_weights(self, module):
        """Normal(0, initializer_range) embeddings and linear layers (as the transformer); the LSTM
        gets PyTorch's uniform ±1/sqrt(d) with the forget-gate bias at 1, so a fresh model starts
        by remembering (Jozefowicz et al. 2015)."""
        if isinstance(module, nn.LSTM):
            bound = 1.0 / math.sqrt(module.hidden_size)
            with torch.no_grad():
                for name, p in module.named_parameters():
                    if name.startswith("weight"):
                        p.uniform_(-bound, bound)
                    else:
                        p.zero_()
                        if name.startswith("bias_ih"):
                            p[module.hidden_size:2 * module.hidden_size] = 1.0  # gates i, f, g, o
        else:
            super()._init_weights(module)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # generate() keeps our own LSTMState, never a transformers KV cache


class MiniMindLSTMForCausalLM(MiniMindLSTMPreTrainedModel, GenerationMixin):
    """Token embedding → LSTM (dropout between layers) → [x + attn(norm(x))] → norm → head.

    forward(input_ids, attention_mask, labels, cache, use_cache) as MiniMindForCausalLM: the
    loss is the shifted next-token cross-entropy, `cache` an LSTMState (see the module docstring
    for document boundaries and padding)."""

    _tied_weights_keys = {"lm_head.weight": "embed_tokens.weight"}

    def __init__(self, config: MiniMindLSTMConfig):
        super().__init__(config)
        d = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, d)
        self.lstm = nn.LSTM(d, d, num_layers=config.num_hidden_layers, batch_first=True,
                            dropout=config.dropout if config.num_hidden_layers > 1 else 0.0)
        self.attn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps) if config.use_attention else None
        self.attn = CausalSelfAttention(config) if config.use_attention else None
        self.dropout = nn.Dropout(config.dropout)
        self.norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    # ---- the state ---------------------------------------------------------

    def empty_state(self, batch: int, device=None, dtype=None) -> LSTMState:
        """The state before any token: zeros, no keys."""
        cfg = self.config
        device = device or self.embed_tokens.weight.device
        dtype = dtype or self.embed_tokens.weight.dtype
        zeros = torch.zeros(cfg.num_hidden_layers, batch, cfg.hidden_size, device=device, dtype=dtype)
        state = LSTMState(zeros, zeros.clone(), torch.zeros(batch, dtype=torch.bool, device=device),
                          torch.zeros(batch, dtype=torch.long, device=device))
        if cfg.use_attention:
            state.keys = torch.zeros(batch, cfg.num_attention_heads, 0, cfg.head_dim, device=device, dtype=dtype)
            state.values = state.keys.clone()
            state.key_doc = torch.zeros(batch, 0, dtype=torch.long, device=device)
            state.key_valid = torch.zeros(batch, 0, dtype=torch.bool, device=device)
        return state

    # ---- forward -------------------------------------------------------------

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, inputs_embeds=None,
                labels=None, use_cache=None, logits_to_keep: int = 0, **kwargs):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        if inputs_embeds is not None and input_ids is None:
            raise ValueError("the LSTM model needs input_ids (document boundaries are read from the EOS tokens)")
        b, t = input_ids.shape
        past = cache.length if cache is not None else 0
        if attention_mask is not None and (attention_mask.dim() != 2 or attention_mask.shape[1] not in (t, past + t)):
            raise ValueError("attention_mask must be (batch, past + new tokens) of 0/1")
        valid = attention_mask[:, -t:].bool() if attention_mask is not None else None
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        want_state = bool(use_cache) or cache is not None
        hidden, state = self.run(x, input_ids, valid, cache, want_state, train=self.training)
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:]
        logits = self.lm_head(hidden)
        loss = causal_lm_loss(logits, labels) if labels is not None else None
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=state if want_state else None)

    def run(self, x: torch.Tensor, ids: torch.Tensor, valid: torch.Tensor | None, cache: LSTMState | None,
            want_state: bool, train: bool) -> tuple[torch.Tensor, LSTMState | None]:
        """Embeddings x (B, T, d) of `ids` after `cache` → (normed hidden (B, T, d), the new state).
        The inference engine calls this too (train=False: no dropout even on a training model)."""
        b, t, _ = x.shape
        all_valid = valid is None or bool(valid.all())
        valid_ = torch.ones(b, t, dtype=torch.bool, device=x.device) if valid is None else valid
        ended_before = cache.ended if cache is not None else torch.zeros(b, dtype=torch.bool, device=x.device)
        eos = self.config.eos_ids
        is_eos = torch.isin(ids, torch.tensor(eos, device=ids.device)) if eos else torch.zeros_like(ids, dtype=torch.bool)
        # a position starts a document when the token before it (in this chunk or the cache) was an EOS
        doc_start = torch.cat([ended_before[:, None], is_eos[:, :-1]], dim=1)
        out, h, c = self._recur(x, valid_, doc_start, all_valid, cache, train)
        state = None
        if self.attn is not None:
            out, state = self._attend(out, valid_, doc_start, cache, want_state, train)
        hidden = self.norm(out)
        if want_state:
            state = state or self.empty_state(b, x.device, x.dtype)
            last_valid = _last_index(valid_)
            has = last_valid >= 0
            ended = torch.where(has, is_eos.gather(1, last_valid.clamp(min=0)[:, None])[:, 0], ended_before)
            state.h, state.c, state.ended = h, c, ended
            state.length = (cache.length if cache is not None else 0) + t
        return hidden, state

    def _recur(self, x, valid, doc_start, all_valid: bool, cache, train: bool):
        """The LSTM over each row's documents; returns (outputs (B, T, d), h, c (layers, B, d))."""
        b, t, d = x.shape
        if cache is not None:  # a row whose last token was an EOS starts from zeros
            keep = (~cache.ended).to(x.dtype)[None, :, None]
            h0, c0 = cache.h * keep, cache.c * keep
        else:
            h0 = c0 = x.new_zeros(self.config.num_hidden_layers, b, d)
        if all_valid and not bool(doc_start[:, 1:].any()):
            # one document per row (position 0's reset is already in h0, c0): one fused call
            out, (h, c) = self._lstm(x, (h0, c0), train)
            return out, h, c
        return self._recur_segments(x, valid, doc_start, h0, c0, train)

    def _recur_segments(self, x, valid, doc_start, h0, c0, train: bool):
        """Cut the rows into runs of valid positions within one document, run them all as one packed
        variable-length batch, scatter the outputs back (zeros where invalid)."""
        b, t, d = x.shape
        prev_valid = torch.cat([torch.ones_like(valid[:, :1]), valid[:, :-1]], dim=1)
        starts = valid & (doc_start | ~prev_valid)
        starts[:, 0] = valid[:, 0]
        flat_valid, flat_starts = valid.reshape(-1), starts.reshape(-1)
        idx = flat_valid.nonzero().squeeze(1)                                # valid flat positions
        seg = (flat_starts.long().cumsum(0) - 1)[idx]                        # segment of each
        first = flat_starts.nonzero().squeeze(1)                             # flat start of each segment
        pos = idx - first[seg]
        n_seg = first.numel()
        if n_seg == 0:  # nothing but padding: no output, the state stays as it was
            return x.new_zeros(b, t, d), h0, c0
        lengths = torch.bincount(seg, minlength=n_seg)
        row = torch.div(first, t, rounding_mode="floor")
        padded = x.new_zeros(n_seg, int(lengths.max()), d)
        padded[seg, pos] = x.reshape(-1, d)[idx]
        # a row's first segment continues the cache unless a document starts there
        col = first - row * t
        continues = (col == 0) | ~doc_start.reshape(-1)[first]
        continues &= torch.cat([torch.ones(1, dtype=torch.bool, device=x.device), row[1:] != row[:-1]])
        keep = continues.to(x.dtype)[None, :, None]
        hx = (h0[:, row] * keep, c0[:, row] * keep)
        packed = pack_padded_sequence(padded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out_packed, (hn, cn) = self._lstm(packed, hx, train)
        out_pad, _ = pad_packed_sequence(out_packed, batch_first=True, total_length=padded.shape[1])
        out = x.new_zeros(b * t, d).index_put((idx,), out_pad[seg, pos]).view(b, t, d)
        # each row's new state: its last segment's, or what it had when the chunk held none of its tokens
        last_seg = torch.full((b,), -1, dtype=torch.long, device=x.device).scatter_reduce(
            0, row, torch.arange(n_seg, device=x.device), reduce="amax")
        has = (last_seg >= 0)[None, :, None]
        h = torch.where(has, hn[:, last_seg.clamp(min=0)], h0)
        c = torch.where(has, cn[:, last_seg.clamp(min=0)], c0)
        return out, h, c

    def _lstm(self, x, hx, train: bool):
        """The nn.LSTM call, or its functional form without dropout when a training-mode model is run
        for inference (the engine's rollouts)."""
        lstm = self.lstm
        if not train and not isinstance(x, torch.nn.utils.rnn.PackedSequence) and x.shape[1] == 1:
            return self._step(x, hx)
        if train or not lstm.training or lstm.dropout == 0:
            return lstm(x, hx)
        if isinstance(x, torch.nn.utils.rnn.PackedSequence):
            hx = tuple(s.index_select(1, x.sorted_indices) for s in hx)
            out, h, c = _VF.lstm(x.data, x.batch_sizes, hx, lstm._flat_weights, lstm.bias, lstm.num_layers,
                                 0.0, False, False)
            out = torch.nn.utils.rnn.PackedSequence(out, x.batch_sizes, x.sorted_indices, x.unsorted_indices)
            return out, (h.index_select(1, x.unsorted_indices), c.index_select(1, x.unsorted_indices))
        out, h, c = _VF.lstm(x, hx, lstm._flat_weights, lstm.bias, lstm.num_layers, 0.0, False, False, True)
        return out, (h, c)

    def _step(self, x, hx):
        """One position through every layer as LSTM cells: a decode step. oneDNN's fused LSTM spends
        about 1 ms per layer per call setting up, 20x what one position's products cost (nano on
        one CPU thread), so single steps run as two small products per layer instead."""
        lstm, (h0, c0) = self.lstm, hx
        inp, hs, cs = x[:, 0], [], []
        weights = lstm._flat_weights  # per layer: weight_ih, weight_hh, bias_ih, bias_hh (no attribute lookups)
        for layer in range(lstm.num_layers):
            h, c = _VF.lstm_cell(inp, (h0[layer], c0[layer]), *weights[4 * layer:4 * layer + 4])
            hs.append(h)
            cs.append(c)
            inp = h
        return inp[:, None], (torch.stack(hs), torch.stack(cs))

    def _attend(self, x, valid, doc_start, cache, want_state: bool, train: bool):
        """x + dropout(attn(norm(x))), each query seeing the keys of its own document up to itself."""
        b, t, _ = x.shape
        attn = self.attn
        base = cache.doc if cache is not None else torch.zeros(b, dtype=torch.long, device=x.device)
        doc = base[:, None] + doc_start.long().cumsum(1)                          # (B, T)
        h = self.attn_norm(x)
        k, v = attn.split(attn.k_proj(h)), attn.split(attn.v_proj(h))
        past = 0
        if cache is not None and cache.keys is not None:
            past = cache.keys.shape[2]
            k, v = torch.cat([cache.keys, k], 2), torch.cat([cache.values, v], 2)
            key_doc, key_valid = torch.cat([cache.key_doc, doc], 1), torch.cat([cache.key_valid, valid], 1)
        else:
            key_doc, key_valid = doc, valid
        s = past + t
        causal = torch.arange(s, device=x.device)[None] <= (past + torch.arange(t, device=x.device))[:, None]
        mask = causal[None] & key_valid[:, None] & (key_doc[:, None] == doc[:, :, None])     # (B, T, S)
        mask |= (torch.arange(s, device=x.device)[None] == past + torch.arange(t, device=x.device)[:, None])[None]
        a = attn(h, k, v, mask[:, None])
        out = x + (self.dropout(a) if train else a)
        out = out * valid[..., None].to(out.dtype)  # padding stays zero, whatever it attended to
        state = None
        if want_state:
            state = self.empty_state(b, x.device, x.dtype)
            state.keys, state.values, state.key_doc, state.key_valid = k, v, key_doc, key_valid
            state.doc = doc[:, -1]
        return out, state

    # ---- generate() ------------------------------------------------------------

    def prepare_inputs_for_generation(self, input_ids, cache=None, attention_mask=None, inputs_embeds=None,
                                      **kwargs):
        """Feed only the tokens the state has not consumed yet."""
        if cache is not None:
            input_ids = input_ids[:, cache.length:]
        return {"input_ids": input_ids.contiguous(), "cache": cache, "attention_mask": attention_mask,
                "use_cache": kwargs.get("use_cache", True)}


def _last_index(valid: torch.Tensor) -> torch.Tensor:
    """(B,) index of each row's last True position, -1 for a row with none."""
    t = valid.shape[1]
    positions = torch.arange(t, device=valid.device).expand_as(valid)
    return torch.where(valid, positions, torch.full_like(positions, -1)).amax(1)
