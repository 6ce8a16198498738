"""Distillation: a `nano` student learns a small corpus from the shipped MiniMind-Shakespeare
model (the `mini` preset, trained on 32 plays) for N minutes, against the same student
pretrained from scratch on the same corpus for the same N minutes.

The student's corpus is one play, samples/shakespeare_sample.txt (*The Comedy of Errors*,
88 K characters): the case distillation is for, a small corpus of your own and a larger model
that knows the language. (On all 32 training plays the shipped teacher is no help: a `nano`
trained from scratch for 10 minutes already scores better than it; benchmarks/NOTES.md.)
Both legs are `minimind.training.train` runs with a time budget (the whole call: data,
probe, steps, evaluations, save), the same tokenizer (the teacher's: distillation needs one),
the same seed and learning rate, and the same evaluation code (minimind.evaluate) on the same
held-out plays, which neither the teacher nor the students ever saw. The distilled student
pays for the teacher's forward passes out of its own budget (once per row: the teacher's
logits are cached, distill.cache_mb). Without ../shared/corpora the teacher's held-out sample
stands in for the held-out plays.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

NAME = "distill"
DESCRIPTION = "nano student distilled from MiniMind-Shakespeare vs the same student from scratch, equal minutes"
HEADLINE = ["distilled / scratch held-out BPC"]
ROOT = Path(__file__).resolve().parents[1]
TEACHER = ROOT / "checkpoints" / "minimind-shakespeare"
CACHE = ROOT / ".cache" / "distill"
MINUTES = 5.0
CORPUS = ROOT / "samples" / "shakespeare_sample.txt"


def data() -> tuple[Path, list[str], str]:
    """(the student's training file, held-out documents, where they come from)."""
    from minimind.data import DataConfig, iter_texts
    from scripts.corpora import SHAKESPEARE, write_shakespeare_split

    if SHAKESPEARE.is_file():
        _, held_file = write_shakespeare_split(CACHE / "shakespeare")
        held = list(iter_texts([str(held_file)], config=DataConfig(split="paragraph")))
        return CORPUS, held, "The Comedy of Errors / the 4 held-out plays (scripts/corpora.py)"
    held = list(iter_texts([str(TEACHER / "heldout_sample.txt")], config=DataConfig(split="paragraph")))
    return CORPUS, held, "The Comedy of Errors / the teacher's held-out sample"


def leg(mode: str, seconds: float, train_file: Path, held: list[str], tiny: bool) -> dict:
    import torch

    from benchmarks._harness import bench_device
    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.evaluate import evaluate_documents
    from minimind.training import TrainConfig, train

    run_dir = CACHE / "runs" / mode
    shutil.rmtree(run_dir, ignore_errors=True)
    raw = {"mode": mode, "model": {"preset": "nano", "tokenizer": str(TEACHER)},
           "data": {"files": [str(train_file)], "split": "paragraph", "cache_dir": str(CACHE / "data")},
           "time_budget_s": seconds, "run_dir": str(run_dir), "device": bench_device(), "seed": 42}
    if mode == "distill":
        raw["distill"] = {"teacher": str(TEACHER)}
    if tiny:
        raw["model"]["overrides"] = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                     "num_attention_heads": 4, "num_key_value_heads": 2}
    config = TrainConfig.from_dict(raw)
    start = time.perf_counter()
    status = train(config)
    wall = time.perf_counter() - start
    resolved = TrainConfig.load(run_dir / "config.yaml")
    model = load_model(status["final_checkpoint"], device=bench_device())
    result = evaluate_documents(model, load_tokenizer_for(TEACHER), held, context=resolved.data.seq_len)
    return {"student": f"nano ({sum(p.numel() for p in model.parameters()):,} parameters)",
            "training": "distilled from MiniMind-Shakespeare" if mode == "distill" else "from scratch (pretrain)",
            "held-out BPC": result.bpc, "steps": status.get("step"), "tokens seen": status.get("tokens"),
            "settings": (f"batch {resolved.batch_size} x {resolved.data.seq_len}, lr {resolved.optim.lr:g}, "
                         f"{resolved.precision}" + (f", T {resolved.distill.temperature:g}, KL weight "
                                                     f"{resolved.distill.kl_weight:g}, CE weight "
                                                     f"{resolved.distill.ce_weight:g}" if mode == "distill" else "")),
            "train() wall s": wall, "threads": torch.get_num_threads()}


def run(quick: bool = False, tiny: bool = False, minutes: float | None = None) -> dict:
    import torch

    from minimind.checkpoint import load_model, load_tokenizer_for
    from minimind.evaluate import evaluate_documents

    seconds = 60.0 * (minutes or (0.25 if tiny else 2.0 if quick else MINUTES))
    train_file, held, source = data()
    if tiny:
        held = held[:20]
    teacher = load_model(TEACHER)
    teacher_bpc = evaluate_documents(teacher, load_tokenizer_for(TEACHER), held,
                                     context=teacher.config.max_position_embeddings).bpc
    rows = [{"student": f"teacher: MiniMind-Shakespeare ({sum(p.numel() for p in teacher.parameters()):,} parameters)",
             "training": "shipped", "held-out BPC": teacher_bpc}]
    del teacher
    scratch = leg("pretrain", seconds, train_file, held, tiny)
    distilled = leg("distill", seconds, train_file, held, tiny)
    rows += [scratch, distilled]
    summary = {"distilled / scratch held-out BPC": distilled["held-out BPC"] / scratch["held-out BPC"],
               "distilled BPC": distilled["held-out BPC"], "scratch BPC": scratch["held-out BPC"],
               "teacher BPC": teacher_bpc, "budget s (each leg)": seconds, "data": source,
               "held-out characters": sum(len(d) for d in held), "threads": torch.get_num_threads()}
    return {"rows": rows, "summary": summary}


def main() -> None:
    import argparse

    from benchmarks._harness import print_result

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--minutes", type=float, help="budget of each leg (default 5; 2 with --quick)")
    args = parser.parse_args()
    result = run(args.quick, args.tiny, args.minutes)
    print_result(result)
    print(json.dumps(result["summary"], ensure_ascii=False))


if __name__ == "__main__":
    main()
