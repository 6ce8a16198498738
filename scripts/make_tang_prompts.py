"""Build the GRPO prompt samples from the Tang poems: requests for a poem of a given form, which the
model answers itself and the rewards score (kind `prompts`, no answers in the file).

  python -m scripts.make_tang_prompts [--per-form 500] [--heldout-per-form 50] [--seed 7]

  samples/tang_prompts.jsonl          2,000 prompts (500 per form) from poems the shipped models trained on
  samples/tang_prompts_heldout.jsonl  200 prompts (50 per form) from the held-out poems (scripts/corpora.py
                                      tang_split), none of whose titles is in the training file

Each line is {"prompt": "以《TITLE》为题写一首FORM", "form": FORM}: the chat data's wording
(scripts/make_tang_chat.py), TITLE the poem's title up to its first space, FORM the real poem's form
(五言/七言 绝句/律诗: every line 5 or 7 characters, 4 or 8 lines; poems of no such form, and poems
titled by a number only or by more than 16 characters, are not used).
Titles are distinct within and across the two files, so a held-out prompt asks for a title GRPO never
practised. Deterministic for a seed. Source: ../shared/corpora/tang_poems.jsonl (chinese-poetry, MIT,
see samples/LICENSE.chinese-poetry).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from pathlib import Path

from scripts.corpora import ROOT, TANG, tang_records, tang_split
from scripts.make_tang_chat import FORMS, form_of
from scripts.make_tang_preference import title_of

OUT = ROOT / "samples" / "tang_prompts.jsonl"
HELDOUT_OUT = ROOT / "samples" / "tang_prompts_heldout.jsonl"
MAX_BYTES = 220_000  # both files together; samples/ stays small (tests/data/test_data_prepare.py)
NUMERALS = set("〇○零一二三四五六七八九十百")  # a title of these only numbers a poem in a series ("一○二")
MAX_TITLE = 16  # characters: longer titles are prefaces (up to 100+ characters), not what a user asks for


def candidates(poems: set[str], records: list[dict]) -> list[dict]:
    """(title, form) of every record whose poem is in `poems`, has one of the four forms and a title
    a user might ask for (more than a number, at most MAX_TITLE characters)."""
    found = []
    for record in records:
        text, title = record.get("text", ""), title_of(record)
        if text in poems and 0 < len(title) <= MAX_TITLE and not set(title) <= NUMERALS and (form := form_of(text)):
            found.append({"title": title, "form": form})
    return found


def pick(found: list[dict], per_form: int, taken: set[str], rng: random.Random) -> list[dict]:
    """`per_form` requests of each form, titles distinct and not in `taken` (which grows), seeded order."""
    order = found[:]
    rng.shuffle(order)
    quota = {form: per_form for form in FORMS.values()}
    chosen = []
    for c in order:
        if quota[c["form"]] and c["title"] not in taken:
            chosen.append(c)
            taken.add(c["title"])
            quota[c["form"]] -= 1
    short = {form: n for form, n in quota.items() if n}
    if short:
        raise SystemExit(f"not enough distinct titles: {short} more needed; ask for fewer per form")
    return chosen


def write(path: Path, chosen: list[dict]) -> int:
    with path.open("w", encoding="utf-8") as fh:
        for c in chosen:
            record = {"prompt": f"以《{c['title']}》为题写一首{c['form']}", "form": c["form"]}
            fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path.stat().st_size


def build(out: Path, heldout_out: Path, per_form: int, heldout_per_form: int, seed: int) -> dict:
    """Held-out prompts are picked first, so the training prompts can avoid their titles."""
    train_poems, held_poems = (set(poems) for poems in tang_split())
    records = tang_records(TANG)
    rng = random.Random(seed)
    taken: set[str] = set()
    held = pick(candidates(held_poems, records), heldout_per_form, taken, rng)
    train = pick(candidates(train_poems, records), per_form, taken, rng)
    train_titles = {title_of(r) for r in records if r.get("text") in train_poems}
    counts = {"prompts": len(train), "heldout prompts": len(held),
              "per form": dict(Counter(c["form"] for c in train)),
              "heldout per form": dict(Counter(c["form"] for c in held)),
              "heldout titles also titling a training poem": sum(c["title"] in train_titles for c in held),
              "bytes": write(out, train), "heldout bytes": write(heldout_out, held)}
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--heldout-out", type=Path, default=HELDOUT_OUT)
    parser.add_argument("--per-form", type=int, default=500, help="training prompts of each of the four forms")
    parser.add_argument("--heldout-per-form", type=int, default=50, help="held-out prompts of each form")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.heldout_out.parent.mkdir(parents=True, exist_ok=True)
    counts = build(args.out, args.heldout_out, args.per_form, args.heldout_per_form, args.seed)
    print(json.dumps(counts, ensure_ascii=False))
    if counts["bytes"] + counts["heldout bytes"] > MAX_BYTES:
        raise SystemExit(f"the two files take {counts['bytes'] + counts['heldout bytes']:,} bytes, over the "
                         f"{MAX_BYTES:,} the samples may take; ask for fewer per form")


if __name__ == "__main__":
    main()
