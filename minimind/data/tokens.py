"""Documents to token rows: plain text packed into blocks, conversations and preference pairs
rendered and masked, prompts rendered as chat feeds them to the model.

Functions here are handed to `Dataset.map` (so they are module-level and
picklable for worker processes) or stream Arrow batches; none keeps state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset

from ..chat_format import encode_chat

IGNORE = -100  # label of a token the loss skips
ROW_SCHEMA = pa.schema([("input_ids", pa.list_(pa.int32())), ("labels", pa.list_(pa.int32()))])
PAIR_COLUMNS = ("chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels")  # preference rows
PROMPT_COLUMNS = ("prompt_ids", "prompt", "params")  # prompt rows: rendered ids, last user text, JSON params
PROMPT_ROOM = 16  # tokens a prompt must leave free in seq_len for the answer; a longer prompt is dropped
PACK_BATCH = 4096  # documents read at a time while packing


LONG_TEXT = 1 << 16   # characters: a longer document is tokenized piece by piece, so memory stays bounded
PIECES_AT_ONCE = 4    # pieces of a long document encoded per call


def _encode_batch(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens added; the Rust batch encoder when there is one."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and backend.truncation is None and backend.padding is None:
        return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def pieces(tokenizer, text: str, size: int = LONG_TEXT) -> Iterator[str]:
    """`text` as consecutive pieces of at most `size` characters, cut where the tokenizer's
    pre-tokenizer splits words anyway, so the pieces' ids joined are the ids of the whole text.

    One "word" longer than `size` (a line of CJK text with no punctuation, say) is cut
    inside; there a token or two at each cut may differ from tokenizing it whole, which
    would need memory in proportion to the word (gigabytes for a 20 MB line).
    """
    if len(text) <= size:
        yield text
        return
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pre = getattr(backend, "pre_tokenizer", None)
    specials = [s for s in getattr(tokenizer, "all_special_tokens", []) if s]
    start = 0
    while len(text) - start > size:
        cut = _cut(pre, text[start:start + size], specials)
        yield text[start:start + cut]
        start += cut
    yield text[start:]


def _cut(pre, window: str, specials: list[str]) -> int:
    """Where to end a piece inside `window`: the start of its second-to-last pre-token (the last
    one may continue past the window), moved before any special token that spans the cut."""
    cut = len(window)
    if pre is not None:
        spans = pre.pre_tokenize_str(window)
        if len(spans) >= 3 and spans[-2][1][0] > 0:
            cut = spans[-2][1][0]
    for special in specials:
        begin = window.find(special, max(0, cut - len(special) + 1), cut + len(special) - 1)
        if 0 < begin < cut:
            cut = begin
    return cut


def _long_text_ids(tokenizer, text: str) -> Iterator[list[int]]:
    """Ids of a long text, a few pieces at a time."""
    group = []
    for piece in pieces(tokenizer, text):
        group.append(piece)
        if len(group) == PIECES_AT_ONCE:
            yield from _encode_batch(tokenizer, group)
            group = []
    if group:
        yield from _encode_batch(tokenizer, group)


def _per_text(tokenizer, texts: list[str], combine) -> list:
    """`combine(ids of each piece)` for every text: short texts encoded in one batch, a long one
    piece by piece (see `pieces`), so its ids never exist whole unless `combine` joins them."""
    out: list = [None] * len(texts)
    short = [i for i, t in enumerate(texts) if len(t) <= LONG_TEXT]
    for i, ids in zip(short, _encode_batch(tokenizer, [texts[i] for i in short])):
        out[i] = combine([ids])
    for i, text in enumerate(texts):
        if len(text) > LONG_TEXT:
            out[i] = combine(_long_text_ids(tokenizer, text))
    return out


def encode(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, no special tokens added (long texts piece by piece, see `pieces`)."""
    return _per_text(tokenizer, texts, lambda parts: [t for ids in parts for t in ids])


def count_tokens(tokenizer, texts: list[str]) -> list[int]:
    """Tokens of each text, as `encode` would give them, without holding a long text's ids."""
    return _per_text(tokenizer, texts, lambda parts: sum(len(ids) for ids in parts))


def tokenize_batch(batch: dict, tokenizer, eos: int) -> dict:
    """`Dataset.map` step for plain text: each document's ids followed by EOS."""
    return {"input_ids": [ids + [eos] for ids in encode(tokenizer, batch["text"])]}


