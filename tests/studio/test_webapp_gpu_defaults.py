"""First launch on a GPU Space (issue 19): the Device line and the Train tab's defaults follow the
hardware the page finds — bf16 where the GPU has it, fp16 on one without (T4), larger batches on a
GPU, one process per GPU — with nothing set by hand. The GPU is simulated: these are the page's
decisions, taken from what PyTorch reports."""

import pytest
import torch

from minimind import hardware
from minimind.hardware import Gpu
from minimind.training import precision as training_precision
from minimind.training.config import ADAPTER_MODES
from webapp.tabs import train, train_form


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA device as PyTorch would report it: name, bf16 support and count are the test's to set."""
    found = {"name": "NVIDIA L4", "bf16": True, "count": 1}
    monkeypatch.setattr(train_form, "pick_device", lambda *_: "cuda")  # the form's defaults and process count
    monkeypatch.setattr(train_form, "bf16_supported", lambda *_: found["bf16"])
    monkeypatch.setattr(hardware, "_cuda_gpu", lambda: Gpu(found["name"], (8, 9) if found["bf16"] else (7, 5), 22.5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: found["name"])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: found["count"])
    return found


@pytest.mark.parametrize("name, bf16, precision", [("NVIDIA L4", True, "bf16"), ("NVIDIA A10G", True, "bf16"),
                                                    ("Tesla T4", False, "fp16")])
def test_the_device_line_names_the_gpu_and_the_precision_the_trainer_will_use(gpu, name, bf16, precision):
    gpu.update(name=name, bf16=bf16)
    said = {"fp16": "fp16 with loss scaling"}.get(precision, precision)
    assert train.device_line().endswith(f"{name}, 22 GB, {said}")
    assert training_precision.describe("cuda", precision) == f"{name}, {precision}"


def test_train_tab_defaults_grow_on_a_gpu(gpu, monkeypatch):
    on_gpu = {mode: train_form.defaults_for(mode, "lora" if mode in ADAPTER_MODES else "full")
              for mode in ("pretrain", "lora", "grpo")}
    monkeypatch.setattr(train_form, "pick_device", lambda *_: "cpu")
    on_cpu = {mode: train_form.defaults_for(mode, "lora" if mode in ADAPTER_MODES else "full")
              for mode in ("pretrain", "lora", "grpo")}
    assert [on_gpu[m][2] for m in on_gpu] == [32, 16, 8]  # batch: new model, fine-tune, GRPO prompts (x 8 answers)
    assert [on_cpu[m][2] for m in on_cpu] == [4, 8, 4]
    gpu.update(count=4)
    monkeypatch.setattr(train_form, "pick_device", lambda *_: "cuda")
    assert train_form.max_processes() == 4  # a 4-GPU Space: up to one process per GPU from the Processes field
