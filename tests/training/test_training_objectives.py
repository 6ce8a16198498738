"""DPO and distillation as objectives of the one loop: real runs on tiny data, exact resume,
the reference policy of a LoRA run, and the errors a user meets."""

import json
import math

import pytest
import torch
from builders import write_preference_corpus
from helpers import SAMPLE_TEXTS
from training_helpers import (
    assert_same_losses,
    distill_config,
    dpo_config,
    interrupted_run,
    make_config,
    save_base_model,
    write_text_corpus,
)

from minimind.checkpoint import load_model
from minimind.errors import ConfigError
from minimind.training import RunDir, train


def metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("adapter", ["", "lora"])
def test_dpo_starts_at_log_2_and_learns_the_preference(tmp_path, tokenizer, adapter):
    """Full weights or a LoRA adapter (QLoRA: the next test)."""
    base = save_base_model(tmp_path / "base", tokenizer)
    pairs = write_preference_corpus(tmp_path)
    cfg = dpo_config(tmp_path, base, pairs, adapter=adapter, lora__rank=4, lora__dropout=0.0)
    status = train(cfg)
    assert status["state"] == "finished"
    rows = metrics(tmp_path / "run")
    train_rows = [r for r in rows if "loss" in r]
    # the policy starts equal to the reference (a LoRA adapter starts at zero): every pair scores 0
    assert abs(train_rows[0]["loss"] - math.log(2)) < 0.02, train_rows[0]
    assert train_rows[-1]["loss"] < train_rows[0]["loss"] and train_rows[-1]["accuracy"] > 0.5
    final = [r for r in rows if "val_loss" in r][-1]
    assert {"val_accuracy", "val_reward_margin", "val_kl", "val_chosen_bpc"} <= set(final)
    assert final["val_accuracy"] == 1.0 and final["val_reward_margin"] > 0 and final["val_kl"] > 0
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert "eval step 6: loss" in log and "accuracy 1" in log
    assert "objective: DPO (sigmoid, beta 0.5, label smoothing 0)" in log and "RPO" not in log
    # the reference was never changed: with LoRA the base weights on disk are those of the base folder
    if adapter:
        assert (tmp_path / "run" / "checkpoints" / "step-6" / "adapter_config.json").is_file()


