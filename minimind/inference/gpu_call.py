"""Decoding inside GPU calls, for a ZeroGPU Space.

There a GPU exists only inside a `@spaces.GPU` call of the app process, run by a forked worker
(arguments pickled across, each yielded value streamed back). `GpuCallEngine` answers the
engine's interface (`submit`, `vocab_size`, `weights`) so that the chat tab, side by side and /v1
run through it unchanged: each request is one GPU call, in which the worker's copy of the model
(inherited from the app process by the fork, never pickled) moves to the GPU, the ordinary
`Engine` decodes there, and the tokens stream back one by one. The app process keeps its own CPU
engine for what it answers itself (vocabulary size, memory accounting).

Each call pays the model's move to the GPU (a few hundred milliseconds per GB); a request waits in
ZeroGPU's queue like any other call. Closing the stream ends the call at its next token.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from ..hardware import on_one_thread_when_forked
from .engine import Engine

DEFAULT_CALL_S = 30  # what one answer asks ZeroGPU for: shorter calls are queued sooner


def _decoder(model):
    """The function a GPU call runs: the model (this process's copy) on the GPU when there is one,
    one Engine, the request's tokens as they come."""
    def decode(prompt_ids: list[int], sampler, max_new_tokens: int, stop_ids: list[int]) -> Iterator[int]:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        worker_model = model.to(device)
        engine = Engine(worker_model, max_batch=1)
        yield from engine.submit(prompt_ids, sampler, max_new_tokens, stop_ids)

    return decode


class GpuCallEngine:
    """An engine whose every request decodes in one GPU call (`gpu(duration)` decorates the call)."""

    def __init__(self, model, local: Engine, gpu, duration: float = DEFAULT_CALL_S):
        self.local = local
        self.vocab_size = local.vocab_size
        self.weights = local.weights        # the app process's copy (memory accounting)
        self.max_batch = local.max_batch
        self._call = gpu(duration)(on_one_thread_when_forked(_decoder(model)))

    def memory_bytes(self) -> int:
        """What the app process holds for this model (its own engine's weights)."""
        return self.local.memory_bytes()

    def retire(self):
        """Let the app process's engine go (the registry evicts the model); calls in flight finish."""
        return self.local.retire()

    def submit(self, prompt_ids: Sequence[int], sampler, max_new_tokens: int,
               stop_ids: Sequence[int] = ()) -> Iterator[int]:
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        if max_new_tokens <= 0:
            return iter(())
        return self._call(list(prompt_ids), sampler, int(max_new_tokens), list(stop_ids))
