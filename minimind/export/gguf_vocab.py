"""A tokenizer as GGUF metadata, in the two forms llama.cpp runs: byte-level BPE ("gpt2") and
sentencepiece-style BPE with byte fallback ("llama").

A GGUF carries no tokenizer.json, only a vocabulary and the *name* of the way text is split before
BPE (`tokenizer.ggml.pre`); llama.cpp keeps a regex list for each name. So the writer must find
the name whose regexes split text exactly as this tokenizer does. It does so the way llama.cpp's
own converter does, by trying text rather than reading the tokenizer's JSON: each known name's
regexes split a set of probe texts, and the name that agrees with the tokenizer's own normalizer
and pre-tokenizer on every probe is written. A tokenizer that agrees with none is refused.

Byte-level: tokens as the vocabulary spells them (GPT-2's byte alphabet), merges in rank order,
BOS/EOS added as the tokenizer adds them.

Sentencepiece style: llama.cpp replaces spaces with ▁, puts one ▁ in front, and merges the pair
whose result has the highest score, falling back to <0xNN> byte tokens for what is left.
Hugging Face's BPE merges by rank instead; scoring the result of merge r with -r makes the two
orders the same (the recipe transformers uses to rebuild merges from such a file). A text that
starts with a space is a known difference between the two families of readers: llama.cpp always
adds the ▁ in front, a `Metaspace(prepend_scheme="first")` tokenizer does not add a second one.
"""

from __future__ import annotations

import json

from tokenizers import Regex, models, pre_tokenizers

from ..byte_level import bytes_to_unicode, tokenizer_style
from ..errors import ExportError
from ..tokenizer import SPECIAL_TOKENS

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_LLAMA3 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
           r"|\s+(?!\S)|\s+")
_QWEN2 = (_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
          r"|\s+(?!\S)|\s+")

# llama.cpp's name for a way of splitting text -> the regexes it applies, one after another
# (src/llama-vocab.cpp); llama.cpp also keeps whole any word that is itself a token under "llama-bpe".
PRE_TOKENIZERS = {
    "gpt-2": (_GPT2,),                 # GPT-2, and this studio's own tokenizers
    "smollm": (r"\p{N}", _GPT2),       # SmolLM/SmolLM2: GPT-2's with every digit on its own
    "llama-bpe": (_LLAMA3,),           # Llama 3.x
    "qwen2": (_QWEN2,),                # Qwen2, Qwen2.5, Qwen3
}
IGNORES_MERGES = {"llama-bpe"}

PROBES = (
    "Hello world! It's 2024: I'd've paid $3.50 for 12345 apples, DON'T YOU'LL?",
    "  leading spaces\n\n\ttabs and\r\nnew lines   \n  ",
    "床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。",
    "naïve café — “quotes” ‘single’ x=y+z; f(a_b)->c",
    "emoji 🙂🚀 and Ümlauts, ١٢٣ digits, a1b22c333d4444e55555",
    "x  y   z\n \n\n\nend.\t\t",
)
SPACE = "\u2581"


def splitter(name: str):
    """The pre-tokenizer doing what llama.cpp does for `name`: its regexes, then bytes as GPT-2 spells them."""
    return pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(pattern), behavior="isolated") for pattern in PRE_TOKENIZERS[name]]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def _pieces(backend, text: str) -> list[str]:
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    if backend.pre_tokenizer is None:
        return [text]
    return [piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text)]


def pre_tokenizer_name(backend) -> str | None:
    """The llama.cpp name that splits every probe as `backend` (a `tokenizers.Tokenizer`) does, or None."""
    if not isinstance(backend.model, models.BPE) or backend.model.byte_fallback:
        return None
    want = [_pieces(backend, text) for text in PROBES]
    for name in PRE_TOKENIZERS:
        if bool(backend.model.ignore_merges) != (name in IGNORES_MERGES):
            continue
        split = splitter(name)
        if all([piece for piece, _ in split.pre_tokenize_str(text)] == pieces for text, pieces in zip(PROBES, want)):
            return name
    return None


def is_sentencepiece_style(backend) -> bool:
    """Does `backend` turn text into one ▁-for-space piece with one ▁ in front, as llama.cpp's
    sentencepiece tokenizer does, and fall back to byte tokens?"""
    if not isinstance(backend.model, models.BPE) or not backend.model.byte_fallback:
        return False
    return all(_pieces(backend, text) == [SPACE + text.replace(" ", SPACE)]
               for text in PROBES if not text[0].isspace())


