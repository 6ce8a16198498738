"""Keep sampled answers valid UTF-8 under a byte-level BPE tokenizer.

A byte-level vocabulary holds tokens that are single bytes or runs of bytes
that may start or end in the middle of a character, so a sampler can emit a
byte sequence that is not UTF-8 and the decoded answer shows U+FFFD. The
`Utf8Guard` here tracks the character in progress and, at every step, says
which tokens keep the bytes completable as strict UTF-8 (RFC 3629) within the
tokens the answer may still write, so an answer cut by its token budget never
ends mid-character either.

Usage in a sampling loop:

    guard = Utf8Guard.for_tokenizer(tokenizer, model.config.vocab_size)
    state = guard.start
    for step in range(max_new_tokens):
        mask = guard.allowed(state, max_new_tokens - step)   # None: nothing to mask
        if mask is not None:
            logits = logits.masked_fill(~mask, float("-inf"))
        token = sample(logits)
        state = guard.advance(state, token)
"""

from __future__ import annotations

import torch

from ..byte_level import COMPLETE, MAX_NEED, State, state_after, token_table

_UNSET = object()

__all__ = ["Utf8Guard"]


class Utf8Guard:
    """Masks the tokens that would make an answer impossible to finish as strict UTF-8.

    Per token it keeps the bytes it stands for; per (state, budget) it builds the
    allowed mask once, so `allowed` and `advance` are dictionary/list lookups
    after warm-up. Masks are shared: never modify a returned tensor in place.
    The budget rule counts on every continuation byte 80..BF being a token of its own,
    as in any vocabulary trained with the full byte alphabet (ours are).
    """

    def __init__(self, token_bytes: list[bytes | None], special: set[int], vocab_size: int,
                 device: torch.device | str = "cpu"):
        """`token_bytes[i]`: bytes of token i (None: no bytes, never allowed); `special`: ids
        that carry no bytes and may only come between characters (e.g. <|im_end|>)."""
        self.vocab_size = vocab_size
        self.device = torch.device(device)
        self._bytes = [token_bytes[i] if i < len(token_bytes) else None for i in range(vocab_size)]
        self._special = {i for i in special if 0 <= i < vocab_size}
        self._next: dict[State, list[State | None]] = {}
        self._need_after: dict[State, torch.Tensor] = {}
        self._masks: dict[State, list] = {}  # state -> mask per budget 0..3 (_UNSET until built)
        self.start = COMPLETE
        # The common case (nothing pending, budget >= 4) is looked up with no dict work.
        self._start_mask = self._mask(COMPLETE, MAX_NEED)

    def __getstate__(self) -> dict:
        """Pickled (a sampler sent to a GPU call) without its caches, whose sentinel would not survive."""
        return {"token_bytes": self._bytes, "special": self._special, "vocab_size": self.vocab_size,
                "device": str(self.device)}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["token_bytes"], state["special"], state["vocab_size"], state["device"])

    @classmethod
    def for_tokenizer(cls, tokenizer, vocab_size: int, *, device: torch.device | str = "cpu") -> "Utf8Guard | None":
        """None when the tokenizer is neither byte-level nor byte-fallback (then no guard applies):
        only those tell us which bytes each token stands for (minimind.byte_level.tokenizer_style). `vocab_size` is the
        model's (embedding rows); rows beyond the tokenizer's vocabulary are never allowed."""
        found = token_table(tokenizer, vocab_size)
        if found is None:
            return None  # slow (Python) tokenizers and non-byte-level models: no guard
        table, special = found
        return cls(table, special, vocab_size, device=device)

    def pending(self, state: State) -> bool:
        """True while a character is incomplete (its lead byte written, continuation bytes missing)."""
        return state.need > 0

    def advance(self, state: State, token: int) -> State:
        """The state after emitting `token`; ValueError if `token` can never follow `state`
        (a sampler that applied `allowed` never sees it)."""
        table = self._next.get(state)
        if table is None:
            self._build(state)
            table = self._next[state]
        after = table[token] if 0 <= token < self.vocab_size else None
        if after is None:
            raise ValueError(f"token {token} cannot follow UTF-8 state {state}")
        return after

    def allowed(self, state: State, remaining: int) -> torch.Tensor | None:
        """Bool mask (vocab_size,) of tokens allowed now, or None when every token is allowed.

        `remaining` counts the tokens the answer may still write, this one included: a token
        is allowed when its bytes are valid after the pending ones and the character it leaves
        pending needs at most `remaining - 1` more bytes (every byte is a token, so that many
        tokens can finish it). `remaining < 1` is treated as 1 (finish now, if possible).
        """
        if remaining > MAX_NEED and state is COMPLETE:
            return self._start_mask
        budget = min(max(remaining - 1, 0), MAX_NEED)
        masks = self._masks.get(state)
        if masks is None or masks[budget] is _UNSET:
            return self._mask(state, budget)
        return masks[budget]

    def _mask(self, state: State, budget: int) -> torch.Tensor | None:
        need_after = self._need_after.get(state)
        if need_after is None:
            self._build(state)
            need_after = self._need_after[state]
        mask = (need_after >= 0) & (need_after <= budget)
        result = None if bool(mask.all()) else mask.to(self.device)
        self._masks.setdefault(state, [_UNSET] * (MAX_NEED + 1))[budget] = result
        return result

    def _build(self, state: State) -> None:
        """Run every token's bytes from `state` once: its next state and the bytes it leaves missing."""
        table: list[State | None] = []
        for i, data in enumerate(self._bytes):
            if i in self._special:
                table.append(state if state.need == 0 else None)
            else:
                table.append(None if data is None else state_after(state, data))
        need = torch.tensor([-1 if s is None else s.need for s in table], dtype=torch.int8)
        self._next[state] = table
        self._need_after[state] = need


