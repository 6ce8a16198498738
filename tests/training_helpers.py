"""Building blocks for the trainer tests: tiny corpora, a tiny base model, a config."""

import json
from pathlib import Path

import torch

from minimind import MiniMindForCausalLM
from minimind.training import TrainConfig
from helpers import SAMPLE_TEXTS, tiny_config

TINY_OVERRIDES = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2}


def write_text_corpus(folder: Path, copies: int = 6) -> Path:
    path = folder / "corpus.jsonl"
    lines = [json.dumps({"title": f"t{i}", "text": t}, ensure_ascii=False)
             for i, t in enumerate(SAMPLE_TEXTS * copies)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_chat_corpus(folder: Path, n: int = 60) -> Path:
    path = folder / "chat.jsonl"
    rows = []
    for i in range(n):
        poem = SAMPLE_TEXTS[i % 3]
        rows.append({"messages": [{"role": "system", "content": "你是詩人"},
                                  {"role": "user", "content": f"寫一首詩 {i}"},
                                  {"role": "assistant", "content": poem}]})
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def save_base_model(folder: Path, tokenizer) -> Path:
    """A tiny random MiniMind model + tokenizer folder, the base for fine-tuning tests."""
    torch.manual_seed(0)
    model = MiniMindForCausalLM(tiny_config(vocab_size=len(tokenizer)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder, save_jinja_files=False)
    return folder


def make_config(tmp: Path, files, **overrides) -> TrainConfig:
    raw = {"mode": "pretrain", "model": {"preset": "nano", "overrides": dict(TINY_OVERRIDES)},
           "data": {"files": [str(f) for f in files], "seq_len": 32, "cache_dir": str(tmp / "cache"),
                    "val_fraction": 0.1},
           "max_steps": 6, "batch_size": 4, "log_every": 1, "eval_every": 1000, "save_every": 1000,
           "precision": "fp32", "device": "cpu", "run_dir": str(tmp / "run")}
    for key, value in overrides.items():
        node = raw
        parts = key.split("__")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return TrainConfig.from_dict(raw)


def losses(run_dir: Path) -> dict[int, float]:
    out = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "loss" in record:
            out[record["step"]] = record["loss"]
    return out
