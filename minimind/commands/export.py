"""Export a checkpoint to formats that run elsewhere; each export is reloaded and verified.

  python -m minimind export --model runs/x/checkpoints/step-1000 --format llama,gguf-q8_0 \\
      --out exports/ --eval-file heldout.txt
  python -m minimind export --model base/ --adapter runs/lora/checkpoints/step-200 --format merged --out exports/
  python -m minimind export --model runs/x/checkpoints/step-1000 --format hf --out exports/ \\
      --push-to-hub your-name/minimind-x

Each format goes to OUT/<format>/ with a README.md card. Formats: hf, llama, merged,
int8, bnb-8bit, bnb-nf4, gguf-f16, gguf-q8_0, onnx, onnx-int8 (or "all": every format that
applies; the ONNX ones when their packages (requirements.txt) are installed).

--push-to-hub REPO publishes the export, once written and verified, to that Hugging Face Hub model
repo: private unless --public, with the token of HF_TOKEN (else the one `hf auth login` saved, else
asked for at the terminal; never stored). `python -m minimind publish` publishes an existing export.
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
                   help="held-out text (.txt lines or .jsonl/.json/.csv/.parquet records) for perplexity; a "
                        "labelled file (text + label) also gives a classifier's accuracy; default: the model's own "
                        "held-out text (its run's validation split, else the heldout_sample it ships with)")
    p.add_argument("--eval-chars", type=int, default=EVAL_CHARS, help="use at most this many characters of it")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="float dtype of hf/llama/merged weights and of the unquantized parts of int8/bnb "
                        "(default float32)")
    p.add_argument("--merged-as", choices=("llama", "hf"), default=None,
                   help="architecture of a merged export (default: llama for dense models)")
    p.add_argument("--no-verify", action="store_true", help="skip reloading and scoring each export")
    p.add_argument("--overwrite", action="store_true", help="replace existing export folders")
    p.add_argument("--push-to-hub", metavar="REPO", default=None,
                   help="then publish the verified export (one --format) to this Hugging Face Hub model repo "
                        "(owner/name); token: HF_TOKEN, else asked for")
    p.add_argument("--public", action="store_true", help="with --push-to-hub: a new repo is public (default private)")


def hub_token(repo: str, formats: list[str], verify: bool) -> str:
    """Everything --push-to-hub needs, checked before the export runs (which may take minutes): one
    format, verification on, a valid repo id, and a token (HF_TOKEN, else typed at a terminal)."""
    from ..errors import HubError
    from ..hub.publish import check_repo_id

    if len(formats) != 1:
        raise HubError(f"--push-to-hub publishes one export: pick one --format (got {', '.join(formats)})")
    if not verify:
        raise HubError("--push-to-hub publishes verified exports only: drop --no-verify")
    check_repo_id(repo)
    return terminal_token()


def terminal_token() -> str:
    """huggingface_hub's token (HF_TOKEN, or the saved login), else one typed at the terminal and
    kept in memory only; HubError without either."""
    import getpass
    import sys

    from ..errors import HubError
    from ..hub.publish import NO_TOKEN, resolve_token

    try:
        return resolve_token()
    except HubError:
        if not sys.stdin.isatty():
            raise
    typed = getpass.getpass("Hugging Face token (write access; used for this upload only, not stored): ").strip()
    if not typed:
        raise HubError(NO_TOKEN)
    return typed


def read_eval_file(path: str, limit: int) -> tuple[list[str], list[str] | None]:
    """(texts, labels or None) of a held-out file, cut to `limit` characters in all (see
    `export.heldout.read_held_out`: a labelled file also scores a classifier's accuracy)."""
    from ..errors import ExportError, MiniMindError
    from ..export.heldout import read_held_out

    if not Path(path).is_file():
        raise ExportError(f"{path}: no such held-out file")
    try:
        return read_held_out(path, limit)
    except (MiniMindError, UnicodeDecodeError, ValueError, KeyError) as err:
        raise ExportError(f"{path}: cannot read held-out text ({err})") from err


def parse_formats(text: str, model_dir: str, adapter: str | None) -> list[str]:
    """The requested formats; "all" means every format that applies to this model."""
    from ..export import applicable_formats

    names = [f.strip() for f in text.split(",") if f.strip()]
    return applicable_formats(model_dir, adapter) if names == ["all"] else names


def run(args) -> int:
    from transformers.utils import logging as hf_logging

    from ..errors import ConfigError
    from ..export import export_many
    from ..export.card import human_size

    hf_logging.disable_progress_bar()  # this process only prints the table
    # bitsandbytes logs that an optional CPU kernel package is absent: nothing a user need do
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
    formats = parse_formats(args.format, args.model, args.adapter)
    if args.public and not args.push_to_hub:
        raise ConfigError("--public goes with --push-to-hub REPO")
    token = hub_token(args.push_to_hub, formats, not args.no_verify) if args.push_to_hub else None
    eval_text, eval_labels = read_eval_file(args.eval_file, args.eval_chars) if args.eval_file else (None, None)
    print(f"exporting {args.model}{' + ' + args.adapter if args.adapter else ''} to {', '.join(formats)}",
          flush=True)
    results = export_many(args.model, formats, args.out, adapter=args.adapter, dtype=args.dtype,
                          merged_as=args.merged_as, eval_text=eval_text, eval_labels=eval_labels,
                          eval_name=Path(args.eval_file).name if args.eval_file else None,
                          verify=not args.no_verify, overwrite=args.overwrite,
                          on_result=lambda r: print(f"  {r.format}: {'FAILED' if r.error else 'ok'}", flush=True))
    classify = any(r.classifier for r in results)
    rows = [("format", "size", "accuracy" if classify else "perplexity", "delta", "labels" if classify else "greedy",
             "path")]
    for r in results:
        if r.error:
            rows.append((r.format, "-", "-", "-", "-", f"FAILED: {r.error}"))
        elif r.labels_total is not None:  # a classifier: accuracy, and label agreement with the source
            accuracy, delta = "-", "-"
            if r.accuracy is not None:
                accuracy, delta = f"{r.accuracy:.2%}", f"{100 * (r.accuracy - r.source_accuracy):+.2f} pt"
            rows.append((r.format, human_size(r.size_bytes), accuracy, delta, f"{r.labels_agree}/{r.labels_total}",
                         str(r.path)))
        elif r.perplexity is None:
            rows.append((r.format, human_size(r.size_bytes), "-", "-", "-", str(r.path)))
        else:
            rows.append((r.format, human_size(r.size_bytes), f"{r.perplexity:.4g}", f"{r.delta:+.2%}",
                         f"{r.greedy_match}/{r.greedy_tokens}", str(r.path)))
    scored = [r for r in results if r.source_perplexity is not None]
    if scored:
        print(f"source perplexity {scored[0].source_perplexity:.4g} on {scored[0].eval_name}")
    scored = [r for r in results if r.source_accuracy is not None]
    if scored:
        print(f"source accuracy {scored[0].source_accuracy:.2%} on {scored[0].eval_name}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    if any(r.error for r in results):
        return 2
    if args.push_to_hub:
        push(results[0].folder, args.push_to_hub, token, args.public)
    return 0


def push(folder, repo: str, token: str, public: bool) -> None:
    """Publish one export folder and say where it went."""
    from ..hub.publish import publish

    print(f"publishing {folder} to the Hugging Face Hub as {repo} ({'public' if public else 'private'})", flush=True)
    url = publish(folder, repo, token=token, private=not public)
    print(f"published: {url}")
