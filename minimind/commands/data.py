"""Check a corpus and show its stats, or prepare it for training (tokenized, split, cached).

  python -m minimind data inspect poems.jsonl plays.txt
  python -m minimind data inspect chats.jsonl --tokenizer tok/ --json   # + how that tokenizer spells it
  python -m minimind data inspect samples/tang_preference.jsonl     # prompt / chosen / rejected pairs
  python -m minimind data inspect samples/tang_prompts.jsonl        # prompts for GRPO (+ reward fields)
  python -m minimind data inspect reviews.csv --label-field stars    # labelled text: the classes and counts
  python -m minimind data prepare poems.jsonl --tokenizer tok/ --seq-len 512 --val-fraction 0.05

Bad input stops with one line naming the file, the line or record, what was
found and what was expected; --lenient skips up to --max-skipped bad records.
"""

from __future__ import annotations

import argparse
import json

from ..data.config import KINDS

HELP = "inspect a corpus (stats, kind, errors) or prepare it for training"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    inspect = sub.add_parser("inspect", help="check files and print their stats",
                             formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _common(inspect)
    inspect.add_argument("--tokenizer", default=None, help="tokenizer or model folder; adds token counts and the "
                         "share of characters it writes in byte pieces")
    prepare = sub.add_parser("prepare", help="tokenize, split and cache a corpus for training",
                             formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _common(prepare)
    prepare.add_argument("--tokenizer", required=True, help="tokenizer or model folder")
    prepare.add_argument("--seq-len", type=int, default=512, help="tokens per training row")
    prepare.add_argument("--val-fraction", type=float, default=0.05, help="share of documents held out")
    prepare.add_argument("--seed", type=int, default=0, help="seed of the train/validation split")
    prepare.add_argument("--num-proc", type=int, default=1, choices=(1, 2), help="tokenization processes")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="corpus files: .txt .md .jsonl .json .csv .tsv .parquet")
    p.add_argument("--kind", default="auto", choices=KINDS,
                   help="what the records are; auto detects it from the first record "
                        "(preference: prompt + chosen + rejected, for DPO; labelled: text + label, to classify)")
    p.add_argument("--text-field", default=None, help="record field holding plain text (default: text, content)")
    p.add_argument("--label-field", default=None,
                   help="labelled text: record field holding the class (default: label, labels, class, category, "
                        "target; naming it makes the corpus labelled)")
    p.add_argument("--split", default="section", choices=("section", "paragraph", "line"),
                   help=".txt/.md documents: sections of running text (paragraphs with the blank lines between "
                        "them; validation holds out whole sections), independent blank-line separated "
                        "paragraphs, or lines")
    p.add_argument("--lenient", action="store_true", help="skip bad records instead of stopping at the first")
    p.add_argument("--max-skipped", type=int, default=100, help="with --lenient: most bad records to skip")
    p.add_argument("--max-file-mb", type=float, default=2048.0, help="refuse files larger than this (MiB)")
    p.add_argument("--cache-dir", default=None,
                   help="cache folder (default: $MINIMIND_CACHE or ~/.cache/minimind/prepared)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    from ..data import DataConfig, inspect_corpus, prepare_corpus

    settings = dict(kind=args.kind, text_field=args.text_field, label_field=args.label_field, split=args.split, strict=not args.lenient,
                    max_skipped=args.max_skipped, max_file_mb=args.max_file_mb, cache_dir=args.cache_dir)
    if args.action == "prepare":
        settings.update(seq_len=args.seq_len, val_fraction=args.val_fraction, seed=args.seed,
                        num_proc=args.num_proc)
    config = DataConfig(**settings)
    tokenizer = _tokenizer(args.tokenizer) if args.tokenizer else None
    if args.action == "inspect":
        stats = inspect_corpus(args.files, config, tokenizer)
        found = _coverage(args.files, config, tokenizer) if tokenizer is not None else None
        if args.json:
            print(json.dumps({**stats.to_dict(), **({"coverage": found.as_dict()} if found else {})},
                             ensure_ascii=False))
            return 0
        print(stats.summary())
        if found:
            from ..vocabulary import MIN_COUNT, worth_extending

            line = (f"byte pieces: {100 * found.byte_fallback_share:.1f} % of the characters "
                    f"({len(found.missing):,} distinct characters have no token of their own)")
            if worth_extending(found):
                line += (f"; {worth_extending(found):,} of them, seen {MIN_COUNT}+ times, become tokens when a "
                         "fine-tune sets model.extend_vocab")
            print(line)
        return 0
    corpus = prepare_corpus(args.files, tokenizer, config)
    result = {"path": str(corpus.path), "fingerprint": corpus.fingerprint, "kind": corpus.kind,
              "from_cache": corpus.from_cache, "train_rows": len(corpus.train),
              "validation_rows": len(corpus.validation), "seq_len": corpus.seq_len, "classes": corpus.classes,
              "val_characters": corpus.val_characters, "val_tokens": corpus.val_tokens,
              "stats": corpus.stats.to_dict()}
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
        return 0
    print(corpus.stats.summary())
    rows = "pairs, each side" if corpus.kind == "preference" else "rows of"
    print(f"prepared {result['train_rows']:,} train and {result['validation_rows']:,} validation {rows} up to "
          f"{corpus.seq_len} tokens{' (from the cache)' if corpus.from_cache else ''}")
    print(f"cache: {corpus.path}")
    return 0


def _coverage(files, config, tokenizer):
    """How the tokenizer spells the corpus (minimind.vocabulary.coverage)."""
    from ..data import iter_texts
    from ..vocabulary import coverage

    return coverage(tokenizer, iter_texts(files, config.text_field, config.kind, config))


def _tokenizer(path: str):
    from ..errors import ConfigError
    from ..tokenizer import load_tokenizer

    try:
        return load_tokenizer(path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load a tokenizer from {path!r}: {str(err).splitlines()[0][:200]}") from None
