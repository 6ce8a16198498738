"""Shared data builders for the corpus and trainer tests: a data config on a test's cache folder,
JSONL files from records, chat messages, and the small corpora of each kind (preference pairs,
prompts, labelled text, the Song ci sample)."""

import json
import random
from pathlib import Path

import pytest
from helpers import ROOT, SAMPLE_TEXTS

from minimind.data import DataConfig, inspect_corpus
from minimind.errors import CorpusError

SONGCI = ROOT / "samples" / "songci_sample.jsonl"
POEM = "".join(SAMPLE_TEXTS[:3])      # class "poem": pieces of Tang poems
PLAY = " ".join(SAMPLE_TEXTS[3:6])    # class "play": pieces of English lines


def data_config(tmp_path: Path, **overrides) -> DataConfig:
    """A DataConfig whose cache is tmp_path/cache."""
    return DataConfig(cache_dir=str(tmp_path / "cache"), **overrides)


def write_jsonl(path: Path, records) -> Path:
    """One line a record: a dict as JSON (non-ASCII kept), a string as it is (a broken line)."""
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records)
                    + "\n", encoding="utf-8")
    return path


def bad_record_cases(cases):
    """Parametrize a test over (id, record, words) cases: it gets `record` and `words`, named by id."""
    return pytest.mark.parametrize("record, words", [c[1:] for c in cases], ids=[c[0] for c in cases])


def assert_bad_second_record(path: Path, ok: dict, record, words: str) -> None:
    """A JSONL file of a good record then `record`: read strictly, it fails naming `path`, line 2
    and `words` in the reason; read leniently, that record is skipped and the good one kept."""
    write_jsonl(path, [ok, record])
    with pytest.raises(CorpusError) as caught:
        inspect_corpus([path], data_config(path.parent))
    assert caught.value.position == "line 2" and words in caught.value.reason, str(caught.value)
    assert str(caught.value).startswith(f"{path}: line 2: ")
    stats = inspect_corpus([path], data_config(path.parent, strict=False))  # lenient: skipped, the rest kept
    assert stats.documents == 1 and stats.skipped_count == 1 and words in stats.skipped[0].reason


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def write_preference_corpus(folder: Path, n: int = 40) -> Path:
    """Pairs whose chosen answer is a poem and whose rejected answer is an English line."""
    return write_jsonl(folder / "pairs.jsonl", [
        {"prompt": f"寫一首詩 {i}", "chosen": SAMPLE_TEXTS[i % 3], "rejected": SAMPLE_TEXTS[3 + i % 3]}
        for i in range(n)])


def write_prompts(folder: Path, n: int = 40) -> Path:
    """Prompts without answers (kind `prompts`, for GRPO)."""
    return write_jsonl(folder / "prompts.jsonl", [{"prompt": f"寫一首詩 {i}"} for i in range(n)])


def write_labelled_corpus(folder: Path, n: int = 60, seed: int = 0) -> Path:
    """Two classes told apart by their vocabulary alone: Chinese poem pieces and English play pieces."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        source, label = (POEM, "poem") if i % 2 else (PLAY, "play")
        start = rng.randrange(len(source) - 12)
        rows.append({"text": source[start:start + rng.randrange(6, 12)], "label": label})
    return write_jsonl(folder / "labelled.jsonl", rows)


def write_songci(folder: Path, n: int = 80) -> Path:
    """The first `n` lines of the Song ci sample (simplified characters the test tokenizer lacks)."""
    lines = SONGCI.read_text(encoding="utf-8").splitlines()[:n]
    path = folder / "songci.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
