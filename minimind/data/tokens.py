"""Documents to token rows: plain text packed into blocks, conversations rendered and masked.

Functions here are handed to `Dataset.map` (so they are module-level and
picklable for worker processes) or stream Arrow batches; none keeps state.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset

IGNORE = -100  # label of a token the loss skips
ROW_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("labels", pa.list_(pa.int32()))])
PACK_BATCH = 4096  # documents read at a time while packing


def encode(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens added; the Rust batch encoder when there is one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.truncation is None and backend.padding is None:
        return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def tokenize_batch(batch: dict, tokenizer, eos: int) -> dict:
    """`Dataset.map` step for plain text: each document's ids followed by EOS."""
    return {"input_ids": [ids + [eos] for ids in encode(tokenizer, batch["text"])]}


def render(tokenizer, conversations: list[list[dict]]) -> tuple[list[list[int]], list[list[int]]]:
    """(ids, assistant mask) of each conversation, rendered by the tokenizer's chat template."""
    out = tokenizer.apply_chat_template(conversations, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    return out["input_ids"], out["assistant_masks"]


def render_batch(batch: dict, tokenizer, seq_len: int) -> dict:
    """`Dataset.map` step for chat: ids, labels (-100 except assistant tokens), cut to seq_len.

    An example with no assistant token left after the cut is dropped (it teaches
    nothing); `length` keeps the uncut length so truncations can be counted, `chars`
    and `target_chars` the characters of all messages and of the assistant's.
    """
    rows: dict[str, list] = {"input_ids": [], "labels": [], "length": [], "chars": [], "target_chars": []}
    all_ids, masks = render(tokenizer, batch["messages"])
    for ids, mask, messages in zip(all_ids, masks, batch["messages"]):
        labels = [t if m else IGNORE for t, m in zip(ids[:seq_len], mask[:seq_len])]
        if all(label == IGNORE for label in labels):
            continue
        rows["input_ids"].append(ids[:seq_len])
        rows["labels"].append(labels)
        rows["length"].append(len(ids))
        rows["chars"].append(sum(len(m["content"]) for m in messages))
        rows["target_chars"].append(sum(len(m["content"]) for m in messages if m["role"] == "assistant"))
    return rows


def token_lengths(dataset: Dataset, kind: str, tokenizer, batch_size: int = 1000) -> np.ndarray:
    """Tokens per document (plain text: without EOS; chat: the rendered conversation), nothing written."""
    lengths = []
    for batch in dataset.iter(batch_size=batch_size):
        if kind == "text":
            lengths += [len(ids) for ids in encode(tokenizer, batch["text"])]
        else:
            lengths += [len(ids) for ids in render(tokenizer, batch["messages"])[0]]
    return np.asarray(lengths, dtype=np.int64)


def list_lengths(dataset: Dataset, column: str) -> np.ndarray:
    """Length of every list in `column`, read from Arrow without building Python lists."""
    if len(dataset) == 0:
        return np.zeros(0, dtype=np.int64)
    parts = [pc.list_value_length(t.column(column)).to_numpy(zero_copy_only=False)
             for t in dataset.with_format("arrow").iter(batch_size=65536)]
    return np.concatenate(parts).astype(np.int64)


def pack(tokens: Dataset, seq_len: int, pad_id: int, path: Path) -> int:
    """Concatenate every document's ids into rows of exactly seq_len tokens; returns the row count.

    Nothing is dropped: the last, partial row is filled with `pad_id` and those
    positions get label -100, so even a one-poem validation split has a row.
    """
    rows, carry = 0, np.zeros(0, dtype=np.int32)
    with pa.ipc.new_stream(str(path), ROW_SCHEMA) as writer:
        if len(tokens):
            for table in tokens.with_format("arrow").iter(batch_size=PACK_BATCH):
                flat = pc.list_flatten(table.column("input_ids")).to_numpy().astype(np.int32, copy=False)
                stream = np.concatenate([carry, flat])
                full = len(stream) // seq_len * seq_len
                if full:
                    writer.write_batch(_rows(stream[:full], stream[:full], seq_len))
                    rows += full // seq_len
                carry = stream[full:]
        if len(carry):
            pad = seq_len - len(carry)
            ids = np.concatenate([carry, np.full(pad, pad_id, dtype=np.int32)])
            labels = np.concatenate([carry, np.full(pad, IGNORE, dtype=np.int32)])
            writer.write_batch(_rows(ids, labels, seq_len))
            rows += 1
    return rows


def _rows(ids: np.ndarray, labels: np.ndarray, seq_len: int) -> pa.RecordBatch:
    offsets = pa.array(np.arange(0, len(ids) + 1, seq_len, dtype=np.int32))
    return pa.RecordBatch.from_arrays([pa.ListArray.from_arrays(offsets, pa.array(ids)),
                                       pa.ListArray.from_arrays(offsets, pa.array(labels))], schema=ROW_SCHEMA)
