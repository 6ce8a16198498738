"""Prepare a corpus for training: split by document, tokenize, pack or mask, cache.

`prepare_corpus` is what the trainer calls. Its output is two memory-mapped
`datasets.Dataset`s with `input_ids` and `labels` (-100 = not trained on) — for a
preference corpus `chosen_input_ids`, `chosen_labels`, `rejected_input_ids`,
`rejected_labels`, one row per pair; for prompts (GRPO) `prompt_ids`, `prompt`
and `params`, one row per prompt; for labelled text `input_ids` and `label` (a class id,
split stratified by class) — cached under a key of file contents +
tokenizer + settings, so the second call with the same inputs reads the cache
and tokenizes nothing.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, Features, List, Value, concatenate_datasets

from ..errors import ConfigError
from .cache import key, new_workdir, publish, ready, tokenizer_key
from .config import DataConfig, cache_root
from .documents import Documents, read_documents
from .stats import Histogram, PartLengths, Stats
from .labels import stratified_split
from .tokens import (PAIR_COLUMNS, PROMPT_COLUMNS, PROMPT_ROOM, classify_batch, list_lengths, pack,
                     pair_token_lengths, render_batch, render_pairs_batch, render_prompts_batch, token_lengths,
                     tokenize_batch)

TOKEN_FEATURES = Features({"input_ids": List(Value("int32"))})
CHAT_FEATURES = Features({"input_ids": List(Value("int32")), "labels": List(Value("int32")),
                          "length": Value("int64"), "chars": Value("int64"), "target_chars": Value("int64")})
PAIR_FEATURES = Features({**{name: List(Value("int32")) for name in PAIR_COLUMNS}, "length": Value("int64"),
                          "longest": Value("int64"), "chars": Value("int64"), "target_chars": Value("int64")})
PROMPT_FEATURES = Features({"prompt_ids": List(Value("int32")), "prompt": Value("string"), "params": Value("string"),
                            "length": Value("int64"), "chars": Value("int64")})
LABEL_FEATURES = Features({"input_ids": List(Value("int32")), "label": Value("int64"), "length": Value("int64")})
CHAT_BATCH = 256  # conversations (or pairs) rendered per map batch
ROW_COLUMNS = ["input_ids", "labels"]  # what the trainer reads of text, chat and instruction rows
COLUMNS = {"preference": list(PAIR_COLUMNS), "prompts": list(PROMPT_COLUMNS),  # other kinds: ROW_COLUMNS
           "labelled": ["input_ids", "label"]}


@dataclass
class PreparedCorpus:
    """Training-ready rows and what the trainer needs to report on them."""

    train: Dataset          # input_ids, labels (list[int]); preference: PAIR_COLUMNS; prompts: PROMPT_COLUMNS
                            # (prompt_ids list[int], prompt str, params str: a JSON object); labelled:
                            # input_ids (list[int], ending in EOS) and label (int, an index into `classes`);
                            # memory-mapped
    validation: Dataset     # same columns; documents never seen in train
    kind: str               # text, chat, instruction, preference or prompts
    stats: Stats            # corpus stats with token counts, split sizes, truncations
    val_characters: int     # characters the validation labels cover (assistant text for chat, the chosen
                            # answers for preference; 0 for prompts: nothing is labelled)
    val_tokens: int         # validation tokens with a label (!= -100; preference: of the chosen side; 0 for
                            # prompts)
    fingerprint: str        # cache key: file contents + tokenizer + settings
    path: Path              # cache folder holding the Arrow files
    seq_len: int            # tokens per row (the most, for chat rows and each side of a pair)
    from_cache: bool        # True when nothing was tokenized this time
    classes: list = None    # labelled: the class names in id order (a row's label indexes this); else []

    def __post_init__(self):
        self.classes = list(self.classes or [])


def split_indices(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) document indices, each sorted: a seeded shuffle cut at `fraction`.

    With two or more documents and a fraction above 0, validation gets at least
    one document and train keeps at least one.
    """
    if n < 2 or fraction <= 0:
        return np.arange(n), np.zeros(0, dtype=np.int64)
    n_val = min(n - 1, max(1, round(n * fraction)))
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def inspect_corpus(files, config: DataConfig | None = None, tokenizer=None) -> Stats:
    """Read and check a corpus; with a tokenizer also count its tokens (nothing tokenized is stored)."""
    config = config or DataConfig()
    docs = read_documents(files, config)
    stats = docs.stats
    if tokenizer is not None:
        _need_template(docs.kind, tokenizer)
        if docs.kind == "preference":
            parts = pair_token_lengths(docs.dataset, tokenizer, config.batch_size)
            lengths = parts.pop("pair")
            stats.part_tokens = {name: PartLengths.of(n, "tokens") for name, n in parts.items()}
        else:
            lengths = token_lengths(docs.dataset, docs.kind, tokenizer, config.batch_size)
        _set_tokens(stats, lengths, stats.characters)
    return stats


