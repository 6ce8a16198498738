"""UTF-8 under byte-level BPE, without the engine: GPT-2's byte alphabet, the bytes each
token stands for, and the state of a character in progress.

A byte-level vocabulary holds tokens that may start or end in the middle of a character;
so does a sentencepiece-style byte-fallback one (its <0xNN> tokens), which imported Llama 2,
TinyLlama and Mistral models use: both are read here (`tokenizer_style`).
The tokenizer (its byte-fallback count), the vocabulary report and the engine's sampling
guard (minimind.inference.utf8) all read these tables, so they live in a leaf that imports
neither torch nor the engine.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

__all__ = [
    "COMPLETE",
    "MAX_NEED",
    "State",
    "bytes_to_unicode",
    "fallback_characters",
    "is_utf8",
    "state_after",
    "token_bytes",
    "token_table",
    "tokenizer_style",
]


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
MAX_NEED = 3  # a 4-byte character after its lead byte


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


def state_after(state: State, data: bytes) -> State | None:
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
    byte alphabet); None when the tokenizer's bytes cannot be told (see `tokenizer_style`)."""
    found = token_table(tokenizer)
    return None if found is None else found[0]


def tokenizer_style(tokenizer) -> str | None:
    """How a tokenizer's vocabulary writes bytes: "byte-level" (GPT-2's byte alphabet: Llama 3,
    Qwen, SmolLM2, ours), "byte-fallback" (sentencepiece style, whole pieces with ▁ for a space
    and <0xNN> tokens for the bytes of anything else: Llama 2, TinyLlama, Mistral), or None
    when it is neither (then no one can say which bytes a token writes)."""
    backend = _backend(tokenizer)
    if backend is None:
        return None
    try:
        data = json.loads(backend.to_str())
    except (ValueError, AttributeError):
        return None
    decoder = data.get("decoder") or {}
    steps = decoder.get("decoders") or [] if decoder.get("type") == "Sequence" else [decoder]
    kinds = [step.get("type") for step in steps]
    if kinds == ["ByteLevel"]:
        return "byte-level"
    if "ByteFallback" in kinds and set(kinds) <= _FALLBACK_STEPS and (data.get("model") or {}).get("byte_fallback"):
        replaces = [step for step in steps if step.get("type") == "Replace"]
        if all(step.get("content") == " " and (step.get("pattern") or {}).get("String") == _SPACE
               for step in replaces):
            return "byte-fallback"
    return None


_SPACE = "\u2581"                                                  # ▁, sentencepiece's space
_FALLBACK_STEPS = {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"}
_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _fallback_bytes(text: str) -> bytes:
    """Bytes of a byte-fallback token: <0xNN> is that byte, anything else its text with ▁ as a space."""
    match = _BYTE_TOKEN.match(text)
    return bytes([int(match.group(1), 16)]) if match else text.replace(_SPACE, " ").encode("utf-8")


def token_table(tokenizer, size: int | None = None) -> tuple[list[bytes | None], set[int]] | None:
    """(bytes of ids 0..size-1, special ids), or None for a tokenizer whose bytes cannot be told."""
    style = tokenizer_style(tokenizer)
    if style is None:
        return None
    backend = _backend(tokenizer)
    added = backend.get_added_tokens_decoder()
    special = {i for i, token in added.items() if token.special}
    special.update(getattr(tokenizer, "all_special_ids", None) or [])
    # a non-special added token (e.g. a character added by minimind.vocabulary) is cut out of
    # the text before BPE and decodes to its own text: its bytes are that text's UTF-8
    plain = {i: token.content.encode("utf-8") for i, token in added.items() if i not in special}
    to_byte = {char: byte for byte, char in bytes_to_unicode().items()}
    known = backend.get_vocab_size(with_added_tokens=True)
    table: list[bytes | None] = []
    for i in range(known if size is None else min(size, known)):
        if i in plain:
            table.append(plain[i])
            continue
        text = None if i in special else backend.id_to_token(i)
        if not text:
            table.append(None)
        elif style == "byte-fallback":
            table.append(_fallback_bytes(text))
        else:
            try:
                table.append(bytes(to_byte[ch] for ch in text))
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
