"""The shared corpora, split the way the shipped models and the benchmarks hold data out.

Tang poems: by poem, exactly as the trainer splits them (minimind.data.split_indices
on the documents the reader keeps), so "held out" means the same poems everywhere.
Shakespeare: by play: whole plays are held out, never seen in training.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from minimind.data import DataConfig, read_documents, split_indices
from minimind.training.run_dir import atomic_write

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
TANG = CORPORA / "tang_poems.jsonl"
SHAKESPEARE = CORPORA / "shakespeare.txt"
TANG_VAL_FRACTION, TANG_SEED = 0.02, 1234
HELD_OUT_PLAYS = 4  # every (number of plays // 4)-th play is held out


def tang_records(path: Path = TANG) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def tang_split(path: Path = TANG, fraction: float = TANG_VAL_FRACTION, seed: int = TANG_SEED,
               cache_dir: str | None = None) -> tuple[list[str], list[str]]:
    """(train poems, held-out poems) as texts, split as the trainer splits this file."""
    docs = read_documents([str(path)], DataConfig(text_field="text", cache_dir=cache_dir))
    texts = docs.dataset["text"]
    train_idx, val_idx = split_indices(len(texts), fraction, seed)
    return [texts[i] for i in train_idx], [texts[i] for i in val_idx]


def shakespeare_plays(path: Path = SHAKESPEARE) -> list[tuple[str, str]]:
    """(title, text) of each play or poem: a work starts at its title, the last non-empty
    line before 'by William Shakespeare' (the file glues some titles to the previous play's
    last line, e.g. '[Exeunt.]AS YOU LIKE IT')."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = []
    for i, line in enumerate(lines):
        if line.strip() == "by William Shakespeare":
            j = i - 1
            while j > 0 and not lines[j].strip():
                j -= 1
            starts.append(j)
    works = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        match = re.search(r"([A-Z][A-Z'’ ,\-]+)$", lines[start].strip())
        title = (match.group(1) if match else lines[start]).strip()
        title = title[len("THE END"):] if title.startswith("THE END") and len(title) > 7 else title
        body = lines[start + 1:end]
        works.append((title, title + "\n" + "\n".join(body).strip() + "\n"))
    return works


def shakespeare_split(path: Path = SHAKESPEARE) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(train works, held-out works): every k-th work is held out, k = len(works) // HELD_OUT_PLAYS."""
    works = shakespeare_plays(path)
    k = max(2, len(works) // HELD_OUT_PLAYS)
    held = [w for i, w in enumerate(works) if i % k == k // 2]
    return [w for w in works if w not in held], held


def write_shakespeare_split(out_dir: Path, path: Path = SHAKESPEARE) -> tuple[Path, Path]:
    """train.txt (the training plays) and heldout.txt (the held-out plays) in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    train, held = shakespeare_split(path)
    train_file, held_file = out_dir / "train.txt", out_dir / "heldout.txt"
    # atomic, and only when changed: the quality benchmark's side-by-side children call this at
    # once, and one read an empty train.txt while the other was rewriting it
    for file, works in ((train_file, train), (held_file, held)):
        text = "\n\n".join(body for _, body in works)
        if not file.is_file() or file.read_text(encoding="utf-8") != text:
            atomic_write(file, text)
    return train_file, held_file
