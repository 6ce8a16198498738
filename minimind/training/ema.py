"""A moving average of the trained weights (`optim.ema`): what a run evaluates and saves.

After each optimizer step every trained weight's average moves `1 - decay` of the way to it, in
float32. Early in a run the decay is lower, (1 + step) / (10 + step) while that is below
`optim.ema`, so the average is not held back by the starting weights. From step `optim.ema_from`
on, evaluations and checkpoints see the average: the model folder a run leaves (what chat, export
and `predict` load) holds it, and the trained weights and the average go into the checkpoint's
trainer state, so a resumed run goes on from both exactly. A shorter run keeps its last step's
weights: at 60-620 steps the average scored worse than them, from about 1,800 steps on better.
A run whose held-out score swings from one evaluation to the next (a classifier on a few thousand
texts) keeps the middle of that swing instead of wherever its last step landed
(benchmarks/NOTES.md, 2026-12-07 · quality, classify: a moving average of the weights).
"""

from __future__ import annotations

import contextlib

import torch

from ..errors import TrainingError

TRAINED, AVERAGE = "trained/", "average/"  # tensor name prefixes in a checkpoint's trainer state


def decay_at(decay: float, step: int) -> float:
    """The decay of the update after optimizer step `step` (1, 2, ...): `decay`, or less early on."""
    return min(decay, (1.0 + step) / (10.0 + step))


class WeightAverage:
    """The moving average of `model`'s trainable parameters, by name; what evaluations and saves see
    from optimizer step `start` on (before it, the trained weights: a short run's average lags
    behind a model that still improves quickly)."""

    def __init__(self, model: torch.nn.Module, decay: float, start: int = 0):
        self.decay, self.start = decay, start
        self.params = {name: p for name, p in model.named_parameters() if p.requires_grad}
        self.average = {name: p.detach().float().clone() for name, p in self.params.items()}

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average towards the weights after optimizer step `step`."""
        weight = 1.0 - decay_at(self.decay, step)
        averages = list(self.average.values())
        torch._foreach_lerp_(averages, [p.detach().float() for p in self.params.values()], weight)

    def shown_at(self, step: int) -> bool:
        """Whether evaluations and saves after optimizer step `step` see the average."""
        return step >= self.start

    @contextlib.contextmanager
    def swapped_in(self, step: int):
        """Inside the block the model holds the average (from step `start` on); after it, its trained
        weights again. Each float32 weight trades places with its average one tensor at a time (no
        second copy of the model); a weight of another dtype keeps a copy of itself for the block."""
        if not self.shown_at(step):
            yield
            return
        with torch.no_grad():
            kept = {name: p.detach().clone() for name, p in self.params.items() if p.dtype != torch.float32}
            for name, p in self.params.items():
                if name in kept:
                    p.copy_(self.average[name])
                else:
                    self._trade(name, p)
        try:
            yield
        finally:
            with torch.no_grad():
                for name, p in self.params.items():
                    if name in kept:
                        p.copy_(kept[name])
                    else:
                        self._trade(name, p)

    def _trade(self, name: str, p: torch.Tensor) -> None:
        """A float32 weight and its average trade places."""
        held = p.detach().clone()
        p.copy_(self.average[name])
        self.average[name].copy_(held)

    @torch.no_grad()
    def keep_average(self, step: int) -> None:
        """Put the average into the model for good (the run has ended at `step`), from step `start` on."""
        if not self.shown_at(step):
            return
        for name, p in self.params.items():
            p.copy_(self.average[name])

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Copies of the trained weights and of the average, for a checkpoint's trainer state (copies: a
        swap would change the tensors themselves before they are written)."""
        tensors = {TRAINED + name: p.detach().to("cpu", copy=True) for name, p in self.params.items()}
        tensors.update({AVERAGE + name: a.to("cpu", copy=True) for name, a in self.average.items()})
        return tensors

    @torch.no_grad()
    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        """Resume: the trained weights back into the model, the average as it was saved."""
        missing = next((name for name in self.params if TRAINED + name not in tensors or AVERAGE + name not in tensors),
                       None)
        if missing is not None:
            raise TrainingError(f"this checkpoint's weight average (optim.ema) has no {missing}: it was saved by "
                                "another model; resume the run that saved it")
        for name, p in self.params.items():
            p.copy_(tensors[TRAINED + name])
            self.average[name].copy_(tensors[AVERAGE + name])
