"""The engine's path for an LSTM model (`minimind.lstm`): its recurrent state is the cache.

The scheduler (engine.py) is the same for every model: prefill one request (B = 1, T =
prompt), then one step over every active request (B = active, T = 1). What differs is
what a request carries between steps: a transformer's keys and values grow with every
position; an LSTM's (h, c) per layer stays one vector each however long the text gets,
plus, with `use_attention`, the keys and values of that attention. A step stacks the
active requests' states into one batch, runs the model's own `run` (the code training
uses, so decoding and the full forward cannot drift apart; dropout off even while a
GRPO run trains the model) and hands each request its new state back.

Nothing is fused or copied: an LSTM step is a few matrix products per layer over the
whole batch, which `torch.lstm` already does in one call.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..lstm import LSTMState, is_lstm
from .weak_cache import WeakCache
from .weights import EngineError

_PREPARED: WeakCache[RecurrentWeights] = WeakCache()  # each LSTM model's view, while the model lives


def handles(model: nn.Module) -> bool:
    """Whether the engine runs `model` on this path (an LSTM model, or an adapter on one)."""
    return is_lstm(model)


class RecurrentWeights:
    """The engine's view of an LSTM model: the model's own modules, read live (an optimizer step
    or a loaded state needs no re-preparation). Build with `RecurrentWeights.of(model)`."""

    def __init__(self, model: nn.Module):
        if hasattr(model, "peft_config"):
            raise EngineError("the inference engine cannot run this model: a LoRA adapter that is not merged: "
                              "load it with merge=True")
        if not is_lstm(model):
            raise EngineError("the inference engine's recurrent path runs LSTM models only")
        self._model = weakref.ref(model)
        config = model.config
        self.vocab_size = model.lm_head.weight.shape[0]
        self.max_positions = config.max_position_embeddings
        self.device = model.lm_head.weight.device
        self.dtype = model.lm_head.weight.dtype
        self.embed = model.embed_tokens.weight
        self.param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    @classmethod
    def of(cls, model: nn.Module) -> "RecurrentWeights":
        return _PREPARED.get(model, lambda: cls(model))

    @property
    def model(self):
        return self._model()

    def matrices(self) -> list:
        return []

    def memory_bytes(self) -> int:
        return self.param_bytes


class StateCache:
    """One request's recurrent state (an LSTMState of batch 1; None before the prompt ran).

    `length` counts the positions consumed and `capacity` bounds them, as for a KVCache: the
    state itself has a fixed size, but the attention's keys (with `use_attention`) grow."""

    def __init__(self, weights: RecurrentWeights, capacity: int):
        self.capacity = capacity
        self.length = 0
        self.state: LSTMState | None = None


@torch.inference_mode()
def forward(w: RecurrentWeights, ids: torch.Tensor, caches: Sequence[StateCache],
            all_logits: bool = False) -> torch.Tensor:
    """Run `ids` (B, T) after each cache's state and advance the caches. Returns float32 logits
    (B, V) of each sequence's last position, or (B, T, V) with `all_logits`."""
    model = w.model
    if model is None:
        raise EngineError("the model of this engine is gone")
    b, t = ids.shape
    for c in caches:
        if c.length + t > c.capacity:
            raise ValueError(f"state cache full: {c.length + t} positions > capacity {c.capacity}")
    state = _stack([c.state for c in caches], model, ids.device)
    hidden, new = model.run(model.embed_tokens(ids), ids, None, state, want_state=True, train=False)
    for i, c in enumerate(caches):
        c.state = _row(new, i, c.state, b, t)
        c.length += t
    if all_logits:
        return model.lm_head(hidden).float()
    return model.lm_head(hidden[:, -1]).float()


def _stack(states: list[LSTMState | None], model, device) -> LSTMState:
    """One batched state from B single-row states; attention keys are padded to the longest with
    invalid positions (which no query sees)."""
    states = [s if s is not None else model.empty_state(1, device) for s in states]
    if len(states) == 1:
        return states[0]
    batched = LSTMState(torch.cat([s.h for s in states], 1), torch.cat([s.c for s in states], 1),
                        torch.cat([s.ended for s in states]), torch.cat([s.doc for s in states]))
    if states[0].keys is not None:
        longest = max(s.keys.shape[2] for s in states)

        def pad(x: torch.Tensor, dim_from_end: int, value=0) -> torch.Tensor:
            missing = longest - x.shape[-dim_from_end]
            return x if not missing else F.pad(x, (0, 0) * (dim_from_end - 1) + (0, missing), value=value)

        batched.keys = torch.cat([pad(s.keys, 2) for s in states])
        batched.values = torch.cat([pad(s.values, 2) for s in states])
        batched.key_doc = torch.cat([pad(s.key_doc, 1, -1) for s in states])
        batched.key_valid = torch.cat([pad(s.key_valid, 1, False) for s in states])
    return batched


def _row(new: LSTMState, i: int, old: LSTMState | None, b: int, t: int) -> LSTMState:
    """Row i of a batched state; its keys without the padding the batch added before the new ones."""
    if b == 1:
        return new
    row = LSTMState(new.h[:, i:i + 1], new.c[:, i:i + 1], new.ended[i:i + 1], new.doc[i:i + 1])
    if new.keys is not None:
        had = old.keys.shape[2] if old is not None else 0
        total = new.keys.shape[2]
        keep = torch.cat([torch.arange(had, device=new.keys.device),
                          torch.arange(total - t, total, device=new.keys.device)])
        row.keys, row.values = new.keys[i:i + 1, :, keep], new.values[i:i + 1, :, keep]
        row.key_doc, row.key_valid = new.key_doc[i:i + 1, keep], new.key_valid[i:i + 1, keep]
    return row
