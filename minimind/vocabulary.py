"""How well a model's tokenizer spells a corpus, and extending it with the corpus's characters.

A byte-level BPE trained on one corpus spells the characters it never saw with byte pieces:
MiniMind-Tang's tokenizer (traditional characters) writes most of a simplified-character
Song ci corpus in bytes, so a fine-tune learns bytes, and sampled answers can break inside a
character. `coverage` measures that (the share of characters written in byte pieces, characters
per token, the frequent characters it has no token for); `extend_tokenizer` adds those
characters as tokens of their own, and `resize_model` gives the model rows for them, each
started from the mean of the rows of the byte pieces that used to spell it (so the new token
begins near what the model made of those pieces). With LoRA, the new rows train through peft's
trainable token indices (`training/modes.py`) and the adapter carries them.

The new tokens are `tokenizers` added tokens (not special): each occurrence of the character is
cut out before byte-level BPE runs, so it is one token in any context, and the vocabulary's
existing ids keep their meaning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from .byte_level import fallback_characters, token_bytes
from .data.tokens import encode, pieces
from .errors import ConfigError

MIN_COUNT = 3          # a character must occur this often in the corpus to become a token
MAX_NEW_TOKENS = 1000  # at most this many new tokens (the most frequent first)
WORTH_EXTENDING = 0.02  # a share of characters in byte pieces above this is worth an extension
COVERAGE_CHARS = 2_000_000  # the page measures coverage on at most this many characters of a corpus


@dataclass
class Coverage:
    """A tokenizer measured on a corpus's text."""

    characters: int
    tokens: int
    fallback_characters: int              # characters written with byte pieces, not a whole token
    missing: list[tuple[str, int]] = field(default_factory=list)  # (character, count), no token of its own;
                                                                  # most frequent first

    @property
    def byte_fallback_share(self) -> float:
        return self.fallback_characters / max(self.characters, 1)

    @property
    def chars_per_token(self) -> float:
        return self.characters / max(self.tokens, 1)

    def candidates(self, min_count: int = MIN_COUNT, limit: int = MAX_NEW_TOKENS) -> list[str]:
        """The missing characters worth a token: seen at least `min_count` times, at most `limit`."""
        return [char for char, count in self.missing if count >= min_count][:limit]

    def as_dict(self, min_count: int = MIN_COUNT, limit: int = MAX_NEW_TOKENS) -> dict:
        return {"characters": self.characters, "tokens": self.tokens,
                "byte_fallback_share": round(self.byte_fallback_share, 4),
                "chars_per_token": round(self.chars_per_token, 3),
                "missing_characters": len(self.missing),
                "new_token_candidates": len(self.candidates(min_count, limit))}


def coverage(tokenizer, texts: Iterable[str], batch_chars: int = 1 << 18, max_chars: int | None = None,
             missing: bool = True) -> Coverage:
    """Measure `tokenizer` on `texts` (at most `max_chars` characters of them): characters, tokens,
    characters spelled in byte pieces, and (with `missing`) the characters it has no whole token
    for, with their counts. Texts are encoded about `batch_chars` characters at a time, a long one
    in pieces cut where the tokenizer splits anyway (minimind.data.tokens.pieces), so memory stays
    bounded whatever the corpus (one 20 MB line included)."""
    table = token_bytes(tokenizer) or []
    counts: Counter = Counter()
    chars = tokens = fallback = 0
    group, size = [], 0

    def measure_group() -> None:
        nonlocal tokens, fallback
        for ids in encode(tokenizer, group):
            tokens += len(ids)
            fallback += fallback_characters(ids, table)

    for text in _bounded(texts, max_chars):
        if missing:
            counts.update(text)
        chars += len(text)
        for piece in pieces(tokenizer, text):
            group.append(piece)
            size += len(piece)
            if size >= batch_chars:
                measure_group()
                group, size = [], 0
    if group:
        measure_group()
    return Coverage(chars, tokens, fallback, [(c, n) for c, n in counts.most_common() if not _whole(tokenizer, c)])


def _bounded(texts: Iterable[str], max_chars: int | None) -> Iterable[str]:
    """`texts`, cut once `max_chars` characters have gone by (None: all of them)."""
    if max_chars is None:
        yield from texts
        return
    left = max_chars
    for text in texts:
        if left <= 0:
            return
        yield text[:left]
        left -= len(text)


def worth_extending(found: Coverage, min_count: int = MIN_COUNT, limit: int = MAX_NEW_TOKENS) -> int:
    """How many characters an extension would add, when enough of the text is in byte pieces
    (more than WORTH_EXTENDING) for it to matter; 0 otherwise."""
    return len(found.candidates(min_count, limit)) if found.byte_fallback_share > WORTH_EXTENDING else 0


def _whole(tokenizer, char: str) -> bool:
    """Does the tokenizer write `char` alone as one token of its own? (Whitespace, control
    characters and U+FFFD, a character lost before the corpus was written, count as whole: they are
    not what a vocabulary extension is for. The unknown token of a tokenizer that has one does not.)"""
    if not char.isprintable() or char.isspace() or char == "\ufffd":
        return True
    ids = tokenizer(char, add_special_tokens=False)["input_ids"]
    return len(ids) == 1 and (tokenizer.unk_token_id is None or ids[0] != tokenizer.unk_token_id)


def extend_tokenizer(tokenizer, characters: list[str]) -> list[int]:
    """Add `characters` as tokens of their own (in place); the ids they got, in order."""
    fresh = [c for c in characters if len(c) == 1 and not _whole(tokenizer, c)]
    if len(fresh) != len(set(fresh)):
        raise ValueError("characters to add must be distinct")
    tokenizer.add_tokens(fresh)
    return tokenizer.convert_tokens_to_ids(fresh)


def added_characters(tokenizer, base_size: int) -> dict[int, str]:
    """The tokens past `base_size` (the starting model's vocabulary): id -> its character."""
    return {i: tok.content for i, tok in tokenizer.added_tokens_decoder.items()
            if i >= base_size and not tok.special}


def has_added_characters(tokenizer) -> bool:
    """Does `tokenizer` carry characters added by `extend_tokenizer` (non-special added tokens)?
    GGUF does not carry them: its readers give them to byte-level BPE (formats/gguf refuse them)."""
    return any(not tok.special for tok in tokenizer.added_tokens_decoder.values())


@torch.no_grad()
def resize_model(model, base_tokenizer, tokenizer) -> list[int]:
    """Give `model` (built for `base_tokenizer`) rows for the tokens `tokenizer` adds past it, each
    the mean of the rows of the byte pieces `base_tokenizer` spells its character with (input and,
    when untied, output rows). The table grows only where the model has no spare rows for them.
    Returns the new ids (empty when there are none)."""
    base = len(base_tokenizer)
    added = added_characters(tokenizer, base)
    new_ids = sorted(added)
    if not new_ids:
        return []
    if new_ids != list(range(base, len(tokenizer))):
        raise ConfigError(f"the tokenizer's ids past the starting model's {base} are not all added characters")
    pieces = {i: base_tokenizer(c, add_special_tokens=False)["input_ids"] for i, c in added.items()}
    if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    matrices = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight is not matrices[0]:
        matrices.append(output.weight)
    for weight in matrices:
        for i in new_ids:
            weight[i] = weight[pieces[i]].mean(dim=0)
    return new_ids