def _need_template(kind: str, tokenizer) -> None:
    if kind not in ("text", "labelled") and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"this is a {kind} corpus, but the tokenizer has no chat template")


def prepare_corpus(files, tokenizer, config: DataConfig | None = None) -> PreparedCorpus:
    """Check, split, tokenize and cache a corpus; from the cache when nothing changed."""
    config = config or DataConfig()
    if config.seq_len is None:
        raise ConfigError("data config: seq_len is not set; give the tokens per training row (e.g. 256)")
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ConfigError("the tokenizer needs an EOS and a PAD token to prepare a corpus")
    docs = read_documents(files, config)
    _need_template(docs.kind, tokenizer)
    fingerprint = key("prepared", docs.fingerprint, tokenizer_key(tokenizer), config.seq_len,
                      config.val_fraction, config.seed)
    folder = cache_root(config) / fingerprint
    meta = ready(folder)
    from_cache = meta is not None
    if meta is None:
        work = new_workdir(folder)
        try:
            meta = _build(docs, tokenizer, config, work, fingerprint)
            publish(work, folder, meta)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _load(folder, meta, docs, from_cache)


def document_split(docs: Documents, config: DataConfig) -> tuple[np.ndarray, np.ndarray]:
    """(train, validation) document indices of a read corpus, as the trainer splits it: a labelled
    corpus by class (every class in both splits, in the corpus's proportions), any other by a
    seeded shuffle. The export's held-out text (`export.heldout`) reads the same split."""
    if docs.kind == "labelled":
        labels = docs.dataset.with_format("arrow")["label"].to_numpy(zero_copy_only=False)
        return stratified_split(labels, config.val_fraction, config.seed)
    return split_indices(len(docs.dataset), config.val_fraction, config.seed)


def _build(docs: Documents, tokenizer, config: DataConfig, work: Path, fingerprint: str) -> dict:
    train_idx, val_idx = document_split(docs, config)
    splits = {"train": docs.dataset.select(train_idx), "validation": docs.dataset.select(val_idx)}
    stats = docs.stats
    stats.train_documents, stats.val_documents = len(train_idx), len(val_idx)
    build = {"text": _build_text, "preference": _build_pairs, "prompts": _build_prompts,
             "labelled": _build_labelled}.get(docs.kind, _build_chat)
    files, lengths, chars, val_characters, val_tokens = build(splits, tokenizer, config, work, fingerprint, stats)
    _set_tokens(stats, lengths, chars)
    warnings = []
    if config.val_fraction > 0 and not len(val_idx):
        warnings.append("only one document: nothing is held out for validation")
    if stats.dropped and docs.kind == "preference":
        warnings.append(f"{stats.dropped:,} pairs dropped: a side keeps no answer token in seq_len={config.seq_len}")
    elif stats.dropped and docs.kind == "prompts":
        warnings.append(f"{stats.dropped:,} prompts dropped: longer than {config.seq_len - PROMPT_ROOM:,} tokens "
                        f"(seq_len={config.seq_len} less {PROMPT_ROOM} for the answer)")
    elif stats.truncated and docs.kind == "labelled":
        warnings.append(f"{stats.truncated:,} texts cut to their first {config.seq_len - 1:,} tokens "
                        f"(seq_len={config.seq_len}, less one for EOS)")
    elif stats.dropped:
        warnings.append(f"{stats.dropped:,} examples dropped: no assistant token fits in seq_len={config.seq_len}")
    return {"stats": stats.to_dict(), "files": files, "val_characters": int(val_characters),
            "val_tokens": int(val_tokens), "seq_len": config.seq_len, "warnings": warnings}


