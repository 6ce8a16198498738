"""`python -m minimind <command>`: a thin face over the library.

Each command lives in `minimind/commands/<name>.py` and defines `HELP` (one
line), `add_arguments(parser)` and `run(args) -> int`. This file only finds
them, parses arguments and turns a `MiniMindError` into a one-line message.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import commands
from .errors import MiniMindError


def command_modules() -> dict:
    """Every module in `minimind.commands`, keyed by its command name."""
    found = {}
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            # `import_` is the `import` command (a module cannot be named after a keyword)
            name = info.name.rstrip("_").replace("_", "-")
            found[name] = importlib.import_module(f"{commands.__name__}.{info.name}")
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m minimind",
        description="MiniMind: train, chat with and export a small language model.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in command_modules().items():
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__,
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" / "Writing model shards" bars: noise in a terminal
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 1
    try:
        return int(args._run(args) or 0)
    except MiniMindError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
