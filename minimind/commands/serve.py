"""Serve models over an OpenAI-compatible HTTP API (/v1/models, /v1/chat/completions, /v1/completions).

  python -m minimind serve --model checkpoints/minimind-tang --port 8000
  python -m minimind serve --model base/ --adapter poems=runs/lora1/checkpoints/step-500 --port 8000
  MINIMIND_API_KEY=secret python -m minimind serve --model base/   # clients must send the key

A request body over --max-request-mb (MINIMIND_MAX_REQUEST_MB, default 1) is refused with 413
before it is read.

Each model is served under its folder name (or NAME for an adapter); GET /v1/models lists them.
"""

from __future__ import annotations

import argparse
import os

from pathlib import Path

from ..errors import CheckpointError, ConfigError

HELP = "serve models over an OpenAI-compatible HTTP API"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="checkpoints/minimind-tang", help="model folder to serve")
    p.add_argument("--name", default=None, help="name to serve the model under (default: its folder name)")
    p.add_argument("--adapter", action="append", default=[], metavar="NAME=DIR",
                   help="also serve a LoRA adapter on top of --model as NAME (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on")
    p.add_argument("--max-queue", type=int, default=32,
                   help="requests running or waiting at once; more are refused with 429")
    p.add_argument("--max-batch", type=int, default=16,
                   help="sequences a model decodes together per step (1 = one request at a time)")
    p.add_argument("--threads", type=int, default=None, help="PyTorch threads per matmul (default: PyTorch's)")
    p.add_argument("--max-request-mb", type=float, default=None,
                   help="largest request body in MB (default: MINIMIND_MAX_REQUEST_MB, else 1)")


def parse_adapters(items: list[str]) -> dict[str, str]:
    adapters = {}
    for item in items:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            raise ConfigError(f"--adapter takes NAME=DIR, got {item!r}")
        adapters[name] = folder
    return adapters


def run(args) -> int:
    import torch
    import uvicorn

    from ..serving import ModelRegistry, create_app
    from ..serving.throttle import LoginThrottle
    from ..serving.guards import max_request_bytes

    if not Path(args.model).exists():
        raise CheckpointError(f"{args.model}: no such model folder (pass --model DIR with a trained model, "
                              "e.g. runs/<id>/checkpoints/step-N, or train one with `python -m minimind train`)")
    if args.threads:
        torch.set_num_threads(args.threads)
    registry = ModelRegistry(max_batch=args.max_batch)
    base = registry.add_folder(args.model, name=args.name, lazy=False)
    for name, folder in parse_adapters(args.adapter).items():
        registry.add_folder(args.model, name=name, adapter=folder, lazy=False)
    api_key = os.environ.get("MINIMIND_API_KEY") or None
    limit = max_request_bytes(args.max_request_mb if args.max_request_mb is not None
                              else os.environ.get("MINIMIND_MAX_REQUEST_MB"))
    app = create_app(registry, api_key=api_key, max_queue=args.max_queue, max_request_bytes=limit,
                     throttle=LoginThrottle.from_env(os.environ))
    auth = "API key required" if api_key else "no API key (set MINIMIND_API_KEY to require one)"
    print(f"serving {', '.join(registry.names())} at http://{args.host}:{args.port}/v1 ({auth}); "
          f"base model: {base}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
