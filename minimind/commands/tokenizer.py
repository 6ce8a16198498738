"""Train a byte-level BPE tokenizer on a corpus, or look at how one splits text.

  python -m minimind tokenizer train corpus.jsonl --vocab-size 6400 --out tok/
  python -m minimind tokenizer encode --tokenizer tok/ "床前明月光"
"""

from __future__ import annotations

import argparse

HELP = "train a byte-level BPE tokenizer, or encode text with one"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = sub.add_parser("train", help="train a tokenizer on text files",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    t.add_argument("files", nargs="+", help="corpus files: .txt/.md (one document per line) or "
                   ".jsonl/.json/.csv/.parquet records")
    t.add_argument("--out", required=True, help="folder to write tokenizer.json + tokenizer_config.json")
    t.add_argument("--vocab-size", type=int, default=6400, help="number of tokens, special tokens included")
    t.add_argument("--text-field", default=None,
                   help="record field holding the text (default: 'text' or 'content')")
    t.add_argument("--min-frequency", type=int, default=2, help="a pair must occur this often to be merged")
    t.add_argument("--min-char-count", type=int, default=0,
                   help="> 0: every character seen this often gets a token of its own (the vocabulary can "
                        "then end larger than --vocab-size)")
    e = sub.add_parser("encode", help="show the tokens of a piece of text")
    e.add_argument("--tokenizer", required=True, help="tokenizer or model folder")
    e.add_argument("text", help="text to encode")


def run(args) -> int:
    from ..tokenizer import load_tokenizer, train_tokenizer

    if args.action == "train":
        _, report = train_tokenizer(args.files, args.vocab_size, out_dir=args.out,
                                    text_field=args.text_field, min_frequency=args.min_frequency,
                                    min_char_count=args.min_char_count)
        print(f"saved {report.path}: vocab {report.vocab_size}, trained in {report.seconds:.1f}s, "
              f"{report.characters:,} chars -> {report.tokens:,} tokens "
              f"({report.chars_per_token:.2f} chars/token; byte-fallback share "
              f"{100 * report.byte_fallback_share:.2f} % of characters)")
        return 0
    tok = load_tokenizer(args.tokenizer)
    ids = tok(args.text, add_special_tokens=False)["input_ids"]
    pieces = [tok.decode([i]) for i in ids]
    print(f"{len(args.text)} chars -> {len(ids)} tokens")
    print("ids:   ", ids)
    print("pieces:", pieces)
    return 0
