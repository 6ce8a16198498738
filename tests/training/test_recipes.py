"""The shipped models' recipes rebuild the same run on any machine: step counts, not
wall-clock budgets, on pinned threads, and the checkpoint keeps its configs and command."""


import pytest
import torch

from minimind.training import RunDir, TrainConfig, train
from scripts.finalize import keep_recipe
from helpers import ROOT
from training_helpers import make_config, write_text_corpus

RECIPES = sorted((ROOT / "scripts").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_a_recipe_is_a_step_count_on_pinned_threads(recipe):
    config = TrainConfig.load(recipe)
    assert config.max_steps > 0 and config.time_budget_s == 0 and config.threads in (1, 2)


def test_recipes_exist_for_both_shipped_models():
    assert {p.stem for p in RECIPES} == {"tang_pretrain", "tang_sft", "tang_grpo", "shakespeare_pretrain"}
    for script in ("train_tang.sh", "train_shakespeare.sh"):
        text = (ROOT / "scripts" / script).read_text()
        assert "time_budget_s" not in text and f'--command "bash scripts/{script}"' in text


def test_a_run_pins_its_threads_and_gives_them_back(tmp_path, tokenizer_dir):
    before = torch.get_num_threads()
    corpus = write_text_corpus(tmp_path)
    cfg = make_config(tmp_path, [corpus], model__tokenizer=str(tokenizer_dir), max_steps=2, threads=1)
    train(cfg)
    assert torch.get_num_threads() == before
    run = RunDir(tmp_path / "run")
    assert "(1 thread" in run.log_file.read_text() and TrainConfig.load(run.config_file).threads == 1
    keep_recipe(tmp_path / "model", "bash scripts/train_x.sh", pretrain=run.path, sft=None)
    kept = tmp_path / "model" / "training"
    assert TrainConfig.load(kept / "pretrain.yaml") == TrainConfig.load(run.config_file)
    assert (kept / "command.txt").read_text() == "bash scripts/train_x.sh\n" and not (kept / "sft.yaml").exists()
