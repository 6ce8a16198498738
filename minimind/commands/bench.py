"""Run the benchmarks in the repository's `benchmarks/` folder and write the table.

  python -m minimind bench --quick                 # every benchmark, short settings (< 10 min on 2 cores)
  python -m minimind bench --only train_throughput,decode_throughput
  python -m minimind bench --list

Each benchmark runs in its own child process (a crash or a timeout becomes a
failed row, not a failed suite) and compares our code with a reference in
that same process. Results go to benchmarks/RESULTS.md and results.json;
benchmarks left out with --only keep their previous results there.

The benchmarks are part of the repository, not of the library: this command
only finds them, so it needs a checkout (not an installed wheel).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from ..errors import MiniMindError

HELP = "run the benchmarks against their references and write benchmarks/RESULTS.md"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="short settings: the whole suite in under 10 minutes")
    p.add_argument("--only", default="", metavar="NAME[,NAME]", help="run only these benchmarks")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--threads", type=int, default=0, help="PyTorch threads in each benchmark (0: PyTorch's default)")
    p.add_argument("--timeout", type=int, default=0, help="seconds before a benchmark is stopped (0: 30 min, 2 h without --quick)")
    p.add_argument("--out", default=str(BENCHMARKS), help="folder for RESULTS.md and results.json")
    p.add_argument("--device", default="cpu", help="device the benchmarks that support one measure on (cpu, cuda)")
    p.add_argument("--tiny", action="store_true", help="toy sizes, for the smoke test (only some benchmarks support it)")


def _suite():
    if not (BENCHMARKS / "__init__.py").is_file():
        raise MiniMindError(f"{BENCHMARKS} not found: the benchmarks live in the repository checkout")
    root = str(BENCHMARKS.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    return importlib.import_module("benchmarks._suite")


def run(args) -> int:
    suite = _suite()
    available = suite.discover()
    if args.list:
        for name, description in available.items():
            print(f"{name:20s} {description}")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        raise MiniMindError(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    timeout = args.timeout or (1800 if args.quick else 7200)
    command = "python -m minimind bench" + "".join(
        f" {flag}" for flag, on in [("--quick", args.quick), ("--tiny", args.tiny)] if on)
    command += f" --only {args.only}" if args.only else ""
    command += f" --threads {args.threads}" if args.threads else ""
    command += f" --device {args.device}" if args.device != "cpu" else ""
    records = suite.run_suite(names, quick=args.quick, tiny=args.tiny, threads=args.threads,
                              timeout=timeout, out_dir=Path(args.out), command=command, device=args.device)
    failed = [r["name"] for r in records if r["status"] != "ok"]
    print(f"wrote {Path(args.out) / 'RESULTS.md'}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