def render(tokenizer, conversations: list[list[dict]]) -> tuple[list[list[int]], list[list[int]]]:
    """(ids, assistant mask) of each conversation, rendered by the tokenizer's chat template. A
    template that marks the assistant's tokens ({% generation %}, ours) says which they are; for one
    that does not (an imported model's), see `_render_by_prefix`."""
    if not has_generation_markers(tokenizer.chat_template):
        rendered = [_render_by_prefix(tokenizer, messages) for messages in conversations]
        return [ids for ids, _ in rendered], [mask for _, mask in rendered]
    out = tokenizer.apply_chat_template(conversations, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    return out["input_ids"], out["assistant_masks"]


def has_generation_markers(template) -> bool:
    return isinstance(template, str) and "generation %}" in template and "endgeneration" in template


def _render_by_prefix(tokenizer, messages: list[dict]) -> tuple[list[int], list[int]]:
    """(ids, assistant mask) of a conversation under a template without generation markers: an
    assistant turn is the text the conversation gains when that turn is added to the prompt that
    opens it (the template with the assistant's turn opened), its trailing whitespace left out;
    its tokens are those that start inside that text. A template that rewrites earlier turns (so
    the prompt is not a prefix of the whole) marks that turn's content where it is found."""
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans, cursor = [], 0
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = tokenizer.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True) if i else ""
        through = tokenizer.apply_chat_template(messages[:i + 1], tokenize=False)
        if text.startswith(through) and through.startswith(before):
            start, end = len(before), len(before) + len(through[len(before):].rstrip())
        else:
            start = text.find(message["content"], cursor)
            end = start + len(message["content"])
        if start >= cursor:
            spans.append((start, end))
            cursor = end
    mask = [int(any(a <= s < b for a, b in spans)) for s, _ in encoded["offset_mapping"]]
    return encoded["input_ids"], mask


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


def render_pairs(tokenizer, batch: dict) -> tuple[list, list, list, list]:
    """(chosen ids, chosen answer span, rejected ids, rejected answer span) of each preference pair.

    Each side is rendered exactly as chat SFT renders a conversation: the prompt's
    messages and the answer as one assistant message. The span (start, end) is the
    last run of assistant tokens, i.e. the answer and its end-of-turn token, so an
    assistant turn inside a multi-turn prompt is never taken for the answer.
    """
    sides = [[prompt + [{"role": "assistant", "content": answer}] for prompt, answer in zip(batch["prompt"],
                                                                                            batch[name])]
             for name in ("chosen", "rejected")]
    n = len(batch["prompt"])
    ids, masks = render(tokenizer, sides[0] + sides[1])
    spans = [answer_span(mask) for mask in masks]
    return ids[:n], spans[:n], ids[n:], spans[n:]


def answer_span(mask: list[int]) -> tuple[int, int]:
    """(start, end) of the last run of set positions in an assistant mask; (0, 0) when none is set."""
    end = len(mask)
    while end and not mask[end - 1]:
        end -= 1
    start = end
    while start and mask[start - 1]:
        start -= 1
    return start, end


def render_pairs_batch(batch: dict, tokenizer, seq_len: int) -> dict:
    """`Dataset.map` step for preference pairs: both sides' ids and labels (-100 except the answer), cut to seq_len.

    A pair where either side keeps no answer token after the cut is dropped (it
    compares nothing). `length` is the pair's uncut tokens (prompt once, both
    answers), `longest` its longer side uncut (to count truncations), `chars` the
    characters of prompt and both answers, `target_chars` those of the chosen answer.
    """
    rows: dict[str, list] = {name: [] for name in PAIR_COLUMNS + ("length", "longest", "chars", "target_chars")}
    chosen_ids, chosen_spans, rejected_ids, rejected_spans = render_pairs(tokenizer, batch)
    for i, (c_ids, c_span, r_ids, r_span) in enumerate(zip(chosen_ids, chosen_spans, rejected_ids, rejected_spans)):
        if not (c_span[0] < min(c_span[1], seq_len) and r_span[0] < min(r_span[1], seq_len)):
            continue  # a side keeps no answer token
        for side, ids, (start, end) in (("chosen", c_ids, c_span), ("rejected", r_ids, r_span)):
            cut = ids[:seq_len]
            rows[f"{side}_input_ids"].append(cut)
            rows[f"{side}_labels"].append([t if start <= j < end else IGNORE for j, t in enumerate(cut)])
        rows["length"].append(len(c_ids) + len(r_ids) - c_span[0])
        rows["longest"].append(max(len(c_ids), len(r_ids)))
        rows["chars"].append(sum(len(m["content"]) for m in batch["prompt"][i]) + len(batch["chosen"][i])
                             + len(batch["rejected"][i]))
        rows["target_chars"].append(len(batch["chosen"][i]))
    return rows


