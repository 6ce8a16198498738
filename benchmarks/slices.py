"""GPU slices: what training in ZeroGPU-style slices costs against the same run uninterrupted.

One LoRA run of the shipped MiniMind-Tang on the shipped chat sample (batch 8 x 128 tokens, r=16,
no compilation on either side) is trained twice on the benchmark's device, same settings and data:
whole, then in slices through `minimind.training.slices.train_in_slices` with the `spaces` package's
decorator, which off ZeroGPU runs each slice in this process: ZeroGPU's path minus the platform
(its queue and the fork of a worker, which a Space adds to every slice). The slice length is a
third of the whole run's wall time (at least 10 s), so each run is cut into a few slices whatever
the device. Reported: wall seconds both ways, the slices, the seconds each slice costs on top
(set-up, and the end of a slice left unused for want of room for one more step and a save), and
the largest loss difference at any step (exact resume: 0 up to float rounding).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

NAME = "slices"
DESCRIPTION = "a LoRA run in ZeroGPU-style GPU slices vs the same run uninterrupted: wall time, cost per slice"
HEADLINE = ["seconds each slice costs", "max |Δloss| sliced vs whole"]
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "minimind-tang"
CHATS = ROOT / "samples" / "tang_chat_sample.jsonl"


def _config(run: Path, steps: int, tiny: bool):
    from benchmarks._harness import bench_device
    from minimind.training import TrainConfig

    base = {"init_from": str(SHIPPED)} if not tiny else {"preset": "nano", "overrides": {
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2}}
    return TrainConfig.from_dict({
        "mode": "lora" if not tiny else "pretrain", "model": base,
        "data": {"files": [str(CHATS)], "seq_len": 128, "val_fraction": 0.05, "cache_dir": str(run.parent / "cache")},
        "lora": {"rank": 16, "alpha": 32}, "max_steps": steps, "batch_size": 8, "eval_every": 100000,
        "save_every": 100000, "log_every": 1, "compile": "off", "device": bench_device(), "run_dir": str(run)})


def _losses(run: Path) -> dict[int, float]:
    from minimind.training import RunDir

    return {r["step"]: r["loss"] for r in RunDir(run).read_metrics() if "loss" in r}


def run(quick: bool = False, tiny: bool = False) -> dict:
    from minimind.training import RunDir, train
    from minimind.training.slices import spaces_gpu, train_in_slices

    steps = 30 if tiny else (120 if quick else 400)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        started = time.perf_counter()
        train(_config(tmp / "whole", steps, tiny))
        whole_s = time.perf_counter() - started
        slice_s = max(10.0, whole_s / 3)
        cfg = _config(tmp / "sliced", steps, tiny)
        run_dir = RunDir(tmp / "sliced").create()
        cfg.save(run_dir.config_file)
        count = []
        started = time.perf_counter()
        status = train_in_slices(run_dir.path, slice_s, gpu=spaces_gpu,
                                 on_slice=lambda k, s: count.append(k) if s is not None else None)
        sliced_s = time.perf_counter() - started
        whole, sliced = _losses(tmp / "whole"), _losses(tmp / "sliced")
    slices = len(count)
    differences = [abs(whole[s] - sliced[s]) for s in whole if s in sliced]
    summary = {"seconds each slice costs": (sliced_s - whole_s) / max(slices - 1, 1),
               "max |Δloss| sliced vs whole": max(differences) if differences else float("nan"),
               "slices": slices, "slice seconds": slice_s, "steps": steps, "finished": status.get("state")}
    rows = [{"run": "whole (one call)", "steps": steps, "wall s": whole_s, "slices": 1},
            {"run": f"in slices of {slice_s:.0f} s", "steps": status.get("step"), "wall s": sliced_s,
             "slices": slices, "s per slice on top": summary["seconds each slice costs"],
             "max |Δloss|": summary["max |Δloss| sliced vs whole"]}]
    return {"rows": rows, "summary": summary}


def main() -> None:
    from benchmarks._harness import standalone

    standalone(run, __doc__)


if __name__ == "__main__":
    main()
