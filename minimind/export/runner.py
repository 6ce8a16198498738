"""Greedy decoding and teacher-forced logits over a "logits of ids" callable: one loop for the
source model and every reloaded export (verify.py), and for the ONNX runner that feeds its own KV
cache back (onnx_runner.py), so no format is decoded by a loop of its own.

A `LogitsOf` reads a whole sequence at once; a `Step` reads only what it has not seen yet (the
prompt, then one picked token per call) and keeps its cache between calls. `uncached` turns the
first into the second.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

LogitsOf = Callable[[list[int]], torch.Tensor]  # ids -> (len(ids), vocab) logits
Step = Callable[[list[int]], torch.Tensor]      # ids not read yet -> (vocab,) logits of the next token


def model_logits(model) -> LogitsOf:
    """A model's logits of one sequence (a PyTorch model, or a runner with its call shape:
    `model(input_ids=...).logits`), on the model's device, without autograd."""
    device = next(model.parameters()).device

    def logits_of(ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids], device=device)).logits[0]

    return logits_of


def uncached(logits_of: LogitsOf) -> Step:
    """A step that reads the whole sequence so far on every call (no cache to trust)."""
    seen: list[int] = []

    def step(new: list[int]) -> torch.Tensor:
        seen.extend(new)
        return logits_of(seen)[-1]

    return step


def greedy(step: Step, prompt: list[int], n: int) -> list[int]:
    """The `n` most likely tokens after `prompt`, one at a time: `step` reads the prompt, then
    each picked token (the last one is never fed)."""
    picks: list[int] = []
    new = list(prompt)
    for _ in range(n):
        picks.append(int(step(new).float().argmax()))
        new = [picks[-1]]
    return picks


def forced_logits(logits_of: LogitsOf, prompt: list[int], continuation: list[int]) -> torch.Tensor:
    """(len(continuation), vocab) float logits on the CPU predicting each continuation token from
    what precedes it, in one pass (teacher-forced)."""
    return logits_of(prompt + continuation[:-1])[len(prompt) - 1:].float().cpu()
