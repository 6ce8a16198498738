"""scripts/corpora.py's Shakespeare split files: written whole, and not rewritten when unchanged
(the quality benchmark's two side-by-side children write them at once; one read an empty file)."""

from __future__ import annotations

import os

from scripts.corpora import write_shakespeare_split


def _works(path, n=8):
    parts = []
    for i in range(n):
        parts.append(f"PLAY NUMBER {chr(65 + i)}\n\nby William Shakespeare\n\nACT I. Line {i} of verse.\n")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def test_split_holds_whole_works_out_and_rewrites_only_a_changed_file(tmp_path):
    source = _works(tmp_path / "shakespeare.txt")
    train_file, held_file = write_shakespeare_split(tmp_path / "out", source)
    train, held = train_file.read_text(encoding="utf-8"), held_file.read_text(encoding="utf-8")
    assert held.count("PLAY NUMBER") == 4 and train.count("PLAY NUMBER") == 4
    assert not any(line in train for line in held.splitlines() if line.startswith("ACT"))

    for file in (train_file, held_file):
        os.utime(file, ns=(10**18, 10**18))  # a stamp no write now can give
    write_shakespeare_split(tmp_path / "out", source)  # unchanged: neither file is written again
    assert train_file.stat().st_mtime_ns == held_file.stat().st_mtime_ns == 10**18

    train_file.write_text("", encoding="utf-8")  # a damaged file is replaced whole
    write_shakespeare_split(tmp_path / "out", source)
    assert train_file.read_text(encoding="utf-8") == train
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["heldout.txt", "train.txt"]