def test_qlora_dpo_runs_on_a_4_bit_base(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    pairs = write_preference_corpus(tmp_path)
    # precision auto: bf16 where the CPU has bf16 instructions, fp32 where it has not
    # (forced bf16 QLoRA takes about 3 minutes there, against a second)
    status = train(dpo_config(tmp_path, base, pairs, adapter="qlora", lora__rank=4, max_steps=2, eval_every=2,
                              precision="auto"))
    assert status["state"] == "finished" and status["step"] == 2
    first = [r for r in metrics(tmp_path / "run") if "loss" in r][0]
    assert abs(first["loss"] - math.log(2)) < 0.02  # the reference is the 4-bit base, adapter off
    assert (tmp_path / "run" / "checkpoints" / "step-2" / "adapter_model.safetensors").is_file()


def test_dpo_needs_a_preference_corpus_and_a_preference_corpus_needs_dpo(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    text = write_text_corpus(tmp_path)
    with pytest.raises(ConfigError, match="mode dpo learns from preference pairs .* this corpus is text"):
        train(dpo_config(tmp_path / "a", base, text))
    pairs = write_preference_corpus(tmp_path)
    sft = make_config(tmp_path / "b", [pairs], mode="sft", model__init_from=str(base), data__seq_len=96)
    with pytest.raises(ConfigError, match="this corpus holds preference pairs: train on it with mode dpo"):
        train(sft)


def test_adapter_belongs_to_dpo_distill_and_grpo_only(tmp_path, tokenizer):
    with pytest.raises(ConfigError, match="adapter is for modes dpo, distill and grpo"):
        make_config(tmp_path, ["x"], mode="sft", model__init_from="m", adapter="lora").validate()
    with pytest.raises(ConfigError, match="set distill.teacher"):
        make_config(tmp_path, ["x"], mode="distill").validate()


def test_distilled_student_learns_the_teacher(tmp_path, tokenizer):
    corpus = write_text_corpus(tmp_path)
    teacher = save_base_model(tmp_path / "teacher", tokenizer)
    # all weight on the teacher: the student's distribution moves towards the teacher's
    status = train(distill_config(tmp_path, teacher, corpus, distill__kl_weight=1.0, distill__ce_weight=0.0))
    assert status["state"] == "finished"
    rows = metrics(tmp_path / "run")
    train_rows = [r for r in rows if "kl" in r and "loss" in r]
    assert train_rows[-1]["kl"] < 0.5 * train_rows[0]["kl"]
    assert all(abs(r["loss"] - r["kl"]) < 1e-5 and r["ce"] > 0 for r in train_rows)
    final = [r for r in rows if "val_kl" in r][-1]
    assert final["val_bpc"] > 0 and final["val_kl"] >= 0
    student = load_model(tmp_path / "run" / "checkpoints" / "step-8")
    assert student.config.hidden_size == 64  # the configured preset, not the teacher
    assert (tmp_path / "run" / "checkpoints" / "step-8" / "tokenizer.json").is_file()


def test_distillation_refuses_a_student_with_another_tokenizer(tmp_path, tokenizer):
    from minimind.tokenizer import build_tokenizer, save_tokenizer

    corpus = write_text_corpus(tmp_path)
    teacher = save_base_model(tmp_path / "teacher", tokenizer)
    other = save_tokenizer(build_tokenizer(SAMPLE_TEXTS[:3], vocab_size=300, min_frequency=1), tmp_path / "tok")
    with pytest.raises(ConfigError, match="do not share a tokenizer"):
        train(distill_config(tmp_path, teacher, corpus, model__tokenizer=str(other)))


@pytest.mark.parametrize("mode", ["dpo", "distill"])
def test_stopped_and_resumed_objective_run_matches_an_uninterrupted_one(tmp_path, tokenizer, mode):
    base = save_base_model(tmp_path / "base", tokenizer)
    if mode == "dpo":
        data = write_preference_corpus(tmp_path)
        build = lambda where: dpo_config(where, base, data, max_steps=8, eval_every=1000)
    else:
        data = write_text_corpus(tmp_path)
        build = lambda where: distill_config(where, base, data, eval_every=1000)
    interrupted_run(build, tmp_path, stop_at=3)  # stopped at step 3, resumed to the end
    assert_same_losses(tmp_path / "a" / "run", tmp_path / "b" / "run", range(1, 9))


def test_dpo_reference_of_a_lora_run_is_the_base_with_the_adapter_off(tmp_path, tokenizer):
    from minimind.training.modes import add_lora
    from minimind.training.objectives.dpo import Dpo

    base = save_base_model(tmp_path / "base", tokenizer)
    cfg = make_config(tmp_path, ["x"], mode="dpo", model__init_from=str(base), adapter="lora", lora__rank=4)
    model = add_lora(load_model(base), cfg)
    objective = Dpo.for_model(model, cfg, None, None)
    assert objective.reference is None  # no second copy in memory
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.5)  # a trained adapter
    ids = torch.randint(5, 500, (2, 12))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    plain = load_model(base).eval()
    with torch.no_grad():
        torch.testing.assert_close(objective._reference_logits(batch), plain(input_ids=ids).logits)
        assert (model(input_ids=ids).logits - plain(input_ids=ids).logits).abs().max() > 1e-3


def test_dpo_loss_of_a_batch_adds_the_chosen_answers_next_token_loss(tmp_path, tokenizer):
    """With dpo.sft_weight (default 1) the objective is DPO + weight x mean NLL of the chosen answers'
    tokens; at the start (policy = reference) the DPO part is exactly log 2."""
    from minimind.data import DataConfig, prepare_corpus
    from minimind.training.batches import BatchStream
    from minimind.training.objectives.dpo import Dpo

    base = save_base_model(tmp_path / "base", tokenizer)
    pairs = write_preference_corpus(tmp_path)
    corpus = prepare_corpus([pairs], tokenizer, DataConfig(seq_len=96, cache_dir=str(tmp_path / "cache")))
    batch = next(BatchStream(corpus.train, 3, 1, 0, tokenizer.pad_token_id).micro_batches(0))
    model = load_model(base)
    cfg = make_config(tmp_path, [pairs], mode="dpo", model__init_from=str(base))
    assert cfg.dpo.sft_weight == 1.0
    objective = Dpo.for_model(model, cfg, None, None)
    with torch.no_grad():
        loss, _ = objective.loss(model, batch)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    chosen_logits, chosen_labels = logits[:3, :-1], batch["labels"][:3, 1:]
    keep = chosen_labels != -100
    nll = torch.nn.functional.cross_entropy(chosen_logits[keep], chosen_labels[keep])
    torch.testing.assert_close(loss, torch.tensor(math.log(2)) + nll, rtol=1e-5, atol=1e-5)


def test_teacher_cache_gives_what_the_teacher_gives_and_keeps_to_its_budget(tokenizer):
    from helpers import tiny_config

    from minimind import MiniMindForCausalLM
    from minimind.training.objectives.distill import TeacherCache

    torch.manual_seed(0)
    teacher = MiniMindForCausalLM(tiny_config(vocab_size=len(tokenizer))).eval()
    calls = []

    def forward(batch):
        calls.append(batch["input_ids"].shape[0])
        with torch.no_grad():
            return teacher(input_ids=batch["input_ids"], attention_mask=batch.get("attention_mask")).logits

    ids = torch.randint(5, 500, (3, 10))
    mask = torch.ones_like(ids)
    mask[2, 7:] = 0  # a shorter row, padded
    cache = TeacherCache(limit_bytes=10**8)
    first = cache.logits(forward, {"input_ids": ids, "attention_mask": mask})
    # the same rows again, in another order and padded wider: nothing is recomputed
    wider = torch.cat([ids[[2, 0]], torch.zeros(2, 4, dtype=torch.long)], dim=1)
    wider_mask = torch.cat([mask[[2, 0]], torch.zeros(2, 4, dtype=torch.long)], dim=1)
    again = cache.logits(forward, {"input_ids": wider, "attention_mask": wider_mask})
    assert calls == [3] and cache.hits == 2
    torch.testing.assert_close(again[0, :7], first[2, :7])
    torch.testing.assert_close(again[1, :10], first[0])
    # one new row among known ones: only it goes through the teacher
    new = torch.randint(5, 500, (1, 10))
    mixed = cache.logits(forward, {"input_ids": torch.cat([ids[:1], new]), "attention_mask": torch.ones(2, 10, dtype=torch.long)})
    assert calls == [3, 1]
    torch.testing.assert_close(mixed[1], forward({"input_ids": new})[0])
    # a budget of one row keeps one row
    small = TeacherCache(limit_bytes=first[0].numel() * first.element_size())
    small.logits(forward, {"input_ids": ids[:2]})
    assert len(small.rows) == 1
