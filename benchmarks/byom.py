"""Bring your own model: LoRA on an imported SmolLM2-135M-shaped model against TRL's SFTTrainer + peft
on the transformers original, and QLoRA on a Llama-3.2-1B-shaped import.

LoRA rows. One random LlamaForCausalLM with SmolLM2-135M's exact config (576 wide, 30 layers, 9/3
heads, 49,152-row tied vocabulary) is saved once and imported (`minimind import`). Both sides
train it on the same packed text (the shipped Tang poem sample, tokenized by the same tokenizer into
rows of SEQ tokens), batch BATCH, LoRA r=16, alpha 32, dropout 0.05 on the seven linear layers of
every block, AdamW at the same learning rate, no gradient checkpointing, for STEPS steps each
through its own trainer: ours is `minimind.training.train` on the import, the reference is
`trl.SFTTrainer` with `peft_config` on the original folder. Throughput is the median of each
trainer's step times after WARMUP steps (ours from metrics.jsonl, TRL's from a callback at each
step's end). Peak memory: each trainer again in a fresh process, the kernel's high-water mark of
resident memory from before loading to the end (on a GPU: peak allocated memory). Like for like
first (both fp32); then each trainer's default precision on this device, labelled.

Parity rows: the imported SmolLM2 shape and a small random Qwen2, Qwen3 and Mistral (each its own kind:
biases, q/k norms, a 128-token window) against their transformers originals on the same 256 held-out
tokens: the largest logit difference of our fp32 and bf16 models from transformers' fp32, beside
transformers' own bf16 from its fp32 (what bf16 costs anyway).

QLoRA row: Llama-3.2-1B's config (2048 wide, 16 layers, 32/8 heads, 128,256-row vocabulary, llama3
rotary scaling), random weights saved in bf16 and imported; our trainer's QLoRA (NF4 base, double
quantization, LoRA r=16 on all seven linear layers), batch 1 x 256: seconds per step and peak
resident memory of the whole process.

Every row of ours also shows the memory plan the trainer made before loading anything (the number the
page shows and refuses runs by) beside the process's measured peak.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

NAME = "byom"
DESCRIPTION = "LoRA on an imported SmolLM2-135M shape vs TRL SFTTrainer + peft; QLoRA on a Llama-3.2-1B shape"
HEADLINE = ["lora tokens/s vs trl (fp32)", "lora peak memory vs trl (fp32)"]
SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "tang_poems_sample.jsonl"
BATCH, SEQ, STEPS, WARMUP, LR = 4, 256, 12, 3, 2e-4
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                    rms_norm_eps=1e-5, tie_word_embeddings=True, rope_parameters={"rope_type": "default",
                                                                                   "rope_theta": 100000.0},
                    bos_token_id=0, eos_token_id=0)
LLAMA32_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
                  rms_norm_eps=1e-5, tie_word_embeddings=True, rope_parameters={
                      "rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                  bos_token_id=0, eos_token_id=0)
TINY = dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True, bos_token_id=0,
            eos_token_id=0)


def _texts() -> list[str]:
    return [json.loads(line)["text"] for line in SAMPLES.open(encoding="utf-8")]


def _source(folder: Path, shape: dict, dtype: str = "float32") -> Path:
    """A random LlamaForCausalLM of `shape` with a byte-level tokenizer (trained on the samples, ChatML
    tokens) saved as the Hub holds it."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from minimind.tokenizer import build_tokenizer

    tokenizer = build_tokenizer(_texts(), vocab_size=min(6400, shape["vocab_size"]))
    config = LlamaConfig(**{**shape, "pad_token_id": tokenizer.pad_token_id,
                            "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id},
                         dtype=dtype)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = LlamaForCausalLM(config)
    model.to(getattr(torch, dtype)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _corpus(folder: Path) -> Path:
    path = folder / "poems.jsonl"
    path.write_text("\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in _texts()) + "\n",
                    encoding="utf-8")
    return path


def ours(model: Path, corpus: Path, run: Path, precision: str, steps: int, seq: int, mode: str = "lora",
         batch: int = BATCH) -> dict:
    """Our trainer on the import: median step seconds after WARMUP, tokens per step."""
    from minimind.training import RunDir, TrainConfig, train

    device = _device()
    cfg = TrainConfig.from_dict({
        "mode": mode, "model": {"init_from": str(model)},
        "data": {"files": [str(corpus)], "seq_len": seq, "val_fraction": 0.05, "cache_dir": str(run.parent / "cache")},
        "lora": {"rank": 16, "alpha": 32, "dropout": 0.05, "target_modules": TARGETS},
        "optim": {"lr": LR, "warmup_steps": 0, "name": "adamw"}, "max_steps": steps, "batch_size": batch,
        "precision": precision, "device": device, "log_every": 1, "eval_every": 100000, "save_every": 100000,
        "compile": "off", "run_dir": str(run)})
    started = time.perf_counter()
    train(cfg)
    lines = [r for r in RunDir(run).read_metrics() if "loss" in r and "tokens_per_s" in r]
    rates = [r["tokens_per_s"] for r in lines[WARMUP:]] or [r["tokens_per_s"] for r in lines]
    planned = re.search(r"memory: this run needs about ([\d.]+) GB", RunDir(run).log_file.read_text(encoding="utf-8"))
    return {"tokens_per_s": statistics.median(rates), "seconds": time.perf_counter() - started,
            "precision": precision, "steps": len(lines),
            "planned_mb": float(planned.group(1)) * 1024 if planned else None}


def trl(source: Path, corpus: Path, out: Path, precision: str, steps: int, seq: int) -> dict:
    """TRL's SFTTrainer + peft LoRA on the original: median step seconds after WARMUP."""
    import torch
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    device = _device()
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
    dataset = load_dataset("json", data_files=str(corpus), split="train")
    marks: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            marks.append(time.perf_counter())

    config = SFTConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=BATCH, max_length=seq,
                       packing=True, dataset_text_field="text", learning_rate=LR, warmup_steps=0,
                       lr_scheduler_type="cosine", weight_decay=0.1, adam_beta2=0.95, max_grad_norm=1.0,
                       gradient_checkpointing=False, bf16=precision == "bf16", fp16=precision == "fp16",
                       use_cpu=not device.startswith("cuda"), logging_steps=1, save_strategy="no",
                       report_to="none", dataloader_num_workers=0, seed=42)
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=TARGETS,
                                                task_type="CAUSAL_LM"), callbacks=[Clock()])
    started = time.perf_counter()
    marks.append(started)
    trainer.train()
    durations = [b - a for a, b in zip(marks, marks[1:])][WARMUP:]
    return {"tokens_per_s": BATCH * seq / statistics.median(durations), "seconds": time.perf_counter() - started,
            "precision": precision, "steps": len(marks) - 1}


