"""The hardware model: CPU, a CUDA GPU or ZeroGPU, found from what PyTorch and the Space's environment
say, and the defaults that follow it (the GPU is the test's to describe)."""

import pytest
import torch

from minimind import hardware
from minimind.hardware import Gpu, detect, on_space, on_zero_gpu
from minimind.training.config import TrainConfig
from minimind.training.precision import bf16_supported, pick_device

ZERO = {"SPACES_ZERO_GPU": "true", "SPACE_ID": "someone/studio", "SYSTEM": "spaces"}


def no_cuda():
    raise AssertionError("CUDA was asked about on ZeroGPU, outside a GPU call")


@pytest.mark.parametrize("value, zero", [("true", True), ("True", True), ("1", True), ("t", True), ("false", False),
                                         ("", False), ("yes", False)])
def test_zero_gpu_is_read_as_the_spaces_package_reads_it(value, zero):
    assert on_zero_gpu({"SPACES_ZERO_GPU": value}) is zero


def test_a_space_is_known_by_its_id_and_system():
    assert on_space(ZERO) and not on_space({"SPACE_ID": "x"}) and not on_space({})


def test_zero_gpu_never_touches_cuda_and_defaults_to_bf16():
    found = detect(ZERO, gpu=no_cuda)
    assert (found.kind, found.device, found.precision, found.space) == ("zerogpu", "cuda", "bf16", True)
    assert found.describe() == "ZeroGPU (a GPU slice in each GPU call), bf16"


@pytest.mark.parametrize("gpu, precision, said", [
    (Gpu("NVIDIA A100-SXM4-80GB", (8, 0), 79.2), "bf16", "NVIDIA A100-SXM4-80GB, 79 GB, bf16"),
    (Gpu("NVIDIA L4", (8, 9), 22.5), "bf16", "NVIDIA L4, 22 GB, bf16"),
    (Gpu("Tesla T4", (7, 5), 14.6), "fp16", "Tesla T4, 15 GB, fp16 with loss scaling"),  # bf16 would be emulated
])
def test_a_cuda_gpu_gets_bf16_from_ampere_on_and_fp16_before(gpu, precision, said):
    found = detect({}, gpu=lambda: gpu)
    assert (found.kind, found.device, found.precision, found.describe()) == ("cuda", "cuda", precision, said)


@pytest.mark.parametrize("flags, precision", [({"avx512_bf16"}, "bf16"), ({"amx_bf16", "avx512f"}, "bf16"),
                                              ({"avx2"}, "fp32")])
def test_a_cpu_gets_bf16_only_with_bf16_instructions(monkeypatch, flags, precision):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: set(flags))
    found = detect({}, gpu=lambda: None, threads=2)
    assert (found.kind, found.device, found.precision) == ("cpu", "cpu", precision)
    assert found.name == f"CPU (2 threads{', bf16' if precision == 'bf16' else ''})"


def test_on_zero_gpu_the_trainer_defaults_to_cuda_in_bf16_without_asking_cuda(monkeypatch):
    for key, value in ZERO.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(torch.cuda, "is_available", no_cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", no_cuda)
    assert pick_device() == "cuda" and bf16_supported("cuda")
    resolved = TrainConfig.from_dict({"mode": "pretrain", "data": {"files": ["x.txt"]}}).resolved("cuda", True)
    assert resolved.precision == "bf16"


def test_a_t4_resolves_to_fp16_and_a_grad_scaler(monkeypatch):
    from minimind.training.precision import Precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    assert not bf16_supported("cuda")  # a T4 emulates bf16: that is no default
    resolved = TrainConfig.from_dict({"mode": "pretrain", "data": {"files": ["x.txt"]}}).resolved(
        "cuda", bf16_supported("cuda"))
    assert resolved.precision == "fp16" and Precision("fp16", "cuda").grad_scaler().is_enabled()
