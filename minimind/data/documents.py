"""From files to documents: every record checked, normalised and written once to Arrow.

The result is a memory-mapped `datasets.Dataset` with one row per document
("text", "messages", "prompt" + "chosen" + "rejected", or "prompt" + "params" (a JSON
object as text), plus "chars"), cached under a key of the file contents
and the reading settings. `inspect` builds it, `prepare` reuses it, and a 1 GB
corpus streams through it in batches without ever being held in memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from datasets import Dataset

from ..errors import CorpusError
from .cache import key, new_workdir, publish, ready
from .config import DataConfig, cache_root
from .files import CorpusFile, open_file
from .labels import MAX_CLASSES, check_classes, class_order, imbalance_warning, too_many_classes
from .kinds import KIND_NAMES, BadRecord, Normalizer, characters, doc_texts, part_characters, prompt_document, shape
from .readers import read_records, read_text
from .stats import FileStats, Histogram, PartLengths, Stats, sample_of
from .validate import Problems

WRITE_BATCH = 1000  # documents per Arrow record batch
MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
SCHEMAS = {  # by the normal form's shape (kinds.shape)
    "text": pa.schema([("text", pa.string()), ("chars", pa.int64())]),
    "messages": pa.schema([("messages", MESSAGES), ("chars", pa.int64())]),
    "preference": pa.schema([("prompt", MESSAGES), ("chosen", pa.string()), ("rejected", pa.string()),
                             ("chars", pa.int64()), ("prompt_chars", pa.int64()), ("chosen_chars", pa.int64()),
                             ("rejected_chars", pa.int64())]),
    "prompts": pa.schema([("prompt", MESSAGES), ("params", pa.string()), ("chars", pa.int64())]),
    "labelled": pa.schema([("text", pa.string()), ("label", pa.string()), ("chars", pa.int64())]),
}
PARTS = ("prompt", "chosen", "rejected")  # the parts of a preference pair, measured separately


@dataclass
class Documents:
    """A checked corpus: its documents as Arrow, its kind and what reading it found."""

    dataset: Dataset        # one row per document: "text" (plain), "messages" (chat/instruction),
                            # "prompt" + "chosen" + "rejected" (preference) or "prompt" + "params" (prompts,
                            # params a JSON object as text), and "chars"
    kind: str               # text, chat, instruction, preference or prompts
    fingerprint: str        # cache key of the documents (file contents + reading settings)
    stats: Stats            # counts, lengths, samples, skipped records (no tokens yet)
    files: list[CorpusFile] = field(default_factory=list)


@dataclass
class _Tally:
    """What a pass over the files counted on the way."""

    files: list[FileStats] = field(default_factory=list)
    kind: str | None = None
    empty: int = 0


def check_files(files, config: DataConfig) -> list[CorpusFile]:
    """Open and scan every file (paths, size, encoding); CorpusError for the first unusable one."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    if not files:
        raise CorpusError("no files given; expected at least one corpus file")
    return [open_file(f, config) for f in files]


def iter_documents(infos: list[CorpusFile], config: DataConfig, problems: Problems,
                   tally: _Tally | None = None, one_kind: bool = True) -> Iterator[tuple[str, dict]]:
    """(position, normal-form document) of every file in turn; `one_kind` holds the corpus to one kind."""
    tally = tally if tally is not None else _Tally()
    first_file = None
    total = 0
    for info in infos:
        stats = FileStats(info.name, info.format, info.encoding, "", 0, 0, info.size)
        tally.files.append(stats)
        for position, doc, kind in _file_documents(info, config, problems):
            if stats.kind == "":
                stats.kind = kind
                if tally.kind is None:
                    tally.kind, first_file = kind, info.name
                elif kind != tally.kind and one_kind:
                    raise CorpusError(f"this file holds {KIND_NAMES[kind]} records but {first_file} holds "
                                      f"{KIND_NAMES[tally.kind]}; expected one kind per corpus (prepare them "
                                      "separately, or set the kind)", info.name, position)
            if doc is None:
                tally.empty += 1
                continue
            stats.documents += 1
            size = characters(doc)
            stats.characters += size
            total += size
            if config.max_chars is not None and total > config.max_chars:
                raise CorpusError(f"the corpus holds more than {config.max_chars:,} characters once read, the limit "
                                  "for one corpus here (max_chars; on the page MINIMIND_MAX_CORPUS_CHARS); use fewer "
                                  "or smaller files", info.name, position)
            yield position, doc
        if stats.documents == 0:
            raise CorpusError("no usable documents in this file (every record was empty or skipped); "
                              "expected at least one", info.name, "whole file")


def _file_documents(info: CorpusFile, config: DataConfig, problems: Problems) -> Iterator[tuple[str, dict | None, str]]:
    if info.format == "text":
        if config.kind == "prompts":  # one prompt a line, whatever config.split says
            for position, text in read_text(info, dataclasses.replace(config, split="line")):
                yield position, prompt_document(text), "prompts"
            return
        if config.kind not in ("auto", "text"):
            raise CorpusError(f"a {info.suffix} file holds plain text; kind {config.kind!r} needs records "
                              "(.jsonl, .json, .csv or .parquet; kind 'prompts' also reads one prompt a line)",
                              info.name, "line 1")
        for position, text in read_text(info, config):
            yield position, {"text": text}, "text"
        return
    normalize = Normalizer(config.kind, config.text_field, config.label_field)
    for position, record in read_records(info, config, problems):
        try:
            doc = normalize(record)
        except BadRecord as err:
            problems.bad(info.name, position, str(err))
            continue
        yield position, doc, normalize.kind


