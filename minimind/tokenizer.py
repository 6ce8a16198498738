"""Byte-level BPE tokenizers trained with `tokenizers`, saved as Hugging Face folders.

Byte-level means every string round-trips exactly (any Unicode, emoji, whitespace
runs): text is mapped to bytes before BPE, and decoding maps bytes back.
`TokenizerReport.byte_fallback_share` says how much of a text goes through byte
pieces rather than whole-character tokens (a 6400-entry BPE on the Tang poems:
1.8 % of held-out characters). With `min_char_count` > 0, every character seen
that often is kept whole (one token, in any context) even where BPE's merge budget
would leave it in pieces. It is off by default because it was measured to cost
more than it gives on a CPU budget: on the Tang poems it grows the vocabulary from
6400 to 10,220, the output layer of a small model costs that much more per token,
and held-out BPC after 10 minutes was 7.09 against 6.93 without it
(benchmarks/NOTES.md, "Tokenizer"). The saved folder (`tokenizer.json` + `tokenizer_config.json` with the ChatML chat
template) loads with `AutoTokenizer.from_pretrained` in transformers 4.4x and 5.x alike (`save_tokenizer`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from .byte_level import bytes_to_unicode, is_utf8
from .data import iter_texts as corpus_texts
from .vocabulary import coverage

PAD, BOS, EOS = "<|pad|>", "<|startoftext|>", "<|endoftext|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, IM_START, IM_END]  # ids 0..4, in this order

# ChatML turns. The {% generation %} markers let `apply_chat_template(...,
# return_assistant_tokens_mask=True)` report which tokens the assistant wrote,
# which is what SFT trains on.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}{{- message['content'] + '<|im_end|>' }}{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


@dataclass
class TokenizerReport:
    """What training produced: where it is saved and how well it compresses."""

    path: str
    vocab_size: int
    seconds: float
    characters: int
    tokens: int
    fallback_characters: int = 0   # characters encoded through byte pieces, not a whole token

    @property
    def byte_fallback_share(self) -> float:
        return self.fallback_characters / max(self.characters, 1)

    @property
    def chars_per_token(self) -> float:
        return self.characters / max(self.tokens, 1)


# > 0: a character seen this often in the training text gets a token of its own (off by
# default: measured slower to learn from per CPU-minute, see the module docstring).
MIN_CHAR_COUNT = 0


def build_tokenizer(texts: Iterable[str], vocab_size: int = 6400, min_frequency: int = 2,
                    model_max_length: int = 2048, min_char_count: int = MIN_CHAR_COUNT) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` and wrap it with our special tokens and chat template.

    `vocab_size` is the BPE's budget; with `min_char_count` > 0, characters seen at least
    that often that BPE left in pieces are then added whole, so the vocabulary can end larger."""
    if vocab_size < 256 + len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size must be at least {256 + len(SPECIAL_TOKENS) + 1} "
                         "(256 byte symbols + special tokens + one merge)")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    counts: Counter = Counter()

    def counted(items: Iterable[str]) -> Iterator[str]:
        for text in items:
            counts.update(text)
            yield text

    # characters are counted only when they are to be kept whole (counting is a pass over the text)
    core.train_from_iterator(counted(texts) if min_char_count > 0 else texts, trainer=trainer)
    if min_char_count > 0:
        core = _with_whole_characters(core, [c for c, n in counts.most_common() if n >= min_char_count])
    return wrap(core, model_max_length)


def _with_whole_characters(core: Tokenizer, characters: list[str]) -> Tokenizer:
    """`core` with one token for each of `characters`, whole in any context.

    Two steps. (1) Learned merges whose result straddles a character boundary (the last byte of
    one Chinese character with the first of the next) are dropped, with every merge built on
    them: they would take a character's bytes away from its own token in context. (2) For a
    character still split, the merges that join its pieces are appended after every learned merge."""
    data = json.loads(core.to_str())
    _drop_straddling_merges(data)
    core = Tokenizer.from_str(json.dumps(data))
    to_unicode = bytes_to_unicode()
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    string_merges = bool(merges) and isinstance(merges[0], str)
    next_id = 1 + max([*vocab.values(), *(t["id"] for t in data.get("added_tokens", []))])
    for char in characters:
        symbol = "".join(to_unicode[b] for b in char.encode("utf-8"))
        if symbol in vocab:
            continue
        pieces = [piece.value for piece in core.model.tokenize(symbol)]
        joined = pieces[0]
        for piece in pieces[1:]:
            merges.append(f"{joined} {piece}" if string_merges else [joined, piece])
            joined += piece
            if joined not in vocab:
                vocab[joined], next_id = next_id, next_id + 1
    return Tokenizer.from_str(json.dumps(data))


def _drop_straddling_merges(data: dict) -> None:
    """Remove (in place) merges whose result is neither whole characters nor the leading bytes of
    one character, and the merges and vocabulary entries that depend on them; ids are renumbered
    in their old order."""
    to_byte = {char: byte for byte, char in bytes_to_unicode().items()}
    vocab, merges = data["model"]["vocab"], data["model"]["merges"]
    string_merges = bool(merges) and isinstance(merges[0], str)
    dropped: set[str] = set()
    kept = []
    for merge in merges:
        left, right = merge.split(" ", 1) if string_merges else merge
        result = left + right
        if left in dropped or right in dropped or not _character_aligned(bytes(to_byte[c] for c in result)):
            dropped.add(result)
        else:
            kept.append(merge)
    data["model"]["merges"] = kept
    order = sorted((index, token) for token, index in vocab.items() if token not in dropped)
    data["model"]["vocab"] = {token: new for new, (_, token) in enumerate(order)}
    for added in data.get("added_tokens", []):
        added["id"] = data["model"]["vocab"].get(added["content"], added["id"])