FAMILY_SHAPES = {  # the other families at a small shape of their own kind (random weights)
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(tie_word_embeddings=True, head_dim=64)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(tie_word_embeddings=False, sliding_window=128)),
}
SMALL = dict(hidden_size=256, intermediate_size=704, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=1024, vocab_size=6400)


def parity(tmp: Path, smollm: Path, tiny: bool) -> list[dict]:
    """Max |logit difference| of each imported family against its transformers original on the same held-out
    text (256 tokens): ours in fp32 and bf16, beside transformers' own bf16 (both against transformers' fp32)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from minimind.checkpoint import load_model
    from minimind.hub import import_folder
    from minimind.tokenizer import load_tokenizer

    sources = {"llama (SmolLM2-135M shape)": smollm}
    for family, (config_name, model_name, extra) in FAMILY_SHAPES.items():
        tokenizer = load_tokenizer(smollm)
        shape = {**(TINY if tiny else SMALL), **extra, "vocab_size": max(len(tokenizer), (TINY if tiny else SMALL)["vocab_size"])}
        shape.update(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                     eos_token_id=tokenizer.eos_token_id)
        config = getattr(transformers, config_name)(**shape)
        torch.manual_seed(0)
        model = getattr(transformers, model_name)(config)
        with torch.no_grad():  # biases and norms away from 0 and 1, so their placement counts
            for name, param in model.named_parameters():
                if name.endswith("bias"):
                    param.normal_(0.0, 0.1)
                elif "norm" in name:
                    param.uniform_(0.5, 1.5)
        model.save_pretrained(tmp / family)
        tokenizer.save_pretrained(tmp / family)
        sources[f"{family} (d={shape['hidden_size']}, {shape['num_hidden_layers']} layers)"] = tmp / family
    text = "".join(_texts()[-40:])                                   # the sample's last poems
    rows = []
    for label, source in sources.items():
        imported = tmp / f"imported-{source.name}"
        if not imported.exists():
            import_folder(source, imported)
        ids = load_tokenizer(source)(text, add_special_tokens=False, return_tensors="pt")["input_ids"][:, :256]
        with torch.no_grad():
            reference = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32).eval()(ids).logits
            theirs_bf16 = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16).eval()(ids).logits.float()
            ours = load_model(imported)(ids).logits
            ours_bf16 = load_model(imported, dtype=torch.bfloat16)(ids).logits.float()
        rows.append({"comparison": "logit parity", "trainer": label, "precision": "fp32 / bf16",
                     "ours fp32 max |Δ|": (ours - reference).abs().max().item(),
                     "ours bf16 max |Δ|": (ours_bf16 - reference).abs().max().item(),
                     "transformers bf16 max |Δ|": (theirs_bf16 - reference).abs().max().item()})
    return rows


def _device() -> str:
    from benchmarks._harness import bench_device

    return bench_device()


def child(kind: str, folder: str, corpus: str, precision: str, steps: int, seq: int) -> dict:
    """One trainer in this fresh process: its result and peak memory (RSS high-water mark; GPU: allocated)."""
    import warnings

    import torch

    from benchmarks._harness import peak_rss_since_reset_kb, reset_peak_rss

    warnings.filterwarnings("ignore")
    cuda = _device().startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before = reset_peak_rss()
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "trl":
            result = trl(Path(folder), Path(corpus), Path(tmp) / "out", precision, steps, seq)
        else:
            mode, batch = ("qlora", 1) if kind == "qlora" else ("lora", BATCH)
            result = ours(Path(folder), Path(corpus), Path(tmp) / "run", precision, steps, seq, mode, batch)
    result["peak_mb"] = (torch.cuda.max_memory_allocated() / 2**20 if cuda
                         else (peak_rss_since_reset_kb() - before) / 1024)
    result["process_peak_mb"] = peak_rss_since_reset_kb() / 1024
    return result


def _plan_columns(result: dict) -> dict:
    """The trainer's memory plan (minimind.training.memory, as its log states it, to 0.1 GB) beside the
    whole process's measured high-water mark: the plan refuses runs, so it should not fall far below."""
    if not result.get("planned_mb"):
        return {"process peak MB": result["process_peak_mb"]}
    return {"process peak MB": result["process_peak_mb"], "planned MB": result["planned_mb"],
            "plan / process peak": result["planned_mb"] / result["process_peak_mb"]}


