"""Export a checkpoint to formats that run elsewhere; each export is reloaded and verified.

  python -m minimind export --model runs/x/checkpoints/step-1000 --format llama,gguf-q8_0 \\
      --out exports/ --eval-file heldout.txt
  python -m minimind export --model base/ --adapter runs/lora/checkpoints/step-200 --format merged --out exports/

Each format goes to OUT/<format>/ with a README.md card. Formats: hf, llama, merged,
int8, bnb-8bit, bnb-nf4, gguf-f16, gguf-q8_0, onnx, onnx-int8 (or "all": every format that
applies; the ONNX ones when `pip install onnx onnxscript onnxruntime` has been run).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

HELP = "export a model (hf, llama, merged LoRA, int8, bitsandbytes, GGUF, ONNX) and verify each export"

EVAL_CHARS = 20000  # the held-out text is cut to this many characters: enough for a stable perplexity


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..export.formats import DTYPES, FORMATS

    p.add_argument("--model", required=True, help="MiniMind model folder (or a LoRA adapter folder)")
    p.add_argument("--adapter", default=None, help="LoRA adapter folder to merge into --model")
    p.add_argument("--format", required=True,
                   help=f"comma-separated formats: {', '.join(FORMATS)}, or 'all'")
    p.add_argument("--out", required=True, help="folder that receives one subfolder per format")
    p.add_argument("--eval-file", default=None,
                   help="held-out text (.txt lines or .jsonl records) for perplexity; default: the model's own "
                        "held-out text (its run's validation split, else the heldout_sample it ships with)")
    p.add_argument("--eval-chars", type=int, default=EVAL_CHARS, help="use at most this many characters of it")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="float dtype of hf/llama/merged weights and of the unquantized parts of int8/bnb "
                        "(default float32)")
    p.add_argument("--merged-as", choices=("llama", "hf"), default=None,
                   help="architecture of a merged export (default: llama for dense models)")
    p.add_argument("--no-verify", action="store_true", help="skip reloading and scoring each export")
    p.add_argument("--overwrite", action="store_true", help="replace existing export folders")


def read_eval_file(path: str, limit: int) -> list[str]:
    """Documents of a held-out file, cut to `limit` characters in all."""
    from ..errors import ExportError
    from ..tokenizer import iter_texts

    if not Path(path).is_file():
        raise ExportError(f"{path}: no such held-out file")
    docs, total = [], 0
    try:
        for doc in iter_texts([path]):
            docs.append(doc[:limit - total])
            total += len(docs[-1])
            if total >= limit:
                break
    except (UnicodeDecodeError, ValueError, KeyError) as err:
        raise ExportError(f"{path}: cannot read held-out text ({err})") from err
    return docs


def parse_formats(text: str, model_dir: str, adapter: str | None) -> list[str]:
    """The requested formats; "all" means every format that applies to this model."""
    import json

    from ..checkpoint import is_adapter, is_classifier, load_tokenizer_for
    from ..export.formats import FORMATS
    from ..vocabulary import has_added_characters

    names = [f.strip() for f in text.split(",") if f.strip()]
    if names != ["all"]:
        return names
    has_adapter = adapter is not None or is_adapter(model_dir)
    config_dir = Path(model_dir)
    if is_adapter(config_dir):
        from ..checkpoint import adapter_base

        config_dir = Path(adapter_base(config_dir))
    config_file = config_dir / "config.json"
    from types import SimpleNamespace

    from ..export.formats import lstm_refusal
    from ..export.llama import not_llama_shaped
    from ..export.onnx import missing_packages, onnx_refusal

    fields = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    config = SimpleNamespace(**fields)
    not_llama = not_llama_shaped(config) is not None  # experts, other positions, other families
    extended = has_added_characters(load_tokenizer_for(adapter or model_dir))  # GGUF cannot carry them
    no_onnx = bool(missing_packages()) or onnx_refusal(config) is not None  # not installed, or experts
    if is_classifier(config_dir):
        return [] if no_onnx else [f for f in FORMATS if f.startswith("onnx")]  # a classifier: ONNX only
    return [f for f, spec in FORMATS.items()
            if not (spec.dense_only and not_llama) and (f != "merged" or has_adapter)
            and not (extended and f.startswith("gguf")) and not (no_onnx and f.startswith("onnx"))
            and lstm_refusal(f, config) is None]


def run(args) -> int:
    from transformers.utils import logging as hf_logging

    from ..export import export_many
    from ..export.card import human_size

    hf_logging.disable_progress_bar()  # this process only prints the table
    # bitsandbytes logs that an optional CPU kernel package is absent: nothing a user need do
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    formats = parse_formats(args.format, args.model, args.adapter)
    eval_text = read_eval_file(args.eval_file, args.eval_chars) if args.eval_file else None
    print(f"exporting {args.model}{' + ' + args.adapter if args.adapter else ''} to {', '.join(formats)}",
          flush=True)
    results = export_many(args.model, formats, args.out, adapter=args.adapter, dtype=args.dtype,
                          merged_as=args.merged_as, eval_text=eval_text,
                          eval_name=Path(args.eval_file).name if args.eval_file else None,
                          verify=not args.no_verify, overwrite=args.overwrite,
                          on_result=lambda r: print(f"  {r.format}: {'FAILED' if r.error else 'ok'}", flush=True))
    rows = [("format", "size", "perplexity", "delta", "greedy", "path")]
    for r in results:
        if r.error:
            rows.append((r.format, "-", "-", "-", "-", f"FAILED: {r.error}"))
        elif r.labels_total is not None:  # a classifier: label agreement on the held-out texts
            rows.append((r.format, human_size(r.size_bytes), "-", "-", f"labels {r.labels_agree}/{r.labels_total}",
                         str(r.path)))
        elif r.perplexity is None:
            rows.append((r.format, human_size(r.size_bytes), "-", "-", "-", str(r.path)))
        else:
            rows.append((r.format, human_size(r.size_bytes), f"{r.perplexity:.4g}", f"{r.delta:+.2%}",
                         f"{r.greedy_match}/{r.greedy_tokens}", str(r.path)))
    scored = [r for r in results if r.source_perplexity is not None]
    if scored:
        print(f"source perplexity {scored[0].source_perplexity:.4g} on {scored[0].eval_name}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    return 2 if any(r.error for r in results) else 0
