"""Build the Song ci samples: a corpus the shipped MiniMind-Tang's tokenizer cannot spell well
(simplified characters, where its tokenizer learnt traditional ones), for the vocabulary-extension
tests and benchmark (benchmarks/vocabulary.py) and the page.

  npm pack chinese-poetry && tar xzf chinese-poetry-2.0.1.tgz   # the chinese-poetry dataset (MIT)
  python -m scripts.make_songci_sample package/dist/songci [--train 1200] [--heldout 150] [--seed 11]

  samples/songci_sample.jsonl   1,200 ci (plain text: `title` = the tune, `author`, `text`)
  samples/songci_heldout.jsonl  150 other ci: held-out text no run trains on

Each line is {"title": TUNE, "author": AUTHOR, "text": the ci's lines joined by "\\n"}. The ci are a
seeded random draw from the 21,050 of `ci.song.*.json` (less a few with U+FFFD) (`ci.song.2019y.json`, a later addition that
repeats others, is left out); the two files share no ci. Deterministic for a seed and a dataset
version (2.0.1 here). License: MIT, see samples/LICENSE.chinese-poetry.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "samples" / "songci_sample.jsonl"
HELDOUT_OUT = ROOT / "samples" / "songci_heldout.jsonl"
MAX_BYTES = 500_000  # both files together; samples/ stays small (tests/data/test_data_prepare.py)


def read_ci(folder: Path) -> list[dict]:
    """Every ci of the dataset's songci folder, in file order, with a non-empty text and no U+FFFD."""
    records = []
    for path in sorted(folder.glob("ci.song.*.json"), key=lambda p: p.name):
        if "2019y" in path.name:
            continue
        for item in json.loads(path.read_text(encoding="utf-8")):
            text = "\n".join(line.strip() for line in item.get("paragraphs", []) if line.strip())
            record = {"title": item.get("rhythmic", ""), "author": item.get("author", ""), "text": text}
            if text and not any("\ufffd" in value for value in record.values()):  # a few lost characters
                records.append(record)
    return records


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("songci", type=Path, help="the songci folder of the chinese-poetry npm package")
    parser.add_argument("--train", type=int, default=1200)
    parser.add_argument("--heldout", type=int, default=150)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)
    records = read_ci(args.songci)
    if len(records) < args.train + args.heldout:
        raise SystemExit(f"{args.songci}: only {len(records)} ci")
    chosen = random.Random(args.seed).sample(records, args.train + args.heldout)
    write(OUT, chosen[:args.train])
    write(HELDOUT_OUT, chosen[args.train:])
    size = OUT.stat().st_size + HELDOUT_OUT.stat().st_size
    print(f"{OUT.name}: {args.train} ci; {HELDOUT_OUT.name}: {args.heldout} ci; {size:,} bytes")
    if size > MAX_BYTES:
        raise SystemExit(f"the samples are {size:,} bytes, over {MAX_BYTES:,}: take fewer ci")


if __name__ == "__main__":
    main()
