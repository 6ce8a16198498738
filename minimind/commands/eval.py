"""Score a model on held-out text: loss, perplexity and bits per character.

  python -m minimind eval --model checkpoints/minimind-tang --data heldout.jsonl

BPC (bits per character) compares models with different tokenizers; loss and
perplexity are per token of this model's tokenizer.
"""

from __future__ import annotations

import argparse
import json

HELP = "loss, perplexity and bits per character of a model on a text file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model folder (or LoRA adapter folder)")
    p.add_argument("--adapter", help="LoRA adapter folder applied on top of --model")
    p.add_argument("--data", required=True, nargs="+", help="text files (any corpus format)")
    p.add_argument("--text-field", help="record field holding the text (JSONL/CSV/parquet)")
    p.add_argument("--context", type=int, default=None, help="window length in tokens (default: min(512, model context))")
    p.add_argument("--max-chars", type=int, default=0, help="score only the first N characters (0 = all)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    from ..checkpoint import load_model, load_tokenizer_for
    from ..data import iter_texts
    from ..evaluate import evaluate_documents

    model = load_model(args.model, adapter=args.adapter)
    tokenizer = load_tokenizer_for(args.model)
    docs, chars = [], 0
    for text in iter_texts(args.data, text_field=args.text_field):
        if args.max_chars and chars + len(text) > args.max_chars:
            text = text[: args.max_chars - chars]
        docs.append(text)
        chars += len(text)
        if args.max_chars and chars >= args.max_chars:
            break
    result = evaluate_documents(model, tokenizer, docs, context=args.context)
    if args.json:
        print(json.dumps(result.as_dict()))
    else:
        print(f"{len(docs):,} documents, {result.characters:,} characters, {result.tokens:,} tokens")
        print(f"loss {result.loss:.4f}  perplexity {result.perplexity:.2f}  bits/char {result.bpc:.4f}")
    return 0
