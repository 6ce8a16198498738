"""torchrun: 2 CPU processes (gloo) see the same global batch as one process with a 2x batch."""

import os
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from minimind.training import RunDir, TrainConfig, train
from helpers import ROOT
from training_helpers import losses, make_config, write_text_corpus


def _torchrun(config_path, run_dir, *extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "minimind", "train", "--config", str(config_path), "--run-dir", str(run_dir),
           "--no-progress", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_process_run_matches_one_process_with_the_same_global_batch(tmp_path, tokenizer_dir, strategy):
    corpus = write_text_corpus(tmp_path)
    # the same settings but the processes (`distributed` also picks the optimizer a new model gets: Muon
    # with ddp, AdamW with fsdp, which shards the matrices Muon needs whole)
    single = make_config(tmp_path / "one", [corpus], model__tokenizer=str(tokenizer_dir), max_steps=4,
                         batch_size=4, save_every=2, distributed=strategy)
    train(single)
    assert TrainConfig.load(tmp_path / "one" / "run" / "config.yaml").optim.name == \
        {"ddp": "muon", "fsdp": "adamw"}[strategy]

    multi = make_config(tmp_path / "two", [corpus], model__tokenizer=str(tokenizer_dir), max_steps=4,
                        batch_size=2, save_every=2, distributed=strategy)
    multi.save(tmp_path / "multi.yaml")
    _torchrun(tmp_path / "multi.yaml", tmp_path / "two" / "run")

    one, two = losses(tmp_path / "one" / "run"), losses(tmp_path / "two" / "run")
    assert sorted(one) == sorted(two) == [1, 2, 3, 4]
    for step in one:
        assert abs(one[step] - two[step]) < 1e-4, (step, one[step], two[step])
    run = RunDir(tmp_path / "two" / "run")
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
    from test_training_objectives import distill_config, dpo_config, write_preference_corpus
    from training_helpers import save_base_model

    base = save_base_model(tmp_path / "base", tokenizer)
    if mode == "dpo":
        data = write_preference_corpus(tmp_path)
        build = lambda where, **kw: dpo_config(where, base, data, max_steps=3, eval_every=3, **kw)  # noqa: E731
    else:
        data = write_text_corpus(tmp_path)
        build = lambda where, **kw: distill_config(where, base, data, max_steps=3, eval_every=3, **kw)  # noqa: E731
    train(build(tmp_path / "one", batch_size=4))
    multi = build(tmp_path / "two", batch_size=2, distributed="ddp")
    multi.save(tmp_path / "multi.yaml")
    _torchrun(tmp_path / "multi.yaml", tmp_path / "two" / "run")
    one, two = losses(tmp_path / "one" / "run"), losses(tmp_path / "two" / "run")
    assert sorted(one) == sorted(two) == [1, 2, 3]
    for step in one:
        assert abs(one[step] - two[step]) < 1e-5, (step, one[step], two[step])


def test_two_process_grpo_run_samples_and_learns_as_one_process(tmp_path, tokenizer):
    """GRPO under DDP: each process samples the answers of its share of the prompts, seeded by their
    place in the global batch, so two processes see the rollouts one process sees, and the
    per-answer averaged loss gives the same gradient."""
    from test_training_grpo import grpo_config, train_lines, write_prompts
    from training_helpers import save_base_model

    base = save_base_model(tmp_path / "base", tokenizer)
    prompts = write_prompts(tmp_path)
    build = lambda where, **kw: grpo_config(where, base, prompts, max_steps=3, grpo__beta=0.04, **kw)  # noqa: E731
    train(build(tmp_path / "one", batch_size=4))
    multi = build(tmp_path / "two", batch_size=2, distributed="ddp")
    multi.save(tmp_path / "multi.yaml")
    _torchrun(tmp_path / "multi.yaml", tmp_path / "two" / "run")
    one, two = train_lines(tmp_path / "one" / "run"), train_lines(tmp_path / "two" / "run")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2, 3]
    for a, b in zip(one, two):
        assert a["reward"] == pytest.approx(b["reward"]) and a["answer_tokens"] == pytest.approx(b["answer_tokens"])
        assert abs(a["loss"] - b["loss"]) < 1e-5, (a, b)


def test_lora_with_an_extended_vocabulary_under_fsdp_saves_resumes_and_matches_one_process(tmp_path, tokenizer):
    """FSDP shards the adapter's weights: the checkpoint is written from the gathered state (it
    used to fail on the shards), and a resumed run continues the same curve."""
    import shutil

    from minimind.checkpoint import load_model
    from test_vocabulary import _songci
    from training_helpers import save_base_model

    base = save_base_model(tmp_path / "base", tokenizer)
    corpus = _songci(tmp_path, 40)
    settings = dict(mode="lora", model__init_from=str(base), model__extend_vocab=50, data__seq_len=48, max_steps=4,
                    save_every=2, lora__rank=4, lora__dropout=0.0, optim__lr=1e-2)
    train(make_config(tmp_path / "one", [corpus], batch_size=4, **settings))
    multi = make_config(tmp_path / "two", [corpus], batch_size=2, distributed="fsdp", **settings)
    multi.save(tmp_path / "multi.yaml")
    run = RunDir(tmp_path / "two" / "run")
    _torchrun(tmp_path / "multi.yaml", run.path)
    one, two = losses(tmp_path / "one" / "run"), losses(run.path)
    assert sorted(one) == sorted(two) == [1, 2, 3, 4]
    for step in one:
        assert abs(one[step] - two[step]) < 1e-4, (step, one[step], two[step])
    merged = load_model(run.checkpoints / "step-4", merge=True)
    assert merged.config.vocab_size == len(tokenizer) + 50

    # interrupted after step 2: resumed from that checkpoint, steps 3 and 4 come out the same
    shutil.rmtree(run.checkpoints / "step-4")
    run.truncate_metrics_after(2)
    run.write_status(state="stopped")
    _torchrun(tmp_path / "multi.yaml", run.path, "--resume")
    resumed = losses(run.path)
    for step in (3, 4):
        assert abs(resumed[step] - two[step]) < 1e-5, (step, resumed[step], two[step])
