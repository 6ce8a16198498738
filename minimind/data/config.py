"""DataConfig: how a corpus is read, checked and cut into training rows.

One dataclass shared by `inspect_corpus`, `prepare_corpus`, the `data` CLI, the
web app's Corpus tab and a training run (its `data` section, with the trainer's own
defaults), so every face reads a corpus the same way.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import ConfigError

KINDS = ("auto", "text", "chat", "instruction", "preference", "prompts", "labelled")
SPLITS = ("section", "paragraph", "line")


@dataclass
class DataConfig:
    """Reading, validation and preparation settings of one corpus."""

    files: list = field(default_factory=list)  # corpus files (a training run reads these; the functions take them apart)
    kind: str = "auto"                 # "auto" detects it; or force "text", "chat", "instruction", "preference"
                                       # or "prompts" (a .txt file: one prompt a line), or "labelled" (text + label)
    text_field: str | None = None      # record field with plain text (default: "text", else "content"; labelled
                                       # also finds "sentence" and "review")
    label_field: str | None = None     # labelled: record field with the class (default: label, labels, class,
                                       # category, target; "author" when the kind is forced); naming it detects
                                       # the labelled kind
    split: str = "section"             # .txt/.md documents: "section" (running text: paragraphs and the blank
                                       # lines between them, up to section_chars, cut at paragraph ends),
                                       # "paragraph" (blank-line separated snippets) or "line". Validation
                                       # holds out whole documents, so sections also keep it honest
    section_chars: int = 16_000        # characters a section gathers before the next paragraph starts another
    seq_len: int | None = 512         # tokens per row (None: a training run picks it for the device): text is packed to it, chat examples (each side of a
                                       # preference pair) cut to it
    val_fraction: float = 0.05         # share of documents (pairs, prompts) held out for validation (0 = none)
    seed: int = 0                      # seed of the document-level train/validation split
    strict: bool = True                # stop at the first bad record; False skips up to max_skipped
    max_skipped: int = 100             # lenient mode: bad records skipped before the corpus is refused
    max_file_mb: float = 2048.0        # refuse any single file larger than this many MiB
    max_document_chars: int = 100_000  # a longer .txt paragraph is cut at line ends into several documents
    max_chars: int | None = None       # refuse a corpus whose documents pass this many characters (None: no
                                       # limit); reading stops there. A server sets it: bytes on disk do not
                                       # bound what a compressed file decodes to
    root: str | None = None            # when set, every file must resolve inside this folder (uploads)
    cache_dir: str | None = None       # where prepared data is cached (default: see cache_root())
    num_proc: int = 1                  # tokenization worker processes, 1 or 2 (tokenizers also threads)
    batch_size: int = 1000             # documents per tokenization batch
    samples: int = 3                   # documents shown as samples in the stats

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first field that is out of range."""
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ConfigError(f"data config: {msg}")

        need(self.kind in KINDS, f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        need(self.split in SPLITS, f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        need(self.text_field is None or (isinstance(self.text_field, str) and self.text_field.strip() != ""),
             "text_field must be a non-empty field name")
        need(self.label_field is None or (isinstance(self.label_field, str) and self.label_field.strip() != ""),
             "label_field must be a non-empty field name")
        need(self.label_field is None or self.label_field != self.text_field,
             f"label_field and text_field are both {self.label_field!r}; expected two different fields")
        need(self.seq_len is None or isinstance(self.seq_len, int) and 8 <= self.seq_len <= 1_048_576,
             f"seq_len must be an integer between 8 and 1048576, got {self.seq_len!r}")
        need(0.0 <= self.val_fraction < 1.0, f"val_fraction must be in [0, 1), got {self.val_fraction!r}")
        need(isinstance(self.max_skipped, int) and self.max_skipped >= 0, "max_skipped must be >= 0")
        need(self.max_file_mb > 0, "max_file_mb must be positive")
        need(self.max_document_chars >= 1000, "max_document_chars must be at least 1000")
        need(isinstance(self.section_chars, int) and self.section_chars >= 1000,
             f"section_chars must be an integer of at least 1000, got {self.section_chars!r}")
        need(self.max_chars is None or isinstance(self.max_chars, int) and self.max_chars >= 1,
             f"max_chars must be a positive integer or None, got {self.max_chars!r}")
        need(self.num_proc in (1, 2), f"num_proc must be 1 or 2, got {self.num_proc!r}")
        need(self.batch_size >= 1, "batch_size must be positive")
        need(0 <= self.samples <= 100, "samples must be between 0 and 100")

    def as_dict(self) -> dict:
        return asdict(self)


def cache_root(config: DataConfig) -> Path:
    """The cache folder: config.cache_dir, else $MINIMIND_CACHE, else ~/.cache/minimind/prepared."""
    if config.cache_dir:
        return Path(config.cache_dir)
    env = os.environ.get("MINIMIND_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "minimind" / "prepared"