def _build_text(splits, tokenizer, config, work, fingerprint, stats):
    files, lengths, val = {}, [], (0, 0)
    for name, docs in splits.items():
        tokens = _map(docs, tokenize_batch, config, work / f"{name}-tokens.arrow", f"{fingerprint}-{name}",
                      TOKEN_FEATURES, dict(tokenizer=tokenizer, eos=tokenizer.eos_token_id), config.batch_size)
        with_eos = list_lengths(tokens, "input_ids")
        lengths.append(with_eos - 1)
        pack(tokens, config.seq_len, tokenizer.pad_token_id, work / f"{name}.arrow")
        files[name] = [f"{name}.arrow"]
        if name == "validation":
            val = (_column_sum(docs, "chars"), int(with_eos.sum()))
        for cache in tokens.cache_files:
            Path(cache["filename"]).unlink(missing_ok=True)
    return files, np.concatenate(lengths), stats.characters, *val


def _build_chat(splits, tokenizer, config, work, fingerprint, stats):
    files, lengths, chars, val = {}, [], 0, (0, 0)
    for name, docs in splits.items():
        rows = _map(docs, render_batch, config, work / f"{name}.arrow", f"{fingerprint}-{name}", CHAT_FEATURES,
                    dict(tokenizer=tokenizer, seq_len=config.seq_len), min(config.batch_size, CHAT_BATCH))
        files[name] = [Path(c["filename"]).name for c in rows.cache_files] or [f"{name}.arrow"]
        full = rows.data.column("length").to_numpy() if len(rows) else np.zeros(0, dtype=np.int64)
        if name == "train" and not len(rows):
            raise ConfigError(f"seq_len={config.seq_len} is too short for this corpus: no training example keeps "
                              "an assistant token; raise seq_len or shorten the prompts")
        lengths.append(full)
        chars += _column_sum(rows, "chars")
        stats.dropped += len(docs) - len(rows)
        stats.truncated += int((full > config.seq_len).sum()) + len(docs) - len(rows)
        if name == "validation" and len(rows):
            labels = pc.list_flatten(rows.data.column("labels"))
            val = (_column_sum(rows, "target_chars"), int(pc.sum(pc.not_equal(labels, -100)).as_py() or 0))
    return files, np.concatenate(lengths), chars, *val


def _build_pairs(splits, tokenizer, config, work, fingerprint, stats):
    """Preference pairs: both sides rendered and masked in one row; a pair whose side keeps no answer
    token is dropped; validation counts the chosen answers (their characters and labelled tokens)."""
    files, lengths, chars, val = {}, [], 0, (0, 0)
    for name, docs in splits.items():
        rows = _map(docs, render_pairs_batch, config, work / f"{name}.arrow", f"{fingerprint}-{name}", PAIR_FEATURES,
                    dict(tokenizer=tokenizer, seq_len=config.seq_len), min(config.batch_size, CHAT_BATCH))
        files[name] = [Path(c["filename"]).name for c in rows.cache_files] or [f"{name}.arrow"]
        if name == "train" and not len(rows):
            raise ConfigError(f"seq_len={config.seq_len} is too short for this corpus: no training pair keeps an "
                              "answer token on both sides; raise seq_len or shorten the prompts")
        longest = rows.data.column("longest").to_numpy() if len(rows) else np.zeros(0, dtype=np.int64)
        lengths.append(rows.data.column("length").to_numpy() if len(rows) else np.zeros(0, dtype=np.int64))
        chars += _column_sum(rows, "chars")
        stats.dropped += len(docs) - len(rows)
        stats.truncated += int((longest > config.seq_len).sum()) + len(docs) - len(rows)
        if name == "validation" and len(rows):
            labels = pc.list_flatten(rows.data.column("chosen_labels"))
            val = (_column_sum(rows, "target_chars"), int(pc.sum(pc.not_equal(labels, -100)).as_py() or 0))
    return files, np.concatenate(lengths), chars, *val


