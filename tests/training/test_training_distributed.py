"""torchrun: 2 CPU processes (gloo) see the same global batch as one process with a 2x batch."""

import pytest
import torch
from builders import write_preference_corpus, write_prompts, write_songci
from safetensors.torch import load_file
from training_helpers import (
    assert_same_losses,
    distill_config,
    dpo_config,
    grpo_config,
    losses,
    make_config,
    one_and_two_processes,
    save_base_model,
    torchrun,
    train_lines,
    write_text_corpus,
)

from minimind.training import RunDir, TrainConfig, distributed


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_process_run_matches_one_process_with_the_same_global_batch(tmp_path, tokenizer_dir, strategy):
    corpus = write_text_corpus(tmp_path)
    # the same settings but the processes (`distributed` also picks the optimizer a new model gets: Muon
    # with ddp, AdamW with fsdp, which shards the matrices Muon needs whole)
    settings = {"model__tokenizer": str(tokenizer_dir), "max_steps": 4, "save_every": 2, "distributed": strategy}
    one, two = one_and_two_processes(lambda where, **kw: make_config(where, [corpus], **{**settings, **kw}),
                                     tmp_path, strategy)
    assert TrainConfig.load(one / "config.yaml").optim.name == {"ddp": "muon", "fsdp": "adamw"}[strategy]
    assert_same_losses(one, two, [1, 2, 3, 4], tolerance=1e-4)
    run = RunDir(two)
    assert run.read_status()["state"] == "finished" and run.read_status()["world"] == 2
    # only rank 0 wrote files: one log, one set of checkpoints with complete model folders
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["step-2", "step-4"]
    a = load_file(str(tmp_path / "one" / "run" / "checkpoints" / "step-4" / "model.safetensors"))
    b = load_file(str(run.checkpoints / "step-4" / "model.safetensors"))
    assert a.keys() == b.keys()
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-4


@pytest.mark.parametrize("mode", ["dpo", "distill"])
def test_two_process_objective_run_matches_one_process(tmp_path, tokenizer, mode):
    """DPO and distillation under DDP: each process scores its share of the batch against its own
    frozen reference (or teacher); the averaged gradients equal one process's on the whole batch."""
    base = save_base_model(tmp_path / "base", tokenizer)
    if mode == "dpo":
        data = write_preference_corpus(tmp_path)
        build = lambda where, **kw: dpo_config(where, base, data, max_steps=3, eval_every=3, **kw)
    else:
        data = write_text_corpus(tmp_path)
        build = lambda where, **kw: distill_config(where, base, data, max_steps=3, eval_every=3, **kw)
    assert_same_losses(*one_and_two_processes(build, tmp_path), [1, 2, 3])


def test_two_process_grpo_run_samples_and_learns_as_one_process(tmp_path, tokenizer):
    """GRPO under DDP: each process samples the answers of its share of the prompts, seeded by their
    place in the global batch, so two processes see the rollouts one process sees, and the
    per-answer averaged loss gives the same gradient. With two rewards normalised apart
    (normalize_then_sum) the advantages are standardised over the whole step's batch, every
    process's answers together: the one cross-process step of the advantages (the default's are
    per group, which each process holds whole)."""
    base = save_base_model(tmp_path / "base", tokenizer)
    prompts = write_prompts(tmp_path)
    rewards = [{"name": "contains", "text": "月"}, {"name": "no_repetition", "weight": 0.5}]
    build = lambda where, **kw: grpo_config(where, base, prompts, max_steps=3, grpo__beta=0.04,
                                            grpo__rewards=rewards, grpo__reward_aggregation="normalize_then_sum", **kw)
    one, two = map(train_lines, one_and_two_processes(build, tmp_path))
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2, 3]
    for a, b in zip(one, two):
        assert a["reward"] == pytest.approx(b["reward"]) and a["answer_tokens"] == pytest.approx(b["answer_tokens"])
        assert abs(a["loss"] - b["loss"]) < 1e-5, (a, b)


def test_lora_with_an_extended_vocabulary_under_fsdp_saves_resumes_and_matches_one_process(tmp_path, tokenizer):
    """FSDP shards the adapter's weights: the checkpoint is written from the gathered state (it
    used to fail on the shards), and a resumed run continues the same curve."""
    import shutil

    from minimind.checkpoint import load_model

    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = write_songci(tmp_path, 40)
    settings = dict(mode="lora", model__init_from=str(base), model__extend_vocab=50, data__seq_len=48, max_steps=4,
                    save_every=2, lora__rank=4, lora__dropout=0.0, optim__lr=1e-2)
    one_dir, two_dir = one_and_two_processes(lambda where, **kw: make_config(where, [corpus], **settings, **kw),
                                             tmp_path, "fsdp")
    run = RunDir(two_dir)
    _, two = assert_same_losses(one_dir, run.path, [1, 2, 3, 4], tolerance=1e-4)
    merged = load_model(run.checkpoints / "step-4", merge=True)
    assert merged.config.vocab_size == len(tokenizer) + 50

    # interrupted after step 2: resumed from that checkpoint, steps 3 and 4 come out the same
    shutil.rmtree(run.checkpoints / "step-4")
    run.truncate_metrics_after(2)
    run.write_status(state="stopped")
    torchrun(tmp_path / "multi.yaml", run.path, "--resume")
    resumed = losses(run.path)
    for step in (3, 4):
        assert abs(resumed[step] - two[step]) < 1e-5, (step, resumed[step], two[step])


def test_a_gpu_run_reduces_cpu_figures_with_gloo_beside_nccl(monkeypatch):
    """Under torchrun on GPUs the loop all-reduces CPU tensors every step (its means, GRPO's advantage
    moments), which NCCL alone refuses: the process group pairs gloo for the CPU with NCCL for CUDA.
    (A CPU build of PyTorch has no NCCL, so the call itself is caught here; no GPU has run it.)"""
    devices, backends = [], []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "set_device", devices.append)
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend: backends.append(backend))
    info, device = distributed.init("cuda")
    assert (info.rank, info.world, device) == (1, 2, "cuda:1") and devices == [1]
    assert distributed.init("cpu")[1] == "cpu"
    assert backends == ["cpu:gloo,cuda:nccl", "gloo"]