def _byte_alphabet() -> set[str]:
    return set(bytes_to_unicode().values())


def vocab_refusal(tokenizer) -> str | None:
    """Why llama.cpp could not tokenize as `tokenizer` does from a GGUF (None when it can)."""
    backend = tokenizer.backend_tokenizer
    style = tokenizer_style(tokenizer)
    if style == "byte-level":
        if pre_tokenizer_name(backend) is None:
            return ("GGUF export needs a tokenizer that splits text one of the ways llama.cpp knows "
                    f"({', '.join(PRE_TOKENIZERS)}); this one splits it otherwise")
        alphabet = _byte_alphabet()
        if any(not token.special and not set(token.content) <= alphabet
               for token in tokenizer.added_tokens_decoder.values()):
            return ("GGUF cannot carry the characters this model's run added to its vocabulary "
                    "(its readers split them into bytes); export hf, llama or merged instead")
        return None
    if style == "byte-fallback":
        if not is_sentencepiece_style(backend):
            return ("GGUF export of a sentencepiece-style tokenizer needs llama.cpp's way of writing spaces "
                    "(▁ for each space and one in front of the text); this one writes them otherwise")
        return None
    return "GGUF export needs a byte-level or a sentencepiece-style (byte-fallback) BPE tokenizer"


def _added_ends(tokenizer) -> tuple[bool, bool]:
    """(adds a BOS, adds an EOS): what the tokenizer puts around a text it encodes."""
    ids = tokenizer("a")["input_ids"]
    return (bool(ids) and tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id,
            bool(ids) and tokenizer.eos_token_id is not None and ids[-1] == tokenizer.eos_token_id)


def _merge_ranks(model: dict) -> list[str]:
    return [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]


def vocab_metadata(tokenizer, vocab_size: int) -> dict:
    """Everything the GGUF's `tokenizer.ggml.*` keys hold: model, pre, tokens, token types, merges or
    scores, and whether a BOS/EOS is added. ExportError when llama.cpp could not run the tokenizer."""
    from gguf import TokenType

    reason = vocab_refusal(tokenizer)
    if reason:
        raise ExportError(reason)
    n = len(tokenizer)
    if n > vocab_size:
        raise ExportError(f"the tokenizer has {n} tokens but the model only {vocab_size} embeddings")
    backend = tokenizer.backend_tokenizer
    model = json.loads(backend.to_str())["model"]
    merges = _merge_ranks(model)
    tokens = tokenizer.convert_ids_to_tokens(list(range(n)))
    vocab_ids = tokenizer.get_vocab()
    special = set(tokenizer.all_special_ids) | {vocab_ids[t] for t in SPECIAL_TOKENS if t in vocab_ids}
    added = set(tokenizer.get_added_vocab().values())
    sentencepiece = backend.model.byte_fallback

    def kind(i: int, token: str):
        if sentencepiece and i == tokenizer.unk_token_id:
            return TokenType.UNKNOWN
        if i in special:
            return TokenType.CONTROL
        if i in added:
            return TokenType.USER_DEFINED
        if sentencepiece and len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            return TokenType.BYTE
        return TokenType.NORMAL

    types = [kind(i, t) for i, t in enumerate(tokens)]
    # embeddings beyond the tokenizer (a vocabulary rounded up for speed) get unused placeholders
    tokens += [f"[PAD{i}]" for i in range(n, vocab_size)]
    types += [TokenType.UNUSED] * (vocab_size - n)
    add_bos, add_eos = _added_ends(tokenizer)
    out = {"tokens": tokens, "types": types, "add_bos": add_bos, "add_eos": add_eos}
    if sentencepiece:
        score = {}
        for rank, merge in enumerate(merges):
            score.setdefault(merge.replace(" ", ""), -float(rank))
        unmerged = -float(len(merges))  # single characters: never the result of a merge
        out.update(model="llama", pre="default", scores=[
            score.get(t, 0.0 if k != TokenType.NORMAL else unmerged) for t, k in zip(tokens, types)])
    else:
        out.update(model="gpt2", pre=pre_tokenizer_name(backend), merges=merges)
    return out