def _build_prompts(splits, tokenizer, config, work, fingerprint, stats):
    """Prompts: rendered as chat renders them (assistant turn opened); one too long to leave PROMPT_ROOM
    tokens for the answer is dropped. Nothing is labelled, so validation counts no characters or tokens."""
    files, lengths, chars = {}, [], 0
    for name, docs in splits.items():
        rows = _map(docs, render_prompts_batch, config, work / f"{name}.arrow", f"{fingerprint}-{name}",
                    PROMPT_FEATURES, dict(tokenizer=tokenizer, seq_len=config.seq_len),
                    min(config.batch_size, CHAT_BATCH))
        files[name] = [Path(c["filename"]).name for c in rows.cache_files] or [f"{name}.arrow"]
        if name == "train" and not len(rows):
            raise ConfigError(f"seq_len={config.seq_len} is too short for this corpus: every training prompt is "
                              f"longer than {config.seq_len - PROMPT_ROOM} tokens (seq_len less {PROMPT_ROOM} for "
                              "the answer); raise seq_len or shorten the prompts")
        lengths.append(rows.data.column("length").to_numpy() if len(rows) else np.zeros(0, dtype=np.int64))
        chars += _column_sum(rows, "chars")
        stats.dropped += len(docs) - len(rows)
    return files, np.concatenate(lengths), chars, 0, 0


def _build_labelled(splits, tokenizer, config, work, fingerprint, stats):
    """Labelled text: each text's ids cut to seq_len (ending in EOS) and its class id (the place of its
    label in stats.classes, which is in class_order). Validation counts no characters: its figures are
    accuracy and F1, not bits per character."""
    label_ids = {label: i for i, label in enumerate(stats.classes)}
    files, lengths = {}, []
    for name, docs in splits.items():
        rows = _map(docs, classify_batch, config, work / f"{name}.arrow", f"{fingerprint}-{name}", LABEL_FEATURES,
                    dict(tokenizer=tokenizer, seq_len=config.seq_len, label_ids=label_ids), config.batch_size)
        files[name] = [Path(c["filename"]).name for c in rows.cache_files] or [f"{name}.arrow"]
        full = rows.data.column("length").to_numpy() if len(rows) else np.zeros(0, dtype=np.int64)
        lengths.append(full)
        stats.truncated += int((full > config.seq_len - 1).sum())
    return files, np.concatenate(lengths), stats.characters, 0, 0


def _map(docs: Dataset, fn, config: DataConfig, path: Path, fingerprint: str, features: Features,
         kwargs: dict, batch_size: int) -> Dataset:
    """A batched `Dataset.map` writing to `path` (an empty split still gets a file)."""
    if len(docs) == 0:
        with pa.ipc.new_stream(str(path), features.arrow_schema):
            pass
        return Dataset.from_file(str(path))
    workers = config.num_proc if len(docs) >= 4 * batch_size else 1  # a process must have work to pay off
    split = path.stem.split("-")[0]
    return docs.map(fn, batched=True, batch_size=batch_size, num_proc=workers if workers > 1 else None,
                    remove_columns=docs.column_names, fn_kwargs=kwargs, features=features,
                    cache_file_name=str(path), new_fingerprint=fingerprint, desc=f"tokenizing {split}")


def _column_sum(dataset: Dataset, column: str) -> int:
    if len(dataset) == 0:
        return 0
    return int(sum(pc.sum(t.column(column)).as_py() or 0
                   for t in dataset.with_format("arrow").iter(batch_size=65536)))


def _set_tokens(stats: Stats, lengths: np.ndarray, characters: int) -> None:
    """Token counts; chars/token over the documents that were tokenized (`characters` of them)."""
    stats.tokens = int(lengths.sum())
    stats.chars_per_token = characters / max(stats.tokens, 1)
    stats.token_histogram = Histogram.of(lengths, "tokens")


def _load(folder: Path, meta: dict, docs: Documents, from_cache: bool) -> PreparedCorpus:
    def split(name: str) -> Dataset:
        parts = [Dataset.from_file(str(folder / f)) for f in meta["files"][name]]
        ds = parts[0] if len(parts) == 1 else concatenate_datasets(parts)
        return ds.select_columns(COLUMNS.get(meta["stats"]["kind"], ROW_COLUMNS))

    stats = Stats.from_dict(meta["stats"])
    stats.files, stats.skipped = docs.stats.files, docs.stats.skipped
    stats.warnings = docs.stats.warnings + meta["warnings"]
    return PreparedCorpus(train=split("train"), validation=split("validation"), kind=stats.kind, stats=stats,
                          val_characters=meta["val_characters"], val_tokens=meta["val_tokens"],
                          fingerprint=folder.name, path=folder, seq_len=meta["seq_len"], from_cache=from_cache,
                          classes=list(stats.classes) if stats.kind == "labelled" else [])
