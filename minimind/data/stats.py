"""Corpus statistics for the Corpus tab and `data inspect`: counts, lengths, samples, problems.

Plain dataclasses that round-trip through JSON, so a cached corpus brings its
stats back without reading anything again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .validate import Skipped

HISTOGRAM_BINS = 20
SAMPLE_CHARS = 300  # a sample is cut to this many characters (each part of a preference pair to a third)
UNITS = {"preference": "pairs", "prompts": "prompts"}  # what a document of a kind is called (default "documents")


def unit(kind: str | None) -> str:
    """What one document of `kind` is called in counts: pairs, prompts or documents."""
    return UNITS.get(kind or "", "documents")


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
class PartLengths:
    """Lengths of one part of every preference pair (its prompt, chosen or rejected answer)."""

    unit: str              # "characters" or "tokens"
    mean: float            # mean length
    max: int               # longest
    histogram: Histogram   # distribution

    @classmethod
    def of(cls, lengths: np.ndarray, unit: str) -> PartLengths:
        if len(lengths) == 0:
            return cls(unit, 0.0, 0, Histogram(unit))
        return cls(unit, round(float(np.mean(lengths)), 2), int(np.max(lengths)), Histogram.of(lengths, unit))

    @classmethod
    def from_dict(cls, d: dict) -> PartLengths:
        return cls(**{**d, "histogram": Histogram(**d["histogram"])})

    def __str__(self) -> str:
        return f"mean {self.mean:,.1f} {self.unit}, longest {self.max:,}"


@dataclass
class FileStats:
    """One file of the corpus."""

    name: str          # as given (safe to print)
    format: str        # text, jsonl, json, csv or parquet
    encoding: str      # codec it was decoded with ("" for parquet)
    kind: str          # text, chat, instruction, preference or prompts
    documents: int     # documents (records, paragraphs or lines; pairs for preference, prompts) kept
    characters: int    # characters of those documents
    bytes: int         # file size


@dataclass
class Stats:
    """What a corpus holds and what was left out, for people and for the trainer's logs."""

    kind: str                                   # text, chat, instruction, preference, prompts or labelled
    documents: int                              # documents kept (all files); pairs for preference, prompts
    characters: int                             # characters of those documents (message contents for chat;
                                                # prompt + chosen + rejected for preference)
    tokens: int | None = None                   # tokens of those documents (None when not tokenized; a pair
                                                # counts its rendered prompt once and both answers; a prompt
                                                # as chat renders it, the assistant's turn opened)
    chars_per_token: float | None = None        # characters / tokens
    length_histogram: Histogram | None = None   # document lengths in characters
    token_histogram: Histogram | None = None    # document lengths in tokens (when tokenized)
    samples: list[str] = field(default_factory=list)      # the first few documents, shortened
    skipped_count: int = 0                      # bad records left out (lenient mode)
    skipped: list[Skipped] = field(default_factory=list)  # the first of them, with positions
    empty: int = 0                              # empty documents dropped (blank text fields)
    truncated: int = 0                          # chat/instruction examples (preference pairs) cut to seq_len
    dropped: int = 0                            # examples with no assistant token left after the cut
                                                # (pairs where either answer keeps none; prompts longer
                                                # than seq_len - PROMPT_ROOM tokens)
    files: list[FileStats] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)     # decodings and other things worth knowing
    train_documents: int | None = None          # documents in the training split (after prepare)
    val_documents: int | None = None            # documents in the validation split (after prepare)
    parts: dict[str, PartLengths] = field(default_factory=dict)        # preference: prompt / chosen / rejected
                                                                       # lengths in characters
    part_tokens: dict[str, PartLengths] = field(default_factory=dict)  # the same in tokens (when tokenized;
                                                                       # answers: their labelled tokens)
    params: dict[str, int] = field(default_factory=dict)  # prompts: how many carry each reward field (form, ...)
    classes: dict[str, int] = field(default_factory=dict)  # labelled: documents per class, in class-id order

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Stats:
        d = dict(d)
        for key in ("length_histogram", "token_histogram"):
            d[key] = Histogram(**d[key]) if d.get(key) else None
        d["skipped"] = [Skipped(**s) for s in d.get("skipped", [])]
        d["files"] = [FileStats(**f) for f in d.get("files", [])]
        for key in ("parts", "part_tokens"):
            d[key] = {name: PartLengths.from_dict(p) for name, p in d.get(key, {}).items()}
        return cls(**d)

    def summary(self) -> str:
        """A few lines for a terminal."""
        unit_ = unit(self.kind)
        lines = [f"kind: {self.kind}",
                 f"{unit_}: {self.documents:,}   characters: {self.characters:,}"
                 + (f"   tokens: {self.tokens:,}   chars/token: {self.chars_per_token:.2f}"
                    if self.tokens is not None else "")]
        if self.train_documents is not None:
            lines.append(f"split: {self.train_documents:,} train / {self.val_documents:,} validation {unit_}")
        for f in self.files:
            lines.append(f"  {f.name}: {f.format}, {f.encoding or 'binary'}, {f.kind}, "
                         f"{f.documents:,} {unit_}, {f.characters:,} characters, {f.bytes:,} bytes")
        for name, part in self.parts.items():
            tokens = self.part_tokens.get(name)
            lines.append(f"{name}: {part}" + (f"; {tokens}" if tokens else ""))
        if self.kind == "prompts":
            asks = ", ".join(f"{name} {n:,}" for name, n in self.params.items()) or "none"
            lines.append(f"prompts with reward fields: {asks}")
        if self.classes:
            lines.append(f"classes ({len(self.classes):,}): "
                         + ", ".join(f"{label} {n:,}" for label, n in list(self.classes.items())[:50])
                         + (", ..." if len(self.classes) > 50 else ""))
        if self.length_histogram and self.length_histogram.counts:
            h = self.length_histogram
            lines.append(f"document length: up to {h.edges[-1]:,.0f} {h.unit} (99th percentile), "
                         f"histogram {h.counts}")
        if self.empty:
            lines.append(f"empty documents dropped: {self.empty:,}")
        if self.kind == "prompts" and self.dropped:
            lines.append(f"prompts dropped, too long to leave room for an answer in seq_len: {self.dropped:,}")
        elif self.truncated or self.dropped:
            lines.append(f"{'pairs' if self.kind == 'preference' else 'examples'} truncated to seq_len: "
                         f"{self.truncated:,} (dropped, nothing left to learn: {self.dropped:,})")
        if self.skipped_count:
            lines.append(f"skipped {self.skipped_count:,} bad records; first ones:")
            lines += [f"  {s}" for s in self.skipped]
        lines += [f"warning: {w}" for w in self.warnings]
        for i, s in enumerate(self.samples, 1):
            if self.kind in ("preference", "prompts"):
                lines.append(f"sample {i}:")
                lines += [f"  {name}: {text!r}" for name, text in pair_sample(s).items()]
            else:
                lines.append(f"sample {i}: {s!r}")
        return "\n".join(lines)


