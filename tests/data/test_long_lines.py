"""A corpus that is one very long line: tokenized in pieces with the same ids, in bounded memory."""

import json
import os
import subprocess
import sys

import pytest

from minimind.data.tokens import count_tokens, encode, pieces
from minimind.tokenizer import load_tokenizer
from helpers import ROOT, SAMPLE_TEXTS

SHIPPED_TOKENIZER = ROOT / "checkpoints" / "minimind-tang"


def _texts() -> list[str]:
    tang = [json.loads(line)["text"] for line in
            (ROOT / "samples" / "tang_poems_sample.jsonl").read_text(encoding="utf-8").splitlines()[:200]]
    plays = (ROOT / "samples" / "shakespeare_sample.txt").read_text(encoding="utf-8")[:40_000]
    mixed = " ".join(SAMPLE_TEXTS) + "<|endoftext|>" + "".join(tang[:20]) + "<|im_start|>  \n\n  tail"
    return ["".join(tang), plays, plays.replace("\n", " "), mixed * 3]


def test_pieces_are_cut_where_the_tokenizer_splits_anyway(tokenizer):
    shipped = load_tokenizer(SHIPPED_TOKENIZER)
    for tok in (tokenizer, shipped):
        for text in _texts():
            for size in (50, 333, 4096):
                cut = list(pieces(tok, text, size))
                assert "".join(cut) == text and all(len(p) <= size for p in cut)
                whole = tok(text, add_special_tokens=False)["input_ids"]
                joined = [t for p in cut for t in tok(p, add_special_tokens=False)["input_ids"]]
                assert joined == whole, (size, text[:40])


def test_long_texts_encode_and_count_like_whole_ones(tokenizer, monkeypatch):
    import minimind.data.tokens as tokens

    texts = _texts() + ["short", ""]
    whole = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    monkeypatch.setattr(tokens, "LONG_TEXT", 500)  # every real text above counts as long
    assert encode(tokenizer, texts) == whole
    assert count_tokens(tokenizer, texts) == [len(ids) for ids in whole]


@pytest.mark.parametrize("characters, limit_mb", [pytest.param(20_000_000, 1536, marks=pytest.mark.slow),
                                                  (4_000_000, 900)])
def test_inspecting_one_long_line_keeps_memory_bounded(tmp_path, characters, limit_mb):
    """The issue's case: `data inspect --tokenizer` on a single 20 MB line (peaked at ~4.9 GB, about
    230 bytes a character; now 0.61 GB, 47 s of tokenizing). By default a 4 MB line, 14 s: now 0.56 GB,
    where the old peak would be ~1.3 GB."""
    plays = (ROOT / "samples" / "shakespeare_sample.txt").read_text(encoding="utf-8").replace("\n", " ")
    line = (plays * (characters // len(plays) + 1))[:characters]
    corpus = tmp_path / "one_line.txt"
    corpus.write_text(line + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "minimind", "data", "inspect", str(corpus), "--tokenizer",
               str(SHIPPED_TOKENIZER), "--json"]
    # a fresh parent whose only child is the command: its RUSAGE_CHILDREN peak is that command's
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
               "sys.exit(done.returncode)")
    done = subprocess.run([sys.executable, "-c", measure, *command], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT),
                                            "MINIMIND_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    peak_mb = int(done.stderr.strip().splitlines()[-1]) / 1024  # ru_maxrss is in kB on Linux
    stats = json.loads(done.stdout)
    assert stats["documents"] == 1 and stats["characters"] == characters and stats["tokens"] > 0
    assert peak_mb < limit_mb, f"peak RSS {peak_mb:.0f} MB"
