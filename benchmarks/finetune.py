"""Fine-tuning cost: LoRA and QLoRA vs full fine-tuning of the `small` preset, step time and peak memory.

Each mode is built by the trainer's own code (minimind.training.modes.build_model
from a saved random `small` model; LoRA rank 16 on all seven linear layers;
QLoRA loads the base through bitsandbytes NF4 with double quantization) and
stepped as the trainer steps it: the trainer's precision for this device,
forward + backward + clip + AdamW over the trainable weights only, batch 4 × 256.
On a GPU (`bench --device cuda`) QLoRA runs bitsandbytes' CUDA 4-bit kernels and
memory is the peak GPU memory allocated.

Step time: all three models live in one process and take steps in turn after a
warm-up (medians). Peak memory: each mode again in a fresh child process, the
kernel's high-water mark of resident memory (VmHWM) from just before the model
is loaded to the end of two steps: weights, optimizer state, activations and
gradients, everything the mode allocates.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

NAME = "finetune"
DESCRIPTION = "LoRA and QLoRA vs full fine-tune of the small preset: step time and peak memory"
HEADLINE = ["lora step time vs full", "qlora step time vs full", "lora peak memory vs full",
            "qlora peak memory vs full"]
MODES = ("sft", "lora", "qlora")
LABELS = {"sft": "full fine-tune", "lora": "LoRA r=16", "qlora": "QLoRA r=16 (NF4 base)"}
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "tang_poems_sample.jsonl"
BATCH, SEQ = 4, 256


def _base(folder: Path, tiny: bool) -> Path:
    """A random `small` model + a tokenizer (trained on the shipped samples) saved in `folder`."""
    import torch

    from minimind import MiniMindConfig, MiniMindForCausalLM
    from minimind.tokenizer import build_tokenizer, save_tokenizer

    texts = [json.loads(line)["text"] for line in SAMPLES.open(encoding="utf-8")]
    tokenizer = build_tokenizer(texts, vocab_size=512 if tiny else 6400)
    overrides = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4) if tiny else {}
    torch.manual_seed(0)
    model = MiniMindForCausalLM(MiniMindConfig.from_preset("small", vocab_size=len(tokenizer), **overrides))
    model.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    return folder


def _trainer_step(mode: str, folder: Path, seq: int, device: str = "cpu"):
    """(step function, trainable parameters, total parameters, precision) for `mode`, set up by the
    trainer's code."""
    import torch

    from minimind.tokenizer import load_tokenizer
    from minimind.training import TrainConfig
    from minimind.training.objectives.language_model import LanguageModel
    from minimind.training.optimizers import make_optimizer
    from minimind.training.modes import build_model, count_parameters, trainable_parameters
    from minimind.training.precision import Precision, bf16_supported

    cfg = TrainConfig.from_dict({"mode": mode, "model": {"init_from": str(folder)}, "data": {"files": ["x"]},
                                 "lora": {"rank": 16, "alpha": 32, "dropout": 0.05}})
    kind = device.split(":")[0]
    cfg = cfg.resolved(kind, bf16_supported(device))
    precision = Precision(cfg.precision, kind)
    tokenizer = load_tokenizer(folder)
    model = build_model(cfg, tokenizer, device, precision.dtype).train()
    optimizer = make_optimizer(model, cfg, device)
    params = trainable_parameters(model)
    vocab = model.config.vocab_size if hasattr(model, "config") else len(tokenizer)
    ids = torch.randint(5, min(vocab, len(tokenizer)), (BATCH, seq), generator=torch.Generator().manual_seed(1))
    ids = ids.to(device)
    batch = {"input_ids": ids, "labels": ids}

    def step() -> float:
        with precision.autocast():
            loss, _ = LanguageModel(precision, None).loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    trainable, total = count_parameters(model)
    return step, trainable, total, cfg.precision


def child(mode: str, folder: str, seq: int) -> dict:
    """Peak memory of building `mode` and taking two steps, in this fresh process: resident
    memory on a CPU, allocated GPU memory on a GPU."""
    import warnings

    import bitsandbytes  # noqa: F401  (everything any mode imports comes before the baseline)
    import peft  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401

    from benchmarks._harness import bench_device, peak_rss_since_reset_kb, reset_peak_rss

    warnings.filterwarnings("ignore")
    device = bench_device()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step, *_ = _trainer_step(mode, Path(folder), seq, device)
        step()
        step()
        return {"peak_mb": (torch.cuda.max_memory_allocated() - before) / 2**20, "idle_mb": before / 2**20}
    before = reset_peak_rss()
    step, *_ = _trainer_step(mode, Path(folder), seq)
    step()
    step()
    return {"peak_mb": (peak_rss_since_reset_kb() - before) / 1024, "idle_mb": before / 1024}


def run(quick: bool = False, tiny: bool = False) -> dict:
    import warnings

    from benchmarks._harness import bench_device, interleaved_medians, run_child

    warnings.filterwarnings("ignore")  # bitsandbytes warns about casts on every call
    seq = 32 if tiny else SEQ
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = _base(Path(tmp) / "base", tiny)
        steps, info = {}, {}
        for mode in MODES:
            steps[mode], trainable, total, precision = _trainer_step(mode, folder, seq, bench_device())
            info[mode] = (trainable, total, precision)
        times = interleaved_medians(steps, repeats=1 if tiny else 2 if quick else 7, warmup=1 if tiny else 2)
        memory = {mode: run_child("benchmarks.finetune", "--child", mode, str(folder), str(seq)) for mode in MODES}
    for mode in MODES:
        trainable, total, precision = info[mode]
        rows.append({"mode": LABELS[mode], "precision": precision, "trainable params": f"{trainable:,}",
                     "trainable %": 100.0 * trainable / total, "step ms": times[mode] * 1000,
                     "tokens/s": BATCH * seq / times[mode], "step time vs full": times[mode] / times["sft"],
                     ("peak GPU MB (fresh process)" if bench_device() != "cpu" else "peak MB (fresh process)"):
                         memory[mode]["peak_mb"],
                     "peak vs full": memory[mode]["peak_mb"] / memory["sft"]["peak_mb"]})
    summary = {}
    for mode in ("lora", "qlora"):
        summary[f"{mode} step time vs full"] = times[mode] / times["sft"]
        summary[f"{mode} peak memory vs full"] = memory[mode]["peak_mb"] / memory["sft"]["peak_mb"]
    summary.update({f"{mode} peak MB": memory[mode]["peak_mb"] for mode in MODES})
    summary["idle process MB (not counted)"] = memory["sft"]["idle_mb"]
    summary["batch"] = f"{BATCH} x {seq} tokens"
    summary["device"] = bench_device()
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "FOLDER", "SEQ"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], int(args.child[2]))))
        return
    from benchmarks._harness import print_result

    result = run(args.quick, args.tiny)
    print_result(result)


if __name__ == "__main__":
    main()
