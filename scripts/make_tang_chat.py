"""Derive a chat fine-tuning set from the Tang poems the model trained on (held-out poems
excluded), so the chat model learns to answer requests with a poem of the asked form.

  python -m scripts.make_tang_chat --out work/tang/chat.jsonl [--per-poem 2]

Requests (simplified Chinese, as users type them) → the poem (traditional, as in the corpus):
  以《TITLE》为题写一首五言绝句 / 七言律诗 / …   (the form is measured from the poem)
  写一首AUTHOR风格的诗 / 模仿AUTHOR写一首FORM
  续写：FIRST VERSE                              (the answer is the whole poem)
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from minimind.training.rewards.poems import FORMS, form_of, verses  # noqa: F401 (re-exported)
from scripts.corpora import TANG, tang_records, tang_split

SYSTEM = "你是一位唐代诗人，用诗回答。"
ANONYMOUS = {"無名氏", "无名氏", "不詳", ""}


def first_verse(poem: str) -> str:
    return re.split(r"[，。！？；\n]", poem, maxsplit=1)[0]


def requests_for(record: dict, rng: random.Random) -> list[str]:
    title = record.get("title", "").split(" ")[0].strip()
    author = record.get("author", "").strip()
    poem = record["text"]
    form = form_of(poem)
    options = [f"续写：{first_verse(poem)}"]
    if title:
        options.append(f"以《{title}》为题写一首{form or '诗'}")
    if author and author not in ANONYMOUS:
        options.append(f"写一首{author}风格的诗" if not form else f"模仿{author}写一首{form}")
    if form:
        options.append(f"写一首{form}")
    rng.shuffle(options)
    return options


def build(out: Path, per_poem: int, seed: int) -> dict:
    train_poems, _ = tang_split()
    train_set = set(train_poems)
    rng = random.Random(seed)
    counts = {"poems": 0, "examples": 0, "with_form": 0}
    with out.open("w", encoding="utf-8") as fh:
        for record in tang_records(TANG):
            if record.get("text", "").strip() not in train_set and record.get("text") not in train_set:
                continue  # held-out poems stay unseen
            counts["poems"] += 1
            counts["with_form"] += form_of(record["text"]) is not None
            for request in requests_for(record, rng)[:per_poem]:
                messages = [{"role": "user", "content": request},
                            {"role": "assistant", "content": record["text"]}]
                if rng.random() < 0.3:
                    messages.insert(0, {"role": "system", "content": SYSTEM})
                fh.write(json.dumps({"messages": messages}, ensure_ascii=False) + "\n")
                counts["examples"] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--per-poem", type=int, default=2, help="requests derived from each poem")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(json.dumps(build(args.out, args.per_poem, args.seed)))


if __name__ == "__main__":
    main()
