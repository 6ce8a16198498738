"""Timing and memory helpers shared by the benchmarks."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench_device() -> str:
    """The device the benchmarks measure on: `python -m minimind bench --device` (via
    MINIMIND_BENCH_DEVICE), "cpu" by default."""
    return os.environ.get("MINIMIND_BENCH_DEVICE", "cpu")


def sync(device: str) -> None:
    """Wait for queued GPU work, so that a timer around it measures it."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int = 5,
                        warmup: int = 1) -> dict[str, float]:
    """Median seconds per function, alternating between them so drift hits all alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in samples.items()}


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def reset_peak_rss() -> int:
    """Reset the kernel's high-water mark (VmHWM) and return current RSS in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kb("VmRSS")


def peak_rss_since_reset_kb() -> int:
    return _status_kb("VmHWM")


def run_child(module: str, *args: str, timeout: int = 600) -> dict:
    """Run `python -m module args...` in a fresh process and parse the JSON it prints last."""
    out = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> dict:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "threads": torch.get_num_threads(), "python": platform.python_version(),
            "torch": torch.__version__}


def fmt(value) -> str:
    """A number as a person reads it: 1,234 / 12.3 / 0.123 / 1.23e-05; anything else as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value).replace("|", "/").replace("\n", " ")
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    size = abs(value)
    if size >= 100:
        return f"{value:,.0f}"
    if size >= 10:
        return f"{value:.1f}"
    if size >= 0.01 or size == 0:
        return f"{value:.3g}" if size < 1 else f"{value:.2f}"
    return f"{value:.2e}"


def table(rows: list[dict]) -> str:
    """A GitHub-markdown table of dict rows (the columns: every key, in order of first appearance)."""
    if not rows:
        return "(no rows)"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def print_result(result: dict) -> None:
    """What a benchmark run alone (`python -m benchmarks.NAME`) prints: the machine, its table, its summary."""
    import json

    print(machine())
    print(table(result["rows"]))
    if result.get("summary"):
        print(json.dumps(result["summary"], indent=1, ensure_ascii=False, default=str))


def standalone(run: Callable[..., dict], description: str) -> None:
    """`python -m benchmarks.NAME [--quick] [--tiny]` for a benchmark whose run() takes (quick, tiny)."""
    import argparse

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    print_result(run(args.quick, args.tiny))


def fine_tune_main(run, doc: str, minutes_help: str, adapters: str, options: dict | None = None) -> None:
    """The command line of a benchmark that fine-tunes the shipped model for a budget (dpo, grpo):
    --quick / --tiny, the budget, the weights that train, and TrainConfig overrides for sweeps;
    `options` {name: argparse keywords} adds a benchmark's own, passed to `run` by name (dashes as
    underscores)."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--minutes", type=float, help=minutes_help)
    parser.add_argument("--adapters", default=adapters, help="full and/or lora, comma-separated")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="TrainConfig override, as for `minimind train --set` (for sweeps)")
    for name, keywords in (options or {}).items():
        parser.add_argument(f"--{name}", **keywords)
    args = parser.parse_args()
    chosen = tuple("" if a == "full" else a for a in args.adapters.split(","))
    own = {name.replace("-", "_"): getattr(args, name.replace("-", "_")) for name in options or {}}
    print_result(run(args.quick, args.tiny, args.minutes, chosen, tuple(args.overrides), **own))


def last_step_weights(model, checkpoint: Path) -> bool:
    """Put the weights of a run's last step into `model` (loaded from `checkpoint`, not merged) in
    place of their moving average (optim.ema), which the model folder holds: the same run without
    the average, scored by the same code. False (and `model` as it was) where the checkpoint holds no
    average."""
    import torch

    from minimind.training.checkpoint import load_average
    from minimind.training.ema import TRAINED

    tensors = load_average(Path(checkpoint))
    if tensors is None:
        return False
    saved = {name[len(TRAINED):]: t for name, t in tensors.items() if name.startswith(TRAINED)}
    params = dict(model.named_parameters())
    assert saved.keys() <= params.keys(), sorted(saved.keys() - params.keys())[:3]
    with torch.no_grad():
        for name, tensor in saved.items():
            params[name].copy_(tensor)
    return True
