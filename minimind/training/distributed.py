"""torchrun scale-out on PyTorch's own engines: DDP (gloo on CPU, NCCL on GPU) or FSDP2.

Without torchrun's environment this is a single process and every helper is a
no-op, so the loop has one code path.
"""

from __future__ import annotations

import gc
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init(device: str) -> tuple[DistInfo, str]:
    """Join the torchrun process group when launched by torchrun; returns (info, device)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(), device
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    if device.startswith("cuda"):
        torch.cuda.set_device(info.local_rank)
        device = f"cuda:{info.local_rank}"
    if not dist.is_initialized():
        # on GPUs NCCL reduces the CUDA tensors and gloo the CPU ones: the loop's per-step figures (means(),
        # GRPO's advantage moments) are CPU tensors, which NCCL alone refuses ("No backend type associated
        # with device type cpu")
        dist.init_process_group(backend="cpu:gloo,cuda:nccl" if device.startswith("cuda") else "gloo")
    return info, device


def launcher_pid() -> int:
    """The process that stands for the whole run (status.json's pid: what a watcher checks and
    signals). Under torchrun that is its agent, each rank's parent: it lives while any rank does,
    and passes a SIGTERM on to every rank, which then save a checkpoint together and stop.
    Otherwise this process."""
    return os.getppid() if "TORCHELASTIC_RUN_ID" in os.environ else os.getpid()


def local_capacity(device: str) -> int:
    """How many data-parallel processes this machine takes for `device`: one per GPU on CUDA,
    one on MPS, and on a CPU one per core (at least 2, so a laptop can try it with gloo)."""
    if device.startswith("cuda"):
        return max(1, torch.cuda.device_count())
    if device.startswith("mps"):
        return 1
    return max(2, os.cpu_count() or 1)


def wrap(model, info: DistInfo, strategy: str, device: str):
    """Wrap the model for data parallel training (DDP) or sharded training (FSDP2)."""
    if not info.enabled:
        return model
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        base = getattr(model, "base_model", model)
        inner = getattr(base, "model", base)
        for layer in getattr(getattr(inner, "model", inner), "layers", []):
            fully_shard(layer)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    ids = [torch.device(device).index] if device.startswith("cuda") else None
    return DistributedDataParallel(model, device_ids=ids)


def unwrap(model):
    return model.module if hasattr(model, "module") and not hasattr(model, "peft_config") else model


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def mean(value: float, info: DistInfo, device: str = "cpu") -> float:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.item() / info.world


def means(values: dict[str, float], info: DistInfo) -> dict[str, float]:
    """Each value averaged over the processes, in one all-reduce."""
    if not info.enabled or not values:
        return values
    t = torch.tensor(list(values.values()), dtype=torch.float64)
    dist.all_reduce(t)
    return {k: v / info.world for k, v in zip(values, t.tolist())}


def finish(info: DistInfo, clean: bool = True) -> None:
    """Leave the process group. After a clean run every rank first waits for the others:
    a rank that tears gloo down while its peer is still in a collective (or still writing
    the final status) can abort at exit ("terminate called without an active exception").
    What the run left in reference cycles (FSDP's state holds gloo work handles) is collected
    first, while the group is alive: freed at the interpreter's exit instead, such a handle can
    abort the process the same way."""
    if info.enabled and dist.is_initialized():
        gc.collect()
        if clean:
            dist.barrier()
        dist.destroy_process_group()
