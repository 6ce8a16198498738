"""Corpus preparation: inspect + prepare a 50 MB corpus with a 6400-token vocabulary, end to end.

The corpus is the shared Tang poems (JSONL, field `text`) and Shakespeare (.txt)
repeated to 50 MB (5 MB with --quick) in a temporary folder, with a fresh
cache. Reported: seconds for inspect (read, check, write Arrow documents),
prepare (split, tokenize, pack), both together (target < 60 s on 2 cores), a
second prepare served by the cache, and the throughput of our prepare step
in MB of text per second beside the fastest raw `tokenizers` call,
`encode_batch_fast` (no offsets; the one prepare makes), on the same documents
held in memory: the speed a pipeline around this tokenizer cannot beat. Plain
`encode_batch` (with offsets) is shown beside it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

NAME = "data_prep"
DESCRIPTION = "corpus inspect + prepare of 50 MB with a 6400 vocab, vs the fastest raw tokenizers call"
HEADLINE = ["prepare / raw encode_batch_fast", "prepare MB/s", "raw encode_batch_fast MB/s", "end-to-end s",
            "within target"]
CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"
TARGET_SECONDS = 60.0
MB = 1e6


def build_corpus(folder: Path, total_mb: float) -> list[Path]:
    """Repeat the shared corpora (whole lines, in their size ratio) up to `total_mb` MB."""
    sources = [CORPORA / "tang_poems.jsonl", CORPORA / "shakespeare.txt"]
    sizes = [p.stat().st_size for p in sources]
    out = []
    for source, size in zip(sources, sizes):
        want = total_mb * MB * size / sum(sizes)
        lines = source.read_bytes().splitlines(keepends=True)
        target = folder / f"repeated_{source.name}"
        written = 0
        with target.open("wb") as fh:
            while written < want:
                for line in lines:
                    fh.write(line)
                    written += len(line)
                    if written >= want:
                        break
        out.append(target)
    return out


def run(quick: bool = False) -> dict:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    from datasets.utils.logging import disable_progress_bar

    from minimind.data import DataConfig, inspect_corpus, iter_texts, prepare_corpus, read_documents
    from minimind.tokenizer import build_tokenizer

    disable_progress_bar()
    if not CORPORA.is_dir():
        raise SystemExit(f"{CORPORA} is missing: this benchmark needs ../shared/corpora")
    originals = [CORPORA / "tang_poems.jsonl", CORPORA / "shakespeare.txt"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        tokenizer = build_tokenizer(iter_texts(originals, text_field="text"), vocab_size=6400)
        train_seconds = time.perf_counter() - start
        per_corpus = {p.stem: inspect_corpus([p], DataConfig(text_field="text", cache_dir=str(tmp / "c0")),
                                             tokenizer).chars_per_token for p in originals}

        files = build_corpus(tmp, 5 if quick else 50)
        size_mb = sum(f.stat().st_size for f in files) / MB
        config = DataConfig(text_field="text", seq_len=512, cache_dir=str(tmp / "cache"))
        start = time.perf_counter()
        stats = inspect_corpus(files, config)
        inspect_s = time.perf_counter() - start
        start = time.perf_counter()
        corpus = prepare_corpus(files, tokenizer, config)
        prepare_s = time.perf_counter() - start
        start = time.perf_counter()
        cached = prepare_corpus(files, tokenizer, config)
        cached_s = time.perf_counter() - start
        assert cached.from_cache and not corpus.from_cache

        texts = read_documents(files, config).dataset["text"]
        text_mb = sum(len(t.encode()) for t in texts) / MB
        backend = tokenizer.backend_tokenizer
        raw = {}
        for name in ("encode_batch", "encode_batch_fast"):
            encode = getattr(backend, name)
            start = time.perf_counter()
            raw_tokens = 0
            for i in range(0, len(texts), 1000):
                raw_tokens += sum(len(e.ids) for e in encode(texts[i:i + 1000], add_special_tokens=False))
            raw[name] = time.perf_counter() - start
            assert raw_tokens == corpus.stats.tokens, (raw_tokens, corpus.stats.tokens)
        raw_s = raw["encode_batch_fast"]

    total = inspect_s + prepare_s
    rows = [
        {"step": "inspect: read, check, write Arrow documents", "seconds": inspect_s, "MB/s": size_mb / inspect_s},
        {"step": "prepare: split, tokenize, pack, write rows", "seconds": prepare_s, "MB/s": text_mb / prepare_s},
        {"step": "inspect + prepare (end to end)", "seconds": total, "MB/s": size_mb / total},
        {"step": "prepare again (from the cache)", "seconds": cached_s, "MB/s": size_mb / cached_s},
        {"step": "raw tokenizers encode_batch_fast (reference: no offsets, the call prepare makes)",
         "seconds": raw_s, "MB/s": text_mb / raw_s},
        {"step": "raw tokenizers encode_batch (with offsets)", "seconds": raw["encode_batch"],
         "MB/s": text_mb / raw["encode_batch"]},
    ]
    summary = {
        "corpus MB": round(size_mb, 1), "documents": stats.documents, "tokens": corpus.stats.tokens,
        "train rows": len(corpus.train), "validation rows": len(corpus.validation),
        "end-to-end s": round(total, 2), "target s": TARGET_SECONDS, "within target": total < TARGET_SECONDS,
        "prepare / raw encode_batch_fast": round(raw_s / prepare_s, 3),
        "prepare MB/s": round(text_mb / prepare_s, 2), "raw encode_batch_fast MB/s": round(text_mb / raw_s, 2),
        "raw encode_batch MB/s": round(text_mb / raw["encode_batch"], 2),
        "cached prepare s": round(cached_s, 3), "tokenizer training s (6400 vocab, shared corpora)":
            round(train_seconds, 1),
        **{f"chars/token {name} (6400 vocab)": round(v, 3) for name, v in per_corpus.items()},
    }
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 5 MB corpus instead of 50 MB")
    args = parser.parse_args()
    from benchmarks._harness import print_result

    result = run(args.quick)
    print_result(result)


if __name__ == "__main__":
    main()
