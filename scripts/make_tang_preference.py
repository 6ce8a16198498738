"""Build the preference sample (samples/tang_preference.jsonl) for DPO after the Tang chat model:
each pair asks for a poem of a given form, prefers a real poem of that form, rejects a real
poem of another form.

  python -m scripts.make_tang_preference [--out samples/tang_preference.jsonl] [--pairs 720] [--seed 7]

Requests use the chat data's phrasing (scripts/make_tang_chat.py), so DPO continues from the
shipped chat model: 以《TITLE》为题写一首FORM, or 模仿AUTHOR写一首FORM; a fifth of them come
with the chat data's system prompt (then "prompt" is a message list, else plain text).
  chosen   a training poem of the asked form (FORM = 五言/七言 绝句/律诗: every line 5 or 7
           characters, 4 or 8 lines), whose title (or author) the request names
  rejected a training poem of another form: the same number of lines with the other line
           length (七言 when 五言 was asked), or the same line length with the other number of
           lines (律诗 when 绝句 was asked); by the same author when there is one, else with the
           same title, else any poem of that form
Only poems the shipped models trained on are used (the held-out split of scripts/corpora.py is
left out). Deterministic for a seed. Source: ../shared/corpora/tang_poems.jsonl (chinese-poetry,
MIT, see samples/LICENSE.chinese-poetry).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

from scripts.corpora import ROOT, TANG, tang_records, tang_split
from scripts.make_tang_chat import ANONYMOUS, FORMS, SYSTEM, form_of

OUT = ROOT / "samples" / "tang_preference.jsonl"
MAX_BYTES = 260_000  # samples/ must stay under 1 MB in all (tests/data/test_data_prepare.py)
# share of the pairs asking for each form (quatrains are short: they keep the file small)
SHARES = {"五言绝句": 0.35, "七言绝句": 0.35, "五言律诗": 0.2, "七言律诗": 0.1}
SYSTEM_SHARE, AUTHOR_SHARE = 0.2, 0.2
SHAPES = {form: shape for shape, form in FORMS.items()}  # 五言绝句 -> (5, 4)


def contrasts(form: str, rng: random.Random) -> list[str]:
    """The wrong forms for a request of `form`, in the order to try: other line length, other line count."""
    chars, lines = SHAPES[form]
    wrong = [FORMS[(12 - chars, lines)], FORMS[(chars, 12 - lines)]]
    rng.shuffle(wrong)
    return wrong


def title_of(record: dict) -> str:
    return record.get("title", "").split(" ")[0].strip()  # as the chat data names it


def pick_rejected(chosen: dict, wrong: list[str], by_author: dict, by_title: dict, by_form: dict, used: set,
                  rng: random.Random) -> tuple[dict, str] | None:
    """(poem, where it came from) of one of the wrong forms: same author, else same title, else any."""
    author = chosen.get("author", "").strip()
    for source, pool in (("author", by_author.get(author, []) if author not in ANONYMOUS else []),
                         ("title", by_title.get(title_of(chosen), []))):
        for form in wrong:
            options = [r for r in pool if r["form"] == form and r["text"] not in used]
            if options:
                return rng.choice(options), source
    for form in wrong:  # by_form is in a seeded random order already
        found = next((r for r in by_form[form] if r["text"] not in used), None)
        if found is not None:
            return found, "any"
    return None


def request(chosen: dict, form: str, source: str, rng: random.Random) -> str:
    if source == "author" and rng.random() < AUTHOR_SHARE:  # the author's own other poem is the contrast
        return f"模仿{chosen['author'].strip()}写一首{form}"
    return f"以《{title_of(chosen)}》为题写一首{form}"


def build(out: Path, pairs: int, seed: int) -> dict:
    train_poems, _ = tang_split()
    train_set = set(train_poems)
    records = [{**r, "form": form_of(r["text"])} for r in tang_records(TANG) if r.get("text") in train_set]
    records = [r for r in records if r["form"]]
    by_author, by_title, by_form = defaultdict(list), defaultdict(list), defaultdict(list)
    for r in records:
        by_author[r.get("author", "").strip()].append(r)
        by_title[title_of(r)].append(r)
    rng = random.Random(seed)
    order = records[:]
    rng.shuffle(order)
    for r in order:  # "any" falls back to these, already in a seeded random order
        by_form[r["form"]].append(r)
    quota = {form: round(pairs * share) for form, share in SHARES.items()}
    used: set[str] = set()
    counts = defaultdict(int)
    with out.open("w", encoding="utf-8") as fh:
        for chosen in order:
            form = chosen["form"]
            if not quota[form] or not title_of(chosen) or chosen["text"] in used:
                continue
            found = pick_rejected(chosen, contrasts(form, rng), by_author, by_title, by_form, used | {chosen["text"]},
                                  rng)
            if found is None:
                continue
            rejected, source = found
            used |= {chosen["text"], rejected["text"]}
            prompt = request(chosen, form, source, rng)
            if rng.random() < SYSTEM_SHARE:
                prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
            record = {"prompt": prompt, "chosen": chosen["text"], "rejected": rejected["text"]}
            fh.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
            quota[form] -= 1
            counts["pairs"] += 1
            counts[f"asked {form}"] += 1
            counts[f"rejected from the same {source}" if source != "any" else "rejected from any poem"] += 1
            if not any(quota.values()):
                break
    counts["bytes"] = out.stat().st_size
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--pairs", type=int, default=720, help="pairs to write (720 stay under MAX_BYTES)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    counts = build(args.out, args.pairs, args.seed)
    print(json.dumps(counts, ensure_ascii=False))
    if counts["bytes"] > MAX_BYTES:
        raise SystemExit(f"{args.out} is {counts['bytes']:,} bytes, over the {MAX_BYTES:,} a sample may take; "
                         "ask for fewer --pairs")


if __name__ == "__main__":
    main()
