"""The memory plan of a fine-tune, counted from config.json before anything loads: its parameter and
LoRA counts are the model's own, and a run that cannot fit is refused with the numbers, or fitted by
switching gradient checkpointing on where that is enough."""

import pytest
import torch

from minimind.checkpoint import load_model
from minimind.errors import TrainingError
from minimind.training import memory
from minimind.training.modes import add_lora, count_parameters
from training_helpers import make_config, write_chat_corpus

from hub_models import imported_family


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    return imported_family("qwen3", tmp_path_factory.mktemp("memory"))


@pytest.mark.parametrize("mode", ["sft", "lora", "qlora"])
def test_parameter_and_adapter_counts_are_the_models_own(qwen3, tmp_path, mode):
    cfg = make_config(tmp_path, [write_chat_corpus(tmp_path)], mode=mode, model__init_from=str(qwen3))
    found = memory.plan(cfg, "cpu")
    model = load_model(qwen3)
    assert found.parameters == sum(p.numel() for p in model.parameters())
    if mode != "sft":
        trainable, _ = count_parameters(add_lora(model, cfg))
        assert found.trainable == trainable
    assert found.gradients == 4 * found.trainable and found.optimizer == 8 * found.trainable
    cfg.optim.ema = 0.999  # (a classifier's default): the weight average is one more float32 copy
    assert memory.plan(cfg, "cpu").optimizer == 12 * found.trainable
    assert (found.weights < 4 * found.parameters) == (mode == "qlora")  # 4-bit linear layers, else float32


def test_a_run_that_cannot_fit_is_refused_with_the_numbers(qwen3, tmp_path, monkeypatch):
    cfg = make_config(tmp_path, [write_chat_corpus(tmp_path)], mode="sft", model__init_from=str(qwen3),
                      batch_size=64, data__seq_len=512)
    need = memory.plan(cfg, "cpu")
    cfg.grad_checkpointing = True
    checkpointed = memory.plan(cfg, "cpu")
    cfg.grad_checkpointing = False
    assert checkpointed.total < need.total

    monkeypatch.setattr(memory, "available_bytes", lambda device: (need.total + checkpointed.total) // 2)
    said = []
    assert memory.check_fits(cfg, "cpu", said.append).total == checkpointed.total
    assert cfg.grad_checkpointing and "gradient checkpointing on" in said[0]

    cfg.grad_checkpointing = False
    monkeypatch.setattr(memory, "available_bytes", lambda device: checkpointed.total // 2)
    with pytest.raises(TrainingError, match=r"needs about .* GB .* of the .* GB free on this cpu.*LoRA or QLoRA"):
        memory.check_fits(cfg, "cpu")
    monkeypatch.setenv("MINIMIND_SKIP_MEMORY_CHECK", "1")
    assert not memory.check_fits(cfg, "cpu").fits


def test_the_machines_free_memory_is_read():
    free = memory.available_bytes("cpu")
    assert free is None or 0 < free < 1 << 50
    assert torch.cuda.is_available() or memory.available_bytes("cuda") is None


def test_lora_dropout_counts_each_adapted_layers_dropped_input_and_mask(qwen3, tmp_path):
    """Each adapted linear layer drops its own copy of its input (float32) and keeps the mask (a byte)."""
    settings = dict(mode="lora", model__init_from=str(qwen3), batch_size=2, data__seq_len=64,
                    lora__target_modules=["q_proj", "down_proj"])
    plain = memory.plan(make_config(tmp_path, ["x"], **settings), "cpu")
    dropped = memory.plan(make_config(tmp_path, ["x"], lora__dropout=0.05, **settings), "cpu")
    shape = memory.shape_of(memory.model_config(qwen3))
    widths = shape["linear"]["q_proj"][0] + shape["linear"]["down_proj"][0]   # hidden + MLP width
    assert dropped.activations - plain.activations == 2 * 64 * widths * 5 * shape["layers"]
