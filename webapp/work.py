"""The page's heavy work, as plain functions a bounded child process runs (webapp.bounded).

Each grows with what a visitor stated (a corpus, a batch, a vocabulary), so the web process never
runs them itself. What goes in and comes out is plain data (configs, paths, stats, counts): no
Gradio object and nothing of the web process.
"""

from __future__ import annotations

from dataclasses import dataclass

from minimind.data import DataConfig, Stats, inspect_corpus, iter_texts
from minimind.errors import MiniMindError
from minimind.training import TrainConfig
from minimind.training.estimate import Estimate, estimate
from minimind.vocabulary import COVERAGE_CHARS, coverage, worth_extending


@dataclass
class CoverageFacts:
    """How one tokenizer spells a corpus (minimind.vocabulary), as the page words it."""

    share: float        # characters written in byte pieces, as a fraction
    chars_per_token: float
    worth_adding: int   # frequent characters an extension would add (0: not worth it)
    candidates: int     # characters an extension adds whatever the share


def _coverage(tokenizer, files: list[str], data: DataConfig, min_count: int, limit: int) -> CoverageFacts:
    found = coverage(tokenizer, iter_texts(files, data.text_field, data.kind, data), max_chars=COVERAGE_CHARS)
    return CoverageFacts(found.byte_fallback_share, found.chars_per_token,
                         worth_extending(found, min_count, limit), len(found.candidates(min_count, limit)))


def inspect_files(files: list[str], config: DataConfig,
                  shipped: dict[str, str]) -> tuple[Stats, dict[str, CoverageFacts], str | None]:
    """A corpus's stats, how each shipped model's tokenizer (name -> folder) spells it, and the name of
    the one its tokens are counted with: the tokenizer that writes it in the fewest tokens (an English
    corpus is counted with the Shakespeare model's, a Chinese one with the Tang model's)."""
    from minimind.tokenizer import load_tokenizer
    from minimind.vocabulary import MAX_NEW_TOKENS, MIN_COUNT

    tokenizers = {name: load_tokenizer(folder) for name, folder in shipped.items()}
    spelled = {name: _coverage(tokenizer, files, config, MIN_COUNT, MAX_NEW_TOKENS)
               for name, tokenizer in tokenizers.items()}
    counting = max(spelled, key=lambda name: spelled[name].chars_per_token, default=None)
    stats = inspect_corpus(files, config, tokenizers[counting] if counting else None)
    return stats, spelled, counting


def train_corpus_tokenizer(files: list[str], vocab_size: int, out_dir: str, text_field: str | None):
    """A tokenizer trained on the corpus, saved in `out_dir`; its report (size, chars/token, seconds)."""
    from minimind.tokenizer import train_tokenizer

    _, report = train_tokenizer(files, vocab_size, out_dir=out_dir, text_field=text_field)
    return report


def estimate_run(config: TrainConfig, scratch: str) -> tuple[Estimate, CoverageFacts | None]:
    """The run's size and time (minimind.training.estimate) and, for a fine-tune, how its starting
    model's tokenizer spells the corpus (with the run's own extension settings)."""
    from minimind.checkpoint import load_tokenizer_for
    from minimind.vocabulary import MAX_NEW_TOKENS

    found = estimate(config, scratch=scratch)
    if not config.model.init_from:
        return found, None
    data, model = config.data, config.model
    try:
        spelled = _coverage(load_tokenizer_for(model.init_from), list(data.files), data, model.extend_min_count,
                            model.extend_vocab or MAX_NEW_TOKENS)
    except MiniMindError:
        spelled = None
    return found, spelled
