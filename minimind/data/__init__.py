"""Corpus ingestion: any text a user hands in becomes training rows, or a CorpusError.

    config = DataConfig(seq_len=256, val_fraction=0.05)
    stats = inspect_corpus(["poems.jsonl"], config)            # check + stats, no tokenizer needed
    corpus = prepare_corpus(["poems.jsonl"], tokenizer, config)  # train / validation Arrow rows, cached

Modules, one job each: config (DataConfig), files (paths, size, encoding),
readers (formats, positions), kinds (plain/chat/instruction/preference/prompts/labelled, normal form),
labels (labelled text: fields, label values, class checks, stratified split),
validate (strict/lenient), documents (checked Arrow documents), tokens
(tokenize, pack, mask), prepare (split, cache), stats, cache (keys, folders).
"""

from ..errors import CorpusError
from .config import DataConfig, cache_root
from .documents import Documents, iter_texts, read_documents
from .kinds import ROLES
from .labels import class_order, stratified_split
from .prepare import PreparedCorpus, inspect_corpus, prepare_corpus, split_indices
from .stats import FileStats, Histogram, PartLengths, Stats
from .tokens import IGNORE, PAIR_COLUMNS, PROMPT_COLUMNS, PROMPT_ROOM, classify_ids
from .validate import Skipped

__all__ = ["CorpusError", "DataConfig", "Documents", "FileStats", "Histogram", "IGNORE", "PAIR_COLUMNS",
           "PROMPT_COLUMNS", "PROMPT_ROOM", "PartLengths", "PreparedCorpus", "ROLES", "Skipped", "Stats",
           "cache_root", "class_order", "classify_ids", "inspect_corpus", "iter_texts", "prepare_corpus", "read_documents", "split_indices",
           "stratified_split"]
