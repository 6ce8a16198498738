"""Corpus statistics for the Corpus tab and `data inspect`: counts, lengths, samples, problems.

Plain dataclasses that round-trip through JSON, so a cached corpus brings its
stats back without reading anything again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .validate import Skipped

HISTOGRAM_BINS = 20
SAMPLE_CHARS = 300  # a sample is cut to this many characters


@dataclass
class Histogram:
    """Counts of document lengths in equal-width bins; the last bin also holds longer outliers."""

    unit: str                                          # "characters" or "tokens"
    edges: list[float] = field(default_factory=list)   # bin edges, len(counts) + 1 of them
    counts: list[int] = field(default_factory=list)    # documents per bin

    @classmethod
    def of(cls, lengths: np.ndarray, unit: str, bins: int = HISTOGRAM_BINS) -> Histogram:
        if len(lengths) == 0:
            return cls(unit)
        top = max(float(np.percentile(lengths, 99)), 1.0)
        counts, edges = np.histogram(np.minimum(lengths, top), bins=bins, range=(0.0, top))
        return cls(unit, [round(float(e), 2) for e in edges], [int(c) for c in counts])


@dataclass
class FileStats:
    """One file of the corpus."""

    name: str          # as given (safe to print)
    format: str        # text, jsonl, json, csv or parquet
    encoding: str      # codec it was decoded with ("" for parquet)
    kind: str          # text, chat or instruction
    documents: int     # documents (records, paragraphs or lines) kept
    characters: int    # characters of those documents
    bytes: int         # file size


@dataclass
class Stats:
    """What a corpus holds and what was left out, for people and for the trainer's logs."""

    kind: str                                   # text, chat or instruction
    documents: int                              # documents kept (all files)
    characters: int                             # characters of those documents (message contents for chat)
    tokens: int | None = None                   # tokens of those documents (None when not tokenized)
    chars_per_token: float | None = None        # characters / tokens
    length_histogram: Histogram | None = None   # document lengths in characters
    token_histogram: Histogram | None = None    # document lengths in tokens (when tokenized)
    samples: list[str] = field(default_factory=list)      # the first few documents, shortened
    skipped_count: int = 0                      # bad records left out (lenient mode)
    skipped: list[Skipped] = field(default_factory=list)  # the first of them, with positions
    empty: int = 0                              # empty documents dropped (blank text fields)
    truncated: int = 0                          # chat/instruction examples cut to seq_len
    dropped: int = 0                            # examples with no assistant token left after the cut
    files: list[FileStats] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)     # decodings and other things worth knowing
    train_documents: int | None = None          # documents in the training split (after prepare)
    val_documents: int | None = None            # documents in the validation split (after prepare)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Stats:
        d = dict(d)
        for key in ("length_histogram", "token_histogram"):
            d[key] = Histogram(**d[key]) if d.get(key) else None
        d["skipped"] = [Skipped(**s) for s in d.get("skipped", [])]
        d["files"] = [FileStats(**f) for f in d.get("files", [])]
        return cls(**d)

    def summary(self) -> str:
        """A few lines for a terminal."""
        lines = [f"kind: {self.kind}",
                 f"documents: {self.documents:,}   characters: {self.characters:,}"
                 + (f"   tokens: {self.tokens:,}   chars/token: {self.chars_per_token:.2f}"
                    if self.tokens is not None else "")]
        if self.train_documents is not None:
            lines.append(f"split: {self.train_documents:,} train / {self.val_documents:,} validation documents")
        for f in self.files:
            lines.append(f"  {f.name}: {f.format}, {f.encoding or 'binary'}, {f.kind}, "
                         f"{f.documents:,} documents, {f.characters:,} characters, {f.bytes:,} bytes")
        if self.length_histogram and self.length_histogram.counts:
            h = self.length_histogram
            lines.append(f"document length: up to {h.edges[-1]:,.0f} {h.unit} (99th percentile), "
                         f"histogram {h.counts}")
        if self.empty:
            lines.append(f"empty documents dropped: {self.empty:,}")
        if self.truncated or self.dropped:
            lines.append(f"examples truncated to seq_len: {self.truncated:,} (dropped, nothing left to learn: "
                         f"{self.dropped:,})")
        if self.skipped_count:
            lines.append(f"skipped {self.skipped_count:,} bad records; first ones:")
            lines += [f"  {s}" for s in self.skipped]
        lines += [f"warning: {w}" for w in self.warnings]
        for i, s in enumerate(self.samples, 1):
            lines.append(f"sample {i}: {s!r}")
        return "\n".join(lines)


def sample_of(doc: dict) -> str:
    """A document as one short line of text (chat turns as 'role: content')."""
    if "text" in doc:
        text = doc["text"]
    else:
        text = "\n".join(f"{m['role']}: {m['content']}" for m in doc["messages"])
    return text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS] + "…"
