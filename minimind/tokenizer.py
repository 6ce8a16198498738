"""Byte-level BPE tokenizers trained with `tokenizers`, saved as Hugging Face folders.

Byte-level means every string round-trips exactly (any Unicode, emoji, whitespace
runs): text is mapped to bytes before BPE, and decoding maps bytes back. The
saved folder (`tokenizer.json` + `tokenizer_config.json` with the ChatML chat
template) loads with `AutoTokenizer.from_pretrained`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

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

    @property
    def chars_per_token(self) -> float:
        return self.characters / max(self.tokens, 1)


def build_tokenizer(texts: Iterable[str], vocab_size: int = 6400, min_frequency: int = 2,
                    model_max_length: int = 2048) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on `texts` and wrap it with our special tokens and chat template."""
    if vocab_size < 256 + len(SPECIAL_TOKENS) + 1:
        raise ValueError(f"vocab_size must be at least {256 + len(SPECIAL_TOKENS) + 1} "
                         "(256 byte symbols + special tokens + one merge)")
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    core.train_from_iterator(texts, trainer=trainer)
    return wrap(core, model_max_length)


def wrap(core: Tokenizer, model_max_length: int = 2048) -> PreTrainedTokenizerFast:
    """A transformers tokenizer around a trained `tokenizers.Tokenizer`."""
    return PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS,
        additional_special_tokens=[IM_START, IM_END], chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False, model_max_length=model_max_length,
        padding_side="left")


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out_dir: str | Path) -> Path:
    """Write tokenizer.json + tokenizer_config.json (chat template inside it)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out, save_jinja_files=False)
    return out


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    return AutoTokenizer.from_pretrained(str(path))


def train_tokenizer(files: list[str | Path], vocab_size: int = 6400, out_dir: str | Path | None = None,
                    text_field: str | None = None, min_frequency: int = 2) -> tuple[PreTrainedTokenizerFast, TokenizerReport]:
    """Train on the text of `files` (txt/md lines, or a text field of JSONL/JSON/CSV/parquet records).

    Returns the tokenizer and a report with training time and chars/token on the same files.
    """
    start = time.perf_counter()
    tokenizer = build_tokenizer(iter_texts(files, text_field=text_field), vocab_size, min_frequency)
    seconds = time.perf_counter() - start
    chars, tokens = measure(tokenizer, iter_texts(files, text_field=text_field))
    path = str(save_tokenizer(tokenizer, out_dir)) if out_dir else ""
    return tokenizer, TokenizerReport(path, len(tokenizer), seconds, chars, tokens)


def iter_texts(files: list[str | Path], text_field: str | None = None, kind: str = "auto") -> Iterator[str]:
    """Texts of a corpus read by `minimind.data` (every format it reads, with its checks):
    plain documents, or each message of chat/instruction records."""
    from .data import iter_texts as corpus_texts

    return corpus_texts(files, text_field=text_field, kind=kind)


def measure(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str], batch: int = 1000) -> tuple[int, int]:
    """(characters, tokens) over `texts`, encoded in batches."""
    chars = tokens = 0
    for chunk in _batched(texts, batch):
        chars += sum(len(t) for t in chunk)
        tokens += sum(len(ids) for ids in tokenizer(chunk, add_special_tokens=False)["input_ids"])
    return chars, tokens


def _batched(items: Iterable[str], n: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
