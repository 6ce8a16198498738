"""GRPO as an objective of the one loop: real runs on tiny data (a toy reward is learned),
the rollout copy of a LoRA policy, exact resume, and the errors a user meets."""

import pytest
import torch
from builders import write_prompts
from training_helpers import (
    grpo_config,
    interrupted_run,
    make_config,
    save_base_model,
    train_lines,
    write_text_corpus,
)

from minimind.errors import ConfigError
from minimind.training import RunDir, train


def test_twenty_steps_of_grpo_raise_a_toy_reward(tmp_path, tokenizer, one_thread):
    """A random tiny model rarely writes 月; rewarded for it, it learns to within 20 steps."""
    base = save_base_model(tmp_path / "base", tokenizer)
    cfg = grpo_config(tmp_path, base, write_prompts(tmp_path), max_steps=20, eval_every=20, eval_batches=1,
                      grpo__beta=0.04)
    assert train(cfg)["state"] == "finished"
    rows = train_lines(tmp_path / "run")
    assert len(rows) == 20
    first = sum(r["reward"] for r in rows[:5]) / 5
    last = sum(r["reward"] for r in rows[-5:]) / 5
    assert last > first + 0.2, (first, last)
    assert rows[-1]["reward_contains"] == rows[-1]["reward"]  # one reward: the total is that reward
    assert rows[-1]["kl"] > 0 and rows[0]["rollout_tokens_per_s"] > 0 and 1 <= rows[0]["answer_tokens"] <= 12
    final = [r for r in RunDir(tmp_path / "run").read_metrics() if "val_reward" in r][-1]
    assert final["step"] == 20 and 0 <= final["val_reward"] <= 1
    samples = RunDir(tmp_path / "run").read_samples()
    assert samples and samples[0]["step"] == 20 and set(samples[0]["rewards"]) == {"contains"}
    log = RunDir(tmp_path / "run").log_file.read_text()
    assert "objective: GRPO, 8 answers per prompt, rewards contains x1" in log
    assert "20 steps of 4 prompts x 8 answers" in log


def test_lora_rollout_copy_holds_the_merged_policy(tmp_path, tokenizer):
    """The engine samples from a plain copy; after LoRA training it must score tokens exactly as
    the adapted model does (base + the adapter's delta), or the rollouts come from another policy."""
    from minimind.checkpoint import load_model
    from minimind.training.modes import add_lora
    from minimind.training.objectives.rollouts import RolloutPolicy

    base = save_base_model(tmp_path / "base", tokenizer)
    cfg = grpo_config(tmp_path, base, write_prompts(tmp_path), adapter="lora", lora__rank=4)
    model = add_lora(load_model(base), cfg)
    policy = RolloutPolicy(model, tokenizer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)  # a trained adapter
    ids = torch.tensor([[5, 17, 42, 9, 100]])
    before = policy.model(input_ids=ids).logits
    policy.sync(model)
    with torch.no_grad():
        expected = model.eval()(input_ids=ids).logits  # (no LoRA dropout)
    assert not torch.allclose(before, expected, atol=1e-3)
    assert torch.allclose(policy.model(input_ids=ids).logits, expected, atol=1e-4)


def test_lora_grpo_keeps_the_base_and_measures_kl_with_the_adapter_off(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    cfg = grpo_config(tmp_path, base, write_prompts(tmp_path), adapter="lora", lora__rank=4, optim__lr=1e-2,
                      max_steps=3, grpo__updates=1)
    assert train(cfg)["state"] == "finished"
    rows = train_lines(tmp_path / "run")
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # before its first update the adapter is zero: policy = reference
    assert rows[-1]["kl"] > 0
    assert (tmp_path / "run" / "checkpoints" / "step-3" / "adapter_config.json").is_file()


def test_qlora_grpo_samples_from_the_expanded_4_bit_base(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    # precision auto: bf16 where the CPU has bf16 instructions, fp32 where it has not
    # (forced bf16 QLoRA takes about 3 minutes there, against a second)
    cfg = grpo_config(tmp_path, base, write_prompts(tmp_path), adapter="qlora", lora__rank=4, max_steps=2,
                      precision="auto")
    assert train(cfg)["state"] == "finished"
    rows = train_lines(tmp_path / "run")
    assert len(rows) == 2 and rows[-1]["answer_tokens"] >= 1


def test_stopped_and_resumed_grpo_run_samples_and_learns_the_same(tmp_path, tokenizer, one_thread):
    """Rollouts are seeded by their place in the run, so a resumed run samples the same answers."""
    base = save_base_model(tmp_path / "base", tokenizer)
    prompts = write_prompts(tmp_path)
    build = lambda where: grpo_config(where, base, prompts, max_steps=6, grpo__beta=0.04)
    interrupted_run(build, tmp_path, stop_at=3)  # stopped at step 3, resumed to the end
    a, b = train_lines(tmp_path / "a" / "run"), train_lines(tmp_path / "b" / "run")
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, 7))
    for x, y in zip(a, b):
        assert x["reward"] == y["reward"] and x["answer_tokens"] == y["answer_tokens"], (x, y)
        assert abs(x["loss"] - y["loss"]) < 1e-5


def test_grpo_needs_prompts_and_rewards_and_prompts_need_grpo(tmp_path, tokenizer):
    base = save_base_model(tmp_path / "base", tokenizer)
    prompts = write_prompts(tmp_path)
    with pytest.raises(ConfigError, match=r"mode grpo learns from prompts .*; this corpus is text"):
        train(grpo_config(tmp_path, base, write_text_corpus(tmp_path)))
    with pytest.raises(ConfigError, match=r"this corpus holds prompts without answers: train on it with mode grpo \(not"):
        train(make_config(tmp_path, [prompts], mode="sft", model__init_from=str(base), data__seq_len=64))
    with pytest.raises(ConfigError, match="reward"):
        grpo_config(tmp_path, base, prompts, grpo__rewards=[]).validate()
    with pytest.raises(ConfigError, match="regex"):
        grpo_config(tmp_path, base, prompts, grpo__rewards=[{"name": "regex", "pattern": "(unclosed"}]).validate()
    with pytest.raises(ConfigError, match="distributed: ddp"):
        grpo_config(tmp_path, base, prompts, distributed="fsdp").validate()
    with pytest.raises(ConfigError, match="grpo.group_size must be 2..256"):
        grpo_config(tmp_path, base, prompts, grpo__group_size=1).validate()
    with pytest.raises(ConfigError, match="grpo.reward_aggregation must be one of sum_then_normalize, normalize_then_sum"):
        grpo_config(tmp_path, base, prompts, grpo__reward_aggregation="mean").validate()