def pair_token_lengths(dataset: Dataset, tokenizer, batch_size: int = 1000) -> dict[str, np.ndarray]:
    """Tokens of each preference pair ("pair": prompt once + both answers) and of its parts ("prompt": the
    rendered prompt, "chosen" / "rejected": the answer's labelled tokens), nothing written."""
    out: dict[str, list[int]] = {"pair": [], "prompt": [], "chosen": [], "rejected": []}
    for batch in dataset.iter(batch_size=batch_size):
        chosen_ids, chosen_spans, rejected_ids, rejected_spans = render_pairs(tokenizer, batch)
        for c_ids, (c0, c1), r_ids, (r0, r1) in zip(chosen_ids, chosen_spans, rejected_ids, rejected_spans):
            out["pair"].append(len(c_ids) + len(r_ids) - c0)
            out["prompt"].append(c0)
            out["chosen"].append(c1 - c0)
            out["rejected"].append(r1 - r0)
    return {name: np.asarray(lengths, dtype=np.int64) for name, lengths in out.items()}


def render_prompts(tokenizer, prompts: list[list[dict]]) -> list[list[int]]:
    """Ids of each prompt exactly as chat feeds it to the model: minimind.chat_format.encode_chat, the
    chat template with the assistant's turn opened (so what GRPO samples from is what chat answers)."""
    return [encode_chat(tokenizer, messages) for messages in prompts]


def render_prompts_batch(batch: dict, tokenizer, seq_len: int) -> dict:
    """`Dataset.map` step for prompts: rendered ids, the last user message's text and the params (JSON
    text, passed through). A prompt longer than seq_len - PROMPT_ROOM tokens is dropped (no room left to
    answer); `length` keeps its tokens, `chars` the characters of all its messages."""
    rows: dict[str, list] = {name: [] for name in PROMPT_COLUMNS + ("length", "chars")}
    for ids, messages, params in zip(render_prompts(tokenizer, batch["prompt"]), batch["prompt"], batch["params"]):
        if len(ids) > seq_len - PROMPT_ROOM:
            continue
        rows["prompt_ids"].append(ids)
        rows["prompt"].append(next(m["content"] for m in reversed(messages) if m["role"] == "user"))
        rows["params"].append(params)
        rows["length"].append(len(ids))
        rows["chars"].append(sum(len(m["content"]) for m in messages))
    return rows


def classify_ids(tokenizer, texts: list[str], seq_len: int) -> list[list[int]]:
    """Token ids of each text as a classifier reads it: its first seq_len - 1 tokens, then EOS (the
    last token, whose hidden state the classifier pools, is always the same marker of the end). The
    trainer's rows and `minimind.classifier.predict` both encode with this."""
    return _classifier_rows(tokenizer, encode(tokenizer, texts), seq_len)


def _classifier_rows(tokenizer, encoded: list[list[int]], seq_len: int) -> list[list[int]]:
    eos = tokenizer.eos_token_id
    return [ids[:seq_len - 1] + [eos] for ids in encoded]


def classify_batch(batch: dict, tokenizer, seq_len: int, label_ids: dict) -> dict:
    """`Dataset.map` step for labelled text: ids (see `classify_ids`), the class id, and `length`, the
    text's tokens uncut (to count truncations). Each text is encoded once for both."""
    encoded = encode(tokenizer, batch["text"])
    return {"input_ids": _classifier_rows(tokenizer, encoded, seq_len),
            "label": [label_ids[label] for label in batch["label"]], "length": [len(ids) for ids in encoded]}


def token_lengths(dataset: Dataset, kind: str, tokenizer, batch_size: int = 1000) -> np.ndarray:
    """Tokens per document (plain text: without EOS; chat: the rendered conversation; preference: the
    pair, see `pair_token_lengths`; prompts: as chat renders them, see `render_prompts`), nothing written."""
    if kind == "preference":
        return pair_token_lengths(dataset, tokenizer, batch_size)["pair"]
    lengths = []
    for batch in dataset.iter(batch_size=batch_size):
        if kind == "prompts":
            lengths += [len(ids) for ids in render_prompts(tokenizer, batch["prompt"])]
        elif kind in ("text", "labelled"):
            lengths += count_tokens(tokenizer, batch["text"])
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