def _default_precision() -> str:
    from minimind.training.precision import bf16_supported

    device = _device()
    return "bf16" if bf16_supported(device) else "fp32"


def run(quick: bool = False, tiny: bool = False) -> dict:
    from benchmarks._harness import run_child

    from minimind.hub import import_folder

    steps = 5 if tiny else (WARMUP + 4 if quick else STEPS)
    seq = 64 if tiny else SEQ
    rows, summary = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = _source(tmp / "smollm2-135m-shape", TINY if tiny else SMOLLM2_135M)
        import_folder(source, tmp / "imported")
        corpus = _corpus(tmp)
        default = _default_precision()
        settings = [("fp32", "fp32", "like for like: both fp32")]
        if default != "fp32":
            settings.append((default, "fp32", f"defaults: ours {default}, TRL fp32 on a CPU"))
        for mine, theirs, label in settings:
            a = run_child("benchmarks.byom", "--child", "ours", str(tmp / "imported"), str(corpus), mine, str(steps),
                          str(seq), timeout=3600)
            b = run_child("benchmarks.byom", "--child", "trl", str(source), str(corpus), theirs, str(steps), str(seq),
                          timeout=3600)
            rows.append({"comparison": label, "trainer": "MiniMind (import) LoRA", "precision": mine,
                         "tokens/s": a["tokens_per_s"], "peak MB": a["peak_mb"],
                         "tokens/s vs TRL": a["tokens_per_s"] / b["tokens_per_s"], "peak vs TRL": a["peak_mb"] / b["peak_mb"],
                         **_plan_columns(a)})
            rows.append({"comparison": label, "trainer": "TRL SFTTrainer + peft LoRA", "precision": theirs,
                         "tokens/s": b["tokens_per_s"], "peak MB": b["peak_mb"], "tokens/s vs TRL": 1.0,
                         "peak vs TRL": 1.0})
            summary[f"lora ({mine}) memory plan / process peak"] = _plan_columns(a).get("plan / process peak")
            if mine == theirs:
                summary["lora tokens/s vs trl (fp32)"] = a["tokens_per_s"] / b["tokens_per_s"]
                summary["lora peak memory vs trl (fp32)"] = a["peak_mb"] / b["peak_mb"]
            else:
                summary["lora tokens/s vs trl (defaults)"] = a["tokens_per_s"] / b["tokens_per_s"]
        rows += parity(tmp, source, tiny)
        summary["parity: worst fp32 max |Δlogit|"] = max(r["ours fp32 max |Δ|"] for r in rows if "ours fp32 max |Δ|" in r)
        if not tiny and not quick:
            big = _source(tmp / "llama-3.2-1b-shape", LLAMA32_1B, dtype="bfloat16")
            import_folder(big, tmp / "imported-1b")
            q = run_child("benchmarks.byom", "--child", "qlora", str(tmp / "imported-1b"), str(corpus), default,
                          "5", str(SEQ), timeout=3600)
            rows.append({"comparison": "QLoRA, Llama-3.2-1B shape (1.24B, random weights)", "trainer": "MiniMind QLoRA",
                         "precision": default, "tokens/s": q["tokens_per_s"], "peak MB": q["peak_mb"],
                         "s/step": SEQ / q["tokens_per_s"], **_plan_columns(q)})
            summary["qlora 1.2B s/step"] = SEQ / q["tokens_per_s"]
            summary["qlora 1.2B process peak MB"] = q["process_peak_mb"]
            summary["qlora 1.2B memory plan / process peak"] = _plan_columns(q).get("plan / process peak")
    summary["batch"] = f"{BATCH} x {seq} tokens, {steps} steps ({WARMUP} warm-up)"
    summary["device"] = _device()
    return {"rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--child", nargs=6, metavar=("KIND", "FOLDER", "CORPUS", "PRECISION", "STEPS", "SEQ"))
    args = parser.parse_args()
    if args.child:
        kind, folder, corpus, precision, steps, seq = args.child
        print(json.dumps(child(kind, folder, corpus, precision, int(steps), int(seq))))
        return
    from benchmarks._harness import print_result

    print_result(run(args.quick, args.tiny))


if __name__ == "__main__":
    main()
