"""Building blocks for the trainer tests: tiny corpora, a tiny base model, a config per objective, and
the recipes that compare two runs (stopped and resumed against whole; two processes against one)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from helpers import ROOT, SAMPLE_TEXTS, tiny_config

from minimind import MiniMindForCausalLM
from minimind.training import RunDir, TrainConfig, train
from minimind.training import loop as training_loop
from minimind.training import setup as training_setup
from minimind.training.objectives.language_model import LanguageModel

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


def dpo_config(tmp_path: Path, base, pairs, **overrides) -> TrainConfig:
    settings = {"mode": "dpo", "model__init_from": str(base), "data__seq_len": 96, "optim__lr": 1e-3,
                "optim__warmup_steps": 0, "max_steps": 6, "eval_every": 6, "dpo__sft_weight": 0.0}  # plain DPO
    return make_config(tmp_path, [pairs], **{**settings, **overrides})


def distill_config(tmp_path: Path, teacher, corpus, **overrides) -> TrainConfig:
    settings = {"mode": "distill", "distill__teacher": str(teacher), "max_steps": 8, "eval_every": 4,
                "optim__lr": 3e-3}
    return make_config(tmp_path, [corpus], **{**settings, **overrides})


def grpo_config(tmp_path: Path, base, prompts, **overrides) -> TrainConfig:
    settings = {"mode": "grpo", "model__init_from": str(base), "data__seq_len": 64, "optim__lr": 3e-3,
                "optim__warmup_steps": 0, "max_steps": 6, "eval_every": 1000, "batch_size": 4,
                "grpo__rewards": [{"name": "contains", "text": "月"}], "grpo__group_size": 8,
                "grpo__max_new_tokens": 12, "grpo__beta": 0.0}
    return make_config(tmp_path, [prompts], **{**settings, **overrides})


def train_lines(run_dir: Path) -> list[dict]:
    """The run's per-step training records (those with a loss)."""
    return [r for r in RunDir(run_dir).read_metrics() if "loss" in r]


def assert_same_losses(run_a: Path, run_b: Path, steps, tolerance: float = 1e-5):
    """Two runs logged a training loss at exactly `steps`, equal step by step within `tolerance`:
    their losses ({step: loss}, {step: loss})."""
    a, b = losses(run_a), losses(run_b)
    assert sorted(a) == sorted(b) == list(steps)
    for step in a:
        assert abs(a[step] - b[step]) < tolerance, (step, a[step], b[step])
    return a, b


def interrupted_run(build, tmp_path: Path, stop_at: int = 3, after_stop=None) -> tuple[dict, dict]:
    """The stop / resume recipe: `build(folder)` is a run's config (its run folder folder/run); the
    whole run trains in tmp_path/a, the same run in tmp_path/b is stopped by a SIGTERM (what `kill`
    or the page's Stop button sends) at step `stop_at` (then `after_stop(stopped status)` runs, if
    given) and resumed to its end. Checks that it stopped there and finished; its (stopped, resumed)
    statuses. Compare tmp_path/a/run with tmp_path/b/run (assert_same_losses)."""
    train(build(tmp_path / "a"))

    def stop(step, total, info):
        if step == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)

    split = build(tmp_path / "b")
    stopped = train(split, progress=stop)
    assert stopped["state"] == "stopped" and stopped["step"] == stop_at, stopped
    if after_stop is not None:
        after_stop(stopped)
    resumed = train(split, resume=True)
    assert resumed["state"] == "finished", resumed
    return stopped, resumed


def torchrun(config_path: Path, run_dir: Path, *extra):
    """`minimind train` of a saved config in 2 CPU processes (torchrun, gloo); fails on a non-zero exit."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "minimind", "train", "--config", str(config_path), "--run-dir", str(run_dir),
           "--no-progress", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def one_and_two_processes(build, tmp_path: Path, strategy: str = "ddp") -> tuple[Path, Path]:
    """`build(folder, **settings)`'s run trained in one process with a batch of 4 (tmp_path/one/run)
    and in two torchrun processes (`strategy`: ddp or fsdp) with a batch of 2 each (tmp_path/two/run):
    the two run folders, to compare."""
    train(build(tmp_path / "one", batch_size=4))
    multi = build(tmp_path / "two", batch_size=2, distributed=strategy)
    multi.save(tmp_path / "multi.yaml")
    torchrun(tmp_path / "multi.yaml", tmp_path / "two" / "run")
    return tmp_path / "one" / "run", tmp_path / "two" / "run"


class StepClock:
    """The trainer's clock (its `time` module), advanced only by the work it does: each
    micro-batch's loss costs `per_batch` seconds, so its time accounting is exact on any machine."""

    def __init__(self, per_batch: float):
        self.now, self.per_batch = 1000.0, per_batch

    def perf_counter(self) -> float:
        return self.now

    def __getattr__(self, name):  # time.time() and the rest: the real ones
        return getattr(time, name)


def fake_clock(monkeypatch) -> "StepClock":
    """The trainer's own clock: 1/8 s a micro-batch, 1/50 s a validation batch, 1/2 s a save."""
    clock = StepClock(per_batch=0.125)
    real_loss, real_eval, real_save = LanguageModel.loss, LanguageModel.evaluate, training_loop.save_checkpoint

    def timed_loss(self, model, batch):
        clock.now += clock.per_batch
        return real_loss(self, model, batch)

    def timed_eval(self, model, batches):
        def charged():
            for batch in batches:
                clock.now += 0.02
                yield batch
        return real_eval(self, model, charged())

    def timed_save(*args, **kwargs):
        clock.now += 0.5
        return real_save(*args, **kwargs)

    monkeypatch.setattr(training_loop, "time", clock)
    monkeypatch.setattr(training_setup, "time", clock)
    monkeypatch.setattr(LanguageModel, "loss", timed_loss)
    monkeypatch.setattr(LanguageModel, "evaluate", timed_eval)
    monkeypatch.setattr(training_loop, "save_checkpoint", timed_save)
    return clock
