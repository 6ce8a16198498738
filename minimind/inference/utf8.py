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

import json
from typing import NamedTuple

import torch

__all__ = ["State", "Utf8Guard", "bytes_to_unicode", "token_bytes"]


class State(NamedTuple):
    """Where the byte stream stands: `need` continuation bytes still missing and
    the range [lo, hi] the next one must fall in (only the byte after E0, ED, F0
    or F4 is narrower than 80..BF). Treat it as opaque; it is hashable and there
    are only 8 of them."""

    need: int
    lo: int
    hi: int


COMPLETE = State(0, 0, 0)
_CONT = (0x80, 0xBF)
_MAX_NEED = 3  # a 4-byte character after its lead byte
_UNSET = object()


def _lead(byte: int) -> State | None:
    """The state after `byte` when no character is pending (None: byte cannot start one)."""
    if byte < 0x80:
        return COMPLETE
    if 0xC2 <= byte <= 0xDF:
        return State(1, *_CONT)
    if byte == 0xE0:
        return State(2, 0xA0, 0xBF)  # no overlong 3-byte forms
    if byte == 0xED:
        return State(2, 0x80, 0x9F)  # no surrogates U+D800..U+DFFF
    if 0xE1 <= byte <= 0xEF:
        return State(2, *_CONT)
    if byte == 0xF0:
        return State(3, 0x90, 0xBF)  # no overlong 4-byte forms
    if byte == 0xF4:
        return State(3, 0x80, 0x8F)  # nothing above U+10FFFF
    if 0xF1 <= byte <= 0xF3:
        return State(3, *_CONT)
    return None  # 80..BF (stray continuation), C0, C1 (overlong), F5..FF (never in UTF-8)


def _step(state: State, byte: int) -> State | None:
    if state.need == 0:
        return _lead(byte)
    if not state.lo <= byte <= state.hi:
        return None
    return COMPLETE if state.need == 1 else State(state.need - 1, *_CONT)


def _run(state: State, data: bytes) -> State | None:
    """The state after appending `data`, or None when no valid UTF-8 can follow."""
    if not data:
        return None  # a token with no bytes carries no text: never sampled
    for byte in data:
        state = _step(state, byte)
        if state is None:
            return None
    return state


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table that ByteLevel pre-tokenizers use:
    the printable Latin-1 bytes stand for themselves, the others for 256, 257, ... in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


def token_bytes(tokenizer) -> list[bytes | None] | None:
    """The bytes each token id stands for (None for special tokens and for strings outside the
    byte alphabet); None when the tokenizer is not byte-level."""
    found = _token_table(tokenizer)
    return None if found is None else found[0]


def _token_table(tokenizer, size: int | None = None) -> tuple[list[bytes | None], set[int]] | None:
    """(bytes of ids 0..size-1, special ids), or None for a tokenizer that is not byte-level."""
    backend = _backend(tokenizer)
    if backend is None or not _is_byte_level(backend):
        return None
    added = backend.get_added_tokens_decoder()
    special = {i for i, token in added.items() if token.special}
    special.update(getattr(tokenizer, "all_special_ids", None) or [])
    # a non-special added token (e.g. a character added by minimind.vocabulary) is cut out of
    # the text before byte-level BPE and decodes to its own text: its bytes are that text's UTF-8
    plain = {i: token.content.encode("utf-8") for i, token in added.items() if i not in special}
    to_byte = {char: byte for byte, char in bytes_to_unicode().items()}
    known = backend.get_vocab_size(with_added_tokens=True)
    table: list[bytes | None] = []
    for i in range(known if size is None else min(size, known)):
        if i in plain:
            table.append(plain[i])
            continue
        text = None if i in special else backend.id_to_token(i)
        try:
            table.append(bytes(to_byte[ch] for ch in text) if text else None)
        except KeyError:
            # A vocabulary string outside the 256-symbol byte alphabet: we cannot say which
            # bytes it writes, so it is never allowed.
            table.append(None)
    return table, special


def _backend(tokenizer):
    """The `tokenizers.Tokenizer` behind a fast HF tokenizer (or the tokenizer itself)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None and hasattr(tokenizer, "to_str") and hasattr(tokenizer, "id_to_token"):
        backend = tokenizer
    return backend


def _is_byte_level(backend) -> bool:
    """True when the decoder is ByteLevel (alone or the only step of a Sequence): only then
    does every vocabulary string stand for bytes through the GPT-2 table."""
    try:
        decoder = json.loads(backend.to_str()).get("decoder") or {}
    except (ValueError, AttributeError):
        return False
    if decoder.get("type") == "Sequence":
        steps = decoder.get("decoders") or []
        return len(steps) == 1 and steps[0].get("type") == "ByteLevel"
    return decoder.get("type") == "ByteLevel"


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
        self._start_mask = self._mask(COMPLETE, _MAX_NEED)

    @classmethod
    def for_tokenizer(cls, tokenizer, vocab_size: int, *, device: torch.device | str = "cpu") -> "Utf8Guard | None":
        """None when the tokenizer is not byte-level (then no guard applies): only a
        ByteLevel decoder tells us which bytes each token stands for. `vocab_size` is the
        model's (embedding rows); rows beyond the tokenizer's vocabulary are never allowed."""
        found = _token_table(tokenizer, vocab_size)
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
        if remaining > _MAX_NEED and state is COMPLETE:
            return self._start_mask
        budget = min(max(remaining - 1, 0), _MAX_NEED)
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
        self._masks.setdefault(state, [_UNSET] * (_MAX_NEED + 1))[budget] = result
        return result

    def _build(self, state: State) -> None:
        """Run every token's bytes from `state` once: its next state and the bytes it leaves missing."""
        table: list[State | None] = []
        for i, data in enumerate(self._bytes):
            if i in self._special:
                table.append(state if state.need == 0 else None)
            else:
                table.append(None if data is None else _run(state, data))
        need = torch.tensor([-1 if s is None else s.need for s in table], dtype=torch.int8)
        self._next[state] = table
        self._need_after[state] = need


def is_utf8(data: bytes) -> bool:
    """Whether `data` is whole UTF-8 on its own."""
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def fallback_characters(ids: list[int], table: list) -> int:
    """Characters of an encoded text that no single token holds whole (`table`: token_bytes): each
    run of tokens that are not complete UTF-8 on their own is decoded and its characters counted."""
    count, run = 0, b""
    for index in ids:
        piece = table[index] if index < len(table) else None
        whole = piece is None or is_utf8(piece)
        if not whole:
            run += piece
            continue
        if run:
            count += len(run.decode("utf-8", errors="replace"))
            run = b""
    if run:
        count += len(run.decode("utf-8", errors="replace"))
    return count