def sample_of(doc: dict) -> str:
    """A document as one short text: chat turns as 'role: content' lines; a preference pair as exactly
    three lines 'prompt: …', 'chosen: …', 'rejected: …' (line breaks inside a part shown as ' / '); a
    prompt as 'prompt: …' and a line per reward field it carries ('form: 五言绝句')."""
    if "prompt" in doc:
        prompt = doc["prompt"]
        asked = prompt[0]["content"] if len(prompt) == 1 else " ".join(f"[{m['role']}] {m['content']}" for m in prompt)
        if "params" in doc:
            parts = {"prompt": asked, **{name: value if isinstance(value, str) else " | ".join(value)
                                         for name, value in doc["params"].items()}}
        else:
            parts = {"prompt": asked, "chosen": doc["chosen"], "rejected": doc["rejected"]}
        return "\n".join(f"{name}: {_cut(' / '.join(text.splitlines()), SAMPLE_CHARS // 3)}"
                         for name, text in parts.items())
    if "label" in doc:
        return _cut(f"[{doc['label']}] {doc['text']}", SAMPLE_CHARS)
    if "text" in doc:
        text = doc["text"]
    else:
        text = "\n".join(f"{m['role']}: {m['content']}" for m in doc["messages"])
    return _cut(text, SAMPLE_CHARS)


def pair_sample(sample: str) -> dict[str, str]:
    """The parts of a preference pair's sample (prompt, chosen, rejected) or a prompt's (prompt and its
    reward fields), see `sample_of`."""
    return dict(line.partition(": ")[::2] for line in sample.split("\n"))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
