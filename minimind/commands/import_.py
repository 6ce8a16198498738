"""Import a Llama-family model (Llama, Mistral, Qwen2, Qwen3) from a folder or the Hugging Face Hub
as a MiniMind model folder, which every command then takes (train --init-from, chat, serve, export).

  python -m minimind import HuggingFaceTB/SmolLM2-135M-Instruct --out models/smollm2
  python -m minimind import ./Qwen2.5-0.5B --out models/qwen

The weights, tokenizer, chat template, generation config and license files are the source's; a
Hub download takes only safetensors weights, config and tokenizer files (HF_TOKEN for gated
models; MINIMIND_MAX_MODEL_GB caps the size).
"""

from __future__ import annotations

import argparse
import sys

HELP = "import a Llama/Mistral/Qwen2/Qwen3 model from the Hub or a folder as a MiniMind model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="a Hugging Face model id (owner/name) or a model folder on this machine")
    p.add_argument("--out", required=True, help="new folder for the imported model")
    p.add_argument("--max-gb", type=float, default=None,
                   help="refuse a Hub model whose weights are larger (default: MINIMIND_MAX_MODEL_GB, else no limit)")


def run(args) -> int:
    from ..hub import import_model, max_model_gb

    def progress(done: int, total: int, name: str) -> None:
        if name:
            print(f"  fetching {name} ({done / 1e6:,.0f} of {total / 1e6:,.0f} MB done)", file=sys.stderr)

    report = import_model(args.source, args.out, max_gb=args.max_gb or max_model_gb(None), progress=progress)
    print(f"imported {report.source} ({report.architecture}, {report.parameters / 1e6:,.1f}M parameters, "
          f"{report.dtype}) into {report.folder} in {report.seconds:.1f}s")
    print(f"tokenizer: {report.tokenizer}; chat template: {'yes' if report.chat_template else 'none'}; "
          f"license: {report.license}")
    return 0