def _character_aligned(data: bytes) -> bool:
    """Whole UTF-8 characters, or the first bytes of a single character."""
    if is_utf8(data):
        return True
    lead = data[0]
    if lead < 0xC0 or any(not 0x80 <= b < 0xC0 for b in data[1:]):
        return False
    length = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return len(data) < length


def wrap(core: Tokenizer, model_max_length: int = 2048) -> PreTrainedTokenizerFast:
    """A transformers tokenizer around a trained `tokenizers.Tokenizer`."""
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS,
        additional_special_tokens=[IM_START, IM_END], chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False, model_max_length=model_max_length,
        padding_side="left")


# The tokenizer class every loader has: transformers 4.x (PreTrainedTokenizerFast) and 5.x (an alias of
# TokenizersBackend, the name 5.x writes, which 4.x does not know).
PORTABLE_CLASS = "PreTrainedTokenizerFast"
# Options of the load that produced the tokenizer, which 5.x writes back into tokenizer_config.json; they
# describe where it came from, not the tokenizer, and would pin a later load to local files.
LOAD_OPTIONS = ("is_local", "local_files_only")


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out_dir: str | Path, context: int | None = None) -> Path:
    """Write tokenizer.json + tokenizer_config.json (chat template inside it) in a form that
    transformers 4.4x and 5.x (`AutoTokenizer`, `PreTrainedTokenizerFast(tokenizer_file=...)`) and bare
    `tokenizers.Tokenizer.from_file` all load the same way (see `portable_config`).

    `model_max_length` becomes `context`, else the `max_position_embeddings` of a config.json already in
    the folder (every export writes its config first), so tools warn before a prompt runs past what the
    model holds."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out, save_jinja_files=False)
    config_file = out / "tokenizer_config.json"
    config = portable_config(json.loads(config_file.read_text(encoding="utf-8")), context or folder_context(out))
    config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    _write_string_merges(out / "tokenizer.json")
    return out


def portable_config(config: dict, context: int | None = None) -> dict:
    """tokenizer_config.json as both major transformers versions read it: a class both have, and the
    extra special tokens as the list `additional_special_tokens` (5.x writes a list under
    `extra_special_tokens`, where 4.x expects a dict of named tokens and fails on `.keys()`; 5.x reads
    `additional_special_tokens` as its old name). A dict of named tokens stays: both read it. The chat
    template stays inside the file (`save_jinja_files=False`), where every version looks for it."""
    out = {k: v for k, v in config.items() if k not in LOAD_OPTIONS}
    out["tokenizer_class"] = PORTABLE_CLASS
    extra = out.pop("extra_special_tokens", None)
    if isinstance(extra, dict):
        out["extra_special_tokens"] = extra
    elif extra:
        out["additional_special_tokens"] = list(extra)  # strings, or AddedToken dicts both read
    if context:
        out["model_max_length"] = int(context)
    return out


def folder_context(folder: Path) -> int | None:
    """The context (max_position_embeddings) of the model whose config.json is in `folder`, if any."""
    config_file = folder / "config.json"
    if not config_file.is_file():
        return None
    value = json.loads(config_file.read_text(encoding="utf-8")).get("max_position_embeddings")
    return value if isinstance(value, int) and value > 0 else None


def _write_string_merges(path: Path) -> None:
    """Rewrite the BPE merges of tokenizer.json as "left right" strings (the form before tokenizers 0.20,
    which every version reads) instead of pairs, which tokenizers < 0.20 (transformers up to 4.44)
    refuses. Left as pairs when a piece holds a space, which the string form cannot split."""
    data = json.loads(path.read_text(encoding="utf-8"))
    model = data.get("model") or {}
    merges = model.get("merges")
    if not merges or isinstance(merges[0], str) or any(" " in piece for pair in merges for piece in pair):
        return
    model["merges"] = [f"{left} {right}" for left, right in merges]
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    return AutoTokenizer.from_pretrained(str(path))


def train_tokenizer(files: list[str | Path], vocab_size: int = 6400, out_dir: str | Path | None = None,
                    text_field: str | None = None, min_frequency: int = 2,
                    min_char_count: int = MIN_CHAR_COUNT) -> tuple[PreTrainedTokenizerFast, TokenizerReport]:
    """Train on the text of `files` (txt/md lines, or a text field of JSONL/JSON/CSV/parquet records).

    Returns the tokenizer and a report with training time and chars/token on the same files.
    """
    start = time.perf_counter()
    tokenizer = build_tokenizer(iter_texts(files, text_field=text_field), vocab_size, min_frequency,
                                min_char_count=min_char_count)
    seconds = time.perf_counter() - start
    chars, tokens, fallback = measure(tokenizer, iter_texts(files, text_field=text_field))
    path = str(save_tokenizer(tokenizer, out_dir)) if out_dir else ""
    return tokenizer, TokenizerReport(path, len(tokenizer), seconds, chars, tokens, fallback)


def iter_texts(files: list[str | Path], text_field: str | None = None, kind: str = "auto") -> Iterator[str]:
    """Texts of a corpus read by `minimind.data` (every format it reads, with its checks):
    plain documents, or each message of chat/instruction records."""
    return corpus_texts(files, text_field=text_field, kind=kind)


def measure(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str]) -> tuple[int, int, int]:
    """(characters, tokens, characters spelled with byte pieces) over `texts` (minimind.vocabulary.coverage)."""
    found = coverage(tokenizer, texts, missing=False)
    return found.characters, found.tokens, found.fallback_characters