def iter_texts(files, text_field: str | None = None, kind: str = "auto",
               config: DataConfig | None = None) -> Iterator[str]:
    """Texts of a corpus for tokenizer training: plain documents, or every message of chat/instruction records.

    Reads straight from the files (nothing is cached) with the same checks as prepare;
    the files themselves (paths, sizes, encodings) are checked before this returns.
    """
    base = config.as_dict() if config else {}
    config = DataConfig(**{**base, "text_field": text_field or base.get("text_field"), "kind": kind})
    infos = check_files(files, config)
    problems = Problems(config.strict, config.max_skipped)
    docs = iter_documents(infos, config, problems, one_kind=False)  # a tokenizer may learn from all kinds
    return (text for _, doc in docs for text in doc_texts(doc))


def read_documents(files, config: DataConfig) -> Documents:
    """The corpus as checked, normalised Arrow documents, from the cache when the files are unchanged."""
    config.check()
    infos = check_files(files, config)
    fingerprint = key("documents", [(f.digest, f.format, f.encoding) for f in infos], config.kind,
                      config.text_field, config.label_field, config.split, config.strict, config.max_skipped, config.max_document_chars,
                      config.samples, config.max_chars, config.section_chars if config.split == "section" else None)
    folder = cache_root(config) / "documents" / fingerprint
    meta = ready(folder)
    if meta is None:
        work = new_workdir(folder)
        try:
            meta = _build(infos, config, work)
            publish(work, folder, meta)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    dataset = Dataset.from_file(str(folder / "documents.arrow"))
    stats = Stats.from_dict(meta["stats"])
    _rename(stats, meta["names"], infos)
    unbalanced = imbalance_warning(stats.classes)
    if unbalanced:
        stats.warnings.append(unbalanced)
    return Documents(dataset, stats.kind, fingerprint, stats, infos)


def _build(infos: list[CorpusFile], config: DataConfig, work: Path) -> dict:
    problems = Problems(config.strict, config.max_skipped)
    tally = _Tally()
    path = work / "documents.arrow"
    writer, batch, samples, asks = None, [], [], {}
    classes, first_seen = {}, {}  # labelled: documents per class, where each class was first seen
    try:
        for position, doc in iter_documents(infos, config, problems, tally):
            if "label" in doc:
                _count_label(doc["label"], classes, first_seen, tally.files[-1].name, position)
            if writer is None:
                schema = SCHEMAS[shape(doc)]
                writer = pa.ipc.new_stream(str(path), schema)
            row = {**doc, "chars": characters(doc)}
            if "chosen" in doc:
                row.update({f"{part}_chars": n for part, n in part_characters(doc).items()})
            if "params" in doc:
                row["params"] = json.dumps(doc["params"], ensure_ascii=False)
                for name in doc["params"]:
                    asks[name] = asks.get(name, 0) + 1
            batch.append(row)
            if len(samples) < config.samples:
                samples.append(sample_of(doc))
            if len(batch) >= WRITE_BATCH:
                writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
                batch = []
        if batch:
            writer.write_batch(pa.RecordBatch.from_pylist(batch, schema=schema))
    finally:
        if writer is not None:
            writer.close()
    if classes:
        check_classes(classes, first_seen)
    table = Dataset.from_file(str(path)).data
    lengths = table.column("chars").to_numpy()
    parts = {part: PartLengths.of(table.column(f"{part}_chars").to_numpy(), "characters")
             for part in PARTS} if "prompt_chars" in table.column_names else {}
    stats = Stats(kind=tally.kind, documents=int(len(lengths)), characters=int(lengths.sum()),
                  length_histogram=Histogram.of(lengths, "characters"), samples=samples,
                  skipped_count=problems.count, skipped=problems.examples, empty=tally.empty, files=tally.files,
                  parts=parts, params=asks if tally.kind == "prompts" else {},
                  classes={label: classes[label] for label in class_order(classes)})
    return {"stats": stats.to_dict(), "names": [f.name for f in infos]}


def _count_label(label: str, classes: dict, first_seen: dict, file: str, position: str) -> None:
    """Count a labelled document's class; refuse a corpus with more classes than any label column has."""
    if label not in classes:
        if len(classes) >= MAX_CLASSES:
            raise too_many_classes(label, file, position)
        classes[label], first_seen[label] = 0, (file, position)
    classes[label] += 1


def _rename(stats: Stats, names: list[str], infos: list[CorpusFile]) -> None:
    """Show the names the files have now (a cached corpus may have been read under other names)."""
    current = dict(zip(names, (f.name for f in infos)))
    for f, info in zip(stats.files, infos):
        f.name = info.name
    for s in stats.skipped:
        s.file = current.get(s.file, s.file)
    stats.warnings = [w for info in infos for w in info.warnings]
